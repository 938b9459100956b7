//! `rtlab observe`: the graph of a live DDS / ROS 2 domain, read from DDS's built-in topics:
//! who is there, every topic with its type name, and the QoS each writer offers and each
//! reader requests; with `--topic` (ROS 2 name) or `--dds-topic`, one live topic measured:
//! arrival period, deviation from the nominal rate, gaps, bursts, sizes, and the Header
//! stamp's latency when the clocks agree (`--synced-clocks`).

use crate::document::{check_writable, write_text};
use clap::Args;
use rtlab_core::render::{stats_table, Row};
use rtlab_lab::config::{from_table, FlagTable};
use rtlab_lab::probe::Context;
use rtlab_lab::probes::observe::{self, ObserveProbeConfig};
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

impl ObserveArgs {
    /// The flags given, as the probe's table (every default lives in the configuration).
    pub fn table(&self) -> toml::Table {
        let mut t = FlagTable::default();
        t.int("domain", self.domain)
            .str("interface", &self.interface)
            .list("peer", &self.peer)
            .str("wait", &self.wait)
            .str("topic", &self.topic)
            .str("dds_topic", &self.dds_topic)
            .str("rate", &self.rate)
            .str("duration", &self.duration)
            .str("reliability", &self.reliability)
            .flag("synced_clocks", self.synced_clocks, true)
            .flag("header", self.header, true)
            .str("window", &self.window);
        self.rt.fill(&mut t);
        t.take()
    }
}

pub fn run(a: ObserveArgs) -> anyhow::Result<u8> {
    let cfg: ObserveProbeConfig =
        from_table(&a.table()).map_err(|e| anyhow::anyhow!(e.cli_text()))?;
    if let Some(p) = &a.json {
        check_writable(p, "--json")?;
    }
    if cfg.dds_name().is_some() {
        return measure(&a, &cfg);
    }
    let net = cfg.network();
    let domain = cfg.domain;
    let wait = cfg.wait.0;
    let g = discover(domain, &net, std::time::Duration::from_nanos(wait as u64))
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
fn measure(a: &ObserveArgs, cfg: &ObserveProbeConfig) -> anyhow::Result<u8> {
    use rtlab_core::units::{format_duration_exact, Nanos};
    let stop = super::stop_flag()?;
    // no machine lock: observing listens to traffic others make (an rtlab publisher by
    // hand holds the lock while it runs)
    if !a.quiet {
        println!(
            "rtlab observe: {} in domain {} for {}{}",
            cfg.dds_name().unwrap_or_default(),
            cfg.domain,
            format_duration_exact(Nanos(cfg.duration.unwrap_or(observe::DEFAULT_DURATION).0)),
            cfg.rate
                .as_ref()
                .map(|r| format!(", nominal period {}", format_duration_exact(Nanos(r.period_ns))))
                .unwrap_or_default()
        );
    }
    let mut noop = |_: u64, _: u64| {};
    let mut ctx = Context::new(observe::default_rt(), stop, &mut noop);
    ctx.evidence = a.evidence.options()?;
    let observe::Observed { doc, outcome: o } =
        observe::measure(cfg, &mut ctx).map_err(super::lab_error)?;
    if let Some(p) = &a.json {
        crate::document::write_json(&doc, p)?;
    }
    if !a.quiet {
        let rows: Vec<Row> =
            doc.streams.iter().map(|s| Row { label: s.name.clone(), summary: &s.stats }).collect();
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
        print!("{}", stats_table(&rows, std::io::IsTerminal::is_terminal(&std::io::stdout())));
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
