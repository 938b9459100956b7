//! A udp case of a scenario: the two hosts (netns pair), the reflector on the far side,
//! the ping on this side, under the case's process settings.

use super::ProcessSettings;
use crate::runner::CaseResult;
use rtlab_core::scenario::CaseSpec;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub fn run(_case: &CaseSpec, _ps: &ProcessSettings, _stop: &Arc<AtomicBool>) -> CaseResult {
    CaseResult::skipped("the udp probe is not available in this build")
}
