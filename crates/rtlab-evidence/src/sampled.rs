//! The sampler's counters in memory: one increase per sampling period, kept in fixed rows
//! (one allocation, made at the first entry) that merge in pairs past their capacity, and
//! aligned afterwards with a stream's windows ([`SampledCounters::align`]).
//!
//! Contract: after the first entry [`SampledCounters::push`] allocates nothing and drops
//! nothing (merged neighbours double the period); what a result keeps is rtlab-core's
//! [`WindowCounters`].

use rtlab_core::evidence::{KernelCounters, WindowCounters};

/// What the sampler read: one increase per sampling period from `start_monotonic_ns`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SampledCounters {
    /// The period of each entry of `deltas` (the sampling period, doubled at each merge).
    pub period_ns: i64,
    pub start_monotonic_ns: i64,
    /// The entries, filled by [`SampledCounters::finish`] (while sampling they are kept in
    /// fixed rows, so the sampler's memory does not grow).
    pub deltas: Vec<KernelCounters>,
    pub last_partial: bool,
    /// Samples taken every `base_ns`, added up until they fill one entry.
    base_ns: i64,
    pending: KernelCounters,
    pending_n: i64,
    rows: Rows,
}

/// The most memory the entries kept while sampling take (their rows are allocated and
/// touched once, at the first entry): fewer entries before merging on a many-CPU machine.
pub const SAMPLED_BYTES: usize = 4 << 20;

/// The entries kept while sampling: one fixed-width row of counters each (the per-CPU
/// lists laid out as the first entry had them, then the context switches), all in one
/// allocation made and written when the first entry comes. A CPU that comes online later
/// in the case is not counted (its column does not exist).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Rows {
    /// Lengths of net_rx, timer, interrupts, ksoftirqd_ns, steal_ticks.
    lens: [usize; 5],
    width: usize,
    cells: Vec<u64>,
    n: usize,
    cap: usize,
}

impl Rows {
    fn lists(c: &KernelCounters) -> [&[u64]; 5] {
        [&c.net_rx, &c.timer, &c.interrupts, &c.ksoftirqd_ns, &c.steal_ticks]
    }

    /// Laid out for entries like `c`, at most `capacity` rows (even) within [`SAMPLED_BYTES`].
    fn start(&mut self, c: &KernelCounters, capacity: usize) {
        self.lens = Self::lists(c).map(|l| l.len());
        self.width = self.lens.iter().sum::<usize>() + 1;
        let fit = SAMPLED_BYTES / (self.width * 8);
        self.cap = (capacity.min(fit).max(2) / 2) * 2;
        // written, not just reserved (`vec![0; n]` would get untouched zero pages from calloc):
        // the pages are the process's from the start
        #[allow(clippy::slow_vector_initialization)]
        let cells = {
            let mut cells = Vec::with_capacity(self.cap * self.width);
            cells.resize(self.cap * self.width, 0);
            cells
        };
        self.cells = cells;
    }

    fn write(&mut self, c: &KernelCounters) {
        let mut at = self.n * self.width;
        for (list, len) in Self::lists(c).into_iter().zip(self.lens) {
            for i in 0..len {
                self.cells[at + i] = list.get(i).copied().unwrap_or(0);
            }
            at += len;
        }
        self.cells[at] = c.context_switches;
        self.n += 1;
    }

    fn read(&self, row: usize) -> KernelCounters {
        let cells = &self.cells[row * self.width..(row + 1) * self.width];
        let mut lists = Vec::with_capacity(5);
        let mut at = 0;
        for len in self.lens {
            lists.push(cells[at..at + len].to_vec());
            at += len;
        }
        let mut it = lists.into_iter();
        let mut next = || it.next().unwrap_or_default();
        KernelCounters {
            net_rx: next(),
            timer: next(),
            interrupts: next(),
            ksoftirqd_ns: next(),
            steal_ticks: next(),
            context_switches: cells[at],
        }
    }

    /// Neighbours in pairs: row i = rows 2i + 2i+1 (in place; `n` is even).
    fn merge(&mut self) {
        let w = self.width;
        for i in 0..self.n / 2 {
            for c in 0..w {
                self.cells[i * w + c] = self.cells[2 * i * w + c] + self.cells[(2 * i + 1) * w + c];
            }
        }
        self.n /= 2;
        self.cells[self.n * w..].fill(0);
    }
}

impl SampledCounters {
    /// Nothing sampled yet; samples come every `period_ns` from `start_monotonic_ns`.
    pub fn new(period_ns: i64, start_monotonic_ns: i64) -> SampledCounters {
        let period_ns = period_ns.max(1);
        SampledCounters { period_ns, start_monotonic_ns, base_ns: period_ns, ..Default::default() }
    }

    /// Add the increase over the next sampling period. Past `capacity` entries (fewer on a
    /// machine so large that they would not fit in [`SAMPLED_BYTES`]), neighbours merge in
    /// pairs and an entry covers twice as many sampling periods, so the entries always have
    /// the same width (`period_ns`) and nothing is dropped. Allocates nothing after the first
    /// entry.
    pub fn push(&mut self, c: KernelCounters, capacity: usize) {
        if self.pending_n == 0 {
            self.pending = c;
        } else {
            self.pending.add(&c);
        }
        self.pending_n += 1;
        if self.pending_n * self.base_ns < self.period_ns {
            return;
        }
        if self.rows.cap == 0 {
            self.rows.start(&self.pending, capacity);
        }
        self.rows.write(&self.pending);
        self.pending_n = 0;
        if self.rows.n >= self.rows.cap {
            self.rows.merge();
            self.period_ns *= 2;
        }
    }

    /// The end of the sampling: samples not yet filling an entry become the last (partial) one.
    pub fn finish(&mut self, cut_short: bool) {
        self.deltas = (0..self.rows.n).map(|r| self.rows.read(r)).collect();
        self.rows = Rows::default();
        if self.pending_n > 0 {
            self.deltas.push(std::mem::take(&mut self.pending));
            self.pending_n = 0;
            self.last_partial = true;
        } else {
            self.last_partial = cut_short;
        }
    }

    /// Onto a stream's grid (origin `start`, None: the sampling's own start; `width_ns` its
    /// window width; at most `max_windows`, the stream's own count): each sampling period goes
    /// to the window holding its midpoint; periods before the origin (the probe's set-up) or
    /// past the stream's last window (its tear-down) are left out.
    pub fn align(&self, start: Option<i64>, width_ns: i64, max_windows: usize) -> WindowCounters {
        let origin = start.unwrap_or(self.start_monotonic_ns);
        let width = width_ns.max(1);
        let mut windows: Vec<KernelCounters> = Vec::new();
        let mut last_partial = false;
        for (i, d) in self.deltas.iter().enumerate() {
            let mid = self.start_monotonic_ns + i as i64 * self.period_ns + self.period_ns / 2;
            if mid < origin {
                continue;
            }
            let k = ((mid - origin) / width) as usize;
            if k >= max_windows {
                continue;
            }
            if windows.len() <= k {
                windows.resize(k + 1, KernelCounters::default());
            }
            windows[k].add(d);
            last_partial = i + 1 == self.deltas.len() && self.last_partial;
        }
        WindowCounters {
            width_ns: width,
            start_monotonic_ns: start,
            resolution_ns: self.period_ns,
            windows,
            last_partial,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use rtlab_core::testing::counters as k;

    #[test]
    fn past_capacity_periods_merge_and_the_totals_stay() {
        let mut w = SampledCounters::new(1_000, 0);
        for i in 0..10 {
            w.push(k(i), 4);
        }
        w.finish(false);
        // 0+1, 2+3 merged into 0-3 at the 4th entry; then 4+5, 6+7 (period 2000); 8+9 in the end
        assert_eq!(w.period_ns, 4_000);
        assert_eq!(
            w.deltas.iter().map(|c| c.context_switches).collect::<Vec<_>>(),
            vec![1 + 2 + 3, 4 + 5 + 6 + 7, 8 + 9]
        );
        assert!(w.last_partial, "8+9 is half an entry");
    }

    #[test]
    fn sampling_keeps_one_allocation_and_every_count() {
        let mut w = SampledCounters::new(10, 0);
        w.push(k(1), 64);
        let (ptr, cap) = (w.rows.cells.as_ptr(), w.rows.cells.capacity());
        assert_eq!(cap, 64 * (2 * 5 + 1), "64 rows of 5 lists of 2 CPUs + context switches");
        for i in 2..=1000 {
            w.push(k(i), 64);
            assert_eq!((w.rows.cells.as_ptr(), w.rows.cells.capacity()), (ptr, cap));
        }
        w.finish(false);
        let total = |f: &dyn Fn(&KernelCounters) -> u64| w.deltas.iter().map(f).sum::<u64>();
        assert_eq!(total(&|c| c.context_switches), 1000 * 1001 / 2);
        assert_eq!(total(&|c| c.ksoftirqd_ns[1]), 1000 * 1001 / 2 * 1000);
        assert_eq!(total(&|c| c.net_rx[0]), (1..=1000u64).sum::<u64>());
        assert!(
            w.deltas.len() <= 64 && w.period_ns == 10 * 16,
            "{} {}",
            w.deltas.len(),
            w.period_ns
        );
        // a machine too large for the budget keeps fewer rows before merging
        let mut big = SampledCounters::new(10, 0);
        let cpus = KernelCounters {
            net_rx: vec![1; 4096],
            timer: vec![1; 4096],
            interrupts: vec![1; 4096],
            ksoftirqd_ns: vec![1; 4096],
            context_switches: 1,
            steal_ticks: vec![1; 4096],
        };
        big.push(cpus, 1 << 14);
        assert!(big.rows.cells.len() * 8 <= SAMPLED_BYTES && big.rows.cap >= 2);
    }

    #[test]
    fn alignment_puts_each_period_in_the_window_of_its_midpoint() {
        // sampled every 250 from t=1000; the stream started at t=1600 with windows of 1000
        let mut w = SampledCounters::new(250, 1_000);
        for i in 0..12 {
            w.push(k(i), 64);
        }
        w.finish(true);
        let a = w.align(Some(1_600), 1_000, 16);
        assert_eq!(a.start_monotonic_ns, Some(1_600));
        assert_eq!(a.resolution_ns, 250);
        // periods 0-1 (midpoints 1125, 1375) and 2 (1625) ... : 0 and 1 are before the start
        assert_eq!(a.windows[0].context_switches, 2 + 3 + 4 + 5, "midpoints 1625..2375");
        assert_eq!(a.windows[1].context_switches, 6 + 7 + 8 + 9);
        assert_eq!(a.windows[2].context_switches, 10 + 11);
        assert!(a.last_partial);
        let own = w.align(None, 1_000, 16);
        assert_eq!(own.windows[0].context_switches, 1 + 2 + 3);
        // no more windows than the stream has, whatever the origin says
        assert_eq!(w.align(Some(1_600), 1_000, 2).windows.len(), 2);
        assert!(
            w.align(Some(-1_000_000_000_000), 1_000, 16).windows.is_empty(),
            "an origin far before the sampling"
        );
    }
}
