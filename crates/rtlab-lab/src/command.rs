//! A probe command's run (`rtlab timer | cyclic | udp ping | pubsub | noise | observe`): the
//! one skeleton every probe command shares, and the entry that measures a probe by kind.
//!
//! Contract: [`ProbeCommand::run`] takes the machine's lock (unless the command has none),
//! says a dead rtlab's journal still in force, runs the probe's own checks
//! ([`Probe::ready`]) before anything changes, brings up the command's pair of namespaces,
//! applies the `--profile` (journaled), measures, and puts back what it changed in reverse
//! order (the pair, then the profile: also on an error, through their guards), the
//! profile's report and any warning in the result document. Nothing here prints: each step
//! is said to the caller's [`Voice`].

use crate::command_profile::{Applied, CommandProfile};
use crate::error::LabError;
use crate::evidence::EvidenceOptions;
use crate::netns::{NetnsConfig, NetnsPair};
use crate::probe::{Context, Probe};
use rtlab_core::rt::RtSettings;
use rtlab_core::schema::ResultDocument;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What a probe command says as it goes; every method has a silent default.
pub trait Voice {
    /// Another rtlab holds the machine: this one waits (why).
    fn waiting(&mut self, _why: &str) {}
    /// A dead rtlab's changes are still in force on this machine.
    fn stale_journal(&mut self, _warning: &str) {}
    /// The profile is applied: its name and what each step did.
    fn profile_applied(&mut self, _name: &str, _lines: &[String]) {}
    /// Measuring begins (with the command's pair of namespaces, when it has one).
    fn start(&mut self, _pair: Option<&NetnsPair>) {}
    /// Progress: slots done of planned (0: not known yet).
    fn progress(&mut self, _done: u64, _planned: u64) {}
    /// Measuring ended (also when it failed).
    fn end(&mut self) {}
    /// The profile was put back cleanly.
    fn profile_restored(&mut self, _name: &str) {}
}

/// What a measurement returns: a result document, and what the command shows beside it.
pub trait Measured {
    fn document(&mut self) -> &mut ResultDocument;
}

impl Measured for ResultDocument {
    fn document(&mut self) -> &mut ResultDocument {
        self
    }
}

impl<T> Measured for (ResultDocument, T) {
    fn document(&mut self) -> &mut ResultDocument {
        &mut self.0
    }
}

impl Measured for crate::probes::udp::PingRun {
    fn document(&mut self) -> &mut ResultDocument {
        &mut self.doc
    }
}

/// A probe command, configured.
pub struct ProbeCommand<'p> {
    /// Who holds the machine's lock while it measures (`rtlab cyclic`); None: no lock (an
    /// observer listens to traffic others make; a pong by hand is the peer of a ping that
    /// holds it).
    pub holder: Option<&'static str>,
    /// The `--profile`, applied for the measurement.
    pub profile: Option<&'p CommandProfile>,
    /// The real-time settings under the probe's own (the profile's, else the probe's).
    pub base: RtSettings,
    /// Raised by Ctrl-C: the probe ends early and keeps what it has.
    pub stop: Arc<AtomicBool>,
    pub evidence: EvidenceOptions,
    /// Two network namespaces made for this command (`udp ping --pair`), removed after.
    pub pair: Option<NetnsConfig>,
}

impl ProbeCommand<'_> {
    /// Run `probe` through `measure` (its typed measurement) in the skeleton above.
    pub fn run<M: Measured>(
        self,
        probe: &dyn Probe,
        voice: &mut dyn Voice,
        measure: impl FnOnce(&mut Context<'_>) -> Result<M, LabError>,
    ) -> Result<M, LabError> {
        let _lock = match self.holder {
            Some(h) => crate::guard::lock(h, true, |why| voice.waiting(why))?,
            None => None,
        };
        if let Some(w) = crate::guard::stale_journal_warning() {
            voice.stale_journal(&w);
        }
        probe.ready()?;
        // the namespaces are a guard: removed when this function returns, however
        let pair = self.pair.as_ref().map(NetnsPair::up).transpose().map_err(LabError::failed)?;
        let applied = self.profile.map(|p| apply(p, probe, &self.base, voice)).transpose()?;
        voice.start(pair.as_ref());
        let mut progress = |done, planned| voice.progress(done, planned);
        let mut ctx = Context::new(self.base, self.stop, &mut progress);
        ctx.evidence = self.evidence;
        ctx.pair = pair.as_ref();
        let measured = measure(&mut ctx);
        drop(ctx);
        voice.end();
        drop(pair); // the namespaces go now, also when the probe failed
        let mut measured = measured?;
        if let Some((name, a)) = applied {
            if a.finish_into(measured.document()) {
                voice.profile_restored(&name);
            }
        }
        Ok(measured)
    }

    /// Measure a probe by kind (`timer`, `cyclic`, `noise` ...) from its table (a scenario's
    /// `[[probe]]` table, or a command's flags as one).
    pub fn measure(
        self,
        kind: &str,
        table: &toml::Table,
        voice: &mut dyn Voice,
    ) -> Result<ResultDocument, LabError> {
        let k = crate::registry::kind(kind).ok_or_else(|| {
            LabError::Failed(format!(
                "probe kind '{kind}': expected one of {}",
                crate::registry::kind_names()
            ))
        })?;
        let probe = (k.parse)(table)?;
        self.run(probe.as_ref(), voice, |ctx| probe.measure(ctx))
    }
}

/// Apply the profile for `probe` (its process pinned or not, its threads' settings over
/// `base`) and say its steps.
fn apply(
    p: &CommandProfile,
    probe: &dyn Probe,
    base: &RtSettings,
    voice: &mut dyn Voice,
) -> Result<(String, Applied), LabError> {
    let applied = p.apply(probe.pins_process(), &probe.rt(base))?;
    voice.profile_applied(p.name(), &applied.lines());
    Ok((p.name().to_string(), applied))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the command said, in order.
    #[derive(Default)]
    struct Heard(Vec<String>);

    impl Voice for Heard {
        fn start(&mut self, pair: Option<&NetnsPair>) {
            self.0.push(format!("start pair={}", pair.is_some()));
        }
        fn progress(&mut self, _done: u64, _planned: u64) {
            if self.0.last().map(String::as_str) != Some("progress") {
                self.0.push("progress".into());
            }
        }
        fn end(&mut self) {
            self.0.push("end".into());
        }
    }

    fn command(stop: Arc<AtomicBool>) -> ProbeCommand<'static> {
        ProbeCommand {
            holder: None,
            profile: None,
            base: crate::probes::timer::default_rt(),
            stop,
            evidence: EvidenceOptions::new(1_000_000_000, ""),
            pair: None,
        }
    }

    #[test]
    fn a_probe_by_kind_is_measured_and_said_in_order() {
        // a timer at normal priority: no privilege needed, no lock, no profile
        let t: toml::Table =
            "count = 20\ninterval = \"1ms\"\npolicy = \"other\"\nmlockall = false\n"
                .parse()
                .unwrap();
        let mut heard = Heard::default();
        let doc = command(Arc::default()).measure("timer", &t, &mut heard).unwrap();
        assert_eq!(doc.probe, "timer");
        assert!(doc.config.get("profile").is_none(), "no profile: none recorded");
        assert_eq!(heard.0.first().map(String::as_str), Some("start pair=false"));
        assert_eq!(heard.0.last().map(String::as_str), Some("end"));
    }

    #[test]
    fn an_unknown_kind_or_a_bad_table_is_one_line_naming_it() {
        let mut heard = Heard::default();
        let e = command(Arc::default())
            .measure("sonar", &toml::Table::new(), &mut heard)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("probe kind 'sonar': expected one of timer, "), "{e}");
        let t: toml::Table = "interval = \"0ms\"".parse().unwrap();
        let e = command(Arc::default()).measure("timer", &t, &mut heard).unwrap_err();
        assert!(matches!(e, LabError::Config(_)), "{e}");
        assert!(heard.0.is_empty(), "nothing began: {:?}", heard.0);
    }
}
