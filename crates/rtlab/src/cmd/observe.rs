//! `rtlab observe`: the graph of a live DDS / ROS 2 domain, read from DDS's built-in topics:
//! who is there, every topic with its type name, and the QoS each writer offers and each
//! reader requests; with `--topic` (ROS 2 name) or `--dds-topic`, one live topic measured:
//! arrival period, deviation from the nominal rate, gaps, bursts, sizes, and the Header
//! stamp's latency when the clocks agree (`--synced-clocks`). ROS 2's nodes, from what ROS 2
//! announces on `ros_discovery_info`: each endpoint's node, and every node with its topics
//! and services (as `ros2 node list` / `ros2 node info`).

use crate::document::{check_writable, write_text};
use clap::Args;
use rtlab_lab::config::{from_table, FlagTable};
use rtlab_lab::probes::observe::{self, ObserveProbeConfig};
use rtlab_report::render::{stats_table, Row};

#[derive(Args, Debug)]
#[command(mut_arg("policy", |a| a.help("Scheduling policy of the reading thread [other]")))]
pub struct ObserveArgs {
    #[command(flatten)]
    pub network: crate::args::DdsNetworkArgs,
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
        self.network.fill(&mut t);
        t.str("wait", &self.wait)
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
    let g = observe::graph(&cfg).map_err(super::lab_error)?;
    if let Some(p) = &a.json {
        write_text(&(serde_json::to_string_pretty(&g)? + "\n"), p)?;
    }
    if a.json.as_deref() != Some("-") {
        print!("{}", rtlab_report::graph::render(&g, cfg.interface.as_deref(), &cfg.peer.0));
    }
    Ok(0)
}

/// Measure one live topic and print / write what it did.
fn measure(a: &ObserveArgs, cfg: &ObserveProbeConfig) -> anyhow::Result<u8> {
    use rtlab_core::units::{format_duration_exact, Nanos};
    let profile = super::command_profile(&a.rt)?;
    let base = super::rt_base(profile.as_ref(), observe::default_rt());
    let stop = super::stop_flag()?;
    let headline = format!(
        "rtlab observe: {} in domain {} for {}{}",
        cfg.dds_name().unwrap_or_default(),
        cfg.domain,
        format_duration_exact(Nanos(cfg.duration.unwrap_or(observe::DEFAULT_DURATION).0)),
        cfg.rate
            .as_ref()
            .map(|r| format!(", nominal period {}", format_duration_exact(Nanos(r.period_ns))))
            .unwrap_or_default()
    );
    let mut say = super::Say::new("observe", 0, a.quiet, |_| headline.clone());
    // no machine lock: observing listens to traffic others make (an rtlab publisher by
    // hand holds the lock while it runs); a --profile is refused by the journal while
    // another rtlab's is in force
    let command = super::probe_command(None, profile.as_ref(), base, stop, a.evidence.options()?);
    let (doc, o) = command
        .run(cfg, &mut say, |ctx| observe::measure(cfg, ctx).map(|m| (m.doc, m.outcome)))
        .map_err(super::lab_error)?;
    if let Some(p) = &a.json {
        crate::document::write_json(&doc, p)?;
    }
    if !a.quiet {
        let rows: Vec<Row> =
            doc.streams.iter().map(|s| Row { label: s.name.clone(), summary: &s.stats }).collect();
        let mut nodes: Vec<&str> = o.writers.iter().filter_map(|w| w.node.as_deref()).collect();
        nodes.sort_unstable();
        nodes.dedup();
        println!(
            "{} ({}), {} writer(s){}, reader {}: {} messages, sizes {}..{} B (mean {:.0})",
            o.topic,
            o.type_name,
            o.writers.len(),
            if nodes.is_empty() { String::new() } else { format!(" of node {}", nodes.join(", ")) },
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
    super::print_cost(&doc, a.quiet);
    Ok(0)
}
