//! One measurement at a time per machine, and what a dead rtlab left behind.
//!
//! Contract: every measuring command holds the machine lock ([`lock`]) while it measures
//! (flock(2): the kernel drops it when the process dies, however it dies), so two runs never
//! load the machine under each other; a journal still in force from a dead rtlab is said
//! ([`stale_journal_warning`]) by every probe, and `rtlab run` restores it first.

use crate::error::LabError;
use rtlab_host::lock::LockError;
pub use rtlab_host::lock::MachineLock;
use std::path::{Path, PathBuf};

/// The lock file (`RTLAB_LOCK` overrides it, e.g. for tests that measure in parallel on
/// purpose).
pub fn lock_path() -> PathBuf {
    std::env::var_os("RTLAB_LOCK")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(rtlab_host::lock::DEFAULT_LOCK))
}

/// Take the machine lock for `holder` (`rtlab run quick`); with `wait`, wait for the
/// rtlab that holds it, calling `waiting` once with what it is.
/// A lock file this user cannot create (not root) is no lock: such a process changes
/// nothing on the machine, and measures as the user asked (`None`).
pub fn lock(
    holder: &str,
    wait: bool,
    waiting: impl FnOnce(&str),
) -> Result<Option<MachineLock>, LabError> {
    let path = lock_path();
    match MachineLock::acquire(&path, holder, false) {
        Ok(l) => Ok(Some(l)),
        Err(LockError::Busy { pid, holder: other }) if wait => {
            waiting(&format!("waiting for the rtlab that is measuring (pid {pid}: {other})"));
            MachineLock::acquire(&path, holder, true)
                .map(Some)
                .map_err(|e| LabError::Failed(e.to_string()))
        }
        Err(e @ LockError::Busy { .. }) => Err(LabError::Failed(e.to_string())),
        Err(_) => Ok(None),
    }
}

/// The journal of a dead rtlab still in force, said in one line (None: nothing pending, or
/// its rtlab is alive).
pub fn stale_journal_warning() -> Option<String> {
    let p = rtlab_host::journal::pending(Path::new(rtlab_host::journal::DEFAULT_JOURNAL))?;
    if p.alive {
        return None;
    }
    Some(format!(
        "{}: these changes of an rtlab that is no longer running are still in force and weaken this measurement; `rtlab tune restore` puts them back (`rtlab run` does it first)",
        p.describe()
    ))
}

/// A dead rtlab's journal put back before anything is measured: its warning and then how
/// many changes were restored, each said through `say`; an error when it could not be put
/// back completely.
pub fn restore_dead_journal(say: &mut dyn FnMut(&str)) -> Result<(), LabError> {
    let Some(w) = stale_journal_warning() else { return Ok(()) };
    say(&w);
    let r = rtlab_host::journal::restore_journal(
        crate::host::host(),
        Path::new(rtlab_host::journal::DEFAULT_JOURNAL),
    )
    .map_err(|e| {
        LabError::Failed(format!("restoring the journal first: {e} (run `rtlab tune restore`)"))
    })?;
    if !r.is_clean() {
        return Err(LabError::Failed("the journal of a dead rtlab could not be restored completely: run `rtlab tune restore` and look at what it says".into()));
    }
    say(&format!("restored {} changes first", r.restored.len()));
    Ok(())
}

/// Where the XDP path's journals are: one per attached program,
/// `<DEFAULT_JOURNAL>.xdp-<pid>-<n>` (the machine's journal may be a profile's, in force
/// for the whole case).
fn xdp_journal_path(n: u64) -> PathBuf {
    PathBuf::from(format!(
        "{}.xdp-{}-{n}",
        rtlab_host::journal::DEFAULT_JOURNAL,
        std::process::id()
    ))
}

/// Restore the XDP journals that dead rtlabs left (after a kill -9 the kernel has detached
/// their programs with their links; restoring checks it and removes the journal). Returns
/// one line per journal restored.
pub fn restore_stale_xdp_journals() -> Vec<String> {
    let mut done = Vec::new();
    for p in stale_xdp_journals(Path::new(rtlab_host::journal::DEFAULT_JOURNAL)) {
        if let Ok(r) = rtlab_host::journal::restore_journal(crate::host::host(), &p) {
            let how = if r.is_clean() { "restored" } else { "not all restored" };
            done.push(format!("{}: {how}", p.display()));
        }
    }
    done
}

/// The XDP journals beside `journal` (`<journal>.xdp-PID-N`) whose rtlab is no longer running.
pub fn stale_xdp_journals(journal: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(base)) = (journal.parent(), journal.file_name()) else {
        return Vec::new();
    };
    let prefix = format!("{}.xdp-", base.to_string_lossy());
    let mut found = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(&prefix) else { continue };
        let pid: i32 = rest.split('-').next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if pid == std::process::id() as i32 || rtlab_host::journal::rtlab_alive(pid) {
            continue;
        }
        found.push(e.path());
    }
    found.sort();
    found
}

/// The journaling hook of the XDP path: each attachment gets its own journal, with the
/// program recorded before it is attached; the guard returned restores it (a check: the
/// kernel detached the program with its link) when the run drops it.
pub fn xdp_journal() -> rtlab_engines::udp::run::XdpJournal {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    rtlab_engines::udp::run::XdpJournal(std::sync::Arc::new(|netns: Option<&str>, dev: &str| {
        restore_stale_xdp_journals();
        let path = xdp_journal_path(N.fetch_add(1, Ordering::Relaxed));
        let mut s = rtlab_host::session::Session::begin(
            crate::host::host(),
            &path,
            &format!("rtlab udp --xdp on {dev}"),
        )
        .map_err(|e| e.to_string())?;
        s.record_made_by_caller(&rtlab_host::journal::Change::XdpProgram {
            netns: netns.map(String::from),
            dev: dev.to_string(),
            name: rtlab_sys::xdp::PROGRAM_NAME.to_string(),
        })
        .map_err(|e| e.to_string())?;
        Ok(Box::new(s) as Box<dyn std::any::Any>)
    }))
}
