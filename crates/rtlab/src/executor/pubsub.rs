//! A pubsub case of a scenario: the transport, mode, payload, rate, subscribers and QoS of
//! the case, under its process settings.

use super::ProcessSettings;
use crate::runner::CaseResult;
use rtlab_core::scenario::CaseSpec;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub fn run(_case: &CaseSpec, _ps: &ProcessSettings, _stop: &Arc<AtomicBool>) -> CaseResult {
    CaseResult::skipped("the pubsub probe is not available in this build")
}
