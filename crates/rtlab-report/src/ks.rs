//! Two distributions compared, for `rtlab compare`: the metric a threshold applies to, the
//! two-sample Kolmogorov-Smirnov test on two histograms (the method and its caveats in
//! `compare.rs`), and the verdict on one figure (same, better, worse, regression).

use rtlab_core::histogram::HistogramData;
use rtlab_core::stats::Summary;

/// The metric a threshold applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    P50,
    P99,
    P99_9,
    Max,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::P50 => "p50",
            Metric::P99 => "p99",
            Metric::P99_9 => "p99.9",
            Metric::Max => "max",
        }
    }
    pub fn of(self, s: &Summary) -> Option<i64> {
        match self {
            Metric::P50 => s.p50_ns,
            Metric::P99 => s.p99_ns,
            Metric::P99_9 => s.p99_9_ns,
            Metric::Max => s.max_ns,
        }
    }
}

/// How to decide.
#[derive(Clone, Copy, Debug)]
pub struct CompareConfig {
    pub metric: Metric,
    /// Percent growth of `metric` beyond which a significant difference is a regression.
    pub threshold_pct: Option<f64>,
    /// Significance level of the KS test.
    pub alpha: f64,
}

/// The result of the two-sample KS test.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ks {
    pub d: f64,
    pub p: f64,
    pub n_a: u64,
    pub n_b: u64,
}

/// Q_KS(λ) (Numerical Recipes §14.3 `probks`).
pub fn q_ks(lambda: f64) -> f64 {
    if lambda < 1e-3 {
        return 1.0;
    }
    let a2 = -2.0 * lambda * lambda;
    let mut sum = 0.0;
    let mut fac = 2.0;
    let mut prev = 0.0f64;
    for j in 1..=100 {
        let term = fac * (a2 * (j * j) as f64).exp();
        sum += term;
        if term.abs() <= 1e-3 * prev || term.abs() <= 1e-8 * sum.abs() {
            return sum.clamp(0.0, 1.0);
        }
        fac = -fac;
        prev = term.abs();
    }
    1.0 // did not converge: only for tiny lambda, where p is 1
}

/// Two-sample KS test on two histograms of the same scheme (None: a side is empty or the
/// schemes differ).
pub fn ks_histograms(a: &HistogramData, b: &HistogramData) -> Option<Ks> {
    if a.scheme != b.scheme
        || a.exact_below_ns != b.exact_below_ns
        || a.buckets_per_octave != b.buckets_per_octave
    {
        return None;
    }
    let n_a = a.buckets.iter().map(|x| x.count).sum::<u64>() + a.overflow_low + a.overflow_high;
    let n_b = b.buckets.iter().map(|x| x.count).sum::<u64>() + b.overflow_low + b.overflow_high;
    if n_a == 0 || n_b == 0 {
        return None;
    }
    let mut edges: Vec<i64> = a.buckets.iter().chain(&b.buckets).map(|x| x.high_ns).collect();
    edges.sort_unstable();
    edges.dedup();
    let (mut ia, mut ib) = (0usize, 0usize);
    let (mut ca, mut cb) = (a.overflow_low, b.overflow_low);
    let mut d = (ca as f64 / n_a as f64 - cb as f64 / n_b as f64).abs();
    for e in edges {
        while ia < a.buckets.len() && a.buckets[ia].high_ns <= e {
            ca += a.buckets[ia].count;
            ia += 1;
        }
        while ib < b.buckets.len() && b.buckets[ib].high_ns <= e {
            cb += b.buckets[ib].count;
            ib += 1;
        }
        d = d.max((ca as f64 / n_a as f64 - cb as f64 / n_b as f64).abs());
    }
    let ne = (n_a as f64 * n_b as f64) / (n_a + n_b) as f64;
    let sq = ne.sqrt();
    let p = q_ks((sq + 0.12 + 0.11 / sq) * d);
    Some(Ks { d, p, n_a, n_b })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No significant difference (p >= alpha) or no test possible.
    Same,
    Better,
    Worse,
    /// Worse beyond the threshold and significant.
    Regression,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Same => "same",
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::Regression => "REGRESSION",
        }
    }
}

/// compare's verdict on one figure: `delta_pct` its growth in percent (None when A's value
/// is not above zero), `ks` the test on its distributions.
pub fn verdict(ks: Option<Ks>, delta_pct: Option<f64>, cfg: CompareConfig) -> Verdict {
    let significant = ks.is_some_and(|k| k.p < cfg.alpha);
    match (significant, delta_pct) {
        (false, _) | (true, None) => Verdict::Same,
        (true, Some(d)) if cfg.threshold_pct.is_some_and(|t| d > t) => Verdict::Regression,
        (true, Some(d)) if d > 0.0 => Verdict::Worse,
        (true, Some(_)) => Verdict::Better,
    }
}
