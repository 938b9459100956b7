//! Real-time settings: one type for how rtlab's own threads run, whoever decides it (a CLI
//! flag, a scenario's profile, a far side). Pure data; rtlab-sys applies it.
//!
//! Contract: a [`RtSettings`] that passed [`RtSettings::check`] has a priority inside its
//! policy's range (sched(7): SCHED_FIFO/SCHED_RR 1..=99 on Linux, SCHED_OTHER 0).

use serde::{Deserialize, Serialize};

/// A scheduling policy, named as on the command line and in result files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Fifo,
    Rr,
    Other,
}

impl Policy {
    pub const NAMES: &'static [&'static str] = &["fifo", "rr", "other"];

    pub fn name(self) -> &'static str {
        match self {
            Policy::Fifo => "fifo",
            Policy::Rr => "rr",
            Policy::Other => "other",
        }
    }

    pub fn parse(s: &str) -> Option<Policy> {
        match s.to_ascii_lowercase().as_str() {
            "fifo" | "sched_fifo" => Some(Policy::Fifo),
            "rr" | "sched_rr" => Some(Policy::Rr),
            "other" | "normal" | "sched_other" => Some(Policy::Other),
            _ => None,
        }
    }

    /// The kernel's priority range for the policy on Linux (sched_get_priority_min/max(2)).
    pub fn priority_range(self) -> (i32, i32) {
        match self {
            Policy::Fifo | Policy::Rr => (1, 99),
            Policy::Other => (0, 0),
        }
    }

    /// `priority` inside the policy's range, or a message naming both.
    pub fn check_priority(self, priority: i32) -> Result<(), String> {
        let (min, max) = self.priority_range();
        if priority < min || priority > max {
            return Err(format!(
                "priority {priority} is outside {min}..={max} for policy {}",
                self.name()
            ));
        }
        Ok(())
    }

    pub fn is_realtime(self) -> bool {
        matches!(self, Policy::Fifo | Policy::Rr)
    }

    /// The priority a thread gets when none is given: 80 for fifo/rr (S1, S3: the
    /// application at 80), 0 for other.
    pub fn default_priority(self) -> i32 {
        if self.is_realtime() {
            80
        } else {
            0
        }
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How rtlab's measuring threads run: policy, priority, CPUs, memory lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RtSettings {
    pub policy: Policy,
    pub priority: i32,
    /// CPUs the measuring threads are pinned to, taken in turn (None: not pinned).
    pub cpus: Option<Vec<usize>>,
    /// mlockall(MCL_CURRENT | MCL_FUTURE) for the run.
    pub mlockall: bool,
}

impl RtSettings {
    /// SCHED_OTHER, not pinned, memory not locked (the `no-rt` profile).
    pub fn normal() -> RtSettings {
        RtSettings { policy: Policy::Other, priority: 0, cpus: None, mlockall: false }
    }

    /// SCHED_FIFO 80 with memory locked (every rt-* profile, `rtlab timer`'s default).
    pub fn fifo80() -> RtSettings {
        RtSettings { policy: Policy::Fifo, priority: 80, cpus: None, mlockall: true }
    }

    /// The CPU of the `i`-th measuring thread.
    pub fn cpu_of(&self, i: usize) -> Option<usize> {
        self.cpus.as_ref().filter(|c| !c.is_empty()).map(|c| c[i % c.len()])
    }

    pub fn check(&self) -> Result<(), String> {
        self.policy.check_priority(self.priority)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_and_ranges() {
        assert_eq!(Policy::parse("SCHED_FIFO"), Some(Policy::Fifo));
        assert!(Policy::Other.check_priority(1).is_err());
        assert!(Policy::Rr.check_priority(99).is_ok());
        assert_eq!(serde_json::to_string(&Policy::Rr).unwrap(), "\"rr\"");
        let r = RtSettings { cpus: Some(vec![1, 3]), ..RtSettings::fifo80() };
        assert_eq!((r.cpu_of(0), r.cpu_of(1), r.cpu_of(2)), (Some(1), Some(3), Some(1)));
    }
}
