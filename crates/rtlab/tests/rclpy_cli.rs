//! Every rtlab role against every role of a real ROS 2 node: rclpy (rcl, rmw_fastrtps_cpp,
//! Fast DDS 3.2, from the venv scripts/setup.sh installs in /opt/rtlab/ros2), run from
//! tests/support/rclpy_peer.py. As on a robot, the node runs on one host (namespace `a`) and
//! rtlab on another (namespace `b`), joined by a veth, both discovering by multicast on it.
//!
//! Pairs, each with every transport of [`per_transport!`]'s list: rtlab ping <-> rclpy pong,
//! rtlab sub <-> rclpy pub, rtlab pub <-> rclpy sub, rtlab pong <-> rclpy ping. Besides: the
//! rclpy relay of docs/ros2.md, extracted from the doc at test time and run verbatim, as the
//! pong of an rtlab ping; and a `fastdds` ping started while its link is not running yet
//! (issue 24: Fast DDS 2.9 drops a whitelisted interface that is not running when its
//! participant starts, and that participant never sends anything).
//!
//! Asserted: counts, sequence numbers and stamps (the wall clock where ROS time is
//! compared; unchanged through an echo), never a latency. Every wait is bounded in time.
//! Needs root (namespaces): skipped with a reason otherwise; the ROS 2 venv is a dependency
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
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// rtlab in namespace `ns`, with its own machine lock.
fn rtlab_in(ns: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_rtlab")]);
    c.env(
        "RTLAB_LOCK",
        crate::common::scratch(&format!("rtlab-test-lock-rclpy-{}", std::process::id())),
    );
    c
}

/// rtlab's side of every pair: `pubsub` by hand on the node's domain (0, ROS 2's default),
/// on the veth's address, reliable with a history enough for a stalled machine (the node's
/// QoS: reliable, keep-last 100).
fn pubsub_by_hand(pair: &NetnsPair, transport: &str, role: &str, topic: &str) -> Command {
    let mut c = rtlab_in(&pair.ns_b);
    c.args(["pubsub", "--transport", transport, "--domain", "0", "--interface", &pair.ip_b]);
    c.args(["--reliability", "reliable", "--history", "keep-last:100", "--no-mlockall", "-q"]);
    c.args(["--role", role, "--topic", topic]);
    c
}

/// Sends SIGINT (the user's Ctrl-C) to `child` and waits (30 s at most) for its output.
fn interrupt(mut child: Child) -> Output {
    let rc = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(rc.success());
    let end = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    child.wait_with_output().unwrap()
}

fn read_json(p: &Path) -> Value {
    let t = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&t).unwrap()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn label_u(s: &Value, key: &str) -> u64 {
    s["labels"][key]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no label {key}: {s}"))
}

/// An rtlab ping's round trips: every slot sent or skipped, every ping back once and in
/// order. An echo that changed the stamp would make the round trip garbage (late): samples
/// are there, and with the late ones they are every ping.
fn assert_round_trips(json: &Path, transport: &str, count: u64) {
    let d = read_json(json);
    let s = &d["streams"][0];
    assert_eq!(s["metric"], "rtt", "{transport}: {s}");
    assert_eq!(s["labels"]["transport"], transport);
    let st = &s["stats"];
    let published = label_u(s, "published");
    assert_eq!(published + u(&st["overruns"]), count, "{transport}: every slot sent or skipped");
    assert!(u(&st["count"]) > 0, "{transport}: {st}");
    assert_eq!(u(&st["count"]) + u(&st["late"]), published, "{transport}: {st}");
    assert_eq!(u(&st["lost"]), 0, "{transport}: {st}");
    assert_eq!(
        u(&st["duplicates"]) + u(&st["out_of_order"]) + u(&st["malformed"]),
        0,
        "{transport}: {st}"
    );
}

/// rtlab pings, the rclpy node echoes (T_ping -> T_pong).
fn rtlab_ping_rclpy_pong(transport: &str) {
    if skip() {
        return;
    }
    let pair = NetnsPair::up("rpping").unwrap();
    let topic = "rclpy_rt";
    let _pong = Node::rclpy(
        &pair.ns_a,
        &["pong", "--domain", "0", "--topic", topic, "--depth", "100", "--seconds", "120"],
    );
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ping.json");
    let o = pubsub_by_hand(&pair, transport, "ping", topic)
        .args(["--rate", "50hz", "--count", "200", "--json", json.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{transport}: {}", stderr(&o));
    assert_round_trips(&json, transport, 200);
}

/// The rclpy node publishes (after its subscription matched, and a second of warm-up
/// messages); rtlab's subscriber by hand gets every message, from the first, once, in order,
/// stamped on the wall clock.
fn rtlab_sub_rclpy_pub(transport: &str) {
    if skip() {
        return;
    }
    let pair = NetnsPair::up("rpsub").unwrap();
    let topic = "joint_cmd";
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sub.json");
    let sub = pubsub_by_hand(&pair, transport, "sub", topic)
        .args(["--synced-clocks", "--rate", "50hz", "--duration", "120s"])
        .args(["--json", json.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let count = 300u64;
    let publisher = Node::rclpy(
        &pair.ns_a,
        &["pub", "--domain", "0", "--topic", topic, "--rate", "50", "--count", &count.to_string()],
    );
    let p = publisher.summary(Duration::from_secs(60));
    assert_eq!(p["matched"], true, "{transport}: the node never saw rtlab's reader: {p}");
    std::thread::sleep(Duration::from_millis(500));
    let o = interrupt(sub);
    assert_eq!(o.status.code(), Some(0), "{transport}: {}", stderr(&o));
    let d = read_json(&json);
    let s = &d["streams"][0];
    assert_eq!(s["metric"], "one_way_latency", "{transport}: {s}");
    assert!(s["definition"].as_str().unwrap().contains("CLOCK_REALTIME"), "{s}");
    // the node waited for rtlab's reader and warmed up: rtlab has every message
    assert_eq!(label_u(s, "first_seq"), 0, "{transport}: {s}");
    assert_eq!(label_u(s, "last_seq"), count - 1, "{transport}: {s}");
    let st = &s["stats"];
    assert_eq!(u(&st["count"]) + u(&st["late"]), count, "{transport}: {st}");
    // a stamp on another clock than the wall clock (a monotonic one: decades off) would
    // make every message late: samples show the stamps are ROS time
    assert!(u(&st["count"]) > 0, "{transport}: {st}");
    assert_eq!(u(&st["lost"]), 0, "{transport}: {st}");
    assert_eq!(
        u(&st["duplicates"]) + u(&st["out_of_order"]) + u(&st["malformed"]),
        0,
        "{transport}: {st}"
    );
}

/// rtlab publishes by hand, the rclpy node subscribes: every message from the first (issue
/// 24: the publisher started before the node's reader matched, so the node's first message
/// was 3, 4 or 5), once, in order, stamped with ROS time; rtlab says how many readers it had.
fn rtlab_pub_rclpy_sub(transport: &str) {
    if skip() {
        return;
    }
    let pair = NetnsPair::up("rppub").unwrap();
    let topic = "cmd_vel_rt";
    let count = 300u64;
    let subscriber = Node::rclpy(
        &pair.ns_a,
        &["sub", "--domain", "0", "--topic", topic, "--count", &count.to_string()]
            .into_iter()
            .chain(["--depth", "100", "--seconds", "90"])
            .collect::<Vec<_>>(),
    );
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("pub.json");
    let o = pubsub_by_hand(&pair, transport, "pub", topic)
        .args(["--rate", "50hz", "--count", &count.to_string()])
        .args(["--json", json.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{transport}: {}", stderr(&o));
    let r = subscriber.summary(Duration::from_secs(60));
    assert_eq!(r["first_seq"], 0, "{transport}: the node missed the first messages: {r}");
    assert_eq!(u(&r["last_seq"]), count - 1, "{transport}: {r}");
    assert_eq!(u(&r["received"]), count, "{transport}: {r}");
    assert_eq!(r["in_order"], true, "{transport}: {r}");
    assert_eq!(u(&r["duplicates"]), 0, "{transport}: {r}");
    // header.stamp is ROS time (the system clock): a monotonic stamp would be decades off.
    // A check of the mapping, not a latency
    let age = r["max_stamp_age_ns"].as_i64().unwrap();
    assert!(age.abs() < 600_000_000_000, "{transport}: stamp not on CLOCK_REALTIME: {r}");
    let d = read_json(&json);
    let s = &d["streams"][0];
    assert_eq!(s["metric"], "send_lateness", "{transport}: {s}");
    assert_eq!(label_u(s, "matched_subscribers"), 1, "{transport}: {s}");
    let notes = d["config"]["notes"].to_string();
    assert!(notes.contains("1 subscriber matched"), "{transport}: {notes}");
    // reliable: it closed only once the node had everything (a slow node's tail is not
    // dropped with the writer)
    assert!(!notes.contains("NOT every message"), "{transport}: {notes}");
    assert!(notes.contains("acknowledged everything"), "{transport}: {notes}");
}

/// The rclpy node pings (after a match and a warm-up), rtlab's pong by hand echoes: every
/// ping back once, in order, with the stamp it was sent with.
fn rtlab_pong_rclpy_ping(transport: &str) {
    if skip() {
        return;
    }
    let pair = NetnsPair::up("rppong").unwrap();
    let topic = "rclpy_ping_rt";
    let pong = pubsub_by_hand(&pair, transport, "pong", topic)
        .args(["--duration", "120s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let count = 200u64;
    let ping = Node::rclpy(
        &pair.ns_a,
        &["ping", "--domain", "0", "--topic", topic, "--rate", "50", "--count", &count.to_string()]
            .into_iter()
            .chain(["--depth", "100"])
            .collect::<Vec<_>>(),
    );
    let r = ping.summary(Duration::from_secs(60));
    let o = interrupt(pong);
    assert_eq!(o.status.code(), Some(0), "{transport}: {}", stderr(&o));
    assert_eq!(r["matched"], true, "{transport}: {r}");
    assert_eq!(r["warm"], true, "{transport}: no warm-up ping came back: {r}");
    assert_eq!(u(&r["sent"]), count, "{transport}: {r}");
    assert_eq!(u(&r["received"]), count, "{transport}: {r}");
    assert_eq!((u(&r["first_seq"]), u(&r["last_seq"])), (0, count - 1), "{transport}: {r}");
    assert_eq!(r["in_order"], true, "{transport}: {r}");
    assert_eq!(u(&r["duplicates"]), 0, "{transport}: {r}");
    assert_eq!(r["stamps_echoed"], true, "{transport}: an echo changed header.stamp: {r}");
}

/// One test per pair and rtlab transport, named `<transport>::<pair>`. A transport is one
/// more name in the list below (e.g. `ros2`).
macro_rules! per_transport {
    ($($t:ident),* $(,)?) => {$(
        mod $t {
            #[test]
            fn rtlab_ping_rclpy_pong() {
                super::rtlab_ping_rclpy_pong(stringify!($t))
            }
            #[test]
            fn rtlab_sub_rclpy_pub() {
                super::rtlab_sub_rclpy_pub(stringify!($t))
            }
            #[test]
            fn rtlab_pub_rclpy_sub() {
                super::rtlab_pub_rclpy_sub(stringify!($t))
            }
            #[test]
            fn rtlab_pong_rclpy_ping() {
                super::rtlab_pong_rclpy_ping(stringify!($t))
            }
        }
    )*};
}

per_transport!(cyclonedds, fastdds, rustdds, ros2);

/// The python block of docs/ros2.md that follows the words "With nothing but `rclpy`": the
/// relay the doc tells users to run (read at test time, so the doc cannot drift).
fn relay_from_docs() -> String {
    let doc = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/ros2.md");
    let text = std::fs::read_to_string(&doc).unwrap();
    let at = text.find("With nothing but `rclpy`").expect("docs/ros2.md: the rclpy relay");
    let rest = &text[at..];
    let start = rest.find("```python\n").expect("its python block") + "```python\n".len();
    let len = rest[start..].find("```").expect("the block's end");
    rest[start..start + len].to_string()
}

/// docs/ros2.md's rclpy relay, verbatim, as the pong of rtlab's ping through each transport
/// (one relay, the pings one after another).
#[test]
fn the_rclpy_relay_of_the_docs_echoes_rtlab_ping() {
    if skip() {
        return;
    }
    let relay = relay_from_docs();
    assert!(relay.contains("rclpy.spin(node)"), "{relay}");
    let pair = NetnsPair::up("rprelay").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("relay.py");
    std::fs::write(&file, &relay).unwrap();
    // as the doc says: `python3 relay.py` (here the venv's python), domain 0
    let _relay = Node::python(&pair.ns_a, &[file.to_str().unwrap()]);
    let json = dir.path().join("ping.json");
    for transport in ["cyclonedds", "fastdds", "rustdds", "ros2"] {
        // rtlab's ping waits (30 s at most) for the relay's first echo: python starts slowly
        let o = pubsub_by_hand(&pair, transport, "ping", "rtlab")
            .args(["--rate", "50hz", "--count", "100", "--json", json.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{transport}: {}", stderr(&o));
        assert_round_trips(&json, transport, 100);
    }
}

/// The veth end of namespace `ns` (its only veth).
fn veth_of(ns: &str) -> String {
    let o = Command::new("ip").args(["-n", ns, "-o", "link", "show", "type", "veth"]).output();
    let t = String::from_utf8_lossy(&o.unwrap().stdout).into_owned();
    let name = t.split(": ").nth(1).and_then(|n| n.split('@').next()).map(str::to_string);
    name.unwrap_or_else(|| panic!("no veth in {ns}: {t}"))
}

fn ip(args: &[&str]) -> String {
    let o = Command::new("ip").args(args).output().unwrap();
    assert!(o.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Wait (5 s at most) until the veth end of `ns` is running or not (its operational state
/// `UP`, which the kernel's link watch sets up to a second after the carrier changed).
fn wait_operstate(ns: &str, up: bool) {
    let dev = veth_of(ns);
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let line = ip(&["-n", ns, "-o", "link", "show", "dev", &dev]);
        if line.contains("state UP") == up {
            return;
        }
        assert!(
            Instant::now() < end,
            "{ns} {dev} did not turn {}: {line}",
            if up { "up" } else { "down" }
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Found on main (issue 24): a `fastdds` ping against an rclpy pong, started right after the
/// namespaces were made, failed every first try ("received nothing"), a second try worked.
/// The cause: a veth end is not running (IFF_RUNNING) until the kernel's link watch has
/// seen its carrier, up to a second after both ends are up, and Fast DDS 2.9 keeps only
/// running interfaces of its whitelist when a participant starts; with none left it binds a
/// placeholder (192.0.2.0) and never sends a packet, for its whole life. Here the link is
/// made to come up late on purpose (the node's end is down when rtlab starts): rtlab's
/// participant must wait for the link, and measure every ping.
#[test]
fn a_fastdds_ping_started_before_its_link_runs_waits_for_it() {
    if skip() {
        return;
    }
    let pair = NetnsPair::up("rplink").unwrap();
    let veth_a = veth_of(&pair.ns_a);
    ip(&["-n", &pair.ns_a, "link", "set", &veth_a, "down"]);
    // rtlab's end without a carrier, as the kernel reports it (not running)
    wait_operstate(&pair.ns_b, false);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ping.json");
    let topic = "late_link";
    let ping = pubsub_by_hand(&pair, "fastdds", "ping", topic)
        .args(["--rate", "50hz", "--count", "100", "--json", json.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    ip(&["-n", &pair.ns_a, "link", "set", &veth_a, "up"]);
    // the node starts on a running link: only rtlab's participant met a link not running yet
    wait_operstate(&pair.ns_a, true);
    let _pong = Node::rclpy(
        &pair.ns_a,
        &["pong", "--domain", "0", "--topic", topic, "--depth", "100", "--seconds", "120"],
    );
    let end = Instant::now() + Duration::from_secs(90);
    let mut ping = ping;
    while ping.try_wait().unwrap().is_none() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = ping.kill();
    let o = ping.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_round_trips(&json, "fastdds", 100);
    let notes = read_json(&json)["config"]["notes"].to_string();
    assert!(notes.contains("waited") && notes.contains("running"), "{notes}");
}
