//! The errors of loads, and finding a tool on PATH.
//!
//! Contract: a tool that is not installed (found missing on PATH, or ENOENT when it is
//! spawned) is always [`LoadError::Missing`], whatever the tool; [`LoadError::missing`] is
//! what the lab reads to call a case skipped.

use rtlab_core::error::Missing;
use std::io::Read;

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

/// The last non-empty line of a child's stderr, as `": line"` (empty if none).
pub(crate) fn last_stderr_line(c: &mut std::process::Child) -> String {
    let mut s = String::new();
    if let Some(mut e) = c.stderr.take() {
        let _ = e.read_to_string(&mut s);
    }
    last_line(&s)
}

/// The last non-empty line of `s`, as `": line"` (empty if none).
pub(crate) fn last_line(s: &str) -> String {
    s.lines().rfind(|l| !l.trim().is_empty()).map(|l| format!(": {}", l.trim())).unwrap_or_default()
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
