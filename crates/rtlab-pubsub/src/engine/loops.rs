//! The hot loops: the sender on the absolute grid ([`send_loop`]), a receiver
//! ([`receive_loop`]), an echo ([`echo_loop`]), the closed loop ([`closed_loop`]), and what a
//! receiver counts of each arrival ([`Tally`]) and of its warm-up ([`Warmup`]).
//!
//! Contract: every recorder and buffer is allocated before a loop starts; a loop only
//! publishes, takes, stamps and records. Never an allocation, a lock, a log or a print.

use super::config::StampClock;
use super::role::{ReceiverReport, RoleConfig, RoleEvent};
use crate::seqtrack::{Arrival, SeqTracker};
use crate::transport::{
    Publisher, Received, Subscriber, TransportError, WaitStyle, HEADER_LEN, WARMUP_BIT,
};
use rtlab_core::schema::Stream;
use rtlab_core::sink::{Recorder, RecorderConfig, Sink};
use rtlab_sys::clock::{monotonic_ns, sleep_until};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// A receiver checks its stop flag at least this often.
const POLL_SLICE_NS: i64 = 50_000_000;

/// The spike hook's source of the publisher's lateness (receivers raise source 0).
pub const PUBLISHER_SPIKE_SOURCE: u32 = 1;

/// The sender: `count` messages on the absolute grid t0 + k*period, each one's lateness
/// (stamp - slot) into `lateness`; the message carries a stamp of `clock`. Returns
/// (published, overruns, error). Allocation-free.
pub(super) fn send_loop(
    publisher: &mut dyn Publisher,
    len: usize,
    period: i64,
    count: u64,
    clock: StampClock,
    stop: &AtomicBool,
    lateness: &mut Recorder,
) -> (u64, u64, Option<TransportError>) {
    let t0 = monotonic_ns() + period.min(10_000_000);
    lateness.origin_monotonic_ns = Some(t0);
    let mut published = 0u64;
    let mut overruns = 0u64;
    let mut slot = 0u64;
    while slot < count && !stop.load(Ordering::Relaxed) {
        let due = t0 + slot as i64 * period;
        let now = monotonic_ns();
        if now > due + period {
            // this slot (and any others already over) passed: skip, no catch-up burst; the
            // slots skipped are at most the ones left (published + overruns = count)
            let behind = (((now - due) / period) as u64).min(count - slot);
            overruns += behind;
            slot += behind;
            continue;
        }
        sleep_until(due);
        let stamp = monotonic_ns();
        let sent = match clock {
            StampClock::Monotonic => stamp,
            StampClock::Realtime => clock.now(),
        };
        if let Err(e) = publisher.publish(published, sent, len) {
            return (published, overruns, Some(e));
        }
        lateness.record(slot, stamp - t0, stamp - due);
        published += 1;
        slot += 1;
    }
    (published, overruns, None)
}

/// A receiver: take, stamp, count, record until `stop`. Emits `Warm` on each warm-up
/// message until the first measured one (never in the measured phase). Allocation-free
/// after set-up.
pub fn receive_loop(
    mut sub: Box<dyn Subscriber>,
    rc: &RoleConfig,
    stop: &AtomicBool,
    emit: &mut dyn FnMut(RoleEvent),
) -> ReceiverReport {
    let rcfg = RecorderConfig {
        deadline_ns: rc.deadline_ns,
        window_ns: rc.window_ns,
        window_capacity: rc.window_capacity,
        max_samples: None,
        us_histogram_buckets: None,
        spike_threshold_ns: None,
    };
    let mut tally = Tally::new(&rcfg, rc.spike.as_ref());
    let mut measuring = false;
    let give_up = monotonic_ns() + rc.run_timeout_ns;
    while !stop.load(Ordering::Relaxed) && monotonic_ns() < give_up {
        let got = match sub.take(rc.wait, POLL_SLICE_NS) {
            Ok(g) => g,
            Err(_) => {
                tally.malformed += 1;
                continue;
            }
        };
        let now_mono = monotonic_ns();
        let now = match rc.stamp_clock {
            StampClock::Monotonic => now_mono,
            StampClock::Realtime => rc.stamp_clock.now(),
        };
        let Some(r) = got else { continue };
        match tally.arrive(&r, now, now_mono, rc.loss_timeout_ns) {
            Arrived::Warmup if !measuring => emit(RoleEvent::Warm(r.seq & !WARMUP_BIT)),
            Arrived::Warmup => {}
            Arrived::Counted | Arrived::Sample => measuring = true,
        }
    }
    drop(sub);
    tally.report()
}

/// An echo: republish every message unchanged (sequence and stamp kept) until `stop`.
pub(super) fn echo_loop(
    mut sub: Box<dyn Subscriber>,
    mut publisher: Box<dyn Publisher>,
    rc: &RoleConfig,
    stop: &AtomicBool,
) -> Result<(), TransportError> {
    let now = monotonic_ns();
    let give_up = now + rc.run_timeout_ns;
    // the clock is read when a wait slice ends, not per message: a busy-poll echo answers
    // with no clock read between the ping's arrival and its pong (examples/shm_ladder.rs)
    let mut until = now + POLL_SLICE_NS;
    while !stop.load(Ordering::Relaxed) {
        match sub.take_until(rc.wait, until) {
            Ok(Some(r)) => publisher.publish(r.seq, r.stamp_ns, r.len)?,
            Ok(None) | Err(TransportError::Malformed { .. }) => {
                // a slice ended, or a message not ours to echo
                let now = monotonic_ns();
                if now >= give_up {
                    break;
                }
                if now >= until {
                    until = (now + POLL_SLICE_NS).min(give_up);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Closed loop, before measuring: report this pong port's warm-up messages until every
/// receiver is warm (`settled`), then hand the port back for the pinger's own thread.
pub(super) fn warm_watch(
    mut sub: Box<dyn Subscriber>,
    wait: WaitStyle,
    stop: &AtomicBool,
    settled: &AtomicBool,
    emit: &mut dyn FnMut(RoleEvent),
) -> Box<dyn Subscriber> {
    // a short slice: set-up waits for this thread to see `settled`
    const SLICE_NS: i64 = 2_000_000;
    while !stop.load(Ordering::Relaxed) && !settled.load(Ordering::Relaxed) {
        if let Ok(Some(r)) = sub.take(wait, SLICE_NS) {
            if r.seq & WARMUP_BIT != 0 {
                emit(RoleEvent::Warm(r.seq & !WARMUP_BIT));
            }
        }
    }
    sub
}

/// A receiver's warm-up, in two stages. Its first warm-up message shows discovery matched
/// the two sides; but what arrives first may be a burst of earlier messages, repaired by a
/// reliable protocol once the reader matched a writer that had already been sending (seen
/// with RustDDS against a ros2-client node: a second of round trips up to 0.5 s right after
/// the first echo, which an immediate start measured as late and lost). So a receiver is
/// warm once a warm-up message *sent after its first arrival* arrives too: the path is
/// current.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Warmup {
    /// No warm-up message yet.
    Cold,
    /// The first arrived when `sent` warm-up messages had been sent (numbers `0..sent`).
    Matched {
        sent: u64,
    },
    Warm,
}

impl Warmup {
    /// Warm-up message `j` arrived, `sent` having been sent so far.
    pub(super) fn arrived(self, j: u64, sent: u64) -> Warmup {
        match self {
            Warmup::Cold => Warmup::Matched { sent },
            Warmup::Matched { sent: s } if j >= s => Warmup::Warm,
            w => w,
        }
    }
}

/// What a receiver counts and records of the messages it takes: the receive loop's (a thread
/// per subscriber or pong) and the closed loop's (one per pong port, on the pinger's thread).
pub(super) struct Tally {
    rec: Recorder,
    track: SeqTracker,
    late: u64,
    malformed: u64,
    first_seq: Option<u64>,
    /// The send stamp of the first sample: `at_ns` = 0.
    start: Option<i64>,
}

/// What one arrival was to a [`Tally`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Arrived {
    /// A warm-up message (never a sample).
    Warmup,
    /// Malformed, a duplicate, or late: counted, not a sample.
    Counted,
    /// A sample.
    Sample,
}

impl Tally {
    pub(super) fn new(cfg: &RecorderConfig, spike: Option<&rtlab_core::sink::SpikeHook>) -> Tally {
        Tally {
            rec: Recorder::new(cfg, None).with_hook(spike),
            track: SeqTracker::new(),
            late: 0,
            malformed: 0,
            first_seq: None,
            start: None,
        }
    }

    /// One message taken: received at `now` on the stamps' clock (`now_mono` on
    /// CLOCK_MONOTONIC); later than `loss_timeout_ns` after its send stamp it is late.
    pub(super) fn arrive(
        &mut self,
        r: &Received,
        now: i64,
        now_mono: i64,
        loss_timeout_ns: i64,
    ) -> Arrived {
        if r.seq & WARMUP_BIT != 0 {
            return Arrived::Warmup;
        }
        if r.len < HEADER_LEN {
            self.malformed += 1;
            return Arrived::Counted;
        }
        if let Arrival::Duplicate = self.track.arrive(r.seq) {
            return Arrived::Counted;
        }
        self.first_seq = Some(self.first_seq.map_or(r.seq, |f| f.min(r.seq)));
        let latency = now - r.stamp_ns;
        if latency > loss_timeout_ns {
            self.late += 1;
            return Arrived::Counted;
        }
        let rec = &mut self.rec;
        let start = *self.start.get_or_insert_with(|| {
            // the send instant on this host's monotonic clock (the same when it stamped)
            rec.origin_monotonic_ns = Some(now_mono - latency);
            r.stamp_ns
        });
        self.rec.record(r.seq, now - start, latency);
        Arrived::Sample
    }

    pub(super) fn report(self) -> ReceiverReport {
        ReceiverReport {
            stream: Stream::from_recorder("", "", "", BTreeMap::new(), &self.rec),
            received: self.track.received,
            late: self.late,
            duplicates: self.track.duplicates,
            out_of_order: self.track.out_of_order,
            malformed: self.malformed,
            first_seq: self.first_seq,
            last_seq: self.first_seq.map(|_| self.track.highest()),
        }
    }
}

/// The closed loop's settings.
pub(super) struct ClosedLoop {
    pub(super) len: usize,
    pub(super) wait: WaitStyle,
    /// At most this many pings (u64::MAX: by time only).
    pub(super) count: u64,
    pub(super) duration_ns: i64,
    pub(super) loss_timeout_ns: i64,
}

/// Closed loop on one thread: publish ping k, take the pongs until every port's pong k is
/// in or k's loss timeout passed, then ping k+1 at once. A pong of an earlier ping that
/// comes after its loss timeout is `late`; one that never comes is lost. Returns the pings
/// sent. Allocation-free: publish, take, stamp, record.
pub(super) fn closed_loop(
    publisher: &mut dyn Publisher,
    subs: &mut [Box<dyn Subscriber>],
    sides: &mut [Tally],
    lp: &ClosedLoop,
    stop: &AtomicBool,
) -> (u64, Option<TransportError>) {
    let end = monotonic_ns().saturating_add(lp.duration_ns);
    let mut k = 0u64;
    // two clock reads per round trip besides the busy-poll's own: the send stamp (also the
    // end check) and the arrival stamp (examples/shm_ladder.rs measured what more cost)
    while k < lp.count && !stop.load(Ordering::Relaxed) {
        let sent = monotonic_ns();
        if sent >= end {
            break;
        }
        if let Err(e) = publisher.publish(k, sent, lp.len) {
            return (k, Some(e));
        }
        let give_up = sent.saturating_add(lp.loss_timeout_ns);
        for (sub, side) in subs.iter_mut().zip(sides.iter_mut()) {
            loop {
                // busy-poll: no clock read before the first polls; a blocking wait in slices
                let got = match lp.wait {
                    WaitStyle::BusyPoll => sub.take_until(lp.wait, give_up),
                    WaitStyle::Blocking => {
                        sub.take(lp.wait, (give_up - monotonic_ns()).min(POLL_SLICE_NS))
                    }
                };
                let now = monotonic_ns();
                match got {
                    Ok(Some(r)) => {
                        if side.arrive(&r, now, now, lp.loss_timeout_ns) == Arrived::Sample
                            && r.seq == k
                        {
                            break;
                        }
                    }
                    Ok(None) => {}
                    Err(_) => side.malformed += 1,
                }
                if now >= give_up {
                    break;
                }
            }
        }
        k += 1;
    }
    (k, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    /// A scripted link: ping 2 is lost, 4's pong comes twice, 7's comes only after ping 8
    /// went out (past its loss timeout: late); the others come back at once.
    #[derive(Default)]
    struct Net {
        q: VecDeque<Received>,
        held: Option<Received>,
        pings: Vec<u64>,
    }
    struct FakePub(Arc<Mutex<Net>>);
    struct FakeSub(Arc<Mutex<Net>>);

    impl Publisher for FakePub {
        fn publish(&mut self, seq: u64, stamp_ns: i64, len: usize) -> Result<(), TransportError> {
            let mut n = self.0.lock().unwrap();
            n.pings.push(seq);
            if let Some(h) = n.held.take() {
                n.q.push_back(h);
            }
            let r = Received { seq, stamp_ns, len };
            match seq {
                2 => {}
                4 => n.q.extend([r, r]),
                7 => n.held = Some(r),
                _ => n.q.push_back(r),
            }
            Ok(())
        }
    }

    impl Subscriber for FakeSub {
        fn try_take(&mut self) -> Result<Option<Received>, TransportError> {
            Ok(self.0.lock().unwrap().q.pop_front())
        }
        fn wait_take(&mut self, timeout_ns: i64) -> Result<Option<Received>, TransportError> {
            let r = self.try_take()?;
            if r.is_none() {
                rtlab_sys::clock::sleep_for(timeout_ns.min(100_000));
            }
            Ok(r)
        }
    }

    fn pong_side(deadline_ns: i64) -> Tally {
        let rcfg = RecorderConfig {
            deadline_ns,
            window_ns: 1_000_000_000,
            window_capacity: 16,
            max_samples: None,
            us_histogram_buckets: None,
            spike_threshold_ns: None,
        };
        Tally::new(&rcfg, None)
    }

    #[test]
    fn a_receiver_is_warm_once_a_warm_up_sent_after_its_first_arrival_arrives() {
        // the first arrival (any number) only matches; a number sent before it does not warm
        let w = Warmup::Cold.arrived(0, 5);
        assert_eq!(w, Warmup::Matched { sent: 5 });
        let w = w.arrived(1, 6).arrived(4, 7);
        assert_eq!(w, Warmup::Matched { sent: 5 }, "a repaired backlog is not the present");
        let w = w.arrived(5, 7);
        assert_eq!(w, Warmup::Warm);
        assert_eq!(w.arrived(2, 9), Warmup::Warm, "warm stays warm");
    }

    #[test]
    fn closed_loop_sends_on_each_pong_or_after_the_loss_timeout() {
        let net = Arc::new(Mutex::new(Net::default()));
        let mut publisher = FakePub(net.clone());
        let mut subs: Vec<Box<dyn Subscriber>> = vec![Box::new(FakeSub(net.clone()))];
        let mut sides = vec![pong_side(2_000_000)];
        let lp = ClosedLoop {
            len: 64,
            wait: WaitStyle::Blocking,
            count: 10,
            duration_ns: 60_000_000_000,
            loss_timeout_ns: 2_000_000,
        };
        let start = monotonic_ns();
        let (sent, err) =
            closed_loop(&mut publisher, &mut subs, &mut sides, &lp, &AtomicBool::new(false));
        let took = monotonic_ns() - start;
        assert!(err.is_none());
        assert_eq!(sent, 10);
        assert_eq!(net.lock().unwrap().pings, (0..10).collect::<Vec<_>>());
        // two loss timeouts waited for (2 lost, 7 late): the loop did wait, and did not
        // wait for the pongs that came
        assert!(took >= 2 * lp.loss_timeout_ns, "{took} ns");
        let r = sides.pop().unwrap().report();
        assert_eq!(r.received, 9, "every ping but 2");
        assert_eq!(r.late, 1, "7's pong after its loss timeout");
        assert_eq!(r.duplicates, 1, "4's second pong");
        assert_eq!(r.out_of_order, 0);
        assert_eq!(r.stream.stats.count, 8, "samples: received - late");
        assert_eq!((r.first_seq, r.last_seq), (Some(0), Some(9)));
        assert_eq!(r.lost_between(), 1);
    }

    #[test]
    fn closed_loop_stops_at_its_time_and_on_the_stop_flag() {
        let net = Arc::new(Mutex::new(Net::default()));
        let mut subs: Vec<Box<dyn Subscriber>> = vec![Box::new(FakeSub(net.clone()))];
        let mut sides = vec![pong_side(1_000_000)];
        let lp = ClosedLoop {
            len: 64,
            wait: WaitStyle::BusyPoll,
            count: u64::MAX,
            duration_ns: 20_000_000,
            loss_timeout_ns: 1_000_000,
        };
        let (sent, _) = closed_loop(
            &mut FakePub(net.clone()),
            &mut subs,
            &mut sides,
            &lp,
            &AtomicBool::new(false),
        );
        assert!(sent > 10, "by time only: {sent}");
        let (sent, _) = closed_loop(
            &mut FakePub(net.clone()),
            &mut subs,
            &mut sides,
            &lp,
            &AtomicBool::new(true),
        );
        assert_eq!(sent, 0);
    }

    #[test]
    fn the_grid_skips_no_more_slots_than_are_left() {
        // a 1 us period on this machine: the sender is late past many slots, also near the
        // end (seen: 201 slots accounted for of 200 when it was late at the last one)
        for count in [1u64, 7, 50] {
            let net = Arc::new(Mutex::new(Net::default()));
            let mut lateness = Recorder::new(
                &RecorderConfig {
                    deadline_ns: 1_000,
                    window_ns: 1_000_000_000,
                    window_capacity: 16,
                    max_samples: None,
                    us_histogram_buckets: None,
                    spike_threshold_ns: None,
                },
                None,
            );
            let (published, overruns, err) = send_loop(
                &mut FakePub(net),
                64,
                1_000,
                count,
                StampClock::Monotonic,
                &AtomicBool::new(false),
                &mut lateness,
            );
            assert!(err.is_none());
            assert_eq!(published + overruns, count, "{published} + {overruns}");
        }
    }
}
