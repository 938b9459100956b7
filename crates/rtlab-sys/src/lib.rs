//! rtlab-sys: rtlab's system calls (`unsafe` is allowed here and in rtlab-bindings, the C and
//! C++ middleware libraries, and nowhere else).
//!
//! Contract: every unsafe block carries a `// SAFETY:` line; every system change made here
//! is undone in `Drop` (model: iceoryx2-bb/posix `memory_lock.rs`); errors carry the value,
//! CPU or path they concern. Nothing here prints.

pub mod clock;
pub mod cpus;
pub mod env;
pub mod lock;
pub mod memory;
pub mod mount;
pub mod net;
pub mod pmqos;
pub mod process;
pub mod rt_access;
pub mod sched;
pub mod shared_ring;
pub mod stamp;
pub mod tasks;
pub mod test_skip;
pub mod usage;
pub mod xdp;

/// The unit tests' fake machine files.
#[cfg(test)]
pub(crate) mod testing {
    /// Write `text` at `rel` below `root`, making its folders.
    pub fn put(root: &std::path::Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

/// Errors of the system layer.
#[derive(Debug, thiserror::Error)]
pub enum SysError {
    #[error(
        "{policy} priority {priority} is out of range for the policy (accepted: {min}..={max})"
    )]
    PriorityOutOfRange { policy: &'static str, priority: i32, min: i32, max: i32 },
    #[error("CPU {cpu} is not online (online: {online})")]
    CpuNotOnline { cpu: usize, online: String },
    /// The kernel refused a real-time policy (EPERM). `cause` follows "(EPERM)": empty for a
    /// missing privilege, else why a privileged process was refused (its cgroup has no RT
    /// runtime under RT group scheduling, sched_rt_runtime_us = 0, the rtprio limit); `fix`
    /// says what to do. Built by [`SysError::rt_refused`] from [`rt_access::RtAccess`].
    #[error("the kernel refused {policy} priority {priority} (EPERM){cause}: {fix}")]
    RtRefused { policy: &'static str, priority: i32, cause: String, fix: String },
    #[error("{what} failed: {source}")]
    Os {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

impl SysError {
    /// The kernel refused `policy` `priority` with EPERM: the error naming the real cause,
    /// read from this process and the running kernel ([`rt_access::RtAccess::refusal`]).
    pub fn rt_refused(policy: &'static str, priority: i32) -> SysError {
        SysError::rt_refused_by(&rt_access::RtAccess::of_this_process(), policy, priority)
    }

    /// The same, from facts already read (a fake tree in tests).
    pub fn rt_refused_by(a: &rt_access::RtAccess, policy: &'static str, priority: i32) -> SysError {
        let rt_access::RefusalCause { cause, fix } = a.refusal(priority);
        SysError::RtRefused { policy, priority, cause, fix }
    }

    pub(crate) fn os(what: impl Into<String>, errno: i32) -> SysError {
        SysError::Os { what: what.into(), source: std::io::Error::from_raw_os_error(errno) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(cap: bool, cgroup: &str) -> rt_access::RtAccess {
        rt_access::RtAccess {
            root_user: Some(cap),
            cap_sys_nice: Some(cap),
            rtprio_limit: Some(0),
            rt_group_sched: rt_access::RtGroupSched::On { source: "test".into() },
            cgroup: Some(rt_access::CgroupPlace {
                version: 2,
                path: cgroup.into(),
                mount: Some("/sys/fs/cgroup".into()),
                rt_runtime_us: None,
                cpu_controller: Some(true),
            }),
            sched_rt_runtime_us: Some(950000),
            sched_rt_period_us: Some(1000000),
            container: None,
        }
    }

    #[test]
    fn an_eperm_names_its_real_cause_in_one_line() {
        let e =
            SysError::rt_refused_by(&access(true, "/system.slice/x.scope"), "fifo", 80).to_string();
        assert!(
            e.starts_with("the kernel refused fifo priority 80 (EPERM) although this process is root with CAP_SYS_NICE: it runs in cgroup /system.slice/x.scope and the kernel has RT group scheduling (CONFIG_RT_GROUP_SCHED)"),
            "{e}"
        );
        assert!(e.contains("echo $$ > /sys/fs/cgroup/cgroup.procs") && !e.contains("run as root"));
        assert!(!e.contains('\n'));
        // without the privilege: the message it always had
        let e = SysError::rt_refused_by(&access(false, "/user.slice"), "fifo", 80).to_string();
        assert_eq!(
            e,
            "the kernel refused fifo priority 80 (EPERM): run as root, or grant CAP_SYS_NICE or an rtprio limit"
        );
    }
}
