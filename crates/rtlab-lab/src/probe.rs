//! The probe interface: every probe is one module with one typed configuration and one
//! `measure`, registered by one line in [`crate::registry::PROBES`].
//!
//! Contract: `measure(config, context)` runs the probe with the context's real-time settings
//! under it, collects the context's evidence around it, and returns the result document
//! with its warnings, or a [`LabError`] whose kind decides what the caller does with it
//! (bad input: exit 2 / a failed case; [`LabError::Missing`]: a skipped case, with the fix). A probe
//! never prints. The scenario executor and the CLI call the same `measure`.

use crate::config::{ConfigError, Dur};
use crate::error::LabError;
use crate::evidence::EvidenceOptions;
use rtlab_core::rt::RtSettings;
use rtlab_core::schema::ResultDocument;
use rtlab_engines::netns::NetnsPair;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What a probe runs with.
pub struct Context<'a> {
    /// The real-time settings under the probe's own fields: the case's profile in a
    /// scenario, the probe's default on the command line.
    pub rt: RtSettings,
    /// Raised by Ctrl-C (or a closed output): the probe ends early and keeps what it has.
    pub stop: Arc<AtomicBool>,
    /// Counters and spike tracing; the probe fills in its threads and streams.
    pub evidence: EvidenceOptions,
    /// The two namespaces of a scenario's network case (the far side lives in `b`).
    pub pair: Option<&'a NetnsPair>,
    /// The link to the far side a scenario case opened (for its far load and profile);
    /// None: a probe with a far side opens its own.
    pub far: Option<&'a crate::far::link::FarLink>,
    /// Called with (done, planned) from the probe's progress, never from a measuring thread.
    pub progress: &'a mut dyn FnMut(u64, u64),
    /// The case's profile turned the memory lock off on purpose (no warning then).
    pub mlockall_off_by_profile: bool,
}

impl<'a> Context<'a> {
    /// A context with no evidence, no pair and no progress (tests, simple callers).
    pub fn new(
        rt: RtSettings,
        stop: Arc<AtomicBool>,
        progress: &'a mut dyn FnMut(u64, u64),
    ) -> Self {
        Context {
            rt,
            stop,
            evidence: EvidenceOptions::new(1_000_000_000, ""),
            pair: None,
            far: None,
            progress,
            mlockall_off_by_profile: false,
        }
    }
}

/// How long a configured probe measures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The measuring time the configuration asks for, if it says one.
    pub duration_ns: Option<i64>,
    /// The number of slots (samples asked for), if it says one.
    pub count: Option<u64>,
    /// The probe's period (its slots' spacing), for estimates.
    pub period_ns: i64,
    /// Cases of a sweep inside the probe (pubsub payload x rate x subscribers).
    pub sweep: u64,
}

impl Plan {
    /// The time the probe will take: its duration, else count x period, for every case of
    /// its sweep; a count-only probe ends at the count whatever the overruns (slots, not
    /// samples, are counted).
    pub fn estimate_ns(&self) -> i64 {
        let one = match (self.duration_ns, self.count) {
            (Some(d), Some(c)) => d.min((c as i64).saturating_mul(self.period_ns)),
            (Some(d), None) => d,
            (None, Some(c)) => (c as i64).saturating_mul(self.period_ns),
            (None, None) => 0,
        };
        one.saturating_mul(self.sweep.max(1) as i64)
    }
}

/// A configured probe, ready to measure.
pub trait Probe: std::fmt::Debug + Send + Sync {
    /// Its kind (`timer`, `udp`, `pubsub`, `cyclic`).
    fn kind(&self) -> &'static str;
    /// Its configuration as stored (every field, defaults included).
    fn config(&self) -> serde_json::Value;
    /// How long it measures.
    fn plan(&self) -> Plan;
    /// Scale its duration and count (`--scale`), never below `floor` slots; says what it
    /// did when a floor applied.
    fn scale(&mut self, factor: f64, floor: u64) -> Option<String>;
    /// Needs two network namespaces in a scenario (its far side in `b`).
    fn needs_pair(&self) -> bool {
        false
    }
    /// The network namespace its near side measures from (`netns = "..."`), if any.
    fn near_netns(&self) -> Option<&str> {
        None
    }
    /// Where its far side runs (`far = "ssh:robot2"`), if it has one.
    fn far(&self) -> Option<&crate::far::FarSpec> {
        None
    }
    /// Give it a far side (a scenario's top-level `far`, for probes that have one; false:
    /// this probe has no far side).
    fn set_far(&mut self, _far: &crate::far::FarSpec) -> bool {
        false
    }
    /// The profile's process settings apply to the whole process (false: pin threads only,
    /// as multi-threaded middleware must be).
    fn pins_process(&self) -> bool {
        true
    }
    /// Its own checks before anything on the machine changes (a kernel tracer it needs, a
    /// tracer running already): one line why not.
    fn ready(&self) -> Result<(), LabError> {
        Ok(())
    }
    /// The real-time settings it runs with over `base`.
    fn rt(&self, base: &RtSettings) -> RtSettings;
    /// Run it.
    fn measure(&self, ctx: &mut Context<'_>) -> Result<ResultDocument, LabError>;
}

/// A probe kind: how its configuration is read.
pub struct ProbeKind {
    pub kind: &'static str,
    pub about: &'static str,
    /// Read and validate a configuration from a table (a scenario case, or flags).
    pub parse: fn(&toml::Table) -> Result<Box<dyn Probe>, ConfigError>,
}

/// How long a probe measures: its duration if given, else until its count (None), else
/// `default` (every probe's one rule for "neither was given").
pub fn run_length(duration: Option<Dur>, count: Option<u64>, default: Dur) -> Option<i64> {
    match (duration, count) {
        (Some(d), _) => Some(d.0),
        (None, Some(_)) => None,
        (None, None) => Some(default.0),
    }
}

/// Scale a duration and a count by `factor`, never below `floor` slots of `period_ns`
/// (nor below what was written, when that was less); a note when the floor applied.
pub fn scale_length(
    duration: &mut Option<Dur>,
    count: &mut Option<u64>,
    period_ns: i64,
    factor: f64,
    floor: u64,
) -> Option<String> {
    let mut note = None;
    if let Some(c) = count.as_mut() {
        let want = (*c as f64 * factor).round() as u64;
        let min = floor.min(*c);
        if want < min {
            note = Some(format!("count {} x {factor} is below {min}: kept at {min}", *c));
        }
        *c = want.max(min).max(1);
    }
    if let Some(d) = duration.as_mut() {
        let want = (d.0 as f64 * factor).round() as i64;
        let min = (period_ns.max(1)).saturating_mul(floor as i64).min(d.0);
        if want < min {
            note = Some(format!(
                "duration {} x {factor} is below {floor} periods: kept at {}",
                rtlab_core::units::format_duration_exact(rtlab_core::units::Nanos(d.0)),
                rtlab_core::units::format_duration_exact(rtlab_core::units::Nanos(min))
            ));
        }
        d.0 = want.max(min).max(1);
    }
    note
}

/// Parse a table into a boxed probe of configuration `C`.
pub fn parse_as<C>(table: &toml::Table) -> Result<Box<dyn Probe>, ConfigError>
where
    C: serde::de::DeserializeOwned
        + serde::Serialize
        + Default
        + crate::config::Validate
        + Probe
        + 'static,
{
    Ok(Box::new(crate::config::from_table::<C>(table)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_keeps_a_floor_and_says_so() {
        let (mut d, mut c) = (None, Some(2_000_000));
        assert!(scale_length(&mut d, &mut c, 1_000_000, 0.01, 100).is_none());
        assert_eq!(c, Some(20_000));
        let mut c = Some(5000);
        let note = scale_length(&mut d, &mut c, 1_000_000, 0.001, 100);
        assert_eq!(c, Some(100));
        assert!(note.unwrap().contains("kept at 100"));
        let mut d = Some(crate::config::Dur::s(10));
        let mut c = None;
        scale_length(&mut d, &mut c, 10_000_000, 0.001, 100);
        assert_eq!(d, Some(crate::config::Dur::s(1)), "100 periods of 10 ms");
    }

    #[test]
    fn a_plan_counts_slots() {
        let p = Plan { duration_ns: None, count: Some(4_320_000), period_ns: 20_000, sweep: 1 };
        assert_eq!(p.estimate_ns(), 86_400_000_000);
    }
}
