//! A preallocated log-linear histogram of signed nanosecond samples, with no silent overflow.
//!
//! Contract: `record` never allocates, locks or fails; it is O(1). Values with magnitude
//! below 256 ns have their own bucket (exact, ns resolution); above that every power of two
//! is split into 128 linear buckets, so a bucket is never wider than 1/128 (0.79 %) of its
//! lower bound. Magnitudes at or above [`Histogram::LIMIT_NS`] (2^36 ns, 68.7 s) are counted
//! in an explicit overflow counter (positive and negative apart), never dropped.
//! Negative samples (a timer that fired early) have a mirror array.
//!
//! The scheme is the one of HdrHistogram (Gil Tene, "HdrHistogram: A High Dynamic Range
//! Histogram") with 8 significant bits; the explicit overflow counter follows rt-tests'
//! `src/lib/histogram.c`.

use serde::{Deserialize, Serialize};

const SUB_BITS: u32 = 8;
const EXACT: u64 = 1 << SUB_BITS; // 256: values below are exact
const HALF: u64 = EXACT / 2; // 128 linear buckets per power of two above
const TOP_EXP: u32 = 36; // values below 2^36 ns are bucketed
const BUCKETS: usize = (EXACT + (TOP_EXP - SUB_BITS) as u64 * HALF) as usize;

/// The bucket index of a magnitude below [`Histogram::LIMIT_NS`].
#[inline]
fn index_of(v: u64) -> usize {
    if v < EXACT {
        v as usize
    } else {
        let e = 63 - v.leading_zeros(); // floor(log2 v) >= SUB_BITS
        let shift = e - (SUB_BITS - 1);
        let m = v >> shift; // in [HALF, EXACT)
        (EXACT + (e - SUB_BITS) as u64 * HALF + (m - HALF)) as usize
    }
}

/// The inclusive magnitude range `[low, high]` of bucket `idx`.
#[inline]
pub fn bucket_range(idx: usize) -> (u64, u64) {
    let i = idx as u64;
    if i < EXACT {
        (i, i)
    } else {
        let k = i - EXACT;
        let e = SUB_BITS as u64 + k / HALF;
        let m = HALF + k % HALF;
        let shift = e - (SUB_BITS as u64 - 1);
        (m << shift, ((m + 1) << shift) - 1)
    }
}

/// The log-linear histogram. Allocates once, in [`Histogram::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram {
    pos: Box<[u64]>,
    neg: Box<[u64]>,
    overflow_pos: u64,
    overflow_neg: u64,
    count: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

/// Where a rank falls: in a bucket (its signed inclusive range), or beyond the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankBucket {
    /// A bucket holding values in `[low, high]` (signed ns).
    Bucket { low: i64, high: i64 },
    /// At or above `+LIMIT_NS`.
    OverflowHigh,
    /// At or below `-LIMIT_NS`.
    OverflowLow,
}

impl Histogram {
    /// Magnitudes at or above this are counted as overflow.
    pub const LIMIT_NS: i64 = 1 << TOP_EXP;

    pub fn new() -> Self {
        Histogram {
            pos: vec![0; BUCKETS].into_boxed_slice(),
            neg: vec![0; BUCKETS].into_boxed_slice(),
            overflow_pos: 0,
            overflow_neg: 0,
            count: 0,
        }
    }

    /// Count one sample. Never allocates.
    #[inline]
    pub fn record(&mut self, v: i64) {
        self.count += 1;
        let a = v.unsigned_abs();
        if a >= Self::LIMIT_NS as u64 {
            if v >= 0 {
                self.overflow_pos += 1
            } else {
                self.overflow_neg += 1
            }
            return;
        }
        let i = index_of(a);
        if v >= 0 {
            self.pos[i] += 1
        } else {
            self.neg[i] += 1
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }
    pub fn overflow_high(&self) -> u64 {
        self.overflow_pos
    }
    pub fn overflow_low(&self) -> u64 {
        self.overflow_neg
    }

    /// Add another histogram's counts into this one.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.pos.iter_mut().zip(other.pos.iter()) {
            *a += b;
        }
        for (a, b) in self.neg.iter_mut().zip(other.neg.iter()) {
            *a += b;
        }
        self.overflow_pos += other.overflow_pos;
        self.overflow_neg += other.overflow_neg;
        self.count += other.count;
    }

    /// Non-empty buckets in ascending value order, as signed inclusive ranges with counts.
    pub fn buckets(&self) -> Vec<HistogramBucket> {
        let mut out = Vec::new();
        for (i, &c) in self.neg.iter().enumerate().rev() {
            if c > 0 {
                let (lo, hi) = bucket_range(i);
                out.push(HistogramBucket { low_ns: -(hi as i64), high_ns: -(lo as i64), count: c });
            }
        }
        for (i, &c) in self.pos.iter().enumerate() {
            if c > 0 {
                let (lo, hi) = bucket_range(i);
                out.push(HistogramBucket { low_ns: lo as i64, high_ns: hi as i64, count: c });
            }
        }
        out
    }

    /// The bucket that holds the sample of 1-based `rank` in ascending order.
    pub fn bucket_at_rank(&self, rank: u64) -> Option<RankBucket> {
        if rank == 0 || rank > self.count {
            return None;
        }
        let mut seen = self.overflow_neg;
        if rank <= seen {
            return Some(RankBucket::OverflowLow);
        }
        for (i, &c) in self.neg.iter().enumerate().rev() {
            seen += c;
            if c > 0 && rank <= seen {
                let (lo, hi) = bucket_range(i);
                return Some(RankBucket::Bucket { low: -(hi as i64), high: -(lo as i64) });
            }
        }
        for (i, &c) in self.pos.iter().enumerate() {
            seen += c;
            if c > 0 && rank <= seen {
                let (lo, hi) = bucket_range(i);
                return Some(RankBucket::Bucket { low: lo as i64, high: hi as i64 });
            }
        }
        Some(RankBucket::OverflowHigh)
    }

    /// The nearest-rank quantile `q` in (0, 1] (rank = ceil(q * n)), as a value inside the
    /// holding bucket clamped to the exact `[min, max]` seen. None when empty.
    pub fn quantile(&self, q: f64, min: i64, max: i64) -> Option<i64> {
        if self.count == 0 {
            return None;
        }
        let rank = nearest_rank(q, self.count);
        let v = match self.bucket_at_rank(rank)? {
            RankBucket::Bucket { high, .. } => high,
            RankBucket::OverflowHigh => Self::LIMIT_NS,
            RankBucket::OverflowLow => -Self::LIMIT_NS,
        };
        Some(v.clamp(min, max))
    }

    /// The serializable form (non-empty buckets only).
    pub fn to_data(&self) -> HistogramData {
        HistogramData {
            scheme: "log-linear".into(),
            exact_below_ns: EXACT as i64,
            buckets_per_octave: HALF as u32,
            limit_ns: Self::LIMIT_NS,
            overflow_high: self.overflow_pos,
            overflow_low: self.overflow_neg,
            buckets: self.buckets(),
        }
    }
}

/// The 1-based nearest rank of quantile `q` among `n` samples: ceil(q * n), at least 1.
/// (Hyndman & Fan 1996, definition 1, as used by HdrHistogram and most latency tools.)
pub fn nearest_rank(q: f64, n: u64) -> u64 {
    let r = (q * n as f64).ceil() as u64;
    r.clamp(1, n)
}

/// One non-empty bucket: samples `low_ns <= v <= high_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistogramBucket {
    pub low_ns: i64,
    pub high_ns: i64,
    pub count: u64,
}

/// A histogram as stored in result files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistogramData {
    pub scheme: String,
    pub exact_below_ns: i64,
    pub buckets_per_octave: u32,
    pub limit_ns: i64,
    pub overflow_high: u64,
    pub overflow_low: u64,
    pub buckets: Vec<HistogramBucket>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_tile_the_range_without_gaps() {
        let mut expect_low = 0u64;
        for i in 0..BUCKETS {
            let (lo, hi) = bucket_range(i);
            assert_eq!(lo, expect_low, "bucket {i}");
            assert!(hi >= lo);
            assert_eq!(index_of(lo), i);
            assert_eq!(index_of(hi), i);
            if lo >= EXACT {
                // width never above 1/128 of the lower bound
                assert!((hi - lo + 1) * 128 <= lo, "bucket {i} [{lo},{hi}]");
            }
            expect_low = hi + 1;
        }
        assert_eq!(expect_low, Histogram::LIMIT_NS as u64);
    }

    #[test]
    fn overflow_is_counted_not_dropped() {
        let mut h = Histogram::new();
        h.record(Histogram::LIMIT_NS);
        h.record(i64::MAX);
        h.record(-Histogram::LIMIT_NS);
        h.record(5);
        assert_eq!(h.count(), 4);
        assert_eq!(h.overflow_high(), 2);
        assert_eq!(h.overflow_low(), 1);
        assert_eq!(h.bucket_at_rank(1), Some(RankBucket::OverflowLow));
        assert_eq!(h.bucket_at_rank(2), Some(RankBucket::Bucket { low: 5, high: 5 }));
        assert_eq!(h.bucket_at_rank(4), Some(RankBucket::OverflowHigh));
    }

    proptest! {
        /// Every quantile's bucket holds the value a sorted vector gives (the oracle).
        #[test]
        fn quantiles_match_a_sorted_vector(
            mut xs in prop::collection::vec(
                prop_oneof![
                    -2_000i64..2_000,
                    -5_000_000i64..50_000_000,
                    0i64..5_000_000_000,
                ], 1..400),
            q in 0.0001f64..1.0,
        ) {
            let mut h = Histogram::new();
            for &x in &xs { h.record(x); }
            xs.sort_unstable();
            let n = xs.len() as u64;
            let rank = nearest_rank(q, n);
            let oracle = xs[(rank - 1) as usize];
            match h.bucket_at_rank(rank).unwrap() {
                RankBucket::Bucket { low, high } => {
                    prop_assert!(low <= oracle && oracle <= high, "q={q} oracle={oracle} bucket=[{low},{high}]");
                }
                other => prop_assert!(false, "unexpected {:?}", other),
            }
            let v = h.quantile(q, xs[0], xs[xs.len() - 1]).unwrap();
            let err = (v - oracle).abs();
            prop_assert!(err <= 1 || err as f64 <= oracle.abs() as f64 / 128.0 + 1.0, "q={q} v={v} oracle={oracle}");
        }

        #[test]
        fn merge_equals_recording_everything(a in prop::collection::vec(-10_000_000i64..10_000_000, 0..200),
                                              b in prop::collection::vec(-10_000_000i64..10_000_000, 0..200)) {
            let mut ha = Histogram::new();
            let mut hb = Histogram::new();
            let mut hall = Histogram::new();
            for &x in &a { ha.record(x); hall.record(x); }
            for &x in &b { hb.record(x); hall.record(x); }
            ha.merge(&hb);
            prop_assert_eq!(ha, hall);
        }
    }
}
