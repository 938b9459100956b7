//! rtlab-sys: the one crate of rtlab allowed `unsafe` and raw syscalls.
//!
//! Contract: every unsafe block carries a `// SAFETY:` line; every system change made here
//! is undone in `Drop` (model: iceoryx2-bb/posix `memory_lock.rs`); errors carry the value,
//! CPU or path they concern. Nothing here prints.

pub mod clock;
pub mod cpus;
pub mod env;
pub mod lock;
pub mod memory;
pub mod net;
pub mod pmqos;
pub mod process;
pub mod sched;
pub mod tune_sys;

/// Errors of the system layer.
#[derive(Debug, thiserror::Error)]
pub enum SysError {
    #[error(
        "{policy} priority {priority} is out of range for the policy (accepted: {min}..={max})"
    )]
    PriorityOutOfRange { policy: &'static str, priority: i32, min: i32, max: i32 },
    #[error("CPU {cpu} is not online (online: {online})")]
    CpuNotOnline { cpu: usize, online: String },
    #[error("the kernel refused {policy} priority {priority} (EPERM): run as root, or grant CAP_SYS_NICE or an rtprio limit")]
    RtRefused { policy: &'static str, priority: i32 },
    #[error("{what} failed: {source}")]
    Os {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

impl SysError {
    pub(crate) fn os(what: impl Into<String>, errno: i32) -> SysError {
        SysError::Os { what: what.into(), source: std::io::Error::from_raw_os_error(errno) }
    }
}
