//! What the monitor's measuring threads share with its main loop: atomics only (the threads
//! never lock, allocate or print), read by the main loop once an interval.
//!
//! Contract: a [`Histogram`] has fixed bucket bounds ([`BOUNDS_NS`]); `record` is a few
//! relaxed atomic adds and a CAS-free max. [`IntervalMax::take`] returns the interval's
//! maximum and starts the next one. Counters only grow (OpenMetrics counters).

use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU64, Ordering};

/// The histograms' upper bounds, ns (the last bucket, +Inf, is implied): 10 us to 100 ms.
pub const BOUNDS_NS: [i64; 14] = [
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    1_000_000_000,
];

/// A latency histogram with cumulative export (OpenMetrics `le` buckets).
pub struct Histogram {
    /// Per bucket (not cumulative); the last is above every bound.
    buckets: [AtomicU64; BOUNDS_NS.len() + 1],
    count: AtomicU64,
    sum_ns: AtomicI64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum_ns: AtomicI64::new(0),
        }
    }
}

impl Histogram {
    pub fn record(&self, ns: i64) {
        let i = BOUNDS_NS.iter().position(|&b| ns <= b).unwrap_or(BOUNDS_NS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// (upper bound ns or None for +Inf, cumulative count), count, sum ns.
    pub fn snapshot(&self) -> (Vec<(Option<i64>, u64)>, u64, i64) {
        let mut acc = 0u64;
        let mut v = Vec::with_capacity(self.buckets.len());
        for (i, b) in self.buckets.iter().enumerate() {
            acc += b.load(Ordering::Relaxed);
            v.push((BOUNDS_NS.get(i).copied(), acc));
        }
        // the count read after the buckets: never below their sum in the export
        let count = self.count.load(Ordering::Relaxed).max(acc);
        (v, count, self.sum_ns.load(Ordering::Relaxed))
    }
}

/// The maximum of an interval.
pub struct IntervalMax(AtomicI64);

impl Default for IntervalMax {
    fn default() -> Self {
        IntervalMax(AtomicI64::new(i64::MIN))
    }
}

impl IntervalMax {
    pub fn record(&self, v: i64) {
        self.0.fetch_max(v, Ordering::Relaxed);
    }
    /// The interval's maximum (None: nothing recorded), and a new interval begun.
    pub fn take(&self) -> Option<i64> {
        let v = self.0.swap(i64::MIN, Ordering::Relaxed);
        (v != i64::MIN).then_some(v)
    }
}

/// The timer canary's counts.
#[derive(Default)]
pub struct CanaryStats {
    /// Wake-up latency: the wake-up's time minus the expiry asked for.
    pub latency: Histogram,
    pub max: IntervalMax,
    /// Wake-ups later than the deadline.
    pub misses: AtomicU64,
    /// Expiries skipped because a wake-up came after the next one.
    pub overruns: AtomicU64,
    /// The canary thread's id (0 until it runs): its CPU time is read from /proc.
    pub tid: AtomicI32,
    /// Wake-ups above `trace_on_spike` that raised the tracer's flag.
    pub spikes: AtomicU64,
}

/// A watched topic's counts.
#[derive(Default)]
pub struct TopicStats {
    pub messages: AtomicU64,
    /// Arrival period (between two arrivals).
    pub period: Histogram,
    pub max_period: IntervalMax,
    /// Messages this interval.
    pub interval_messages: AtomicU64,
    /// CLOCK_MONOTONIC of the last arrival (0: none yet).
    pub last_ns: AtomicI64,
    /// Header delay (arrival wall clock - the Header stamp), where asked.
    pub delay: Histogram,
    pub max_delay: IntervalMax,
    /// Writers matched now (0: the topic has no publisher the reader sees).
    pub writers: AtomicU64,
    /// Takes that failed.
    pub errors: AtomicU64,
    /// The shortest Deadline QoS its writers offered when its reader opened, ns (0: none).
    pub writers_deadline_ns: AtomicI64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_exports_cumulative_buckets_and_an_interval_max_restarts() {
        let h = Histogram::default();
        for v in [5_000, 10_000, 10_001, 3_000_000, 2_000_000_000] {
            h.record(v);
        }
        let (b, count, sum) = h.snapshot();
        assert_eq!(count, 5);
        assert_eq!(sum, 5_000 + 10_000 + 10_001 + 3_000_000 + 2_000_000_000);
        assert_eq!(b[0], (Some(10_000), 2), "le 10 us holds 10 us itself");
        assert_eq!(b[1], (Some(20_000), 3));
        assert_eq!(b[8], (Some(5_000_000), 4));
        assert_eq!(*b.last().unwrap(), (None, 5));
        let m = IntervalMax::default();
        assert_eq!(m.take(), None);
        m.record(3);
        m.record(-1);
        assert_eq!(m.take(), Some(3));
        assert_eq!(m.take(), None);
    }
}
