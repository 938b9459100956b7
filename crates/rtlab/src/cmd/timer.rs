//! `rtlab timer`: flags -> TimerConfig, run, print the tables, write JSON and histograms.

use super::stop_flag;
use crate::args::{EvidenceArgs, MeasureArgs, RtArgs};
use crate::document::{check_writable, write_json, write_text};
use anyhow::Context as _;
use clap::Args;
use rtlab_core::cyclictest::{self, ThreadFooter};
use rtlab_core::units::{format_duration_exact, Nanos};
use rtlab_lab::config::from_table;
use rtlab_lab::probes::timer::TimerConfig;
use rtlab_lab::probes::timer::{self, TimerProbeConfig};
use rtlab_report::summary;
use std::io::IsTerminal;

#[derive(Args, Debug)]
#[command(
    // cyclictest's -h is its histogram: help is --help only
    disable_help_flag = true,
    mut_arg("duration", |a| a.help("How long to measure (30s, 5m; a bare number is seconds and 2d is days, as cyclictest's -D) [30s unless --count is given]")),
    mut_arg("count", |a| a
        .visible_alias("loops")
        .help("How many slots per thread (skipped slots count: the run ends on time); --loops is cyclictest's name for it")),
    mut_arg("deadline", |a| a.help("Samples above this are missed deadlines [the thread's interval]")),
    mut_arg("cpu_dma_latency", |a| a.alias("latency")),
)]
pub struct TimerArgs {
    /// Number of measuring threads [1]; -t alone: one per online CPU (as cyclictest).
    #[arg(long, short = 't', num_args = 0..=1, default_missing_value = "", value_name = "NUM")]
    pub threads: Option<String>,
    /// Interval (250us, 1ms; a bare number is microseconds, as cyclictest's -i) [1ms]. A
    /// comma list gives one per thread.
    #[arg(long, short = 'i', value_delimiter = ',')]
    pub interval: Vec<String>,
    /// Added to the interval of each further thread (500us; a bare number is microseconds,
    /// as cyclictest's -d).
    #[arg(long, short = 'd')]
    pub distance: Option<String>,
    /// Pin the threads to CPUSET in turn (as --cpus); -a alone: thread N on CPU N (as
    /// cyclictest's -a).
    #[arg(long, short = 'a', num_args = 0..=1, default_missing_value = "", value_name = "CPUSET", conflicts_with = "cpus")]
    pub affinity: Option<String>,
    /// One thread per online CPU, thread N on CPU N, all at one priority (cyclictest's -S).
    #[arg(long, short = 'S', conflicts_with_all = ["threads", "affinity", "cpus"])]
    pub smp: bool,
    /// Relative sleeps: --mode rel (cyclictest's -r).
    #[arg(long, short = 'r', conflicts_with = "mode")]
    pub relative: bool,
    /// Accepted for cyclictest's command lines: memory is locked by default (--no-mlockall
    /// turns it off).
    #[arg(long, short = 'm', conflicts_with = "no_mlockall")]
    pub mlockall: bool,
    /// Accepted for cyclictest's command lines: clock_nanosleep is what rtlab waits with.
    #[arg(long, short = 'n')]
    pub nanosleep: bool,
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    /// How the timer waits [abs]: abs (clock_nanosleep TIMER_ABSTIME on a grid), rel
    /// (relative sleeps to the expected time; signed error); roscpp itself, a node of Debian's
    /// ROS 1 per thread: roscpp (ros::Timer), roscpp-wall, roscpp-steady, roscpp-oneshot (S4's
    /// one-shot test); or a model of a ROS timer: oneshot-model (S4's test on a model of
    /// roscpp), roscpp-model (ROS 1 periodic timer: timer thread + spin thread), rclcpp-model
    /// (ROS 2 wall timer in an executor).
    #[arg(long, value_parser = mode_parser())]
    pub mode: Option<String>,
    /// roscpp modes: set the policy, priority and CPU before ros::init (S4's order: every
    /// roscpp thread inherits them) or after it (the spinning thread alone) [before-init].
    #[arg(long, value_parser = ["before-init", "after-init"])]
    pub roscpp_rt: Option<String>,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub measure: MeasureArgs,
    #[command(flatten)]
    pub out: crate::args::OutputArgs,
    #[command(flatten)]
    pub gates: crate::args::GateArgs,
    /// Write a cyclictest -h format histogram (1 us bins) to this file.
    #[arg(long, alias = "histfile")]
    pub histogram_file: Option<String>,
    /// Range of the cyclictest-format histogram (its -h N, as a duration) [1000us].
    #[arg(long)]
    pub histogram_max: Option<String>,
    /// Stream every raw sample (CSV: stream,index,at_ns,value_ns) to this file.
    #[arg(long)]
    pub raw_file: Option<String>,
    /// Print a terminal histogram of each thread; --histogram=US: cyclictest's histogram
    /// instead (as -h US).
    #[arg(long, num_args = 0..=1, default_missing_value = "", value_name = "US")]
    pub histogram: Option<String>,
    /// The cyclictest-format histogram (1 us bins up to US; a bare number is microseconds) on
    /// stdout after the run, as cyclictest's -h US (also with -q).
    #[arg(short = 'h', value_name = "US", conflicts_with = "histogram")]
    pub h: Option<String>,
    #[command(flatten)]
    pub evidence: EvidenceArgs,
}

impl TimerArgs {
    /// The flags given, as the probe's table (every default lives in the configuration).
    pub fn table(&self) -> anyhow::Result<toml::Table> {
        let online = rtlab_lab::host::online_cpus().0;
        let threads = match self.threads.as_deref() {
            _ if self.smp => Some(online.len() as i64),
            Some("") => Some(online.len() as i64),
            Some(n) => Some(n.parse().map_err(|_| {
                anyhow::anyhow!("--threads {n}: not a number of threads (-t alone: one per CPU)")
            })?),
            None => None,
        };
        let mut rt = self.rt.clone();
        match self.affinity.as_deref() {
            _ if self.smp => rt.cpus = Some(rtlab_lab::host::cpu_list(&online)),
            Some("") => rt.cpus = Some(rtlab_lab::host::cpu_list(&online)),
            Some(set) => rt.cpus = Some(set.to_string()),
            None => {}
        }
        let mut measure = self.measure.clone();
        measure.duration = measure.duration.as_deref().map(cyclictest_duration);
        let histogram_max = match self.cyclictest_us() {
            Some(us) => Some(micros(us)),
            None => self.histogram_max.clone(),
        };
        let mode = if self.relative { Some("rel".to_string()) } else { self.mode.clone() };
        let mut t = rtlab_lab::config::FlagTable::default();
        t.int("threads", threads)
            .list("interval", &self.interval.iter().map(|i| micros(i)).collect::<Vec<_>>())
            .str("distance", &self.distance.as_deref().map(micros))
            .str("mode", &mode)
            .str("roscpp_rt", &self.roscpp_rt)
            .str("histogram_max", &histogram_max);
        measure.fill(&mut t);
        rt.fill(&mut t);
        Ok(t.take())
    }

    /// `-h US` (or `--histogram=US`): the cyclictest-format histogram on stdout, up to US.
    fn cyclictest_us(&self) -> Option<&str> {
        self.h.as_deref().or(self.histogram.as_deref().filter(|h| !h.is_empty()))
    }

    fn cyclictest_histogram(&self) -> bool {
        self.cyclictest_us().is_some()
    }
}

/// The modes, and the models' names of before roscpp ran here (`oneshot`, `rclcpp`: hidden).
fn mode_parser() -> clap::builder::PossibleValuesParser {
    use clap::builder::PossibleValue;
    let names = timer::MODE_NAMES.iter().map(|n| PossibleValue::new(*n));
    let old = ["oneshot", "rclcpp"].map(|n| PossibleValue::new(n).hide(true));
    clap::builder::PossibleValuesParser::new(names.chain(old))
}

/// A bare number is microseconds (cyclictest's -i, -d, -h); anything else as given.
fn micros(v: &str) -> String {
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        format!("{v}us")
    } else {
        v.to_string()
    }
}

/// cyclictest's -D: a bare number is seconds, `d` is days; anything else as given.
fn cyclictest_duration(v: &str) -> String {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match v.strip_suffix('d') {
        Some(n) if digits(n) => format!("{}h", n.parse::<u64>().unwrap_or(u64::MAX / 24) * 24),
        _ if digits(v) => format!("{v}s"),
        _ => v.to_string(),
    }
}

/// The flags as the probe's configuration (the same struct, defaults and validation as a
/// scenario's `[[probe]] kind = "timer"`).
pub fn config_of(a: &TimerArgs) -> anyhow::Result<TimerProbeConfig> {
    let mut cfg: TimerProbeConfig =
        from_table(&a.table()?).map_err(|e| anyhow::anyhow!(e.cli_text()))?;
    cfg.histogram_file = a.histogram_file.is_some() || a.cyclictest_histogram();
    cfg.raw_file = a.raw_file.clone();
    Ok(cfg)
}

pub fn run(a: TimerArgs) -> anyhow::Result<u8> {
    let cfg = config_of(&a)?;
    let profile = super::command_profile(&a.rt)?;
    let base = super::rt_base(profile.as_ref(), timer::default_rt());
    let engine = cfg.engine(&cfg.rt.over(&base)).map_err(|e| anyhow::anyhow!(e.cli_text()))?;
    if a.cyclictest_histogram() && a.out.json.as_deref() == Some("-") {
        anyhow::bail!(
            "-h: the histogram goes to stdout, as the JSON of --json - would: give --json a file"
        );
    }
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
    let gates = a.gates.parse()?;
    let mut say = super::Say::new("timer", 0, quiet, |_| headline(&engine));
    let command = super::probe_command(
        Some("rtlab timer"),
        profile.as_ref(),
        base,
        stop,
        a.evidence.options()?,
    );
    let (doc, (outcome, engine)) = command
        .run(&cfg, &mut say, |ctx| timer::measure(&cfg, ctx).map(|(d, o, e)| (d, (o, e))))
        .map_err(super::lab_error)?;

    // outputs that keep what was measured come first
    if let Some(path) = &a.out.json {
        write_json(&doc, path)?;
    }
    let histogram = || {
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
        cyclictest::render(&hists, &footers)
    };
    if let Some(path) = &a.histogram_file {
        write_text(&histogram(), path).with_context(|| format!("--histogram-file {path}"))?;
    }
    if !quiet {
        let color = std::io::stdout().is_terminal();
        let metric = engine.mode.metric().replace('_', " ");
        let terminal_histogram = a.histogram.as_deref() == Some("");
        let text = summary::timer::render(
            &doc,
            &metric,
            engine.mode.definition(),
            terminal_histogram,
            color,
        );
        print!("{text}");
        for w in &doc.warnings {
            eprintln!("warning: {}", w.message);
        }
    }
    // -h US: cyclictest's histogram on stdout after the run, also with -q (as cyclictest)
    if a.cyclictest_histogram() {
        print!("{}", histogram());
    }
    super::print_evidence(doc.evidence.as_ref(), &doc.streams, quiet);
    super::print_cost(&doc, quiet);
    Ok(super::judge(&doc, &gates, quiet))
}

fn headline(cfg: &TimerConfig) -> String {
    let t = &cfg.threads;
    let intervals: Vec<_> = t.iter().map(|t| format_duration_exact(Nanos(t.interval_ns))).collect();
    let length = match (cfg.duration_ns, cfg.loops) {
        (Some(d), Some(l)) => format!("{} or {l} slots", format_duration_exact(Nanos(d))),
        (Some(d), None) => format_duration_exact(Nanos(d)),
        (None, Some(l)) => format!("{l} slots"),
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

#[cfg(test)]
mod tests {
    use super::{cyclictest_duration, micros};

    #[test]
    fn bare_numbers_take_cyclictests_units() {
        assert_eq!(micros("200"), "200us");
        assert_eq!(micros("1ms"), "1ms");
        assert_eq!(cyclictest_duration("90"), "90s");
        assert_eq!(cyclictest_duration("2d"), "48h");
        assert_eq!(cyclictest_duration("5m"), "5m");
        assert_eq!(cyclictest_duration("xd"), "xd");
    }
}
