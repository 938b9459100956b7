//! Counting what a receiver saw of a numbered stream: gaps (lost), duplicates and
//! out-of-order arrivals, with a fixed 1024-message window (no allocation after creation).
//!
//! Contract: `lost` counts sequence numbers skipped so far; an out-of-order arrival of a
//! skipped number takes it back out of `lost`. A number seen twice within the window is a
//! duplicate. Numbers older than the window are counted as out of order (a duplicate that
//! old cannot be told apart). Tail loss (never received after the last seen number) is the
//! caller's: `published - (highest + 1)`.

const WINDOW: u64 = 1024;

#[derive(Clone, Debug)]
pub struct SeqTracker {
    next: u64,
    seen: Box<[bool]>,
    pub received: u64,
    pub lost: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
}

impl Default for SeqTracker {
    fn default() -> Self {
        SeqTracker {
            next: 0,
            seen: vec![false; WINDOW as usize].into_boxed_slice(),
            received: 0,
            lost: 0,
            duplicates: 0,
            out_of_order: 0,
        }
    }
}

/// What one arrival was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// In order (possibly after a gap).
    New,
    /// Earlier than one already seen, first time.
    OutOfOrder,
    Duplicate,
}

impl SeqTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// The highest number seen (0 before any).
    pub fn highest(&self) -> u64 {
        self.next.saturating_sub(1)
    }

    /// Account for `seq`.
    pub fn arrive(&mut self, seq: u64) -> Arrival {
        let w = (seq % WINDOW) as usize;
        if seq >= self.next {
            // clear the window slots of skipped numbers (at most the window)
            let gap = seq - self.next;
            for s in self.next..self.next + gap.min(WINDOW) {
                self.seen[(s % WINDOW) as usize] = false;
            }
            self.lost += gap;
            self.seen[w] = true;
            self.next = seq + 1;
            self.received += 1;
            return Arrival::New;
        }
        if self.next - seq > WINDOW {
            self.received += 1;
            self.out_of_order += 1;
            self.lost = self.lost.saturating_sub(1);
            return Arrival::OutOfOrder;
        }
        if self.seen[w] {
            self.duplicates += 1;
            return Arrival::Duplicate;
        }
        self.seen[w] = true;
        self.received += 1;
        self.out_of_order += 1;
        self.lost = self.lost.saturating_sub(1);
        Arrival::OutOfOrder
    }

    /// The highest sequence number seen plus one (0: nothing yet).
    pub fn next_expected(&self) -> u64 {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_duplicates_and_reordering_are_counted_apart() {
        let mut t = SeqTracker::new();
        for s in [0, 1, 2, 5, 6, 6, 4, 9] {
            t.arrive(s);
        }
        // missing: 3, 7, 8 (4 came late)
        assert_eq!(t.lost, 3);
        assert_eq!(t.duplicates, 1);
        assert_eq!(t.out_of_order, 1);
        assert_eq!(t.received, 7);
        assert_eq!(t.next_expected(), 10);
    }

    #[test]
    fn a_duplicate_of_a_late_arrival_is_a_duplicate() {
        let mut t = SeqTracker::new();
        for s in [0, 2, 1, 1] {
            t.arrive(s);
        }
        assert_eq!((t.lost, t.out_of_order, t.duplicates, t.received), (0, 1, 1, 3));
    }

    #[test]
    fn large_gaps_do_not_loop_forever() {
        let mut t = SeqTracker::new();
        t.arrive(0);
        t.arrive(1_000_000_000);
        assert_eq!(t.lost, 999_999_999);
        assert_eq!(t.arrive(1_000_000_000), Arrival::Duplicate);
    }
}
