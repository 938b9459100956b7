//! The observe probe (`rtlab observe --topic`, scenario `kind = "observe"`): a live DDS /
//! ROS 2 topic rtlab did not send, measured without its type: arrival period, deviation from
//! the nominal rate, gaps, bursts, sizes, and the Header stamp's latency when the clocks
//! agree.
//!
//! Contract: [`ObserveProbeConfig`] is the one configuration (defaults shared by the CLI and
//! scenarios: domain 0, loopback, rate estimated, 10 s, the reader's reliability what every
//! writer can match, SCHED_OTHER with memory locked). A topic with no publisher, writers of
//! several types, or a QoS the reader cannot match is a [`LabError::Failed`] of one line,
//! said before anything is measured.

use crate::config::{positive, ConfigError, Dur, List, Rate, RtFields, Validate};
use crate::document::{new_document, run_warnings, RunFacts};
use crate::error::LabError;
use crate::probe::{Context, Plan, Probe, ProbeKind};
use rtlab_core::graph::Graph;
use rtlab_core::rt::{Policy, RtSettings};
use rtlab_core::schema::ResultDocument;
use rtlab_pubsub::observe::{self as engine, ObserveConfig, ObserveOutcome};
use rtlab_pubsub::transport::cyclonedds::DdsNetwork;
use rtlab_pubsub::Reliability;
use serde::{Deserialize, Serialize};

pub const KIND: ProbeKind = ProbeKind {
    kind: "observe",
    about: "a live DDS / ROS 2 topic: arrival period, deviation, gaps, sizes, header latency",
    parse: crate::probe::parse_as::<ObserveProbeConfig>,
};

/// The observe probe's configuration (flags and `[[probe]]` keys have these names).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ObserveProbeConfig {
    /// The DDS domain (ROS_DOMAIN_ID).
    pub domain: u32,
    /// The interface (name or address) to join the domain on (default: loopback only).
    pub interface: Option<String>,
    /// Unicast discovery peers (none with an interface: multicast).
    pub peer: List<String>,
    /// The topic by its ROS 2 name (`/joint_states`).
    pub topic: Option<String>,
    /// Or by its raw DDS name (`rt/joint_states`, `DDSPerfRDataKS`).
    pub dds_topic: Option<String>,
    /// The topic's nominal rate (default: estimated from the first periods).
    pub rate: Option<Rate>,
    /// How long to measure.
    pub duration: Option<Dur>,
    /// The reader's reliability (default: what every writer can match).
    pub reliability: Option<Reliability>,
    /// The publisher's clock agrees with this one: latency from the Header stamp.
    pub synced_clocks: bool,
    /// The type starts with a std_msgs/Header (for types rtlab does not know to).
    pub header: bool,
    /// How long discovery may take.
    pub wait: Dur,
    pub window: Dur,
    #[serde(flatten)]
    pub rt: RtFields,
}

impl Default for ObserveProbeConfig {
    fn default() -> Self {
        ObserveProbeConfig {
            domain: 0,
            interface: None,
            peer: List(Vec::new()),
            topic: None,
            dds_topic: None,
            rate: None,
            duration: None,
            reliability: None,
            synced_clocks: false,
            header: false,
            wait: Dur::s(2),
            window: Dur::s(1),
            rt: RtFields::default(),
        }
    }
}

/// The measuring thread runs SCHED_OTHER with memory locked unless told.
pub fn default_rt() -> RtSettings {
    RtSettings { mlockall: true, ..RtSettings::normal() }
}

/// Measured time unless told.
pub const DEFAULT_DURATION: Dur = Dur(10_000_000_000);

/// ROS 2 types that start with a std_msgs/Header (and every `...Stamped`).
const HEADER_FIRST: &[&str] = &[
    "std_msgs/msg/Header",
    "sensor_msgs/msg/JointState",
    "sensor_msgs/msg/Imu",
    "sensor_msgs/msg/LaserScan",
    "sensor_msgs/msg/Image",
    "sensor_msgs/msg/CompressedImage",
    "sensor_msgs/msg/PointCloud2",
    "sensor_msgs/msg/CameraInfo",
    "sensor_msgs/msg/NavSatFix",
    "sensor_msgs/msg/Range",
    "sensor_msgs/msg/Temperature",
    "sensor_msgs/msg/FluidPressure",
    "sensor_msgs/msg/MagneticField",
    "sensor_msgs/msg/BatteryState",
    "sensor_msgs/msg/Joy",
    "nav_msgs/msg/Odometry",
    "nav_msgs/msg/Path",
    "nav_msgs/msg/OccupancyGrid",
];

/// Whether a DDS type name is a ROS 2 type that starts with a Header.
pub fn starts_with_header(dds_type: &str) -> bool {
    rtlab_core::graph::ros_type(dds_type)
        .is_some_and(|t| HEADER_FIRST.contains(&t.as_str()) || t.ends_with("Stamped"))
}

impl Validate for ObserveProbeConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        let max = rtlab_pubsub::transport::cyclonedds::MAX_DOMAIN;
        if self.domain > max {
            return Err(ConfigError::new(
                "domain",
                format!(
                    "{}: a DDS domain id is 0..={max} here (the ports of a higher one overflow)",
                    self.domain
                ),
            ));
        }
        match (&self.topic, &self.dds_topic) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::new("dds_topic", "and --topic: give one"));
            }
            (Some(t), None) if !t.starts_with('/') || t.len() < 2 => {
                return Err(ConfigError::new(
                    "topic",
                    format!("'{t}': a ROS 2 name starts with / (raw DDS names: --dds-topic)"),
                ));
            }
            _ => {}
        }
        if self.header && !self.synced_clocks {
            return Err(ConfigError::new(
                "header",
                "needs --synced-clocks (the stamp is the publisher's clock)",
            ));
        }
        positive("duration", self.duration)?;
        positive("wait", Some(self.wait))?;
        positive("window", Some(self.window))?;
        Ok(())
    }
}

impl ObserveProbeConfig {
    /// The DDS name of the topic (None: no topic given: the graph only).
    pub fn dds_name(&self) -> Option<String> {
        match (&self.topic, &self.dds_topic) {
            (Some(t), _) => Some(format!("rt{t}")),
            (None, Some(d)) => Some(d.clone()),
            _ => None,
        }
    }

    pub fn network(&self) -> DdsNetwork {
        DdsNetwork { interface: self.interface.clone(), peers: self.peer.0.clone() }
    }

    fn duration_ns(&self) -> i64 {
        self.duration.unwrap_or(DEFAULT_DURATION).0
    }
}

/// What one observation produced.
pub struct Observed {
    pub doc: ResultDocument,
    pub outcome: ObserveOutcome,
}

fn failed(e: impl std::fmt::Display) -> LabError {
    LabError::Failed(e.to_string())
}

/// The domain's graph (`rtlab observe` without a topic): a participant of its own joins the
/// domain for `wait`, reads DDS's built-in topics and what ROS 2 announces of its nodes, and
/// leaves; nothing is written on any topic.
pub fn graph(cfg: &ObserveProbeConfig) -> Result<Graph, LabError> {
    let wait = std::time::Duration::from_nanos(cfg.wait.0 as u64);
    rtlab_pubsub::observe::dds_graph::discover(cfg.domain, &cfg.network(), wait).map_err(failed)
}

/// Measure the topic: discovery, the writers' type and QoS, then the arrivals.
pub fn measure(cfg: &ObserveProbeConfig, ctx: &mut Context<'_>) -> Result<Observed, LabError> {
    crate::cost::before_case();
    let topic = cfg.dds_name().ok_or_else(|| {
        LabError::Config(ConfigError::new(
            "topic",
            "no topic given (--topic /NAME or --dds-topic NAME)",
        ))
    })?;
    let rt = cfg.rt.over(&ctx.rt);
    rt.check().map_err(|m| ConfigError::new("priority", m))?;
    let g = graph(cfg)?;
    let writers = engine::writers_of(&g, &topic).map_err(failed)?;
    let header = cfg.synced_clocks
        && (cfg.header || writers.iter().all(|w| starts_with_header(&w.type_name)));
    let duration_ns = cfg.duration_ns();
    let ecfg = ObserveConfig {
        domain: cfg.domain,
        net: cfg.network(),
        topic: topic.clone(),
        nominal_ns: cfg.rate.as_ref().map(|r| r.period_ns),
        duration_ns,
        window_ns: cfg.window.0,
        reliability: cfg.reliability,
        header_latency: header,
        discover_ns: cfg.wait.0,
        rt: rt.clone(),
    };
    let mut ev = ctx.evidence.clone();
    ev.window_ns = cfg.window.0;
    ev.victim = "rtlab-observe".into();
    ev.cpus = rt.cpu_of(0).into_iter().collect();
    ev.planned = Some(std::time::Duration::from_nanos(duration_ns as u64));
    let evidence = crate::evidence::EvidenceRun::start(crate::host::host(), &ev)?;
    let env = rtlab_sys::env::detect(std::path::Path::new("/"));
    let started = std::time::SystemTime::now();
    let (lock_guard, memory_lock) = rtlab_engines::hold::lock_memory(rt.mlockall);
    let outcome = engine::observe(&ecfg, ctx.stop.clone());
    let streams = outcome.as_ref().map(|o| o.streams.clone()).unwrap_or_default();
    let evidence = evidence.finish(&streams);
    let mut o = outcome.map_err(|e| match e {
        engine::ObserveError::Rt(m) if m.contains("EPERM") || m.contains("refused") => {
            LabError::Missing(crate::error::refused(rt.policy.name(), rt.priority))
        }
        e => failed(e),
    })?;
    o.interrupted = ctx.stop.load(std::sync::atomic::Ordering::Relaxed);
    if !cfg.synced_clocks {
        o.notes.push("no header latency: the publisher's clock is not known to agree with this one (--synced-clocks)".into());
    } else if !header {
        o.notes.push("no header latency: the type is not known to start with a std_msgs/Header (--header if it does)".into());
    }
    let config = serde_json::json!({
        "probe": serde_json::to_value(cfg).unwrap_or_default(),
        "topic": topic,
        "header_latency": header,
        "observed": {
            "type_name": o.type_name, "writers": o.writers, "reader_reliability": o.reader_reliability,
            "nominal_ns": o.nominal_ns, "nominal_estimated": o.nominal_estimated,
            "received": o.received, "gaps": o.gaps, "missed_periods": o.missed_periods, "bursts": o.bursts,
            "size_min": o.size_min, "size_max": o.size_max, "size_mean": o.size_mean,
        },
        "notes": o.notes,
    });
    let mut doc = new_document("observe", started, env, config);
    doc.duration_ns = o.duration_ns;
    doc.interrupted = o.interrupted;
    doc.streams = o.streams.clone();
    doc.evidence = Some(evidence);
    doc.environment.memory_locked = matches!(memory_lock, Some(Ok(())));
    let facts = RunFacts {
        memory_lock: &memory_lock,
        any_other_policy: rt.policy == Policy::Other,
        mlockall_off_by_profile: ctx.mlockall_off_by_profile,
        cpu_dma_latency_error: None,
        fewest_samples: doc.streams.iter().map(|s| s.stats.count).min().unwrap_or(0),
        interrupted: o.interrupted,
    };
    doc.warnings = run_warnings(&doc.environment, &facts, Vec::new());
    drop(lock_guard);
    crate::cost::attach(&mut doc);
    Ok(Observed { doc, outcome: o })
}

impl Probe for ObserveProbeConfig {
    fn kind(&self) -> &'static str {
        "observe"
    }
    fn config(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
    fn plan(&self) -> Plan {
        Plan {
            duration_ns: Some(self.duration_ns()),
            count: None,
            period_ns: self.rate.as_ref().map(|r| r.period_ns).unwrap_or(10_000_000),
            sweep: 1,
        }
    }
    fn scale(&mut self, factor: f64, floor: u64) -> Option<String> {
        let p = self.rate.as_ref().map(|r| r.period_ns).unwrap_or(10_000_000);
        if self.duration.is_none() {
            self.duration = Some(DEFAULT_DURATION);
        }
        let mut count = None;
        crate::probe::scale_length(&mut self.duration, &mut count, p, factor, floor)
    }
    fn pins_process(&self) -> bool {
        false
    }
    fn rt(&self, base: &RtSettings) -> RtSettings {
        self.rt.over(base)
    }
    fn measure(&self, ctx: &mut Context<'_>) -> Result<ResultDocument, LabError> {
        measure(self, ctx).map(|o| o.doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_first_types() {
        assert!(starts_with_header("sensor_msgs::msg::dds_::JointState_"));
        assert!(starts_with_header("geometry_msgs::msg::dds_::PoseStamped_"));
        assert!(!starts_with_header("std_msgs::msg::dds_::String_"));
        assert!(!starts_with_header("KeyedSeq"));
    }

    #[test]
    fn one_topic_and_a_header_needs_synced_clocks() {
        let t: toml::Table = "topic = '/a'\ndds_topic = 'rt/a'".parse().unwrap();
        assert!(crate::config::from_table::<ObserveProbeConfig>(&t).is_err());
        let t: toml::Table = "topic = 'a'".parse().unwrap();
        let e = crate::config::from_table::<ObserveProbeConfig>(&t).unwrap_err();
        assert_eq!(e.field, "topic");
        let t: toml::Table = "topic = '/a'\nheader = true".parse().unwrap();
        let e = crate::config::from_table::<ObserveProbeConfig>(&t).unwrap_err();
        assert_eq!(e.field, "header");
        let t: toml::Table = "topic = '/joint_states'\nrate = '100hz'".parse().unwrap();
        let c = crate::config::from_table::<ObserveProbeConfig>(&t).unwrap();
        assert_eq!(c.dds_name().as_deref(), Some("rt/joint_states"));
        assert_eq!(c.rate.unwrap().period_ns, 10_000_000);
    }
}
