//! Spike evidence: per-window kernel counters sampled off the hot path, and a
//! [`SpikeTracer`] that arms ftrace (sched_switch, sched_wakeup, irq and softirq events)
//! through tracefs and, each time a [`SpikeFlag`] is raised, marks the trace, re-arms the
//! flag, saves the trace around the spike and explains it ("preempted by pid 812 (rustc) for
//! 4.7 ms"; "no task ran on CPU 1 then: the vCPU was not running (host stall?)"), up to
//! [`MAX_SPIKES`] per run: on a guest whose host stalls it for milliseconds, the first spike
//! is often not the one under study.
//!
//! Contract: every tracefs change (mount, event enables, buffer size, tracing_on) goes
//! through a journaled [`Session`] and is undone when the tracer is dropped (or by
//! `rtlab tune restore` after a kill -9). The watcher thread only polls atomics and touches
//! tracefs files; the hot loop only raises the flag. Sources: Documentation/trace/ftrace.rst,
//! Documentation/trace/events.rst, Documentation/filesystems/proc.rst (softirqs, schedstat).

use crate::host::Host;
use crate::session::{Action, Session};
use rtlab_core::error::Missing;
use rtlab_core::sink::SpikeFlag;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

// ------------------------------------------------------------------ per-window counters

/// Kernel counters at one instant (per CPU where the kernel keeps them per CPU).
pub use rtlab_core::evidence::KernelCounters as Counters;
use rtlab_core::evidence::SampledCounters;

fn per_cpu_row(text: &str, label: &str) -> Vec<u64> {
    text.lines()
        .find(|l| l.trim_start().starts_with(label))
        .map(|l| {
            l.trim_start()[label.len()..].split_whitespace().map_while(|w| w.parse().ok()).collect()
        })
        .unwrap_or_default()
}

/// The ksoftirqd/N threads, by CPU (found once: they live as long as their CPU is online).
pub fn ksoftirqd_pids(host: &dyn Host) -> Vec<(usize, i32)> {
    let mut k: Vec<(usize, i32)> = crate::check::tasks(host)
        .into_iter()
        .filter_map(|(pid, c)| Some((c.strip_prefix("ksoftirqd/")?.parse().ok()?, pid)))
        .collect();
    k.sort();
    k
}

/// Read the counters under `root`.
pub fn read_counters(host: &dyn Host) -> Counters {
    read_counters_of(host, &ksoftirqd_pids(host))
}

/// Read the counters, with the ksoftirqd threads found once by [`ksoftirqd_pids`] (what the
/// sampler does at every period).
pub fn read_counters_of(host: &dyn Host, ksoftirqd: &[(usize, i32)]) -> Counters {
    let soft = host.read("/proc/softirqs").unwrap_or_default();
    let ints = host.read("/proc/interrupts").unwrap_or_default();
    let ncpu = ints.lines().next().map(|l| l.split_whitespace().count()).unwrap_or(0);
    let mut interrupts = vec![0u64; ncpu];
    for l in ints.lines().skip(1) {
        for (i, w) in l.split_whitespace().skip(1).take(ncpu).enumerate() {
            match w.parse::<u64>() {
                Ok(v) => interrupts[i] += v,
                Err(_) => break,
            }
        }
    }
    let stat = host.read("/proc/stat").unwrap_or_default();
    let context_switches = stat
        .lines()
        .find_map(|l| l.strip_prefix("ctxt "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let steal_ticks = stat
        .lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .map(|l| l.split_whitespace().nth(8).and_then(|v| v.parse().ok()).unwrap_or(0))
        .collect();
    let ksoftirqd_ns = ksoftirqd
        .iter()
        .map(|(_, pid)| {
            host.read(&format!("/proc/{pid}/schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse().ok())
                .unwrap_or(0)
        })
        .collect();
    Counters {
        net_rx: per_cpu_row(&soft, "NET_RX:"),
        timer: per_cpu_row(&soft, "TIMER:"),
        interrupts,
        ksoftirqd_ns,
        context_switches,
        steal_ticks,
    }
}

/// The shortest sampling period: reading the counters costs ~100 us of one CPU; at most
/// 100 times a second.
pub const MIN_SAMPLE_PERIOD_NS: i64 = 10_000_000;

/// The sampling period for probe windows of `window_ns`: an eighth of the window (so a
/// window's counters are off by at most 1/16 of a window at each end), never below
/// [`MIN_SAMPLE_PERIOD_NS`].
pub fn sample_period(window_ns: i64) -> i64 {
    (window_ns / 8).max(MIN_SAMPLE_PERIOD_NS)
}

/// Samples the counters once per period on its own thread (never a measuring one), with
/// CLOCK_MONOTONIC times, so they can be aligned with any stream's windows afterwards
/// ([`SampledCounters::align`]). The thread is not a measuring loop, but what it keeps does
/// not grow: at most `max_periods` entries in memory taken at the first one (merging
/// neighbours beyond).
/// Run the calling (helper) thread SCHED_OTHER and off `cpus` (the probe's), when another
/// CPU is online: on a kernel without full preemption, a read of /proc/interrupts on the
/// probe's CPU holds it for as long as the read takes, whatever the priorities.
fn stay_off(cpus: &[usize]) {
    let _ = rtlab_sys::sched::set_current_policy(rtlab_sys::sched::Policy::Other, 0);
    if cpus.is_empty() {
        return;
    }
    let (online, _) = rtlab_sys::cpus::online_cpus(std::path::Path::new("/"));
    let rest: Vec<usize> = online.into_iter().filter(|c| !cpus.contains(c)).collect();
    if !rest.is_empty() {
        let _ = rtlab_sys::sched::set_current_affinity(&rest);
    }
}

pub struct CounterSampler {
    handle: Option<std::thread::JoinHandle<SampledCounters>>,
    stop: Arc<AtomicBool>,
}

impl CounterSampler {
    pub fn start(period: Duration, max_periods: usize) -> CounterSampler {
        CounterSampler::start_off(period, max_periods, &[])
    }

    /// [`CounterSampler::start`], the sampling thread kept off `cpus` (the probe's).
    pub fn start_off(period: Duration, max_periods: usize, cpus: &[usize]) -> CounterSampler {
        let avoid = cpus.to_vec();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let period_ns = period.as_nanos() as i64;
        let handle = std::thread::Builder::new()
            .name("rtlab-counters".into())
            .spawn(move || {
                // never compete with the probe: a profile may have made the process FIFO
                stay_off(&avoid);
                let host = crate::host::RealHost::new();
                let pids = ksoftirqd_pids(&host);
                let mut prev = read_counters_of(&host, &pids);
                let t0 = rtlab_sys::clock::monotonic_ns();
                let mut out = SampledCounters::new(period_ns, t0);
                // the grid stays at the first period even when the list merges neighbours
                let mut k = 1i64;
                loop {
                    let due = t0 + k * period_ns;
                    let mut now = rtlab_sys::clock::monotonic_ns();
                    while now < due && !s.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_nanos((due - now).min(5_000_000) as u64));
                        now = rtlab_sys::clock::monotonic_ns();
                    }
                    let cut_short = now < due;
                    let c = read_counters_of(&host, &pids);
                    out.push(prev.delta(&c), max_periods);
                    prev = c;
                    k += 1;
                    if s.load(Ordering::Relaxed) {
                        out.finish(cut_short);
                        return out;
                    }
                }
            })
            .expect("spawn the counter sampler");
        CounterSampler { handle: Some(handle), stop }
    }

    /// Stop and return the counters per period (the last one cut short by the stop).
    pub fn stop(mut self) -> SampledCounters {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().and_then(|h| h.join().ok()).unwrap_or_default()
    }
}

impl Drop for CounterSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

// ------------------------------------------------------------------ the tracer

/// Where the tracer journals its tracefs changes by default (`rtlab tune restore` and
/// `show` look at `<journal>.trace` next to the profile journal).
pub const DEFAULT_TRACE_JOURNAL: &str = "/var/lib/rtlab/journal.trace";

/// The events armed.
pub const EVENTS: [&str; 6] = [
    "sched/sched_switch",
    "sched/sched_wakeup",
    "irq/irq_handler_entry",
    "irq/irq_handler_exit",
    "irq/softirq_entry",
    "irq/softirq_exit",
];

/// ftrace armed for spikes; dropping it disarms and restores tracefs.
pub struct SpikeTracer<'h> {
    session: Session<'h>,
    dir: PathBuf,
    /// What is missing on this kernel (e.g. no timerlat), for the report.
    pub notes: Vec<String>,
    /// CPUs the watcher keeps off (the probe's).
    pub avoid_cpus: Vec<usize>,
    /// Whether rtla timerlat can run here (found once, when armed).
    pub timerlat: crate::timerlat::Availability,
    /// /proc/stat on this host (the watcher reads steal time there).
    stat_path: PathBuf,
}

/// What the tracer found around one spike (one sample above the threshold).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SpikeCapture {
    /// Which stream crossed the threshold (the probe's hook source).
    #[serde(default)]
    pub source: u32,
    pub index: u64,
    pub at_ns: i64,
    pub value_ns: i64,
    /// Where the trace was saved.
    pub trace_file: Option<String>,
    /// The explanation, most important first.
    pub attribution: Vec<String>,
}

/// Why the spike tracer (or rtla timerlat beside it) could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The kernel, a privilege or a tool is missing (the run goes on without tracing).
    #[error(transparent)]
    Missing(#[from] Missing),
    /// A tracefs change could not be journaled or made.
    #[error(transparent)]
    Apply(#[from] crate::session::ApplyError),
    /// A value the tracer refuses (names the value and what is accepted).
    #[error("{0}")]
    Invalid(String),
    /// Something else, said in one line (a file, a process).
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    /// A tracefs instance of another rtla, or a process that ended at once.
    #[error("{0}")]
    Failed(String),
}

impl TraceError {
    /// What the machine lacks, if that is the cause.
    pub fn missing(&self) -> Option<&Missing> {
        match self {
            TraceError::Missing(m) => Some(m),
            TraceError::Apply(a) => a.missing(),
            _ => None,
        }
    }
}

impl<'h> SpikeTracer<'h> {
    /// Arm ftrace: mount tracefs if needed, enable the events, start tracing (all journaled
    /// at `journal`). Err names what is missing.
    /// The ring buffer keeps the kernel's default size (1408 KB per CPU once expanded): its
    /// unexpanded state cannot be written back, so rtlab does not touch it.
    pub fn arm(host: &'h dyn Host, journal: &Path) -> Result<SpikeTracer<'h>, TraceError> {
        let mut session = Session::begin(host, journal, "rtlab spike tracer")
            .map_err(|e| TraceError::Failed(e.to_string()))?;
        let dirs = crate::timerlat::TRACEFS_DIRS;
        let dir = match dirs.iter().find(|d| host.exists(&format!("{d}/trace"))) {
            Some(d) => d.to_string(),
            None if host.exists(dirs[0]) => {
                session
                    .apply(&Action::Mount { fstype: "tracefs".into(), target: dirs[0].into() })?;
                dirs[0].to_string()
            }
            None => {
                return Err(Missing::kernel(
                    &format!("tracefs ({})", dirs[0]),
                    "a kernel built with CONFIG_FTRACE",
                )
                .into())
            }
        };
        let mut notes = Vec::new();
        let timerlat = crate::timerlat::detect(host);
        match timerlat.missing() {
            Some(why) => notes.push(format!("{why}; the spike is explained from sched/irq/softirq events alone")),
            None => notes.push("timerlat and rtla are available: `rtla timerlat top` runs alongside and gives the kernel's own IRQ/thread latency split".into()),
        }
        let w = |session: &mut Session, p: String, v: &str| {
            session.apply(&Action::WriteFile { path: p, value: v.into() })
        };
        w(&mut session, format!("{dir}/tracing_on"), "0")?;
        for e in EVENTS {
            let p = format!("{dir}/events/{e}/enable");
            if !host.exists(&p) {
                notes.push(format!("event {e} is not in this kernel"));
                continue;
            }
            w(&mut session, p, "1")?;
        }
        // empty the buffer (opening `trace` with O_TRUNC clears it; its old content is not a setting)
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(host.path(&format!("{dir}/trace")))
            .map_err(|e| TraceError::Io { what: format!("clearing {dir}/trace"), source: e })?;
        w(&mut session, format!("{dir}/tracing_on"), "1")?;
        Ok(SpikeTracer {
            session,
            dir: host.path(&dir),
            notes,
            avoid_cpus: Vec::new(),
            timerlat,
            stat_path: host.path("/proc/stat"),
        })
    }

    /// Journal and make one more change in the tracer's session (undone with the rest),
    /// e.g. [`crate::timerlat::leftover_cleanup_action`] before starting rtla.
    pub fn journal(&mut self, a: &Action) -> Result<String, crate::session::ApplyError> {
        self.session.apply(a)
    }

    /// The real tracefs directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Start the watcher for the first spike only: [`SpikeTracer::watch_spikes`] with a bound
    /// of one (tracing stops after it). Returns None if stopped without a spike.
    pub fn watch(
        &self,
        flag: Arc<SpikeFlag>,
        stop: Arc<AtomicBool>,
        victim: String,
        after: Duration,
        save_to: Option<PathBuf>,
    ) -> std::thread::JoinHandle<Option<SpikeCapture>> {
        let w = self.watcher(flag, stop, victim, after, save_to, 1);
        std::thread::Builder::new()
            .name("rtlab-spikewatch".into())
            .spawn(move || w.run().into_iter().next())
            .expect("spawn the spike watcher")
    }

    /// Start the watcher: each time `flag` rises it writes trace_marker, waits `after`,
    /// re-arms the flag (so the next sample above the threshold raises it again), reads the
    /// trace (tracing goes on), saves the part around the spike (the first to `save_to`, the
    /// n-th to `save_to` with `-n` before its extension) and explains the spike from the
    /// wake-ups of the threads whose comm starts with `victim` that ran since the flag was
    /// last re-armed (one not explained for an earlier spike). After `max_spikes` spikes
    /// tracing stops and the flag stays raised. Returns the spikes explained, in order (empty
    /// if stopped without a spike).
    pub fn watch_spikes(
        &self,
        flag: Arc<SpikeFlag>,
        stop: Arc<AtomicBool>,
        victim: String,
        after: Duration,
        save_to: Option<PathBuf>,
        max_spikes: usize,
    ) -> std::thread::JoinHandle<Vec<SpikeCapture>> {
        let w = self.watcher(flag, stop, victim, after, save_to, max_spikes);
        std::thread::Builder::new()
            .name("rtlab-spikewatch".into())
            .spawn(move || w.run())
            .expect("spawn the spike watcher")
    }

    fn watcher(
        &self,
        flag: Arc<SpikeFlag>,
        stop: Arc<AtomicBool>,
        victim: String,
        after: Duration,
        save_to: Option<PathBuf>,
        max_spikes: usize,
    ) -> Watcher {
        Watcher {
            dir: self.dir.clone(),
            proc_stat: self.stat_path.clone(),
            avoid: self.avoid_cpus.clone(),
            flag,
            stop,
            victim,
            after,
            save_to,
            max_spikes: max_spikes.max(1),
        }
    }

    /// Disarm and put tracefs back (also done on drop).
    pub fn disarm(mut self) -> crate::journal::RestoreReport {
        self.session.restore()
    }
}

/// How many spikes a run's tracer explains at most: each costs a read of the whole trace
/// buffer (a few MB of text), and the first few say what disturbs the probe.
pub const MAX_SPIKES: usize = 8;

/// How much of the trace before a spike's window is saved with it (the tasks and priorities
/// on the CPU before the wake-up).
const SAVED_CONTEXT_NS: u64 = 100_000_000;

/// The spike watcher's state (it runs on its own thread, off the probe's CPUs).
struct Watcher {
    dir: PathBuf,
    proc_stat: PathBuf,
    avoid: Vec<usize>,
    flag: Arc<SpikeFlag>,
    stop: Arc<AtomicBool>,
    victim: String,
    after: Duration,
    save_to: Option<PathBuf>,
    max_spikes: usize,
}

/// Where the `n`-th spike's trace goes (1-based): `save_to` itself for the first,
/// `name-n.ext` for the others.
pub fn nth_trace_file(save_to: &Path, n: usize) -> PathBuf {
    if n <= 1 {
        return save_to.to_path_buf();
    }
    let stem = save_to.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match save_to.extension() {
        Some(e) => format!("{stem}-{n}.{}", e.to_string_lossy()),
        None => format!("{stem}-{n}"),
    };
    save_to.with_file_name(name)
}

/// Steal ticks per CPU (/proc/stat), empty when unreadable.
fn steal_ticks(proc_stat: &Path) -> Vec<u64> {
    std::fs::read_to_string(proc_stat)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .map(|l| l.split_whitespace().nth(8).and_then(|v| v.parse().ok()).unwrap_or(0))
        .collect()
}

/// The trace's header lines and its event lines from `from_ns` on (lines that are not events,
/// such as lost-event notes, are kept).
fn trace_from(text: &str, from_ns: u64) -> String {
    let mut out = String::with_capacity(text.len().min(1 << 20));
    for l in text.lines() {
        let keep = match parse_trace(l).first() {
            Some(e) => e.ts_ns >= from_ns,
            None => true,
        };
        if keep {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// The trace timestamp of the first `tracing_mark_write` whose text starts with `prefix`.
fn mark_ts(events: &[Event], prefix: &str) -> Option<u64> {
    events
        .iter()
        .find(|e| e.name == "tracing_mark_write" && e.fields.starts_with(prefix))
        .map(|e| e.ts_ns)
}

/// What the reader carries from one spike to the next.
#[derive(Default)]
struct Explained {
    /// The wake-ups explained so far (a later spike does not explain them again).
    wakeups: Vec<Wakeup>,
    /// Trace time of the last re-arm seen: the next spike's wake-up ran after it, less its value.
    armed_ts: u64,
    /// Steal ticks per CPU at the previous read (or when watching started).
    steal: Vec<u64>,
}

/// A spike marked in the trace, waiting to be explained.
struct Marked {
    n: usize,
    source: u32,
    index: u64,
    at_ns: i64,
    value_ns: i64,
}

impl Watcher {
    /// Mark each spike at once and hand it to a reader thread: reading the whole trace takes
    /// up to a second on a loaded guest, and a spike that rises meanwhile must still be marked
    /// when it happens (its mark bounds the wake-ups that can explain it).
    fn run(self) -> Vec<SpikeCapture> {
        // never compete with the probe: a profile may have made the process FIFO
        stay_off(&self.avoid);
        let (tx, rx) = std::sync::mpsc::channel::<Marked>();
        std::thread::scope(|scope| {
            let reader = std::thread::Builder::new()
                .name("rtlab-spikeread".into())
                .spawn_scoped(scope, || {
                    stay_off(&self.avoid);
                    self.read(rx)
                })
                .expect("spawn the spike reader");
            let mut n = 0;
            loop {
                if let Some((index, at_ns, value_ns)) = self.flag.get() {
                    let source = self.flag.source.load(Ordering::Acquire);
                    n += 1;
                    let last = n >= self.max_spikes;
                    let _ = std::fs::write(
                        self.dir.join("trace_marker"),
                        format!("rtlab spike {n}: sample {index} late by {value_ns} ns"),
                    );
                    std::thread::sleep(self.after);
                    if last {
                        let _ = std::fs::write(self.dir.join("tracing_on"), "0");
                    } else {
                        // re-arm: a sample from now on raises the flag again (the tail of
                        // this spike, within `after`, does not)
                        use std::sync::atomic::Ordering::Release;
                        self.flag.hit.store(false, Release);
                        self.flag.claimed.store(false, Release);
                        let _ = std::fs::write(
                            self.dir.join("trace_marker"),
                            format!("rtlab spike {n}: re-armed"),
                        );
                    }
                    let _ = tx.send(Marked { n, source, index, at_ns, value_ns });
                    if last {
                        break;
                    }
                    continue;
                }
                if self.stop.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            drop(tx);
            reader.join().unwrap_or_default()
        })
    }

    /// Explain the marked spikes in order: one read of the trace (tracing goes on) for all
    /// those waiting.
    fn read(&self, rx: std::sync::mpsc::Receiver<Marked>) -> Vec<SpikeCapture> {
        let mut state = Explained { steal: steal_ticks(&self.proc_stat), ..Default::default() };
        let mut captures = Vec::new();
        while let Ok(first) = rx.recv() {
            let batch: Vec<Marked> = std::iter::once(first).chain(rx.try_iter()).collect();
            let text = std::fs::read_to_string(self.dir.join("trace")).unwrap_or_default();
            let events = parse_trace(&text);
            let steal = steal_ticks(&self.proc_stat);
            for m in batch {
                let (trace_file, attribution) =
                    self.explain(&m, &text, &events, &steal, &mut state);
                captures.push(SpikeCapture {
                    source: m.source,
                    index: m.index,
                    at_ns: m.at_ns,
                    value_ns: m.value_ns,
                    trace_file,
                    attribution,
                });
            }
            state.steal = steal;
        }
        captures
    }

    /// Explain one marked spike from the trace read, save the trace around it: (where it was
    /// saved, the explanation).
    fn explain(
        &self,
        m: &Marked,
        text: &str,
        events: &[Event],
        steal: &[u64],
        state: &mut Explained,
    ) -> (Option<String>, Vec<String>) {
        let n = m.n;
        if n > 1 {
            if let Some(t) = mark_ts(events, &format!("rtlab spike {}: re-armed", n - 1)) {
                state.armed_ts = t;
            }
        }
        let marked = mark_ts(events, &format!("rtlab spike {n}: sample "));
        // a wake-up that made this sample late ran after the flag could be raised again,
        // less the sample's value (it was woken that long before), and before the mark
        let from = state.armed_ts.saturating_sub(m.value_ns.max(0) as u64 + 1_000_000);
        let until = marked.map(|t| t + 100_000).unwrap_or(u64::MAX);
        let (mut attribution, wake) =
            attribute_spike(events, &self.victim, m.value_ns, (from, until), &state.wakeups);
        if let Some(w) = wake {
            let grew =
                steal.get(w.cpu).zip(state.steal.get(w.cpu)).map(|(a, b)| a.saturating_sub(*b));
            if let Some(d) = grew.filter(|d| *d > 0) {
                let since = if n == 1 { "tracing started" } else { "the previous spike" };
                attribution.push(format!(
                    "steal time on CPU {} since {since}: {d} ticks of 10 ms (/proc/stat): {}",
                    w.cpu, "the hypervisor ran something else"
                ));
            }
            state.wakeups.push(w);
        }
        let mut saved = None;
        if let Some(p) = &self.save_to {
            let p = nth_trace_file(p, n);
            // the first spike keeps the whole buffer; a later one the part around it
            let ok = if n == 1 {
                std::fs::write(&p, text)
            } else {
                std::fs::write(&p, trace_from(text, from.saturating_sub(SAVED_CONTEXT_NS)))
            };
            saved = ok.is_ok().then(|| p.display().to_string());
        }
        (saved, attribution)
    }
}

// ------------------------------------------------------------------ parsing and attribution

/// One ftrace event line.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub comm: String,
    pub pid: i32,
    pub cpu: usize,
    pub ts_ns: u64,
    pub name: String,
    pub fields: String,
}

/// Parse the `trace` file (the default format: `comm-pid [cpu] flags ts: event: fields`).
pub fn parse_trace(text: &str) -> Vec<Event> {
    let mut out = Vec::new();
    for l in text.lines() {
        if l.starts_with('#') {
            continue;
        }
        let Some(open) = find_cpu_bracket(l) else { continue };
        let task = l[..open].trim();
        let Some(dash) = task.rfind('-') else { continue };
        let (comm, pid) = (&task[..dash], task[dash + 1..].parse::<i32>().unwrap_or(-1));
        let close = open + l[open..].find(']').unwrap_or(0);
        let cpu = l[open + 1..close].trim().parse().unwrap_or(0);
        let mut rest = l[close + 1..].split_whitespace();
        // flags (optional in some formats) then the timestamp "123.456789:"
        let mut ts = None;
        let mut name = String::new();
        for w in rest.by_ref() {
            if ts.is_none() {
                if let Some(t) = w.strip_suffix(':').and_then(parse_ts) {
                    ts = Some(t);
                }
                continue;
            }
            name = w.trim_end_matches(':').to_string();
            break;
        }
        let Some(ts_ns) = ts else { continue };
        let fields = rest.collect::<Vec<_>>().join(" ");
        out.push(Event { comm: comm.to_string(), pid, cpu, ts_ns, name, fields });
    }
    out
}

fn find_cpu_bracket(l: &str) -> Option<usize> {
    let b = l.as_bytes();
    (0..b.len()).find(|&i| {
        b[i] == b'['
            && i + 4 < b.len()
            && b[i + 1..i + 4].iter().all(u8::is_ascii_digit)
            && b[i + 4] == b']'
    })
}

fn parse_ts(s: &str) -> Option<u64> {
    let (a, b) = s.split_once('.')?;
    let secs: u64 = a.parse().ok()?;
    let frac = format!("{b:0<9}");
    Some(secs * 1_000_000_000 + frac[..9].parse::<u64>().ok()?)
}

fn field<'a>(fields: &'a str, key: &str) -> Option<&'a str> {
    fields.split_whitespace().find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

fn ms(ns: u64) -> String {
    if ns < 1_000_000 {
        format!("{} us", ns / 1_000)
    } else {
        format!("{:.1} ms", ns as f64 / 1e6)
    }
}

/// Whether `comm` is one of the probe's threads: `victim` is a comm prefix, or several
/// separated by `|` (`rtlab-pong|rtlab-sub`: a round trip's receivers and echoes).
fn is_victim(comm: &str, victim: &str) -> bool {
    victim.split('|').any(|v| !v.is_empty() && comm.starts_with(v))
}

/// One wake-up of a probe thread in a trace: when it was woken and when it ran (trace clock,
/// ns), on which CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wakeup {
    pub woken_ns: u64,
    pub ran_ns: u64,
    pub cpu: usize,
    pub pid: i32,
    pub comm: String,
}

impl Wakeup {
    /// How long the thread waited for its CPU.
    pub fn gap_ns(&self) -> u64 {
        self.ran_ns.saturating_sub(self.woken_ns)
    }
}

/// Every wake-up of the threads whose comm starts with `victim`, paired with the moment the
/// thread ran (its switch-in, or its first event when the trace lacks that switch), in the
/// order they ran.
pub fn wakeups(events: &[Event], victim: &str) -> Vec<Wakeup> {
    let mut woken: BTreeMap<i32, (u64, usize)> = BTreeMap::new();
    let mut out = Vec::new();
    for e in events {
        match e.name.as_str() {
            "sched_wakeup" if field(&e.fields, "comm").is_some_and(|c| is_victim(c, victim)) => {
                let pid = field(&e.fields, "pid").and_then(|p| p.parse().ok()).unwrap_or(-1);
                let cpu =
                    field(&e.fields, "target_cpu").and_then(|c| c.parse().ok()).unwrap_or(e.cpu);
                woken.insert(pid, (e.ts_ns, cpu));
            }
            // the woken thread ran: its switch-in, or (when the trace lacks that switch, as
            // seen after an idle wake-up here) the first event in its own context
            name if (name == "sched_switch"
                && field(&e.fields, "next_comm").is_some_and(|c| is_victim(c, victim)))
                || (name != "sched_wakeup" && woken.contains_key(&e.pid)) =>
            {
                let switched_in = name == "sched_switch"
                    && field(&e.fields, "next_comm").is_some_and(|c| is_victim(c, victim));
                let (pid, comm) = if switched_in {
                    (
                        field(&e.fields, "next_pid").and_then(|p| p.parse().ok()).unwrap_or(-1),
                        field(&e.fields, "next_comm").unwrap_or("").to_string(),
                    )
                } else {
                    (e.pid, e.comm.clone())
                };
                if let Some((w, _)) = woken.remove(&pid) {
                    out.push(Wakeup { woken_ns: w, ran_ns: e.ts_ns, cpu: e.cpu, pid, comm });
                }
            }
            _ => {}
        }
    }
    out
}

/// "No wake-up of the victims `whence`" and why that can be.
fn no_wakeup(victim: &str, whence: &str) -> Vec<String> {
    let names = victim.split('|').map(|v| format!("{v}*")).collect::<Vec<_>>().join("', '");
    let why = "the buffer may have wrapped, or the spike happened before the trace started";
    vec![format!("no wake-up of '{names}' threads {whence} ({why})")]
}

/// The wake-up that waited longest (the first of equals).
fn worst(w: impl Iterator<Item = Wakeup>) -> Option<Wakeup> {
    w.max_by_key(|w| (w.gap_ns(), std::cmp::Reverse(w.ran_ns)))
}

/// Explain the worst wake-up of the threads whose comm starts with `victim`: who ran on its
/// CPU between its wake-up and the moment it ran, which softirqs and IRQs ran there.
pub fn attribute(events: &[Event], victim: &str, spike_ns: i64) -> Vec<String> {
    match worst(wakeups(events, victim).into_iter()) {
        Some(w) => explain(events, &w, victim, spike_ns),
        None => no_wakeup(victim, "in the trace"),
    }
}

/// Explain one spike of a run that may have several: the worst wake-up (or, when no wait
/// makes up half of the spike, the last wake-up) of the `victim` threads that ran within `ran` (trace clock, ns: from the moment the flag could be raised
/// again, less the spike's value, to the spike's trace marker) and is not one of `explained`
/// (earlier spikes' wake-ups). Returns the explanation and the wake-up it is about (None:
/// no such wake-up, the explanation says so).
pub fn attribute_spike(
    events: &[Event],
    victim: &str,
    spike_ns: i64,
    ran: (u64, u64),
    explained: &[Wakeup],
) -> (Vec<String>, Option<Wakeup>) {
    let candidates: Vec<Wakeup> = wakeups(events, victim)
        .into_iter()
        .filter(|w| w.ran_ns >= ran.0 && w.ran_ns <= ran.1)
        .filter(|w| !explained.iter().any(|x| x.pid == w.pid && x.woken_ns == w.woken_ns))
        .collect();
    // the wake-up that waited longest, when that wait is most of the spike; otherwise the
    // lateness came before a wake-up (a late timer interrupt, a host stall): the last one
    // before the mark is the sample's own
    let worst = match worst(candidates.iter().cloned()) {
        Some(w) if w.gap_ns().saturating_mul(2) >= spike_ns.max(0) as u64 => Some(w),
        _ => candidates.last().cloned(),
    };
    match worst {
        Some(w) => (explain(events, &w, victim, spike_ns), Some(w)),
        None => {
            let whence = "before this spike's mark in the trace, other than earlier spikes' ones";
            (no_wakeup(victim, whence), None)
        }
    }
}

/// Explain one wake-up of a probe thread that came `spike_ns` late.
pub fn explain(events: &[Event], wake: &Wakeup, victim: &str, spike_ns: i64) -> Vec<String> {
    let (w, r, cpu, pid, comm) = (wake.woken_ns, wake.ran_ns, wake.cpu, wake.pid, &wake.comm);
    let gap = r - w;
    let mut lines = vec![format!(
        "{comm} (pid {pid}) on CPU {cpu}: woken at {:.6} s, ran {} later",
        w as f64 / 1e9,
        ms(gap)
    )];
    // who held the CPU: the task running at the wake-up, then every switch until the victim ran
    let on_cpu: Vec<&Event> = events.iter().filter(|e| e.cpu == cpu).collect();
    // kernel priorities seen for each pid
    let mut prios: BTreeMap<i32, String> = BTreeMap::new();
    for e in events.iter().filter(|e| e.name == "sched_switch") {
        for (pk, rk) in [("prev_pid", "prev_prio"), ("next_pid", "next_prio")] {
            if let (Some(p), Some(r)) =
                (field(&e.fields, pk).and_then(|p| p.parse::<i32>().ok()), field(&e.fields, rk))
            {
                prios.insert(p, r.to_string());
            }
        }
    }
    // the task on the CPU at the wake-up: the context of the last event there (an IRQ runs
    // in the interrupted task's context), or the task a switch put there; a switch-in can be
    // missing from the trace (a new task's first run), an event's context cannot
    let mut running: Option<(String, i32, String, u64)> = None; // comm, pid, prio, since
    for e in on_cpu.iter().filter(|e| e.ts_ns <= w) {
        running = Some(if e.name == "sched_switch" {
            (
                field(&e.fields, "next_comm").unwrap_or("?").into(),
                field(&e.fields, "next_pid").and_then(|p| p.parse().ok()).unwrap_or(-1),
                field(&e.fields, "next_prio").unwrap_or("?").into(),
                e.ts_ns,
            )
        } else {
            (
                e.comm.clone(),
                e.pid,
                prios.get(&e.pid).cloned().unwrap_or_else(|| "?".into()),
                e.ts_ns,
            )
        });
    }
    let mut held: BTreeMap<(i32, String, String), u64> = BTreeMap::new();
    let mut cursor = w;
    for e in on_cpu.iter().filter(|e| e.ts_ns > w && e.ts_ns <= r) {
        let switched = e.name == "sched_switch";
        // an event in another task's context means a switch the trace did not show
        let unseen = !switched && running.as_ref().is_some_and(|x| x.1 != e.pid);
        if !switched && !unseen {
            continue;
        }
        if let Some((c, p, pr, _)) = &running {
            *held.entry((*p, c.clone(), pr.clone())).or_default() += e.ts_ns - cursor;
        }
        cursor = e.ts_ns;
        running = Some(if switched {
            (
                field(&e.fields, "next_comm").unwrap_or("?").into(),
                field(&e.fields, "next_pid").and_then(|p| p.parse().ok()).unwrap_or(-1),
                field(&e.fields, "next_prio").unwrap_or("?").into(),
                e.ts_ns,
            )
        } else {
            (
                e.comm.clone(),
                e.pid,
                prios.get(&e.pid).cloned().unwrap_or_else(|| "?".into()),
                e.ts_ns,
            )
        });
    }
    // a thread's comm at its first switch can be its parent's (renamed just after): use the
    // last name the trace shows for each pid
    let mut names: BTreeMap<i32, String> = BTreeMap::new();
    for e in events {
        names.insert(e.pid, e.comm.clone());
        if e.name == "sched_switch" {
            if let (Some(p), Some(c)) = (
                field(&e.fields, "prev_pid").and_then(|p| p.parse().ok()),
                field(&e.fields, "prev_comm"),
            ) {
                names.insert(p, c.to_string());
            }
        }
    }
    // one line per pid (an exec changes the comm of the same pid)
    let mut merged: BTreeMap<i32, ((i32, String, String), u64)> = BTreeMap::new();
    for ((p, c, pr), ns) in held {
        let e = merged.entry(p).or_insert(((p, names.get(&p).cloned().unwrap_or(c), pr), 0));
        e.1 += ns;
    }
    let mut held: Vec<_> =
        merged.into_values().filter(|((p, c, _), _)| *p != pid && !is_victim(c, victim)).collect();
    held.sort_by_key(|b| std::cmp::Reverse(b.1));
    for ((p, c, prio), ns) in held.iter().take(3) {
        let what = if *p == 0 {
            "the idle task held the CPU (a wake-up to a sleeping CPU: C-state exit or a host delay)"
                .to_string()
        } else {
            format!("preempted by pid {p} ({c}, kernel prio {prio}) for {}", ms(*ns))
        };
        lines.push(what);
    }
    // softirqs and IRQs on that CPU in the window
    let mut soft: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut hard: BTreeMap<String, u64> = BTreeMap::new();
    let mut open_soft: Option<(String, String, u64)> = None;
    let mut open_irq: Option<(String, u64)> = None;
    for e in on_cpu.iter().filter(|e| e.ts_ns >= w.saturating_sub(1_000_000) && e.ts_ns <= r) {
        match e.name.as_str() {
            "softirq_entry" => {
                let action = e
                    .fields
                    .split("action=")
                    .nth(1)
                    .unwrap_or("?")
                    .trim_end_matches(']')
                    .to_string();
                open_soft = Some((action, e.comm.clone(), e.ts_ns));
            }
            "softirq_exit" => {
                if let Some((a, c, t)) = open_soft.take() {
                    *soft.entry((a, c)).or_default() +=
                        e.ts_ns - t.max(w.saturating_sub(1_000_000));
                }
            }
            "irq_handler_entry" => {
                open_irq = Some((
                    format!(
                        "IRQ {} ({})",
                        field(&e.fields, "irq").unwrap_or("?"),
                        field(&e.fields, "name").unwrap_or("?")
                    ),
                    e.ts_ns,
                ))
            }
            "irq_handler_exit" => {
                if let Some((n, t)) = open_irq.take() {
                    *hard.entry(n).or_default() += e.ts_ns - t;
                }
            }
            _ => {}
        }
    }
    let mut soft: Vec<_> = soft.into_iter().collect();
    soft.sort_by_key(|b| std::cmp::Reverse(b.1));
    for ((action, ctx), ns) in soft.iter().take(3).filter(|(_, ns)| *ns >= 10_000) {
        lines.push(format!("{action} ran in {ctx} for {} before the spike", ms(*ns)));
    }
    let mut hard: Vec<_> = hard.into_iter().collect();
    hard.sort_by_key(|b| std::cmp::Reverse(b.1));
    for (n, ns) in hard.iter().take(2).filter(|(_, ns)| *ns >= 10_000) {
        lines.push(format!("{n} handled for {}", ms(*ns)));
    }
    let gap_i = gap as i64;
    if spike_ns > gap_i + 1_000_000 {
        let before = (spike_ns - gap_i) as u64;
        lines.push(match quiet_before(events, cpu, w, before) {
            Some(None) => format!(
                "of the {} lateness, {} passed before the wake-up itself, and no task ran on CPU {cpu} then (the trace shows the CPU idle and nothing there, not even an interrupt): the vCPU was not running (host stall?)",
                ms(spike_ns as u64),
                ms(before)
            ),
            Some(Some((c, p))) => format!(
                "of the {} lateness, {} passed before the wake-up itself, and nothing happened on CPU {cpu} then (no event, not even an interrupt, while {c} (pid {p}) was on it): interrupts were off, or the vCPU was not running (host stall?)",
                ms(spike_ns as u64),
                ms(before)
            ),
            None => format!(
                "of the {} lateness, {} passed before the wake-up itself: the timer interrupt came late (interrupts off, or the hypervisor held the CPU: see steal time)",
                ms(spike_ns as u64),
                ms(before)
            ),
        });
    }
    lines
}

/// Whether the trace shows nothing at all on `cpu` in the `len_ns` before `until`: no event,
/// not even an interrupt (a CPU that runs emits a timer tick or an IRQ within milliseconds).
/// Some(None): the CPU was idle; Some(Some((comm, pid))): that task was on it. None: something
/// ran there, or the trace does not reach back that far.
fn quiet_before(
    events: &[Event],
    cpu: usize,
    until: u64,
    len_ns: u64,
) -> Option<Option<(String, i32)>> {
    let from = until.checked_sub(len_ns)?;
    let on_cpu = || events.iter().filter(|e| e.cpu == cpu);
    // the trace must show this CPU before the quiet time, or it says nothing about it
    let last_before = on_cpu().rfind(|e| e.ts_ns <= from)?;
    if on_cpu().any(|e| e.ts_ns > from && e.ts_ns < until) {
        return None;
    }
    let (comm, pid) = if last_before.name == "sched_switch" {
        (
            field(&last_before.fields, "next_comm").unwrap_or("?").to_string(),
            field(&last_before.fields, "next_pid").and_then(|p| p.parse().ok()).unwrap_or(-1),
        )
    } else {
        (last_before.comm.clone(), last_before.pid)
    };
    Some((pid != 0).then_some((comm, pid)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "# tracer: nop
#
          <idle>-0       [001] d..2.   100.000000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=rustc next_pid=812 next_prio=120
           rustc-812     [001] d.h1.   100.001000: irq_handler_entry: irq=38 name=virtio2-input.0
           rustc-812     [001] d.h1.   100.001100: irq_handler_exit: irq=38 ret=handled
           rustc-812     [001] d.h2.   100.002000: sched_wakeup: comm=rtlab-timer0 pid=900 prio=19 target_cpu=001
           rustc-812     [001] d..2.   100.006700: sched_switch: prev_comm=rustc prev_pid=812 prev_prio=120 prev_state=R ==> next_comm=ksoftirqd/1 next_pid=22 next_prio=120
     ksoftirqd/1-22      [001] ..s1.   100.006710: softirq_entry: vec=3 [action=NET_RX]
     ksoftirqd/1-22      [001] ..s1.   100.009910: softirq_exit: vec=3 [action=NET_RX]
     ksoftirqd/1-22      [001] d..2.   100.010000: sched_switch: prev_comm=ksoftirqd/1 prev_pid=22 prev_prio=120 prev_state=S ==> next_comm=rtlab-timer0 next_pid=900 next_prio=19
    rtlab-timer0-900     [001] d..2.   100.010050: sched_switch: prev_comm=rtlab-timer0 prev_pid=900 prev_prio=19 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
    rtlab-timer0-900     [000] .....   100.011000: tracing_mark_write: rtlab spike 1: sample 5 late by 8100000 ns
";

    #[test]
    fn a_trace_is_parsed() {
        let ev = parse_trace(TRACE);
        assert_eq!(ev.len(), 10);
        assert_eq!(
            (ev[0].comm.as_str(), ev[0].pid, ev[0].cpu, ev[0].ts_ns),
            ("<idle>", 0, 1, 100_000_000_000)
        );
        assert_eq!(ev[5].comm, "ksoftirqd/1");
        assert_eq!(ev[5].name, "softirq_entry");
        assert_eq!(ev[9].name, "tracing_mark_write");
    }

    #[test]
    fn the_attribution_names_the_preemptor_and_the_softirq() {
        let a = attribute(&parse_trace(TRACE), "rtlab-timer", 8_100_000);
        assert!(
            a[0].contains("rtlab-timer0 (pid 900) on CPU 1") && a[0].contains("ran 8.0 ms later"),
            "{a:?}"
        );
        assert!(
            a.iter().any(|l| l == "preempted by pid 812 (rustc, kernel prio 120) for 4.7 ms"),
            "{a:?}"
        );
        assert!(
            a.iter().any(|l| l == "NET_RX ran in ksoftirqd/1 for 3.2 ms before the spike"),
            "{a:?}"
        );
        // events from 1 ms before the wake-up count (they can delay the wake-up itself)
        assert!(a.iter().any(|l| l == "IRQ 38 (virtio2-input.0) handled for 100 us"), "{a:?}");
        assert!(
            !a.iter().any(|l| l.contains("lateness")),
            "the whole lateness is after the wake-up: {a:?}"
        );
    }

    #[test]
    fn a_new_task_whose_switch_in_is_not_in_the_trace_is_still_named() {
        // the hog's first run shows no sched_switch: only events in its context
        let t = "          <idle>-0       [001] dNh4.   200.000000: sched_wakeup: comm=rtlab-timer0 pid=900 prio=19 target_cpu=001
       rtlab-hog-950     [001] ..s..   200.001000: softirq_entry: vec=9 [action=RCU]
       rtlab-hog-950     [001] ..s..   200.001005: softirq_exit: vec=9 [action=RCU]
       rtlab-hog-950     [001] d..2.   200.020000: sched_switch: prev_comm=rtlab-hog prev_pid=950 prev_prio=9 prev_state=X ==> next_comm=rtlab-timer0 next_pid=900 next_prio=19
";
        let a = attribute(&parse_trace(t), "rtlab-timer", 20_000_000);
        assert!(
            a.iter().any(|l| l == "preempted by pid 950 (rtlab-hog, kernel prio 9) for 19.0 ms"),
            "{a:?}"
        );
    }

    #[test]
    fn a_missing_switch_in_is_taken_from_the_victims_next_event() {
        // seen here: after an idle wake-up the trace has no sched_switch into the victim
        let t = "          <idle>-0       [001] dNh4.   300.000000: sched_wakeup: comm=rtlab-timer0 pid=900 prio=19 target_cpu=001
    rtlab-timer0-900     [001] d..2.   300.000015: sched_switch: prev_comm=rtlab-timer0 prev_pid=900 prev_prio=19 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
";
        let a = attribute(&parse_trace(t), "rtlab-timer", 20_000);
        assert!(
            a[0].starts_with("rtlab-timer0 (pid 900) on CPU 1") && a[0].contains("ran 15 us later"),
            "{a:?}"
        );
    }

    #[test]
    fn several_thread_names_can_be_explained() {
        let a = attribute(&parse_trace(TRACE), "rtlab-pong|rtlab-timer", 8_100_000);
        assert!(a[0].starts_with("rtlab-timer0 (pid 900)"), "{a:?}");
        assert!(
            is_victim("rtlab-sub3", "rtlab-pong|rtlab-sub")
                && !is_victim("rtlab-spikewatch", "rtlab-pong|rtlab-sub")
                && !is_victim("x", "")
        );
    }

    /// A host stall (CPU 1 idle, nothing at all there for 9.4 ms, then the timer thread's
    /// wake-up), spike 1 marked, the flag re-armed, then a FIFO hog holding the woken thread
    /// for 19 ms, spike 2 marked.
    const TWO_SPIKES: &str = "          <idle>-0       [001] d..2.   400.000000: sched_switch: prev_comm=rtlab-timer0 prev_pid=900 prev_prio=19 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          <idle>-0       [001] dNh4.   400.009400: sched_wakeup: comm=rtlab-timer0 pid=900 prio=19 target_cpu=001
          <idle>-0       [001] d..2.   400.009410: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=rtlab-timer0 next_pid=900 next_prio=19
 rtlab-spikewatc-990     [000] .....   400.010000: tracing_mark_write: rtlab spike 1: sample 9 late by 9410000 ns
    rtlab-timer0-900     [001] d..2.   400.010010: sched_switch: prev_comm=rtlab-timer0 prev_pid=900 prev_prio=19 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
 rtlab-spikewatc-990     [000] .....   400.015000: tracing_mark_write: rtlab spike 1: re-armed
          <idle>-0       [001] d..2.   400.100000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=rtlab-hog next_pid=950 next_prio=9
       rtlab-hog-950     [001] dNh4.   400.101000: sched_wakeup: comm=rtlab-timer0 pid=900 prio=19 target_cpu=001
       rtlab-hog-950     [001] d..2.   400.120000: sched_switch: prev_comm=rtlab-hog prev_pid=950 prev_prio=9 prev_state=X ==> next_comm=rtlab-timer0 next_pid=900 next_prio=19
 rtlab-spikewatc-990     [000] .....   400.121000: tracing_mark_write: rtlab spike 2: sample 120 late by 19000000 ns
";

    #[test]
    fn a_host_stall_on_an_idle_cpu_is_said_to_be_one() {
        let ev = parse_trace(TWO_SPIKES);
        let (a, w) = attribute_spike(&ev, "rtlab-timer", 9_410_000, (0, 400_010_100_000), &[]);
        assert_eq!(w.unwrap().woken_ns, 400_009_400_000, "{a:?}");
        assert!(
            a.iter().any(|l| l.contains(
                "9.4 ms passed before the wake-up itself, and no task ran on CPU 1 then"
            ) && l.ends_with("the vCPU was not running (host stall?)")),
            "{a:?}"
        );
    }

    #[test]
    fn each_spike_explains_its_own_wake_up() {
        let ev = parse_trace(TWO_SPIKES);
        let m1 = mark_ts(&ev, "rtlab spike 1: sample ").unwrap();
        let (_, first) = attribute_spike(&ev, "rtlab-timer", 9_410_000, (0, m1), &[]);
        let first = first.unwrap();
        // spike 2: wake-ups that ran since the re-arm, less its value; the hog is named
        let armed = mark_ts(&ev, "rtlab spike 1: re-armed").unwrap();
        let m2 = mark_ts(&ev, "rtlab spike 2: sample ").unwrap();
        let from = armed - 19_000_000 - 1_000_000;
        let (a, w) = attribute_spike(
            &ev,
            "rtlab-timer",
            19_000_000,
            (from, m2),
            std::slice::from_ref(&first),
        );
        assert_eq!(w.unwrap().woken_ns, 400_101_000_000);
        assert!(
            a.iter().any(|l| l == "preempted by pid 950 (rtlab-hog, kernel prio 9) for 19.0 ms"),
            "{a:?}"
        );
        // a window holding both: the first spike's wake-up is not explained twice
        let (_, again) =
            attribute_spike(&ev, "rtlab-timer", 19_000_000, (0, m2), std::slice::from_ref(&first));
        assert_ne!(again.unwrap(), first);
        // nothing else left to explain
        let (a, none) = attribute_spike(&ev, "rtlab-timer", 1, (0, m1), &[first]);
        assert!(none.is_none() && a[0].starts_with("no wake-up of 'rtlab-timer*'"), "{a:?}");
    }

    #[test]
    fn a_quiet_cpu_with_a_task_on_it_is_not_called_idle() {
        let t = "          <idle>-0       [001] d..2.   500.000000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=busy next_pid=77 next_prio=120
            busy-77      [001] dNh4.   500.009000: sched_wakeup: comm=rtlab-timer0 pid=900 prio=19 target_cpu=001
            busy-77      [001] d..2.   500.009010: sched_switch: prev_comm=busy prev_pid=77 prev_prio=120 prev_state=R ==> next_comm=rtlab-timer0 next_pid=900 next_prio=19
";
        let a = attribute(&parse_trace(t), "rtlab-timer", 9_010_000);
        assert!(
            a.iter().any(|l| l.contains("while busy (pid 77) was on it): interrupts were off")),
            "{a:?}"
        );
        // a trace that starts after the quiet time began says nothing about it
        let late = t.lines().skip(1).collect::<Vec<_>>().join("\n");
        let a = attribute(&parse_trace(&late), "rtlab-timer", 9_010_000);
        assert!(a.iter().any(|l| l.contains("the timer interrupt came late")), "{a:?}");
    }

    #[test]
    fn later_spikes_get_numbered_files_and_the_trace_around_them() {
        let p = Path::new("/tmp/rtlab-spike-1-2.trace");
        assert_eq!(nth_trace_file(p, 1), p);
        assert_eq!(nth_trace_file(p, 3), Path::new("/tmp/rtlab-spike-1-2-3.trace"));
        assert_eq!(nth_trace_file(Path::new("/tmp/x"), 2), Path::new("/tmp/x-2"));
        let t = format!("# tracer: nop\n{TWO_SPIKES}");
        let part = trace_from(&t, 400_100_000_000);
        assert!(part.starts_with("# tracer: nop\n"));
        assert_eq!(parse_trace(&part).len(), 4, "{part}");
    }

    #[test]
    fn no_victim_says_so() {
        let a = attribute(&parse_trace(TRACE), "nobody", 1);
        assert_eq!(a.len(), 1);
        assert!(a[0].contains("no wake-up"));
    }

    #[test]
    fn counters_are_read_and_subtracted() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        crate::testing::machine(r);
        crate::testing::put(r, "proc/softirqs", "                    CPU0       CPU1\n          HI:          0          0\n       TIMER:      10          20\n      NET_RX:       5          7\n");
        crate::testing::put(r, "proc/stat", "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 1 1 1 1 1 1 1 3 0 0\ncpu1 1 1 1 1 1 1 1 5 0 0\nctxt 1000\n");
        crate::testing::put(r, "proc/22/schedstat", "5000 10 2\n");
        crate::testing::put(r, "proc/14/schedstat", "3000 10 2\n");
        let host = crate::host::FakeHost::new(r);
        let a = read_counters(&host);
        assert_eq!(a.net_rx, vec![5, 7]);
        assert_eq!(a.timer, vec![10, 20]);
        assert_eq!(a.interrupts[1], 41999 + 3962 + 24292);
        assert_eq!(a.ksoftirqd_ns, vec![3000, 5000]);
        assert_eq!(a.context_switches, 1000);
        assert_eq!(a.steal_ticks, vec![3, 5]);
        crate::testing::put(r, "proc/softirqs", "                    CPU0       CPU1\n       TIMER:      15          20\n      NET_RX:       5          9\n");
        let b = read_counters(&host);
        let dd = a.delta(&b);
        assert_eq!((dd.net_rx, dd.timer), (vec![0, 2], vec![5, 0]));
    }
}
