//! `rtlab observe`: the graph of a live DDS / ROS 2 domain, read from DDS's built-in topics:
//! who is there, every topic with its type name, and the QoS each writer offers and each
//! reader requests; with `--topic` (ROS 2 name) or `--dds-topic`, one live topic measured:
//! arrival period, deviation from the nominal rate, gaps, bursts, sizes, and the Header
//! stamp's latency when the clocks agree (`--synced-clocks`).

use crate::document::{check_writable, write_text};
use clap::Args;
use rtlab_pubsub::dds::DdsNetwork;
use rtlab_pubsub::dds_graph::{discover, Graph};

#[derive(Args, Debug)]
pub struct ObserveArgs {
    /// The DDS domain id (ROS_DOMAIN_ID) [0].
    #[arg(long)]
    pub domain: Option<i64>,
    /// The interface (name or address) to discover on [loopback only].
    #[arg(long, value_name = "IF|ADDR")]
    pub interface: Option<String>,
    /// Unicast discovery peers (none: multicast on --interface).
    #[arg(long, value_delimiter = ',', value_name = "ADDR")]
    pub peer: Vec<String>,
    /// How long to listen for discovery [2s].
    #[arg(long)]
    pub wait: Option<String>,
    /// Write the graph (or, with a topic, the result document) as JSON (- for stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Measure this live topic, by its ROS 2 name (/joint_states).
    #[arg(long, value_name = "NAME", conflicts_with = "dds_topic")]
    pub topic: Option<String>,
    /// Measure this live topic, by its raw DDS name (rt/joint_states, DDSPerfRDataKS).
    #[arg(long, value_name = "NAME")]
    pub dds_topic: Option<String>,
    /// The topic's nominal rate, e.g. 100hz [estimated from the first periods].
    #[arg(long)]
    pub rate: Option<String>,
    /// How long to measure [10s].
    #[arg(long, short = 'D')]
    pub duration: Option<String>,
    /// The reader's reliability: reliable | best-effort [what every writer can match].
    #[arg(long)]
    pub reliability: Option<String>,
    /// The publisher's clock agrees with this one (same host, PTP, chrony): latency from the
    /// std_msgs/Header stamp of types that start with one.
    #[arg(long)]
    pub synced_clocks: bool,
    /// The type starts with a std_msgs/Header (for types rtlab does not know to).
    #[arg(long, requires = "synced_clocks")]
    pub header: bool,
    /// Width of a max-over-time window [1s].
    #[arg(long)]
    pub window: Option<String>,
    #[command(flatten)]
    pub rt: crate::args::RtArgs,
    #[command(flatten)]
    pub evidence: crate::args::EvidenceArgs,
    /// Print only errors.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

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
    rtlab_pubsub::dds_graph::ros_type(dds_type)
        .is_some_and(|t| HEADER_FIRST.contains(&t.as_str()) || t.ends_with("Stamped"))
}

pub fn run(a: ObserveArgs) -> anyhow::Result<u8> {
    let domain = a.domain.unwrap_or(0);
    let max = rtlab_pubsub::dds::MAX_DOMAIN as i64;
    if !(0..=max).contains(&domain) {
        anyhow::bail!("--domain {domain}: a DDS domain id is 0..={max} here (the ports of a higher one overflow)");
    }
    let wait = match &a.wait {
        Some(w) => super::duration_flag("--wait", w)?,
        None => 2_000_000_000,
    };
    if wait <= 0 {
        anyhow::bail!("--wait: must be above zero");
    }
    if let Some(p) = &a.json {
        check_writable(p, "--json")?;
    }
    let net = DdsNetwork { interface: a.interface.clone(), peers: a.peer.clone() };
    let topic = match (&a.topic, &a.dds_topic) {
        (Some(t), _) => {
            if !t.starts_with('/') || t.len() < 2 {
                anyhow::bail!(
                    "--topic '{t}': a ROS 2 name starts with / (raw DDS names: --dds-topic)"
                );
            }
            Some(format!("rt{t}"))
        }
        (None, Some(d)) => Some(d.clone()),
        (None, None) => None,
    };
    if let Some(topic) = topic {
        return measure(&a, domain as u32, net, topic, wait);
    }
    let g = discover(domain as u32, &net, std::time::Duration::from_nanos(wait as u64))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(p) = &a.json {
        write_text(&(serde_json::to_string_pretty(&g)? + "\n"), p)?;
    }
    if a.json.as_deref() != Some("-") {
        print!("{}", render(&g, &net));
    }
    Ok(0)
}

/// The graph as the terminal shows it: topics (ROS 2 names where they follow ROS 2's
/// mapping), then every endpoint with its QoS.
fn render(g: &Graph, net: &DdsNetwork) -> String {
    let mut s = format!(
        "domain {} ({}): {} participants, {} writers, {} readers\n",
        g.domain,
        match &net.interface {
            None => "loopback".to_string(),
            Some(i) if net.peers.is_empty() => format!("{i}, multicast discovery"),
            Some(i) => format!("{i}, peers {}", net.peers.join(",")),
        },
        g.participants.len(),
        g.writers.len(),
        g.readers.len()
    );
    if g.participants.is_empty() {
        s.push_str("nobody there: check --domain (ROS_DOMAIN_ID), --interface and --peer\n");
        return s;
    }
    let topics = g.topics();
    let w = topics.iter().map(|t| t.ros_name.as_ref().unwrap_or(&t.topic).len()).max().unwrap_or(5);
    s.push_str(&format!("\n{:w$}  {:>7}  {:>7}  type\n", "topic", "writers", "readers"));
    for t in &topics {
        s.push_str(&format!(
            "{:w$}  {:>7}  {:>7}  {}\n",
            t.ros_name.as_ref().unwrap_or(&t.topic),
            t.writers,
            t.readers,
            t.ros_type.as_ref().unwrap_or(&t.type_name)
        ));
    }
    s.push_str("\nendpoints (QoS: reliability, durability, history)\n");
    for (kind, list) in [("writer", &g.writers), ("reader", &g.readers)] {
        for e in list {
            s.push_str(&format!(
                "  {kind} {} {}: {}, {}, {} (participant {})\n",
                e.topic,
                e.type_name,
                e.qos.reliability,
                e.qos.durability,
                e.qos.history,
                &e.participant[..8.min(e.participant.len())]
            ));
        }
    }
    s
}

/// Measure one live topic and print / write what it did.
fn measure(
    a: &ObserveArgs,
    domain: u32,
    net: DdsNetwork,
    topic: String,
    discover_ns: i64,
) -> anyhow::Result<u8> {
    use rtlab_core::units::{format_duration_exact, Nanos};
    let nominal_ns = match &a.rate {
        Some(r) => {
            let hz =
                rtlab_core::units::parse_rate_hz(r).map_err(|e| anyhow::anyhow!("--rate {e}"))?;
            if !(hz > 0.0 && hz <= 1e6) {
                anyhow::bail!("--rate {r}: between 0 and 1 MHz");
            }
            Some((1e9 / hz).round() as i64)
        }
        None => None,
    };
    let duration_ns = match &a.duration {
        Some(d) => super::duration_flag("--duration", d)?,
        None => 10_000_000_000,
    };
    let window_ns = match &a.window {
        Some(w) => super::duration_flag("--window", w)?,
        None => 1_000_000_000,
    };
    if duration_ns <= 0 || window_ns <= 0 {
        anyhow::bail!("--duration and --window: must be above zero");
    }
    let reliability = match a.reliability.as_deref() {
        None => None,
        Some("reliable") => Some(rtlab_pubsub::Reliability::Reliable),
        Some("best-effort") => Some(rtlab_pubsub::Reliability::BestEffort),
        Some(other) => anyhow::bail!("--reliability '{other}': reliable or best-effort"),
    };
    let mut table = rtlab_lab::config::FlagTable::default();
    a.rt.fill(&mut table);
    let rt_fields: rtlab_lab::config::RtFields = toml::Value::Table(table.take())
        .try_into()
        .map_err(|e: toml::de::Error| anyhow::anyhow!("{}", e.message()))?;
    let rt = rt_fields.over(&rtlab_core::rt::RtSettings {
        mlockall: true,
        ..rtlab_core::rt::RtSettings::normal()
    });
    rt.check().map_err(|m| anyhow::anyhow!("--priority: {m}"))?;
    let stop = super::stop_flag()?;
    let mut ev = a.evidence.options()?;
    ev.window_ns = window_ns;
    ev.victim = "rtlab-observe".into();
    ev.planned = Some(std::time::Duration::from_nanos(duration_ns as u64));
    let evidence = rtlab_lab::evidence::EvidenceRun::start(rtlab_lab::executor::host(), &ev)
        .map_err(super::lab_error)?;
    let env = rtlab_sys::env::detect(std::path::Path::new("/"));
    let started = std::time::SystemTime::now();
    let (lock_guard, memory_lock) = rtlab_probes::hold::lock_memory(rt.mlockall);
    if !a.quiet {
        println!(
            "rtlab observe: {topic} in domain {domain} for {}{}",
            format_duration_exact(Nanos(duration_ns)),
            nominal_ns
                .map(|p| format!(", nominal period {}", format_duration_exact(Nanos(p))))
                .unwrap_or_default()
        );
    }
    // the Header's latency needs the type, known only once discovered: decided inside
    let probe_cfg = rtlab_pubsub::observe::ObserveConfig {
        domain,
        net,
        topic: topic.clone(),
        nominal_ns,
        duration_ns,
        window_ns,
        reliability,
        header_latency: false,
        discover_ns,
        rt: rt.clone(),
    };
    let g = rtlab_pubsub::dds_graph::discover(
        domain,
        &probe_cfg.net,
        std::time::Duration::from_nanos(discover_ns as u64),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let writers =
        rtlab_pubsub::observe::writers_of(&g, &topic).map_err(|e| anyhow::anyhow!("{e}"))?;
    let header =
        a.synced_clocks && (a.header || writers.iter().all(|w| starts_with_header(&w.type_name)));
    let cfg = rtlab_pubsub::observe::ObserveConfig { header_latency: header, ..probe_cfg };
    let outcome = rtlab_pubsub::observe::observe(&cfg, stop.clone());
    let streams = outcome.as_ref().map(|o| o.streams.clone()).unwrap_or_default();
    let evidence = evidence.finish(&streams);
    let mut o = outcome.map_err(|e| anyhow::anyhow!("{e}"))?;
    o.interrupted = stop.load(std::sync::atomic::Ordering::Relaxed);
    if !a.synced_clocks {
        o.notes.push("no header latency: the publisher's clock is not known to agree with this one (--synced-clocks)".into());
    } else if !header {
        o.notes.push("no header latency: the type is not known to start with a std_msgs/Header (--header if it does)".into());
    }
    let config = serde_json::json!({
        "domain": domain, "topic": topic, "nominal_period_ns": nominal_ns, "duration_ns": duration_ns,
        "window_ns": window_ns, "header_latency": header, "synced_clocks": a.synced_clocks,
        "observed": {
            "type_name": o.type_name, "writers": o.writers, "reader_reliability": o.reader_reliability,
            "nominal_ns": o.nominal_ns, "nominal_estimated": o.nominal_estimated,
            "received": o.received, "gaps": o.gaps, "missed_periods": o.missed_periods, "bursts": o.bursts,
            "size_min": o.size_min, "size_max": o.size_max, "size_mean": o.size_mean,
        },
        "notes": o.notes,
    });
    let mut doc = rtlab_lab::document::new_document("observe", started, env, config);
    doc.duration_ns = o.duration_ns;
    doc.interrupted = o.interrupted;
    doc.streams = o.streams.clone();
    doc.evidence = Some(evidence);
    let facts = rtlab_lab::document::RunFacts {
        memory_lock: &memory_lock,
        any_other_policy: rt.policy == rtlab_core::rt::Policy::Other,
        mlockall_off_by_profile: false,
        cpu_dma_latency_error: None,
        fewest_samples: doc.streams.iter().map(|s| s.stats.count).min().unwrap_or(0),
        interrupted: o.interrupted,
    };
    doc.environment.memory_locked = matches!(memory_lock, Some(Ok(())));
    doc.warnings = rtlab_lab::document::run_warnings(&doc.environment, &facts, Vec::new());
    drop(lock_guard);
    if let Some(p) = &a.json {
        crate::document::write_json(&doc, p)?;
    }
    if !a.quiet {
        let rows: Vec<rtlab_core::render::Row> = doc
            .streams
            .iter()
            .map(|s| rtlab_core::render::Row { label: s.name.clone(), summary: &s.stats })
            .collect();
        println!(
            "{} ({}), {} writer(s), reader {}: {} messages, sizes {}..{} B (mean {:.0})",
            o.topic,
            o.type_name,
            o.writers.len(),
            o.reader_reliability,
            o.received,
            o.size_min.unwrap_or(0),
            o.size_max.unwrap_or(0),
            o.size_mean.unwrap_or(0.0)
        );
        print!(
            "{}",
            rtlab_core::render::stats_table(
                &rows,
                std::io::IsTerminal::is_terminal(&std::io::stdout())
            )
        );
        println!(
            "nominal period {} ({}): gaps {} (periods missed {}), bursts {}",
            o.nominal_ns.map(|p| format_duration_exact(Nanos(p))).unwrap_or_else(|| "-".into()),
            if o.nominal_estimated { "estimated" } else { "given" },
            o.gaps,
            o.missed_periods,
            o.bursts
        );
        for n in &o.notes {
            println!("note: {n}");
        }
        for w in &doc.warnings {
            eprintln!("warning: {}", w.message);
        }
    }
    super::print_evidence(doc.evidence.as_ref(), &doc.streams, a.quiet);
    Ok(0)
}
