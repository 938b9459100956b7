//! rtlab against a ROS 2 node that is not rtlab: `examples/ros2_peer.rs` (the `ros2-client`
//! crate on RustDDS, its own DDS and ROS 2 stack), speaking the stock
//! `sensor_msgs/msg/CompressedImage` with rtlab's mapping. As on a robot, the ROS 2 node runs
//! on one host (namespace `a`) and rtlab on another (namespace `b`), joined by a veth; both
//! discover by multicast on it (RustDDS does not use loopback).
//!
//! rtlab is ping (the node echoes), subscriber (the node publishes) and publisher (the node
//! subscribes), and `observe` finds the node's topic with its type and counts its messages.
//! Asserted: counts and sequence, never a latency. Needs root (namespaces); skipped with a
//! reason otherwise. Each test has its own namespaces, so their DDS domains cannot meet.

mod common;
#[path = "support/sshd.rs"]
mod sshd;

use common::*;
use serde_json::Value;
use sshd::NetnsPair;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The peer, built by `cargo test` beside the rtlab binary (examples are built with tests).
fn peer_bin() -> PathBuf {
    let rtlab = PathBuf::from(env!("CARGO_BIN_EXE_rtlab"));
    let p = rtlab.parent().unwrap().join("examples").join("ros2_peer");
    assert!(p.is_file(), "{} missing: `cargo test` builds the examples", p.display());
    p
}

fn skip() -> bool {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("network namespaces need root"));
        return true;
    }
    false
}

/// The ROS 2 node in namespace `ns`, its stdout piped; waits for its `ready` line.
struct Peer {
    child: Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Peer {
    fn start(ns: &str, args: &[&str]) -> Peer {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(peer_bin())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start ros2_peer");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().and_then(|l| l.ok()).unwrap_or_default();
        assert!(first.contains("\"ready\""), "ros2_peer {args:?}: {first}");
        Peer { child, lines }
    }

    /// Its summary line (it ends by itself).
    fn summary(mut self) -> Value {
        let line = self.lines.next().and_then(|l| l.ok()).unwrap_or_default();
        let st = self.child.wait().unwrap();
        assert!(st.success(), "ros2_peer ended with {st}: {line}");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// rtlab in namespace `ns`.
fn rtlab_in(ns: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_rtlab")]);
    c.env(
        "RTLAB_LOCK",
        crate::common::scratch(&format!("rtlab-test-lock-ros2-{}", std::process::id())),
    );
    c
}

/// The DDS flags of rtlab's side: the peer's domain, the veth, reliable with history enough
/// for a loaded CI machine's stalls.
fn dds_args<'a>(transport: &'a str, domain: &'a str, ip: &'a str) -> Vec<&'a str> {
    vec![
        "pubsub",
        "--transport",
        transport,
        "--domain",
        domain,
        "--interface",
        ip,
        "--reliability",
        "reliable",
        "--history",
        "keep-last:100",
        "--no-mlockall",
        "-q",
    ]
}

fn read_json(p: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn rtlab_ping_through_a_ros2_node_that_echoes() {
    if skip() {
        return;
    }
    let pair = NetnsPair::up("r2ping").unwrap();
    let _pong = Peer::start(
        &pair.ns_a,
        &["pong", "--domain", "0", "--topic", "rtlab_rt", "--depth", "100", "--seconds", "240"],
    );
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ping.json");
    // the three DDS implementations against the same ROS 2 node (RustDDS's ros2-client).
    // rustdds is the regression case of the two-stage warm-up: started on the first echo,
    // it lost 32-44 of 200 pings to repairs of warm-up messages (round trips up to 0.5 s in
    // the first second)
    for transport in ["cyclonedds", "fastdds", "rustdds"] {
        let o = rtlab_in(&pair.ns_b)
            .args(dds_args(transport, "0", &pair.ip_b))
            .args(["--role", "ping", "--topic", "rtlab_rt", "--rate", "50hz", "--count", "200"])
            .args(["--json", json.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{transport}: {}", stderr(&o));
        let d = read_json(&json);
        let s = &d["streams"][0];
        assert_eq!(s["metric"], "rtt");
        assert_eq!(s["labels"]["transport"], transport);
        let st = &s["stats"];
        let published: u64 = s["labels"]["published"].as_str().unwrap().parse().unwrap();
        assert_eq!(published + u(&st["overruns"]), 200, "{transport}: every slot sent or skipped");
        // reliable both ways once the warm-up came back: every ping came back, once, in order
        assert_eq!(u(&st["count"]) + u(&st["late"]), published, "{transport}: {st}");
        assert_eq!(u(&st["lost"]), 0, "{transport}: {st}");
        assert_eq!(
            u(&st["duplicates"]) + u(&st["out_of_order"]) + u(&st["malformed"]),
            0,
            "{transport}: {st}"
        );
    }
}

#[test]
fn rtlab_subscribes_to_a_ros2_publisher() {
    if skip() {
        return;
    }
    let pair = NetnsPair::up("r2sub").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sub.json");
    let mut sub = rtlab_in(&pair.ns_b)
        .args(dds_args("cyclonedds", "7", &pair.ip_b))
        .args(["--role", "sub", "--synced-clocks", "--topic", "joint_cmd", "--rate", "50hz"])
        .args(["--duration", "120s", "--json", json.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let publisher = Peer::start(
        &pair.ns_a,
        &["pub", "--domain", "7", "--topic", "joint_cmd", "--rate", "50", "--count", "300"],
    );
    let p = publisher.summary();
    assert_eq!(p["matched"], true, "the node never saw rtlab's reader: {p}");
    std::thread::sleep(Duration::from_millis(500));
    // Ctrl-C: rtlab keeps what it measured
    let rc = Command::new("kill").args(["-INT", &sub.id().to_string()]).status().unwrap();
    assert!(rc.success());
    let end = Instant::now() + Duration::from_secs(30);
    while sub.try_wait().unwrap().is_none() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = sub.kill();
    let o = sub.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let d = read_json(&json);
    let s = &d["streams"][0];
    assert!(s["definition"].as_str().unwrap().contains("CLOCK_REALTIME"), "{s}");
    let st = &s["stats"];
    // rtlab joined the stream wherever discovery let it: from first_seq to the last one
    // (299), every message once and in order
    let first: u64 = s["labels"]["first_seq"].as_str().expect("received nothing").parse().unwrap();
    assert_eq!(s["labels"]["last_seq"], "299", "{s}");
    assert_eq!(u(&st["count"]) + u(&st["late"]), 300 - first, "{st}");
    assert_eq!(u(&st["lost"]), 0, "{st}");
    assert_eq!(u(&st["duplicates"]) + u(&st["out_of_order"]) + u(&st["malformed"]), 0, "{st}");
}

#[test]
fn a_ros2_subscriber_receives_rtlab_publisher() {
    if skip() {
        return;
    }
    let pair = NetnsPair::up("r2pub").unwrap();
    let count = 600u64;
    let subscriber = Peer::start(
        &pair.ns_a,
        &[
            "sub",
            "--domain",
            "42",
            "--topic",
            "cmd_vel_rt",
            "--count",
            &count.to_string(),
            "--depth",
            "100",
            "--seconds",
            "60",
        ],
    );
    let o = rtlab_in(&pair.ns_b)
        .args(dds_args("cyclonedds", "42", &pair.ip_b))
        .args(["--role", "pub", "--topic", "cmd_vel_rt", "--rate", "50hz"])
        .args(["--count", &count.to_string()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = subscriber.summary();
    let first = r["first_seq"].as_u64().unwrap_or_else(|| panic!("received nothing: {r}"));
    assert_eq!(u(&r["last_seq"]), count - 1, "{r}");
    assert_eq!(u(&r["received"]), count - first, "{r}");
    assert_eq!(r["in_order"], true, "{r}");
    assert_eq!(u(&r["duplicates"]), 0, "{r}");
    // header.stamp is on the wall clock, as ROS time is (a monotonic stamp would be decades
    // off): a check of the mapping, not a latency
    let age = r["max_stamp_age_ns"].as_i64().unwrap();
    assert!(age.abs() < 600_000_000_000, "stamp not on CLOCK_REALTIME: {r}");
}

#[test]
fn observe_finds_a_ros2_nodes_topic_and_counts_its_messages() {
    if skip() {
        return;
    }
    let pair = NetnsPair::up("r2obs").unwrap();
    let publisher = Peer::start(
        &pair.ns_a,
        &["pub", "--domain", "3", "--topic", "imu_rt", "--rate", "50", "--count", "3000"],
    );
    let domain = "3";
    // the graph: the node's topic with its ROS 2 type. RustDDS tells a new participant about
    // its endpoints at about one a second (the node's own come first): wait long enough
    let end = Instant::now() + Duration::from_secs(40);
    let graph = loop {
        let o = rtlab_in(&pair.ns_b)
            .args(["observe", "--domain", domain, "--interface", &pair.ip_b, "--wait", "5s"])
            .args(["--json", "-"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let g: Value = serde_json::from_str(&stdout(&o)).unwrap();
        let found = g["writers"].as_array().unwrap().iter().any(|w| w["topic"] == "rt/imu_rt");
        if found || Instant::now() > end {
            break g;
        }
    };
    let w = graph["writers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["topic"] == "rt/imu_rt")
        .unwrap_or_else(|| panic!("rt/imu_rt not found: {graph}"));
    assert_eq!(w["type_name"], "sensor_msgs::msg::dds_::CompressedImage_");
    assert_eq!(w["qos"]["reliability"], "reliable");
    // the live topic: counted, its period measured, latency from header.stamp
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("o.json");
    let o = rtlab_in(&pair.ns_b)
        .args(["observe", "--domain", domain, "--interface", &pair.ip_b, "--topic", "/imu_rt"])
        .args(["--wait", "6s", "--rate", "50hz", "--duration", "3s", "--synced-clocks"])
        .args(["--no-mlockall", "-q"])
        .args(["--json", json.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let d = read_json(&json);
    let obs = &d["config"]["observed"];
    assert_eq!(obs["type_name"], "sensor_msgs::msg::dds_::CompressedImage_");
    let received = u(&obs["received"]);
    assert!(received > 0, "{obs}");
    let streams = d["streams"].as_array().unwrap();
    let names: Vec<&str> = streams.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["/imu_rt.period", "/imu_rt.deviation", "/imu_rt.latency"], "{names:?}");
    assert_eq!(
        u(&streams[0]["stats"]["count"]),
        received - 1,
        "one period per arrival after the first"
    );
    assert_eq!(u(&streams[2]["stats"]["count"]), received, "one latency per message");
    drop(publisher);
}
