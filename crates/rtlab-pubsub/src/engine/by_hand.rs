//! Roles run by hand (`rtlab pubsub --role R --topic T` on each machine): a pong or a
//! subscriber run here as the peer of a ping or publisher elsewhere ([`run_peer_by_hand`]),
//! and a publisher by hand waiting for the subscribers the middleware matched
//! ([`CaseSetup::wait_for_subscribers`]); a ping by hand is an ordinary case
//! ([`super::case`]) whose pongs come from elsewhere.

use super::case::{window_capacity, CaseSetup, SETUP_TIMEOUT_NS, WARMUP_PERIOD_NS};
use super::config::{oneway_definition, ByHand, HandRole, Mode, PubsubConfig, StampClock};
use super::outcome::{CaseResult, MatchedSubscribers, ProbeError, PubsubOutcome};
use super::role::{run_role, ReceiverReport, RoleConfig, RoleEvent, RoleKind};
use super::threads::RtUse;
use crate::transport::{Publisher, QosMapping, Reliability, Transport, WARMUP_BIT};
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
        max_len: len,
        deadline_ns: cfg.deadline_ns.unwrap_or(period),
        loss_timeout_ns: cfg.loss_timeout_ns,
        window_ns: cfg.window_ns,
        window_capacity: window_capacity(duration_ns, cfg.window_ns),
        run_timeout_ns: duration_ns,
        rt: cfg.rt.clone(),
        mlockall: false,
        thread_priorities: cfg.thread_priorities.clone(),
        stamp_clock: if kind == RoleKind::Subscriber {
            cfg.stamp_clock
        } else {
            StampClock::Monotonic
        },
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
            RoleEvent::Ready | RoleEvent::Warm(_) => {}
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

impl CaseSetup<'_> {
    /// A publisher by hand: wait (until `setup_end`, as long as `stop` is not raised) until
    /// the middleware has matched at least one subscriber with `publisher`. A transport that
    /// cannot tell ([`Publisher::matched`] is None) publishes at once. No subscriber in the
    /// set-up time is an error: nothing that was asked (a subscriber's messages) could be
    /// measured.
    ///
    /// Reliable, the match then settles: the publisher's library matched the subscriber when
    /// it learnt of it, but the subscriber may not have learnt of the publisher yet (each side
    /// hears of the other in its own discovery message); it drops what comes before, and a
    /// reliable protocol repairs it only after its next heartbeat (Fast DDS 2.9: 3 s), late,
    /// or never once the history moved on. So a warm-up message (sequence bit 63, which a
    /// subscriber does not measure) is published until every matched subscriber acknowledged
    /// it ([`Publisher::wait_acknowledged`]): a subscriber acknowledges only a publisher it
    /// matched, so from then on the path is current both ways.
    pub(super) fn wait_for_subscribers(
        &self,
        publisher: &mut dyn Publisher,
        stop: &AtomicBool,
        setup_end: i64,
    ) -> Result<MatchedSubscribers, ProbeError> {
        let start = monotonic_ns();
        loop {
            if stop.load(Ordering::Relaxed) {
                return Err(ProbeError::Setup("interrupted during set-up".into()));
            }
            match publisher.matched() {
                None => return Ok(MatchedSubscribers { count: None, waited_ns: 0, settle_ns: 0 }),
                Some(n) if n > 0 => break,
                Some(_) => {}
            }
            if monotonic_ns() > setup_end {
                return Err(ProbeError::Setup(format!(
                    "{}: no subscriber of {} matched the publisher within {} s (is one running, on domain {} and this network? a reliable subscriber does not match a best-effort publisher: --reliability)",
                    self.transport.name(),
                    self.topic,
                    SETUP_TIMEOUT_NS / 1_000_000_000,
                    self.role_spec.domain.map_or("the default".to_string(), |d| d.to_string()),
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let waited_ns = monotonic_ns() - start;
        let settle_start = monotonic_ns();
        if self.cfg.qos.reliability == Reliability::Reliable {
            let mut k = 0u64;
            loop {
                if stop.load(Ordering::Relaxed) {
                    return Err(ProbeError::Setup("interrupted during set-up".into()));
                }
                publisher.publish(WARMUP_BIT | k, monotonic_ns(), self.len)?;
                k += 1;
                let left = setup_end - monotonic_ns();
                match publisher.wait_acknowledged(left.clamp(0, WARMUP_PERIOD_NS * 10)) {
                    Some(true) | None => break,
                    Some(false) if left > 0 => {}
                    Some(false) => {
                        return Err(ProbeError::Setup(format!(
                            "{}: a subscriber of {} matched the publisher but did not acknowledge its messages within {} s (the path never became current)",
                            self.transport.name(),
                            self.topic,
                            SETUP_TIMEOUT_NS / 1_000_000_000
                        )))
                    }
                }
            }
        }
        let settle_ns = monotonic_ns() - settle_start;
        let count = publisher.matched();
        Ok(MatchedSubscribers { count, waited_ns, settle_ns })
    }
}
