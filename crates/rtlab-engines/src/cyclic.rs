//! The cyclic probe (S2's control loop): N threads each wake on an absolute grid, do a fixed
//! amount of work, and sleep to the next slot, the way a control loop lives.
//!
//! Contract:
//! - Each thread is created by `rtlab_sys::sched::spawn_rt` already pinned to
//!   `rt.cpu_of(i)` and running with `rt.policy`/`rt.priority`; memory is locked for the run
//!   when `rt.mlockall`; `/dev/cpu_dma_latency` is held when asked. Every system change is a
//!   guard undone when the run ends.
//! - Before measuring, each thread prefaults its stack (and a memory walk's buffer) and, for
//!   [`Work::Compute`], calibrates itself once, on its own CPU at its own priority
//!   ([`work::calibrate`]); the iteration count is then fixed, so work that takes longer than
//!   asked on a loaded machine is measured, not calibrated away.
//!   Each thread's grid starts when its own preparation ends (start = its slot 0), and
//!   `duration_ns` is counted from there: a run lasts calibration (~20-50 ms) + duration.
//! - The loop is [`cycle::run_cycles`]: slot k = start + k*T (clock_nanosleep TIMER_ABSTIME),
//!   `woke` after the sleep, `job_end` after the work. A slot already passed when the
//!   thread is ready for it is skipped and counted as an overrun (no catch-up burst).
//!   Everything it records into is allocated before the thread is created; it never
//!   allocates, locks, logs or prints.
//! - Ctrl-C raises the stop flag; threads end their current cycle and everything measured
//!   is returned. Nothing here prints.
//!
//! Streams (per thread i; `at_ns` of all three is `woke - start`, the index is the cycle):
//! - `thread{i}`, metric `response_time` = job_end - slot (the headline). `missed` counts
//!   response times above the deadline (default: the interval), `overruns` the skipped
//!   slots.
//! - `thread{i}.wakeup`, metric `wakeup_latency` = woke - slot (as the timer probe's).
//! - `thread{i}.job`, metric `job_duration` = job_end - woke: the execution time of the
//!   fixed work, preemptions and cache misses included.
//! - with several threads, `all`: every thread's response time together.
//!
//! The two secondary streams carry no `missed`/`overruns` (those belong to the cycle).

pub mod cycle;
pub mod work;

pub use self::cycle::{run_cycles, CycleSinks, CyclicSchedule};
pub use self::work::{Calibration, Job, Work};

use crate::clock::MonotonicClock;
use crate::timer::LoopEnd;
use rtlab_core::rt::RtSettings;
use rtlab_core::schema::Stream;
use rtlab_core::sink::{Recorder, RecorderConfig, SpikeHook};
use rtlab_core::{Histogram, Running};
use rtlab_sys::memory::prefault_stack;
use rtlab_sys::sched::{
    current_affinity, current_cpu, current_policy, spawn_rt, Policy, ThreadSpec,
};
use rtlab_sys::SysError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

/// Metric of the headline stream.
pub const RESPONSE_METRIC: &str = "response_time";
/// Metric of `thread{i}.wakeup`.
pub const WAKEUP_METRIC: &str = "wakeup_latency";
/// Metric of `thread{i}.job`.
pub const JOB_METRIC: &str = "job_duration";
/// Definitions, as stored with each stream.
pub const RESPONSE_DEFINITION: &str = "job end - scheduled absolute slot (CLOCK_MONOTONIC): wake-up latency plus the job's execution time; above the deadline is a missed deadline";
pub const WAKEUP_DEFINITION: &str =
    "actual wake time - scheduled absolute slot (CLOCK_MONOTONIC, clock_nanosleep TIMER_ABSTIME)";
pub const JOB_DEFINITION: &str = "job end - actual wake time: the execution time of the fixed work (calibrated iterations or a memory walk), preemptions included";

fn default_threads() -> usize {
    1
}
fn default_window_ns() -> i64 {
    1_000_000_000
}
fn default_stack_prefault() -> usize {
    256 * 1024
}

/// The whole cyclic probe. Fields with a default may be left out of a file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CyclicConfig {
    /// The period T of every thread's grid.
    pub interval_ns: i64,
    /// What each cycle does.
    pub work: Work,
    /// Policy, priority, CPUs (thread i on `rt.cpu_of(i)`) and memory lock.
    pub rt: RtSettings,
    /// Measuring threads (default 1).
    #[serde(default = "default_threads")]
    pub threads: usize,
    /// Slots after start + duration are not taken.
    #[serde(default)]
    pub duration_ns: Option<i64>,
    /// Slots each thread's grid has: measured cycles + skipped slots (overruns) = count, so
    /// the run ends on time whatever the overruns (as the timer's count).
    #[serde(default)]
    pub count: Option<u64>,
    /// Response times above it are missed deadlines (None: the interval).
    #[serde(default)]
    pub deadline_ns: Option<i64>,
    /// Width of a max-over-time window (default 1 s).
    #[serde(default = "default_window_ns")]
    pub window_ns: i64,
    /// Stack bytes touched before the loop starts (default 256 KiB).
    #[serde(default = "default_stack_prefault")]
    pub stack_prefault_bytes: usize,
    /// Hold /dev/cpu_dma_latency at this value (us) during the run.
    #[serde(default)]
    pub cpu_dma_latency_us: Option<i32>,
}

/// Errors that stop the probe before it measures.
#[derive(Debug, thiserror::Error)]
pub enum CyclicError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Sys(#[from] SysError),
}

/// What one thread measured.
pub struct CyclicThreadResult {
    /// The CPU the thread was pinned to (None: not pinned).
    pub cpu: Option<usize>,
    /// `woke - slot`.
    pub wakeup: Recorder,
    /// `job_end - woke`.
    pub job: Recorder,
    /// `job_end - slot`, with `missed` and `overruns`.
    pub response: Recorder,
    pub end: LoopEnd,
    /// How the computation was calibrated (None: a memory walk, nothing to calibrate).
    pub calibration: Option<Calibration>,
    /// Policy and priority the thread saw itself run with.
    pub policy_seen: (Option<Policy>, i32),
    pub cpus_seen: Vec<usize>,
}

impl CyclicThreadResult {
    /// Cycles measured (slots skipped as overruns are in `response.overruns`).
    pub fn cycles(&self) -> u64 {
        self.response.count()
    }
}

/// What the probe measured.
pub struct CyclicOutcome {
    pub threads: Vec<CyclicThreadResult>,
    pub interrupted: bool,
    /// Wall time of the whole run (calibration included), ns.
    pub duration_ns: i64,
    /// Ok, or why mlockall failed (None: not asked).
    pub memory_lock: Option<Result<(), String>>,
    /// The held value, or why it could not be held (None: not asked).
    pub cpu_dma_latency: Option<Result<i32, String>>,
}

const STACK_BYTES: usize = 1024 * 1024;

impl CyclicConfig {
    /// A config with every default: `threads` 1, deadline the interval, 1 s windows, 256 KiB
    /// stack prefault, no duration/count (set one), no cpu_dma_latency.
    pub fn new(interval_ns: i64, work: Work, rt: RtSettings) -> CyclicConfig {
        CyclicConfig {
            interval_ns,
            work,
            rt,
            threads: default_threads(),
            duration_ns: None,
            count: None,
            deadline_ns: None,
            window_ns: default_window_ns(),
            stack_prefault_bytes: default_stack_prefault(),
            cpu_dma_latency_us: None,
        }
    }

    /// The deadline in force: `deadline_ns`, or the interval.
    pub fn deadline(&self) -> i64 {
        self.deadline_ns.unwrap_or(self.interval_ns)
    }

    /// Check what can be checked before anything runs; `online` is the list of online CPUs.
    pub fn validate(&self, online: &[usize]) -> Result<(), CyclicError> {
        let bad = |m: String| Err(CyclicError::Invalid(m));
        if self.interval_ns <= 0 {
            return bad(format!("--interval: {} ns; must be above zero", self.interval_ns));
        }
        if self.threads == 0 {
            return bad("--threads: at least one thread is needed".into());
        }
        if self.duration_ns.is_none() && self.count.is_none() {
            return bad("give --duration or --count".into());
        }
        if self.count == Some(0) {
            return bad("--count: must be at least 1".into());
        }
        if matches!(self.duration_ns, Some(d) if d <= 0) {
            return bad("--duration: must be above zero".into());
        }
        if matches!(self.deadline_ns, Some(d) if d <= 0) {
            return bad("--deadline: must be above zero".into());
        }
        if self.window_ns <= 0 {
            return bad("--window: must be above zero".into());
        }
        self.work.check().map_err(|e| CyclicError::Invalid(format!("--{e}")))?;
        self.rt.check().map_err(|e| CyclicError::Invalid(format!("--priority: {e}")))?;
        if let Some(cpus) = &self.rt.cpus {
            for c in cpus {
                if !online.contains(c) {
                    return bad(format!("--cpus: CPU {c} is not online (online: {online:?})"));
                }
            }
        }
        Ok(())
    }

    /// Slots one thread's grid is planned to have (cycles measured + overruns).
    pub fn planned_cycles(&self) -> u64 {
        crate::hold::planned_slots(self.count, self.duration_ns, self.interval_ns)
    }
}

/// Run the probe. `on_progress(done, planned)` is called about every 100 ms from the
/// calling thread (never from a measuring thread); `done` counts cycles of all threads.
pub fn run(
    cfg: &CyclicConfig,
    stop: Arc<AtomicBool>,
    on_progress: impl FnMut(u64, u64),
) -> Result<CyclicOutcome, CyclicError> {
    run_with_spike(cfg, stop, None, on_progress)
}

/// [`run`], and the first response time above the hook's threshold (any thread; thread i is
/// its source i) raises its flag, for a watcher off the hot path (`--trace-on-spike`).
pub fn run_with_spike(
    cfg: &CyclicConfig,
    stop: Arc<AtomicBool>,
    spike: Option<SpikeHook>,
    mut on_progress: impl FnMut(u64, u64),
) -> Result<CyclicOutcome, CyclicError> {
    let (online, _) = rtlab_sys::cpus::online_cpus(Path::new("/"));
    cfg.validate(&online)?;

    let (memory_lock_guard, memory_lock) = crate::hold::lock_memory(cfg.rt.mlockall);
    let (dma_guard, cpu_dma_latency) = crate::hold::cpu_dma_latency(cfg.cpu_dma_latency_us);

    let per_thread = cfg.planned_cycles();
    let planned = per_thread * cfg.threads as u64;
    let window_capacity =
        crate::hold::window_capacity(per_thread as i64 * cfg.interval_ns, cfg.window_ns);
    let sched = CyclicSchedule {
        interval_ns: cfg.interval_ns,
        duration_ns: cfg.duration_ns,
        slots: cfg.count,
    };
    let (threads, duration_ns) = crate::hold::run_threads(
        cfg.threads,
        &stop,
        planned,
        &mut on_progress,
        |i, prog| spawn_cyclic(cfg, i, sched, window_capacity, spike.as_ref(), &stop, prog),
        || {},
    )
    .map_err(|e| match e {
        crate::hold::RunError::Spawn(e) => CyclicError::from(e),
        crate::hold::RunError::Panicked(_) => {
            CyclicError::Invalid("a cyclic thread panicked".into())
        }
    })?;
    on_progress(threads.iter().map(|t| t.cycles()).sum(), planned);
    drop(dma_guard);
    drop(memory_lock_guard);
    let interrupted = threads.iter().any(|t| t.end == LoopEnd::Interrupted);
    Ok(CyclicOutcome { threads, interrupted, duration_ns, memory_lock, cpu_dma_latency })
}

/// Start measuring thread `i`: its recorders (the response time raises `spike`'s flag for
/// source i), its job (prefaulted, calibrated on its own CPU), then the cycles.
fn spawn_cyclic(
    cfg: &CyclicConfig,
    i: usize,
    sched: CyclicSchedule,
    window_capacity: usize,
    spike: Option<&SpikeHook>,
    stop: &Arc<AtomicBool>,
    prog: Arc<AtomicU64>,
) -> Result<rtlab_sys::sched::RtThread<CyclicThreadResult>, rtlab_sys::SysError> {
    let rc = RecorderConfig {
        deadline_ns: cfg.deadline(),
        window_ns: cfg.window_ns,
        window_capacity,
        max_samples: None,
        us_histogram_buckets: None,
        spike_threshold_ns: None,
    };
    let mut sinks = CycleSinks {
        wakeup: Recorder::new(&rc, None),
        job: Recorder::new(&rc, None),
        response: Recorder::new(&rc, None)
            .with_hook(spike.map(|h| h.for_source(i as u32)).as_ref()),
    };
    let mut job = Job::new(&cfg.work);
    let work = cfg.work;
    let cpu = cfg.rt.cpu_of(i);
    let spec = ThreadSpec {
        name: format!("rtlab-cyclic{i}"),
        policy: cfg.rt.policy,
        priority: cfg.rt.priority,
        cpus: cpu.map(|c| vec![c]),
        stack_bytes: STACK_BYTES,
    };
    let stop = stop.clone();
    let prefault = cfg.stack_prefault_bytes.min(STACK_BYTES / 2);
    spawn_rt(&spec, move || {
        prefault_stack(prefault);
        job.prefault();
        let policy_seen = current_policy();
        let cpus_seen = current_affinity();
        let calibration = match (work, &mut job) {
            (Work::Compute { ns }, Job::Compute { iterations }) => {
                let c = work::calibrate(ns, current_cpu(), rtlab_sys::clock::monotonic_ns);
                *iterations = c.iterations;
                Some(c)
            }
            _ => None,
        };
        let mut clock = MonotonicClock;
        // cost: this thread's counters right before its loop and right after it
        let cost = rtlab_sys::usage::begin("cyclic");
        let start = rtlab_sys::clock::monotonic_ns();
        sinks.wakeup.origin_monotonic_ns = Some(start);
        sinks.job.origin_monotonic_ns = Some(start);
        sinks.response.origin_monotonic_ns = Some(start);
        let end = run_cycles(
            &mut clock,
            sched,
            start,
            |_: &mut MonotonicClock| job.run(),
            &mut sinks,
            &stop,
            &prog,
        );
        cost.end();
        CyclicThreadResult {
            cpu,
            wakeup: sinks.wakeup,
            job: sinks.job,
            response: sinks.response,
            end,
            calibration,
            policy_seen,
            cpus_seen,
        }
    })
}

impl CyclicOutcome {
    /// The result streams: per thread `thread{i}` (response_time, the headline),
    /// `thread{i}.wakeup` (wakeup_latency) and `thread{i}.job` (job_duration); with several
    /// threads an `all` stream over every thread's response time.
    pub fn streams(&self, cfg: &CyclicConfig) -> Vec<Stream> {
        let mut out = Vec::new();
        for (i, t) in self.threads.iter().enumerate() {
            let labels = thread_labels(cfg, i, t);
            out.push(Stream::from_recorder(
                format!("thread{i}"),
                RESPONSE_METRIC,
                RESPONSE_DEFINITION,
                labels.clone(),
                &t.response,
            ));
            for (suffix, metric, definition, r) in [
                ("wakeup", WAKEUP_METRIC, WAKEUP_DEFINITION, &t.wakeup),
                ("job", JOB_METRIC, JOB_DEFINITION, &t.job),
            ] {
                let mut s = Stream::from_recorder(
                    format!("thread{i}.{suffix}"),
                    metric,
                    definition,
                    labels.clone(),
                    r,
                );
                s.stats.missed = None;
                s.stats.overruns = None;
                out.push(s);
            }
        }
        if self.threads.len() > 1 {
            out.push(self.all_stream(cfg));
        }
        out
    }

    fn all_stream(&self, cfg: &CyclicConfig) -> Stream {
        let mut r = Running::default();
        let mut h = Histogram::new();
        let (mut missed, mut overruns) = (0, 0);
        for t in &self.threads {
            r.merge(&t.response.running);
            h.merge(&t.response.histogram);
            missed += t.response.missed;
            overruns += t.response.overruns;
        }
        let mut stats = rtlab_core::Summary::from_parts(&r, &h);
        stats.missed = Some(missed);
        stats.overruns = Some(overruns);
        let mut labels = common_labels(cfg);
        labels.insert("threads".into(), self.threads.len().to_string());
        // every thread has the same window width unless one widened; merge maxima when equal
        let mut windows = self.threads[0].response.windows.to_data();
        for t in &self.threads[1..] {
            let w = t.response.windows.to_data();
            if w.width_ns == windows.width_ns {
                if w.max_ns.len() > windows.max_ns.len() {
                    windows.max_ns.resize(w.max_ns.len(), None);
                    windows.count.resize(w.count.len(), 0);
                }
                for (k, m) in w.max_ns.iter().enumerate() {
                    windows.max_ns[k] = windows.max_ns[k].max(*m);
                    windows.count[k] += w.count[k];
                }
            }
        }
        Stream {
            name: "all".into(),
            metric: RESPONSE_METRIC.into(),
            definition: format!(
                "{RESPONSE_DEFINITION} (every thread together; max_index is the index within its thread)"
            ),
            labels,
            deadline_ns: cfg.deadline(),
            stats,
            histogram: h.to_data(),
            windows,
            raw_file: None,
            raw_dropped: None,
            start_monotonic_ns: self
                .threads
                .iter()
                .filter_map(|t| t.response.origin_monotonic_ns)
                .min(),
        }
    }
}

/// Labels every stream of the run shares: interval, policy, priority, the work.
fn common_labels(cfg: &CyclicConfig) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    l.insert("interval_ns".into(), cfg.interval_ns.to_string());
    l.insert("policy".into(), cfg.rt.policy.name().into());
    l.insert("priority".into(), cfg.rt.priority.to_string());
    l.insert("work".into(), cfg.work.kind().into());
    match cfg.work {
        Work::Compute { ns } => {
            l.insert("work_ns".into(), ns.to_string());
        }
        Work::MemoryWalk { bytes, stride } => {
            l.insert("work_bytes".into(), bytes.to_string());
            l.insert("work_stride".into(), stride.to_string());
            l.insert("work_touches".into(), cfg.work.touches_per_cycle().unwrap_or(0).to_string());
        }
    }
    l
}

/// The labels of thread i's streams: the common ones, its CPU, what it saw, its calibration.
fn thread_labels(cfg: &CyclicConfig, i: usize, t: &CyclicThreadResult) -> BTreeMap<String, String> {
    let mut l = common_labels(cfg);
    l.insert("thread".into(), i.to_string());
    l.insert("cpu".into(), t.cpu.map(|c| c.to_string()).unwrap_or_else(|| "any".into()));
    l.insert("policy_seen".into(), t.policy_seen.0.map(|p| p.name()).unwrap_or("unknown").into());
    l.insert("priority_seen".into(), t.policy_seen.1.to_string());
    if let Some(c) = &t.calibration {
        l.insert("work_iterations".into(), c.iterations.to_string());
        l.insert("calibration_iterations_per_us".into(), format!("{:.1}", c.iterations_per_us));
        l.insert("calibration_spread".into(), format!("{:.3}", c.spread));
        l.insert("calibration_check_ns".into(), c.check_ns.to_string());
    }
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> CyclicConfig {
        let mut c =
            CyclicConfig::new(1_000_000, Work::Compute { ns: 100_000 }, RtSettings::normal());
        c.count = Some(10);
        c
    }

    #[test]
    fn defaults_fill_a_minimal_file() {
        let j = r#"{"interval_ns":1000000,"work":{"kind":"compute","ns":100000},
            "rt":{"policy":"fifo","priority":80,"cpus":[1],"mlockall":true},"count":5}"#;
        let c: CyclicConfig = serde_json::from_str(j).unwrap();
        assert_eq!(c.threads, 1);
        assert_eq!(c.deadline(), 1_000_000);
        assert_eq!(c.window_ns, 1_000_000_000);
        assert_eq!(c.stack_prefault_bytes, 256 * 1024);
        assert_eq!(c.cpu_dma_latency_us, None);
        assert_eq!(c.rt.cpu_of(0), Some(1));
        let back: CyclicConfig = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn validation_names_the_flag() {
        let online = [0, 1];
        assert!(cfg().validate(&online).is_ok());
        let err = |c: CyclicConfig| c.validate(&online).unwrap_err().to_string();
        assert!(err(CyclicConfig { interval_ns: 0, ..cfg() }).contains("--interval"));
        assert!(err(CyclicConfig { threads: 0, ..cfg() }).contains("--threads"));
        assert!(err(CyclicConfig { count: None, ..cfg() }).contains("--duration or --count"));
        assert!(err(CyclicConfig { count: Some(0), ..cfg() }).contains("--count"));
        assert!(err(CyclicConfig { deadline_ns: Some(0), ..cfg() }).contains("--deadline"));
        assert!(err(CyclicConfig { work: Work::Compute { ns: -5 }, ..cfg() }).contains("--work"));
        let rt = RtSettings { priority: 5, ..RtSettings::normal() };
        assert!(err(CyclicConfig { rt, ..cfg() }).contains("--priority"));
        let rt = RtSettings { cpus: Some(vec![7]), ..RtSettings::normal() };
        assert!(err(CyclicConfig { rt, ..cfg() }).contains("CPU 7"));
    }

    #[test]
    fn planned_cycles_takes_the_smaller_limit() {
        assert_eq!(cfg().planned_cycles(), 10);
        let c = CyclicConfig { duration_ns: Some(5_500_000), ..cfg() };
        assert_eq!(c.planned_cycles(), 5);
        let c = CyclicConfig { duration_ns: Some(50_000_000), count: None, ..cfg() };
        assert_eq!(c.planned_cycles(), 50);
    }
}
