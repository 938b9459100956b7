//! Comparing two runs case by case (`rtlab compare RUN_A RUN_B`).
//!
//! Cases are matched by name, streams by name inside a case; the streams compared are the
//! headline metric's (`all`, threads, subscribers — not the derived jitter streams). For
//! each pair: p50 / p99 / p99.9 / max differences in percent, missed and lost, and a
//! two-sample Kolmogorov-Smirnov test on the stored histograms.
//!
//! The test: D = max |F_A(x) - F_B(x)| over the bucket edges of the two histograms (both
//! use the same log-linear scheme, so their buckets coincide; overflow counts sit below or
//! above every edge). The p-value is the asymptotic Kolmogorov distribution
//! Q_KS(λ) = 2 Σ_{j≥1} (-1)^{j-1} exp(-2 j² λ²), λ = (√nₑ + 0.12 + 0.11/√nₑ) D,
//! nₑ = n_A n_B / (n_A + n_B) — Press, Teukolsky, Vetterling, Flannery, "Numerical Recipes
//! in C", 2nd ed., §14.3 (`kstwo`, `probks`). Caveats (stated in docs/reports.md): D from
//! bucketed CDFs is at most the exact D (the test can only be more conservative), but
//! latency samples of one run are not independent (bursts), which makes p optimistic; read
//! p as a screen, not a proof.
//!
//! A stream REGRESSES when a threshold is set, the chosen metric grew by more than the
//! threshold percent, and the KS test finds the distributions different (p < alpha).
//!
//! Noise cases (`rtlab noise`) are compared per CPU in their own table ([`crate::noise`]):
//! stolen %, the longest gap and the rate of gaps, the first two judged by the same rule
//! with the same threshold (whatever `--metric`); their gap streams are not also latency
//! streams here, so a noise regression is counted once.

pub use crate::ks::{ks_histograms, q_ks, verdict, CompareConfig, Ks, Metric, Verdict};
use crate::model::{headline, status};

use crate::table::align;
use rtlab_core::run::{CaseRecord, Run};
use rtlab_core::schema::Stream;
use rtlab_core::stats::Summary;
use rtlab_core::units::us_1;
use std::fmt::Write as _;

/// One compared stream.
#[derive(Clone, Debug)]
pub struct StreamDiff {
    pub case: String,
    pub stream: String,
    pub a: Summary,
    pub b: Summary,
    pub ks: Option<Ks>,
    /// Percent change of the chosen metric (None when A's value is not above zero).
    pub delta_pct: Option<f64>,
    pub verdict: Verdict,
}

/// The comparison of two runs.
#[derive(Clone, Debug)]
pub struct Comparison {
    pub run_a: i64,
    pub run_b: i64,
    pub config: CompareConfig,
    pub streams: Vec<StreamDiff>,
    /// Cases only in A / only in B.
    pub only_a: Vec<String>,
    pub only_b: Vec<String>,
    /// Matched cases where a side has nothing measured: (case, status A, status B).
    pub unmeasured: Vec<(String, String, String)>,
    /// What the matched cases cost in each run (shown, not judged).
    pub costs: Vec<crate::cost::CostDiff>,
    /// The noise of the matched noise cases, per CPU (judged: see [`crate::noise`]).
    pub noise: Vec<crate::noise::NoiseDiff>,
}

impl Comparison {
    /// Latency streams and noise CPUs that regressed.
    pub fn regressions(&self) -> usize {
        self.streams.iter().filter(|s| s.verdict == Verdict::Regression).count()
            + self.noise.iter().filter(|n| n.verdict == Verdict::Regression).count()
    }
}

/// The headline metric's streams of a case (none for a noise case: its gap streams are
/// compared as noise, per CPU).
fn compared_streams(c: &CaseRecord) -> Vec<&Stream> {
    let Some(h) = headline(c) else { return Vec::new() };
    if h.metric == crate::summary::noise::GAP_METRIC {
        return Vec::new();
    }
    c.document
        .as_ref()
        .map(|d| d.streams.iter().filter(|s| s.metric == h.metric).collect())
        .unwrap_or_default()
}

fn pct(a: Option<i64>, b: Option<i64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a > 0 => Some((b - a) as f64 / a as f64 * 100.0),
        _ => None,
    }
}

/// Compare run `b` against run `a` (the reference).
pub fn compare(a: &Run, b: &Run, cfg: CompareConfig) -> Comparison {
    let mut out = Comparison {
        run_a: a.id,
        run_b: b.id,
        config: cfg,
        streams: Vec::new(),
        only_a: Vec::new(),
        only_b: Vec::new(),
        unmeasured: Vec::new(),
        costs: crate::cost::cost_diffs(a, b),
        noise: crate::noise::noise_diffs(a, b, cfg),
    };
    for ca in &a.cases {
        let Some(cb) = b.cases.iter().find(|c| c.name == ca.name) else {
            out.only_a.push(ca.name.clone());
            continue;
        };
        if crate::noise::is_noise_case(ca) && crate::noise::is_noise_case(cb) {
            continue; // in `noise`
        }
        let (sa, sb) = (compared_streams(ca), compared_streams(cb));
        if sa.is_empty() || sb.is_empty() {
            out.unmeasured.push((ca.name.clone(), status(ca).0.into(), status(cb).0.into()));
            continue;
        }
        for x in sa {
            let Some(y) = sb.iter().find(|s| s.name == x.name) else { continue };
            let ks = ks_histograms(&x.histogram, &y.histogram);
            let delta_pct = pct(cfg.metric.of(&x.stats), cfg.metric.of(&y.stats));
            let verdict = verdict(ks, delta_pct, cfg);
            out.streams.push(StreamDiff {
                case: ca.name.clone(),
                stream: x.name.clone(),
                a: x.stats.clone(),
                b: y.stats.clone(),
                ks,
                delta_pct,
                verdict,
            });
        }
    }
    for cb in &b.cases {
        if !a.cases.iter().any(|c| c.name == cb.name) {
            out.only_b.push(cb.name.clone());
        }
    }
    out
}

fn cell(a: Option<i64>, b: Option<i64>) -> String {
    let f = |v: Option<i64>| v.map(us_1).unwrap_or_else(|| "-".into());
    match pct(a, b) {
        Some(p) => format!("{} -> {} ({:+.0}%)", f(a), f(b), p),
        None => format!("{} -> {}", f(a), f(b)),
    }
}

fn count(a: Option<u64>, b: Option<u64>) -> String {
    match (a, b) {
        (None, None) => "-".into(),
        _ => format!(
            "{} -> {}",
            a.map(|v| v.to_string()).unwrap_or_else(|| "-".into()),
            b.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
        ),
    }
}

/// The comparison as a terminal table.
pub fn render(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Run {} (A) -> run {} (B): {} stream(s) compared{}",
        c.run_a,
        c.run_b,
        c.streams.len(),
        if c.noise.is_empty() {
            String::new()
        } else {
            format!(", {} noise row(s) (case / cpu)", c.noise.len())
        }
    );
    let mut rows = vec![[
        "case / stream",
        "verdict",
        "p50 (us)",
        "p99 (us)",
        "p99.9 (us)",
        "max (us)",
        "missed",
        "lost",
        "KS D",
        "KS p",
    ]
    .map(String::from)
    .to_vec()];
    for s in &c.streams {
        rows.push(vec![
            format!("{} / {}", s.case, s.stream),
            s.verdict.name().into(),
            cell(s.a.p50_ns, s.b.p50_ns),
            cell(s.a.p99_ns, s.b.p99_ns),
            cell(s.a.p99_9_ns, s.b.p99_9_ns),
            cell(s.a.max_ns, s.b.max_ns),
            count(s.a.missed, s.b.missed),
            count(s.a.lost, s.b.lost),
            s.ks.map(|k| format!("{:.3}", k.d)).unwrap_or_else(|| "-".into()),
            s.ks.map(|k| if k.p < 1e-4 { "<1e-4".to_string() } else { format!("{:.4}", k.p) })
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    if !c.streams.is_empty() || c.noise.is_empty() {
        out.push_str(&align(&rows));
    }
    out.push_str(&crate::noise::render_noise_diffs(&c.noise, &c.config));
    out.push_str(&crate::cost::render_cost_diffs(&c.costs));
    for (n, a, b) in &c.unmeasured {
        let _ = writeln!(out, "not compared: {n}: {a} in A, {b} in B");
    }
    for n in &c.only_a {
        let _ = writeln!(out, "only in A: {n}");
    }
    for n in &c.only_b {
        let _ = writeln!(out, "only in B: {n}");
    }
    let _ = writeln!(
        out,
        "(two-sample Kolmogorov-Smirnov test on the stored histograms, alpha {}; samples of a run are not independent, so read p as a screen)",
        c.config.alpha
    );
    match c.config.threshold_pct {
        Some(t) => {
            let noise = if c.noise.is_empty() { "" } else { " (noise: the max gap or stolen %)" };
            let _ = writeln!(
                out,
                "{} regression(s): {} grew by more than {t}% with p < {}{noise}",
                c.regressions(),
                c.config.metric.name(),
                c.config.alpha
            );
        }
        None => out.push_str("no --threshold: nothing is judged a regression\n"),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::histogram::HistogramData;
    use rtlab_core::Histogram;

    fn hist(xs: impl Iterator<Item = i64>) -> HistogramData {
        let mut h = Histogram::new();
        for x in xs {
            h.record(x);
        }
        h.to_data()
    }

    #[test]
    fn q_ks_matches_known_values() {
        // Kolmogorov distribution: Q(1.36) ≈ 0.049, Q(1.63) ≈ 0.010 (standard KS tables)
        assert!((q_ks(1.36) - 0.0494).abs() < 0.001, "{}", q_ks(1.36));
        assert!((q_ks(1.63) - 0.0100).abs() < 0.001, "{}", q_ks(1.63));
        assert_eq!(q_ks(0.0), 1.0);
    }

    #[test]
    fn same_histogram_is_not_different_and_a_shift_is() {
        let a = hist((0..5000).map(|i| 10_000 + (i * 7919) % 5000));
        let k = ks_histograms(&a, &a).unwrap();
        assert_eq!(k.d, 0.0);
        assert_eq!(k.p, 1.0);
        let b = hist((0..5000).map(|i| 13_000 + (i * 7919) % 5000));
        let k = ks_histograms(&a, &b).unwrap();
        assert!(k.d > 0.5 && k.p < 1e-6, "{k:?}");
    }

    #[test]
    fn empty_side_gives_no_test() {
        let a = hist(0..10);
        let e = Histogram::new().to_data();
        assert!(ks_histograms(&a, &e).is_none());
    }
}
