//! One module per command: flags -> config, run, render, write.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub mod agent;
pub mod compare;
pub mod cyclic;
pub mod export;
pub mod gen;
pub mod load;
pub mod netns;
pub mod noise;
pub mod observe;
pub mod pubsub;
pub mod push;
pub mod report;
pub mod run;
pub mod runs;
pub mod serve;
pub mod timer;
pub mod tune;
pub mod udp;

/// A flag raised by the first Ctrl-C (or SIGTERM); a second Ctrl-C exits at once.
/// The handler only sets the flag (nothing is printed from a signal handler).
pub fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = crate::out::stop();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())?;
        signal_hook::flag::register(sig, stop.clone())?;
    }
    Ok(stop)
}

/// Parse a duration flag, naming the flag on error.
pub fn duration_flag(flag: &str, v: &str) -> anyhow::Result<i64> {
    rtlab_core::units::parse_duration(v).map(|n| n.0).map_err(|e| anyhow::anyhow!("{flag}: {e}"))
}

/// A probe command's `--profile NAME`, resolved before anything runs (a bad name: exit 2).
pub fn command_profile(
    rt: &crate::args::RtArgs,
) -> anyhow::Result<Option<rtlab_lab::command_profile::CommandProfile>> {
    rt.profile
        .as_deref()
        .map(rtlab_lab::command_profile::CommandProfile::resolve)
        .transpose()
        .map_err(lab_error)
}

/// The real-time settings a probe's flags go over: the profile's, else the probe's default.
pub fn rt_base(
    profile: Option<&rtlab_lab::command_profile::CommandProfile>,
    default: rtlab_core::rt::RtSettings,
) -> rtlab_core::rt::RtSettings {
    profile.map(|p| p.base()).unwrap_or(default)
}

/// Apply the profile for the probe's run (once the machine is this command's), saying its
/// steps unless quiet; put back when the returned guard is finished or dropped.
pub fn apply_profile(
    profile: Option<&rtlab_lab::command_profile::CommandProfile>,
    probe: &dyn rtlab_lab::probe::Probe,
    base: &rtlab_core::rt::RtSettings,
    quiet: bool,
) -> anyhow::Result<Option<rtlab_lab::command_profile::Applied>> {
    apply_profile_for(profile, probe.pins_process(), &probe.rt(base), quiet)
}

/// [`apply_profile`] for what is not a probe (the reflector): its process pinned or not,
/// its threads' settings.
pub fn apply_profile_for(
    profile: Option<&rtlab_lab::command_profile::CommandProfile>,
    pins_process: bool,
    rt: &rtlab_core::rt::RtSettings,
    quiet: bool,
) -> anyhow::Result<Option<rtlab_lab::command_profile::Applied>> {
    let Some(p) = profile else { return Ok(None) };
    let applied = p.apply(pins_process, rt).map_err(lab_error)?;
    if !quiet {
        println!("profile {} (journaled, put back when the run ends):", p.name());
        for l in applied.lines() {
            println!("  {l}");
        }
    }
    Ok(Some(applied))
}

/// Put the profile back: what it did goes into the document (`config.profile`), and a
/// warning when something could not be put back.
pub fn finish_profile(
    applied: Option<rtlab_lab::command_profile::Applied>,
    doc: &mut rtlab_core::schema::ResultDocument,
    quiet: bool,
) {
    let Some(a) = applied else { return };
    let (report, warning) = a.finish();
    if !quiet && warning.is_none() {
        println!("profile {}: put back", report["profile"].as_str().unwrap_or("?"));
    }
    if let Some(obj) = doc.config.as_object_mut() {
        obj.insert("profile".into(), report);
    }
    doc.warnings.extend(warning);
}

/// A lab error as the CLI says it (a field named as its flag).
pub fn lab_error(e: rtlab_lab::error::LabError) -> anyhow::Error {
    match e {
        rtlab_lab::error::LabError::Config(c) => anyhow::anyhow!(c.cli_text()),
        other => anyhow::anyhow!(other.to_string()),
    }
}

/// The evidence of a run: the worst windows with their counters, the spike's explanation.
/// What the case cost, in a few lines on stdout (nothing with --quiet).
pub fn print_cost(doc: &rtlab_core::schema::ResultDocument, quiet: bool) {
    if quiet {
        return;
    }
    if let Some(c) = &doc.cost {
        println!();
        for l in rtlab_report::cost::cost_lines(c) {
            println!("{l}");
        }
    }
}

pub fn print_evidence(
    ev: Option<&rtlab_core::evidence::Evidence>,
    streams: &[rtlab_core::schema::Stream],
    quiet: bool,
) {
    let Some(ev) = ev else { return };
    if quiet {
        if ev.spike.is_some() {
            let only_spike = rtlab_core::evidence::Evidence {
                counters: None,
                spike: ev.spike.clone(),
                notes: ev.notes.clone(),
            };
            eprint!("{}", rtlab_report::evidence::render(&only_spike, streams));
        }
    } else {
        print!("{}", rtlab_report::evidence::render(ev, streams));
    }
}

/// Warn (on stderr) when a dead rtlab's changes are still in force on this machine.
pub fn journal_warning(quiet: bool) {
    if let Some(w) = rtlab_lab::guard::stale_journal_warning() {
        if !quiet {
            eprintln!("warning: {w}");
        }
    }
}

/// Hold the machine lock while measuring (`wait`: wait for the rtlab that holds it, said on
/// a terminal; a script's stderr keeps only what went wrong).
pub fn machine_lock(
    holder: &str,
    wait: bool,
) -> anyhow::Result<Option<rtlab_host::lock::MachineLock>> {
    use std::io::IsTerminal;
    let tty = std::io::stderr().is_terminal();
    rtlab_lab::guard::lock(holder, wait, |why| {
        if tty {
            eprintln!("rtlab: {why}")
        }
    })
    .map_err(lab_error)
}

/// The far side of a run in a few lines: where, its rtlab, the clocks, its counters in total.
pub fn far_lines(doc: &rtlab_core::schema::ResultDocument) -> String {
    let Some(f) = &doc.far else { return String::new() };
    let mut lines = f.summary().into_iter();
    let mut s = format!("{}\n", lines.next().unwrap_or_default());
    for l in lines {
        s.push_str(&format!("  {l}\n"));
    }
    s
}

/// Every verdict that is not `kept` on stderr, one line each, and the tally on stdout;
/// true when a gate failed.
pub fn gate_lines(verdicts: &[rtlab_core::gate::GateVerdict], quiet: bool) -> bool {
    for v in verdicts.iter().filter(|v| v.outcome != rtlab_core::gate::Outcome::Kept) {
        eprintln!("rtlab: {}", v.line());
    }
    let failed = verdicts.iter().filter(|v| v.outcome.fails()).count();
    if !quiet && !verdicts.is_empty() {
        let verdict = if failed > 0 { "FAILED" } else { "passed" };
        println!("gates {verdict}: {}", rtlab_report::gates::tally(verdicts));
    }
    failed > 0
}

/// A measuring command's last word: the verdict of what it measured (kept, missed N/M,
/// lost N/M; docs/reports.md "The verdict") and its gates judged; the exit status: 1 when a
/// gate failed, else 0.
pub fn judge(
    doc: &rtlab_core::schema::ResultDocument,
    gates: &[rtlab_core::gate::Gate],
    quiet: bool,
) -> u8 {
    use rtlab_core::run::{CaseRecord, CaseStatus};
    let case = CaseRecord {
        index: 0,
        name: doc.probe.clone(),
        probe: doc.probe.clone(),
        load: String::new(),
        profile: String::new(),
        params: Default::default(),
        repetition: 1,
        status: CaseStatus::Ok,
        document: Some(doc.clone()),
        load_report: None,
        profile_report: None,
        spike_evidence: None,
        published: None,
        started_at: doc.started_at.clone(),
        duration_ns: doc.duration_ns,
    };
    let verdicts = rtlab_core::judging::evaluate(
        gates,
        std::slice::from_ref(&case),
        std::slice::from_ref(&case.name),
    );
    let v = rtlab_report::verdict::case_verdict(&case, &verdicts);
    if !quiet && v.tone() != "none" {
        let max = match (v.failed(), v.max_ns, v.deadline_ns) {
            (true, Some(m), Some(d)) => format!(
                " (max {} us, deadline {} us)",
                rtlab_core::units::us_1(m),
                rtlab_core::units::us_1(d)
            ),
            _ => String::new(),
        };
        println!("verdict: {}{max}", v.word());
    }
    u8::from(gate_lines(&verdicts, quiet))
}
