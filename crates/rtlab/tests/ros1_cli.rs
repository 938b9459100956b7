//! `rtlab pubsub --transport ros1` through the binary: roscpp (Debian's libroscpp 1.15) against
//! roscpp (rtlab's own role processes, on a master rtlab starts) and against a real rospy
//! node (tests/support/rospy_peer.py, Debian's python3-rospy), as on a robot: the master and
//! the node on one host (namespace `a`), rtlab on another (namespace `b`), joined by a veth.
//! Pairs: rtlab ping <-> rospy pong, rtlab sub <-> rospy pub, rtlab pub <-> rospy sub. And a
//! master killed mid-run: the run ends there, saying so.
//!
//! Asserted: counts and sequence numbers (every message accounted for), never a latency.
//! Every wait is bounded in time. The rospy tests need root (namespaces): skipped with a
//! reason otherwise.

mod common;
#[path = "support/ros2_node.rs"]
mod ros2_node;
#[path = "support/sshd.rs"]
mod sshd;

use common::*;
use ros2_node::Node;
use serde_json::Value;
use sshd::NetnsPair;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// `subs` subscriber streams in `v`, each slot of the `slots` a message received, late or
/// skipped by the publisher (none lost, none twice).
fn every_slot_accounted(v: &Value, subs: usize, slots: u64, what: &str) {
    let streams: Vec<&Value> = v["streams"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"].as_str().unwrap().contains(".sub"))
        .collect();
    assert_eq!(streams.len(), subs, "{what}: {}", v["streams"]);
    for s in streams {
        let st = &s["stats"];
        let all = u(&st["count"])
            + u(&st["late"])
            + u(&st["lost"])
            + st["overruns"].as_u64().unwrap_or(0);
        assert_eq!(all, slots, "{what}: {st}");
        assert_eq!(u(&st["lost"]), 0, "{what}: {st}");
        assert_eq!(u(&st["duplicates"]), 0, "{what}: {st}");
    }
}

/// A rosmaster of the test's own, in namespace `ns` (None: this one) on `ip`; stopped on drop.
struct TestMaster {
    child: Child,
    uri: String,
    home: tempfile::TempDir,
}

impl TestMaster {
    fn start(ns: Option<&str>, ip: &str) -> TestMaster {
        let port =
            std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap().local_addr().unwrap().port();
        let home = tempfile::tempdir().unwrap();
        let mut c = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, "rosmaster"]);
                c
            }
            None => Command::new("rosmaster"),
        };
        c.args(["--core", "-p", &port.to_string(), "-w", "1"]).env("ROS_HOME", home.path());
        // a group of its own: `ip netns exec` forks, and the master is killed with its group
        std::os::unix::process::CommandExt::process_group(&mut c, 0);
        c.env("ROS_IP", ip).stdout(Stdio::null()).stderr(Stdio::null());
        let child = c.spawn().expect("rosmaster (python3-rosmaster: scripts/setup.sh)");
        let uri = format!("http://{ip}:{port}/");
        let m = TestMaster { child, uri, home };
        // it answers: the node of `rosnode`-like check through rtlab is not needed, a TCP
        // connection is enough
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let up = match ns {
                Some(ns) => Command::new("ip")
                    .args(["netns", "exec", ns, "python3", "-c"])
                    .arg(format!("import socket; socket.create_connection(('{ip}', {port}), 1)"))
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success()),
                None => std::net::TcpStream::connect((ip, port)).is_ok(),
            };
            if up {
                break;
            }
            assert!(Instant::now() < end, "rosmaster on {ip}:{port} did not answer");
            std::thread::sleep(Duration::from_millis(100));
        }
        m
    }
}

impl Drop for TestMaster {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = self.home.path();
    }
}

/// rospy_peer.py in `ns`, on `master`, at `ip`, once it said `ready`.
fn rospy(ns: &str, master: &str, ip: &str, args: &[&str]) -> Node {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/rospy_peer.py");
    let (m, i) = (format!("ROS_MASTER_URI={master}"), format!("ROS_IP={ip}"));
    let mut a = vec![m.as_str(), i.as_str(), "/usr/bin/python3", script.to_str().unwrap()];
    a.extend_from_slice(args);
    Node::spawn(ns, Path::new("/usr/bin/env"), &a).ready(&format!("rospy_peer.py {args:?}"))
}

/// rtlab in namespace `ns` on `master`, its node at `ip`: `pubsub --transport ros1` by hand,
/// reliable (TCPROS), a history enough for a stalled machine.
fn rtlab_by_hand(pair: &NetnsPair, master: &str, role: &str, topic: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &pair.ns_b, env!("CARGO_BIN_EXE_rtlab")]);
    c.env(
        "RTLAB_LOCK",
        crate::common::scratch(&format!("rtlab-test-lock-ros1-{}", std::process::id())),
    );
    c.env("ROS_MASTER_URI", master);
    c.args(["pubsub", "--transport", "ros1", "--interface", &pair.ip_b]);
    c.args(["--reliability", "reliable", "--history", "keep-last:100", "--no-mlockall", "-q"]);
    c.args(["--role", role, "--topic", topic]);
    c
}

fn root_or_skip() -> bool {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("network namespaces need root"));
        return false;
    }
    true
}

#[test]
fn roscpp_to_roscpp_every_message_is_accounted_for_and_the_master_goes_with_rtlab() {
    let d = tempfile::tempdir().unwrap();
    for mode in ["oneway", "roundtrip"] {
        let json = d.path().join(format!("{mode}.json"));
        let o = run(&[
            "pubsub",
            "--transport",
            "ros1",
            "--mode",
            mode,
            "--rate",
            "500hz",
            "--count",
            "500",
            "--subscribers",
            "2",
            "--reliability",
            "reliable",
            "--history",
            "keep-last:100",
            "--tcp-nodelay",
            "--json",
            json.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{mode}: {}", stderr(&o));
        let text = stdout(&o);
        assert!(text.contains("ros1 ") && text.contains("TCPROS (TCP)"), "{text}");
        let v = read_json(&json);
        let notes = v["config"]["notes"].to_string();
        assert!(
            notes.contains("roscpp 1.15") && notes.contains("master http://127.0.0.1:"),
            "{notes}"
        );
        every_slot_accounted(&v, 2, 500, &format!("{mode}, reliable TCPROS on one host"));
        assert_eq!(v["streams"][0]["labels"]["roscpp"], "1.15.15", "{}", v["streams"][0]["labels"]);
    }
    // best effort is TCPROS unless --udpros: every message accounted for
    let json = d.path().join("udpros.json");
    let o = run(&[
        "pubsub",
        "--transport",
        "ros1",
        "--rate",
        "500hz",
        "--count",
        "500",
        "--reliability",
        "best-effort",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("TCPROS (roscpp's best effort is UDPROS, opt-in: --udpros)"),
        "{}",
        stdout(&o)
    );
    let v = read_json(&json);
    let st = &v["streams"][0]["stats"];
    let all =
        u(&st["count"]) + u(&st["late"]) + u(&st["lost"]) + st["overruns"].as_u64().unwrap_or(0);
    assert_eq!(all, 500, "{st}");
    // the master rtlab started (named in the notes) went with it
    let notes = read_json(&json)["config"]["notes"].to_string();
    let uri = notes.split("master ").nth(1).and_then(|r| r.split('"').next());
    assert_rosmaster_gone(uri.unwrap_or_else(|| panic!("no master in {notes}")));
}

#[test]
fn a_master_killed_mid_run_ends_the_run_saying_so() {
    let master = TestMaster::start(None, "127.0.0.1");
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("k.json");
    let child = rtlab()
        .args(["pubsub", "--transport", "ros1", "--rate", "200hz", "--duration", "60s", "-q"])
        .args(["--json", json.to_str().unwrap()])
        .env("ROS_MASTER_URI", &master.uri)
        .env("ROS_IP", "127.0.0.1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // measuring: a topic with a publisher and a subscriber on the master (a loaded machine
    // takes seconds to start rtlab and its roles), and a little more
    let end = Instant::now() + Duration::from_secs(30);
    while !publisher_and_subscriber(&master.uri) {
        assert!(Instant::now() < end, "rtlab's nodes never registered with {}", master.uri);
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));
    let started = Instant::now();
    drop(master);
    let mut child = child;
    let end = Instant::now() + Duration::from_secs(40);
    while child.try_wait().unwrap().is_none() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = interrupt_if_running(child);
    assert!(started.elapsed() < Duration::from_secs(40), "the run went on without its master");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = read_json(&json);
    assert_eq!(v["interrupted"], true);
    let notes = v["config"]["notes"].to_string();
    assert!(
        notes.contains("stopped answering") && notes.contains("the run ended there"),
        "{notes}"
    );
    assert!(u(&v["streams"][0]["stats"]["count"]) > 0, "what was measured before is kept");
}

/// Whether the master at `uri` has a topic with a publisher and a subscriber
/// (`getSystemState`, through Python's XML-RPC client).
fn publisher_and_subscriber(uri: &str) -> bool {
    let script = format!(
        "import xmlrpc.client as x\n\
         _, _, (pubs, subs, _) = x.ServerProxy('{uri}').getSystemState('/t')\n\
         print(bool({{t for t, n in pubs if n}} & {{t for t, n in subs if n}}))"
    );
    Command::new("/usr/bin/python3")
        .args(["-c", &script])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "True")
}

/// Its output, SIGINT first if it still runs.
fn interrupt_if_running(mut child: Child) -> std::process::Output {
    if child.try_wait().unwrap().is_none() {
        return interrupt(child);
    }
    child.wait_with_output().unwrap()
}

#[test]
fn root_rtlab_ping_against_a_rospy_pong() {
    if !root_or_skip() {
        return;
    }
    let pair = NetnsPair::up("r1ping").unwrap();
    let master = TestMaster::start(Some(&pair.ns_a), &pair.ip_a);
    let topic = "joint";
    let pong =
        rospy(&pair.ns_a, &master.uri, &pair.ip_a, &["pong", "--topic", topic, "--seconds", "120"]);
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("ping.json");
    let o = rtlab_by_hand(&pair, &master.uri, "ping", topic)
        .args(["--rate", "100hz", "--count", "300", "--json", json.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = read_json(&json);
    let st = &v["streams"][0]["stats"];
    assert_eq!(v["streams"][0]["metric"], "rtt");
    let all =
        u(&st["count"]) + u(&st["late"]) + u(&st["lost"]) + st["overruns"].as_u64().unwrap_or(0);
    assert_eq!(all, 300, "{st}");
    assert_eq!(u(&st["lost"]), 0, "{st}");
    // the pong ends by itself 3 s after the last ping (no signal needed): every ping rtlab
    // sent (its slots but those it skipped) was echoed
    let p = pong.summary(Duration::from_secs(30));
    let sent = 300 - st["overruns"].as_u64().unwrap_or(0);
    assert_eq!(u(&p["measured"]), sent, "the pong echoed every ping: {p}");
}

#[test]
fn root_rtlab_sub_of_a_rospy_pub() {
    if !root_or_skip() {
        return;
    }
    let pair = NetnsPair::up("r1sub").unwrap();
    let master = TestMaster::start(Some(&pair.ns_a), &pair.ip_a);
    let topic = "joint_state";
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("sub.json");
    let sub = rtlab_by_hand(&pair, &master.uri, "sub", topic)
        .args([
            "--synced-clocks",
            "--rate",
            "50hz",
            "--duration",
            "120s",
            "--json",
            json.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let count = 300u64;
    let publisher = rospy(
        &pair.ns_a,
        &master.uri,
        &pair.ip_a,
        &["pub", "--topic", topic, "--rate", "50", "--count", &count.to_string()],
    );
    let p = publisher.summary(Duration::from_secs(60));
    assert_eq!(p["matched"], true, "the node never saw rtlab's subscriber: {p}");
    std::thread::sleep(Duration::from_millis(500));
    let o = interrupt(sub);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = read_json(&json);
    let s = &v["streams"][0];
    assert_eq!(s["metric"], "one_way_latency", "{s}");
    let st = &s["stats"];
    assert_eq!(u(&st["count"]) + u(&st["late"]), count, "{st}");
    // stamps on another clock than rtlab's by hand (the wall clock) would make every one late
    assert!(u(&st["count"]) > 0, "{st}");
    assert_eq!(u(&st["lost"]), 0, "{st}");
    assert_eq!(u(&st["duplicates"]), 0, "{st}");
}

#[test]
fn root_rtlab_pub_to_a_rospy_sub() {
    if !root_or_skip() {
        return;
    }
    let pair = NetnsPair::up("r1pub").unwrap();
    let master = TestMaster::start(Some(&pair.ns_a), &pair.ip_a);
    let topic = "cmd";
    let count = 300u64;
    let subscriber = rospy(
        &pair.ns_a,
        &master.uri,
        &pair.ip_a,
        &["sub", "--topic", topic, "--count", &count.to_string(), "--seconds", "90"],
    );
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("pub.json");
    let o = rtlab_by_hand(&pair, &master.uri, "pub", topic)
        .args(["--rate", "50hz", "--count", &count.to_string(), "--json", json.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // the node ends at the last sequence number, or 3 s after its last message when rtlab
    // skipped its last slots (a loaded machine)
    let r = subscriber.summary(Duration::from_secs(60));
    let v = read_json(&json);
    let s = &v["streams"][0];
    assert_eq!(s["metric"], "send_lateness", "{s}");
    // every message rtlab sent (its slots but those it skipped) reached the node, in order
    let sent = count - s["stats"]["overruns"].as_u64().unwrap_or(0);
    assert_eq!(u(&r["received"]), sent, "{r} {}", s["stats"]);
    assert!(r["first_seq"].as_u64().is_some_and(|f| f < count - sent + 1), "{r}");
    assert_eq!(r["in_order"], true, "{r}");
    assert_eq!(u(&r["duplicates"]), 0, "{r}");
    // the stamps are rtlab's wall clock (a check of the mapping, not a latency)
    assert!(r["max_stamp_age_ns"].as_i64().unwrap() > 0, "{r}");
    let notes = v["config"]["notes"].to_string();
    assert!(notes.contains("1 subscriber matched"), "{notes}");
}

/// The processes whose network namespace is `ns`'s (`ip netns pids`).
fn pids_in(ns: &str) -> String {
    let o = Command::new("ip").args(["netns", "pids", ns]).output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// No process is left in either namespace of `pair` (within 10 s).
fn assert_pair_emptied(pair: &NetnsPair, what: &str) {
    let end = Instant::now() + Duration::from_secs(10);
    while !(pids_in(&pair.ns_a).is_empty() && pids_in(&pair.ns_b).is_empty()) {
        assert!(
            Instant::now() < end,
            "{what}: left running: {} in {}, {} in {}",
            pids_in(&pair.ns_a),
            pair.ns_a,
            pids_in(&pair.ns_b),
            pair.ns_b
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn root_far_netns_roscpp_nodes_on_both_sides_of_the_link_on_rtlabs_master() {
    if !root_or_skip() {
        return;
    }
    let pair = NetnsPair::up("r1far").unwrap();
    let d = tempfile::tempdir().unwrap();
    let far = format!("netns:{}", pair.ns_b);
    for mode in ["oneway", "roundtrip"] {
        let json = d.path().join(format!("{mode}.json"));
        let o = rtlab()
            .env("RTLAB_FAR_JOURNAL", d.path().join("far-journal"))
            .env_remove("ROS_MASTER_URI")
            .args(["pubsub", "--transport", "ros1", "--mode", mode, "--subscribers", "2"])
            .args(["--netns", &pair.ns_a, "--far", &far])
            .args(["--rate", "200hz", "--count", "300", "--reliability", "reliable"])
            .args(["--history", "keep-last:100", "-q", "--json", json.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{mode}: {}", stderr(&o));
        let v = read_json(&json);
        let f = &v["far"];
        assert_eq!(f["link"], far.as_str(), "{f}");
        assert_eq!(
            (f["near_address"].as_str(), f["far_address"].as_str()),
            (Some(pair.ip_a.as_str()), Some(pair.ip_b.as_str())),
            "{f}"
        );
        // the master rtlab started, reached by the far nodes at this side's address on the link
        let notes = v["config"]["notes"].to_string();
        let master = format!("master http://{}:", pair.ip_a);
        assert!(notes.contains(&master), "{mode}: {notes}");
        // roscpp in a namespace of the case's own: the near side in a process of its own, its
        // far roles started by this one through the agent
        assert!(notes.contains("ran in a process of its own (roscpp holds one node"), "{notes}");
        every_slot_accounted(&v, 2, 300, &format!("{mode}, reliable TCPROS across the link"));
        let uri = notes.split("master ").nth(1).and_then(|r| r.split('"').next()).unwrap();
        assert_pair_emptied(&pair, &format!("{mode} (master {uri})"));
    }
    // Ctrl-C mid-run: the near side apart is told to stop, and the far subscribers' reports
    // still reach it (through this process)
    let json = d.path().join("stopped.json");
    let child = rtlab()
        .env("RTLAB_FAR_JOURNAL", d.path().join("far-journal"))
        .env_remove("ROS_MASTER_URI")
        .args(["pubsub", "--transport", "ros1", "--netns", &pair.ns_a, "--far", &far])
        .args(["--rate", "200hz", "--duration", "60s", "-q", "--json", json.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // measuring: the document is written at the end only, so wait for the far side's roscpp
    // node to be up (a process of the far namespace other than the agent) and a little more
    let end = Instant::now() + Duration::from_secs(30);
    while pids_in(&pair.ns_b).lines().count() < 2 {
        assert!(Instant::now() < end, "the far side never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(3));
    let o = interrupt(child);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = read_json(&json);
    assert_eq!(v["interrupted"], true);
    let sub = v["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"].as_str().unwrap().contains(".sub"));
    let sub = sub.unwrap_or_else(|| panic!("no far subscriber's stream: {}", v["streams"]));
    assert!(u(&sub["stats"]["count"]) > 0, "{}", sub["stats"]);
    assert_pair_emptied(&pair, "after Ctrl-C");
    // a user's master on loopback cannot be reached from the far side: one line
    let o = rtlab()
        .env("RTLAB_FAR_JOURNAL", d.path().join("far-journal"))
        .env("ROS_MASTER_URI", "http://127.0.0.1:11311/")
        .args(["pubsub", "--transport", "ros1", "--netns", &pair.ns_a, "--far", &far])
        .args(["--count", "5", "-q"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(
        e.contains("127.0.0.1:11311") && e.contains("loopback") && e.contains(&pair.ip_a),
        "{e}"
    );
}

#[test]
fn bad_input_is_one_line() {
    assert_error(
        &["pubsub", "--transport", "cyclonedds", "--tcp-nodelay", "--count", "5"],
        &["--tcp-nodelay", "ros1 transport only"],
    );
    assert_error(
        &["pubsub", "--transport", "ros1", "--udpros", "--reliability", "reliable", "--count", "5"],
        &["--udpros", "best-effort"],
    );
    // UDPROS round trips stalled and crashed at exit here: one-way only
    assert_error(
        &["pubsub", "--transport", "ros1", "--udpros", "--mode", "roundtrip", "--count", "5"],
        &["--udpros", "one-way runs only", "TCPROS"],
    );
    assert_error_of(
        rtlab()
            .args(["pubsub", "--transport", "ros1", "--count", "5", "-q"])
            .env("ROS_MASTER_URI", "http://127.0.0.1:9/"),
        &["127.0.0.1:9", "does not answer"],
    );
}
