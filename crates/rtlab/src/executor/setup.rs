//! What surrounds a case's measurement: its profile (system side) and its load.
//!
//! Contract: [`CaseSetup::start`] applies the profile; the load is started by
//! [`CaseSetup::start_load`] (the udp case starts it once its netns pair exists, the other
//! probes right away); dropping the setup stops the load, then restores the profile — also
//! on error and on panic.

use rtlab_core::scenario::{CaseSpec, LoadSpec};
use rtlab_probes::netns::NetnsPair;

/// A case's profile and load, undone on drop.
pub struct CaseSetup {
    load: LoadSpec,
    load_name: String,
    pub load_report: Option<serde_json::Value>,
    pub profile_report: Option<serde_json::Value>,
}

impl CaseSetup {
    pub fn start(case: &CaseSpec) -> Result<CaseSetup, String> {
        Ok(CaseSetup { load: case.load_spec.clone(), load_name: case.load.clone(), load_report: None, profile_report: None })
    }

    /// Start the case's load; traffic goes through `pair` when there is one.
    pub fn start_load(&mut self, _pair: Option<&NetnsPair>) -> Result<(), String> {
        match &self.load {
            LoadSpec::Idle => Ok(()),
            _ => Err(format!("the load '{}' cannot run in this build", self.load_name)),
        }
    }

    /// The measurement is over: stop the load and keep what it achieved.
    pub fn finish(&mut self) {}
}
