//! Child processes that never outlive rtlab: the parent-death signal.
//!
//! Contract: [`die_with_parent`] makes the kernel send SIGKILL to the child when its parent
//! dies, also by `kill -9`, where no `Drop` of rtlab runs. It is set in the child between
//! fork and exec (PR_SET_PDEATHSIG, prctl(2)) and survives the exec of programs that are
//! not set-user-ID, set-group-ID or file-capability binaries (so `ip netns exec NS PROG`
//! passes it on to PROG, which `ip` execs in the same process). It covers the direct child
//! only: its own children (stress-ng's workers, a shell's background jobs) must see to
//! themselves or be killed through the child's process group.
//!
//! Caveat, documented in prctl(2): the "parent" is the *thread* that forked the child. When
//! that thread exits, the child is killed even though the process lives on. Spawn such
//! children from a thread that lives as long as they should (the main thread, or a
//! long-lived spawner thread as rtlab-load does).
//!
//! The hook run in the child makes only async-signal-safe system calls (prctl, getppid,
//! _exit): no allocation, no lock. (<https://man7.org/linux/man-pages/man2/prctl.2.html>)

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The exit status of a child that found its parent already dead before exec.
pub const ORPHAN_EXIT_STATUS: i32 = 125;

/// Wait up to `within` for `child` to end by itself (polling every 5 ms), then kill it and
/// reap it. Returns true when it ended by itself.
pub fn wait_or_kill(child: &mut Child, within: Duration) -> bool {
    let end = Instant::now() + within;
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) if Instant::now() >= end => {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// Make `cmd`'s child receive SIGKILL when the thread that spawns it dies.
///
/// Closes the race of prctl(2): if the parent died between fork and the prctl call, the
/// child has already been re-parented and no signal will come, so it checks getppid()
/// against the spawning process and exits at once ([`ORPHAN_EXIT_STATUS`]) if they differ.
/// A failing prctl makes `spawn` fail with its errno.
pub fn die_with_parent(cmd: &mut Command) {
    // the process id of the spawner, read before the fork (getppid in the child gives the
    // thread group id of its parent, i.e. this number while the parent lives)
    let parent = std::process::id() as libc::pid_t;
    let hook = move || -> std::io::Result<()> {
        // SAFETY: prctl(PR_SET_PDEATHSIG) takes integers only and is async-signal-safe.
        let r =
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) };
        if r != 0 {
            // from the errno only: no allocation
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: getppid has no preconditions and is async-signal-safe.
        if unsafe { libc::getppid() } != parent {
            // SAFETY: _exit ends the child at once without running any handler of the
            // parent's copied state; it is async-signal-safe.
            unsafe { libc::_exit(ORPHAN_EXIT_STATUS) };
        }
        Ok(())
    };
    // SAFETY: the hook only makes async-signal-safe system calls (prctl, getppid, _exit),
    // touches no lock and allocates nothing, as pre_exec requires after fork.
    unsafe {
        cmd.pre_exec(hook);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::time::{Duration, Instant};

    #[test]
    fn the_child_dies_with_the_thread_that_spawned_it() {
        // the documented caveat, proven: a short-lived spawning thread takes the child along
        let mut child = std::thread::spawn(|| {
            let mut c = Command::new("sleep");
            c.arg("30");
            die_with_parent(&mut c);
            c.spawn().unwrap()
        })
        .join()
        .unwrap();
        let end = Instant::now() + Duration::from_secs(5);
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break Some(st);
            }
            if Instant::now() > end {
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let _ = child.kill();
        let _ = child.wait();
        let status = status.expect("the child outlived the thread that spawned it");
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
    }

    #[test]
    fn a_child_of_a_living_thread_runs() {
        let mut c = Command::new("sh");
        c.args(["-c", "exit 7"]);
        die_with_parent(&mut c);
        let st = c.status().unwrap();
        assert_eq!(st.code(), Some(7));
    }
}
