//! The configuration checked before anything runs: against the transport (sizes, QoS),
//! against a far placement, and a far side's transport (another DDS implementation).
//!
//! Every refusal is one line ([`ProbeError::Invalid`]).

use super::config::{Mode, PubsubConfig, Schedule};
use super::outcome::ProbeError;
use super::placement::FarPlacement;
use super::spec::{dds_names, TransportKind, TransportSpec};
use crate::transport::{check_len, EchoStyle, QosMapping, Transport};

/// Check the configuration against the transport without starting anything.
pub fn validate(cfg: &PubsubConfig, transport: &dyn Transport) -> Result<QosMapping, ProbeError> {
    if cfg.payloads.is_empty() || cfg.periods_ns.is_empty() || cfg.subscribers.is_empty() {
        return Err(ProbeError::Invalid(
            "--payload, --rate and --subscribers need at least one value each".into(),
        ));
    }
    if let Some(p) = cfg.periods_ns.iter().find(|p| **p <= 0) {
        return Err(ProbeError::Invalid(format!("--rate: period {p} ns must be above zero")));
    }
    if cfg.subscribers.contains(&0) {
        return Err(ProbeError::Invalid(
            "--subscribers 0: at least one subscriber is needed".into(),
        ));
    }
    if cfg.loss_timeout_ns <= 0 {
        return Err(ProbeError::Invalid("--loss-timeout: must be above zero".into()));
    }
    if cfg.schedule == Schedule::ClosedLoop {
        if cfg.mode != Mode::Roundtrip {
            return Err(ProbeError::Invalid(
                "--schedule closed-loop: a round trip schedule (give --mode roundtrip)".into(),
            ));
        }
        if cfg.periods_ns.len() > 1 {
            return Err(ProbeError::Invalid(
                "--rate: no rate sweep in closed loop (the next ping goes when the pong is in)"
                    .into(),
            ));
        }
    }
    if cfg.mode == Mode::Roundtrip && cfg.echo == EchoStyle::Callback {
        callback_echo_rule(cfg.far_kind())
            .map_err(|m| ProbeError::Invalid(format!("--echo {m}")))?;
    }
    for &len in &cfg.payloads {
        check_len(transport.name(), transport.max_message(), len)?;
    }
    Ok(transport.map_qos(&cfg.qos)?)
}

/// A callback echo on `pong` (the transport the pong runs): refused, in words after
/// `--echo`, where the library offers no callback to answer from.
pub fn callback_echo_rule(pong: TransportKind) -> Result<(), String> {
    match pong.callback_echo() {
        Some(_) => Ok(()),
        None => Err(format!(
            "callback: {} offers no callback rtlab can answer from (zenoh, cyclonedds and fastdds do; use --echo thread)",
            pong.name()
        )),
    }
}

/// The far side's transport kind, checked: another one only between DDS implementations,
/// only with role processes (not threads, not by hand). On one host the far transport is
/// opened here once, so that a QoS or a message size it cannot carry is one line before
/// anything runs (a far host's agent checks its own).
///
/// `fastdds` and a `ros2` whose RMW brings another Fast DDS never meet in one process
/// ([`crate::dl::claim_fast_dds`]): for that pair the far side's limits are checked without
/// opening it (`fastdds` honours every QoS; `ros2`'s installation was found by the caller).
/// Returns the far kind, and what a `ros2` far side on this host runs on.
pub(super) fn check_far_transport(
    cfg: &PubsubConfig,
    spec: &TransportSpec,
    far_host: bool,
) -> Result<(TransportKind, Option<crate::transport::ros2::Ros2Facts>), ProbeError> {
    let Some(kind) = cfg.far_transport.filter(|k| *k != spec.kind) else {
        return Ok((spec.kind, None));
    };
    far_transport_rule(spec.kind, kind, cfg.in_process, cfg.by_hand.is_some())
        .map_err(|m| ProbeError::Invalid(format!("--far-transport {m}")))?;
    if far_host {
        return Ok((kind, None));
    }
    let mut s = spec.clone();
    s.kind = kind;
    let pair = [spec.kind, kind];
    if pair.contains(&TransportKind::FastDds) && pair.contains(&TransportKind::Ros2) {
        let (name, max) = match kind {
            TransportKind::Ros2 => ("ros2", crate::transport::ros2::MAX_MESSAGE),
            _ => ("fastdds", crate::transport::fastdds::MAX_MESSAGE),
        };
        for &len in &cfg.payloads {
            check_len(name, max, len)?;
        }
        let inst = crate::ros2_installation(&s).map_err(ProbeError::Invalid)?;
        // Found here: Fast DDS 3 (the package registry's 3.2.2 under rmw_fastrtps_cpp) on one
        // host with ROS 2's LOCALHOST range announces the host's own address (its first
        // interface's, not 127.0.0.1), which rtlab's fastdds, whitelisted to 127.0.0.1, does
        // not send to: the two never meet on loopback (across a link they do)
        let dds3 = inst.middleware.as_ref().is_some_and(|m| {
            m.name == "Fast DDS"
                && m.version.as_deref().and_then(|v| v.split('.').next()?.parse::<u32>().ok())
                    >= Some(3)
        });
        if dds3 && s.interface.is_none() {
            return Err(ProbeError::Invalid(format!(
                "--far-transport {}: fastdds (Fast DDS 2.9, loopback only) and ros2 ({}) do not meet on one host: Fast DDS 3 announces this host's own address rather than 127.0.0.1, which the loopback-only fastdds does not reach (docs/ros2.md); run them across a link (--netns NS --far netns:NS2), or pair ros2 with cyclonedds",
                kind.name(),
                inst.describe()
            )));
        }
        let facts = (kind == TransportKind::Ros2).then(|| {
            let net = crate::transport::ros2::Ros2Network::of(s.interface.as_deref(), &s.peers);
            crate::transport::ros2::Ros2Facts::of(&inst, &net)
        });
        return Ok((kind, facts));
    }
    let t = crate::open(&s)?;
    for &len in &cfg.payloads {
        check_len(t.name(), t.max_message(), len)?;
    }
    t.map_qos(&cfg.qos)?;
    Ok((kind, t.ros2_facts()))
}

/// When the far side may use transport `far` while this side uses `near` (another one):
/// between DDS implementations, with role processes (`in_process`, `by_hand`: not). The
/// error starts with `far`'s name.
pub fn far_transport_rule(
    near: TransportKind,
    far: TransportKind,
    in_process: bool,
    by_hand: bool,
) -> Result<(), String> {
    if !(far.is_dds() && near.is_dds()) {
        return Err(format!(
            "{}: with transport {}: only DDS implementations speak to each other ({})",
            far.name(),
            near.name(),
            dds_names()
        ));
    }
    if in_process || by_hand {
        return Err(format!(
            "{}: the far side is a process rtlab starts (not with {})",
            far.name(),
            if in_process { "in-process subscribers" } else { "a role by hand" }
        ));
    }
    Ok(())
}

/// Roles on a far host need a transport that leaves this host, role processes (not
/// threads), and both addresses of the link.
pub(super) fn check_far_placement(cfg: &PubsubConfig, f: &FarPlacement) -> Result<(), ProbeError> {
    match cfg.transport.kind {
        TransportKind::Intra | TransportKind::Shm => {
            let what = if cfg.transport.kind == TransportKind::Shm {
                "shared memory"
            } else {
                "a process's own memory"
            };
            return Err(ProbeError::Invalid(format!(
                "--transport {}: {what} reaches one host only; a far side needs dds, ros1, zenoh or udp",
                cfg.transport.kind.name()
            )));
        }
        _ if cfg.in_process => {
            return Err(ProbeError::Invalid(
                "--in-process: the subscribers are on the far side, not threads of this process"
                    .into(),
            ))
        }
        _ => {}
    }
    if f.near.is_empty() || f.far.is_empty() {
        return Err(ProbeError::Invalid("far side: no address for the link".into()));
    }
    Ok(())
}
