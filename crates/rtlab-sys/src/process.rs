//! Child processes that never outlive rtlab (the parent-death signal) and inherit none of
//! its descriptors ([`close_inherited_fds`]).
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

/// Start `cmd`'s child with SIGINT and SIGTERM at their default action, whatever this
/// process inherited: a program started in the background of a script (`rtlab run ... &`)
/// inherits SIGINT ignored, and a child stopped with SIGINT (rtla) would never hear it.
pub fn default_stop_signals(cmd: &mut Command) {
    let hook = || -> std::io::Result<()> {
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: signal(2) with SIG_DFL takes integers only and is async-signal-safe.
            if unsafe { libc::signal(sig, libc::SIG_DFL) } == libc::SIG_ERR {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    };
    // SAFETY: the hook only makes async-signal-safe system calls (signal), touches no lock
    // and allocates nothing, as pre_exec requires after fork.
    unsafe {
        cmd.pre_exec(hook);
    }
}

/// Start `cmd`'s child with none of this process's descriptors but stdin, stdout and stderr.
///
/// Libraries open sockets and files without close-on-exec (Fast DDS 2.9's UDP sockets, seen
/// here): a child that inherits them holds the parent's ports (a DDS participant in the
/// child then takes the next participant id, and the port stays bound after the parent
/// closed it). Every descriptor from 3 up is marked close-on-exec in the child between fork
/// and exec (close_range(2) with CLOSE_RANGE_CLOEXEC, Linux 5.11; else fcntl on each
/// descriptor below the soft limit), so that exec closes them; Rust's own error pipe is
/// close-on-exec already and still reports a failed exec.
pub fn close_inherited_fds(cmd: &mut Command) {
    // the highest descriptor to mark on the fallback path, read before the fork
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct it is given.
    let max = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur.min(1 << 16) as libc::c_int
    } else {
        1024
    };
    let hook = move || -> std::io::Result<()> {
        const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
        // SAFETY: close_range takes integers only and is async-signal-safe.
        let r =
            unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC) };
        if r != 0 {
            for fd in 3..max {
                // SAFETY: fcntl on a descriptor number; EBADF for closed ones is ignored;
                // async-signal-safe.
                unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
            }
        }
        Ok(())
    };
    // SAFETY: the hook only makes async-signal-safe system calls (close_range or fcntl),
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

    /// SIGINT's bit in a process's `SigIgn` mask (/proc/PID/status).
    fn ignores_sigint(pid: u32) -> bool {
        let st = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let mask = st.lines().find_map(|l| l.strip_prefix("SigIgn:")).unwrap().trim();
        u64::from_str_radix(mask, 16).unwrap() & (1 << (libc::SIGINT - 1)) != 0
    }

    #[test]
    fn a_child_hears_sigint_even_when_its_parent_ignored_it() {
        // the parent's ignored SIGINT, as a background job of a script inherits it
        let ignoring = |cmd: &mut Command| {
            // SAFETY: signal(2) with SIG_IGN, async-signal-safe, in the child only.
            unsafe {
                cmd.pre_exec(|| {
                    libc::signal(libc::SIGINT, libc::SIG_IGN);
                    Ok(())
                });
            }
        };
        let mut plain = Command::new("sleep");
        plain.arg("5");
        ignoring(&mut plain);
        let mut reset = Command::new("sleep");
        reset.arg("5");
        ignoring(&mut reset);
        default_stop_signals(&mut reset);
        let (mut a, mut b) = (plain.spawn().unwrap(), reset.spawn().unwrap());
        let (ia, ib) = (ignores_sigint(a.id()), ignores_sigint(b.id()));
        let _ = (a.kill(), b.kill(), a.wait(), b.wait());
        assert!(ia, "the control child inherits SIGINT ignored");
        assert!(!ib, "reset to its default");
    }

    #[test]
    fn a_child_inherits_no_descriptor_but_the_standard_three() {
        use std::os::fd::AsRawFd;
        // a descriptor without close-on-exec, as a library's socket may be
        // (numbered high, so that it is not the one ls opens to list the directory)
        let f = std::fs::File::open("/proc/self/status").unwrap();
        // SAFETY: a duplicate at 200 or above without FD_CLOEXEC (F_DUPFD does not set it),
        // closed at the end of the test.
        let fd = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_DUPFD, 200) };
        assert!(fd >= 200);
        let listed = |c: &mut Command| {
            let o = c.args(["-c", "ls /proc/self/fd"]).output().unwrap();
            String::from_utf8(o.stdout).unwrap()
        };
        let mut plain = Command::new("sh");
        assert!(listed(&mut plain).lines().any(|l| l == fd.to_string()), "the test's premise");
        let mut closed = Command::new("sh");
        close_inherited_fds(&mut closed);
        let fds = listed(&mut closed);
        // 0-2 and the descriptor ls opens to list the directory: nothing of the parent's
        assert!(!fds.lines().any(|l| l == fd.to_string()), "{fds}");
        // SAFETY: the duplicate made above, closed once.
        unsafe { libc::close(fd) };
        drop(f);
    }

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
