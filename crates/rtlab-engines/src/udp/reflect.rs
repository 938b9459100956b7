//! The reflector's decision for each received datagram, and what it saw.
//!
//! Contract: [`Reflector::handle`] never panics on any input; it answers only a datagram
//! that parses as an rtlab request or hello (see `wire.rs`), by changing its kind byte in
//! place, so the answer is exactly as long as what was received, never longer; anything
//! else is counted and left unanswered. With `drop_every = N` the requests whose sequence
//! number + 1 is a multiple of N (N-1, 2N-1, ...) are received, counted and deliberately
//! not answered: an exact, known loss for tests. Nothing here allocates after
//! [`Reflector::new`].
//!
//! Per run (run id) it also accounts for the forward path: requests received, duplicates,
//! out of order (below the highest sequence number seen) and forward losses (sequence
//! numbers never received below the highest one seen). Duplicates are recognised within
//! the last 1024 sequence numbers.

use super::wire::{self, Kind};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU64};

/// What the reflector should do with a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send back the first `len` bytes of the buffer (the answer, made in place).
    Answer(usize),
    /// Leave it unanswered.
    Ignore,
}

const WINDOW: u64 = 1024;
/// Runs tracked one by one; more are summed in `other_runs`.
pub const MAX_RUNS: usize = 16;

/// What the reflector saw of one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSeen {
    /// The run id as carried (low 8 bits only for short-form datagrams).
    pub run_id: u64,
    pub requests: u64,
    pub answered: u64,
    /// Not answered on purpose (`drop_every`).
    pub dropped: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
    pub highest_seq: Option<u64>,
    #[serde(skip)]
    window: [u64; (WINDOW / 64) as usize],
}

impl RunSeen {
    /// Sequence numbers below the highest one seen that never arrived (forward loss, or
    /// still in flight).
    pub fn forward_lost(&self) -> u64 {
        match self.highest_seq {
            Some(h) => (h + 1).saturating_sub(self.requests - self.duplicates),
            None => 0,
        }
    }

    fn bit(&mut self, seq: u64) -> (usize, u64) {
        let i = (seq % WINDOW) as usize;
        (i / 64, 1u64 << (i % 64))
    }

    /// Record `seq`; returns false for a duplicate.
    fn see(&mut self, seq: u64) -> bool {
        self.requests += 1;
        match self.highest_seq {
            None => {
                self.highest_seq = Some(seq);
                let (w, b) = self.bit(seq);
                self.window[w] |= b;
                true
            }
            Some(h) if seq > h => {
                // clear the bits of the sequence numbers skipped over, then mark seq
                let clear_from = if seq - h > WINDOW { seq - WINDOW } else { h + 1 };
                for s in clear_from..seq {
                    let (w, b) = self.bit(s);
                    self.window[w] &= !b;
                }
                let (w, b) = self.bit(seq);
                self.window[w] |= b;
                self.highest_seq = Some(seq);
                true
            }
            Some(h) => {
                self.out_of_order += (seq < h) as u64;
                if h - seq >= WINDOW {
                    return true; // too old to tell; counted out of order
                }
                let (w, b) = self.bit(seq);
                if self.window[w] & b != 0 {
                    self.duplicates += 1;
                    self.out_of_order -= (seq < h) as u64;
                    return false;
                }
                self.window[w] |= b;
                true
            }
        }
    }
}

/// Everything the reflector counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReflectCounts {
    pub received: u64,
    pub answered: u64,
    pub hellos: u64,
    /// Not answered on purpose (`drop_every`).
    pub dropped: u64,
    /// Did not parse as an rtlab datagram.
    pub malformed: u64,
    /// Parsed, but not a kind the reflector answers (a reply, a hello reply).
    pub foreign: u64,
    /// Answers the kernel refused to send.
    pub send_errors: u64,
    pub runs: Vec<RunSeen>,
    /// Requests of runs beyond the first [`MAX_RUNS`].
    pub other_runs_requests: u64,
}

/// The reflector's state.
pub struct Reflector {
    drop_every: Option<u64>,
    pub counts: ReflectCounts,
}

impl Reflector {
    pub fn new(drop_every: Option<u64>) -> Reflector {
        Reflector {
            drop_every: drop_every.filter(|&n| n > 0),
            counts: ReflectCounts { runs: Vec::with_capacity(MAX_RUNS), ..Default::default() },
        }
    }

    /// Decide about the `len` bytes at the start of `buf`; an answer is made in place.
    #[inline]
    pub fn handle(&mut self, buf: &mut [u8], len: usize) -> Action {
        self.counts.received += 1;
        let Some(d) = buf.get(..len) else {
            self.counts.malformed += 1;
            return Action::Ignore;
        };
        let h = match wire::parse(d) {
            Ok(h) => h,
            Err(_) => {
                self.counts.malformed += 1;
                return Action::Ignore;
            }
        };
        match h.kind {
            Kind::Hello => self.counts.hellos += 1,
            Kind::Request => {
                let run = self.run(h.run_id);
                let fresh = match run {
                    Some(r) => r.see(h.seq),
                    None => {
                        self.counts.other_runs_requests += 1;
                        true
                    }
                };
                let drop = fresh && matches!(self.drop_every, Some(n) if (h.seq % n) == n - 1);
                if drop {
                    self.counts.dropped += 1;
                    if let Some(r) = self.run(h.run_id) {
                        r.dropped += 1;
                    }
                    return Action::Ignore;
                }
                if let Some(r) = self.run(h.run_id) {
                    r.answered += 1;
                }
            }
            Kind::Reply | Kind::HelloReply => {
                self.counts.foreign += 1;
                return Action::Ignore;
            }
        }
        match wire::to_reply(&mut buf[..len], &h) {
            Some(_) => {
                self.counts.answered += 1;
                Action::Answer(len)
            }
            None => Action::Ignore,
        }
    }

    /// The record of `run_id`, made on first sight while there is room.
    fn run(&mut self, run_id: u64) -> Option<&mut RunSeen> {
        let runs = &mut self.counts.runs;
        match runs.iter().position(|r| r.run_id == run_id) {
            Some(i) => Some(&mut runs[i]),
            None if runs.len() < MAX_RUNS => {
                runs.push(RunSeen { run_id, ..Default::default() });
                runs.last_mut()
            }
            None => None,
        }
    }

    /// Forward losses summed over the runs.
    pub fn forward_lost(&self) -> u64 {
        self.counts.runs.iter().map(|r| r.forward_lost()).sum()
    }
}

/// What a reflector loop reads each round (the socket path's and the XDP path's; `busy`:
/// the XDP path's busy polling).
pub(super) struct ReflectLoop<'a> {
    pub(super) start: i64,
    pub(super) duration: Option<i64>,
    pub(super) count: Option<u64>,
    pub(super) busy: bool,
    pub(super) stop: &'a AtomicBool,
    pub(super) progress: &'a AtomicU64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(len: usize, run: u64, seq: u64) -> Vec<u8> {
        let mut b = vec![0u8; len];
        wire::write(&mut b, Kind::Request, run, seq, 1234);
        b
    }

    #[test]
    fn answers_requests_in_place_with_the_same_length() {
        let mut r = Reflector::new(None);
        for len in [16, 31, 32, 500, wire::MAX_LEN] {
            let mut b = request(len, 5, 0);
            let mut buf = vec![0u8; 65536];
            buf[..len].copy_from_slice(&b);
            assert_eq!(r.handle(&mut buf, len), Action::Answer(len));
            let h = wire::parse(&buf[..len]).unwrap();
            assert_eq!(h.kind, Kind::Reply);
            b[if len >= 32 { 5 } else { 2 }] = buf[if len >= 32 { 5 } else { 2 }];
            assert_eq!(&buf[..len], &b[..], "only the kind changed");
        }
    }

    #[test]
    fn ignores_everything_else() {
        let mut r = Reflector::new(None);
        let mut junk = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
        let n = junk.len();
        assert_eq!(r.handle(&mut junk, n), Action::Ignore);
        let mut reply = request(64, 1, 0);
        let h = wire::parse(&reply).unwrap();
        wire::to_reply(&mut reply, &h);
        assert_eq!(
            r.handle(&mut reply, 64),
            Action::Ignore,
            "a reply is never answered (no reflector loops)"
        );
        let mut tiny = vec![0u8; 4];
        assert_eq!(r.handle(&mut tiny, 4), Action::Ignore);
        let mut short = vec![0u8; 8];
        assert_eq!(
            r.handle(&mut short, 100),
            Action::Ignore,
            "a length beyond the buffer is refused"
        );
        assert_eq!((r.counts.malformed, r.counts.foreign, r.counts.answered), (3, 1, 0));
    }

    #[test]
    fn drop_every_n_drops_exactly_those_sequence_numbers() {
        let mut r = Reflector::new(Some(10));
        let mut answered = Vec::new();
        for seq in 0..100 {
            let mut b = request(64, 9, seq);
            if let Action::Answer(_) = r.handle(&mut b, 64) {
                answered.push(seq);
            }
        }
        assert_eq!(answered.len(), 90);
        assert!(answered.iter().all(|s| s % 10 != 9));
        assert_eq!(r.counts.dropped, 10);
        let run = r.counts.runs[0];
        assert_eq!((run.requests, run.answered, run.dropped, run.forward_lost()), (100, 90, 10, 0));
        // a hello is never dropped
        let mut h = vec![0u8; 64];
        wire::write(&mut h, Kind::Hello, 9, 9, 0);
        assert_eq!(r.handle(&mut h, 64), Action::Answer(64));
    }

    #[test]
    fn forward_gaps_duplicates_and_reordering() {
        let mut r = Reflector::new(None);
        for seq in [0u64, 1, 3, 2, 2, 5, 1] {
            let mut b = request(32, 3, seq);
            r.handle(&mut b, 32);
        }
        let run = r.counts.runs[0];
        assert_eq!(run.requests, 7);
        assert_eq!(run.duplicates, 2);
        assert_eq!(run.out_of_order, 1, "2 after 3");
        assert_eq!(run.forward_lost(), 1, "4 never came");
        assert_eq!(run.answered, 7, "duplicates are answered too: the client counts them");
    }

    #[test]
    fn runs_are_kept_apart_up_to_a_limit() {
        let mut r = Reflector::new(None);
        for run in 0..(MAX_RUNS as u64 + 3) {
            let mut b = request(32, run, 0);
            r.handle(&mut b, 32);
        }
        assert_eq!(r.counts.runs.len(), MAX_RUNS);
        assert_eq!(r.counts.other_runs_requests, 3);
    }
}
