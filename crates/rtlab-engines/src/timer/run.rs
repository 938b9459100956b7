//! Running the timer probe: N threads, each created already pinned and with its policy,
//! memory locked, optional /dev/cpu_dma_latency held, raw samples streamed off the hot path.
//!
//! Contract: everything a thread records into is allocated before the thread is created;
//! the threads run [`crate::timer::run_loop`] only. Ctrl-C raises the stop flag; the threads
//! end their current cycle and everything measured is returned. Every system change made
//! here (mlockall, cpu_dma_latency) is a guard undone on drop. Nothing here prints.

use crate::clock::{MonotonicClock, RosWallClock};
use crate::timer::ros::{
    oneshot_test_thread, rclcpp_loop, roscpp_spin_thread, roscpp_timer_thread, RosTimerShared,
};
use crate::timer::roscpp::{Master, NodeConfigBase, NodeReport, RtOrder};
use crate::timer::{run_loop, LoopEnd, Schedule, TimerMode};
use rtlab_core::raw::{raw_ring, RawConsumer, RawProducer};
use rtlab_core::schema::Stream;
use rtlab_core::sink::{Recorder, RecorderConfig};
use rtlab_core::{Histogram, Running};
use rtlab_sys::memory::prefault_stack;
use rtlab_sys::sched::{current_affinity, current_policy, spawn_rt, Policy, ThreadSpec};
use rtlab_sys::SysError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// One timer thread.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimerThreadConfig {
    pub interval_ns: i64,
    pub policy: Policy,
    pub priority: i32,
    /// The CPU the thread is pinned to (None: not pinned).
    pub cpu: Option<usize>,
    /// Samples above it are missed deadlines.
    pub deadline_ns: i64,
}

/// The whole timer probe.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimerConfig {
    pub mode: TimerMode,
    pub threads: Vec<TimerThreadConfig>,
    pub duration_ns: Option<i64>,
    /// Slots per thread (skipped slots count: the run ends on time).
    pub loops: Option<u64>,
    /// Width of a max-over-time window.
    pub window_ns: i64,
    pub mlockall: bool,
    /// Hold /dev/cpu_dma_latency at this value (us) during the run.
    pub cpu_dma_latency_us: Option<i32>,
    /// Stack bytes touched before the loop starts.
    pub stack_prefault_bytes: usize,
    /// Keep a cyclictest-format 1-us histogram with this many bins.
    pub histogram_us_buckets: Option<usize>,
    /// Stream raw samples (CSV) to this file.
    pub raw_file: Option<String>,
    /// roscpp modes: when the node sets the policy, priority and CPU (before `ros::init`, S4's
    /// order, or after it).
    #[serde(default)]
    pub roscpp_rt: RtOrder,
}

/// Errors that stop the probe before it measures.
#[derive(Debug, thiserror::Error)]
pub enum TimerError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Sys(#[from] SysError),
    #[error("raw sample file '{path}': {source}")]
    RawFile { path: String, source: std::io::Error },
}

/// What one thread measured.
pub struct TimerThreadResult {
    pub config: TimerThreadConfig,
    pub latency: Recorder,
    pub jitter: Recorder,
    /// The one-shot modes: callback - roscpp's anchor - period (the `.anchor` stream).
    pub anchor: Option<Recorder>,
    /// roscpp's periodic modes: current_expired - current_expected (the `.expiry` stream).
    pub expiry: Option<Recorder>,
    /// roscpp modes: what the node said of itself.
    pub roscpp: Option<NodeReport>,
    pub end: LoopEnd,
    /// Policy and priority the thread saw itself run with.
    pub policy_seen: (Option<Policy>, i32),
    pub cpus_seen: Vec<usize>,
}

/// What the probe measured.
pub struct TimerOutcome {
    pub threads: Vec<TimerThreadResult>,
    pub interrupted: bool,
    pub duration_ns: i64,
    /// Ok, or why mlockall failed (None: not asked).
    pub memory_lock: Option<Result<(), String>>,
    /// The held value, or why it could not be held (None: not asked).
    pub cpu_dma_latency: Option<Result<i32, String>>,
    pub raw_dropped: u64,
}

const STACK_BYTES: usize = 1024 * 1024;
const RAW_RING: usize = 1 << 16;

impl TimerConfig {
    /// Check what can be checked before anything runs; `online` is the list of online CPUs.
    pub fn validate(&self, online: &[usize]) -> Result<(), TimerError> {
        if self.threads.is_empty() {
            return Err(TimerError::Invalid("--threads: at least one thread is needed".into()));
        }
        if self.duration_ns.is_none() && self.loops.is_none() {
            return Err(TimerError::Invalid("give --duration or --loops".into()));
        }
        if self.loops == Some(0) {
            return Err(TimerError::Invalid("--loops: must be at least 1".into()));
        }
        if matches!(self.duration_ns, Some(d) if d <= 0) {
            return Err(TimerError::Invalid("--duration: must be above zero".into()));
        }
        if self.window_ns <= 0 {
            return Err(TimerError::Invalid("--window: must be above zero".into()));
        }
        for (i, t) in self.threads.iter().enumerate() {
            if t.interval_ns <= 0 {
                return Err(TimerError::Invalid(format!(
                    "--interval: thread {i} has interval {} ns; must be above zero",
                    t.interval_ns
                )));
            }
            t.policy
                .check_priority(t.priority)
                .map_err(|e| TimerError::Invalid(format!("--priority: {e}")))?;
            if let Some(c) = t.cpu {
                if !online.contains(&c) {
                    return Err(TimerError::Invalid(format!(
                        "--cpus: CPU {c} (thread {i}) is not online (online: {online:?})"
                    )));
                }
            }
        }
        Ok(())
    }

    fn planned_samples(&self, t: &TimerThreadConfig) -> u64 {
        crate::hold::planned_slots(self.loops, self.duration_ns, t.interval_ns)
    }
}

/// Run the probe. `on_progress(done, planned)` is called about every 100 ms from the
/// calling thread (never from a measuring thread).
pub fn run(
    cfg: &TimerConfig,
    stop: Arc<AtomicBool>,
    on_progress: impl FnMut(u64, u64),
) -> Result<TimerOutcome, TimerError> {
    run_with_spike(cfg, stop, None, on_progress)
}

/// [`run`], and the first sample above the hook's threshold (any thread; thread i is its
/// source i) raises its flag, for a watcher off the hot path (`rtlab timer --trace-on-spike`).
pub fn run_with_spike(
    cfg: &TimerConfig,
    stop: Arc<AtomicBool>,
    spike: Option<rtlab_core::sink::SpikeHook>,
    mut on_progress: impl FnMut(u64, u64),
) -> Result<TimerOutcome, TimerError> {
    let (online, _) = rtlab_sys::cpus::online_cpus(Path::new("/"));
    cfg.validate(&online)?;

    let (memory_lock_guard, memory_lock) = crate::hold::lock_memory(cfg.mlockall);
    let (dma_guard, cpu_dma_latency) = crate::hold::cpu_dma_latency(cfg.cpu_dma_latency_us);

    let (producers, writer) = RawOutput::start(cfg)?;
    let planned: u64 = cfg.threads.iter().map(|t| cfg.planned_samples(t)).sum();
    let longest = cfg
        .threads
        .iter()
        .map(|t| cfg.planned_samples(t) as i64 * t.interval_ns)
        .max()
        .unwrap_or(0);
    let window_capacity = crate::hold::window_capacity(longest, cfg.window_ns);
    // roscpp modes: the master every node registers with, and the binary that runs the nodes
    let roscpp = match cfg.mode.is_roscpp() {
        true => {
            let master = Master::start().map_err(TimerError::Invalid)?;
            let exe = std::env::current_exe().map_err(|e| {
                TimerError::Invalid(format!(
                    "finding the rtlab binary to start roscpp's nodes: {e}"
                ))
            })?;
            Some((master, exe))
        }
        false => None,
    };
    // roscpp's timer threads (the oneshot and roscpp models), each with the state it shares
    let helpers: RosHelpers = std::cell::RefCell::new(Vec::new());
    let mut producers = producers.into_iter();
    let run = crate::hold::run_threads(
        cfg.threads.len(),
        &stop,
        planned,
        &mut on_progress,
        |i, prog| {
            let raw = producers.next().flatten();
            let nodes = roscpp.as_ref().map(|(m, exe)| (m.env.clone(), exe.clone()));
            spawn_timer(cfg, i, raw, window_capacity, spike.as_ref(), &stop, prog, &helpers, nodes)
        },
        || {
            for (s, h) in helpers.borrow_mut().drain(..) {
                s.quit();
                let _ = h.join();
            }
        },
    );
    let (threads, duration_ns) = match run {
        Ok(r) => r,
        Err(e) => {
            writer.finish();
            return Err(match e {
                crate::hold::RunError::Spawn(e) => e.into(),
                crate::hold::RunError::Panicked(_) => {
                    TimerError::Invalid("a timer thread panicked".into())
                }
            });
        }
    };
    // every measuring thread has ended its model's timer thread; join them
    for (s, h) in helpers.into_inner() {
        s.quit();
        h.join().map_err(|_| TimerError::Invalid("a roscpp timer thread panicked".into()))?;
    }
    on_progress(threads.iter().map(|t| t.latency.count()).sum(), planned);
    drop(roscpp);
    // a roscpp node that could not run (roscpp not installed, the master gone): nothing
    // was measured by it, and its one line is the error
    let failed = threads.iter().filter(|t| t.latency.count() == 0);
    if let Some(e) = failed.filter_map(|t| t.roscpp.as_ref()?.error.clone()).next() {
        writer.finish();
        return Err(TimerError::Invalid(e));
    }
    let raw_dropped = writer.finish();
    drop(dma_guard);
    drop(memory_lock_guard);
    let interrupted = threads.iter().any(|t| t.end == LoopEnd::Interrupted);
    Ok(TimerOutcome {
        threads,
        interrupted,
        duration_ns,
        memory_lock,
        cpu_dma_latency,
        raw_dropped,
    })
}

/// roscpp's timer threads started beside the measuring ones (oneshot, roscpp models).
type RosHelpers = std::cell::RefCell<Vec<(Arc<RosTimerShared>, rtlab_sys::sched::RtThread<()>)>>;

/// The raw samples' CSV (`--histogram-file`'s raw sibling): a ring per thread, drained to one
/// file by a writer thread off the hot path.
struct RawOutput {
    stop: Arc<AtomicBool>,
    writer: Option<std::thread::JoinHandle<u64>>,
}

impl RawOutput {
    /// The rings' producers (one per thread, None without a raw file) and the writer.
    fn start(cfg: &TimerConfig) -> Result<(Vec<Option<RawProducer>>, RawOutput), TimerError> {
        let mut consumers: Vec<(String, RawConsumer)> = Vec::new();
        let mut producers = Vec::new();
        for i in 0..cfg.threads.len() {
            if cfg.raw_file.is_some() {
                let (p, c) = raw_ring(RAW_RING);
                producers.push(Some(p));
                consumers.push((format!("thread{i}"), c));
            } else {
                producers.push(None);
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let writer = match &cfg.raw_file {
            Some(path) => {
                let file = std::fs::File::create(path)
                    .map_err(|e| TimerError::RawFile { path: path.clone(), source: e })?;
                let ws = stop.clone();
                Some(std::thread::spawn(move || raw_writer(file, consumers, ws)))
            }
            None => None,
        };
        Ok((producers, RawOutput { stop, writer }))
    }

    /// Stop the writer once it drained the rings; the samples it dropped.
    fn finish(self) -> u64 {
        // Release: the writer's Acquire load of `stop` then sees every sample pushed before
        self.stop.store(true, Ordering::Release);
        self.writer.map(|w| w.join().unwrap_or(0)).unwrap_or(0)
    }
}

/// Start measuring thread `i` (and, in the oneshot and roscpp models, roscpp's timer thread
/// first, with the same policy, priority and CPU: S4 set them before ros::init, and every
/// roscpp thread inherited them).
#[allow(clippy::too_many_arguments)]
fn spawn_timer(
    cfg: &TimerConfig,
    i: usize,
    raw: Option<RawProducer>,
    window_capacity: usize,
    spike: Option<&rtlab_core::sink::SpikeHook>,
    stop: &Arc<AtomicBool>,
    prog: Arc<AtomicU64>,
    helpers: &RosHelpers,
    nodes: Option<(Vec<(String, String)>, std::path::PathBuf)>,
) -> Result<rtlab_sys::sched::RtThread<TimerThreadResult>, SysError> {
    let t = &cfg.threads[i];
    let rc = RecorderConfig {
        deadline_ns: t.deadline_ns,
        window_ns: cfg.window_ns,
        window_capacity,
        max_samples: None,
        us_histogram_buckets: cfg.histogram_us_buckets,
        spike_threshold_ns: None,
    };
    let latency = Recorder::new(&rc, raw).with_hook(spike.map(|h| h.for_source(i as u32)).as_ref());
    let jrc = RecorderConfig {
        max_samples: None,
        us_histogram_buckets: None,
        spike_threshold_ns: None,
        ..rc.clone()
    };
    let recorders = (latency, Recorder::new(&jrc, None), Recorder::new(&jrc, None));
    let spec = ThreadSpec {
        name: format!("rtlab-timer{i}"),
        policy: t.policy,
        priority: t.priority,
        cpus: t.cpu.map(|c| vec![c]),
        stack_bytes: STACK_BYTES,
    };
    let sched = Schedule {
        mode: cfg.mode,
        interval_ns: t.interval_ns,
        duration_ns: cfg.duration_ns,
        slots: cfg.loops,
    };
    let prefault = cfg.stack_prefault_bytes.min(STACK_BYTES / 2);
    if let Some((env, exe)) = nodes {
        // roscpp itself: the node is measured; this thread only reads its ring, unpinned at
        // normal priority, so that it never competes with the node's threads
        let spec = ThreadSpec { policy: Policy::Other, priority: 0, cpus: None, ..spec };
        let node = NodeConfigBase {
            policy: t.policy,
            priority: t.priority,
            cpu: t.cpu,
            order: cfg.roscpp_rt,
            mlockall: cfg.mlockall,
        };
        let (stop, config) = (stop.clone(), t.clone());
        return spawn_rt(&spec, move || {
            let (mut latency, mut jitter, mut second) = recorders;
            let (end, report) = crate::timer::roscpp::measure(
                &exe,
                &env,
                node,
                sched,
                &mut latency,
                &mut jitter,
                &mut second,
                &stop,
                &prog,
            );
            let seen = report.spin.as_ref();
            let policy_seen = (
                seen.and_then(|s| Policy::parse(&s.policy)),
                seen.map(|s| s.priority).unwrap_or(0),
            );
            let (anchor, expiry) = match sched.mode.is_oneshot() {
                true => (Some(second), None),
                false => (None, Some(second)),
            };
            TimerThreadResult {
                config,
                latency,
                jitter,
                anchor,
                expiry,
                end,
                policy_seen,
                cpus_seen: Vec::new(),
                roscpp: Some(report),
            }
        });
    }
    let shared = match cfg.mode {
        TimerMode::OneshotModel | TimerMode::RoscppModel => {
            let shared = Arc::new(RosTimerShared::new(0, None));
            let spec = ThreadSpec { name: format!("rtlab-rostimer{i}"), ..spec.clone() };
            let s = shared.clone();
            let h = spawn_rt(&spec, move || {
                prefault_stack(prefault);
                roscpp_timer_thread(&mut RosWallClock, &s)
            })?;
            helpers.borrow_mut().push((shared.clone(), h));
            Some(shared)
        }
        _ => None,
    };
    let (stop, config, mode) = (stop.clone(), t.clone(), cfg.mode);
    spawn_rt(&spec, move || {
        prefault_stack(prefault);
        measure_timer(config, mode, sched, recorders, shared, &stop, &prog)
    })
}

/// The body of a measuring thread: its model's loop (plain, rclcpp's, or roscpp's with its
/// timer thread), recording into its own recorders.
fn measure_timer(
    config: TimerThreadConfig,
    mode: TimerMode,
    sched: Schedule,
    (mut latency, mut jitter, anchor_recorder): (Recorder, Recorder, Recorder),
    shared: Option<Arc<RosTimerShared>>,
    stop: &AtomicBool,
    prog: &AtomicU64,
) -> TimerThreadResult {
    let policy_seen = current_policy();
    let cpus_seen = current_affinity();
    let mut anchor = None;
    // cost: this thread's counters right before its loop and right after it (not inside)
    let cost = rtlab_sys::usage::begin("timer");
    let end = match (mode, shared) {
        (TimerMode::OneshotModel | TimerMode::RoscppModel, Some(s)) => {
            while !s.timer_thread_ready() && !stop.load(Ordering::Relaxed) {
                std::thread::yield_now();
            }
            s.register_callback_thread();
            let start = rtlab_sys::clock::monotonic_ns();
            latency.origin_monotonic_ns = Some(start);
            jitter.origin_monotonic_ns = Some(start);
            let (mut ros, mut test) = (RosWallClock, MonotonicClock);
            if mode == TimerMode::OneshotModel {
                let mut own = anchor_recorder;
                own.origin_monotonic_ns = Some(start);
                let end = oneshot_test_thread(
                    &mut ros,
                    &mut test,
                    &s,
                    sched,
                    start,
                    &mut latency,
                    &mut own,
                    stop,
                    prog,
                );
                anchor = Some(own);
                end
            } else {
                roscpp_spin_thread(
                    &mut ros,
                    &mut test,
                    &s,
                    sched,
                    start,
                    &mut latency,
                    &mut jitter,
                    stop,
                    prog,
                )
            }
        }
        _ => {
            let mut clock = MonotonicClock;
            let start = rtlab_sys::clock::monotonic_ns();
            latency.origin_monotonic_ns = Some(start);
            jitter.origin_monotonic_ns = Some(start);
            let (l, j) = (&mut latency, &mut jitter);
            if mode == TimerMode::RclcppModel {
                rclcpp_loop(&mut clock, sched, start, l, j, stop, prog)
            } else {
                run_loop(&mut clock, sched, start, l, j, stop, prog)
            }
        }
    };
    cost.end();
    TimerThreadResult {
        config,
        latency,
        jitter,
        anchor,
        expiry: None,
        end,
        policy_seen,
        cpus_seen,
        roscpp: None,
    }
}

/// Drain the rings to CSV until told to stop, then once more. Returns samples dropped.
fn raw_writer(
    file: std::fs::File,
    consumers: Vec<(String, RawConsumer)>,
    stop: Arc<AtomicBool>,
) -> u64 {
    let mut w = std::io::BufWriter::new(file);
    let _ = writeln!(w, "stream,index,at_ns,value_ns");
    loop {
        let last = stop.load(Ordering::Acquire);
        for (name, c) in &consumers {
            c.drain(|s| {
                let _ = writeln!(w, "{name},{},{},{}", s.index, s.at_ns, s.value_ns);
            });
        }
        if last {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = w.flush();
    consumers.iter().map(|(_, c)| c.dropped()).sum()
}

impl TimerOutcome {
    /// The result streams: per thread its latency (or timer error) and cycle jitter, and
    /// with several threads an `all` stream over every thread's latency.
    pub fn streams(&self, cfg: &TimerConfig) -> Vec<Stream> {
        let mut out = Vec::new();
        for (i, t) in self.threads.iter().enumerate() {
            let mut labels = BTreeMap::new();
            labels.insert("thread".into(), i.to_string());
            labels.insert("mode".into(), cfg.mode.name().into());
            labels.insert("interval_ns".into(), t.config.interval_ns.to_string());
            labels.insert("policy".into(), t.config.policy.name().into());
            labels.insert("priority".into(), t.config.priority.to_string());
            labels.insert(
                "cpu".into(),
                t.config.cpu.map(|c| c.to_string()).unwrap_or_else(|| "any".into()),
            );
            labels.insert(
                "policy_seen".into(),
                t.policy_seen.0.map(|p| p.name()).unwrap_or("unknown").into(),
            );
            labels.insert("priority_seen".into(), t.policy_seen.1.to_string());
            let mut s = Stream::from_recorder(
                format!("thread{i}"),
                cfg.mode.metric(),
                cfg.mode.definition(),
                labels.clone(),
                &t.latency,
            );
            if cfg.raw_file.is_some() {
                s.raw_file = cfg.raw_file.clone();
                s.raw_dropped = Some(self.raw_dropped);
            }
            out.push(s);
            if let Some(a) = &t.anchor {
                let mut s = Stream::from_recorder(
                    format!("thread{i}.anchor"),
                    "anchor_error",
                    "callback time - anchor - period, signed, on ROS time (CLOCK_REALTIME): the anchor is roscpp's own now when the one-shot timer was re-armed (setPeriod), so this is the timer's error without the gap before the test's reference",
                    labels.clone(),
                    a,
                );
                s.stats.overruns = None;
                out.push(s);
                continue;
            }
            if let Some(e) = &t.expiry {
                let mut s = Stream::from_recorder(
                    format!("thread{i}.expiry"),
                    "expiry_error",
                    "current_expired - current_expected, signed, on the timer's clock: how late roscpp's timer thread queued the callback (the rest of the thread's timer_error is the callback queue's wait for the spinning thread)",
                    labels.clone(),
                    e,
                );
                s.stats.overruns = None;
                out.push(s);
            }
            let mut j = Stream::from_recorder(
                format!("thread{i}.jitter"),
                "cycle_jitter",
                "P_k = t_(k+1) - t_k - T between consecutive measured cycles (S2); d_k = t_k - k*T is the thread's main stream",
                labels,
                &t.jitter,
            );
            j.stats.overruns = None;
            j.stats.missed = None;
            out.push(j);
        }
        if self.threads.len() > 1 {
            let mut r = Running::default();
            let mut h = Histogram::new();
            let mut missed = 0;
            let mut overruns = 0;
            for t in &self.threads {
                r.merge(&t.latency.running);
                h.merge(&t.latency.histogram);
                missed += t.latency.missed;
                overruns += t.latency.overruns;
            }
            let mut stats = rtlab_core::Summary::from_parts(&r, &h);
            stats.missed = Some(missed);
            stats.overruns = Some(overruns);
            let mut labels = BTreeMap::new();
            labels.insert("threads".into(), self.threads.len().to_string());
            labels.insert("mode".into(), cfg.mode.name().into());
            // windows of the first thread stand for the set only if widths agree; merge maxima
            let mut windows = self.threads[0].latency.windows.to_data();
            for t in &self.threads[1..] {
                let w = t.latency.windows.to_data();
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
            out.push(Stream {
                name: "all".into(),
                metric: cfg.mode.metric().into(),
                definition: format!(
                    "{} (every thread together; max_index is the index within its thread)",
                    cfg.mode.definition()
                ),
                labels,
                deadline_ns: self.threads.iter().map(|t| t.config.deadline_ns).min().unwrap_or(0),
                stats,
                histogram: h.to_data(),
                windows,
                raw_file: None,
                raw_dropped: None,
                start_monotonic_ns: self
                    .threads
                    .iter()
                    .filter_map(|t| t.latency.origin_monotonic_ns)
                    .min(),
            });
        }
        out
    }
}
