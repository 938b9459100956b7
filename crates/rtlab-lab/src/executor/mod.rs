//! The live case executor: sets up a case (its namespaces when the probe needs two hosts,
//! its load, its profile), runs the case's configured probe through the one probe
//! interface, and undoes everything.
//!
//! Contract: whatever happens inside a case (a missing tool, a refused priority, a probe
//! error), `run_case` returns a [`CaseResult`] — it never panics the run away — and every
//! change it made to the machine is undone before it returns (guards dropped in reverse).
//! Skipped vs failed is decided by the error's kind alone: what the machine lacks
//! ([`rtlab_core::error::Missing`]) is skipped, with the fix.

mod live;
mod marks;
pub mod setup;
pub mod supervise;
pub mod watch;

pub use live::{case_error, LiveExecutor};

use crate::runner::{CaseExecutor, CaseResult};
use crate::scenario::CaseSpec;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

impl CaseExecutor for LiveExecutor {
    /// The case on a thread of its own under the supervisor (a panic is a failed case).
    fn run_case(&mut self, case: &CaseSpec, stop: &Arc<AtomicBool>) -> CaseResult {
        supervise::run(self, case, stop)
    }
}
