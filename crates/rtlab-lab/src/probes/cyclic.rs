//! The cyclic probe (`rtlab cyclic`, scenario `kind = "cyclic"`): a control loop as S2 runs
//! it — wake on the absolute grid, do a given amount of work (calibrated computation or a
//! memory walk), sleep to the next slot — reporting the response time (end - slot) with
//! deadline misses, the wake-up latency and the job's duration.
//!
//! Contract: [`CyclicProbeConfig`] is the one configuration (CLI and scenarios); `measure`
//! runs the engine (rtlab-engines `cyclic`) under the context's real-time settings with the
//! evidence around it. Added as one module and one line in [`crate::registry::PROBES`].

use crate::config::{at_least_one, positive, ConfigError, Dur, RtFields, Size, Validate};
use crate::document::{run_warnings, EngineRun};
use crate::error::LabError;
use crate::probe::{Context, Plan, Probe, ProbeKind};
use rtlab_core::rt::RtSettings;
use rtlab_core::schema::ResultDocument;
use rtlab_core::warnings::Warn;
use rtlab_engines::cyclic::{self, CyclicConfig, CyclicError, CyclicOutcome, Work};
use serde::{Deserialize, Serialize};

/// How long it measures when neither `duration` nor `count` is given.
pub const DEFAULT_DURATION: Dur = Dur::s(30);

pub const KIND: ProbeKind = ProbeKind {
    kind: "cyclic",
    about: "a cyclic job (S2's control loop): wake-up latency, job duration, response time",
    parse: crate::probe::parse_as::<CyclicProbeConfig>,
};

/// The cyclic probe's configuration (flags and `[[probe]]` keys have these names).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CyclicProbeConfig {
    /// The period of every thread's grid.
    pub interval: Dur,
    /// Calibrated computation per cycle (`200us`), unless `walk` is given.
    pub work: Dur,
    /// A memory walk per cycle instead: a buffer of this size touched every `stride` bytes.
    pub walk: Option<Size>,
    pub stride: Size,
    pub threads: usize,
    /// How long to measure (30 s when neither this nor `count` is given).
    pub duration: Option<Dur>,
    /// Cycles (slots) per thread.
    pub count: Option<u64>,
    /// Response times above it are missed deadlines (default: the interval).
    pub deadline: Option<Dur>,
    pub window: Dur,
    /// Hold /dev/cpu_dma_latency at this many µs during the run.
    pub cpu_dma_latency: Option<u32>,
    #[serde(flatten)]
    pub rt: RtFields,
}

impl Default for CyclicProbeConfig {
    fn default() -> Self {
        CyclicProbeConfig {
            interval: Dur::ms(1),
            work: Dur(200_000),
            walk: None,
            stride: Size(64),
            threads: 1,
            duration: None,
            count: None,
            deadline: None,
            window: Dur::s(1),
            cpu_dma_latency: None,
            rt: RtFields::default(),
        }
    }
}

/// On the command line the job runs SCHED_FIFO 80 with memory locked.
pub fn default_rt() -> RtSettings {
    RtSettings::fifo80()
}

impl Validate for CyclicProbeConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        positive("interval", Some(self.interval))?;
        if self.work.0 < 0 {
            return Err(ConfigError::new("work", "must be 0 or more"));
        }
        positive("duration", self.duration)?;
        positive("deadline", self.deadline)?;
        positive("window", Some(self.window))?;
        at_least_one("count", self.count)?;
        if self.threads == 0 || self.threads > 1024 {
            return Err(ConfigError::new(
                "threads",
                format!("{} is not in 1..=1024", self.threads),
            ));
        }
        if self.stride.0 == 0 {
            return Err(ConfigError::new("stride", "must be at least 1 byte"));
        }
        self.job().check().map_err(|m| {
            let f = if self.walk.is_some() { "walk" } else { "work" };
            ConfigError::new(f, m)
        })
    }
}

impl CyclicProbeConfig {
    fn job(&self) -> Work {
        match self.walk {
            Some(b) => Work::MemoryWalk { bytes: b.0 as usize, stride: self.stride.0 as usize },
            None => Work::Compute { ns: self.work.0 },
        }
    }

    /// The engine's configuration under `rt`.
    pub fn engine(&self, rt: &RtSettings) -> Result<CyclicConfig, ConfigError> {
        rt.check().map_err(|m| ConfigError::new("priority", m))?;
        let mut c = CyclicConfig::new(self.interval.0, self.job(), rt.clone());
        c.threads = self.threads;
        c.duration_ns = crate::probe::run_length(self.duration, self.count, DEFAULT_DURATION);
        c.count = self.count;
        c.deadline_ns = self.deadline.map(|d| d.0);
        c.window_ns = self.window.0;
        c.cpu_dma_latency_us = self.cpu_dma_latency.map(|v| v.min(i32::MAX as u32) as i32);
        Ok(c)
    }
}

/// Run the cyclic probe; the document and the engine's outcome.
pub fn measure(
    cfg: &CyclicProbeConfig,
    ctx: &mut Context<'_>,
) -> Result<(ResultDocument, CyclicOutcome, CyclicConfig), LabError> {
    crate::cost::before_case();
    let rt = cfg.rt.over(&ctx.rt);
    let engine = cfg.engine(&rt)?;
    let mut ev = ctx.evidence.clone();
    ev.window_ns = engine.window_ns;
    ev.victim = "rtlab-cyclic".into();
    ev.cpus = (0..engine.threads).filter_map(|i| rt.cpu_of(i)).collect();
    ev.sources = (0..engine.threads).map(|i| format!("thread{i}")).collect();
    ev.planned =
        Some(std::time::Duration::from_nanos(Probe::plan(cfg).estimate_ns().max(0) as u64));
    let evidence = crate::evidence::EvidenceRun::start(crate::host::host(), &ev)?;
    let started = std::time::SystemTime::now();
    let env = rtlab_sys::env::detect(std::path::Path::new("/"));
    let progress = &mut *ctx.progress;
    let measured = cyclic::run_with_spike(&engine, ctx.stop.clone(), evidence.hook(), progress);
    let streams = measured.as_ref().map(|o| o.streams(&engine)).unwrap_or_default();
    let evidence = evidence.finish(&streams);
    let outcome = match measured {
        Ok(o) => o,
        Err(CyclicError::Sys(e)) => return Err(LabError::from_sys(e)),
        Err(e) => return Err(LabError::failed(e)),
    };
    let config = serde_json::json!({
        "cyclic": engine,
        "calibration": outcome.threads.iter().map(|t| t.calibration.clone()).collect::<Vec<_>>(),
    });
    let o = &outcome;
    let run = EngineRun::of(o.duration_ns, o.interrupted, &o.memory_lock, &o.cpu_dma_latency);
    let mut doc = run.document("cyclic", started, env, config, streams);
    doc.evidence = Some(evidence);
    let fewest = outcome.threads.iter().map(|t| t.cycles()).min().unwrap_or(0);
    let facts = run.facts(!rt.policy.is_realtime(), ctx.mlockall_off_by_profile, fewest);
    doc.warnings = run_warnings(&doc.environment, &facts, job_too_long(&doc.streams, &engine));
    crate::cost::attach(&mut doc);
    Ok((doc, outcome, engine))
}

/// A thread whose job took longer than the period at median: its misses are the job's.
fn job_too_long(streams: &[rtlab_core::schema::Stream], engine: &CyclicConfig) -> Vec<Warn> {
    let stream = |name: &str| streams.iter().find(|s| s.name == name);
    (0..engine.threads)
        .filter_map(|i| {
            let (job, response) =
                (stream(&format!("thread{i}.job"))?, stream(&format!("thread{i}"))?);
            let job_p50_ns = job.stats.p50_ns?;
            (job.stats.count > 0 && job_p50_ns >= engine.interval_ns).then(|| {
                Warn::JobLongerThanPeriod {
                    thread: format!("thread{i}"),
                    job_p50_ns,
                    period_ns: engine.interval_ns,
                    missed: response.stats.missed.unwrap_or(0),
                    cycles: response.stats.count,
                }
            })
        })
        .collect()
}

impl Probe for CyclicProbeConfig {
    fn kind(&self) -> &'static str {
        "cyclic"
    }
    fn config(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
    fn plan(&self) -> Plan {
        let duration_ns = crate::probe::run_length(self.duration, self.count, DEFAULT_DURATION);
        Plan { duration_ns, count: self.count, period_ns: self.interval.0, sweep: 1 }
    }
    fn scale(&mut self, factor: f64, floor: u64) -> Option<String> {
        let p = self.interval.0;
        crate::probe::scale_length(&mut self.duration, &mut self.count, p, factor, floor)
    }
    fn rt(&self, base: &RtSettings) -> RtSettings {
        self.rt.over(base)
    }
    fn measure(&self, ctx: &mut Context<'_>) -> Result<ResultDocument, LabError> {
        measure(self, ctx).map(|(doc, _, _)| doc)
    }
}
