//! `rtlab observe` names ROS 2's nodes, against real ROS 2 nodes: rclpy (rcl, rmw_fastrtps_cpp,
//! Fast DDS 3.2 from the venv scripts/setup.sh installs in /opt/rtlab/ros2, run from
//! tests/support/rclpy_peer.py) and the RustDDS `ros2-client` node (examples/ros2_peer.rs). As
//! on a robot, the nodes run on one host (namespace `a`) and rtlab on another (namespace
//! `b`), joined by a veth, discovering by multicast on it.
//!
//! Asserted: the node's topic with its type and QoS, the node that owns each endpoint, the
//! node list (name, namespace, publishers, subscriptions, services) in the JSON and on the
//! terminal, the QoS rclpy gives `ros_discovery_info`, and the node of a measured topic's
//! writer. Never a latency. Every wait is bounded in tries and time. Needs root
//! (namespaces): skipped with a reason otherwise; the ROS 2 venv is a dependency
//! (scripts/setup.sh), its absence a failure. Each test has its own namespaces.

mod common;
#[path = "support/ros2_node.rs"]
mod ros2_node;
#[path = "support/sshd.rs"]
mod sshd;

use common::*;
use ros2_node::{skip, Node};
use serde_json::Value;
use sshd::NetnsPair;
use std::process::Command;
use std::time::{Duration, Instant};

/// `rtlab observe` in namespace `ns` on the veth address `ip`, in `domain`.
fn observe(ns: &str, ip: &str, domain: &str, wait: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_rtlab")]);
    c.args(["observe", "--domain", domain, "--interface", ip, "--wait", wait]);
    c
}

/// The graph as JSON, until `found` holds for it: at most `tries` observations and `limit`.
fn graph_until(
    pair: &NetnsPair,
    domain: &str,
    wait: &str,
    tries: usize,
    limit: Duration,
    found: impl Fn(&Value) -> bool,
) -> Value {
    let end = Instant::now() + limit;
    let mut g = Value::Null;
    for _ in 0..tries {
        let o =
            observe(&pair.ns_b, &pair.ip_b, domain, wait).args(["--json", "-"]).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        g = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
        if found(&g) || Instant::now() > end {
            break;
        }
    }
    g
}

/// The terminal's graph, until it contains every one of `needles` (bounded as `graph_until`).
fn terminal_until(pair: &NetnsPair, domain: &str, wait: &str, needles: &[&str]) -> String {
    let end = Instant::now() + Duration::from_secs(60);
    let mut out = String::new();
    for _ in 0..8 {
        let o = observe(&pair.ns_b, &pair.ip_b, domain, wait).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        out = stdout(&o);
        if needles.iter().all(|n| out.contains(n)) || Instant::now() > end {
            break;
        }
    }
    out
}

fn list<'a>(v: &'a Value, key: &str) -> &'a Vec<Value> {
    v[key].as_array().unwrap_or_else(|| panic!("no {key}[]: {v}"))
}

fn endpoint<'a>(g: &'a Value, kind: &str, topic: &str) -> Option<&'a Value> {
    list(g, kind).iter().find(|e| e["topic"] == topic)
}

fn node<'a>(g: &'a Value, full_name: &str) -> Option<&'a Value> {
    list(g, "nodes").iter().find(|n| n["full_name"] == full_name)
}

/// `{"name": .., "type": ..}` is in the node's list `key`.
fn lists(n: &Value, key: &str, name: &str, ty: &str) -> bool {
    list(n, key).iter().any(|t| t["name"] == name && t["type"] == ty)
}

const IMAGE: &str = "sensor_msgs::msg::dds_::CompressedImage_";
const IMAGE_ROS: &str = "sensor_msgs/msg/CompressedImage";

/// Two rclpy nodes, each its own process (participant): `/imu_driver` publishes `/imu_rt`,
/// `/imu_relay` subscribes `/relay_ping` and publishes `/relay_pong`. The graph names them
/// as `ros2 node list` / `ros2 node info` would, in the JSON and on the terminal; then the
/// measured topic's writer is named with its node.
#[test]
fn observe_names_rclpy_nodes_and_what_they_publish_and_subscribe() {
    if skip() {
        return;
    }
    let pair = NetnsPair::up("obsrcl").unwrap();
    let domain = "9";
    let _driver = Node::rclpy(
        &pair.ns_a,
        &["pub", "--domain", domain, "--topic", "imu_rt", "--node", "imu_driver"],
    );
    let _relay = Node::rclpy(
        &pair.ns_a,
        &[
            "pong",
            "--domain",
            domain,
            "--topic",
            "relay",
            "--node",
            "imu_relay",
            "--seconds",
            "300",
        ],
    );
    let complete = |g: &Value| {
        endpoint(g, "writers", "rt/imu_rt").is_some_and(|w| w["node"] == "/imu_driver")
            && endpoint(g, "readers", "rt/relay_ping").is_some_and(|r| r["node"] == "/imu_relay")
            && node(g, "/imu_driver").is_some()
            && node(g, "/imu_relay").is_some()
    };
    let g = graph_until(&pair, domain, "3s", 10, Duration::from_secs(90), complete);
    assert!(complete(&g), "the nodes were not found: {g}");

    // the node's topic: type, QoS, node
    let w = endpoint(&g, "writers", "rt/imu_rt").unwrap();
    assert_eq!(w["type_name"], IMAGE);
    assert_eq!(w["qos"]["reliability"], "reliable", "rclpy_peer.py's default: {w}");
    assert_eq!(w["node"], "/imu_driver");
    // what rclpy (rmw_fastrtps_cpp) offers on ros_discovery_info, as observe reads it; the
    // participant's own writer belongs to no node
    let info: Vec<&Value> =
        list(&g, "writers").iter().filter(|w| w["topic"] == "ros_discovery_info").collect();
    assert_eq!(info.len(), 2, "one per participant: {info:?}");
    for w in &info {
        assert_eq!(w["type_name"], "rmw_dds_common::msg::dds_::ParticipantEntitiesInfo_");
        assert_eq!(w["qos"]["reliability"], "reliable", "{w}");
        assert_eq!(w["qos"]["durability"], "transient-local", "{w}");
        assert!(w.get("node").is_none(), "{w}");
    }

    // the node list, as ros2 node info shows it
    let driver = node(&g, "/imu_driver").unwrap();
    assert_eq!((&driver["namespace"], &driver["name"]), (&"/".into(), &"imu_driver".into()));
    assert_eq!(driver["participant"], w["participant"]);
    assert!(lists(driver, "publishers", "/imu_rt", IMAGE_ROS), "{driver}");
    assert!(lists(driver, "publishers", "/rosout", "rcl_interfaces/msg/Log"), "{driver}");
    assert!(
        lists(
            driver,
            "service_servers",
            "/imu_driver/get_parameters",
            "rcl_interfaces/srv/GetParameters"
        ),
        "{driver}"
    );
    assert!(list(driver, "publishers").iter().all(|t| t["name"] != "ros_discovery_info"));
    let relay = node(&g, "/imu_relay").unwrap();
    assert!(lists(relay, "subscribers", "/relay_ping", IMAGE_ROS), "{relay}");
    assert!(lists(relay, "publishers", "/relay_pong", IMAGE_ROS), "{relay}");
    assert!(!lists(relay, "publishers", "/imu_rt", IMAGE_ROS), "{relay}");
    assert_ne!(relay["participant"], driver["participant"], "two processes");
    assert_eq!(g["notes"], Value::Array(vec![]), "{}", g["notes"]);

    // the terminal: the node list and each endpoint's node
    let needles = [
        "nodes (ROS 2)\n",
        "\n/imu_driver (participant ",
        "  publishers:\n",
        "    /imu_rt: sensor_msgs/msg/CompressedImage\n",
        "\n/imu_relay (participant ",
        "  subscribers:\n    /relay_ping: sensor_msgs/msg/CompressedImage\n",
        "  service servers:\n    /imu_driver/describe_parameters: rcl_interfaces/srv/DescribeParameters\n",
        ", node /imu_driver)\n",
    ];
    let out = terminal_until(&pair, domain, "3s", &needles);
    for n in needles {
        assert!(out.contains(n), "'{n}' not in:\n{out}");
    }
    let line = out.lines().find(|l| l.starts_with("  writer rt/imu_rt ")).unwrap_or_default();
    assert!(line.ends_with(", node /imu_driver)"), "{out}");
    assert!(out.lines().next().unwrap().contains(" 2 nodes, "), "{out}");

    // the measured topic: its writer's node, in the JSON and on the terminal
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("o.json");
    let o = observe(&pair.ns_b, &pair.ip_b, domain, "3s")
        .args(["--topic", "/imu_rt", "--duration", "2s", "--no-mlockall"])
        .args(["--json", json.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!(
            "/imu_rt ({IMAGE}), 1 writer(s) of node /imu_driver, reader reliable: "
        )),
        "{}",
        stdout(&o)
    );
    let d: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let obs = &d["config"]["observed"];
    assert_eq!(obs["writers"][0]["node"], "/imu_driver", "{obs}");
    assert!(obs["received"].as_u64().unwrap() > 0, "{obs}");
}

/// The RustDDS ros2-client node announces its node on ros_discovery_info too: its topic's
/// writer is named, and it is listed with that topic. RustDDS tells a late joiner about its
/// endpoints at about one a second: a longer wait, more tries.
#[test]
fn observe_names_the_rustdds_ros2_client_node() {
    if skip() {
        return;
    }
    let pair = NetnsPair::up("obsrust").unwrap();
    let domain = "4";
    let _node = Node::rustdds(
        &pair.ns_a,
        &["pub", "--domain", domain, "--topic", "imu_rt", "--rate", "10", "--count", "3000"],
    );
    let named = |g: &Value| {
        endpoint(g, "writers", "rt/imu_rt").is_some_and(|w| w["node"] == "/rtlab_peer_pub")
            && node(g, "/rtlab_peer_pub")
                .is_some_and(|n| lists(n, "publishers", "/imu_rt", IMAGE_ROS))
    };
    let g = graph_until(&pair, domain, "5s", 8, Duration::from_secs(80), named);
    assert!(named(&g), "the RustDDS node was not named: {g}");
    let w = endpoint(&g, "writers", "rt/imu_rt").unwrap();
    assert_eq!(w["type_name"], IMAGE);
    assert_eq!(w["qos"]["reliability"], "reliable");
    let n = node(&g, "/rtlab_peer_pub").unwrap();
    assert_eq!((&n["namespace"], &n["name"]), (&"/".into(), &"rtlab_peer_pub".into()));
    assert_eq!(n["participant"], w["participant"]);
}
