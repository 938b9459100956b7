//! What every library error can carry: something this machine lacks.
//!
//! Contract: a case whose error is (or wraps) a [`Missing`] is *skipped*, with the reason and
//! the fix, never *failed*: a missing tool, privilege or kernel feature is the machine's
//! state, not rtlab's fault or the user's input. Every library error enum that can meet one
//! has a variant holding it and a `missing(&self) -> Option<&Missing>` accessor; the lab
//! decides skipped vs failed by that accessor alone, the same for every tool.

use serde::{Deserialize, Serialize};

/// What this machine lacks for a step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Need {
    /// A program (with the Debian package that has it).
    Tool { program: String, package: String },
    /// A privilege (root, CAP_SYS_NICE, RLIMIT_RTPRIO...).
    Privilege { what: String },
    /// A kernel feature (a tracer, a qdisc, cgroup v2 cpusets...).
    Kernel { feature: String },
}

/// Something missing for a step, with what would fix it; shown as one line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{what} ({fix})")]
pub struct Missing {
    pub need: Need,
    /// What is missing, in words ("stress-ng is not installed").
    pub what: String,
    /// What fixes it ("apt-get install stress-ng").
    pub fix: String,
}

impl Missing {
    /// A program that is not installed, from a Debian package.
    pub fn tool(program: &str, package: &str) -> Missing {
        Missing {
            need: Need::Tool { program: program.into(), package: package.into() },
            what: format!("{program} is not installed"),
            fix: format!("apt-get install {package}"),
        }
    }

    /// A privilege this process lacks.
    pub fn privilege(what: &str, fix: &str) -> Missing {
        Missing {
            need: Need::Privilege { what: what.into() },
            what: format!("no privilege to {what}"),
            fix: fix.into(),
        }
    }

    /// A kernel feature this kernel lacks.
    pub fn kernel(feature: &str, fix: &str) -> Missing {
        Missing {
            need: Need::Kernel { feature: feature.into() },
            what: format!("this kernel has no {feature}"),
            fix: fix.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_says_the_package() {
        let m = Missing::tool("stress-ng", "stress-ng");
        assert_eq!(m.to_string(), "stress-ng is not installed (apt-get install stress-ng)");
    }
}
