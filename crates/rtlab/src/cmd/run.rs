//! `rtlab run PRESET|FILE`: validate the scenario, run every case with progress and ETA,
//! store each case as it ends, and say where the report is.

use super::stop_flag;
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rtlab_core::run::{CaseRecord, CaseStatus, RunStatus};
use rtlab_core::units::{format_duration_human, us_1, Nanos};
use rtlab_lab::runner::{Keeping, RunProgress};
use rtlab_lab::scenario::{CaseSpec, Scenario, PRESETS};
use rtlab_lab::session::{self, Plan};
use std::io::IsTerminal;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The far side of every probe that has one, over the scenario's: ssh:[USER@]HOST[:PORT], netns:NAME or pair.
    #[arg(long, value_name = "SPEC", conflicts_with = "resume")]
    pub far: Option<String>,
    /// A preset (quick, s1-udp-linux, s2-ros2-rt, s3-ros2-rtt, s4-timer) or a scenario file (TOML).
    pub scenario: Option<String>,
    /// Multiply every duration and count (0.01 turns S1's 3 hours into 2 minutes); a case
    /// keeps at least 100 slots.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// The results store: a SQLite file or postgres://USER[:PASSWORD]@HOST[:PORT]/DB.
    #[arg(long, env = "RTLAB_DB", hide_env_values = true, default_value = rtlab_lab::store_sink::DEFAULT_DB, value_name = "FILE|URL")]
    pub db: String,
    /// Where to write the HTML report of this run (default: next to the store, run-<ID>.html).
    #[arg(long)]
    pub html: Option<String>,
    /// Print the cases and stop.
    #[arg(long)]
    pub dry_run: bool,
    /// List the presets and stop.
    #[arg(long)]
    pub list: bool,
    /// Print the preset (or file) as a scenario file to edit: `rtlab run s4-timer --print > mine.toml`.
    #[arg(long, conflicts_with = "resume")]
    pub print: bool,
    /// Run only the cases whose name contains PATTERN (or matches it, with `*`).
    #[arg(long, value_name = "PATTERN")]
    pub only: Option<String>,
    /// Continue stored run RUN (interrupted): its scenario and scale, the cases not yet stored.
    #[arg(long, value_name = "RUN", conflicts_with = "scenario")]
    pub resume: Option<i64>,
    /// Wait for another rtlab measuring on this machine instead of refusing at once.
    #[arg(long)]
    pub wait: bool,
    /// Print only errors and the report's path.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// A limit the matching cases must keep, over the scenario's `[[gate]]`s (repeatable):
    /// CASE:STREAM:METRIC<=VALUE, each of CASE and STREAM a name or a glob with *; METRIC
    /// p99_9 or max (a duration), missed or lost (a count, or a percentage such as 0.1%).
    /// A broken gate: everything is stored, then exit 1.
    #[arg(long, value_name = "CASE:STREAM:METRIC<=VALUE")]
    pub gate: Vec<String>,
    /// Write the run as JUnit XML to FILE (a testcase per case and gate), for CI.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<String>,
    /// How much longer than its plan a case may run before it is stopped; one that does not
    /// end then is left behind as `hung`, the machine put back, and the run goes on
    /// [60s + half the case's plan].
    #[arg(long, value_name = "DURATION")]
    pub overrun: Option<String>,
}

pub fn run(a: RunArgs) -> anyhow::Result<u8> {
    if a.list {
        return list_presets();
    }
    if !(a.scale > 0.0 && a.scale.is_finite()) {
        anyhow::bail!("--scale {}: must be a number above zero", a.scale);
    }
    // a bare `rtlab run` changes nothing: it lists what it could run and asks for one (a
    // preset applies profiles; that is for the person to choose, not a default)
    let name = match (a.scenario.as_deref(), a.resume) {
        (Some(name), _) => name,
        // --resume reads the run's own scenario from the store: no name
        (None, Some(_)) => "",
        (None, None) => {
            eprintln!("rtlab run: which scenario? Name a preset or a scenario file:");
            list_presets_to(&mut std::io::stderr())?;
            eprintln!("(for example `rtlab run quick --dry-run` to see its cases first)");
            return Ok(2);
        }
    };
    if a.print {
        let (_, text) = session::scenario_text(name).map_err(super::lab_error)?;
        session::load_scenario(name, 1.0, None).map_err(super::lab_error)?;
        print!("{text}");
        return Ok(0);
    }
    let mut plan =
        Plan::new(name, a.scale, a.far.as_deref(), a.resume, &a.db).map_err(super::lab_error)?;
    if let Some(p) = &a.only {
        plan.only(p).map_err(super::lab_error)?;
    }
    let gates = plan.gates(&a.gate).map_err(super::lab_error)?;
    let overrun = a
        .overrun
        .as_deref()
        .map(|v| super::duration_flag("--overrun", v))
        .transpose()?
        .map(|ns| std::time::Duration::from_nanos(ns.max(0) as u64));
    if a.dry_run {
        print_dry_run(&plan.scenario, plan.scale);
        for g in &gates {
            println!("gate {} {g}", g.origin);
        }
        return Ok(0);
    }
    if let Some(h) = &a.html {
        crate::document::check_writable(h, "--html")?;
    }
    if let Some(j) = &a.junit {
        crate::document::check_writable(j, "--junit")?;
    }
    let opts = session::Options {
        db: &a.db,
        html: a.html.as_deref(),
        wait: a.wait,
        overrun,
        command_line: session::redact_args(std::env::args()),
    };
    let tty = std::io::stderr().is_terminal();
    let waiting = |why: &str| {
        if tty {
            eprintln!("rtlab: {why}")
        }
    };
    let s = session::open(plan, opts, waiting, &mut |l| eprintln!("rtlab: {l}"))
        .map_err(super::lab_error)?;
    let stop = stop_flag()?;
    let scenario = &s.plan().scenario;
    let cases = scenario.cases().len();
    if !a.quiet {
        println!(
            "rtlab run {}: {cases} cases, about {} of measuring; store {}",
            scenario.name,
            format_duration_human(Nanos(scenario.planned_ns())),
            session::redact(&a.db)
        );
    }
    let mut progress = TermProgress::new(cases, scenario.planned_ns(), a.quiet);
    let ended = s.run(&gates, &mut progress, &stop).map_err(super::lab_error)?;
    progress.finish();
    conclude(&a, &ended, cases, &progress)
}

/// The end of a run: its verdict, what helps and the sentence to act on said, its gates'
/// lines, its JUnit file; the exit status (2 a failed run, 1 a gate failed, else 0).
fn conclude(
    a: &RunArgs,
    ended: &session::Ended,
    cases: usize,
    progress: &TermProgress,
) -> anyhow::Result<u8> {
    let (run_id, status) = (ended.run_id, ended.status);
    if !a.quiet {
        println!(
            "run {run_id} {}: {} of {} cases ({} failed, {} skipped)",
            status.name(),
            progress.finished,
            cases,
            progress.failed,
            progress.skipped
        );
        if status == RunStatus::Interrupted {
            println!(
                "continue it with: rtlab run --resume {run_id} --db {}",
                session::redact(&a.db)
            );
        }
        // the answer first: kept or not, and what helps (docs/reports.md "The verdict")
        let v = rtlab_report::verdict::judge(&ended.run, &ended.verdicts);
        println!("verdict: {}", v.headline());
        for l in v.helps_lines() {
            println!("  {l}");
        }
        println!("so: {}", v.remedy());
    }
    println!("report: {}", ended.report);
    let broken = super::gate_lines(&ended.verdicts, a.quiet);
    if let Some(j) = &a.junit {
        ended.write_junit(j).map_err(super::lab_error)?;
        if !a.quiet {
            println!("junit: {j}");
        }
    }
    Ok(if status == RunStatus::Failed {
        2
    } else if broken {
        1
    } else {
        0
    })
}

/// `--list`: every preset with its cases and time at scale 1.
fn list_presets() -> anyhow::Result<u8> {
    list_presets_to(&mut std::io::stdout())?;
    Ok(0)
}

/// Each preset, its cases and its time at scale 1, a line each.
fn list_presets_to(out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    for (name, text) in PRESETS {
        let s = Scenario::parse(name, text, 1.0)?;
        writeln!(
            out,
            "{name:14} {:4} cases, {:>8} at scale 1: {}",
            s.cases().len(),
            format_duration_human(Nanos(s.planned_ns())),
            s.description
        )?;
    }
    Ok(())
}

/// `--dry-run`: the cases, the scale's notes, and the time they take.
fn print_dry_run(scenario: &Scenario, scale: f64) {
    for c in scenario.cases() {
        println!("{:4} {:60} {}", c.index, c.name, c.length());
    }
    let notes: std::collections::BTreeSet<_> =
        scenario.cases().iter().filter_map(|c| c.scale_note.clone()).collect();
    for n in notes {
        println!("note: --scale {scale}: {n}");
    }
    println!(
        "{} cases, about {} of measuring",
        scenario.cases().len(),
        format_duration_human(Nanos(scenario.planned_ns()))
    );
}

/// Progress over the whole run, with a line per finished case.
struct TermProgress {
    bar: Option<ProgressBar>,
    total: usize,
    started: usize,
    finished: usize,
    failed: usize,
    skipped: usize,
    quiet: bool,
}

impl TermProgress {
    fn new(total: usize, planned_ns: i64, quiet: bool) -> TermProgress {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::with_draw_target(
                Some((planned_ns / 1_000_000).max(1) as u64),
                ProgressDrawTarget::stderr_with_hz(4),
            );
            b.set_style(
                ProgressStyle::with_template("{msg} [{wide_bar}] ETA {eta}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            b.enable_steady_tick(std::time::Duration::from_millis(250));
            b
        });
        TermProgress { bar, total, started: 0, finished: 0, failed: 0, skipped: 0, quiet }
    }
    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl RunProgress for TermProgress {
    fn case_started(&mut self, case: &CaseSpec, done_ns: i64, planned_ns: i64) {
        self.started += 1;
        if let Some(b) = &self.bar {
            b.set_position((done_ns / 1_000_000) as u64);
            b.set_message(format!("[{}/{}] {}", self.started, self.total, case.name));
        } else if !self.quiet {
            // not a terminal: a plain line per case on stderr, with the time left
            let left = (planned_ns - done_ns).max(0);
            eprintln!(
                "[{}/{}] {} ({}, about {} left in the run)",
                self.started,
                self.total,
                case.name,
                case.length(),
                format_duration_human(Nanos(left))
            );
        }
    }

    fn store_waiting(&mut self, c: &CaseRecord, error: &str, k: &Keeping) {
        let line = format!(
            "store: case '{}' not stored ({error}); kept in memory, tried again every {} for up to {} tries (Ctrl-C: keep it in a file now)",
            c.name,
            humantime::format_duration(k.wait),
            k.tries
        );
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
    }

    fn case_finished(&mut self, c: &CaseRecord) {
        self.finished += 1;
        let line = match &c.status {
            CaseStatus::Failed { error } => {
                self.failed += 1;
                format!("failed: {error}")
            }
            CaseStatus::Hung { error } => {
                self.failed += 1;
                format!("hung: {error}")
            }
            CaseStatus::Skipped { reason } => {
                self.skipped += 1;
                format!("skipped: {reason}")
            }
            s => {
                let main = c.document.as_ref().and_then(|d| d.streams.first());
                let mut t = match main {
                    Some(m) => format!(
                        "{} p50 {} p99.9 {} max {} us, {}",
                        m.metric,
                        m.stats.p50_ns.map(us_1).unwrap_or_default(),
                        m.stats.p99_9_ns.map(us_1).unwrap_or_default(),
                        m.stats.max_ns.map(us_1).unwrap_or_default(),
                        // a stream without deadlines (noise gaps) says its count only
                        match m.stats.missed {
                            Some(x) => format!("missed {x}/{}", m.stats.count),
                            None => format!("{} samples", m.stats.count),
                        }
                    ),
                    None => "no stream".into(),
                };
                if *s == CaseStatus::Interrupted {
                    t.push_str(" (interrupted)");
                }
                t
            }
        };
        let text = format!("[{}/{}] {:44} {line}", self.finished, self.total, c.name);
        match &self.bar {
            Some(b) => b.println(text),
            None if !self.quiet => println!("{text}"),
            None => {}
        }
    }
}
