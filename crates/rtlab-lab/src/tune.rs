//! `rtlab tune`'s work: the machine's checks, a profile's plan applied step by step in a
//! journaled session and put back, what the journals hold now, and the restore after a
//! crash (the profile journal, the spike tracer's beside it, dead rtlabs' XDP programs).
//!
//! Contract: nothing here prints; each step and each restored journal is handed to the
//! caller as it is done, so what was done is said even when a later step fails.

use crate::error::LabError;
use rtlab_host::host::{FakeHost, Host, RealHost};
use rtlab_host::journal::{pending, read_journal, restore_journal};
use rtlab_host::session::Session;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use rtlab_host::journal::{RestoreReport, DEFAULT_JOURNAL};
pub use rtlab_tune::check::{counts, Check, Status};
pub use rtlab_tune::profile::{Profile, Step, StepOutcome, Target};

/// The machine a tune command acts on: this one, or a fake sysfs/procfs tree (`--root`).
pub fn host_of(root: Option<&Path>) -> Result<Box<dyn Host>, LabError> {
    Ok(match root {
        Some(r) if !r.is_dir() => {
            return Err(LabError::Failed(format!("--root {}: not a directory", r.display())))
        }
        Some(r) => Box::new(FakeHost::new(r)),
        None => Box::new(RealHost::new()),
    })
}

/// How far the machine is from a real-time setup; with `noise_ns` above 0 (this machine
/// only), the noise of its real-time CPUs measured as one more row.
pub fn check(
    host: &dyn Host,
    noise_ns: i64,
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Result<Vec<Check>, LabError> {
    let mut checks = rtlab_tune::check::run_checks(host);
    if noise_ns > 0 {
        checks.push(crate::probes::noise::check::row(noise_ns, stop)?);
    }
    Ok(checks)
}

/// The profile journal, the spike tracer's journal beside it (`<journal>.trace`), `rtlab
/// trace --pid`'s uprobes' (`<journal>.uprobe`), and the
/// journals of dead rtlabs' XDP programs.
pub fn journals(path: &Path) -> Vec<PathBuf> {
    let mut trace = path.as_os_str().to_owned();
    trace.push(".trace");
    let mut uprobe = path.as_os_str().to_owned();
    uprobe.push(".uprobe");
    let mut v = vec![path.to_path_buf(), PathBuf::from(trace), PathBuf::from(uprobe)];
    // the XDP programs of dead rtlabs (the kernel detached them with their links)
    v.extend(crate::guard::stale_xdp_journals(path));
    v
}

fn journal_error(e: impl std::fmt::Display) -> LabError {
    LabError::Failed(format!("--journal: {e}"))
}

/// Put back every journal of [`journals`] that holds changes, each handed to `each` when
/// done; refused before anything is undone while a live rtlab holds one (unless `force`).
/// Returns whether any journal held a change.
pub fn restore(
    host: &dyn Host,
    journal: &Path,
    force: bool,
    each: &mut dyn FnMut(&Path, &RestoreReport),
) -> Result<bool, LabError> {
    let paths = journals(journal);
    // refuse before anything is undone: a live rtlab's journal is its profile in use
    for path in &paths {
        if read_journal(path).map_err(journal_error)?.pending.is_empty() {
            continue;
        }
        if let Some(p) = pending(path) {
            if !force && p.alive && p.pid != std::process::id() as i32 {
                return Err(LabError::Failed(format!(
                    "{}: pid {} ({}) is still running and holds these {} changes; it restores them when it ends (Ctrl-C or kill {}); --force to restore now",
                    path.display(),
                    p.pid,
                    p.what,
                    p.changes,
                    p.pid
                )));
            }
        }
    }
    let mut any = false;
    for path in paths {
        if read_journal(&path).map_err(journal_error)?.pending.is_empty() {
            let _ = restore_journal(host, &path);
            continue;
        }
        any = true;
        each(&path, &restore_journal(host, &path).map_err(journal_error)?);
    }
    Ok(any)
}

/// A journal that holds changes now.
pub struct Applied {
    pub path: PathBuf,
    pub pid: i32,
    /// What applied them (`rtlab tune apply rt-normal`).
    pub what: String,
    /// The process that applied them still runs.
    pub alive: bool,
    /// Each change described, and whether it is still in force.
    pub changes: Vec<(String, String)>,
}

/// What the journals hold now, and the CPU DMA latency request in force (microseconds).
pub fn show(host: &dyn Host, journal: &Path) -> Result<(Vec<Applied>, Option<i32>), LabError> {
    let mut applied = Vec::new();
    for path in journals(journal) {
        let st = read_journal(&path).map_err(journal_error)?;
        if st.pending.is_empty() {
            continue;
        }
        let (pid, what) = st.owner.clone().unwrap_or((0, "?".into()));
        let alive = pending(&path).is_some_and(|p| p.alive);
        let changes = st
            .pending
            .iter()
            .map(|(_, c)| (c.describe(), rtlab_tune::profile::in_force(host, c)))
            .collect();
        applied.push(Applied { path, pid, what, alive, changes });
    }
    let dma = rtlab_sys::pmqos::CpuDmaLatency::current(&host.path("/dev/cpu_dma_latency")).ok();
    Ok((applied, dma))
}

/// The profiles of a `--file` (none: no file).
pub fn user_profiles(file: Option<&Path>) -> Result<BTreeMap<String, Profile>, LabError> {
    match file {
        Some(f) => {
            rtlab_tune::profile::load_file(f).map_err(|e| LabError::Failed(format!("--file {e}")))
        }
        None => Ok(Default::default()),
    }
}

/// Every built-in profile: name and description.
pub fn builtins() -> Vec<(&'static str, String)> {
    rtlab_tune::profile::builtin_names()
        .iter()
        .map(|n| (*n, rtlab_tune::profile::builtin(n).expect("built-in").description))
        .collect()
}

/// `tune apply NAME`: a built-in, one of `user`, or (without a `--file`) a profile file
/// (`./my.toml[#NAME]`) read as a scenario's `profiles` entry reads it.
pub fn find_profile(
    name: &str,
    user: &BTreeMap<String, Profile>,
    with_file: bool,
) -> Result<Profile, LabError> {
    if !with_file && rtlab_tune::profile::is_file_ref(name) {
        rtlab_tune::profile::resolve(name, Path::new(".")).map(|p| p.profile)
    } else {
        rtlab_tune::profile::find(name, user)
    }
    .map_err(LabError::failed)
}

/// Where a profile applies, each part checked on `host` (flags named on error).
pub struct Where {
    pub rt_cpu: Option<usize>,
    pub nic: Option<String>,
    pub netns: Option<String>,
    pub pids: Vec<i32>,
}

/// The profile's target, each part checked on this host (or the `--root` tree).
pub fn target(w: Where, host: &dyn Host) -> Result<Target, LabError> {
    let (online, text) = rtlab_sys::cpus::online_cpus(host.root());
    let bad = |s: String| Err(LabError::Failed(s));
    if let Some(c) = w.rt_cpu.filter(|c| !online.contains(c)) {
        return bad(format!("--rt-cpu {c}: CPU {c} is not online (online: {text})"));
    }
    if let Some(pid) = w.pids.iter().find(|p| !host.exists(&format!("/proc/{p}"))) {
        return bad(format!("--pid {pid}: no such process"));
    }
    match (&w.nic, &w.netns) {
        (None, Some(ns)) => {
            return bad(format!("--netns {ns}: give --nic, the interface inside that namespace"))
        }
        (Some(n), None) if !host.exists(&format!("/sys/class/net/{n}")) => {
            return bad(format!("--nic {n}: no such interface"))
        }
        _ => {}
    }
    Ok(Target { rt_cpu: w.rt_cpu, nic: w.nic, netns: w.netns, pids: w.pids, keep: vec![] })
}

/// The steps `profile` takes on `target`.
pub fn plan(profile: &Profile, target: &Target, host: &dyn Host) -> Vec<Step> {
    rtlab_tune::profile::plan(profile, target, host)
}

/// A profile being applied: every change journaled before it is made.
pub struct Applying<'h> {
    session: Session<'h>,
}

impl<'h> Applying<'h> {
    /// Begin at `journal` (refused while that journal holds changes).
    pub fn begin(host: &'h dyn Host, journal: &Path, what: &str) -> Result<Self, LabError> {
        Ok(Applying { session: Session::begin(host, journal, what).map_err(LabError::failed)? })
    }

    /// Apply one step.
    pub fn step(&mut self, step: &Step) -> StepOutcome {
        rtlab_tune::profile::apply_step(&mut self.session, step)
    }

    /// Put everything back.
    pub fn restore(mut self) -> RestoreReport {
        self.session.restore()
    }
}
