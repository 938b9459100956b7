//! `rtlab run PRESET|FILE`: validate the scenario, run every case with progress and ETA,
//! store each case as it ends, and say where the report is.

use super::stop_flag;
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rtlab_core::run::{CaseRecord, CaseStatus, RunInfo, RunStatus};
use rtlab_core::units::{format_duration_human, us_1, Nanos};
use rtlab_lab::executor::LiveExecutor;
use rtlab_lab::runner::{run_scenario, Keeping, RunProgress};
use rtlab_lab::scenario::{preset, CaseSpec, Scenario, PRESETS};
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
    #[arg(long, env = "RTLAB_DB", hide_env_values = true, default_value = rtlab_store::DEFAULT_DB, value_name = "FILE|URL")]
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

/// Read a scenario: a preset by name, else a file.
pub fn load_scenario(name: &str, scale: f64) -> anyhow::Result<Scenario> {
    load_scenario_far(name, scale, None)
}

/// A scenario with its far side set by `--far` (over the file's own).
fn load_scenario_far(
    name: &str,
    scale: f64,
    far: Option<&rtlab_lab::far::FarSpec>,
) -> anyhow::Result<Scenario> {
    let (origin, text) = scenario_text(name)?;
    Ok(Scenario::parse_with_far(&origin, &text, scale, far)?)
}

/// The text of a preset or a scenario file, and its origin for errors.
fn scenario_text(name: &str) -> anyhow::Result<(String, String)> {
    if let Some(text) = preset(name) {
        return Ok((format!("preset {name}"), text.to_string()));
    }
    let path = std::path::Path::new(name);
    if !path.exists() {
        let names: Vec<_> = PRESETS.iter().map(|(n, _)| *n).collect();
        anyhow::bail!("'{name}' is neither a preset ({}) nor a scenario file", names.join(", "));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("reading scenario {name}: {e}"))?;
    Ok((name.to_string(), text))
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
        let (_, text) = scenario_text(name)?;
        load_scenario(name, 1.0)?;
        print!("{text}");
        return Ok(0);
    }
    let Planned { mut scenario, source, scale, resume, store, mut planned } =
        scenario_of(&a, name)?;
    if let Some(p) = &a.only {
        scenario.retain_matching(p);
        if scenario.cases().is_empty() {
            anyhow::bail!("--only {p}: no case of {} matches", scenario.name);
        }
        planned = scenario.cases().iter().map(|c| c.name.clone()).collect();
    }
    let gates = gates_of(&a.gate, &scenario, &planned)?;
    let overrun = a
        .overrun
        .as_deref()
        .map(|v| super::duration_flag("--overrun", v))
        .transpose()?
        .map(|ns| std::time::Duration::from_nanos(ns.max(0) as u64));
    if a.dry_run {
        print_dry_run(&scenario, scale);
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
    let holder = format!("rtlab run {}", scenario.name);
    let _lock = super::machine_lock(&holder, a.wait)?;
    restore_dead_journal()?;
    let mut store = match store {
        Some(s) => s,
        None => rtlab_lab::store_sink::open(&a.db).map_err(super::lab_error)?,
    };
    if let Some(id) = resume {
        store
            .reopen_run(id, &rtlab_store::url::redact_args(std::env::args()))
            .map_err(|e| anyhow::anyhow!("--resume {id}: {e}"))?;
    }
    let stop = stop_flag()?;
    let info = RunInfo {
        scenario: scenario.name.clone(),
        source,
        scenario_text: scenario.text.clone(),
        scale,
        command_line: rtlab_store::url::redact_args(std::env::args()),
        started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        environment: rtlab_sys::env::detect(std::path::Path::new("/")),
    };
    if !a.quiet {
        println!(
            "rtlab run {}: {} cases, about {} of measuring; store {}",
            scenario.name,
            scenario.cases().len(),
            format_duration_human(Nanos(scenario.planned_ns())),
            rtlab_store::url::redact(&a.db)
        );
    }
    let mut progress = TermProgress::new(scenario.cases().len(), scenario.planned_ns(), a.quiet);
    // traces around spikes are kept next to the store
    let trace_dir = rtlab_lab::store_sink::local_dir(&a.db);
    let mut exec = LiveExecutor::new(trace_dir.clone());
    exec.overrun = overrun;
    // a case the store cannot take is kept in memory, tried again, then kept in a file: next
    // to the store, else in the temporary directory, else here
    let keeping =
        Keeping { aside: vec![trace_dir, std::env::temp_dir(), ".".into()], ..Keeping::default() };
    let (run_id, status) = run_scenario(
        &scenario,
        &info,
        &mut exec,
        &mut store,
        &mut progress,
        &stop,
        resume,
        &keeping,
    )
    .map_err(|e| anyhow::anyhow!("--db {}: {e}", rtlab_store::url::redact(&a.db)))?;
    progress.finish();
    let ended = Ended { run_id, status, cases: scenario.cases().len(), progress };
    conclude(&a, &mut store, ended, &gates, &planned)
}

/// A run that has ended: its id, status, planned case count and what its progress counted.
struct Ended {
    run_id: i64,
    status: RunStatus,
    cases: usize,
    progress: TermProgress,
}

/// The end of a run: its gates judged over every case (a resumed run's earlier ones too) and
/// stored, its report written, its verdict, what helps and the sentence to act on said, its
/// JUnit file; the exit status (2 a failed run, 1 a gate failed, else 0).
fn conclude(
    a: &RunArgs,
    store: &mut rtlab_store::Store,
    ended: Ended,
    gates: &[rtlab_core::gate::Gate],
    planned: &[String],
) -> anyhow::Result<u8> {
    let Ended { run_id, status, cases, progress } = ended;
    // the gates are judged over every case of the run (a resumed run's earlier ones too)
    let stored = store.load_run(run_id).map_err(|e| anyhow::anyhow!("--db {}: {e}", a.db))?;
    let verdicts = rtlab_core::judging::evaluate(gates, &stored.cases, planned);
    store
        .save_gate_verdicts(run_id, &verdicts)
        .map_err(|e| anyhow::anyhow!("--db {}: {e}", a.db))?;
    let report = rtlab_lab::store_sink::render_report(store, &a.db, run_id, a.html.as_deref())
        .map_err(super::lab_error)?;
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
                rtlab_store::url::redact(&a.db)
            );
        }
        // the answer first: kept or not, and what helps (docs/reports.md "The verdict")
        let v = rtlab_report::verdict::judge(&stored, &verdicts);
        println!("verdict: {}", v.headline());
        for l in v.helps_lines() {
            println!("  {l}");
        }
        println!("so: {}", v.remedy());
    }
    println!("report: {report}");
    let broken = super::gate_lines(&verdicts, a.quiet);
    if let Some(j) = &a.junit {
        let run = store.load_run(run_id).map_err(|e| anyhow::anyhow!("--db {}: {e}", a.db))?;
        crate::document::write_text(&rtlab_report::junit::junit(&run), j)
            .map_err(|e| anyhow::anyhow!("--junit {j}: {e}"))?;
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

/// The scenario's gates and `--gate`'s; a `--gate` that is malformed or matches no case to
/// be run is an error before anything is measured.
fn gates_of(
    flags: &[String],
    scenario: &Scenario,
    planned: &[String],
) -> anyhow::Result<Vec<rtlab_core::gate::Gate>> {
    let mut gates = scenario.gates.clone();
    for f in flags {
        let g = rtlab_core::gate::Gate::parse_flag(f).map_err(|e| anyhow::anyhow!(e))?;
        if !planned.iter().any(|c| g.matches_case(c)) {
            let some: Vec<&str> = planned.iter().take(3).map(String::as_str).collect();
            let more = if planned.len() > 3 { ", ..." } else { "" };
            anyhow::bail!(
                "--gate {f}: '{}' matches no case of {} to run (a whole name, or a glob with *; cases: {}{more})",
                g.case,
                scenario.name,
                some.join(", ")
            );
        }
        gates.push(g);
    }
    Ok(gates)
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

/// The run to make: its scenario, where it came from, its scale, the stored run it resumes.
struct Planned {
    scenario: Scenario,
    source: String,
    scale: f64,
    resume: Option<i64>,
    /// The store, open already when resuming.
    store: Option<rtlab_store::Store>,
    /// The names of every case the run is to hold (a resumed run's stored ones too).
    planned: Vec<String>,
}

/// The run's scenario: a stored run's to resume (its cases not yet stored), or the preset or
/// file named, with `--far` over its far side.
fn scenario_of(a: &RunArgs, name: &str) -> anyhow::Result<Planned> {
    match a.resume {
        Some(id) => {
            if !rtlab_store::url::is_postgres(&a.db) && !std::path::Path::new(&a.db).is_file() {
                anyhow::bail!("--db {}: no store there, so no run {id} to resume", a.db);
            }
            let st = rtlab_lab::store_sink::open(&a.db).map_err(super::lab_error)?;
            let rp = st.resume_point(id).map_err(|e| anyhow::anyhow!("--resume {id}: {e}"))?;
            let origin = format!("run {id} ({})", rp.source);
            let mut s = Scenario::parse(&origin, &rp.scenario_text, rp.scale)?;
            let planned = s.cases().iter().map(|c| c.name.clone()).collect();
            let done: std::collections::BTreeSet<u32> =
                s.cases().iter().filter(|c| rp.is_done(&c.name)).map(|c| c.index).collect();
            s.skip_indices(&done);
            Ok(Planned {
                scenario: s,
                source: rp.source.clone(),
                scale: rp.scale,
                resume: Some(id),
                store: Some(st),
                planned,
            })
        }
        None => {
            let far = a
                .far
                .as_deref()
                .map(rtlab_lab::far::FarSpec::parse)
                .transpose()
                .map_err(|e| anyhow::anyhow!("--far {e}"))?;
            let s = load_scenario_far(name, a.scale, far.as_ref())?;
            let source = if preset(name).is_some() { "preset".into() } else { name.to_string() };
            let planned = s.cases().iter().map(|c| c.name.clone()).collect();
            Ok(Planned { scenario: s, source, scale: a.scale, resume: None, store: None, planned })
        }
    }
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

/// A dead rtlab's changes are put back before anything is measured.
fn restore_dead_journal() -> anyhow::Result<()> {
    if let Some(w) = rtlab_lab::guard::stale_journal_warning() {
        eprintln!("rtlab: {w}");
        let host = rtlab_lab::host::host();
        let r = rtlab_tune::journal::restore_journal(
            host,
            std::path::Path::new(rtlab_tune::journal::DEFAULT_JOURNAL),
        )
        .map_err(|e| {
            anyhow::anyhow!("restoring the journal first: {e} (run `rtlab tune restore`)")
        })?;
        if !r.is_clean() {
            anyhow::bail!("the journal of a dead rtlab could not be restored completely: run `rtlab tune restore` and look at what it says");
        }
        eprintln!("rtlab: restored {} changes first", r.restored.len());
    }
    Ok(())
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
