//! An exclusive advisory lock on an open file: flock(2).
//!
//! Contract: the lock belongs to the open file description: it is released when the file
//! is closed, also by the kernel when the process dies (kill -9 leaves no stale lock). Two
//! opens of the same file conflict, also within one process. Nothing here creates, writes or
//! removes files.

use std::os::fd::AsRawFd;

/// Take the exclusive lock on `file`. `wait`: block until it is free (retried after EINTR);
/// else Ok(false) at once when another open file holds it. Ok(true): held now.
pub fn flock_exclusive(file: &std::fs::File, wait: bool) -> std::io::Result<bool> {
    let op = if wait { libc::LOCK_EX } else { libc::LOCK_EX | libc::LOCK_NB };
    loop {
        // SAFETY: flock takes a file descriptor and flags, no pointers; the fd stays open for
        // the call because `file` is borrowed.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) if !wait => return Ok(false),
            _ => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_open_file_is_refused_until_the_first_closes() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("lock");
        let a = std::fs::File::create(&p).unwrap();
        let b = std::fs::File::open(&p).unwrap();
        assert!(flock_exclusive(&a, false).unwrap());
        assert!(!flock_exclusive(&b, false).unwrap());
        drop(a);
        assert!(flock_exclusive(&b, false).unwrap());
    }
}
