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
use rtlab_lab::probe::Context;
use rtlab_lab::probes::observe::{self, ObserveProbeConfig};
use rtlab_pubsub::observe::dds_graph::{discover, Graph};
use rtlab_pubsub::transport::cyclonedds::DdsNetwork;
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
/// mapping), ROS 2's nodes with what each publishes, subscribes and serves, then every
/// endpoint with its QoS and node.
fn render(g: &Graph, net: &DdsNetwork) -> String {
    let mut s = format!(
        "domain {} ({}): {} participants, {} nodes, {} writers, {} readers\n",
        g.domain,
        match &net.interface {
            None => "loopback".to_string(),
            Some(i) if net.peers.is_empty() => format!("{i}, multicast discovery"),
            Some(i) => format!("{i}, peers {}", net.peers.join(",")),
        },
        g.participants.len(),
        g.nodes.len(),
        g.writers.len(),
        g.readers.len()
    );
    if g.participants.is_empty() {
        s.push_str("nobody there: check --domain (ROS_DOMAIN_ID), --interface and --peer\n");
        return s;
    }
    let short = short_len(&g.participants);
    let id = |p: &str| p[..short.min(p.len())].to_string();
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
    if !g.nodes.is_empty() {
        s.push_str("\nnodes (ROS 2)\n");
    }
    for n in &g.nodes {
        s.push_str(&format!("{} (participant {})\n", n.full_name, id(&n.participant)));
        for (what, list) in [
            ("subscribers", &n.subscribers),
            ("publishers", &n.publishers),
            ("service servers", &n.service_servers),
            ("service clients", &n.service_clients),
        ] {
            if list.is_empty() {
                continue;
            }
            s.push_str(&format!("  {what}:\n"));
            for t in list {
                s.push_str(&format!("    {}: {}\n", t.name, t.type_name));
            }
        }
        if n.unseen > 0 {
            s.push_str(&format!(
                "  {} more endpoint(s) announced by the node, not yet discovered (a longer --wait shows them)\n",
                n.unseen
            ));
        }
    }
    s.push_str("\nendpoints (QoS: reliability, durability, history)\n");
    for (kind, list) in [("writer", &g.writers), ("reader", &g.readers)] {
        for e in list {
            s.push_str(&format!(
                "  {kind} {} {}: {}, {}, {} (participant {}{})\n",
                e.topic,
                e.type_name,
                e.qos.reliability,
                e.qos.durability,
                e.qos.history,
                id(&e.participant),
                e.node.as_ref().map(|n| format!(", node {n}")).unwrap_or_default()
            ));
        }
    }
    for n in &g.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    s
}

/// How many leading hex digits of a participant's GUID the terminal shows: 8, or more until
/// no two participants look alike (Fast DDS's GUIDs of one host share their first 8: vendor
/// and host; the process id follows).
fn short_len(participants: &[String]) -> usize {
    let mut len = 8;
    while len < 32 {
        let mut firsts: Vec<&str> = participants.iter().map(|p| &p[..len.min(p.len())]).collect();
        firsts.sort_unstable();
        firsts.dedup();
        if firsts.len() == participants.len() {
            break;
        }
        len += 8;
    }
    len
}

/// Measure one live topic and print / write what it did.
fn measure(a: &ObserveArgs, cfg: &ObserveProbeConfig) -> anyhow::Result<u8> {
    use rtlab_core::units::{format_duration_exact, Nanos};
    let profile = super::command_profile(&a.rt)?;
    let base = super::rt_base(profile.as_ref(), observe::default_rt());
    let stop = super::stop_flag()?;
    // no machine lock: observing listens to traffic others make (an rtlab publisher by
    // hand holds the lock while it runs); a --profile is refused by the journal while
    // another rtlab's is in force
    let applied = super::apply_profile(profile.as_ref(), cfg, &base, a.quiet)?;
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
    let mut ctx = Context::new(base, stop, &mut noop);
    ctx.evidence = a.evidence.options()?;
    let observe::Observed { mut doc, outcome: o } =
        observe::measure(cfg, &mut ctx).map_err(super::lab_error)?;
    super::finish_profile(applied, &mut doc, a.quiet);
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

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_pubsub::observe::dds_graph::{Endpoint, EndpointQos, Node, NodeTopic};

    fn endpoint(topic: &str, type_name: &str, node: Option<&str>) -> Endpoint {
        Endpoint {
            guid: "0102".into(),
            participant: "0a0b0c0d0e0f".into(),
            topic: topic.into(),
            type_name: type_name.into(),
            qos: EndpointQos {
                reliability: "reliable".into(),
                durability: "transient-local".into(),
                history: "keep-last:1".into(),
            },
            node: node.map(String::from),
        }
    }

    /// The terminal's graph: the node list as `ros2 node info` shows it, the node of each
    /// endpoint, none on a non-ROS endpoint, and the graph's notes.
    #[test]
    fn the_graph_shows_nodes_their_topics_and_each_endpoints_node() {
        let t = |name: &str, ty: &str| NodeTopic { name: name.into(), type_name: ty.into() };
        let g = Graph {
            domain: 3,
            participants: vec!["0a0b0c0d0e0f".into()],
            writers: vec![
                endpoint("rt/chatter", "std_msgs::msg::dds_::String_", Some("/robot1/talker")),
                endpoint("DDSPerfRDataKS", "KeyedSeq", None),
            ],
            readers: vec![endpoint(
                "rq/robot1/talker/get_parametersRequest",
                "rcl_interfaces::srv::dds_::GetParameters_Request_",
                Some("/robot1/talker"),
            )],
            nodes: vec![Node {
                full_name: "/robot1/talker".into(),
                namespace: "/robot1".into(),
                name: "talker".into(),
                participant: "0a0b0c0d0e0f".into(),
                publishers: vec![t("/chatter", "std_msgs/msg/String")],
                subscribers: vec![],
                service_servers: vec![t(
                    "/robot1/talker/get_parameters",
                    "rcl_interfaces/srv/GetParameters",
                )],
                service_clients: vec![],
                unseen: 2,
            }],
            notes: vec!["1 ros_discovery_info sample(s) not read".into()],
        };
        let net = DdsNetwork { interface: Some("eth0".into()), peers: vec![] };
        let s = render(&g, &net);
        assert!(
            s.starts_with("domain 3 (eth0, multicast discovery): 1 participants, 1 nodes, 2 writers, 1 readers\n"),
            "{s}"
        );
        let nodes = "\nnodes (ROS 2)\n/robot1/talker (participant 0a0b0c0d)\n  publishers:\n    /chatter: std_msgs/msg/String\n  service servers:\n    /robot1/talker/get_parameters: rcl_interfaces/srv/GetParameters\n  2 more endpoint(s) announced by the node, not yet discovered (a longer --wait shows them)\n";
        assert!(s.contains(nodes), "{s}");
        assert!(!s.contains("subscribers:"), "empty lists are left out: {s}");
        assert!(
            s.contains("  writer rt/chatter std_msgs::msg::dds_::String_: reliable, transient-local, keep-last:1 (participant 0a0b0c0d, node /robot1/talker)\n"),
            "{s}"
        );
        assert!(
            s.contains("  writer DDSPerfRDataKS KeyedSeq: reliable, transient-local, keep-last:1 (participant 0a0b0c0d)\n"),
            "{s}"
        );
        assert!(s.ends_with("note: 1 ros_discovery_info sample(s) not read\n"), "{s}");
        // no ROS 2 participant: no node section
        let plain = Graph { nodes: vec![], notes: vec![], ..g };
        assert!(!render(&plain, &net).contains("nodes (ROS 2)"));
    }

    /// Two Fast DDS participants of one host share their first 8 hex digits: the terminal
    /// shows as many as tell them apart.
    #[test]
    fn participants_are_shown_long_enough_to_tell_apart() {
        let one = "010fbe9f9c187c4900000000000001c1".to_string();
        let two = "010fbe9f1d2e3f4a00000000000001c1".to_string();
        assert_eq!(short_len(std::slice::from_ref(&one)), 8);
        assert_eq!(short_len(&[one.clone(), two]), 16);
        assert_eq!(short_len(&[one.clone(), one]), 32, "bounded by the GUID's length");
        assert_eq!(short_len(&[]), 8);
    }
}
