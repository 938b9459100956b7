//! The timer probe (`rtlab timer`, scenario `kind = "timer"`): wake-up latency like
//! cyclictest (`abs`), ROS-style relative timer error (`rel`), roscpp's own timers (`roscpp`,
//! `roscpp-wall`, `roscpp-steady`, `roscpp-oneshot`: a node of Debian's ROS 1 each;
//! rtlab-engines `timer::roscpp`), the ROS timer models (`oneshot-model`, `roscpp-model`,
//! `rclcpp-model`; rtlab-engines `timer::ros`), and cycle jitter.
//!
//! Contract: [`TimerProbeConfig`] is the one configuration: its defaults are the defaults
//! of the CLI and of scenarios; `measure` runs the engine (rtlab-engines `timer_run`) under
//! the context's real-time settings with evidence around it and returns the document.

use crate::config::{at_least_one, positive, ConfigError, Dur, List, RtFields, Validate};
use crate::document::{run_warnings, EngineRun};
use crate::error::LabError;
use crate::probe::{Context, Plan, Probe, ProbeKind};
use rtlab_core::rt::RtSettings;
use rtlab_core::schema::ResultDocument;
use rtlab_core::warnings::Warn;
use rtlab_engines::timer::roscpp::RtOrder;
use rtlab_engines::timer::run::{self, TimerError, TimerOutcome, TimerThreadConfig};
use rtlab_engines::timer::TimerMode;
use serde::{Deserialize, Serialize};

/// Every mode's name (the CLI's choices).
pub use rtlab_engines::timer::MODE_NAMES;

/// The timer engine's configuration, as the probe makes it (the command prints it).
pub use rtlab_engines::timer::run::TimerConfig;

/// How long it measures when neither `duration` nor `count` is given.
pub const DEFAULT_DURATION: Dur = Dur::s(30);

pub const KIND: ProbeKind = ProbeKind {
    kind: "timer",
    about: "timer wake-up latency (like cyclictest), ROS-style timer error, cycle jitter",
    parse: crate::probe::parse_as::<TimerProbeConfig>,
};

/// The timer probe's configuration (flags and `[[probe]]` keys have these names).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimerProbeConfig {
    /// Measuring threads.
    pub threads: usize,
    /// One interval, or one per thread.
    pub interval: List<Dur>,
    /// Added to the interval of each further thread (cyclictest -d).
    pub distance: Option<Dur>,
    /// `abs` (clock_nanosleep TIMER_ABSTIME), `rel` (relative sleeps, like a ROS timer),
    /// roscpp itself (`roscpp`: ros::Timer, `roscpp-wall`, `roscpp-steady`, `roscpp-oneshot`:
    /// S4's one-shot test), or a ROS timer model (`oneshot-model`, `roscpp-model`,
    /// `rclcpp-model`).
    pub mode: TimerMode,
    /// roscpp modes: set the policy, priority and CPU `before-init` (S4's order: every roscpp
    /// thread inherits them) or `after-init` (the spinning thread alone) [before-init].
    pub roscpp_rt: Option<RtOrder>,
    /// How long to measure (30 s when neither this nor `count` is given).
    pub duration: Option<Dur>,
    /// Slots per thread (skipped slots count, so the run ends on time).
    pub count: Option<u64>,
    /// Samples above it are missed deadlines (default: the thread's interval).
    pub deadline: Option<Dur>,
    /// Width of a max-over-time window.
    pub window: Dur,
    /// Hold /dev/cpu_dma_latency at this many µs during the run.
    pub cpu_dma_latency: Option<u32>,
    /// Range of the cyclictest-format histogram (`--histogram-file`).
    pub histogram_max: Dur,
    /// One priority per thread (over the single `priority`).
    pub priorities: Option<List<i32>>,
    #[serde(flatten)]
    pub rt: RtFields,
    /// Outputs of the CLI (not part of a scenario's probe): the cyclictest histogram is kept
    /// when set, raw samples go to this file.
    #[serde(skip)]
    pub histogram_file: bool,
    #[serde(skip)]
    pub raw_file: Option<String>,
}

impl Default for TimerProbeConfig {
    fn default() -> Self {
        TimerProbeConfig {
            threads: 1,
            interval: List::one(Dur::ms(1)),
            distance: None,
            mode: TimerMode::Abs,
            roscpp_rt: None,
            duration: None,
            count: None,
            deadline: None,
            window: Dur::s(1),
            cpu_dma_latency: None,
            histogram_max: Dur(1_000_000),
            priorities: None,
            rt: RtFields::default(),
            histogram_file: false,
            raw_file: None,
        }
    }
}

/// On the command line the timer runs like cyclictest: SCHED_FIFO 80, memory locked.
pub fn default_rt() -> RtSettings {
    RtSettings::fifo80()
}

impl Validate for TimerProbeConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.threads == 0 || self.threads > 1024 {
            return Err(ConfigError::new(
                "threads",
                format!("{} is not in 1..=1024", self.threads),
            ));
        }
        let n = self.interval.0.len();
        if n == 0 || (n > 1 && n != self.threads) {
            return Err(ConfigError::new(
                "interval",
                format!("{n} values for {} threads (give one, or one per thread)", self.threads),
            ));
        }
        for d in &self.interval.0 {
            positive("interval", Some(*d))?;
        }
        positive("duration", self.duration)?;
        positive("deadline", self.deadline)?;
        positive("window", Some(self.window))?;
        at_least_one("count", self.count)?;
        if self.histogram_max.0 < 1_000 {
            return Err(ConfigError::new("histogram_max", "must be at least 1us"));
        }
        if self.roscpp_rt.is_some() && !self.mode.is_roscpp() {
            return Err(ConfigError::new(
                "roscpp_rt",
                format!("applies to the roscpp modes only (mode {})", self.mode.name()),
            ));
        }
        if let Some(p) = &self.priorities {
            if p.0.len() != self.threads && p.0.len() != 1 {
                return Err(ConfigError::new(
                    "priorities",
                    format!("{} values for {} threads", p.0.len(), self.threads),
                ));
            }
        }
        Ok(())
    }
}

impl TimerProbeConfig {
    /// The engine's configuration under `rt` (the settings after this probe's own fields).
    pub fn engine(&self, rt: &RtSettings) -> Result<TimerConfig, ConfigError> {
        let distance = self.distance.map(|d| d.0).unwrap_or(0);
        let mut threads = Vec::new();
        for i in 0..self.threads {
            let interval_ns = match self.interval.0.len() {
                1 => self.interval.0[0].0 + distance * i as i64,
                _ => self.interval.0[i].0,
            };
            let priority = match &self.priorities {
                Some(p) if p.0.len() > 1 => p.0[i],
                Some(p) => p.0[0],
                None => rt.priority,
            };
            rt.policy.check_priority(priority).map_err(|m| ConfigError::new("priority", m))?;
            // on roscpp after init, the timer thread stays at normal priority: a pinned
            // real-time spinner starves it just the same
            if let (true, true, Some(c)) =
                (self.mode.is_oneshot(), rt.policy.is_realtime(), rt.cpu_of(i))
            {
                return Err(ConfigError::new(
                    "mode",
                    format!(
                        "{} busy-spins its test thread (S4's spinOnce loop): under {} pinned \
                         to CPU {c} it would starve roscpp's timer thread on the same CPU; run it \
                         unpinned or with policy other",
                        self.mode.name(),
                        rt.policy.name()
                    ),
                ));
            }
            threads.push(TimerThreadConfig {
                interval_ns,
                policy: rt.policy,
                priority,
                cpu: rt.cpu_of(i),
                deadline_ns: self.deadline.map(|d| d.0).unwrap_or(interval_ns),
            });
        }
        let duration_ns = crate::probe::run_length(self.duration, self.count, DEFAULT_DURATION);
        Ok(TimerConfig {
            mode: self.mode,
            threads,
            duration_ns,
            loops: self.count,
            window_ns: self.window.0,
            mlockall: rt.mlockall,
            cpu_dma_latency_us: self.cpu_dma_latency.map(|v| v.min(i32::MAX as u32) as i32),
            stack_prefault_bytes: 256 * 1024,
            histogram_us_buckets: self
                .histogram_file
                .then_some((self.histogram_max.0 / 1_000) as usize),
            raw_file: self.raw_file.clone(),
            roscpp_rt: self.roscpp_rt.unwrap_or_default(),
        })
    }

    fn longest_interval(&self) -> i64 {
        let d = self.distance.map(|d| d.0).unwrap_or(0);
        let base = self.interval.0.iter().map(|d| d.0).max().unwrap_or(1_000_000);
        base + d * (self.threads.saturating_sub(1)) as i64
    }
}

/// Run the timer probe; the document and the engine's outcome (the CLI prints from both).
pub fn measure(
    cfg: &TimerProbeConfig,
    ctx: &mut Context<'_>,
) -> Result<(ResultDocument, TimerOutcome, TimerConfig), LabError> {
    crate::cost::before_case();
    let rt = cfg.rt.over(&ctx.rt);
    let engine = cfg.engine(&rt)?;
    let mut ev = ctx.evidence.clone();
    ev.window_ns = engine.window_ns;
    ev.victim = "rtlab-timer".into();
    ev.cpus = engine.threads.iter().filter_map(|t| t.cpu).collect();
    ev.sources = (0..engine.threads.len()).map(|i| format!("thread{i}")).collect();
    ev.planned =
        Some(std::time::Duration::from_nanos(Probe::plan(cfg).estimate_ns().max(0) as u64));
    let host = crate::host::host();
    let evidence = crate::evidence::EvidenceRun::start(host, &ev)?;
    let started = std::time::SystemTime::now();
    let env = rtlab_sys::env::detect(std::path::Path::new("/"));
    let progress = &mut *ctx.progress;
    let measured =
        run::run_with_spike(&engine, ctx.stop.clone(), evidence.hook(), |done, planned| {
            progress(done, planned)
        });
    // finished (tracefs put back) before anything else, whatever the probe did
    let streams = measured.as_ref().map(|o| o.streams(&engine)).unwrap_or_default();
    let evidence = evidence.finish(&streams);
    let outcome = match measured {
        Ok(o) => o,
        Err(TimerError::Sys(e)) => return Err(LabError::from_sys(e)),
        Err(TimerError::Invalid(m)) => return Err(LabError::Failed(m)),
        Err(e) => return Err(LabError::failed(e)),
    };
    let mut doc = document(&engine, &outcome, env, started, ctx.mlockall_off_by_profile)?;
    doc.evidence = Some(evidence);
    crate::cost::attach(&mut doc);
    Ok((doc, outcome, engine))
}

/// The result document of a timer run, with its warnings.
pub fn document(
    cfg: &TimerConfig,
    outcome: &TimerOutcome,
    env: rtlab_core::schema::Environment,
    started: std::time::SystemTime,
    mlockall_off_by_profile: bool,
) -> Result<ResultDocument, LabError> {
    let mut config = serde_json::to_value(cfg).map_err(LabError::failed)?;
    let nodes: Vec<_> = outcome.threads.iter().filter_map(|t| t.roscpp.as_ref()).collect();
    if !nodes.is_empty() {
        config["roscpp"] = serde_json::to_value(&nodes).map_err(LabError::failed)?;
        config["notes"] = serde_json::to_value(roscpp_notes(outcome)).map_err(LabError::failed)?;
    }
    let o = outcome;
    let run = EngineRun::of(o.duration_ns, o.interrupted, &o.memory_lock, &o.cpu_dma_latency);
    let mut doc = run.document("timer", started, env, config, outcome.streams(cfg));
    let any_other = cfg.threads.iter().any(|t| !t.policy.is_realtime());
    let fewest = outcome.threads.iter().map(|t| t.latency.count()).min().unwrap_or(0);
    let facts = run.facts(any_other, mlockall_off_by_profile, fewest);
    let mut extra: Vec<Warn> = (outcome.raw_dropped > 0)
        .then_some(Warn::RawSamplesDropped { dropped: outcome.raw_dropped })
        .into_iter()
        .collect();
    extra.extend(roscpp_warnings(outcome));
    doc.warnings = run_warnings(&doc.environment, &facts, extra);
    Ok(doc)
}

/// A roscpp node whose timer thread ran at a normal policy while its callbacks ran
/// real-time (the policy set after `ros::init`: S4's warning).
fn roscpp_warnings(outcome: &TimerOutcome) -> Vec<Warn> {
    let realtime = |p: &str| p == "fifo" || p == "rr";
    let mut out = Vec::new();
    for (i, t) in outcome.threads.iter().enumerate() {
        let Some(r) = &t.roscpp else { continue };
        let (Some(spin), Some(timer)) = (&r.spin, &r.timer) else { continue };
        if realtime(&spin.policy) && !realtime(&timer.policy) {
            out.push(Warn::TimerThreadNotRealtime {
                thread: i,
                timer: timer.describe(),
                spin: spin.describe(),
                normal: r.others.iter().filter(|o| !realtime(&o.policy)).count() as u32,
                others: r.others.len() as u32,
            });
        }
    }
    out
}

/// What each roscpp node said: where its threads ran, and why one failed.
pub fn roscpp_notes(outcome: &TimerOutcome) -> Vec<String> {
    let mut notes = Vec::new();
    for (i, t) in outcome.threads.iter().enumerate() {
        let Some(r) = &t.roscpp else { continue };
        if let Some(line) = r.threads_line() {
            notes.push(format!("thread{i}: {line}"));
        }
        if let Some(e) = &r.error {
            notes.push(format!("thread{i}: roscpp's node: {e}"));
        }
    }
    notes
}

impl Probe for TimerProbeConfig {
    fn kind(&self) -> &'static str {
        "timer"
    }
    fn config(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
    fn plan(&self) -> Plan {
        let duration_ns = crate::probe::run_length(self.duration, self.count, DEFAULT_DURATION);
        Plan { duration_ns, count: self.count, period_ns: self.longest_interval(), sweep: 1 }
    }
    fn scale(&mut self, factor: f64, floor: u64) -> Option<String> {
        let period = self.longest_interval();
        crate::probe::scale_length(&mut self.duration, &mut self.count, period, factor, floor)
    }
    fn rt(&self, base: &RtSettings) -> RtSettings {
        self.rt.over(base)
    }
    fn measure(&self, ctx: &mut Context<'_>) -> Result<ResultDocument, LabError> {
        measure(self, ctx).map(|(doc, _, _)| doc)
    }
}
