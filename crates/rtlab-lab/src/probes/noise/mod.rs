//! The noise probe (`rtlab noise`, scenario `kind = "noise"`): what the machine steals from a
//! thread that never sleeps, per CPU — the gaps a busy loop reading CLOCK_MONOTONIC sees above
//! a threshold, their distribution, the time stolen per window (a share of the CPU), the
//! longest gap and the gap count per window, with the kernel's counters of each window.
//!
//! Contract: [`NoiseProbeConfig`] is the one configuration (CLI and scenarios: threshold 1us,
//! 10 s, windows of 1 s, one thread on each CPU of `cpus`, every online CPU when neither the
//! probe nor the profile names any; SCHED_FIFO 80 with memory locked on the command line);
//! `measure` runs the engine (rtlab-engines `noise`) under the context's real-time settings
//! with the evidence around it. `tracer` (`osnoise`, `hwlat`) asks for the kernel's own
//! tracer: where `available_tracers` lacks it, a [`LabError::Missing`] of one line before
//! anything runs (tracefs mounted to look, journaled, and unmounted again); `osnoise` where the
//! kernel has it runs in a tracefs instance of rtlab's own (rtlab-evidence `osnoise`: its
//! workload threads instead of the busy loop, the same two streams per CPU, the kernel's
//! attribution in their labels); `hwlat` likewise (rtlab-evidence `hwlat`: the kernel's
//! hardware latency detector, its thread spinning with interrupts off half of each window,
//! going round the CPUs one window each; per CPU a gap per sample and the sample's inner and
//! outer gaps added as stolen, the kernel's counts, width, window and mode in the labels;
//! refused in one line when hwlat runs already). Added as one module and one line in
//! [`crate::registry::PROBES`].

pub mod check;

use crate::config::{positive, ConfigError, Dur, RtFields, Validate};
use crate::document::{run_warnings, EngineRun};
use crate::error::LabError;
use crate::probe::{Context, Plan, Probe, ProbeKind};
use rtlab_core::error::Missing;
use rtlab_core::rt::RtSettings;
use rtlab_core::schema::{ResultDocument, Warning};
use rtlab_core::warnings::Warn;
use rtlab_engines::noise::{self, NoiseConfig, NoiseError, NoiseOutcome};
use rtlab_host::host::Host;
use serde::{Deserialize, Serialize};

/// How long it measures when `duration` is not given.
pub const DEFAULT_DURATION: Dur = Dur::s(10);

pub const KIND: ProbeKind = ProbeKind {
    kind: "noise",
    about:
        "what the machine steals from a busy thread, per CPU: noise gaps, stolen time per window",
    parse: crate::probe::parse_as::<NoiseProbeConfig>,
};

/// The kernel tracers that measure noise themselves (Documentation/trace/osnoise-tracer.rst,
/// Documentation/trace/hwlat_detector.rst).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NoiseTracer {
    /// The osnoise tracer: per-sample noise with its IRQ / softirq / thread / NMI attribution.
    Osnoise,
    /// The hwlat detector: noise from outside the kernel (SMIs, firmware, the hypervisor).
    Hwlat,
}

impl NoiseTracer {
    pub fn name(self) -> &'static str {
        match self {
            NoiseTracer::Osnoise => "osnoise",
            NoiseTracer::Hwlat => "hwlat",
        }
    }
    /// The kernel option that builds it.
    fn config_option(self) -> &'static str {
        match self {
            NoiseTracer::Osnoise => "CONFIG_OSNOISE_TRACER=y",
            NoiseTracer::Hwlat => "CONFIG_HWLAT_TRACER=y",
        }
    }
}

/// The noise probe's configuration (flags and `[[probe]]` keys have these names).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NoiseProbeConfig {
    /// A gap between two clock reads above this is noise.
    pub threshold: Dur,
    /// How long to measure (10 s when not given).
    pub duration: Option<Dur>,
    /// Width of a window (stolen time, longest gap, gap count per window).
    pub window: Dur,
    /// Hold /dev/cpu_dma_latency at this many µs during the run.
    pub cpu_dma_latency: Option<u32>,
    /// The kernel's own tracer instead of the busy loop (where the kernel has it).
    pub tracer: Option<NoiseTracer>,
    #[serde(flatten)]
    pub rt: RtFields,
}

impl Default for NoiseProbeConfig {
    fn default() -> Self {
        NoiseProbeConfig {
            threshold: Dur(1_000),
            duration: None,
            window: Dur::s(1),
            cpu_dma_latency: None,
            tracer: None,
            rt: RtFields::default(),
        }
    }
}

/// On the command line the busy threads run SCHED_FIFO 80 with memory locked, as the other
/// probes' measuring threads: the noise a real-time thread sees.
pub fn default_rt() -> RtSettings {
    RtSettings::fifo80()
}

impl Validate for NoiseProbeConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        positive("threshold", Some(self.threshold))?;
        positive("duration", self.duration)?;
        positive("window", Some(self.window))?;
        Ok(())
    }
}

impl NoiseProbeConfig {
    /// The engine's configuration under `rt` (its CPUs, or every online CPU).
    pub fn engine(&self, rt: &RtSettings) -> Result<NoiseConfig, ConfigError> {
        rt.check().map_err(|m| ConfigError::new("priority", m))?;
        let cpus = match &rt.cpus {
            Some(c) if !c.is_empty() => c.clone(),
            _ => crate::host::online_cpus().0,
        };
        let mut seen = Vec::new();
        for c in &cpus {
            if seen.contains(c) {
                return Err(ConfigError::new(
                    "cpus",
                    format!("CPU {c} is given twice (one thread per CPU)"),
                ));
            }
            seen.push(*c);
        }
        Ok(NoiseConfig {
            cpus,
            rt: RtSettings { cpus: None, ..rt.clone() },
            threshold_ns: self.threshold.0,
            duration_ns: self.duration.unwrap_or(DEFAULT_DURATION).0,
            window_ns: self.window.0,
            stack_prefault_bytes: 256 * 1024,
            cpu_dma_latency_us: self.cpu_dma_latency.map(|v| v.min(i32::MAX as u32) as i32),
        })
    }
}

/// Whether the kernel has `tracer` (`<tracefs>/available_tracers`); tracefs is mounted to
/// look when it is not (journaled at the tracer's journal, unmounted before returning).
/// Err: one line naming what is missing and what has it.
pub fn check_tracer(host: &dyn Host, tracer: NoiseTracer) -> Result<(), LabError> {
    let name = tracer.name();
    let dirs = rtlab_evidence::timerlat::TRACEFS_DIRS;
    let kernel_lacks = |why: String| {
        LabError::Missing(Missing::kernel(
            &format!("{name} tracer ({why})"),
            &format!("a kernel built with {}, e.g. Debian's PREEMPT_RT kernel (scripts/rt-vm.sh); without --tracer the busy loop measures the noise", tracer.config_option()),
        ))
    };
    let read = |dir: &str| host.read(&format!("{dir}/available_tracers"));
    let (dir, text) = match dirs.iter().find(|d| host.exists(&format!("{d}/available_tracers"))) {
        Some(d) => (d.to_string(), read(d)),
        None if host.exists(dirs[0]) => {
            let journal = std::path::Path::new(rtlab_evidence::tracer::DEFAULT_TRACE_JOURNAL);
            let mut session =
                rtlab_host::session::Session::begin(host, journal, "rtlab noise --tracer")
                    .map_err(|e| LabError::Failed(format!("--tracer {name}: {e}")))?;
            let mount = rtlab_host::session::Action::Mount {
                fstype: "tracefs".into(),
                target: dirs[0].into(),
            };
            if let Err(e) = session.apply(&mount) {
                return Err(match e.missing() {
                    Some(m) => LabError::Missing(m.clone()),
                    None => LabError::Failed(format!("--tracer {name}: mounting tracefs: {e}")),
                });
            }
            let text = read(dirs[0]);
            let restored = session.restore();
            if !restored.is_clean() {
                return Err(LabError::Failed(format!(
                    "--tracer {name}: tracefs mounted to look for the tracer could not be unmounted: run `rtlab tune restore`"
                )));
            }
            (dirs[0].to_string(), text)
        }
        None => return Err(kernel_lacks("no tracefs: a kernel without CONFIG_FTRACE".into())),
    };
    let text = text
        .map_err(|e| LabError::Failed(format!("--tracer {name}: {dir}/available_tracers: {e}")))?;
    let has: Vec<&str> = text.split_whitespace().collect();
    if has.contains(&name) {
        return Ok(());
    }
    Err(kernel_lacks(format!("{dir}/available_tracers has only: {}", has.join(" "))))
}

/// What `--tracer` gets before anything is measured: Ok where the kernel has the tracer
/// (rtlab drives osnoise and hwlat); one line otherwise: the kernel lacks it
/// ([`check_tracer`]), or hwlat runs already (the kernel runs one at a time).
pub fn tracer_mode(host: &dyn Host, tracer: NoiseTracer) -> Result<(), LabError> {
    check_tracer(host, tracer)?;
    if tracer == NoiseTracer::Hwlat {
        if let Some(at) = rtlab_evidence::timerlat::tracefs_dir(host)
            .and_then(|d| rtlab_evidence::hwlat::running_where(host, &d))
        {
            return Err(LabError::Failed(rtlab_evidence::hwlat::already_running(&at)));
        }
    }
    Ok(())
}

/// Definitions of the streams the osnoise tracer gives.
pub const OSNOISE_GAP_DEFINITION: &str = "an interference the kernel's osnoise tracer attributed (irq, softirq, thread, nmi event) on its workload thread, above the threshold: its duration; at_ns is when the event was written, from the tracer's first period";
pub const OSNOISE_STOLEN_DEFINITION: &str = "NOISE of the osnoise tracer's summary of a period (a window): the time its workload thread lost in it";

/// The streams of an osnoise run: per CPU `cpu{c}` (each interference above the threshold)
/// and `cpu{c}.stolen` (each period's noise), labels with the kernel's counts and the
/// largest sources.
fn osnoise_streams(
    engine: &NoiseConfig,
    r: &rtlab_evidence::osnoise::OsnoiseReport,
    origin_monotonic_ns: i64,
) -> Vec<rtlab_core::schema::Stream> {
    use rtlab_core::sink::{Recorder, Sink};
    let rc = tracer_recorder(engine);
    let base = r
        .periods
        .iter()
        .map(|p| p.ts_ns.saturating_sub(p.runtime_ns.max(0) as u64))
        .chain(r.interferences.iter().map(|i| i.ts_ns))
        .min()
        .unwrap_or(0);
    let mut out = Vec::new();
    for &cpu in &engine.cpus {
        let (mut gaps, mut stolen) = (Recorder::new(&rc, None), Recorder::new(&rc, None));
        gaps.origin_monotonic_ns = Some(origin_monotonic_ns);
        stolen.origin_monotonic_ns = Some(origin_monotonic_ns);
        let mut n = 0;
        for i in r.interferences.iter().filter(|i| i.cpu == cpu) {
            if i.duration_ns > engine.threshold_ns {
                let _ = gaps.record(n, i.ts_ns.saturating_sub(base) as i64, i.duration_ns);
                n += 1;
            }
        }
        let periods: Vec<_> = r.periods.iter().filter(|p| p.cpu == cpu).collect();
        for (k, p) in periods.iter().enumerate() {
            let at = p.ts_ns.saturating_sub(base + p.runtime_ns.max(0) as u64) as i64;
            let _ = stolen.record(k as u64, at, p.noise_ns);
        }
        let mut l = std::collections::BTreeMap::new();
        l.insert("cpu".to_string(), cpu.to_string());
        l.insert("tracer".into(), "osnoise".into());
        l.insert("threshold_ns".into(), engine.threshold_ns.to_string());
        l.insert("periods".into(), periods.len().to_string());
        let runtime: i64 = periods.iter().map(|p| p.runtime_ns).sum();
        l.insert("measured_ns".into(), runtime.to_string());
        l.insert("stolen_ns".into(), periods.iter().map(|p| p.noise_ns).sum::<i64>().to_string());
        l.insert("gaps".into(), n.to_string());
        let max_single = periods.iter().map(|p| p.max_single_ns).max().unwrap_or(0);
        l.insert("max_single_ns".into(), max_single.to_string());
        for (k, name) in rtlab_evidence::osnoise::KINDS.iter().enumerate() {
            let count: u64 = periods.iter().map(|p| p.counts[k]).sum();
            l.insert(format!("interference_{name}"), count.to_string());
        }
        let top: Vec<String> = r
            .attribution(cpu)
            .iter()
            .take(5)
            .map(|(what, ns, count)| format!("{what} {} us ({count})", ns / 1_000))
            .collect();
        l.insert("attribution".into(), top.join(", "));
        out.extend(cpu_streams(
            engine,
            cpu,
            &l,
            [OSNOISE_GAP_DEFINITION, OSNOISE_STOLEN_DEFINITION],
            [&gaps, &stolen],
        ));
    }
    out
}

/// A CPU's two streams from a kernel tracer's run, `cpu{c}` (its gaps) and `cpu{c}.stolen`,
/// defined by `defs` and labelled alike; the threshold stands as their deadline, with no
/// missed or overrun counts (a tracer has no slots).
fn cpu_streams(
    engine: &NoiseConfig,
    cpu: usize,
    labels: &std::collections::BTreeMap<String, String>,
    defs: [&str; 2],
    recs: [&rtlab_core::sink::Recorder; 2],
) -> [rtlab_core::schema::Stream; 2] {
    let one = |name: String, metric: &str, k: usize| {
        let mut st = rtlab_core::schema::Stream::from_recorder(
            name,
            metric,
            defs[k],
            labels.clone(),
            recs[k],
        );
        st.stats.missed = None;
        st.stats.overruns = None;
        st.deadline_ns = engine.threshold_ns;
        st
    };
    [
        one(format!("cpu{cpu}"), noise::GAP_METRIC, 0),
        one(format!("cpu{cpu}.stolen"), noise::STOLEN_METRIC, 1),
    ]
}

/// Definitions of the streams the hwlat detector gives.
pub const HWLAT_GAP_DEFINITION: &str = "a sample of the kernel's hwlat detector (a window whose largest gap was above the threshold): its largest gap between two time reads with interrupts off, inner or outer, on the CPU its thread spun on; at_ns is when the sample was written, from the first one";
pub const HWLAT_STOLEN_DEFINITION: &str = "per hwlat sample (one per window with a gap above the threshold): its largest inner and its largest outer gap added, a lower bound of what the window lost (the kernel reports only these and how many gaps were above the threshold); windows without such a gap are not in the stream";

/// The recorder configuration of a tracer's streams.
fn tracer_recorder(engine: &NoiseConfig) -> rtlab_core::sink::RecorderConfig {
    rtlab_core::sink::RecorderConfig {
        deadline_ns: i64::MAX,
        window_ns: engine.window_ns,
        window_capacity: rtlab_engines::hold::window_capacity(engine.duration_ns, engine.window_ns),
        max_samples: None,
        us_histogram_buckets: None,
        spike_threshold_ns: None,
    }
}

/// The hwlat detector's settings for the probe's: its window is the probe's, it spins half
/// of it (the kernel's default share), the threshold in whole us (at least 1).
pub fn hwlat_config(engine: &NoiseConfig) -> rtlab_evidence::hwlat::HwlatConfig {
    let window_us = (engine.window_ns / 1_000).max(2) as u64;
    rtlab_evidence::hwlat::HwlatConfig {
        cpus: engine.cpus.clone(),
        duration: std::time::Duration::from_nanos(engine.duration_ns.max(0) as u64),
        window_us,
        width_us: window_us / 2,
        threshold_us: (engine.threshold_ns / 1_000).max(1) as u64,
    }
}

/// The streams of an hwlat run: per CPU `cpu{c}` (each sample's largest gap) and
/// `cpu{c}.stolen` (each sample's inner and outer gap added), labels with the kernel's counts,
/// its width, window and mode.
fn hwlat_streams(
    engine: &NoiseConfig,
    h: &rtlab_evidence::hwlat::HwlatConfig,
    r: &rtlab_evidence::hwlat::HwlatReport,
    origin_monotonic_ns: i64,
) -> Vec<rtlab_core::schema::Stream> {
    use rtlab_core::sink::{Recorder, Sink};
    let rc = tracer_recorder(engine);
    let base = r.samples.iter().map(|s| s.ts_ns).min().unwrap_or(0);
    // round-robin: a window on each CPU in turn, the thread spinning `width` of each
    let windows = r.ran_ns.max(0) / (h.window_us as i64 * 1_000).max(1);
    let per_cpu = windows / engine.cpus.len().max(1) as i64;
    let mut out = Vec::new();
    for &cpu in &engine.cpus {
        let (mut gaps, mut stolen) = (Recorder::new(&rc, None), Recorder::new(&rc, None));
        gaps.origin_monotonic_ns = Some(origin_monotonic_ns);
        stolen.origin_monotonic_ns = Some(origin_monotonic_ns);
        let samples: Vec<_> = r.samples.iter().filter(|s| s.cpu == cpu).collect();
        for (k, s) in samples.iter().enumerate() {
            let at = s.ts_ns.saturating_sub(base) as i64;
            let _ = gaps.record(k as u64, at, s.gap_ns());
            let _ = stolen.record(k as u64, at, s.inner_ns + s.outer_ns);
        }
        let sum = |f: &dyn Fn(&rtlab_evidence::hwlat::Sample) -> i64| -> String {
            samples.iter().map(|s| f(s)).sum::<i64>().to_string()
        };
        let mut l = std::collections::BTreeMap::new();
        l.insert("cpu".to_string(), cpu.to_string());
        l.insert("tracer".into(), "hwlat".into());
        l.insert("threshold_ns".into(), (h.threshold_us * 1_000).to_string());
        l.insert("mode".into(), r.mode.clone());
        l.insert("width_us".into(), h.width_us.to_string());
        l.insert("window_us".into(), h.window_us.to_string());
        l.insert("samples".into(), samples.len().to_string());
        l.insert("gaps".into(), samples.len().to_string());
        l.insert("count".into(), sum(&|s| s.count as i64));
        l.insert("nmi_total_ns".into(), sum(&|s| s.nmi_total_ns));
        l.insert("nmi_count".into(), sum(&|s| s.nmi_count as i64));
        // the time spun on this CPU: its share of the run's windows, `width` each
        l.insert("measured_ns".into(), (per_cpu * h.width_us as i64 * 1_000).to_string());
        l.insert("stolen_ns".into(), sum(&|s| s.inner_ns + s.outer_ns));
        out.extend(cpu_streams(
            engine,
            cpu,
            &l,
            [HWLAT_GAP_DEFINITION, HWLAT_STOLEN_DEFINITION],
            [&gaps, &stolen],
        ));
    }
    out
}

/// The noise probe through one of the kernel's tracers (its threads instead of rtlab's busy
/// loop), with the counters per window around it.
fn measure_tracer(
    engine: &NoiseConfig,
    tracer: NoiseTracer,
    ctx: &mut Context<'_>,
) -> Result<ResultDocument, LabError> {
    let name = tracer.name();
    if ctx.evidence.trace_on_spike_ns.is_some() {
        return Err(LabError::Config(ConfigError::new(
            "trace_on_spike",
            format!("not with --tracer {name}: the tracer reports each noise itself"),
        )));
    }
    let host = crate::host::host();
    let mut ev = ctx.evidence.clone();
    ev.window_ns = engine.window_ns;
    ev.victim = match tracer {
        NoiseTracer::Osnoise => "osnoise/".into(),
        NoiseTracer::Hwlat => "hwlatd".into(),
    };
    ev.cpus = engine.cpus.clone();
    let evidence = crate::evidence::EvidenceRun::start(host, &ev)?;
    let started = std::time::SystemTime::now();
    let env = rtlab_sys::env::detect(std::path::Path::new("/"));
    let dir = rtlab_evidence::timerlat::tracefs_dir(host)
        .unwrap_or_else(|| rtlab_evidence::timerlat::TRACEFS_DIRS[0].to_string());
    let t0 = rtlab_sys::clock::monotonic_ns();
    let journal = std::path::Path::new(rtlab_evidence::tracer::DEFAULT_TRACE_JOURNAL);
    let ran = match tracer {
        NoiseTracer::Osnoise => {
            let ocfg = rtlab_evidence::osnoise::OsnoiseConfig {
                cpus: engine.cpus.clone(),
                duration: std::time::Duration::from_nanos(engine.duration_ns.max(0) as u64),
                period_us: (engine.window_ns / 1_000).max(1) as u64,
                threshold_us: (engine.threshold_ns / 1_000).max(1) as u64,
            };
            rtlab_evidence::osnoise::run(host, journal, &dir, &ocfg, &ctx.stop)
                .map(|r| (osnoise_streams(engine, &r, t0), r.notes, serde_json::Value::Null))
        }
        NoiseTracer::Hwlat => {
            let h = hwlat_config(engine);
            let r = rtlab_evidence::hwlat::run(host, journal, &dir, &h, &ctx.stop);
            r.map(|r| {
                let settings = serde_json::json!({
                    "width_us": h.width_us, "window_us": h.window_us, "mode": r.mode,
                });
                (hwlat_streams(engine, &h, &r, t0), r.notes, settings)
            })
        }
    };
    let duration_ns = rtlab_sys::clock::monotonic_ns() - t0;
    let streams = ran.as_ref().map(|r| r.0.clone()).unwrap_or_default();
    let mut evidence = evidence.finish(&streams);
    let (streams, notes, settings) = ran.map_err(LabError::Failed)?;
    evidence.notes.extend(notes);
    let mut config = serde_json::to_value(engine).map_err(LabError::failed)?;
    config["tracer"] = name.into();
    if !settings.is_null() {
        config[name] = settings;
    }
    // the kernel's threads measure: no memory lock or PM QoS hold of rtlab's is asked for
    let interrupted = ctx.stop.load(std::sync::atomic::Ordering::Relaxed);
    let run = EngineRun::of(duration_ns, interrupted, &None, &None);
    let mut doc = run.document("noise", started, env, config, streams);
    doc.evidence = Some(evidence);
    let fewest = doc.streams.iter().map(|s| s.stats.count).min().unwrap_or(0);
    // rtlab's memory is not in the figures: as if the profile had turned the lock off
    let facts = run.facts(false, true, fewest);
    doc.warnings = run_warnings(&doc.environment, &facts, Vec::new());
    Ok(doc)
}

/// The warning of a run whose clock reads take about as long as the threshold: every read is
/// then a gap, and the figures are the loop's own (a slow clock source, an emulated CPU).
fn threshold_warning(
    threshold_ns: i64,
    t: &rtlab_engines::noise::NoiseThreadResult,
) -> Option<Warning> {
    let per_read = t.measured_ns / t.reads.max(1) as i64;
    (per_read * 2 > threshold_ns).then(|| Warning {
        code: "noise-threshold-near-read-time".into(),
        message: format!(
            "cpu{}: a clock read takes {per_read} ns on average, more than half the threshold ({threshold_ns} ns): most reads count as noise gaps and the figures are the loop's own; raise --threshold (a slow clock source or an emulated CPU)",
            t.cpu
        ),
    })
}

/// Run the noise probe; the document and the engine's outcome.
pub fn measure(
    cfg: &NoiseProbeConfig,
    ctx: &mut Context<'_>,
) -> Result<(ResultDocument, Option<NoiseOutcome>, NoiseConfig), LabError> {
    let rt = cfg.rt.over(&ctx.rt);
    let engine = cfg.engine(&rt)?;
    if let Some(t) = cfg.tracer {
        tracer_mode(crate::host::host(), t)?;
        return measure_tracer(&engine, t, ctx).map(|doc| (doc, None, engine));
    }
    crate::cost::before_case();
    let mut ev = ctx.evidence.clone();
    ev.window_ns = engine.window_ns;
    ev.victim = "rtlab-noise".into();
    ev.cpus = engine.cpus.clone();
    ev.sources = engine.cpus.iter().map(|c| format!("cpu{c}")).collect();
    ev.planned = Some(std::time::Duration::from_nanos(engine.duration_ns.max(0) as u64));
    let evidence = crate::evidence::EvidenceRun::start(crate::host::host(), &ev)?;
    let started = std::time::SystemTime::now();
    let env = rtlab_sys::env::detect(std::path::Path::new("/"));
    let progress = &mut *ctx.progress;
    let measured = noise::run_with_spike(&engine, ctx.stop.clone(), evidence.hook(), progress);
    let streams = measured.as_ref().map(|o| o.streams(&engine)).unwrap_or_default();
    let evidence = evidence.finish(&streams);
    let outcome = match measured {
        Ok(o) => o,
        Err(NoiseError::Sys(e)) => return Err(LabError::from_sys(e)),
        Err(NoiseError::Invalid(m)) => return Err(LabError::Failed(m)),
    };
    let config = serde_json::to_value(&engine).map_err(LabError::failed)?;
    let o = &outcome;
    let run = EngineRun::of(o.duration_ns, o.interrupted, &o.memory_lock, &o.cpu_dma_latency);
    let mut doc = run.document("noise", started, env, config, streams);
    doc.evidence = Some(evidence);
    // the busy loop's samples are its clock reads (the gaps are the rare ones)
    let fewest = outcome.threads.iter().map(|t| t.reads).min().unwrap_or(0);
    let facts = run.facts(!rt.policy.is_realtime(), ctx.mlockall_off_by_profile, fewest);
    // a busy real-time thread meets RT throttling: its gap is this probe's to explain
    let throttling = match doc.environment.sched_rt_runtime_us {
        Some(r) if r >= 0 && rt.policy.is_realtime() => vec![Warn::RtThrottling { runtime_us: r }],
        _ => Vec::new(),
    };
    doc.warnings = run_warnings(&doc.environment, &facts, throttling);
    doc.warnings
        .extend(outcome.threads.iter().filter_map(|t| threshold_warning(engine.threshold_ns, t)));
    let (online, _) = crate::host::online_cpus();
    if rt.policy.is_realtime() && online.iter().all(|c| engine.cpus.contains(c)) {
        doc.warnings.push(Warning {
            code: "noise-every-cpu-busy".into(),
            message: format!(
                "a {} busy thread on every online CPU: rtlab's own threads (counters, tracer) and the rest of the machine ran only in what RT throttling leaves, so their noise is in the figures; leave a CPU out of --cpus",
                rt.policy
            ),
        });
    }
    crate::cost::attach(&mut doc);
    Ok((doc, Some(outcome), engine))
}

impl Probe for NoiseProbeConfig {
    fn kind(&self) -> &'static str {
        "noise"
    }
    fn config(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
    fn plan(&self) -> Plan {
        let duration_ns = Some(self.duration.unwrap_or(DEFAULT_DURATION).0);
        Plan { duration_ns, count: None, period_ns: 1_000_000, sweep: 1 }
    }
    fn scale(&mut self, factor: f64, floor: u64) -> Option<String> {
        // a slot is a millisecond of busy loop: never below `floor` ms
        let mut d = Some(self.duration.unwrap_or(DEFAULT_DURATION));
        let note = crate::probe::scale_length(&mut d, &mut None, 1_000_000, factor, floor);
        self.duration = d;
        note
    }
    fn ready(&self) -> Result<(), LabError> {
        // said before anything else (measure says the same, for scenarios)
        self.tracer.map_or(Ok(()), |t| tracer_mode(crate::host::host(), t))
    }
    fn rt(&self, base: &RtSettings) -> RtSettings {
        self.rt.over(base)
    }
    fn measure(&self, ctx: &mut Context<'_>) -> Result<ResultDocument, LabError> {
        measure(self, ctx).map(|(doc, _, _)| doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(s: &str) -> toml::Table {
        s.parse().unwrap()
    }

    #[test]
    fn defaults_and_checks_name_the_field() {
        let c: NoiseProbeConfig = crate::config::from_table(&table("")).unwrap();
        assert_eq!((c.threshold, c.duration, c.window), (Dur(1_000), None, Dur::s(1)));
        assert_eq!(c.plan().duration_ns, Some(10_000_000_000));
        let e =
            crate::config::from_table::<NoiseProbeConfig>(&table("threshold = '0us'")).unwrap_err();
        assert_eq!(e.cli_text(), "--threshold 0ns must be above zero");
        let e =
            crate::config::from_table::<NoiseProbeConfig>(&table("tracer = 'ftrace'")).unwrap_err();
        assert_eq!(e.field, "tracer");
        assert!(e.message.contains("osnoise or hwlat"), "{e}");
        let e = crate::config::from_table::<NoiseProbeConfig>(&table("count = 5")).unwrap_err();
        assert!(e.message.contains("not a parameter"), "{e}");
    }

    #[test]
    fn the_cpus_are_the_probes_the_profiles_or_every_online_one() {
        let c: NoiseProbeConfig = crate::config::from_table(&table("cpus = '0'")).unwrap();
        let e = c.engine(&c.rt.over(&RtSettings::fifo80())).unwrap();
        assert_eq!(e.cpus, vec![0]);
        assert_eq!((e.rt.policy.name(), e.rt.priority, e.rt.cpus.clone()), ("fifo", 80, None));
        let c = NoiseProbeConfig::default();
        let profile = RtSettings { cpus: Some(vec![0]), ..RtSettings::normal() };
        assert_eq!(c.engine(&c.rt.over(&profile)).unwrap().cpus, vec![0]);
        let online = crate::host::online_cpus().0;
        assert_eq!(c.engine(&RtSettings::fifo80()).unwrap().cpus, online);
        let twice = RtSettings { cpus: Some(vec![0, 0]), ..RtSettings::fifo80() };
        assert_eq!(c.engine(&twice).unwrap_err().field, "cpus");
    }

    #[test]
    fn a_threshold_near_the_read_time_is_warned_of() {
        use rtlab_core::sink::{Recorder, RecorderConfig};
        let rc = RecorderConfig {
            deadline_ns: i64::MAX,
            window_ns: 1_000_000_000,
            window_capacity: 4,
            max_samples: None,
            us_histogram_buckets: None,
            spike_threshold_ns: None,
        };
        let t = rtlab_engines::noise::NoiseThreadResult {
            cpu: 1,
            gaps: Recorder::new(&rc, None),
            stolen: Recorder::new(&rc, None),
            reads: 1_000_000,
            measured_ns: 1_700_000_000, // 1.7 us a read: an emulated CPU
            stolen_ns: 0,
            end: rtlab_engines::timer::LoopEnd::Duration,
            policy_seen: (None, 0),
            cpus_seen: vec![1],
        };
        let w = threshold_warning(1_000, &t).unwrap();
        assert!(w.message.starts_with("cpu1: a clock read takes 1700 ns"), "{}", w.message);
        assert!(threshold_warning(5_000, &t).is_none());
    }

    #[test]
    fn scaling_keeps_at_least_the_floor_in_milliseconds() {
        let mut c = NoiseProbeConfig { duration: Some(Dur::s(10)), ..Default::default() };
        assert!(c.scale(0.1, 100).is_none());
        assert_eq!(c.duration, Some(Dur::s(1)));
        let note = c.scale(0.001, 100).unwrap();
        assert_eq!(c.duration, Some(Dur::ms(100)), "{note}");
    }

    #[test]
    fn hwlat_samples_become_each_cpus_gaps_and_stolen_time() {
        use rtlab_evidence::hwlat::{HwlatReport, Sample};
        let c = NoiseProbeConfig { duration: Some(Dur::s(4)), ..Default::default() };
        let engine = c.engine(&RtSettings { cpus: Some(vec![0, 1]), ..RtSettings::fifo80() });
        let engine = engine.unwrap();
        let h = hwlat_config(&engine);
        assert_eq!((h.window_us, h.width_us, h.threshold_us), (1_000_000, 500_000, 1));
        let sample = |cpu, ts_ns, inner_ns, outer_ns| Sample {
            cpu,
            ts_ns,
            inner_ns,
            outer_ns,
            count: 3,
            nmi_total_ns: 2_000,
            nmi_count: 1,
            ..Default::default()
        };
        let r = HwlatReport {
            samples: vec![
                sample(1, 5_000_000_000, 20_000, 7_000),
                sample(1, 7_000_000_000, 4_000, 9_000),
            ],
            mode: "round-robin".into(),
            ran_ns: 4_000_000_000,
            notes: Vec::new(),
        };
        let st = hwlat_streams(&engine, &h, &r, 0);
        let names: Vec<&str> = st.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["cpu0", "cpu0.stolen", "cpu1", "cpu1.stolen"]);
        assert_eq!((st[0].stats.count, st[2].stats.count), (0, 2));
        assert_eq!((st[2].stats.max_ns, st[3].stats.max_ns), (Some(20_000), Some(27_000)));
        let l = &st[2].labels;
        let get = |k: &str| l.get(k).map(String::as_str);
        assert_eq!(
            (get("tracer"), get("mode"), get("samples")),
            (Some("hwlat"), Some("round-robin"), Some("2"))
        );
        assert_eq!(
            (get("count"), get("nmi_total_ns"), get("nmi_count")),
            (Some("6"), Some("4000"), Some("2"))
        );
        assert_eq!((get("width_us"), get("window_us")), (Some("500000"), Some("1000000")));
        // 4 windows of 1 s over 2 CPUs: 2 on each, 0.5 s spun in each
        assert_eq!((get("measured_ns"), get("stolen_ns")), (Some("1000000000"), Some("40000")));
        assert_eq!(st[0].labels.get("samples").map(String::as_str), Some("0"));
    }

    #[test]
    fn a_tracer_the_fake_kernel_lacks_is_one_line_naming_what_it_has() {
        let d = tempfile::tempdir().unwrap();
        let host = rtlab_host::host::FakeHost::new(d.path());
        rtlab_host::testing::put(
            d.path(),
            "sys/kernel/tracing/available_tracers",
            "blk function nop\n",
        );
        let e = check_tracer(&host, NoiseTracer::Osnoise).unwrap_err();
        let LabError::Missing(m) = &e else { panic!("{e}") };
        let line = m.to_string();
        assert!(line.contains("osnoise tracer") && line.contains("has only: blk function nop"));
        assert!(line.contains("CONFIG_OSNOISE_TRACER") && !line.contains('\n'), "{line}");
        rtlab_host::testing::put(
            d.path(),
            "sys/kernel/tracing/available_tracers",
            "hwlat osnoise timerlat function nop\n",
        );
        assert!(check_tracer(&host, NoiseTracer::Hwlat).is_ok());
        assert!(check_tracer(&host, NoiseTracer::Osnoise).is_ok());
    }
}
