//! The probe configuration the pub/sub tests start from: short cases (60 messages at 500 Hz),
//! 64 B and 4 KiB, blocking waits, default QoS, no real-time. Include it with
//! `#[path = "support/pubsub_config.rs"] mod pubsub_config;`.

use rtlab_pubsub::engine::{Mode, PubsubConfig, RtSpec, TransportKind, TransportSpec};
use rtlab_pubsub::{Qos, WaitStyle};

pub fn config(
    kind: TransportKind,
    mode: Mode,
    subscribers: Vec<usize>,
    in_process: bool,
) -> PubsubConfig {
    PubsubConfig {
        transport: TransportSpec::new(kind),
        far_transport: None,
        mode,
        wait: WaitStyle::Blocking,
        echo: Default::default(),
        qos: Qos::default(),
        payloads: vec![64, 4096],
        periods_ns: vec![2_000_000],
        subscribers,
        case_duration_ns: 200_000_000,
        case_messages: Some(60),
        loss_timeout_ns: 200_000_000,
        deadline_ns: None,
        in_process,
        rt: RtSpec::normal(),
        window_ns: 1_000_000_000,
        thread_priorities: Vec::new(),
        middleware_priority: None,
        spike: None,
        by_hand: None,
        stamp_clock: Default::default(),
        schedule: Default::default(),
    }
}
