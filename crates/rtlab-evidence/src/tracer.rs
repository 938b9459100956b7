//! The spike tracer: ftrace armed through tracefs (sched_switch, sched_wakeup, irq and
//! softirq events), a watcher per run ([`crate::watch`]) that explains each spike the probe
//! flags, up to [`MAX_SPIKES`], and rtla timerlat alongside where the kernel has it.
//!
//! Contract: every tracefs change (mount, event enables, tracing_on, rtla's leftovers) goes
//! through a journaled [`Session`] and is undone when the tracer is disarmed or dropped (or
//! by `rtlab tune restore` after a kill -9). Sources: Documentation/trace/ftrace.rst,
//! Documentation/trace/events.rst.

use crate::error::TraceError;
use crate::timerlat::{self, TimerlatConfig, TimerlatRun};
use crate::watch::{SpikeCapture, Watcher};
use rtlab_core::error::Missing;
use rtlab_core::sink::SpikeFlag;
use rtlab_host::host::Host;
use rtlab_host::journal::RestoreReport;
use rtlab_host::session::{Action, ApplyError, Session};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

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
    pub timerlat: timerlat::Availability,
    /// /proc/stat on this host (the watcher reads steal time there).
    stat_path: PathBuf,
}

impl<'h> SpikeTracer<'h> {
    /// Arm ftrace: mount tracefs if needed, enable the events, start tracing (all journaled
    /// at `journal`). Err names what is missing.
    /// The ring buffer keeps the kernel's default size (1408 KB per CPU once expanded): its
    /// unexpanded state cannot be written back, so rtlab does not touch it.
    pub fn arm(host: &'h dyn Host, journal: &Path) -> Result<SpikeTracer<'h>, TraceError> {
        let mut session = Session::begin(host, journal, "rtlab spike tracer")
            .map_err(|e| TraceError::Failed(e.to_string()))?;
        let dirs = timerlat::TRACEFS_DIRS;
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
        let timerlat = timerlat::detect(host);
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
    /// e.g. [`timerlat::leftover_cleanup_action`] before starting rtla.
    pub fn journal(&mut self, a: &Action) -> Result<String, ApplyError> {
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

    /// Start rtla timerlat alongside, when the kernel and the machine have it (found when
    /// armed): its leftovers after a crash journaled first, in this session. None otherwise,
    /// or when it cannot start (the tracer's notes say why).
    pub fn start_timerlat(&mut self, host: &dyn Host, cfg: &TimerlatConfig) -> Option<TimerlatRun> {
        // found when the tracer was armed (detecting runs `rtla --version`)
        if self.timerlat.missing().is_some() {
            return None;
        }
        if let Some(a) = timerlat::leftover_cleanup_action(host) {
            if let Err(e) = self.journal(&a) {
                self.notes.push(format!(
                    "rtla timerlat not started: journaling its clean-up failed: {e}"
                ));
                return None;
            }
        }
        match timerlat::start(cfg) {
            Ok(r) => Some(r),
            Err(e) => {
                self.notes.push(format!("rtla timerlat not started: {e}"));
                None
            }
        }
    }

    /// Disarm and put tracefs back (also done on drop).
    pub fn disarm(mut self) -> RestoreReport {
        self.session.restore()
    }
}

/// How many spikes a run's tracer explains at most: each costs a read of the whole trace
/// buffer (a few MB of text), and the first few say what disturbs the probe.
pub const MAX_SPIKES: usize = 8;
