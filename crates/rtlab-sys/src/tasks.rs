//! Other tasks: the policy, priority and affinity of any task (the journaled changes of
//! rtlab-tune, a thread put back), signals to a task or a load's process group, whether it
//! lives.
//!
//! Contract: thin, checked wrappers; errors carry the pid/path and the errno. Nothing here
//! keeps state or undoes anything: the journal in rtlab-tune records every change made
//! through these calls before it is made. (sched_setscheduler(2), sched_setaffinity(2),
//! kill(2))

use crate::SysError;

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The raw policy (with SCHED_RESET_ON_FORK if set) and priority of task `pid`.
pub fn sched_get(pid: i32) -> Result<(i32, i32), SysError> {
    // SAFETY: no pointers; pid is any number, the kernel checks it.
    let policy = unsafe { libc::sched_getscheduler(pid) };
    if policy < 0 {
        return Err(SysError::os(format!("sched_getscheduler(pid {pid})"), errno()));
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: param is a valid out-pointer.
    if unsafe { libc::sched_getparam(pid, &mut param) } < 0 {
        return Err(SysError::os(format!("sched_getparam(pid {pid})"), errno()));
    }
    Ok((policy, param.sched_priority))
}

/// Set the raw policy and priority of task `pid` (a thread id works too).
pub fn sched_set(pid: i32, policy: i32, priority: i32) -> Result<(), SysError> {
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: param is a valid sched_param for the duration of the call.
    if unsafe { libc::sched_setscheduler(pid, policy, &param) } < 0 {
        return Err(SysError::os(
            format!("sched_setscheduler(pid {pid}, policy {policy}, priority {priority})"),
            errno(),
        ));
    }
    Ok(())
}

/// The CPUs task `pid` may run on.
pub fn affinity_get(pid: i32) -> Result<Vec<usize>, SysError> {
    // SAFETY: set is zeroed plain data written by the call.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is a valid cpu_set_t of the size passed.
    if unsafe { libc::sched_getaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } < 0
    {
        return Err(SysError::os(format!("sched_getaffinity(pid {pid})"), errno()));
    }
    // SAFETY: c is below CPU_SETSIZE.
    Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect())
}

/// Pin task `pid` to `cpus`.
pub fn affinity_set(pid: i32, cpus: &[usize]) -> Result<(), SysError> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
        // SAFETY: c is below CPU_SETSIZE.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: set is a valid cpu_set_t of the size passed.
    if unsafe { libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set) } < 0 {
        return Err(SysError::os(format!("sched_setaffinity(pid {pid}, cpus {cpus:?})"), errno()));
    }
    Ok(())
}

/// Send `sig` to every process of group `pgid`.
pub fn kill_group(pgid: i32, sig: i32) -> Result<(), SysError> {
    if pgid <= 1 {
        return Err(SysError::os(format!("kill(-{pgid}): refusing a group id <= 1"), libc::EINVAL));
    }
    // SAFETY: no pointers; a negative pid addresses the process group.
    if unsafe { libc::kill(-pgid, sig) } < 0 {
        return Err(SysError::os(format!("kill(-{pgid}, {sig})"), errno()));
    }
    Ok(())
}

/// Send `sig` to process `pid` (0: only check that it exists).
pub fn kill_pid(pid: i32, sig: i32) -> Result<(), SysError> {
    if pid <= 0 {
        return Err(SysError::os(format!("kill({pid}): refusing a pid <= 0"), libc::EINVAL));
    }
    // SAFETY: no pointers.
    if unsafe { libc::kill(pid, sig) } < 0 {
        return Err(SysError::os(format!("kill({pid}, {sig})"), errno()));
    }
    Ok(())
}

/// True if a process `pid` exists (also when it belongs to another user).
pub fn pid_alive(pid: i32) -> bool {
    match kill_pid(pid, 0) {
        Ok(()) => true,
        Err(SysError::Os { source, .. }) => source.raw_os_error() == Some(libc::EPERM),
        Err(_) => false,
    }
}

/// The policy (raw, with SCHED_RESET_ON_FORK if set) and priority of each thread of this
/// process, by thread id: what [`restore_own_threads`] puts back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnThreads(pub Vec<(i32, i32, i32)>);

impl OwnThreads {
    /// This process's threads now (/proc/self/task); a thread that ends meanwhile is left out.
    pub fn now() -> OwnThreads {
        let mut v: Vec<(i32, i32, i32)> = std::fs::read_dir("/proc/self/task")
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter_map(|tid| sched_get(tid).ok().map(|(p, prio)| (tid, p, prio)))
            .collect();
        v.sort();
        OwnThreads(v)
    }
}

/// Put this process's threads back to `before` (taken with [`OwnThreads::now`]): a thread
/// listed there gets its policy and priority back; one made since that runs at a real-time
/// policy (a middleware pool that outlives what made it) gets the process's main thread's
/// policy of then. Returns the threads changed, and those the kernel refused (tid, error).
pub fn restore_own_threads(before: &OwnThreads) -> (usize, Vec<(i32, SysError)>) {
    let me = std::process::id() as i32;
    let base = before.0.iter().find(|t| t.0 == me).map(|t| (t.1, t.2)).unwrap_or((0, 0));
    let rt = |p: i32| matches!(crate::sched::base_policy(p), libc::SCHED_FIFO | libc::SCHED_RR);
    let (mut changed, mut refused) = (0, Vec::new());
    for (tid, policy, prio) in OwnThreads::now().0 {
        let want = match before.0.iter().find(|t| t.0 == tid) {
            Some(&(_, p, q)) => (p, q),
            None if rt(policy) => base,
            None => continue,
        };
        if want == (policy, prio) {
            continue;
        }
        match sched_set(tid, want.0, want.1) {
            Ok(()) => changed += 1,
            // ended between the listing and the call
            Err(SysError::Os { ref source, .. }) if source.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => refused.push((tid, e)),
        }
    }
    (changed, refused)
}

/// Gives the thread that made it back its policy and priority when dropped (a probe that
/// sets its calling thread's policy, so that threads it creates inherit it, undoes that).
pub struct PolicyBack {
    tid: i32,
    policy: i32,
    priority: i32,
}

/// The calling thread's id.
pub fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

impl PolicyBack {
    pub fn now() -> PolicyBack {
        let tid = gettid();
        let (policy, priority) = sched_get(tid).unwrap_or((libc::SCHED_OTHER, 0));
        PolicyBack { tid, policy, priority }
    }
}

impl Drop for PolicyBack {
    fn drop(&mut self) {
        let _ = sched_set(self.tid, self.policy, self.priority);
    }
}

/// The effective user id is root.
pub fn is_root() -> bool {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_policy_and_affinity_read_back() {
        let me = std::process::id() as i32;
        let (policy, _prio) = sched_get(me).unwrap();
        assert_eq!(policy & !libc::SCHED_RESET_ON_FORK, libc::SCHED_OTHER);
        let cpus = affinity_get(me).unwrap();
        assert!(!cpus.is_empty());
        affinity_set(0, &cpus).unwrap();
        assert!(pid_alive(me));
        assert!(kill_group(1, 0).is_err());
        assert!(sched_get(-5).is_err());
    }

    #[test]
    fn own_threads_are_listed_and_a_thread_left_real_time_is_put_back() {
        let before = OwnThreads::now();
        let me = std::process::id() as i32;
        assert!(before.0.iter().any(|t| t.0 == me), "{before:?}");
        // a thread made since, left at a real-time policy (what a middleware pool does when
        // it is made under FIFO): put back to the main thread's policy; without the
        // privilege for FIFO, a thread that never leaves SCHED_OTHER is left alone
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
            let raised = sched_set(tid, libc::SCHED_FIFO, 10).is_ok();
            tx.send((tid, raised)).unwrap();
            done_rx.recv().unwrap();
        });
        let (tid, raised) = rx.recv().unwrap();
        let (changed, refused) = restore_own_threads(&before);
        assert!(refused.is_empty(), "{refused:?}");
        assert_eq!(changed, raised as usize);
        assert_eq!(sched_get(tid).unwrap().0 & !libc::SCHED_RESET_ON_FORK, libc::SCHED_OTHER);
        done_tx.send(()).unwrap();
        t.join().unwrap();
    }
}
