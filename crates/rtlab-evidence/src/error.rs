//! Why the spike tracer, or rtla timerlat beside it, could not do what was asked.

use rtlab_core::error::Missing;

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The kernel, a privilege or a tool is missing (the run goes on without tracing).
    #[error(transparent)]
    Missing(#[from] Missing),
    /// A tracefs change could not be journaled or made.
    #[error(transparent)]
    Apply(#[from] rtlab_host::session::ApplyError),
    /// A value the tracer refuses (names the value and what is accepted).
    #[error("{0}")]
    Invalid(String),
    /// Something else, said in one line (a file, a process).
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    /// A tracefs instance of another rtla, or a process that ended at once.
    #[error("{0}")]
    Failed(String),
}

impl TraceError {
    /// What the machine lacks, if that is the cause.
    pub fn missing(&self) -> Option<&Missing> {
        match self {
            TraceError::Missing(m) => Some(m),
            TraceError::Apply(a) => a.missing(),
            _ => None,
        }
    }
}
