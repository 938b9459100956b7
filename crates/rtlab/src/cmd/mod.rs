//! One module per command: flags -> config, run, render, write.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub mod agent;
pub mod compare;
pub mod cyclic;
pub mod export;
pub mod gen;
pub mod load;
pub mod monitor;
pub mod netns;
pub mod noise;
pub mod observe;
pub mod pubsub;
pub mod push;
pub mod report;
pub mod roscpp_node;
pub mod run;
pub mod runs;
pub mod serve;
pub mod timer;
pub mod trace;
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

/// Apply the profile for what is not a probe (the reflector: it holds no lock and is no
/// probe): its process pinned or not, its threads' settings; said unless quiet; put back
/// when the returned guard is finished ([`finish_profile`]) or dropped.
pub fn apply_profile_for(
    profile: Option<&rtlab_lab::command_profile::CommandProfile>,
    pins_process: bool,
    rt: &rtlab_core::rt::RtSettings,
    quiet: bool,
) -> anyhow::Result<Option<(String, rtlab_lab::command_profile::Applied)>> {
    let Some(p) = profile else { return Ok(None) };
    let applied = p.apply(pins_process, rt).map_err(lab_error)?;
    say_applied(p.name(), &applied.lines(), quiet);
    Ok(Some((p.name().to_string(), applied)))
}

/// Put the profile back: what it did goes into the document (`config.profile`), and a
/// warning when something could not be put back.
pub fn finish_profile(
    applied: Option<(String, rtlab_lab::command_profile::Applied)>,
    doc: &mut rtlab_core::schema::ResultDocument,
    quiet: bool,
) {
    let Some((name, a)) = applied else { return };
    if a.finish_into(doc) {
        say_restored(&name, quiet);
    }
}

/// A profile applied, said with its steps (nothing with --quiet).
fn say_applied(name: &str, lines: &[String], quiet: bool) {
    if !quiet {
        println!("profile {name} (journaled, put back when the run ends):");
        for l in lines {
            println!("  {l}");
        }
    }
}

/// A profile put back cleanly, said (nothing with --quiet).
fn say_restored(name: &str, quiet: bool) {
    if !quiet {
        println!("profile {name}: put back");
    }
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

/// A probe command of the lab ([`rtlab_lab::command`]): the lock `holder` (None: none),
/// the profile, the settings under the probe's, Ctrl-C, the evidence.
pub fn probe_command<'p>(
    holder: Option<&'static str>,
    profile: Option<&'p rtlab_lab::command_profile::CommandProfile>,
    base: rtlab_core::rt::RtSettings,
    stop: Arc<AtomicBool>,
    evidence: rtlab_lab::evidence::EvidenceOptions,
) -> rtlab_lab::command::ProbeCommand<'p> {
    rtlab_lab::command::ProbeCommand { holder, profile, base, stop, evidence, pair: None }
}

/// A probe command's headline, from its pair of namespaces if it made one.
type Headline<'h> = dyn FnMut(Option<&rtlab_lab::netns::NetnsPair>) -> String + 'h;

/// What a probe command says as it measures ([`rtlab_lab::command::Voice`]): what it does
/// on stdout, a wait for another rtlab on stderr (on a terminal: a script's stderr keeps only
/// what went wrong), warnings on stderr, the progress on stderr; with --quiet only what
/// went wrong.
pub struct Say<'h> {
    quiet: bool,
    what: &'static str,
    planned: u64,
    progress: Option<crate::progress::Progress>,
    /// The headline: printed when measuring begins, or with the first progress.
    headline: Box<Headline<'h>>,
    at_first_progress: bool,
}

impl<'h> Say<'h> {
    /// `what`: the progress bar's label; `planned`: its slots (0: said by the probe).
    pub fn new(
        what: &'static str,
        planned: u64,
        quiet: bool,
        headline: impl FnMut(Option<&rtlab_lab::netns::NetnsPair>) -> String + 'h,
    ) -> Self {
        Say {
            quiet,
            what,
            planned,
            progress: None,
            headline: Box::new(headline),
            at_first_progress: false,
        }
    }

    /// The headline waits for the first progress (the probe's checks passed by then).
    pub fn at_first_progress(mut self) -> Self {
        self.at_first_progress = true;
        self
    }

    fn say_headline(&mut self, pair: Option<&rtlab_lab::netns::NetnsPair>) {
        if self.progress.is_none() {
            if !self.quiet {
                println!("{}", (self.headline)(pair));
            }
            let p = crate::progress::Progress::new(self.planned, self.what, self.quiet);
            self.progress = Some(p);
        }
    }
}

impl rtlab_lab::command::Voice for Say<'_> {
    fn waiting(&mut self, why: &str) {
        use std::io::IsTerminal;
        if std::io::stderr().is_terminal() {
            eprintln!("rtlab: {why}")
        }
    }
    fn stale_journal(&mut self, warning: &str) {
        if !self.quiet {
            eprintln!("warning: {warning}");
        }
    }
    fn profile_applied(&mut self, name: &str, lines: &[String]) {
        say_applied(name, lines, self.quiet);
    }
    fn start(&mut self, pair: Option<&rtlab_lab::netns::NetnsPair>) {
        if !self.at_first_progress {
            self.say_headline(pair);
        }
    }
    fn progress(&mut self, done: u64, planned: u64) {
        self.say_headline(None);
        if let Some(p) = &self.progress {
            p.set_len_once(planned);
            p.set(done);
        }
    }
    fn end(&mut self) {
        if let Some(p) = &self.progress {
            p.finish();
        }
    }
    fn profile_restored(&mut self, name: &str) {
        say_restored(name, self.quiet);
    }
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
