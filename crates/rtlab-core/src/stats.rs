//! Exact running statistics and the summary every probe reports.
//!
//! Contract: [`Running::record`] is O(1) and never allocates. min, max (with its sample
//! index and time), mean and standard deviation are exact (integer sums in i128);
//! percentiles come from the [`Histogram`] and lie inside the bucket that holds the exact
//! nearest-rank value (see `histogram.rs`). The standard deviation is the population one,
//! sqrt(n*Σx² - (Σx)²)/n, computed from exact integer sums (no catastrophic cancellation).

use crate::histogram::Histogram;
use serde::{Deserialize, Serialize};

/// Exact running moments and extremes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Running {
    pub count: u64,
    pub min: i64,
    pub max: i64,
    /// Index of the (first) maximum sample.
    pub max_index: u64,
    /// Time of the (first) maximum sample, ns since the start of the stream.
    pub max_at_ns: i64,
    sum: i128,
    sum_sq: i128,
}

impl Default for Running {
    fn default() -> Self {
        Running {
            count: 0,
            min: i64::MAX,
            max: i64::MIN,
            max_index: 0,
            max_at_ns: 0,
            sum: 0,
            sum_sq: 0,
        }
    }
}

impl Running {
    #[inline]
    pub fn record(&mut self, index: u64, at_ns: i64, v: i64) {
        self.count += 1;
        if v < self.min {
            self.min = v;
        }
        if v > self.max {
            self.max = v;
            self.max_index = index;
            self.max_at_ns = at_ns;
        }
        self.sum += v as i128;
        self.sum_sq += (v as i128) * (v as i128);
    }

    pub fn merge(&mut self, o: &Running) {
        if o.count == 0 {
            return;
        }
        self.count += o.count;
        self.min = self.min.min(o.min);
        if o.max > self.max {
            self.max = o.max;
            self.max_index = o.max_index;
            self.max_at_ns = o.max_at_ns;
        }
        self.sum += o.sum;
        self.sum_sq += o.sum_sq;
    }

    /// Mean rounded to the nearest ns.
    pub fn mean(&self) -> Option<i64> {
        if self.count == 0 {
            return None;
        }
        let n = self.count as i128;
        let half = if self.sum >= 0 { n / 2 } else { -(n / 2) };
        Some(((self.sum + half) / n) as i64)
    }

    /// Population standard deviation rounded to the nearest ns.
    pub fn stddev(&self) -> Option<i64> {
        if self.count == 0 {
            return None;
        }
        let n = self.count as i128;
        let var_n2 = n * self.sum_sq - self.sum * self.sum; // n^2 * variance, exact
        let var = var_n2 as f64 / (n as f64 * n as f64);
        Some(var.max(0.0).sqrt().round() as i64)
    }
}

/// The statistics of one stream, with the keys of the result schema (integers in ns).
/// Counters that do not apply to a probe are absent (None), not zero.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub count: u64,
    pub min_ns: Option<i64>,
    pub mean_ns: Option<i64>,
    pub stddev_ns: Option<i64>,
    pub p50_ns: Option<i64>,
    pub p90_ns: Option<i64>,
    pub p99_ns: Option<i64>,
    pub p99_9_ns: Option<i64>,
    pub p99_99_ns: Option<i64>,
    pub max_ns: Option<i64>,
    /// 0-based index of the sample that was the maximum.
    pub max_index: Option<u64>,
    /// When the maximum happened, ns since the stream started.
    pub max_at_ns: Option<i64>,
    /// Samples above the deadline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overruns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicates: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub out_of_order: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub malformed: Option<u64>,
}

impl Summary {
    /// Build the summary from exact moments and the histogram of the same samples.
    pub fn from_parts(r: &Running, h: &Histogram) -> Summary {
        if r.count == 0 {
            return Summary::default();
        }
        let q = |q: f64| h.quantile(q, r.min, r.max);
        Summary {
            count: r.count,
            min_ns: Some(r.min),
            mean_ns: r.mean(),
            stddev_ns: r.stddev(),
            p50_ns: q(0.50),
            p90_ns: q(0.90),
            p99_ns: q(0.99),
            p99_9_ns: q(0.999),
            p99_99_ns: q(0.9999),
            max_ns: Some(r.max),
            max_index: Some(r.max_index),
            max_at_ns: Some(r.max_at_ns),
            ..Summary::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn moments_match_a_vector(xs in prop::collection::vec(-1_000_000_000i64..1_000_000_000, 1..300)) {
            let mut r = Running::default();
            let mut h = Histogram::new();
            for (i, &x) in xs.iter().enumerate() { r.record(i as u64, i as i64 * 10, x); h.record(x); }
            let n = xs.len() as f64;
            let mean = xs.iter().map(|&x| x as f64).sum::<f64>() / n;
            let var = xs.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
            let s = Summary::from_parts(&r, &h);
            prop_assert_eq!(s.count, xs.len() as u64);
            prop_assert_eq!(s.min_ns, xs.iter().copied().min());
            prop_assert_eq!(s.max_ns, xs.iter().copied().max());
            let first_max = xs.iter().position(|&x| Some(x) == s.max_ns).unwrap() as u64;
            prop_assert_eq!(s.max_index, Some(first_max));
            prop_assert_eq!(s.max_at_ns, Some(first_max as i64 * 10));
            prop_assert!((s.mean_ns.unwrap() as f64 - mean).abs() <= 1.0);
            prop_assert!((s.stddev_ns.unwrap() as f64 - var.sqrt()).abs() <= 1.0 + var.sqrt() * 1e-9);
            // percentiles are ordered and inside [min, max]
            let ps = [s.min_ns, s.p50_ns, s.p90_ns, s.p99_ns, s.p99_9_ns, s.p99_99_ns, s.max_ns];
            for w in ps.windows(2) { prop_assert!(w[0] <= w[1], "{:?}", ps); }
        }

        #[test]
        fn merge_equals_one_stream(a in prop::collection::vec(-1_000i64..1_000_000, 0..100),
                                   b in prop::collection::vec(-1_000i64..1_000_000, 0..100)) {
            let mut ra = Running::default();
            let mut rb = Running::default();
            let mut rall = Running::default();
            for (i, &x) in a.iter().enumerate() { ra.record(i as u64, 0, x); rall.record(i as u64, 0, x); }
            for (i, &x) in b.iter().enumerate() { rb.record(i as u64, 0, x); }
            for &x in &b { rall.record(0, 0, x); }
            ra.merge(&rb);
            prop_assert_eq!(ra.count, rall.count);
            prop_assert_eq!(ra.mean(), rall.mean());
            prop_assert_eq!(ra.stddev(), rall.stddev());
            prop_assert_eq!((ra.min, ra.max), (rall.min, rall.max));
        }
    }

    #[test]
    fn empty_summary_has_no_values() {
        let s = Summary::from_parts(&Running::default(), &Histogram::new());
        assert_eq!(s.count, 0);
        assert_eq!(s.max_ns, None);
    }
}
