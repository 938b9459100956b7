//! `rtlab timer`: flags -> TimerConfig, run, print the tables, write JSON and histograms.

use super::stop_flag;
use crate::args::{EvidenceArgs, MeasureArgs, RtArgs};
use crate::document::{check_writable, write_json, write_text};
use crate::progress::Progress;
use anyhow::Context as _;
use clap::Args;
use rtlab_core::cyclictest::{self, ThreadFooter};
use rtlab_core::units::{format_duration_exact, Nanos};
use rtlab_engines::timer_run::TimerConfig;
use rtlab_lab::config::from_table;
use rtlab_lab::probe::Context;
use rtlab_lab::probes::timer::{self, TimerProbeConfig};
use rtlab_report::summary;
use std::io::IsTerminal;

#[derive(Args, Debug)]
#[command(
    mut_arg("duration", |a| a.help("How long to measure (e.g. 30s, 5m) [30s unless --loops is given]")),
    mut_arg("count", |a| a
        .long("loops")
        .alias("count")
        .value_name("LOOPS")
        .help("How many slots per thread (skipped slots count: the run ends on time)")),
    mut_arg("deadline", |a| a.help("Samples above this are missed deadlines [the thread's interval]")),
)]
pub struct TimerArgs {
    /// Number of measuring threads [1].
    #[arg(long, short = 't')]
    pub threads: Option<i64>,
    /// Interval with a unit (250us, 1ms) [1ms]. A comma list gives one per thread.
    #[arg(long, short = 'i', value_delimiter = ',')]
    pub interval: Vec<String>,
    /// Added to the interval of each further thread (cyclictest -d), e.g. 500us.
    #[arg(long, short = 'd')]
    pub distance: Option<String>,
    /// How the timer waits [abs]: abs (clock_nanosleep TIMER_ABSTIME on a grid), rel
    /// (relative sleeps to the expected time; signed error), or a ROS timer model: oneshot
    /// (S4's one-shot test on roscpp: a re-armed one-shot timer, reference read after
    /// roscpp's anchor), roscpp (ROS 1 periodic timer: timer thread + spin thread), rclcpp
    /// (ROS 2 wall timer in an executor).
    #[arg(long, value_parser = ["abs", "rel", "oneshot", "roscpp", "rclcpp"])]
    pub mode: Option<String>,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub measure: MeasureArgs,
    #[command(flatten)]
    pub out: crate::args::OutputArgs,
    /// Write a cyclictest -h format histogram (1 us bins) to this file.
    #[arg(long)]
    pub histogram_file: Option<String>,
    /// Range of the cyclictest-format histogram (its -h N, as a duration) [1000us].
    #[arg(long)]
    pub histogram_max: Option<String>,
    /// Stream every raw sample (CSV: stream,index,at_ns,value_ns) to this file.
    #[arg(long)]
    pub raw_file: Option<String>,
    /// Print a terminal histogram of each thread.
    #[arg(long)]
    pub histogram: bool,
    #[command(flatten)]
    pub evidence: EvidenceArgs,
}

impl TimerArgs {
    /// The flags given, as the probe's table (every default lives in the configuration).
    pub fn table(&self) -> toml::Table {
        let mut t = rtlab_lab::config::FlagTable::default();
        t.int("threads", self.threads)
            .list("interval", &self.interval)
            .str("distance", &self.distance)
            .str("mode", &self.mode)
            .str("histogram_max", &self.histogram_max);
        self.measure.fill(&mut t);
        self.rt.fill(&mut t);
        t.take()
    }
}

/// The timer's `count` is `--loops` on its command line (as cyclictest's -l).
const LOOPS: &[(&str, &str)] = &[("count", "--loops")];

/// The flags as the probe's configuration (the same struct, defaults and validation as a
/// scenario's `[[probe]] kind = "timer"`).
pub fn config_of(a: &TimerArgs) -> anyhow::Result<TimerProbeConfig> {
    let mut cfg: TimerProbeConfig =
        from_table(&a.table()).map_err(|e| anyhow::anyhow!(e.cli_text_as(LOOPS)))?;
    cfg.histogram_file = a.histogram_file.is_some();
    cfg.raw_file = a.raw_file.clone();
    Ok(cfg)
}

pub fn run(a: TimerArgs) -> anyhow::Result<u8> {
    let cfg = config_of(&a)?;
    let engine = cfg
        .engine(&cfg.rt.over(&timer::default_rt()))
        .map_err(|e| anyhow::anyhow!(e.cli_text_as(LOOPS)))?;
    for (path, flag) in [
        (&a.out.json, "--json"),
        (&a.histogram_file, "--histogram-file"),
        (&a.raw_file, "--raw-file"),
    ] {
        if let Some(p) = path {
            check_writable(p, flag)?;
        }
    }
    let stop = stop_flag()?;
    let quiet = a.out.is_quiet();
    let _lock = super::machine_lock("rtlab timer", true)?;
    super::journal_warning(quiet);
    if !quiet {
        println!("{}", headline(&engine));
    }
    let progress = Progress::new(0, "timer", quiet);
    let mut on_progress = progress.callback();
    let mut ctx = Context::new(timer::default_rt(), stop, &mut on_progress);
    ctx.evidence = a.evidence.options()?;
    let measured = timer::measure(&cfg, &mut ctx);
    progress.finish();
    let (doc, outcome, engine) = measured.map_err(super::lab_error)?;

    // outputs that keep what was measured come first
    if let Some(path) = &a.out.json {
        write_json(&doc, path)?;
    }
    if let Some(path) = &a.histogram_file {
        let hists: Vec<_> =
            outcome.threads.iter().filter_map(|t| t.latency.us_histogram.as_ref()).collect();
        let footers: Vec<_> = outcome
            .threads
            .iter()
            .map(|t| {
                let s = t.latency.summary();
                ThreadFooter {
                    min_us: s.min_ns.unwrap_or(0) / 1_000,
                    avg_us: s.mean_ns.unwrap_or(0) / 1_000,
                    max_us: s.max_ns.unwrap_or(0) / 1_000,
                }
            })
            .collect();
        write_text(&cyclictest::render(&hists, &footers), path)
            .with_context(|| format!("--histogram-file {path}"))?;
    }
    if !quiet {
        let color = std::io::stdout().is_terminal();
        let metric = engine.mode.metric().replace('_', " ");
        let text =
            summary::timer::render(&doc, &metric, engine.mode.definition(), a.histogram, color);
        print!("{text}");
        for w in &doc.warnings {
            eprintln!("warning: {}", w.message);
        }
    }
    super::print_evidence(doc.evidence.as_ref(), &doc.streams, quiet);
    super::print_cost(&doc, quiet);
    Ok(0)
}

fn headline(cfg: &TimerConfig) -> String {
    let t = &cfg.threads;
    let intervals: Vec<_> = t.iter().map(|t| format_duration_exact(Nanos(t.interval_ns))).collect();
    let length = match (cfg.duration_ns, cfg.loops) {
        (Some(d), Some(l)) => format!("{} or {l} loops", format_duration_exact(Nanos(d))),
        (Some(d), None) => format_duration_exact(Nanos(d)),
        (None, Some(l)) => format!("{l} loops"),
        (None, None) => String::new(),
    };
    format!(
        "rtlab timer: {} thread{}, {} mode, {} {}, interval {}, {}",
        t.len(),
        if t.len() == 1 { "" } else { "s" },
        cfg.mode.name(),
        t[0].policy,
        t.iter().map(|t| t.priority.to_string()).collect::<Vec<_>>().join(","),
        intervals.join(","),
        length
    )
}
