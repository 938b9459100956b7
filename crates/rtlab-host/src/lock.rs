//! One measurement at a time per machine: an exclusive flock(2) on a lock file
//! ([`DEFAULT_LOCK`]) holding the holder's pid and what it runs.
//!
//! Contract: while a [`MachineLock`] lives, no other [`MachineLock::acquire`] on the same
//! path succeeds (in this process or another); the kernel releases the lock when the holder
//! exits, however it ends, so a lock is never stale. The file is never removed (a waiter may
//! hold it open); its text is only information: `PID\nHOLDER\n`, emptied when released.

use rtlab_core::error::Missing;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The machine's lock file.
pub const DEFAULT_LOCK: &str = "/run/rtlab/lock";

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it (and `wait` was not asked).
    #[error("another rtlab (pid {pid}: {holder}) is measuring on this machine; wait for it (--wait) or stop it")]
    Busy { pid: i32, holder: String },
    /// The lock file or its directory could not be made, opened or locked.
    #[error("lock file {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
        missing: Option<Box<Missing>>,
    },
}

impl LockError {
    fn io(path: &Path, source: std::io::Error) -> LockError {
        let missing = matches!(source.raw_os_error(), Some(1) | Some(13) | Some(30)).then(|| {
            Missing::privilege(
                &format!("create the lock file {}", path.display()),
                "run rtlab as root, or give a lock path you can write",
            )
        });
        LockError::Io { path: path.display().to_string(), source, missing: missing.map(Box::new) }
    }

    /// What this machine lacks, when that is the cause (a privilege to make the lock file).
    pub fn missing(&self) -> Option<&Missing> {
        match self {
            LockError::Io { missing, .. } => missing.as_deref(),
            LockError::Busy { .. } => None,
        }
    }
}

/// The machine lock, held until dropped.
#[derive(Debug)]
pub struct MachineLock {
    file: std::fs::File,
    path: PathBuf,
}

impl MachineLock {
    /// Take the lock at `path` (its directory is created), writing this process's pid and
    /// `holder` ("rtlab run quick") into it. `wait`: block until the holder releases it;
    /// else [`LockError::Busy`] at once, naming the holder.
    pub fn acquire(path: &Path, holder: &str, wait: bool) -> Result<MachineLock, LockError> {
        let io = |e| LockError::io(path, e);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        // not truncated on open: the text belongs to whoever holds the lock
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io)?;
        if !rtlab_sys::lock::flock_exclusive(&file, false).map_err(io)? {
            if !wait {
                let (pid, holder) = MachineLock::holder(path).unwrap_or((0, "?".into()));
                return Err(LockError::Busy { pid, holder });
            }
            rtlab_sys::lock::flock_exclusive(&file, true).map_err(io)?;
        }
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        let holder = holder.replace('\n', " ");
        file.write_all(format!("{}\n{holder}\n", std::process::id()).as_bytes()).map_err(io)?;
        Ok(MachineLock { file, path: path.to_path_buf() })
    }

    /// Who holds the lock at `path` (pid, what it runs), as its file says; None when the
    /// file is missing or empty (free, or its holder is writing it this instant).
    pub fn holder(path: &Path) -> Option<(i32, String)> {
        for _ in 0..5 {
            let mut text = String::new();
            std::fs::File::open(path).ok()?.read_to_string(&mut text).ok()?;
            let mut lines = text.lines();
            if let Some(pid) = lines.next().and_then(|l| l.trim().parse().ok()) {
                return Some((pid, lines.next().unwrap_or("?").to_string()));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        None
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for MachineLock {
    fn drop(&mut self) {
        // emptied before the close releases the lock: the next holder writes its own
        let _ = self.file.set_len(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_second_acquire_is_busy_naming_the_first_holder() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("run/rtlab/lock");
        let first = MachineLock::acquire(&p, "rtlab run quick", false).unwrap();
        match MachineLock::acquire(&p, "rtlab timer", false) {
            Err(LockError::Busy { pid, holder }) => {
                assert_eq!(pid, std::process::id() as i32);
                assert_eq!(holder, "rtlab run quick");
            }
            other => panic!("expected Busy, got {other:?}"),
        }
        let e = MachineLock::acquire(&p, "rtlab timer", false).unwrap_err();
        assert!(e.missing().is_none());
        let msg = e.to_string();
        assert!(msg.contains(&format!("pid {}: rtlab run quick", std::process::id())), "{msg}");
        assert!(msg.contains("--wait"), "{msg}");
        drop(first);
        let again = MachineLock::acquire(&p, "rtlab timer", false).unwrap();
        assert_eq!(
            MachineLock::holder(&p),
            Some((std::process::id() as i32, "rtlab timer".into()))
        );
        drop(again);
        assert_eq!(MachineLock::holder(&p), None, "emptied when released");
    }

    #[test]
    fn with_wait_the_lock_comes_once_the_first_is_dropped() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("lock");
        let first = MachineLock::acquire(&p, "first", false).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let p2 = p.clone();
        let waiter = std::thread::spawn(move || {
            let l = MachineLock::acquire(&p2, "second", true);
            tx.send(()).unwrap();
            l.map(|_| ())
        });
        // still waiting while the first holds it (a count of events, not a time bound)
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err(), "got the lock while held");
        drop(first);
        // bounded so a broken lock fails the test instead of hanging it
        rx.recv_timeout(Duration::from_secs(30)).expect("the waiter never got the lock");
        waiter.join().unwrap().unwrap();
        assert_eq!(MachineLock::holder(&p), None, "the waiter's lock was released with it");
    }

    #[test]
    fn an_unwritable_lock_directory_is_a_missing_privilege_or_an_error() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("file"), "").unwrap();
        // a path under a regular file: ENOTDIR, an error but not a missing privilege
        let e = MachineLock::acquire(&d.path().join("file/lock"), "x", false).unwrap_err();
        assert!(matches!(e, LockError::Io { .. }) && e.missing().is_none(), "{e}");
        let e = LockError::io(Path::new("/run/rtlab/lock"), std::io::Error::from_raw_os_error(13));
        assert!(e.missing().is_some());
    }
}
