//! Accounting for every datagram of a ping run: what was sent, what came back, and how.
//!
//! Classification of a reply (all times on the client's CLOCK_MONOTONIC, RTT = reply
//! received - request sent):
//! - **on time**: the first reply to a request, RTT <= deadline; an RTT sample.
//! - **missed deadline**: the first reply, deadline < RTT <= loss timeout; an RTT sample,
//!   counted in `missed`.
//! - **out of order**: a first reply (on time or missed) whose sequence number is below
//!   the highest already answered; it is an RTT sample and also counted in `out_of_order`.
//! - **lost**: no reply with RTT <= loss timeout. Declared when the loss timeout has
//!   passed ([`Tracker::expire`]) or when a reply comes later than that, whichever is first.
//! - **late**: a reply to a request already lost (RTT > loss timeout); not a sample,
//!   counted in `late` (the request stays counted in `lost`).
//! - **duplicate**: a further copy of a reply already counted (on time, missed or late).
//! - **foreign**: a well-formed rtlab datagram that is not a reply of this run (another
//!   run id, a request, a sequence number never sent, a send stamp that is not ours, a
//!   length that is not the one sent). Counted in `malformed` with the unparsable ones.
//!
//! Identities that always hold: `sent = samples + lost`, `missed <= samples`,
//! `out_of_order <= samples`, `late - stale <= lost` (a stale reply cannot be told apart: a
//! late one, or a duplicate of one answered on time, so it may count late without its request
//! counted lost; the fuzz target `udp_tracker` checks these on arbitrary runs).
//!
//! The per-request state is a preallocated ring indexed by sequence number; a reply to a
//! request older than the ring ([`Tracker::capacity`] requests ago) can no longer be told
//! apart and is counted `late` and `stale` (far beyond any loss timeout the ring is
//! sized for). Contract: nothing here allocates after [`Tracker::new`]; every call is O(1)
//! amortized; the result depends only on the times passed in, never on when `expire` ran.

use super::wire::{Header, Kind};

/// How a received datagram was classified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// A first reply within the loss timeout: an RTT sample.
    Sample {
        seq: u64,
        sent_ns: i64,
        rtt_ns: i64,
        missed: bool,
        out_of_order: bool,
    },
    Late {
        seq: u64,
    },
    Duplicate {
        seq: u64,
    },
    /// Older than the ring: counted late and stale.
    Stale {
        seq: u64,
    },
    Foreign,
    Malformed,
    /// The answer to one of this run's pre-flight hellos, arriving late: not part of the
    /// measurement, counted in `hello_replies` only.
    Hello,
}

/// The counters of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    pub sent: u64,
    /// RTT samples (first replies within the loss timeout).
    pub samples: u64,
    pub missed: u64,
    pub lost: u64,
    pub late: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
    /// Unparsable datagrams plus foreign ones.
    pub malformed: u64,
    /// Of `malformed`: well-formed rtlab datagrams that are not replies of this run.
    pub foreign: u64,
    /// Of `late`: replies older than the ring.
    pub stale: u64,
    /// Of `lost`: sends the kernel refused (never left the machine).
    pub send_errors: u64,
    /// Errors reported by the kernel on receive (ICMP port unreachable and the like).
    pub receive_errors: u64,
    /// Late answers to this run's pre-flight hellos (not part of the measurement).
    pub hello_replies: u64,
}

const EMPTY: u8 = 0;
const OUTSTANDING: u8 = 1;
const ANSWERED: u8 = 2;
const LOST: u8 = 3;
const LOST_ANSWERED: u8 = 4;

#[derive(Clone, Copy, Debug)]
struct Slot {
    seq: u64,
    sent_ns: i64,
    state: u8,
}

/// The per-run accounting. Sequence numbers are given out by [`Tracker::on_send`], from 0.
pub struct Tracker {
    slots: Box<[Slot]>,
    mask: u64,
    next_seq: u64,
    /// Every request below this is resolved (answered or lost).
    expire_from: u64,
    highest_answered: Option<u64>,
    loss_timeout_ns: i64,
    deadline_ns: i64,
    run_id: u64,
    payload: usize,
    pub counts: Counts,
}

impl Tracker {
    /// A tracker with room for at least `min_outstanding` requests in flight (rounded up
    /// to a power of two). `payload` is the length every reply must have.
    pub fn new(
        min_outstanding: usize,
        loss_timeout_ns: i64,
        deadline_ns: i64,
        run_id: u64,
        payload: usize,
    ) -> Tracker {
        let cap = min_outstanding.max(2).next_power_of_two();
        Tracker {
            slots: vec![Slot { seq: u64::MAX, sent_ns: 0, state: EMPTY }; cap].into_boxed_slice(),
            mask: cap as u64 - 1,
            next_seq: 0,
            expire_from: 0,
            highest_answered: None,
            loss_timeout_ns,
            deadline_ns,
            run_id,
            payload,
            counts: Counts::default(),
        }
    }

    /// The ring size: requests whose fate is remembered.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// The sequence number the next send gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Requests sent and not yet resolved.
    pub fn outstanding(&self) -> u64 {
        let mut n = 0;
        for s in self.expire_from..self.next_seq {
            let slot = &self.slots[(s & self.mask) as usize];
            if slot.seq == s && slot.state == OUTSTANDING {
                n += 1;
            }
        }
        n
    }

    /// When the oldest unresolved request times out (None: nothing outstanding).
    pub fn next_expiry(&self) -> Option<i64> {
        let mut s = self.expire_from;
        while s < self.next_seq {
            let slot = &self.slots[(s & self.mask) as usize];
            if slot.seq == s && slot.state == OUTSTANDING {
                return Some(slot.sent_ns.saturating_add(self.loss_timeout_ns));
            }
            s += 1;
        }
        None
    }

    /// Register a request sent at `sent_ns`; returns its sequence number. A request still
    /// unresolved in the ring slot it reuses is declared lost first (the ring is sized so
    /// that this happens only beyond the loss timeout).
    #[inline]
    pub fn on_send(&mut self, sent_ns: i64) -> u64 {
        let seq = self.next_seq;
        let i = (seq & self.mask) as usize;
        if self.slots[i].state == OUTSTANDING {
            self.counts.lost += 1;
        }
        self.slots[i] = Slot { seq, sent_ns, state: OUTSTANDING };
        self.next_seq += 1;
        self.counts.sent += 1;
        seq
    }

    /// The request `seq` never left (the kernel refused the send): it is lost.
    pub fn send_failed(&mut self, seq: u64) {
        let i = (seq & self.mask) as usize;
        if self.slots[i].seq == seq && self.slots[i].state == OUTSTANDING {
            self.slots[i].state = LOST;
            self.counts.lost += 1;
            self.counts.send_errors += 1;
        }
    }

    /// Declare lost every request whose loss timeout has passed at `now_ns`
    /// (sent_ns + loss_timeout < now_ns).
    #[inline]
    pub fn expire(&mut self, now_ns: i64) {
        while self.expire_from < self.next_seq {
            let s = self.expire_from;
            let slot = &mut self.slots[(s & self.mask) as usize];
            if slot.seq == s && slot.state == OUTSTANDING {
                if now_ns - slot.sent_ns <= self.loss_timeout_ns {
                    return; // sends are in time order: the rest is younger
                }
                slot.state = LOST;
                self.counts.lost += 1;
            }
            self.expire_from += 1;
        }
    }

    /// The end of a run: everything still unresolved is lost.
    pub fn finish(&mut self) {
        self.expire(i64::MAX);
    }

    /// A datagram that did not parse.
    pub fn on_malformed(&mut self) -> Class {
        self.counts.malformed += 1;
        Class::Malformed
    }

    fn foreign(&mut self) -> Class {
        self.counts.malformed += 1;
        self.counts.foreign += 1;
        Class::Foreign
    }

    /// Classify a parsed datagram of `len` bytes received at `recv_ns`.
    #[inline]
    pub fn on_reply(&mut self, h: &Header, len: usize, recv_ns: i64) -> Class {
        if h.kind == Kind::HelloReply && h.is_run(self.run_id) {
            self.counts.hello_replies += 1;
            return Class::Hello;
        }
        if h.kind != Kind::Reply
            || !h.is_run(self.run_id)
            || len != self.payload
            || h.seq >= self.next_seq
        {
            return self.foreign();
        }
        let seq = h.seq;
        let i = (seq & self.mask) as usize;
        if self.slots[i].seq != seq {
            self.counts.late += 1;
            self.counts.stale += 1;
            return Class::Stale { seq };
        }
        let sent_ns = self.slots[i].sent_ns;
        if !h.stamp_is(sent_ns) {
            return self.foreign();
        }
        let rtt_ns = recv_ns - sent_ns;
        match self.slots[i].state {
            OUTSTANDING if rtt_ns > self.loss_timeout_ns => {
                self.slots[i].state = LOST_ANSWERED;
                self.counts.lost += 1;
                self.counts.late += 1;
                Class::Late { seq }
            }
            OUTSTANDING => {
                self.slots[i].state = ANSWERED;
                self.counts.samples += 1;
                let missed = rtt_ns > self.deadline_ns;
                if missed {
                    self.counts.missed += 1;
                }
                let out_of_order = matches!(self.highest_answered, Some(hi) if seq < hi);
                if out_of_order {
                    self.counts.out_of_order += 1;
                } else {
                    self.highest_answered = Some(seq);
                }
                Class::Sample { seq, sent_ns, rtt_ns, missed, out_of_order }
            }
            LOST => {
                self.slots[i].state = LOST_ANSWERED;
                self.counts.late += 1;
                Class::Late { seq }
            }
            _ => {
                self.counts.duplicates += 1;
                Class::Duplicate { seq }
            }
        }
    }

    /// An error the kernel queued on the socket (ICMP unreachable...): counted, the run goes on.
    pub fn on_receive_error(&mut self) {
        self.counts.receive_errors += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udp::wire::{self, Form};

    const MS: i64 = 1_000_000;

    fn reply(run: u64, seq: u64, sent: i64) -> Header {
        Header { form: Form::Full, kind: Kind::Reply, run_id: run, seq, send_ns: sent }
    }

    fn tracker() -> Tracker {
        Tracker::new(8, 500 * MS, MS, 42, 500)
    }

    #[test]
    fn on_time_missed_and_lost() {
        let mut t = tracker();
        let a = t.on_send(0);
        let b = t.on_send(MS);
        let c = t.on_send(2 * MS);
        assert!(
            matches!(t.on_reply(&reply(42, a, 0), 500, MS / 2), Class::Sample { rtt_ns, missed: false, .. } if rtt_ns == MS / 2)
        );
        assert!(matches!(
            t.on_reply(&reply(42, b, MS), 500, 3 * MS),
            Class::Sample { missed: true, .. }
        ));
        assert_eq!(t.outstanding(), 1);
        assert_eq!(t.next_expiry(), Some(502 * MS));
        t.expire(502 * MS); // exactly the timeout: not yet
        assert_eq!(t.counts.lost, 0);
        t.expire(502 * MS + 1);
        assert_eq!(t.counts.lost, 1);
        assert_eq!(t.outstanding(), 0);
        // the reply after the loss is late, and its copy a duplicate
        assert_eq!(t.on_reply(&reply(42, c, 2 * MS), 500, 600 * MS), Class::Late { seq: c });
        assert_eq!(t.on_reply(&reply(42, c, 2 * MS), 500, 601 * MS), Class::Duplicate { seq: c });
        let k = t.counts;
        assert_eq!((k.sent, k.samples, k.missed, k.lost, k.late, k.duplicates), (3, 2, 1, 1, 1, 1));
        assert_eq!(k.sent, k.samples + k.lost);
    }

    #[test]
    fn a_late_reply_is_late_even_before_expire_ran() {
        let mut t = tracker();
        let a = t.on_send(0);
        assert_eq!(t.on_reply(&reply(42, a, 0), 500, 500 * MS + 1), Class::Late { seq: a });
        t.expire(i64::MAX);
        assert_eq!((t.counts.lost, t.counts.late, t.counts.samples), (1, 1, 0));
        // exactly the loss timeout still counts as a reply
        let b = t.on_send(MS);
        assert!(matches!(t.on_reply(&reply(42, b, MS), 500, 501 * MS), Class::Sample { .. }));
    }

    #[test]
    fn duplicates_and_reordering() {
        let mut t = tracker();
        let s: Vec<u64> = (0..4).map(|k| t.on_send(k * MS)).collect();
        // arrivals: 0, 2, 1, 2 (dup), 3
        assert!(matches!(
            t.on_reply(&reply(42, s[0], 0), 500, MS / 2),
            Class::Sample { out_of_order: false, .. }
        ));
        assert!(matches!(
            t.on_reply(&reply(42, s[2], 2 * MS), 500, 2 * MS + 100),
            Class::Sample { out_of_order: false, .. }
        ));
        assert!(matches!(
            t.on_reply(&reply(42, s[1], MS), 500, 2 * MS + 200),
            Class::Sample { out_of_order: true, .. }
        ));
        assert_eq!(
            t.on_reply(&reply(42, s[2], 2 * MS), 500, 2 * MS + 300),
            Class::Duplicate { seq: 2 }
        );
        assert!(matches!(
            t.on_reply(&reply(42, s[3], 3 * MS), 500, 3 * MS + 100),
            Class::Sample { out_of_order: false, .. }
        ));
        t.finish();
        let k = t.counts;
        assert_eq!((k.samples, k.out_of_order, k.duplicates, k.lost), (4, 1, 1, 0));
    }

    #[test]
    fn foreign_datagrams_are_counted_and_ignored() {
        let mut t = tracker();
        let a = t.on_send(10);
        assert_eq!(t.on_reply(&reply(43, a, 10), 500, 20), Class::Foreign, "another run");
        assert_eq!(t.on_reply(&reply(42, 7, 10), 500, 20), Class::Foreign, "never sent");
        assert_eq!(t.on_reply(&reply(42, a, 11), 500, 20), Class::Foreign, "not our stamp");
        assert_eq!(t.on_reply(&reply(42, a, 10), 499, 20), Class::Foreign, "another length");
        let req = Header { kind: Kind::Request, ..reply(42, a, 10) };
        assert_eq!(t.on_reply(&req, 500, 20), Class::Foreign, "a request");
        let hello = Header { kind: Kind::HelloReply, ..reply(42, a, 10) };
        assert_eq!(t.on_reply(&hello, 64, 20), Class::Hello, "a late pre-flight answer");
        assert_eq!(t.counts.hello_replies, 1);
        assert_eq!(t.on_malformed(), Class::Malformed);
        assert_eq!((t.counts.malformed, t.counts.foreign), (6, 5));
        // still answerable afterwards
        assert!(matches!(t.on_reply(&reply(42, a, 10), 500, 20), Class::Sample { .. }));
    }

    #[test]
    fn short_form_replies_match_on_what_they_carry() {
        let mut t = Tracker::new(8, 500 * MS, MS, 0x1234_5678_9abc_de42, 16);
        let sent = 0x7_0000_0005;
        let a = t.on_send(sent);
        let mut b = [0u8; 16];
        wire::write(&mut b, Kind::Reply, 0x1234_5678_9abc_de42, a, sent);
        let h = wire::parse(&b).unwrap();
        assert!(matches!(t.on_reply(&h, 16, sent + 100), Class::Sample { rtt_ns: 100, .. }));
    }

    #[test]
    fn a_reply_older_than_the_ring_is_stale() {
        let mut t = Tracker::new(4, 500 * MS, MS, 42, 500);
        assert_eq!(t.capacity(), 4);
        for k in 0..4 {
            t.on_send(k);
        }
        t.expire(i64::MAX);
        let lost = t.counts.lost;
        t.on_send(10); // reuses seq 0's slot
        assert_eq!(t.on_reply(&reply(42, 0, 0), 500, 20), Class::Stale { seq: 0 });
        assert_eq!((t.counts.late, t.counts.stale, t.counts.lost), (1, 1, lost));
    }

    #[test]
    fn reusing_an_unresolved_slot_declares_it_lost() {
        let mut t = Tracker::new(2, 500 * MS, MS, 42, 500);
        t.on_send(0);
        t.on_send(1);
        t.on_send(2); // slot of seq 0, still outstanding
        assert_eq!(t.counts.lost, 1);
        t.finish();
        assert_eq!(t.counts.lost, 3);
        assert_eq!(t.counts.sent, t.counts.samples + t.counts.lost);
    }

    #[test]
    fn a_refused_send_is_lost_once() {
        let mut t = tracker();
        let a = t.on_send(0);
        t.send_failed(a);
        t.finish();
        assert_eq!((t.counts.lost, t.counts.send_errors), (1, 1));
    }
}
