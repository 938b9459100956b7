//! The noise probe (oslat's question, rtla osnoise's in user space): what the machine steals
//! from a thread that never sleeps. One thread per chosen CPU, pinned there at the given
//! policy and priority, reads CLOCK_MONOTONIC in a tight loop; every gap between two reads
//! above the threshold is time the CPU was taken from it (an interrupt, a softirq, a kernel
//! thread, a thread of higher priority, RT throttling, an SMI, the hypervisor).
//!
//! Contract:
//! - Each thread is created by `rtlab_sys::sched::spawn_rt` already pinned to its CPU and
//!   running with the policy and priority; memory is locked for the run when `rt.mlockall`;
//!   `/dev/cpu_dma_latency` is held when asked. Every system change is a guard undone when
//!   the run ends. The calling thread keeps off the measured CPUs while they measure (as
//!   oslat's main thread), and is put back after.
//! - The loop is [`busy_loop`]: `t = now()`; `gap = t - previous read`; a gap above the
//!   threshold is a sample (its `at_ns` is when it began: the previous read, from the
//!   thread's start) and is added to its window's stolen time; when `t` passes a window's
//!   end, that window's stolen time is a sample of the stolen stream. Everything it records
//!   into is allocated before the thread is created; it never allocates, locks, logs or
//!   prints; it reads the stop flag and writes the progress counter every 1024 reads.
//! - A gap is counted in the window where it began, whole: the stolen samples sum to the
//!   gaps' total exactly (a gap longer than a window makes that window's stolen time larger
//!   than its width, as it was). The last window may be shorter than the others (the run's
//!   end); `measured_ns` says how long each thread measured.
//! - Ctrl-C raises the stop flag; threads end within 1024 reads and everything measured is
//!   returned. Nothing here prints.
//!
//! Streams (per CPU c, the words of docs/words.md):
//! - `cpu{c}`, metric `noise_gap`: each gap above the threshold (its duration). Per window:
//!   the longest gap and the gap count (the windows of every stream).
//! - `cpu{c}.stolen`, metric `stolen_time`: one sample per window, the sum of its gaps (÷ the
//!   window's width: the share of the CPU stolen).
//!
//! Labels of both: `cpu`, `threshold_ns`, `policy`, `priority` (and what the thread saw
//! itself run with), `reads` (clock reads), `measured_ns`, `stolen_ns` (total), `gaps`.

use crate::clock::{Clock, MonotonicClock};
use crate::timer::LoopEnd;
use rtlab_core::rt::RtSettings;
use rtlab_core::schema::Stream;
use rtlab_core::sink::{Recorder, RecorderConfig, Sink, SpikeHook};
use rtlab_sys::memory::prefault_stack;
use rtlab_sys::sched::{current_affinity, current_policy, spawn_rt, Policy, ThreadSpec};
use rtlab_sys::SysError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Metric of `cpu{c}`.
pub const GAP_METRIC: &str = "noise_gap";
/// Metric of `cpu{c}.stolen`.
pub const STOLEN_METRIC: &str = "stolen_time";
/// Definitions, as stored with each stream.
pub const GAP_DEFINITION: &str = "a gap between two consecutive CLOCK_MONOTONIC reads of a thread that never sleeps, above the threshold: time the CPU was taken from it (interrupt, softirq, kernel thread, a thread of higher priority, RT throttling, SMI, hypervisor); at_ns is when it began";
pub const STOLEN_DEFINITION: &str = "the sum of a window's noise gaps (each counted in the window where it began): time stolen from the busy thread in that window; divided by the window's width, the share of the CPU stolen";

/// Reads between two looks at the stop flag and the progress (a power of two: a mask).
const CHECK_EVERY: u64 = 1024;
const STACK_BYTES: usize = 1024 * 1024;

/// The whole noise probe.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoiseConfig {
    /// One measuring thread on each of these CPUs.
    pub cpus: Vec<usize>,
    /// Policy and priority of every thread, and the memory lock (its `cpus` are not used).
    pub rt: RtSettings,
    /// Gaps between two reads above this are noise.
    pub threshold_ns: i64,
    /// How long each thread measures.
    pub duration_ns: i64,
    /// Width of a window (stolen time, longest gap and gap count per window).
    pub window_ns: i64,
    /// Stack bytes touched before the loop starts.
    pub stack_prefault_bytes: usize,
    /// Hold /dev/cpu_dma_latency at this value (us) during the run.
    pub cpu_dma_latency_us: Option<i32>,
}

/// Errors that stop the probe before it measures.
#[derive(Debug, thiserror::Error)]
pub enum NoiseError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Sys(#[from] SysError),
}

/// What one thread measured.
pub struct NoiseThreadResult {
    pub cpu: usize,
    /// Every gap above the threshold.
    pub gaps: Recorder,
    /// Every window's stolen time.
    pub stolen: Recorder,
    /// Clock reads the loop made.
    pub reads: u64,
    /// From the first read to the last, ns.
    pub measured_ns: i64,
    /// The sum of the gaps, ns.
    pub stolen_ns: i64,
    pub end: LoopEnd,
    /// Policy and priority the thread saw itself run with.
    pub policy_seen: (Option<Policy>, i32),
    pub cpus_seen: Vec<usize>,
}

/// What the probe measured.
pub struct NoiseOutcome {
    pub threads: Vec<NoiseThreadResult>,
    pub interrupted: bool,
    /// Wall time of the whole run, ns.
    pub duration_ns: i64,
    /// Ok, or why mlockall failed (None: not asked).
    pub memory_lock: Option<Result<(), String>>,
    /// The held value, or why it could not be held (None: not asked).
    pub cpu_dma_latency: Option<Result<i32, String>>,
}

impl NoiseConfig {
    /// Check what can be checked before anything runs; `online` is the list of online CPUs.
    pub fn validate(&self, online: &[usize]) -> Result<(), NoiseError> {
        let bad = |m: String| Err(NoiseError::Invalid(m));
        if self.cpus.is_empty() {
            return bad("--cpus: no CPU given".into());
        }
        for (i, c) in self.cpus.iter().enumerate() {
            if !online.contains(c) {
                return bad(format!("--cpus: CPU {c} is not online (online: {online:?})"));
            }
            if self.cpus[..i].contains(c) {
                return bad(format!("--cpus: CPU {c} is given twice (one thread per CPU)"));
            }
        }
        if self.threshold_ns <= 0 {
            return bad(format!("--threshold: {} ns; must be above zero", self.threshold_ns));
        }
        if self.duration_ns <= 0 {
            return bad("--duration: must be above zero".into());
        }
        if self.window_ns <= 0 {
            return bad("--window: must be above zero".into());
        }
        self.rt.check().map_err(|e| NoiseError::Invalid(format!("--priority: {e}")))?;
        Ok(())
    }
}

/// The two sinks of one busy loop, and what it counts besides.
pub struct NoiseSinks<G: Sink, S: Sink> {
    pub gaps: G,
    pub stolen: S,
}

/// What [`busy_loop`] counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusyLoopEnd {
    pub end: LoopEnd,
    pub reads: u64,
    /// From the first read (`start`) to the last.
    pub measured_ns: i64,
    pub stolen_ns: i64,
}

/// What one busy loop measures: from `start` (its first read) for `duration_ns`, gaps above
/// `threshold_ns`, windows of `window_ns`.
#[derive(Clone, Copy, Debug)]
pub struct BusyPlan {
    pub start: i64,
    pub duration_ns: i64,
    pub threshold_ns: i64,
    pub window_ns: i64,
}

/// Read `clock` in a tight loop from `plan.start` until `start + duration_ns` (or the stop
/// flag): every gap above the threshold into `sinks.gaps` (at its start, from `start`), every
/// window's sum of gaps into `sinks.stolen` (the last, shorter window too). `progress` gets
/// the ms measured. Never allocates, locks, logs or prints.
pub fn busy_loop<C: Clock, G: Sink, S: Sink>(
    clock: &mut C,
    plan: BusyPlan,
    sinks: &mut NoiseSinks<G, S>,
    stop: &AtomicBool,
    progress: &AtomicU64,
) -> BusyLoopEnd {
    let BusyPlan { start, duration_ns, threshold_ns, window_ns } = plan;
    let end_at = start + duration_ns;
    let mut prev = start;
    let mut reads: u64 = 1;
    let mut gaps: u64 = 0;
    let mut window: u64 = 0;
    let mut window_end = start + window_ns;
    let mut window_stolen: i64 = 0;
    let mut stolen_ns: i64 = 0;
    let mut end = LoopEnd::Duration;
    loop {
        let t = clock.now();
        reads += 1;
        let gap = t - prev;
        if gap > threshold_ns {
            let _ = sinks.gaps.record(gaps, prev - start, gap);
            gaps += 1;
            window_stolen += gap;
            stolen_ns += gap;
        }
        prev = t;
        while t >= window_end && window_end <= end_at {
            let at = window_end - window_ns - start;
            let _ = sinks.stolen.record(window, at, window_stolen);
            window += 1;
            window_stolen = 0;
            window_end += window_ns;
        }
        if t >= end_at {
            break;
        }
        if reads & (CHECK_EVERY - 1) == 0 {
            progress.store(((t - start) / 1_000_000) as u64, Ordering::Relaxed);
            if stop.load(Ordering::Relaxed) {
                end = LoopEnd::Interrupted;
                break;
            }
        }
    }
    // the last window, when the run ended inside it (not one that begins at the end)
    let last_start = window_end - window_ns;
    if prev > last_start && last_start < end_at {
        let _ = sinks.stolen.record(window, last_start - start, window_stolen);
    }
    progress.store(((prev - start) / 1_000_000) as u64, Ordering::Relaxed);
    BusyLoopEnd { end, reads, measured_ns: prev - start, stolen_ns }
}

/// Run the probe. `on_progress(done, planned)` is called about every 100 ms from the
/// calling thread (never from a measuring thread); `done` is ms measured, over all threads.
pub fn run(
    cfg: &NoiseConfig,
    stop: Arc<AtomicBool>,
    on_progress: impl FnMut(u64, u64),
) -> Result<NoiseOutcome, NoiseError> {
    run_with_spike(cfg, stop, None, on_progress)
}

/// [`run`], and the first gap above the hook's threshold (any CPU; the i-th CPU of the list
/// is source i) raises its flag, for a watcher off the hot path (`--trace-on-spike`).
pub fn run_with_spike(
    cfg: &NoiseConfig,
    stop: Arc<AtomicBool>,
    spike: Option<SpikeHook>,
    mut on_progress: impl FnMut(u64, u64),
) -> Result<NoiseOutcome, NoiseError> {
    let (online, _) = rtlab_sys::cpus::online_cpus(Path::new("/"));
    cfg.validate(&online)?;
    let (memory_lock_guard, memory_lock) = crate::hold::lock_memory(cfg.rt.mlockall);
    let (dma_guard, cpu_dma_latency) = crate::hold::cpu_dma_latency(cfg.cpu_dma_latency_us);
    // the calling thread (it watches the progress) keeps off the measured CPUs, as oslat's
    // main thread: a thread of this process waiting there would be noise of rtlab's own
    let _off = OffTheCpus::of_caller(&cfg.cpus, &online);
    let per_thread_ms = (cfg.duration_ns / 1_000_000) as u64;
    let planned = per_thread_ms * cfg.cpus.len() as u64;
    let window_capacity = crate::hold::window_capacity(cfg.duration_ns, cfg.window_ns);
    let (threads, duration_ns) = crate::hold::run_threads(
        cfg.cpus.len(),
        &stop,
        planned,
        &mut on_progress,
        |i, prog| spawn_noise(cfg, i, window_capacity, spike.as_ref(), &stop, prog),
        || {},
    )
    .map_err(|e| match e {
        crate::hold::RunError::Spawn(e) => NoiseError::from(e),
        crate::hold::RunError::Panicked(_) => NoiseError::Invalid("a noise thread panicked".into()),
    })?;
    on_progress(threads.iter().map(|t| (t.measured_ns / 1_000_000) as u64).sum(), planned);
    drop(dma_guard);
    drop(memory_lock_guard);
    let interrupted = threads.iter().any(|t| t.end == LoopEnd::Interrupted);
    Ok(NoiseOutcome { threads, interrupted, duration_ns, memory_lock, cpu_dma_latency })
}

/// The calling thread pinned to the online CPUs not measured (when there are some) and put
/// back where it was when dropped.
struct OffTheCpus(Option<Vec<usize>>);

impl OffTheCpus {
    fn of_caller(measured: &[usize], online: &[usize]) -> OffTheCpus {
        let others: Vec<usize> = online.iter().copied().filter(|c| !measured.contains(c)).collect();
        let before = current_affinity();
        if others.is_empty() || before.is_empty() {
            return OffTheCpus(None);
        }
        match rtlab_sys::sched::set_current_affinity(&others) {
            Ok(()) => OffTheCpus(Some(before)),
            Err(_) => OffTheCpus(None),
        }
    }
}

impl Drop for OffTheCpus {
    fn drop(&mut self) {
        if let Some(before) = self.0.take() {
            let _ = rtlab_sys::sched::set_current_affinity(&before);
        }
    }
}

/// Start measuring thread `i` on `cfg.cpus[i]`: its two recorders (the gaps raise `spike`'s
/// flag for source i), then the busy loop.
fn spawn_noise(
    cfg: &NoiseConfig,
    i: usize,
    window_capacity: usize,
    spike: Option<&SpikeHook>,
    stop: &Arc<AtomicBool>,
    prog: Arc<AtomicU64>,
) -> Result<rtlab_sys::sched::RtThread<NoiseThreadResult>, SysError> {
    let rc = RecorderConfig {
        deadline_ns: i64::MAX,
        window_ns: cfg.window_ns,
        window_capacity,
        max_samples: None,
        us_histogram_buckets: None,
        spike_threshold_ns: None,
    };
    let mut sinks = NoiseSinks {
        gaps: Recorder::new(&rc, None).with_hook(spike.map(|h| h.for_source(i as u32)).as_ref()),
        stolen: Recorder::new(&rc, None),
    };
    let cpu = cfg.cpus[i];
    let spec = ThreadSpec {
        name: format!("rtlab-noise{i}"),
        policy: cfg.rt.policy,
        priority: cfg.rt.priority,
        cpus: Some(vec![cpu]),
        stack_bytes: STACK_BYTES,
    };
    let stop = stop.clone();
    let prefault = cfg.stack_prefault_bytes.min(STACK_BYTES / 2);
    let (duration_ns, threshold_ns, window_ns) = (cfg.duration_ns, cfg.threshold_ns, cfg.window_ns);
    spawn_rt(&spec, move || {
        prefault_stack(prefault);
        let policy_seen = current_policy();
        let cpus_seen = current_affinity();
        let mut clock = MonotonicClock;
        let start = clock.now();
        sinks.gaps.origin_monotonic_ns = Some(start);
        sinks.stolen.origin_monotonic_ns = Some(start);
        let plan = BusyPlan { start, duration_ns, threshold_ns, window_ns };
        // cost: this thread's counters right before its loop and right after it (not inside)
        let cost = rtlab_sys::usage::begin("noise");
        let e = busy_loop(&mut clock, plan, &mut sinks, &stop, &prog);
        cost.end();
        NoiseThreadResult {
            cpu,
            gaps: sinks.gaps,
            stolen: sinks.stolen,
            reads: e.reads,
            measured_ns: e.measured_ns,
            stolen_ns: e.stolen_ns,
            end: e.end,
            policy_seen,
            cpus_seen,
        }
    })
}

impl NoiseOutcome {
    /// The result streams: per CPU `cpu{c}` (noise_gap) and `cpu{c}.stolen` (stolen_time).
    pub fn streams(&self, cfg: &NoiseConfig) -> Vec<Stream> {
        let mut out = Vec::new();
        for t in &self.threads {
            let labels = thread_labels(cfg, t);
            for (name, metric, definition, r) in [
                (format!("cpu{}", t.cpu), GAP_METRIC, GAP_DEFINITION, &t.gaps),
                (format!("cpu{}.stolen", t.cpu), STOLEN_METRIC, STOLEN_DEFINITION, &t.stolen),
            ] {
                let mut s = Stream::from_recorder(name, metric, definition, labels.clone(), r);
                s.stats.missed = None;
                s.stats.overruns = None;
                // no deadline: a gap is noise above the threshold, not a missed deadline
                s.deadline_ns = cfg.threshold_ns;
                out.push(s);
            }
            // the gaps' windows run to the end of the run, as the stolen time's (a window
            // without a gap is a window, with none)
            let n = out.len();
            let full = out[n - 1].windows.clone();
            let w = &mut out[n - 2].windows;
            if w.width_ns == full.width_ns && w.max_ns.len() < full.max_ns.len() {
                w.max_ns.resize(full.max_ns.len(), None);
                w.count.resize(full.count.len(), 0);
            }
        }
        out
    }
}

/// The labels of CPU `t.cpu`'s streams: the settings, what the thread saw, the totals.
fn thread_labels(cfg: &NoiseConfig, t: &NoiseThreadResult) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    l.insert("cpu".into(), t.cpu.to_string());
    l.insert("threshold_ns".into(), cfg.threshold_ns.to_string());
    l.insert("policy".into(), cfg.rt.policy.name().into());
    l.insert("priority".into(), cfg.rt.priority.to_string());
    l.insert("policy_seen".into(), t.policy_seen.0.map(|p| p.name()).unwrap_or("unknown").into());
    l.insert("priority_seen".into(), t.policy_seen.1.to_string());
    l.insert("cpus_seen".into(), format!("{:?}", t.cpus_seen));
    l.insert("reads".into(), t.reads.to_string());
    l.insert("measured_ns".into(), t.measured_ns.to_string());
    l.insert("stolen_ns".into(), t.stolen_ns.to_string());
    l.insert("gaps".into(), t.gaps.count().to_string());
    l
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_sink::Keep;

    /// A clock whose reads come from a script (then the last value + `step` each).
    struct Script {
        t: std::collections::VecDeque<i64>,
        last: i64,
        step: i64,
    }
    impl Clock for Script {
        fn now(&mut self) -> i64 {
            self.last = self.t.pop_front().unwrap_or(self.last + self.step);
            self.last
        }
        fn sleep_until(&mut self, _: i64) {}
        fn sleep_for(&mut self, _: i64) {}
    }

    fn run_script(reads: &[i64], duration: i64, window: i64) -> (Keep, Keep, BusyLoopEnd) {
        let mut c = Script { t: reads.iter().copied().collect(), last: 0, step: 10 };
        let mut sinks = NoiseSinks { gaps: Keep::default(), stolen: Keep::default() };
        let (stop, p) = (AtomicBool::new(false), AtomicU64::new(0));
        let plan =
            BusyPlan { start: 0, duration_ns: duration, threshold_ns: 100, window_ns: window };
        let e = busy_loop(&mut c, plan, &mut sinks, &stop, &p);
        (sinks.gaps, sinks.stolen, e)
    }

    #[test]
    fn gaps_above_the_threshold_are_kept_at_their_start_and_summed_per_window() {
        // a 500 ns gap from 20, 100 ns ones (not above), a 300 ns gap across the window
        // boundary at 1000 (from 900), then reads every 10 ns to the end
        let reads = [10, 20, 520, 530, 630, 700, 800, 900, 1_200, 1_210];
        let (g, s, e) = run_script(&reads, 2_000, 1_000);
        assert_eq!(g.samples, vec![(0, 20, 500), (1, 900, 300)]);
        assert_eq!(e.stolen_ns, 800);
        // the gap that began in window 0 counts there, whole
        assert_eq!(s.samples, vec![(0, 0, 800), (1, 1_000, 0)]);
        assert_eq!(s.values().iter().sum::<i64>(), e.stolen_ns, "windows sum to the gaps");
        assert_eq!(e.end, LoopEnd::Duration);
        assert_eq!(e.measured_ns, 2_000);
    }

    #[test]
    fn a_run_that_ends_inside_a_window_keeps_that_window() {
        let (g, s, e) = run_script(&[10, 410], 1_500, 1_000);
        assert_eq!(g.values(), vec![400]);
        assert_eq!(s.samples.len(), 2, "{:?}", s.samples);
        assert_eq!(s.samples[1].1, 1_000, "the last window starts at 1000");
        assert_eq!(s.values().iter().sum::<i64>(), 400);
        assert!(e.reads > 100);
    }

    #[test]
    fn the_stop_flag_ends_the_loop_with_what_it_measured() {
        let mut c = Script { t: [].into(), last: 0, step: 10 };
        let mut sinks = NoiseSinks { gaps: Keep::default(), stolen: Keep::default() };
        let (stop, p) = (AtomicBool::new(true), AtomicU64::new(0));
        let plan = BusyPlan {
            start: 0,
            duration_ns: i64::MAX / 2,
            threshold_ns: 100,
            window_ns: 1_000_000,
        };
        let e = busy_loop(&mut c, plan, &mut sinks, &stop, &p);
        assert_eq!(e.end, LoopEnd::Interrupted);
        assert_eq!(e.reads, CHECK_EVERY);
        assert_eq!(sinks.stolen.samples.len(), 1, "the window it was in is kept");
    }

    #[test]
    fn a_real_run_measures_each_cpu_and_puts_the_caller_back() {
        let (online, _) = rtlab_sys::cpus::online_cpus(Path::new("/"));
        let cpu = *online.last().unwrap();
        let cfg = NoiseConfig {
            cpus: vec![cpu],
            rt: RtSettings { mlockall: false, ..RtSettings::normal() },
            threshold_ns: 1_000,
            duration_ns: 30_000_000,
            window_ns: 10_000_000,
            stack_prefault_bytes: 4096,
            cpu_dma_latency_us: None,
        };
        let before = current_affinity();
        let o = run(&cfg, Arc::new(AtomicBool::new(false)), |_, _| {}).unwrap();
        assert_eq!(current_affinity(), before, "the caller is put back");
        let t = &o.threads[0];
        assert_eq!((t.cpu, t.cpus_seen.clone(), t.end), (cpu, vec![cpu], LoopEnd::Duration));
        assert!(t.reads > 1_000 && t.measured_ns >= 30_000_000, "{} reads", t.reads);
        assert_eq!(t.stolen.count(), 3, "3 windows of 10 ms");
        let streams = o.streams(&cfg);
        let names: Vec<&str> = streams.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, [format!("cpu{cpu}"), format!("cpu{cpu}.stolen")]);
        assert_eq!(streams[0].windows.max_ns.len(), 3, "the gaps' windows cover the run");
        assert_eq!(streams[0].labels["gaps"], t.gaps.count().to_string());
    }

    #[test]
    fn validation_names_the_flag() {
        let ok = NoiseConfig {
            cpus: vec![0],
            rt: RtSettings::fifo80(),
            threshold_ns: 1_000,
            duration_ns: 1_000_000,
            window_ns: 1_000_000,
            stack_prefault_bytes: 0,
            cpu_dma_latency_us: None,
        };
        let online = [0, 1];
        assert!(ok.validate(&online).is_ok());
        let err = |c: NoiseConfig| c.validate(&online).unwrap_err().to_string();
        assert!(err(NoiseConfig { cpus: vec![], ..ok.clone() }).contains("--cpus"));
        assert!(err(NoiseConfig { cpus: vec![7], ..ok.clone() }).contains("CPU 7 is not online"));
        assert!(err(NoiseConfig { cpus: vec![1, 1], ..ok.clone() }).contains("twice"));
        assert!(err(NoiseConfig { threshold_ns: 0, ..ok.clone() }).contains("--threshold"));
        assert!(err(NoiseConfig { window_ns: 0, ..ok.clone() }).contains("--window"));
        let rt = RtSettings { priority: 0, ..RtSettings::fifo80() };
        assert!(err(NoiseConfig { rt, ..ok.clone() }).contains("--priority"));
    }
}
