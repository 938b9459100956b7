//! The lab's error: why a probe (or a case's set-up, the far side, the store) did not do its
//! job, in three kinds that decide what the caller does: bad input (exit 2 / a failed case),
//! something this machine lacks (a skipped case, with the fix), anything else (one line).
//!
//! Contract: this room imports nothing of the lab but the configuration's error, so every
//! other room can take [`LabError`] without an import back.

use crate::config::ConfigError;
use rtlab_core::error::Missing;

/// Why a probe did not measure.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A value the user gave is wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// This machine lacks something: a tool, a privilege, a kernel feature.
    #[error(transparent)]
    Missing(#[from] Missing),
    /// Anything else (said in one line).
    #[error("{0}")]
    Failed(String),
}

impl LabError {
    pub fn failed(e: impl std::fmt::Display) -> LabError {
        LabError::Failed(e.to_string())
    }

    /// The kernel refused a real-time priority: a privilege this process lacks.
    pub fn from_sys(e: rtlab_sys::SysError) -> LabError {
        match e {
            rtlab_sys::SysError::RtRefused { policy, priority, cause, fix } => {
                LabError::Missing(refused_because(policy, priority, &cause, fix))
            }
            other => LabError::Failed(other.to_string()),
        }
    }
}

/// The kernel refused a real-time priority (EPERM): what is missing, and the fix, from the
/// real cause on this machine ([`rtlab_sys::rt_access::RtAccess::refusal`]): a missing
/// privilege, or, for root, a cgroup without RT runtime under RT group scheduling.
pub fn refused(policy: &str, priority: i32) -> Missing {
    let c = rtlab_sys::rt_access::RtAccess::of_this_process().refusal(priority);
    refused_because(policy, priority, &c.cause, c.fix)
}

/// The same with the cause already known (`cause` follows "(EPERM)").
fn refused_because(policy: &str, priority: i32, cause: &str, fix: String) -> Missing {
    Missing {
        need: rtlab_core::error::Need::Privilege { what: format!("{policy} priority {priority}") },
        what: format!("the kernel refused {policy} priority {priority} (EPERM){cause}"),
        fix,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_rt_refusal_is_a_missing_privilege_with_its_real_cause() {
        let e = LabError::from_sys(rtlab_sys::SysError::RtRefused {
            policy: "fifo",
            priority: 80,
            cause: " although this process has CAP_SYS_NICE: it runs in cgroup /s.scope".into(),
            fix: "move it to the root cgroup (echo $$ > /sys/fs/cgroup/cgroup.procs)".into(),
        });
        let LabError::Missing(m) = e else { panic!("not a Missing: {e}") };
        assert!(matches!(m.need, rtlab_core::error::Need::Privilege { .. }));
        assert_eq!(
            m.to_string(),
            "the kernel refused fifo priority 80 (EPERM) although this process has CAP_SYS_NICE: it runs in cgroup /s.scope (move it to the root cgroup (echo $$ > /sys/fs/cgroup/cgroup.procs))"
        );
        // read from this machine: one line, whatever the cause here
        let m = refused("fifo", 80);
        assert!(m.what.starts_with("the kernel refused fifo priority 80 (EPERM)"), "{m}");
        assert!(!m.to_string().contains('\n'));
    }
}
