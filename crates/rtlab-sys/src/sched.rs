//! Scheduling policy, priority and CPU affinity, and threads created with them already set.
//!
//! Contract: [`spawn_rt`] creates a thread whose policy, priority and affinity are set in
//! its pthread attributes (PTHREAD_EXPLICIT_SCHED), so it never runs a single instruction
//! with other settings, and anything it spawns inherits them (S4: set the policy before
//! anything spawns). EPERM from the kernel becomes [`SysError::RtRefused`], naming its real
//! cause ([`crate::rt_access`]): a missing privilege, or, as root, a cgroup without RT runtime.
//! (pthread_attr_setinheritsched(3), sched(7), pthread_attr_setaffinity_np(3))

use crate::SysError;
use std::sync::mpsc;

pub use rtlab_core::rt::{Policy, RtSettings};

/// The kernel's constant for a policy.
fn raw(p: Policy) -> libc::c_int {
    match p {
        Policy::Fifo => libc::SCHED_FIFO,
        Policy::Rr => libc::SCHED_RR,
        Policy::Other => libc::SCHED_OTHER,
    }
}

/// Check `priority` against the policy's range, naming both on error.
pub fn check_priority(policy: Policy, priority: i32) -> Result<(), SysError> {
    let (min, max) = policy.priority_range();
    if priority < min || priority > max {
        return Err(SysError::PriorityOutOfRange { policy: policy.name(), priority, min, max });
    }
    Ok(())
}

/// How a thread is created.
#[derive(Clone, Debug)]
pub struct ThreadSpec {
    pub name: String,
    pub policy: Policy,
    pub priority: i32,
    /// CPUs the thread may run on (None: inherit the process's).
    pub cpus: Option<Vec<usize>>,
    pub stack_bytes: usize,
}

fn cpu_set_of(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // CPU_SET bounds-checks nothing, so only set what fits in the set
        if c < libc::CPU_SETSIZE as usize {
            // SAFETY: c is below CPU_SETSIZE; set is a valid cpu_set_t.
            unsafe { libc::CPU_SET(c, &mut set) };
        }
    }
    set
}

/// A thread made by [`spawn_rt`]; join it to get the closure's result.
pub struct RtThread<T> {
    tid: libc::pthread_t,
    rx: mpsc::Receiver<T>,
    joined: bool,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl<T> RtThread<T> {
    /// True once the closure has returned (or panicked).
    pub fn is_finished(&self) -> bool {
        self.done.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Wait for the thread; Err(()) if its closure panicked.
    #[allow(clippy::result_unit_err)] // the closure panicked: there is nothing more to say
    pub fn join(mut self) -> Result<T, ()> {
        // SAFETY: tid came from a successful pthread_create and is joined exactly once.
        unsafe { libc::pthread_join(self.tid, std::ptr::null_mut()) };
        self.joined = true;
        self.rx.recv().map_err(|_| ())
    }
}

impl<T> Drop for RtThread<T> {
    fn drop(&mut self) {
        if !self.joined {
            // SAFETY: not joined yet; detaching lets the thread's resources go when it ends.
            unsafe { libc::pthread_detach(self.tid) };
        }
    }
}

type Boxed = Box<dyn FnOnce() + Send + 'static>;

extern "C" fn trampoline(arg: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: arg is the Box<Boxed> leaked by spawn_rt for this thread only.
    let f: Box<Boxed> = unsafe { Box::from_raw(arg as *mut Boxed) };
    // A panic must not unwind across the C frame; the join side sees it as a closed channel.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || (*f)()));
    std::ptr::null_mut()
}

/// Create a thread with its policy, priority, affinity and stack size set before it starts.
pub fn spawn_rt<T, F>(spec: &ThreadSpec, f: F) -> Result<RtThread<T>, SysError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    check_priority(spec.policy, spec.priority)?;
    let (tx, rx) = mpsc::sync_channel::<T>(1);
    let name = spec.name.clone();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done_in = done.clone();
    let body: Boxed = Box::new(move || {
        /// Raises the flag also when `f` panics.
        struct Done(std::sync::Arc<std::sync::atomic::AtomicBool>);
        impl Drop for Done {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Release);
            }
        }
        let _done = Done(done_in);
        set_current_thread_name(&name);
        let _ = tx.send(f());
    });
    let arg = Box::into_raw(Box::new(body)) as *mut libc::c_void;
    // SAFETY: attr is initialised by pthread_attr_init before any use and destroyed after;
    // every pointer passed is to a live local; on failure the leaked closure is reclaimed.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        libc::pthread_attr_init(&mut attr);
        let stack = spec.stack_bytes.max(libc::PTHREAD_STACK_MIN);
        libc::pthread_attr_setstacksize(&mut attr, stack);
        libc::pthread_attr_setinheritsched(&mut attr, libc::PTHREAD_EXPLICIT_SCHED);
        libc::pthread_attr_setschedpolicy(&mut attr, raw(spec.policy));
        let param = libc::sched_param { sched_priority: spec.priority };
        libc::pthread_attr_setschedparam(&mut attr, &param);
        if let Some(cpus) = &spec.cpus {
            let set = cpu_set_of(cpus);
            libc::pthread_attr_setaffinity_np(
                &mut attr,
                std::mem::size_of::<libc::cpu_set_t>(),
                &set,
            );
        }
        let mut tid: libc::pthread_t = 0;
        let rc = libc::pthread_create(&mut tid, &attr, trampoline, arg);
        libc::pthread_attr_destroy(&mut attr);
        if rc != 0 {
            drop(Box::from_raw(arg as *mut Boxed));
            return Err(match rc {
                libc::EPERM => SysError::rt_refused(spec.policy.name(), spec.priority),
                libc::EAGAIN => SysError::Os {
                    what: format!(
                        "creating thread '{}' (EAGAIN: the locked-memory limit (ulimit -l) or the thread limit was reached; raise it, or run with --no-mlockall)",
                        spec.name
                    ),
                    source: std::io::Error::from_raw_os_error(libc::EAGAIN),
                },
                e => SysError::os(format!("creating thread '{}' ({} {}, cpus {:?})", spec.name, spec.policy.name(), spec.priority, spec.cpus), e),
            });
        }
        Ok(RtThread { tid, rx, joined: false, done })
    }
}

/// Name the calling thread (first 15 bytes), as shown by ps/top and in traces.
pub fn set_current_thread_name(name: &str) {
    let mut buf = [0u8; 16];
    let n = name.len().min(15);
    buf[..n].copy_from_slice(&name.as_bytes()[..n]);
    // SAFETY: buf is NUL-terminated and outlives the call.
    unsafe { libc::pthread_setname_np(libc::pthread_self(), buf.as_ptr() as *const libc::c_char) };
}

/// Set the calling thread's policy and priority.
pub fn set_current_policy(policy: Policy, priority: i32) -> Result<(), SysError> {
    check_priority(policy, priority)?;
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: param is a valid sched_param; pthread_self is always valid.
    let rc = unsafe { libc::pthread_setschedparam(libc::pthread_self(), raw(policy), &param) };
    match rc {
        0 => Ok(()),
        libc::EPERM => Err(SysError::rt_refused(policy.name(), priority)),
        e => Err(SysError::os(format!("setting {} {}", policy.name(), priority), e)),
    }
}

/// A raw scheduling policy without the `SCHED_RESET_ON_FORK` flag the kernel reports with
/// it (sched_getscheduler(2)).
pub fn base_policy(raw: i32) -> i32 {
    raw & !libc::SCHED_RESET_ON_FORK
}

/// The kernel's word for a raw scheduling policy (`SCHED_FIFO` = 1: `fifo`), with or without
/// `SCHED_RESET_ON_FORK`; None for one it does not have.
pub fn policy_word(raw: i64) -> Option<&'static str> {
    Some(match raw & !i64::from(libc::SCHED_RESET_ON_FORK) {
        0 => "other",
        1 => "fifo",
        2 => "rr",
        3 => "batch",
        5 => "idle",
        6 => "deadline",
        _ => return None,
    })
}

/// The calling thread's policy and priority.
pub fn current_policy() -> (Option<Policy>, i32) {
    let mut policy: libc::c_int = 0;
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: both out-pointers are valid.
    unsafe { libc::pthread_getschedparam(libc::pthread_self(), &mut policy, &mut param) };
    let p = match policy {
        libc::SCHED_FIFO => Some(Policy::Fifo),
        libc::SCHED_RR => Some(Policy::Rr),
        libc::SCHED_OTHER => Some(Policy::Other),
        _ => None,
    };
    (p, param.sched_priority)
}

/// Pin the calling thread to `cpus`.
pub fn set_current_affinity(cpus: &[usize]) -> Result<(), SysError> {
    let set = cpu_set_of(cpus);
    // SAFETY: set is a valid cpu_set_t of the size passed.
    let rc = unsafe {
        libc::pthread_setaffinity_np(
            libc::pthread_self(),
            std::mem::size_of::<libc::cpu_set_t>(),
            &set,
        )
    };
    if rc != 0 {
        return Err(SysError::os(format!("pinning to CPUs {cpus:?}"), rc));
    }
    Ok(())
}

/// The CPUs the calling thread may run on.
pub fn current_affinity() -> Vec<usize> {
    // SAFETY: set is zeroed plain data, written by the call.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the calling thread's handle, the set's exact size, a valid set to write.
    unsafe {
        libc::pthread_getaffinity_np(
            libc::pthread_self(),
            std::mem::size_of::<libc::cpu_set_t>(),
            &mut set,
        )
    };
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: c is below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: no preconditions.
    let c = unsafe { libc::sched_getcpu() };
    (c >= 0).then_some(c as usize)
}

/// Whether this process may use a real-time policy (root, CAP_SYS_NICE or an rtprio limit).
pub fn may_use_realtime() -> bool {
    // SAFETY: getrlimit writes into a valid struct; geteuid has no preconditions.
    unsafe {
        if libc::geteuid() == 0 {
            return true;
        }
        let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        libc::getrlimit(libc::RLIMIT_RTPRIO, &mut rl) == 0 && rl.rlim_cur > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_is_named_with_or_without_reset_on_fork() {
        let fifo_reset = libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK;
        assert_eq!(base_policy(fifo_reset), libc::SCHED_FIFO);
        assert_eq!(base_policy(libc::SCHED_RR), libc::SCHED_RR);
        assert_eq!(policy_word(fifo_reset.into()), Some("fifo"));
        assert_eq!(policy_word(0), Some("other"));
        assert_eq!(policy_word(4), None);
    }

    #[test]
    fn priority_ranges_are_the_kernels() {
        assert_eq!(Policy::Fifo.priority_range(), (1, 99));
        assert_eq!(Policy::Other.priority_range(), (0, 0));
        let e = Policy::Fifo.check_priority(100).unwrap_err().to_string();
        assert!(e.contains("1..=99") && e.contains("100"), "{e}");
        assert!(Policy::Other.check_priority(5).is_err());
    }

    #[test]
    fn a_normal_thread_is_created_pinned_with_its_policy() {
        let spec = ThreadSpec {
            name: "rtlab-test".into(),
            policy: Policy::Other,
            priority: 0,
            cpus: Some(vec![0]),
            stack_bytes: 256 * 1024,
        };
        let t = spawn_rt(&spec, || (current_policy(), current_affinity(), current_cpu())).unwrap();
        let ((p, prio), aff, cpu) = t.join().unwrap();
        assert_eq!(p, Some(Policy::Other));
        assert_eq!(prio, 0);
        assert_eq!(aff, vec![0]);
        assert_eq!(cpu, Some(0));
    }

    #[test]
    fn root_fifo_thread_runs_with_fifo_from_its_first_instruction() {
        if !may_use_realtime() {
            crate::test_skip::skipped(format_args!(
                "needs root or an rtprio limit (CI runs as root)"
            ));
            return;
        }
        let spec = ThreadSpec {
            name: "rtlab-fifo".into(),
            policy: Policy::Fifo,
            priority: 10,
            cpus: None,
            stack_bytes: 256 * 1024,
        };
        let t = spawn_rt(&spec, || {
            // a thread spawned from here inherits FIFO 10
            let inner = std::thread::spawn(current_policy).join().unwrap();
            (current_policy(), inner)
        })
        .unwrap();
        let (outer, inner) = t.join().unwrap();
        assert_eq!(outer, (Some(Policy::Fifo), 10));
        assert_eq!(inner, (Some(Policy::Fifo), 10));
    }

    #[test]
    fn a_panicking_thread_is_reported_on_join() {
        let spec = ThreadSpec {
            name: "rtlab-panic".into(),
            policy: Policy::Other,
            priority: 0,
            cpus: None,
            stack_bytes: 256 * 1024,
        };
        let t = spawn_rt(&spec, || -> u32 { panic!("boom") }).unwrap();
        assert!(t.join().is_err());
    }
}
