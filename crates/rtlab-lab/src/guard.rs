//! One measurement at a time per machine, and what a dead rtlab left behind.
//!
//! Contract: every measuring command holds the machine lock ([`lock`]) while it measures
//! (flock(2): the kernel drops it when the process dies, however it dies), so two runs never
//! load the machine under each other; a journal still in force from a dead rtlab is said
//! ([`stale_journal_warning`]) by every probe, and `rtlab run` restores it first.

use crate::error::LabError;
use rtlab_tune::lock::{LockError, MachineLock};
use std::path::{Path, PathBuf};

/// The lock file (`RTLAB_LOCK` overrides it, e.g. for tests that measure in parallel on
/// purpose).
pub fn lock_path() -> PathBuf {
    std::env::var_os("RTLAB_LOCK")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(rtlab_tune::lock::DEFAULT_LOCK))
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
    let p = rtlab_tune::journal::pending(Path::new(rtlab_tune::journal::DEFAULT_JOURNAL))?;
    if p.alive {
        return None;
    }
    Some(format!(
        "{}: these changes of an rtlab that is no longer running are still in force and weaken this measurement; `rtlab tune restore` puts them back (`rtlab run` does it first)",
        p.describe()
    ))
}
