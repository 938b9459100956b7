//! A pong or a subscriber run by hand (`rtlab pubsub --role R --topic T` on each machine):
//! one role in this process, the peer of a ping or a publisher elsewhere
//! ([`run_peer_by_hand`]), and its stream. A ping or a publisher by hand is an ordinary case
//! ([`super::case`]: the publisher waits there for the subscribers the middleware matched).

use super::case::window_capacity;
use super::config::{oneway_definition, ByHand, HandRole, Mode, PubsubConfig, StampClock};
use super::outcome::{CaseResult, ProbeError, PubsubOutcome};
use super::placement::run_role;
use super::role::{ReceiverReport, RoleConfig, RoleEvent, RoleKind};
use super::threads::RtUse;
use crate::transport::{QosMapping, Transport};
use rtlab_core::schema::Stream;
use rtlab_sys::clock::monotonic_ns;
use rtlab_sys::sched::spawn_rt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

/// A pong or a subscriber by hand: one role in this process, on the case's first payload,
/// until Ctrl-C or the case's duration.
pub(super) fn run_peer_by_hand(
    cfg: &PubsubConfig,
    h: &ByHand,
    transport: Arc<dyn Transport>,
    qos_mapping: QosMapping,
    stop: &Arc<AtomicBool>,
    started: i64,
) -> Result<PubsubOutcome, ProbeError> {
    let transport_notes = transport.notes();
    let transport_labels = transport.labels();
    let ros2 = transport.ros2_facts();
    let len = cfg.payloads.iter().copied().max().unwrap_or(64);
    let period = cfg.periods_ns.first().copied().unwrap_or(10_000_000);
    let rc = peer_role_config(cfg, h, len, period);
    let report = run_peer(cfg, h, rc, transport, stop)?;
    let mut case = CaseResult::failed(len, period, 1, String::new());
    case.error = None;
    if let Some(r) = report {
        case.published = r.received;
        case.streams.push(peer_stream(cfg, h, r, period, &transport_labels));
    }
    Ok(PubsubOutcome {
        interrupted: stop.load(Ordering::Relaxed),
        cases: vec![case],
        qos_mapping,
        notes: vec![match h.role {
            HandRole::Pong => format!("pong by hand: echoed {0}_ping on {0}_pong until stopped", h.topic),
            _ => format!("sub by hand on {}: one-way latency = receive stamp here - the publisher's send stamp (its clock)", h.topic),
        }].into_iter().chain(transport_notes).collect(),
        duration_ns: monotonic_ns() - started,
        ros2,
        cost_windows: Vec::new(),
    })
}

/// The role of a pong (an echo of `T_ping` on `T_pong`) or a subscriber (of `T`) by hand,
/// on messages up to `len`, for the case's time of `period`.
fn peer_role_config(cfg: &PubsubConfig, h: &ByHand, len: usize, period: i64) -> RoleConfig {
    let duration_ns = cfg.messages_of(period) as i64 * period + cfg.loss_timeout_ns;
    let (kind, topic_in, topic_out) = match h.role {
        HandRole::Pong => {
            (RoleKind::Echo, format!("{}_ping", h.topic), Some(format!("{}_pong", h.topic)))
        }
        _ => (RoleKind::Subscriber, h.topic.clone(), None),
    };
    RoleConfig {
        transport: cfg.transport.clone(),
        kind,
        index: 0,
        topic_in,
        topic_out,
        qos: cfg.qos,
        wait: cfg.wait,
        echo: cfg.echo,
        max_len: len,
        deadline_ns: cfg.deadline_ns.unwrap_or(period),
        loss_timeout_ns: cfg.loss_timeout_ns,
        window_ns: cfg.window_ns,
        window_capacity: window_capacity(duration_ns, cfg.window_ns),
        run_timeout_ns: duration_ns,
        rt: cfg.rt.clone(),
        mlockall: false,
        thread_priorities: cfg.thread_priorities.clone(),
        middleware_priority: cfg.middleware_priority,
        stamp_clock: if kind == RoleKind::Subscriber {
            cfg.stamp_clock
        } else {
            StampClock::Monotonic
        },
        cost_window: format!("{}.{}", cfg.transport.kind.name(), h.role.name()),
        spike: cfg.spike.clone(),
    }
}

/// Run role `rc` on an app thread of this process until it ends; its report (a subscriber's).
fn run_peer(
    cfg: &PubsubConfig,
    h: &ByHand,
    rc: RoleConfig,
    transport: Arc<dyn Transport>,
    stop: &Arc<AtomicBool>,
) -> Result<Option<ReceiverReport>, ProbeError> {
    let (tx, rx) = mpsc::channel::<RoleEvent>();
    let spec = cfg.rt.spec(&format!("rtlab-{}", h.role.name()), 1);
    let s2 = stop.clone();
    let t = spawn_rt(&spec, move || {
        let mut emit = |e: RoleEvent| {
            let _ = tx.send(e);
        };
        run_role(&rc, transport, &s2, &mut emit);
    })
    .map_err(|e| ProbeError::Rt(e.to_string()))?;
    let mut report = None;
    for e in rx.iter() {
        match e {
            RoleEvent::Failed(why) => return Err(ProbeError::Setup(why)),
            RoleEvent::Done(r) => report = r.map(|b| *b),
            RoleEvent::Ready | RoleEvent::Warm(_) | RoleEvent::Cost(_) => {}
        }
    }
    let _ = t.join();
    Ok(report)
}

/// A subscriber by hand's stream (`<transport>.oneway.<topic>.sub`): it joined the
/// publisher's stream wherever that was, so lost = missing between the first and the last
/// message received.
fn peer_stream(
    cfg: &PubsubConfig,
    h: &ByHand,
    r: ReceiverReport,
    period: i64,
    transport_labels: &[(&'static str, String)],
) -> Stream {
    let lost = r.lost_between();
    let (first_seq, last_seq) = (r.first_seq, r.last_seq);
    let mut s = r.stream_with_counts();
    s.name = format!("{}.oneway.{}.sub", cfg.transport.kind.name(), h.topic);
    s.metric = Mode::Oneway.metric().into();
    s.definition = oneway_definition(cfg.stamp_clock);
    s.deadline_ns = cfg.deadline_ns.unwrap_or(period);
    s.labels.insert("role".into(), "sub".into());
    for (k, v) in transport_labels {
        s.labels.insert(k.to_string(), v.clone());
    }
    s.labels.insert("topic".into(), h.topic.clone());
    s.stats.lost = Some(lost);
    if let (Some(f), Some(l)) = (first_seq, last_seq) {
        s.labels.insert("first_seq".into(), f.to_string());
        s.labels.insert("last_seq".into(), l.to_string());
    }
    s
}
