//! The ping engine: sends requests on a schedule, takes replies, and accounts for every
//! datagram through a [`Tracker`].
//!
//! Design (one thread, no locks): the measuring thread alternates between sending and
//! waiting. While it waits for the next send slot it takes the replies that arrive;
//! [`Link::recv_until`] returns a datagram as soon as one is queued, or `Timeout` at the
//! absolute time asked for (the real link waits in poll(2) on the socket and a
//! CLOCK_MONOTONIC timerfd armed with TFD_TIMER_ABSTIME at the slot, so the schedule stays
//! absolute and a reply is stamped as soon as the thread wakes for it).
//!
//! - `periodic`: request `k` is due at `start + k*T` (open loop). A slot already past when
//!   the thread is ready for it is skipped and counted as an overrun (S3: "next available
//!   cycle"): no catch-up burst, no drift. The send lateness (`sent - slot`) is recorded too.
//! - `pingpong`: closed loop at the highest rate: the next request goes out as soon as the
//!   reply to the previous one is in, or its loss timeout has passed.
//! - After the last request the engine keeps taking replies until every request is
//!   answered or lost (at most one loss timeout), so a run never stalls and never ends
//!   with requests unaccounted for.
//!
//! RTT = reply received - request sent, both on the client's clock; the send stamp is
//! taken right before the send call. Contract: the loop never allocates, locks, logs or
//! prints; it reads one atomic stop flag and writes one atomic progress counter.

use super::track::{Class, Tracker};
use super::wire::{self, Kind};
use crate::timer::LoopEnd;
use rtlab_core::sink::Sink;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// How requests are scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PingMode {
    /// Open loop on an absolute-time grid.
    Periodic,
    /// Closed loop, as fast as replies come back.
    Pingpong,
}

impl PingMode {
    pub fn name(self) -> &'static str {
        match self {
            PingMode::Periodic => "periodic",
            PingMode::Pingpong => "pingpong",
        }
    }
}

/// What a receive wait ended with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recv {
    /// A datagram of this many bytes is in the buffer.
    Datagram(usize),
    /// The absolute time asked for was reached with nothing queued.
    Timeout,
    /// The kernel reported an error on the socket (e.g. ICMP port unreachable).
    Error,
}

/// What the engine needs from the network and the clock.
pub trait Link {
    /// Now, ns on the clock RTTs are measured with.
    fn now(&mut self) -> i64;
    /// Send one datagram; Err when the kernel refused it.
    fn send(&mut self, buf: &[u8]) -> std::io::Result<()>;
    /// Hand one datagram to the kernel to leave at `launch_ns` (same clock as [`Link::now`]);
    /// a link without launch times sends it now.
    #[inline]
    fn send_at(&mut self, buf: &[u8], _launch_ns: i64) -> std::io::Result<()> {
        self.send(buf)
    }
    /// The run's first slot (the origin of its streams), before anything is sent.
    #[inline]
    fn on_start(&mut self, _start: i64) {}
    /// Return a queued datagram at once, else wait for one until the absolute time `until_ns`.
    fn recv_until(&mut self, buf: &mut [u8], until_ns: i64) -> Recv;
    /// The request just sent (successfully or not) was `seq` (a link with kernel
    /// timestamps files its stamps under it).
    #[inline]
    fn on_send(&mut self, _seq: u64) {}
    /// The datagram last received was the first reply to `seq`, a sample of the run sent
    /// `at_ns` after its start.
    #[inline]
    fn on_sample(&mut self, _seq: u64, _at_ns: i64) {}
}

/// The schedule of one ping run.
#[derive(Clone, Copy, Debug)]
pub struct PingPlan {
    pub mode: PingMode,
    /// Send period (periodic mode).
    pub period_ns: i64,
    /// Stop after this many requests.
    pub count: Option<u64>,
    /// Stop sending at `start + duration`.
    pub duration_ns: Option<i64>,
    pub loss_timeout_ns: i64,
    /// Launch-time sending (periodic mode): each request is handed to the kernel this long
    /// before its slot, to leave at the slot (0: sent at the slot).
    pub lead_ns: i64,
}

/// After `until` has passed, at most this many more queued datagrams are taken before the
/// engine sends (a flood of datagrams cannot hold the schedule back for long).
const TAKE_PAST_DUE: u32 = 64;

/// The engine state that lives for one run (buffers preallocated by the caller).
pub struct Pinger<'a, L: Link, R: Sink, S: Sink> {
    pub link: &'a mut L,
    pub tracker: &'a mut Tracker,
    /// The request datagram: exactly the payload size, filler already written.
    pub tx: &'a mut [u8],
    /// Receive buffer, at least 65536 bytes so no datagram is cut.
    pub rx: &'a mut [u8],
    pub run_id: u64,
    /// RTT samples.
    pub rtt: &'a mut R,
    /// Send lateness samples (periodic mode).
    pub lateness: &'a mut S,
    pub stop: &'a AtomicBool,
    pub progress: &'a AtomicU64,
}

impl<L: Link, R: Sink, S: Sink> Pinger<'_, L, R, S> {
    /// Take datagrams until `until_ns`. Returns true as soon as the reply to `wanted`
    /// is counted as a sample (pingpong), false when the time is up.
    fn take_until(&mut self, start: i64, until_ns: i64, wanted: Option<u64>) -> bool {
        let mut past_due = 0u32;
        loop {
            match self.link.recv_until(self.rx, until_ns) {
                Recv::Timeout => return false,
                Recv::Error => self.tracker.on_receive_error(),
                Recv::Datagram(n) => {
                    let now = self.link.now();
                    let class = match wire::parse(&self.rx[..n]) {
                        Ok(h) => self.tracker.on_reply(&h, n, now),
                        Err(_) => self.tracker.on_malformed(),
                    };
                    if let Class::Sample { seq, sent_ns, rtt_ns, .. } = class {
                        self.rtt.record(seq, sent_ns - start, rtt_ns);
                        self.link.on_sample(seq, sent_ns - start);
                        if wanted == Some(seq) {
                            return true;
                        }
                    }
                }
            }
            if self.link.now() >= until_ns {
                past_due += 1;
                if past_due > TAKE_PAST_DUE {
                    return false;
                }
            }
        }
    }

    /// Stamp, write and send the next request (to leave at `launch`, which is then its send
    /// stamp); returns (seq, sent_ns, the time it was handed to the kernel).
    fn send_next(&mut self, launch: Option<i64>) -> (u64, i64, i64) {
        let handed = self.link.now();
        let t = launch.unwrap_or(handed);
        let seq = self.tracker.next_seq();
        wire::write(self.tx, Kind::Request, self.run_id, seq, t);
        let seq = self.tracker.on_send(t);
        let sent = match launch {
            Some(at) => self.link.send_at(self.tx, at),
            None => self.link.send(self.tx),
        };
        if sent.is_err() {
            self.tracker.send_failed(seq);
        }
        self.link.on_send(seq);
        self.progress.store(self.tracker.counts.sent, Ordering::Relaxed);
        (seq, t, handed)
    }

    /// Run the plan from `start` (the first periodic slot). Returns why sending ended;
    /// by then every request is answered or lost.
    pub fn run(&mut self, plan: &PingPlan, start: i64) -> LoopEnd {
        self.link.on_start(start);
        let end = match plan.mode {
            PingMode::Periodic => self.periodic(plan, start),
            PingMode::Pingpong => self.pingpong(plan, start),
        };
        // drain: wait for the replies still due, at most one loss timeout
        loop {
            self.tracker.expire(self.link.now());
            match self.tracker.next_expiry() {
                None => break,
                Some(t) => {
                    self.take_until(start, t.saturating_add(1), None);
                }
            }
        }
        self.tracker.finish();
        end
    }

    fn reached(&self, plan: &PingPlan) -> bool {
        matches!(plan.count, Some(c) if self.tracker.counts.sent >= c)
    }

    fn periodic(&mut self, plan: &PingPlan, start: i64) -> LoopEnd {
        let t = plan.period_ns;
        let mut k: i64 = 0;
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return LoopEnd::Interrupted;
            }
            // a count is of slots: each one sent or skipped (an overrun)
            if matches!(plan.count, Some(c) if k as u64 >= c) {
                return LoopEnd::Count;
            }
            let slot = start + k * t;
            if matches!(plan.duration_ns, Some(d) if slot >= start + d) {
                return LoopEnd::Duration;
            }
            // with launch times the request is handed over `lead` ahead and leaves at its slot
            let due = slot - plan.lead_ns;
            self.take_until(start, due, None);
            let launch = (plan.lead_ns > 0).then_some(slot);
            let (seq, sent, handed) = self.send_next(launch);
            self.lateness.record(seq, sent - start, handed - due);
            self.tracker.expire(self.link.now());
            // the next slot; those already past are skipped and counted
            let ready = self.link.now();
            let mut first_future = (ready - start).div_euclid(t) + 1;
            if let Some(c) = plan.count {
                // slots past the count are not the run's: not skipped, not counted
                first_future = first_future.min(c.min(i64::MAX as u64) as i64);
            }
            if first_future > k + 1 {
                self.rtt.overrun((first_future - k - 1) as u64);
                k = first_future;
            } else {
                k += 1;
            }
        }
    }

    fn pingpong(&mut self, plan: &PingPlan, start: i64) -> LoopEnd {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return LoopEnd::Interrupted;
            }
            if self.reached(plan) {
                return LoopEnd::Count;
            }
            if matches!(plan.duration_ns, Some(d) if self.link.now() - start >= d) {
                return LoopEnd::Duration;
            }
            let (seq, sent, _) = self.send_next(None);
            // wait for its reply, or its loss timeout (a refused send waits too: no spin)
            self.take_until(
                start,
                sent.saturating_add(plan.loss_timeout_ns).saturating_add(1),
                Some(seq),
            );
            self.tracker.expire(self.link.now());
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::udp::track::Counts;
    use std::collections::VecDeque;

    const MS: i64 = 1_000_000;

    /// A scripted network on a fake clock. Every request gets the replies its script
    /// says (a list of delays: none = lost, two = duplicated); a send can take time.
    pub(crate) struct FakeLink {
        pub t: i64,
        inbox: Vec<(i64, Vec<u8>)>,
        pub script: Box<dyn FnMut(u64) -> Vec<i64>>,
        pub send_cost: VecDeque<i64>,
        pub sends: Vec<(i64, u64)>,
        pub refuse: Vec<u64>,
    }

    impl FakeLink {
        pub fn new(t: i64, script: impl FnMut(u64) -> Vec<i64> + 'static) -> FakeLink {
            FakeLink {
                t,
                inbox: Vec::new(),
                script: Box::new(script),
                send_cost: VecDeque::new(),
                sends: Vec::new(),
                refuse: Vec::new(),
            }
        }
        pub fn inject(&mut self, at: i64, bytes: Vec<u8>) {
            self.inbox.push((at, bytes));
        }
    }

    impl Link for FakeLink {
        fn now(&mut self) -> i64 {
            self.t
        }
        fn send(&mut self, buf: &[u8]) -> std::io::Result<()> {
            let h = wire::parse(buf).expect("the engine sends well-formed requests");
            self.sends.push((self.t, h.seq));
            let cost = self.send_cost.pop_front().unwrap_or(0);
            if self.refuse.contains(&h.seq) {
                self.t += cost;
                return Err(std::io::ErrorKind::ConnectionRefused.into());
            }
            let mut reply = buf.to_vec();
            wire::to_reply(&mut reply, &h);
            for d in (self.script)(h.seq) {
                self.inbox.push((self.t + d, reply.clone()));
            }
            self.t += cost;
            Ok(())
        }
        fn recv_until(&mut self, buf: &mut [u8], until: i64) -> Recv {
            let first = self
                .inbox
                .iter()
                .enumerate()
                .min_by_key(|(i, (at, _))| (*at, *i))
                .map(|(i, (at, _))| (i, *at));
            match first {
                Some((i, at)) if at <= until.max(self.t) => {
                    let (at, b) = self.inbox.remove(i);
                    self.t = self.t.max(at);
                    buf[..b.len()].copy_from_slice(&b);
                    Recv::Datagram(b.len())
                }
                _ => {
                    self.t = self.t.max(until);
                    Recv::Timeout
                }
            }
        }
    }

    use crate::test_sink::Keep;

    struct Run {
        counts: Counts,
        rtt: Keep,
        lateness: Keep,
        sends: Vec<(i64, u64)>,
        end: LoopEnd,
    }

    fn run_with(link: &mut FakeLink, mode: PingMode, count: u64, payload: usize) -> Run {
        let plan = PingPlan {
            mode,
            period_ns: MS,
            count: Some(count),
            duration_ns: None,
            loss_timeout_ns: 500 * MS,
            lead_ns: 0,
        };
        run_plan(link, &plan, payload)
    }

    /// Run `plan` from the link's time now; every request answered or lost.
    fn run_plan(link: &mut FakeLink, plan: &PingPlan, payload: usize) -> Run {
        let mut tracker = Tracker::new(1024, plan.loss_timeout_ns, MS, 7, payload);
        let mut tx = vec![0u8; payload];
        let mut rx = vec![0u8; 65536];
        let mut rtt = Keep::default();
        let mut lateness = Keep::default();
        let stop = AtomicBool::new(false);
        let progress = AtomicU64::new(0);
        let start = link.t;
        let end = Pinger {
            link: &mut *link,
            tracker: &mut tracker,
            tx: &mut tx,
            rx: &mut rx,
            run_id: 7,
            rtt: &mut rtt,
            lateness: &mut lateness,
            stop: &stop,
            progress: &progress,
        }
        .run(plan, start);
        assert_eq!(progress.load(Ordering::Relaxed), tracker.counts.sent);
        let c = tracker.counts;
        assert_eq!(c.sent, c.samples + c.lost, "every request is answered or lost: {c:?}");
        assert_eq!(rtt.samples.len() as u64, c.samples);
        Run { counts: c, rtt, lateness, sends: link.sends.clone(), end }
    }

    fn periodic(script: impl FnMut(u64) -> Vec<i64> + 'static, count: u64) -> Run {
        let mut link = FakeLink::new(10 * MS, script);
        run_with(&mut link, PingMode::Periodic, count, 500)
    }

    #[test]
    fn every_reply_on_time_sends_on_the_grid() {
        let r = periodic(|_| vec![200_000], 5);
        assert_eq!(r.end, LoopEnd::Count);
        let at: Vec<_> = r.sends.iter().map(|s| s.0 - 10 * MS).collect();
        assert_eq!(at, vec![0, MS, 2 * MS, 3 * MS, 4 * MS]);
        assert!(r.rtt.samples.iter().all(|s| s.2 == 200_000));
        assert_eq!(
            (r.counts.samples, r.counts.lost, r.counts.missed, r.rtt.overruns),
            (5, 0, 0, 0)
        );
        assert!(r.lateness.samples.iter().all(|s| s.2 == 0));
    }

    #[test]
    fn loss_late_duplicate_reorder_and_missed_deadline() {
        let r = periodic(
            |seq| match seq {
                1 => vec![100_000, 150_000], // duplicated
                2 => vec![],                 // lost
                3 => vec![600 * MS],         // late: after the 500 ms loss timeout
                4 => vec![MS + 500_000],     // missed deadline, arrives after 5's reply
                _ => vec![100_000],
            },
            700, // long enough for the late reply to come in during the run
        );
        let c = r.counts;
        assert_eq!(c.sent, 700);
        assert_eq!(c.lost, 2, "{c:?}");
        assert_eq!(c.late, 1);
        assert_eq!(c.duplicates, 1);
        assert_eq!(c.missed, 1);
        assert_eq!(c.out_of_order, 1);
        assert_eq!(c.samples, 698);
        let seqs: Vec<_> = r.rtt.samples.iter().take(6).map(|s| s.0).collect();
        assert_eq!(seqs, vec![0, 1, 5, 4, 6, 7]);
        assert_eq!(r.rtt.samples[3].2, MS + 500_000);
    }

    #[test]
    fn an_overrun_skips_slots_and_counts_them() {
        let mut link = FakeLink::new(0, |_| vec![100_000]);
        // the send of request 2 takes 2.5 periods: slots 3 and 4 are past when ready
        link.send_cost = VecDeque::from(vec![0, 0, 2 * MS + 500_000]);
        let r = run_with(&mut link, PingMode::Periodic, 7, 64);
        let at: Vec<_> = r.sends.iter().map(|s| s.0).collect();
        assert_eq!(at, vec![0, MS, 2 * MS, 5 * MS, 6 * MS]);
        assert_eq!(r.rtt.overruns, 2);
        let seqs: Vec<_> = r.sends.iter().map(|s| s.1).collect();
        assert_eq!(seqs, vec![0, 1, 2, 3, 4], "sequence numbers stay contiguous");
        assert_eq!(r.counts.lost, 0);
        // the count is of slots: 7 = 5 sent + 2 skipped; with 4, the skipped slots past
        // the count are not the run's
        let mut link = FakeLink::new(0, |_| vec![100_000]);
        link.send_cost = VecDeque::from(vec![0, 0, 2 * MS + 500_000]);
        let r = run_with(&mut link, PingMode::Periodic, 4, 64);
        assert_eq!(r.sends.len() as u64 + r.rtt.overruns, 4);
        assert_eq!((r.sends.len(), r.rtt.overruns), (3, 1));
    }

    #[test]
    fn launch_times_hand_each_request_over_ahead_and_stamp_it_with_its_slot() {
        let mut link = FakeLink::new(9 * MS, |_| vec![400_000]);
        let plan = PingPlan {
            mode: PingMode::Periodic,
            period_ns: MS,
            count: Some(4),
            duration_ns: None,
            loss_timeout_ns: 500 * MS,
            lead_ns: 300_000,
        };
        let r = run_plan(&mut link, &plan, 64);
        let start = 9 * MS;
        let at: Vec<_> = r.sends.iter().map(|s| s.0 - start).collect();
        // the run starts at its first slot: that one is handed over 300 us late, at the slot;
        // the others 300 us ahead of theirs
        assert_eq!(at, vec![0, 700_000, 1_700_000, 2_700_000]);
        let late: Vec<_> = r.lateness.samples.iter().map(|s| s.2).collect();
        assert_eq!(late, vec![300_000, 0, 0, 0]);
        // a reply 400 us after the hand-off: the RTT runs from the slot it was to leave at
        let rtt: Vec<_> = r.rtt.samples.iter().map(|s| s.2).collect();
        assert_eq!(rtt, vec![400_000, 100_000, 100_000, 100_000]);
    }

    #[test]
    fn foreign_and_malformed_datagrams_are_counted_and_ignored() {
        let mut link = FakeLink::new(0, |_| vec![100_000]);
        link.inject(300_000, b"not ours at all, but long enough".to_vec());
        let mut other = vec![0u8; 64];
        wire::write(&mut other, Kind::Reply, 99, 0, 0);
        link.inject(400_000, other);
        link.inject(500_000, vec![1, 2, 3]);
        let r = run_with(&mut link, PingMode::Periodic, 3, 64);
        assert_eq!((r.counts.malformed, r.counts.foreign, r.counts.samples), (3, 1, 3));
    }

    #[test]
    fn a_refused_send_is_lost_and_the_run_goes_on() {
        let mut link = FakeLink::new(0, |_| vec![100_000]);
        link.refuse = vec![1];
        let r = run_with(&mut link, PingMode::Periodic, 3, 64);
        assert_eq!((r.counts.lost, r.counts.send_errors, r.counts.samples), (1, 1, 2));
    }

    #[test]
    fn short_datagrams_work_end_to_end() {
        let mut link = FakeLink::new(0, |_| vec![50_000]);
        let r = run_with(&mut link, PingMode::Periodic, 3, 16);
        assert_eq!(r.counts.samples, 3);
    }

    #[test]
    fn pingpong_sends_on_reply_and_after_a_loss_timeout() {
        let mut link = FakeLink::new(0, |seq| if seq == 1 { vec![] } else { vec![30_000] });
        let r = run_with(&mut link, PingMode::Pingpong, 4, 64);
        let at: Vec<_> = r.sends.iter().map(|s| s.0).collect();
        // 0 at 0, reply at 30us; 1 at 30us, lost: next one after its 500 ms timeout
        assert_eq!(at, vec![0, 30_000, 30_000 + 500 * MS + 1, 60_000 + 500 * MS + 1]);
        assert_eq!((r.counts.samples, r.counts.lost), (3, 1));
        assert!(r.lateness.samples.is_empty());
    }

    #[test]
    fn the_stop_flag_and_the_duration_end_a_run_with_everything_accounted_for() {
        let plan = PingPlan {
            mode: PingMode::Periodic,
            period_ns: MS,
            count: None,
            duration_ns: Some(10 * MS),
            loss_timeout_ns: 500 * MS,
            lead_ns: 0,
        };
        let mut link = FakeLink::new(0, |s| if s == 9 { vec![] } else { vec![100_000] });
        let mut tracker = Tracker::new(1024, plan.loss_timeout_ns, MS, 7, 64);
        let (mut tx, mut rx) = (vec![0u8; 64], vec![0u8; 65536]);
        let (mut rtt, mut lat) = (Keep::default(), Keep::default());
        let stop = AtomicBool::new(false);
        let progress = AtomicU64::new(0);
        let mut p = Pinger {
            link: &mut link,
            tracker: &mut tracker,
            tx: &mut tx,
            rx: &mut rx,
            run_id: 7,
            rtt: &mut rtt,
            lateness: &mut lat,
            stop: &stop,
            progress: &progress,
        };
        assert_eq!(p.run(&plan, 0), LoopEnd::Duration);
        assert_eq!((tracker.counts.sent, tracker.counts.lost), (10, 1));
        // the last request was lost: the drain waited its loss timeout, no longer
        assert_eq!(link.t, 9 * MS + 500 * MS + 1);
        stop.store(true, Ordering::Relaxed);
        let mut tracker = Tracker::new(1024, plan.loss_timeout_ns, MS, 7, 64);
        let mut p = Pinger {
            link: &mut link,
            tracker: &mut tracker,
            tx: &mut tx,
            rx: &mut rx,
            run_id: 7,
            rtt: &mut rtt,
            lateness: &mut lat,
            stop: &stop,
            progress: &progress,
        };
        assert_eq!(p.run(&plan, 0), LoopEnd::Interrupted);
        assert_eq!(tracker.counts.sent, 0);
    }
}
