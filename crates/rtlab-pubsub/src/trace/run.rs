//! Running an application under the interposer and reading its rings while it runs.
//!
//! Contract: [`run`] makes a directory of its own (mode 0700, under `/dev/shm`), writes the
//! interposer there, starts the command in a process group of its own with the interposer
//! preloaded (after any `LD_PRELOAD` it had) and `RTLAB_TRACE_DIR` naming the directory, and
//! reads every ring that appears there every 10 ms until the command ends, the duration
//! passes or `stop` is raised. Then the process group gets SIGINT, 5 s later SIGKILL (also
//! what the command left running when it ended by itself); the rings are read one last time
//! and the directory is removed. The application's output goes
//! to rtlab's stderr (rtlab's stdout stays its own). A ring that is not one (or stops being
//! one) is set aside with one line why; what a full ring refused is counted per process;
//! events beyond `max_events` are counted, not kept. Directories a dead rtlab left are
//! removed at the next start. An rtlab started under a trace (`RTLAB_TRACE_DIR` set) refuses
//! to trace.

use super::analysis::ProcessEvents;
use super::event::decode;
use rtlab_bindings::trace::{RawRecord, Ring, RingError, INTERPOSER};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Events kept at most by one trace (the rest counted, not analysed): memory for hours of
/// a robot's topics, not days.
pub const MAX_EVENTS: usize = 4_000_000;

/// What to run and how.
#[derive(Clone, Debug)]
pub struct TraceRun {
    /// The application: a program and its arguments.
    pub command: Vec<String>,
    /// Stop it after this long (None: when it ends).
    pub duration: Option<Duration>,
    /// Each process's ring, in 64-byte slots (a power of two).
    pub slots: u64,
    /// Where the ring directory is made.
    pub parent: PathBuf,
    /// Events kept at most (the rest counted).
    pub max_events: usize,
}

impl TraceRun {
    pub fn new(command: Vec<String>) -> TraceRun {
        TraceRun {
            command,
            duration: None,
            slots: rtlab_bindings::trace::DEFAULT_SLOTS,
            parent: PathBuf::from("/dev/shm"),
            max_events: MAX_EVENTS,
        }
    }
}

/// One process that made a ring.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Traced {
    pub pid: i32,
    /// The far host it ran on (`rtlab trace --far`); None: this one.
    #[serde(default)]
    pub host: Option<String>,
    pub ppid: i32,
    pub comm: String,
    pub events: u64,
    /// Records its full ring refused (the application went on).
    pub dropped: u64,
    /// Slots reserved and never committed (the process died writing them).
    pub abandoned: u64,
    /// Events of unknown kinds.
    pub unknown: u64,
    /// Why its ring was set aside (not a ring, or it stopped being one).
    pub malformed: Option<String>,
}

/// How the application's run ended.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// It ended by itself: its exit (`exit 0`, `signal 9`).
    Exited(String),
    /// The duration passed: it was stopped (its exit after SIGINT).
    Duration(String),
    /// rtlab was asked to stop (Ctrl-C).
    Stopped(String),
}

/// What a traced run produced.
#[derive(Clone, Debug)]
pub struct TraceOutcome {
    pub processes: Vec<Traced>,
    pub events: Vec<ProcessEvents>,
    pub ended: Ended,
    /// Events beyond `max_events`.
    pub not_kept: u64,
    pub start_monotonic_ns: i64,
    pub end_monotonic_ns: i64,
    /// What the way it was read adds (a uprobe buffer's overruns).
    pub notes: Vec<String>,
}

/// Why a trace did not run.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{0}")]
    Command(String),
    #[error("{0}")]
    Setup(String),
}

const PREFIX: &str = "rtlab-trace-";

/// Remove the ring directories of rtlab processes that are gone.
pub fn remove_stale(parent: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for e in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(PREFIX).and_then(|r| r.split('-').next()) else {
            continue;
        };
        let alive = Path::new("/proc").join(pid).exists();
        if !alive && std::fs::remove_dir_all(e.path()).is_ok() {
            removed.push(e.path());
        }
    }
    removed
}

struct Reader {
    rings: BTreeMap<PathBuf, (Ring, Traced)>,
    set_aside: BTreeMap<PathBuf, Traced>,
    events: BTreeMap<i32, Vec<super::event::Event>>,
    buf: Vec<RawRecord>,
    kept: usize,
    max: usize,
    not_kept: u64,
}

impl Reader {
    fn scan(&mut self, dir: &Path) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = e.path();
            let Some(pid) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".ring"))
                .and_then(|n| n.split('-').next())
                .and_then(|p| p.parse::<i32>().ok())
            else {
                continue;
            };
            if self.rings.contains_key(&path) || self.set_aside.contains_key(&path) {
                continue;
            }
            match Ring::open(&path) {
                Ok(r) => {
                    let i = r.info();
                    let t = Traced { pid, ppid: i.ppid, comm: i.comm.clone(), ..Traced::default() };
                    self.rings.insert(path, (r, t));
                }
                Err(RingError::NotReady) => {}
                Err(RingError::Malformed(why)) => {
                    let t = Traced { pid, malformed: Some(why), ..Traced::default() };
                    self.set_aside.insert(path, t);
                }
            }
        }
    }

    fn drain(&mut self) {
        for (ring, traced) in self.rings.values_mut() {
            let pid = traced.pid;
            if traced.malformed.is_some() {
                continue;
            }
            loop {
                self.buf.clear();
                let got = match ring.read(&mut self.buf, 4096) {
                    Ok(g) => g,
                    Err(e) => {
                        traced.malformed = Some(e.to_string());
                        break;
                    }
                };
                let list = self.events.entry(pid).or_default();
                for raw in &self.buf {
                    match decode(raw) {
                        Ok(ev) if self.kept < self.max => {
                            list.push(ev);
                            self.kept += 1;
                            traced.events += 1;
                        }
                        Ok(_) => self.not_kept += 1,
                        Err(_) => traced.unknown += 1,
                    }
                }
                if got.records < 4096 {
                    break;
                }
            }
            traced.dropped = ring.dropped();
        }
    }

    fn finish(mut self) -> (Vec<Traced>, Vec<ProcessEvents>, u64) {
        self.drain();
        // a process's rings (one before an exec, one after) as one process: its last name
        let mut by_pid: BTreeMap<i32, Traced> = BTreeMap::new();
        for (_, (mut ring, mut t)) in std::mem::take(&mut self.rings) {
            if t.malformed.is_none() {
                t.abandoned = ring.abandon();
            }
            match by_pid.get_mut(&t.pid) {
                None => {
                    by_pid.insert(t.pid, t);
                }
                Some(p) => {
                    p.events += t.events;
                    p.dropped += t.dropped;
                    p.abandoned += t.abandoned;
                    p.unknown += t.unknown;
                    if t.events > 0 {
                        p.comm = t.comm;
                        p.ppid = t.ppid;
                    }
                    p.malformed = p.malformed.take().or(t.malformed);
                }
            }
        }
        let mut traced: Vec<Traced> = by_pid.into_values().collect();
        traced.extend(self.set_aside.into_values());
        let events =
            self.events.into_iter().map(|(pid, events)| ProcessEvents { pid, events }).collect();
        (traced, events, self.not_kept)
    }
}

fn exit_words(s: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(sig)) => format!("signal {sig}"),
        _ => "ended".into(),
    }
}

/// Whether any process of the group is left (signal 0 reaches one).
fn group_alive(pgid: i32) -> bool {
    rtlab_sys::tasks::kill_group(pgid, 0).is_ok()
}

fn signal_group(pgid: i32, sig: i32) {
    // a group that is gone already has nothing to stop
    let _ = rtlab_sys::tasks::kill_group(pgid, sig);
}

/// Why this process may not trace: it runs under `rtlab trace` already (None: it may).
pub fn nested() -> Option<String> {
    std::env::var_os("RTLAB_TRACE_DIR").map(|d| {
        format!(
            "this rtlab runs under `rtlab trace` already (RTLAB_TRACE_DIR={}): a trace inside a trace is refused",
            d.to_string_lossy()
        )
    })
}

/// Run the application and read its rings (see the module's contract).
pub fn run(cfg: &TraceRun, stop: &AtomicBool) -> Result<TraceOutcome, TraceError> {
    use std::os::unix::fs::DirBuilderExt;
    use std::os::unix::process::CommandExt;
    let program = cfg.command.first().ok_or_else(|| {
        TraceError::Command("no command given (rtlab trace -- COMMAND...)".into())
    })?;
    if let Some(why) = nested() {
        return Err(TraceError::Command(why));
    }
    remove_stale(&cfg.parent);
    let stamp = rtlab_sys::clock::monotonic_ns();
    let dir = cfg.parent.join(format!("{PREFIX}{}-{stamp}", std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| TraceError::Setup(format!("{}: {e}", dir.display())))?;
    let guard = RemoveDir(dir.clone());
    let lib = dir.join("librtlab_trace.so");
    std::fs::write(&lib, INTERPOSER)
        .map_err(|e| TraceError::Setup(format!("{}: {e}", lib.display())))?;
    let preload = match std::env::var("LD_PRELOAD") {
        Ok(p) if !p.is_empty() => format!("{p}:{}", lib.display()),
        _ => lib.display().to_string(),
    };
    let stdout = {
        use std::os::fd::AsFd;
        std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| TraceError::Setup(format!("rtlab's stderr: {e}")))?
    };
    let start_monotonic_ns = rtlab_sys::clock::monotonic_ns();
    let mut cmd = Command::new(program);
    // not tied to rtlab's life: an application whose reader died goes on (its rings fill and
    // count what they drop)
    rtlab_sys::process::default_stop_signals(&mut cmd);
    rtlab_sys::process::close_inherited_fds(&mut cmd);
    let mut child = cmd
        .args(&cfg.command[1..])
        .env("LD_PRELOAD", preload)
        .env("RTLAB_TRACE_DIR", &dir)
        .env("RTLAB_TRACE_SLOTS", cfg.slots.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout))
        .process_group(0)
        .spawn()
        .map_err(|e| TraceError::Command(format!("{program}: {e}")))?;
    let pgid = child.id() as i32;
    let mut reader = Reader {
        rings: BTreeMap::new(),
        set_aside: BTreeMap::new(),
        events: BTreeMap::new(),
        buf: Vec::with_capacity(4096),
        kept: 0,
        max: cfg.max_events,
        not_kept: 0,
    };
    let began = Instant::now();
    let mut asked: Option<(Instant, bool)> = None; // (when SIGINT went, by the duration)
    let status = loop {
        reader.scan(&dir);
        reader.drain();
        if let Ok(Some(s)) = child.try_wait() {
            break s;
        }
        match asked {
            None => {
                let by_duration = cfg.duration.is_some_and(|d| began.elapsed() >= d);
                if by_duration || stop.load(Ordering::Relaxed) {
                    signal_group(pgid, libc::SIGINT);
                    asked = Some((Instant::now(), by_duration));
                }
            }
            Some((at, _)) if at.elapsed() > Duration::from_secs(5) => {
                signal_group(pgid, libc::SIGKILL);
            }
            Some(_) => {}
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // what the application started and left behind goes with it: SIGINT (a node shuts down
    // and its middleware removes its shared memory), SIGKILL 5 s later
    if group_alive(pgid) {
        signal_group(pgid, libc::SIGINT);
        let end = Instant::now() + Duration::from_secs(5);
        while group_alive(pgid) && Instant::now() < end {
            reader.scan(&dir);
            reader.drain();
            std::thread::sleep(Duration::from_millis(10));
        }
        signal_group(pgid, libc::SIGKILL);
    }
    let end_monotonic_ns = rtlab_sys::clock::monotonic_ns();
    reader.scan(&dir);
    let (processes, events, not_kept) = reader.finish();
    drop(guard);
    let words = exit_words(status);
    let ended = match asked {
        None => Ended::Exited(words),
        Some((_, true)) => Ended::Duration(words),
        Some((_, false)) => Ended::Stopped(words),
    };
    Ok(TraceOutcome {
        processes,
        events,
        ended,
        not_kept,
        start_monotonic_ns,
        end_monotonic_ns,
        notes: Vec::new(),
    })
}

/// The ring directory, removed however the run ends.
struct RemoveDir(PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
