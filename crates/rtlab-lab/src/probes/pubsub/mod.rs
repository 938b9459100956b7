//! The pubsub probe (`rtlab pubsub`, scenario `kind = "pubsub"`): message latency through
//! real transports (intra, shm/iceoryx2, zenoh, dds/Cyclone DDS, udp), swept over payloads,
//! rates and subscriber counts, one way or round trip.
//!
//! Contract: [`PubsubProbeConfig`] is the one configuration (defaults shared by the CLI and
//! scenarios: oneway, 64 B, 100 Hz, 1 subscriber, best effort, keep-last:5, volatile,
//! blocking waits, 5 s per case). Subscribers run in processes of this binary
//! (`rtlab pubsub --role-config JSON`), started by `measure`.

mod config;
mod measure;

pub use config::*;
pub use measure::{fit_evidence, measure, summary};
/// The engine's words the command's flags and headline use, and its two process entries
/// (a subscriber or pong process; the pubsub engine in a process of its own).
pub use rtlab_pubsub::engine::{
    apart::engine_main, rate_label, role_main, HandRole, Mode, PubsubConfig, Schedule,
    TransportKind,
};
pub use rtlab_pubsub::EchoStyle;

use crate::config::Dur;
use crate::error::LabError;
use crate::far::FarSpec;
use crate::probe::{Context, Plan, Probe};
use rtlab_core::rt::RtSettings;
use rtlab_core::schema::ResultDocument;

impl Probe for PubsubProbeConfig {
    fn kind(&self) -> &'static str {
        "pubsub"
    }
    fn config(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
    fn plan(&self) -> Plan {
        let sweep =
            (self.payload.0.len() * self.periods().len() * self.subscriber_counts().len()) as u64;
        Plan {
            duration_ns: Some(self.case_duration_ns()),
            count: self.count,
            period_ns: self.periods().into_iter().max().unwrap_or(10_000_000),
            sweep,
        }
    }
    fn scale(&mut self, factor: f64, floor: u64) -> Option<String> {
        let p = self.periods().into_iter().max().unwrap_or(10_000_000);
        if self.duration.is_none() && self.count.is_none() {
            self.duration = Some(Dur::s(5));
        }
        crate::probe::scale_length(&mut self.duration, &mut self.count, p, factor, floor)
    }
    fn pins_process(&self) -> bool {
        false
    }
    fn needs_pair(&self) -> bool {
        self.far == Some(FarSpec::Pair)
    }
    fn near_netns(&self) -> Option<&str> {
        self.netns.as_deref()
    }
    fn far(&self) -> Option<&FarSpec> {
        self.far.as_ref()
    }
    fn set_far(&mut self, far: &FarSpec) -> bool {
        if self.far.is_none()
            && !matches!(self.transport, TransportKind::Intra | TransportKind::Shm)
        {
            self.far = Some(far.clone());
        }
        true
    }
    fn rt(&self, base: &RtSettings) -> RtSettings {
        self.rt.over(base)
    }
    fn measure(&self, ctx: &mut Context<'_>) -> Result<ResultDocument, LabError> {
        measure(self, ctx).map(|(doc, _, _)| doc)
    }
}
