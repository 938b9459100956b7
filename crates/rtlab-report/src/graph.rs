//! A DDS domain's graph on a terminal (`rtlab observe` without a topic): the topics with
//! their ROS 2 names and types, ROS 2's nodes with what each publishes, subscribes and
//! serves (as `ros2 node info`), then every endpoint with its QoS and node.
//!
//! Contract: pure; returns the text, never prints.

use rtlab_core::graph::Graph;

/// The graph as the terminal shows it: topics (ROS 2 names where they follow ROS 2's
/// mapping), ROS 2's nodes with what each publishes, subscribes and serves, then every
/// endpoint with its QoS and node.
pub fn render(g: &Graph, interface: Option<&str>, peers: &[String]) -> String {
    let mut s = format!(
        "domain {} ({}): {} participants, {} nodes, {} writers, {} readers\n",
        g.domain,
        match interface {
            None => "loopback".to_string(),
            Some(i) if peers.is_empty() => format!("{i}, multicast discovery"),
            Some(i) => format!("{i}, peers {}", peers.join(",")),
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
    s.push_str("\nendpoints (QoS: reliability, durability, history, deadline when it has one)\n");
    for (kind, list) in [("writer", &g.writers), ("reader", &g.readers)] {
        for e in list {
            s.push_str(&format!(
                "  {kind} {} {}: {}, {}, {}{} (participant {}{})\n",
                e.topic,
                e.type_name,
                e.qos.reliability,
                e.qos.durability,
                e.qos.history,
                e.qos.deadline_ns.map(|d| format!(", deadline {d} ns")).unwrap_or_default(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::graph::{Endpoint, EndpointQos, Node, NodeTopic};

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
                deadline_ns: None,
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
                Endpoint {
                    qos: EndpointQos {
                        deadline_ns: Some(10_000_000),
                        ..endpoint("x", "y", None).qos
                    },
                    ..endpoint("rt/scan", "sensor_msgs::msg::dds_::LaserScan_", None)
                },
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
        let s = render(&g, Some("eth0"), &[]);
        assert!(
            s.starts_with("domain 3 (eth0, multicast discovery): 1 participants, 1 nodes, 3 writers, 1 readers\n"),
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
        assert!(
            s.contains("  writer rt/scan sensor_msgs::msg::dds_::LaserScan_: reliable, transient-local, keep-last:1, deadline 10000000 ns (participant 0a0b0c0d)\n"),
            "a Deadline QoS said: {s}"
        );
        assert!(s.ends_with("note: 1 ros_discovery_info sample(s) not read\n"), "{s}");
        // no ROS 2 participant: no node section
        let plain = Graph { nodes: vec![], notes: vec![], ..g };
        let s = render(&plain, Some("eth0"), &["10.0.0.2".into()]);
        assert!(s.starts_with("domain 3 (eth0, peers 10.0.0.2): "), "{s}");
        assert!(!s.contains("nodes (ROS 2)"), "{s}");
        assert!(render(&plain, None, &[]).starts_with("domain 3 (loopback): "));
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
