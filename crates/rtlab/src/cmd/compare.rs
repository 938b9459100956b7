//! `rtlab compare RUN_A RUN_B`: per-case differences and a two-sample Kolmogorov-Smirnov test
//! on the stored histograms (see rtlab-report's compare.rs for the method and its source).
//! `rtlab compare --baseline [RUN]`: RUN (default the latest) against the last good run
//! before it of the same scenario and host (complete, every case ok, every gate kept), said
//! first. Exit 0: no regression; 1: a case regressed beyond `--threshold` (significantly);
//! 2: bad input (unknown run, bad flag, no store, no good run to compare with).

use super::runs::{load_runs, open_store};
use clap::{Args, ValueEnum};
use rtlab_lab::store::DEFAULT_DB;
use rtlab_report::compare::{compare, render, CompareConfig, Metric};
use std::io::Write;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricArg {
    P50,
    P99,
    #[value(name = "p99_9", alias = "p99.9")]
    P999,
    Max,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The reference run (id or `latest`); with --baseline, the run compared (default latest).
    #[arg(required_unless_present = "baseline")]
    pub run_a: Option<String>,
    /// The run compared with it (id or `latest`).
    #[arg(required_unless_present = "baseline", conflicts_with = "baseline")]
    pub run_b: Option<String>,
    /// Compare RUN_A (default the latest run) against the last good run before it of the
    /// same scenario and host: complete, every case ok, every gate kept.
    #[arg(long)]
    pub baseline: bool,
    /// The store: a SQLite file or postgres://USER[:PASSWORD]@HOST[:PORT]/DB.
    #[arg(long, env = "RTLAB_DB", hide_env_values = true, default_value = DEFAULT_DB, value_name = "FILE|URL")]
    pub db: String,
    /// Exit 1 when the metric of a stream grew by more than PERCENT and the KS test finds
    /// the distributions different. Without it, compare only reports.
    #[arg(long, value_name = "PERCENT")]
    pub threshold: Option<String>,
    /// The metric the threshold applies to.
    #[arg(long, value_enum, default_value = "p99")]
    pub metric: MetricArg,
    /// Significance level of the Kolmogorov-Smirnov test.
    #[arg(long, default_value_t = 0.01)]
    pub alpha: f64,
}

pub fn config_of(a: &CompareArgs) -> anyhow::Result<CompareConfig> {
    let threshold_pct = match &a.threshold {
        None => None,
        Some(t) => {
            let v: f64 = t.trim_end_matches('%').parse().map_err(|_| {
                anyhow::anyhow!("--threshold {t}: expected a percentage such as 10 or 10%")
            })?;
            if !v.is_finite() || v < 0.0 {
                anyhow::bail!("--threshold {t}: must be 0 or more percent");
            }
            Some(v)
        }
    };
    if !(a.alpha > 0.0 && a.alpha < 1.0) {
        anyhow::bail!("--alpha {}: must be between 0 and 1", a.alpha);
    }
    let metric = match a.metric {
        MetricArg::P50 => Metric::P50,
        MetricArg::P99 => Metric::P99,
        MetricArg::P999 => Metric::P99_9,
        MetricArg::Max => Metric::Max,
    };
    Ok(CompareConfig { metric, threshold_pct, alpha: a.alpha })
}

pub fn run(a: CompareArgs) -> anyhow::Result<u8> {
    let cfg = config_of(&a)?;
    let store = open_store(&a.db)?;
    let mut out = std::io::stdout().lock();
    let runs = if a.baseline {
        let spec = a.run_a.as_deref().unwrap_or("latest");
        let b = rtlab_lab::store::baseline(&store, spec).map_err(super::lab_error)?;
        writeln!(
            out,
            "baseline: run {} (started {}), the last good run of scenario '{}' on host '{}' before run {}",
            b.base.id,
            b.base.info.started_at,
            b.run.info.scenario,
            b.run.info.environment.hostname,
            b.run.id
        )?;
        vec![b.base, b.run]
    } else {
        let (Some(ra), Some(rb)) = (&a.run_a, &a.run_b) else {
            anyhow::bail!("compare needs RUN_A RUN_B, or --baseline [RUN]");
        };
        load_runs(&store, &[ra.clone(), rb.clone()])?
    };
    let c = compare(&runs[0], &runs[1], cfg);
    write!(out, "{}", render(&c))?;
    Ok(if c.regressions() > 0 { 1 } else { 0 })
}
