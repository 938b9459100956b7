//! The errors of loads, and finding a tool on PATH.
//!
//! Contract: a tool that is not installed (found missing on PATH, or ENOENT when it is
//! spawned) is always [`LoadError::Missing`], whatever the tool; [`LoadError::missing`] is
//! what the lab reads to call a case skipped.

use rtlab_core::error::Missing;

/// Errors of loads.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A tool the load needs is not installed (stress-ng, iperf3, ip).
    #[error(transparent)]
    Missing(#[from] Missing),
    /// A process of the load could not be started.
    #[error("starting {what}: {source}")]
    Start {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A process of the load ended before it was stopped.
    #[error("the {what} load ended early ({status}){stderr}")]
    Died { what: String, status: String, stderr: String },
    /// A process of the load ended at the time limit it was given (`max_duration`) before
    /// it was stopped: the limit was too short for the case.
    #[error(
        "the {what} load reached its time limit of {limit_s} s before it was stopped \
         (give a longer max_duration)"
    )]
    Expired { what: String, limit_s: u64 },
    /// The load's configuration cannot run.
    #[error("{0}")]
    Invalid(String),
}

impl LoadError {
    /// What this machine lacks, if that is the error (the case is then skipped).
    pub fn missing(&self) -> Option<&Missing> {
        match self {
            LoadError::Missing(m) => Some(m),
            _ => None,
        }
    }
}

/// Find `tool` on PATH.
pub fn which(tool: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(tool)).find(|p| p.is_file())
}

/// Ok if `tool` is on PATH, else the [`Missing`] naming `package`.
pub(crate) fn need(tool: &str, package: &str) -> Result<(), LoadError> {
    match which(tool) {
        Some(_) => Ok(()),
        None => Err(Missing::tool(tool, package).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_names_its_package_and_is_missing() {
        let e = need("rtlab-no-such-tool", "rtlab-pkg").unwrap_err();
        assert_eq!(e.missing(), Some(&Missing::tool("rtlab-no-such-tool", "rtlab-pkg")));
        let s = e.to_string();
        assert!(s.contains("apt-get install rtlab-pkg") && s.contains("not installed"), "{s}");
        assert!(LoadError::Invalid("x".into()).missing().is_none());
    }
}
