//! Measure a live DDS / ROS 2 topic rtlab did not send: find its writers in the domain's
//! graph, subscribe with their type name (keeping the serialized bytes: no type support is
//! needed), and record every arrival: period, deviation from the nominal period, gaps,
//! bursts, sizes, and — when the user states the clocks agree — latency from the
//! `std_msgs/Header` stamp the message starts with.
//!
//! Contract: set-up errors are one line each (no publisher on the topic, writers of several
//! types, a QoS the reader cannot match). The measuring thread only takes, stamps and records
//! into preallocated [`Recorder`]s; it ends at the duration, on the stop flag, or after
//! `idle_timeout_ns` with no message. Never prints.

use crate::arrivals::Arrivals;
use crate::transport::cyclonedds::{CycloneDdsTransport, DdsNetwork, RawReader};
use crate::transport::{Durability, History, Qos, Reliability, TransportError};
use dds_graph::discover;
use rtlab_core::graph::{Endpoint, Graph};
use rtlab_core::schema::Stream;
use rtlab_core::sink::{Recorder, RecorderConfig, Sink};
use rtlab_sys::clock::{monotonic_ns, realtime_ns};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub mod dds_graph;
pub mod ros_graph;

/// What to observe.
#[derive(Clone, Debug)]
pub struct ObserveConfig {
    pub domain: u32,
    pub net: DdsNetwork,
    /// The DDS topic name (`rt/joint_states`).
    pub topic: String,
    /// The topic's nominal period (None: estimated from the first arrivals).
    pub nominal_ns: Option<i64>,
    pub duration_ns: i64,
    pub window_ns: i64,
    /// The reader's reliability (None: what every writer can match).
    pub reliability: Option<Reliability>,
    /// Latency from the Header stamp (the message starts with a std_msgs/Header and the
    /// publisher's clock agrees with this one).
    pub header_latency: bool,
    /// How long discovery may take.
    pub discover_ns: i64,
    pub rt: rtlab_core::rt::RtSettings,
}

/// What was observed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ObserveOutcome {
    pub topic: String,
    pub type_name: String,
    /// The writers found on the topic, with the QoS each offers.
    pub writers: Vec<Endpoint>,
    /// The reader's QoS (chosen to match every writer, or as asked).
    pub reader_reliability: String,
    pub nominal_ns: Option<i64>,
    pub nominal_estimated: bool,
    pub received: u64,
    pub gaps: u64,
    pub missed_periods: u64,
    pub bursts: u64,
    pub size_min: Option<usize>,
    pub size_max: Option<usize>,
    pub size_mean: Option<f64>,
    /// `<topic>.period`, `<topic>.deviation` and, with header latency, `<topic>.latency`.
    pub streams: Vec<Stream>,
    pub interrupted: bool,
    pub duration_ns: i64,
    pub notes: Vec<String>,
}

/// Why observing could not start.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("no publisher of {topic} in domain {domain} ({seen})")]
    NoPublisher { topic: String, domain: u32, seen: String },
    #[error("{topic}: writers of several types ({types}): rtlab observes a topic of one type (the writers disagree: fix it on their side)")]
    SeveralTypes { topic: String, types: String },
    #[error("{topic}: QoS mismatch: a reliable reader cannot match the best-effort writer {writer} (use --reliability best-effort)")]
    Incompatible { topic: String, writer: String },
    #[error("{topic}: the reader matched no writer within 2 s (writers offer: {offered}); a QoS or type they do not share")]
    NoMatch { topic: String, offered: String },
    #[error("real-time settings: {0}")]
    Rt(String),
}

/// How long a new reader may take to match the writers it should.
const MATCH_WAIT_NS: i64 = 2_000_000_000;

pub const PERIOD_DEFINITION: &str = "arrival period P_k = t_k - t_(k-1): CLOCK_MONOTONIC right after the take returns, message k and the one before";
pub const DEVIATION_DEFINITION: &str =
    "period deviation d_k = P_k - P, the nominal period (given, or the median of the first 32 periods)";
pub const LATENCY_DEFINITION: &str = "header latency: CLOCK_REALTIME right after the take - the message's std_msgs/Header stamp (the publisher's clock: valid on one host or with synchronised clocks)";

fn recorder(window_ns: i64, duration_ns: i64) -> Recorder {
    Recorder::new(
        &RecorderConfig {
            deadline_ns: i64::MAX,
            window_ns,
            window_capacity: ((duration_ns / window_ns.max(1)) as usize + 4).clamp(16, 1 << 16),
            max_samples: None,
            us_histogram_buckets: None,
            spike_threshold_ns: None,
        },
        None,
    )
}

/// The writers of `topic` in `g`, or why there are none.
pub fn writers_of(g: &Graph, topic: &str) -> Result<Vec<Endpoint>, ObserveError> {
    let w: Vec<Endpoint> = g.writers.iter().filter(|e| e.topic == topic).cloned().collect();
    if w.is_empty() {
        let topics = g.topics();
        let seen = if topics.is_empty() {
            if g.participants.is_empty() {
                "nobody in the domain: check --domain, --interface, --peer".to_string()
            } else {
                format!("{} participants, no topic", g.participants.len())
            }
        } else {
            let names: Vec<&str> =
                topics.iter().filter(|t| t.writers > 0).map(|t| t.topic.as_str()).take(8).collect();
            format!("topics with writers: {}", names.join(", "))
        };
        return Err(ObserveError::NoPublisher { topic: topic.into(), domain: g.domain, seen });
    }
    Ok(w)
}

/// Observe until the duration or `stop`.
/// The std_msgs/Header stamp a sample starts with (ns since the epoch), in the sample's own
/// byte order; None when the sample is too short to hold one.
pub fn header_stamp_ns(s: &crate::transport::cyclonedds::RawSample) -> Option<i64> {
    if s.head_len < 8 {
        return None;
    }
    let b = &s.head;
    let (sec, nsec) = if s.encapsulation & 1 == 1 {
        (i32::from_le_bytes([b[0], b[1], b[2], b[3]]), u32::from_le_bytes([b[4], b[5], b[6], b[7]]))
    } else {
        (i32::from_be_bytes([b[0], b[1], b[2], b[3]]), u32::from_be_bytes([b[4], b[5], b[6], b[7]]))
    };
    Some(sec as i64 * 1_000_000_000 + nsec as i64)
}

/// A reader of a live topic, matched with its writers (what [`observe`] and the monitor read).
pub struct LiveReader {
    /// The domain the reader lives in (kept: the reader lives as long as it).
    pub transport: CycloneDdsTransport,
    pub reader: RawReader,
    pub type_name: String,
    pub writers: Vec<Endpoint>,
    /// The reader's reliability, its QoS said in one line.
    pub reliability: Reliability,
    pub note: String,
}

/// Find the topic's writers and open a reader matched with them (see the module's contract:
/// each failure is one line).
pub fn open_reader(cfg: &ObserveConfig) -> Result<LiveReader, ObserveError> {
    // the domain is opened first and kept: Cyclone's discovery is per domain, so the reader
    // made after the graph matches the writers already found at once (a domain opened anew
    // would learn them again: seconds with a DDS that announces endpoints slowly, RustDDS)
    let transport = CycloneDdsTransport::with_network(cfg.domain, &cfg.net)?;
    let g = discover(
        cfg.domain,
        &cfg.net,
        std::time::Duration::from_nanos(cfg.discover_ns.max(0) as u64),
    )?;
    let writers = writers_of(&g, &cfg.topic)?;
    let type_name = one_type(&cfg.topic, &writers)?;
    let reliability = reader_reliability(cfg, &writers)?;
    let qos =
        Qos { reliability, history: History::KeepLast(100), durability: Durability::Volatile };
    let (reader, keyed) = matched_reader(&transport, cfg, &type_name, &qos, &writers)?;
    let note = format!(
        "reader: {} (every writer offers {}), keep-last:100, volatile; type {type_name} ({}) taken as serialized bytes",
        reliability_name(reliability),
        writers.iter().map(|w| w.qos.reliability.as_str()).collect::<Vec<_>>().join("/"),
        if keyed { "keyed" } else { "keyless" }
    );
    Ok(LiveReader { transport, reader, type_name, writers, reliability, note })
}

pub fn observe(cfg: &ObserveConfig, stop: Arc<AtomicBool>) -> Result<ObserveOutcome, ObserveError> {
    let LiveReader { transport, reader, type_name, writers, reliability, note } = open_reader(cfg)?;
    let mut notes = vec![note];
    let started = monotonic_ns();
    let o = measure(cfg, reader, stop)?;
    let duration_ns = monotonic_ns() - started;
    drop(transport);
    if o.errors > 0 {
        notes.push(format!("{} takes failed", o.errors));
    }
    let streams = streams(cfg, &type_name, writers.len(), &o);
    let a = o.arrivals;
    if a.estimated() {
        notes.push(format!(
            "nominal period estimated: {} ns (the median of the first periods; give --rate for the topic's own)",
            a.nominal_ns().unwrap_or(0)
        ));
    }
    Ok(ObserveOutcome {
        topic: cfg.topic.clone(),
        type_name,
        writers,
        reader_reliability: reliability_name(reliability).into(),
        nominal_ns: a.nominal_ns(),
        nominal_estimated: a.estimated(),
        received: a.received,
        gaps: a.gaps,
        missed_periods: a.missed_periods,
        bursts: a.bursts,
        size_min: (a.received > 0).then_some(a.size_min),
        size_max: (a.received > 0).then_some(a.size_max),
        size_mean: (a.received > 0).then(|| a.size_sum as f64 / a.received as f64),
        streams,
        interrupted: false,
        duration_ns,
        notes,
    })
}

fn reliability_name(r: Reliability) -> &'static str {
    match r {
        Reliability::Reliable => "reliable",
        Reliability::BestEffort => "best-effort",
    }
}

/// The one type the writers of `topic` share, or the error naming them all.
fn one_type(topic: &str, writers: &[Endpoint]) -> Result<String, ObserveError> {
    let mut types: Vec<&str> = writers.iter().map(|w| w.type_name.as_str()).collect();
    types.sort_unstable();
    types.dedup();
    if types.len() > 1 {
        return Err(ObserveError::SeveralTypes { topic: topic.into(), types: types.join(", ") });
    }
    Ok(types[0].to_string())
}

/// The reader's reliability: as asked (reliable cannot match a best-effort writer), else
/// what every writer can match.
fn reader_reliability(
    cfg: &ObserveConfig,
    writers: &[Endpoint],
) -> Result<Reliability, ObserveError> {
    let best_effort_writer = writers.iter().find(|w| w.qos.reliability == "best-effort");
    Ok(match (cfg.reliability, best_effort_writer) {
        (Some(Reliability::Reliable), Some(w)) => {
            return Err(ObserveError::Incompatible {
                topic: cfg.topic.clone(),
                writer: w.guid.clone(),
            })
        }
        (Some(r), _) => r,
        (None, Some(_)) => Reliability::BestEffort,
        (None, None) => Reliability::Reliable,
    })
}

/// A reader of the topic that matched a writer (within [`MATCH_WAIT_NS`]), and whether it
/// is keyed: keyless first (every ROS 2 type is), keyed when that matches no writer (e.g.
/// ddsperf's KeyedSeq); the serialized bytes are kept either way.
fn matched_reader(
    transport: &CycloneDdsTransport,
    cfg: &ObserveConfig,
    type_name: &str,
    qos: &Qos,
    writers: &[Endpoint],
) -> Result<(RawReader, bool), ObserveError> {
    for keyless in [true, false] {
        let r = transport.raw_reader(&cfg.topic, type_name, keyless, qos)?;
        let until = monotonic_ns() + MATCH_WAIT_NS;
        while r.matched() == 0 && monotonic_ns() < until {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        if r.matched() > 0 {
            return Ok((r, !keyless));
        }
    }
    Err(ObserveError::NoMatch {
        topic: cfg.topic.clone(),
        offered: writers
            .iter()
            .map(|w| format!("{} {} {}", w.qos.reliability, w.qos.durability, w.qos.history))
            .collect::<Vec<_>>()
            .join("; "),
    })
}

/// What the measuring thread recorded.
struct Observed {
    arrivals: Arrivals,
    period: Recorder,
    deviation: Recorder,
    latency: Recorder,
    /// Takes that failed.
    errors: u64,
}

/// The measuring thread (policy, priority and CPU of `cfg.rt`): take, stamp and record into
/// recorders it allocates before its loop, until the duration or `stop`.
fn measure(
    cfg: &ObserveConfig,
    mut reader: RawReader,
    stop: Arc<AtomicBool>,
) -> Result<Observed, ObserveError> {
    let window = cfg.window_ns;
    let duration = cfg.duration_ns;
    let header = cfg.header_latency;
    let nominal = cfg.nominal_ns;
    let spec = rtlab_sys::sched::ThreadSpec {
        name: "rtlab-observe".into(),
        policy: cfg.rt.policy,
        priority: cfg.rt.priority,
        cpus: cfg.rt.cpu_of(0).map(|c| vec![c]),
        stack_bytes: 512 * 1024,
    };
    let t = rtlab_sys::sched::spawn_rt(&spec, move || {
        let (mut period, mut deviation, mut latency) =
            (recorder(window, duration), recorder(window, duration), recorder(window, duration));
        let mut a = Arrivals::new(nominal);
        let mut errors = 0u64;
        // cost: this thread's counters right before its loop and right after it
        let cost = rtlab_sys::usage::begin("observe");
        let end = monotonic_ns() + duration;
        let mut origin = None;
        while !stop.load(Ordering::Relaxed) && monotonic_ns() < end {
            match reader.wait_take(50_000_000) {
                Ok(Some(s)) => {
                    let now = monotonic_ns();
                    let wall = realtime_ns();
                    let o = *origin.get_or_insert(now);
                    if period.origin_monotonic_ns.is_none() {
                        period.origin_monotonic_ns = Some(o);
                        deviation.origin_monotonic_ns = Some(o);
                        latency.origin_monotonic_ns = Some(o);
                    }
                    a.arrive(now, s.size, &mut period, &mut deviation);
                    if let Some(stamp) = header.then(|| header_stamp_ns(&s)).flatten() {
                        latency.record(a.received - 1, now - o, wall - stamp);
                    }
                }
                Ok(None) => {}
                Err(_) => errors += 1,
            }
        }
        cost.end();
        rtlab_sys::usage::set_messages("observe", a.received);
        a.finish(&mut period, &mut deviation);
        Observed { arrivals: a, period, deviation, latency, errors }
    })
    .map_err(|e| ObserveError::Rt(e.to_string()))?;
    t.join().map_err(|_| ObserveError::Rt("the observing thread panicked".into()))
}

/// `<topic>.period`, `<topic>.deviation` and, with header latency, `<topic>.latency` (the
/// topic's ROS 2 name when it has one), labelled with the topic, its type, the domain, the
/// writers and the nominal period; no deadline.
fn streams(cfg: &ObserveConfig, type_name: &str, writers: usize, o: &Observed) -> Vec<Stream> {
    let a = &o.arrivals;
    let short = rtlab_core::graph::ros_topic(&cfg.topic).unwrap_or_else(|| cfg.topic.clone());
    let mut labels = BTreeMap::new();
    labels.insert("topic".to_string(), cfg.topic.clone());
    labels.insert("type".to_string(), type_name.to_string());
    labels.insert("domain".to_string(), cfg.domain.to_string());
    labels.insert("writers".to_string(), writers.to_string());
    if let Some(n) = a.nominal_ns() {
        labels.insert("nominal_period_ns".to_string(), n.to_string());
        labels.insert(
            "nominal".to_string(),
            if a.estimated() { "estimated" } else { "given" }.into(),
        );
    }
    let mut streams = vec![
        Stream::from_recorder(
            format!("{short}.period"),
            "arrival_period",
            PERIOD_DEFINITION,
            labels.clone(),
            &o.period,
        ),
        Stream::from_recorder(
            format!("{short}.deviation"),
            "period_deviation",
            DEVIATION_DEFINITION,
            labels.clone(),
            &o.deviation,
        ),
    ];
    if cfg.header_latency {
        streams.push(Stream::from_recorder(
            format!("{short}.latency"),
            "header_latency",
            LATENCY_DEFINITION,
            labels,
            &o.latency,
        ));
    }
    for s in &mut streams {
        s.deadline_ns = 0;
        s.stats.missed = None;
    }
    streams
}
