//! `rtlab observe`: the graph of a live DDS / ROS 2 domain, read from DDS's built-in topics:
//! who is there, every topic with its type name, and the QoS each writer offers and each
//! reader requests. (Measuring a chosen live topic is the next step of this command.)

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
    /// Write the graph as JSON to this file (- for stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

pub fn run(a: ObserveArgs) -> anyhow::Result<u8> {
    let domain = a.domain.unwrap_or(0);
    if !(0..=232).contains(&domain) {
        anyhow::bail!("--domain {domain}: a DDS domain id is 0..=232");
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
