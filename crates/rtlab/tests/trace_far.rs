//! `rtlab trace --far`: a three-node rclpy pipeline (tests/support/rclpy_pipeline.py) split
//! over two sides, its source traced here (in namespace `a`) and its relay and sink traced
//! by the agent on the far side (namespace `b`), reached as `netns:` (one host, one clock)
//! and through a real sshd (`ssh:`: two clocks as far as rtlab knows, so the far times go
//! through the offset it measures over the link).
//!
//! Asserted: every published message found at every take across the two sides (taken =
//! published, nothing lost), the chain across them with its hops adding up, the far
//! processes and nodes named with their host, the clock's measurement (on one machine the
//! true offset is 0, so each measured offset lies within its own uncertainty: that is the
//! measurement's contract, not a latency bound), the far section, no agent left; bad input
//! as one line. Needs root (namespaces) and the ROS 2 venv (skipped with a reason otherwise);
//! the ssh case needs sshd (skipped otherwise).

mod common;
#[path = "support/ros2_node.rs"]
mod ros2_node;
#[path = "support/sshd.rs"]
mod sshd;

use common::*;
use ros2_node::Node;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// The far agents of this binary share one far lock: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn domain(n: u32) -> u32 {
    // a domain of this test process's own (test binaries may run side by side)
    110 + (std::process::id() % 40) * 2 + n
}

/// The near side's script (run here): the source in namespace `ns_a`, after the far side's
/// nodes had time to start; then a pause, so the far side takes the last messages before
/// the trace stops.
fn near_script(dir: &Path, ns_a: &str, domain: u32, count: u32) -> PathBuf {
    let py = ros2_node::PYTHON;
    let p = ros2_node::pipeline_script();
    let text = format!(
        "#!/bin/sh\nexport ROS_DOMAIN_ID={domain}\nsleep 3\n\
         ip netns exec {ns_a} {py} {p} source --rate 100 --count {count} > /dev/null\nsleep 2\n",
        p = p.display()
    );
    let s = dir.join("near.sh");
    std::fs::write(&s, text).unwrap();
    s
}

/// The far side's script (run by the agent, in its namespace): the relay and the sink.
fn far_script(dir: &Path, domain: u32, count: u32) -> PathBuf {
    let py = ros2_node::PYTHON;
    let p = ros2_node::pipeline_script();
    let p = p.display();
    let text = format!(
        "#!/bin/sh\nexport ROS_DOMAIN_ID={domain}\n\
         {py} {p} sink --input /filtered --count {count} --seconds 40 > /dev/null & S=$!\n\
         {py} {p} relay --input /scan --output /filtered --seconds 40 > /dev/null & R=$!\n\
         wait $S\nkill -INT $R\nwait\n"
    );
    let s = dir.join("far.sh");
    std::fs::write(&s, text).unwrap();
    s
}

/// What both cases assert of the document: every message across the two sides.
fn check_pipeline(doc: &Value, out: &str, far_host: &str, count: u32) {
    let t = &doc["config"]["trace"];
    let procs = t["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 3, "{procs:?}");
    let far: Vec<&Value> = procs.iter().filter(|p| p["host"].is_string()).collect();
    assert_eq!(far.len(), 2, "the relay and the sink are the far side's: {procs:?}");
    assert!(far.iter().all(|p| p["host"] == far_host), "{procs:?}");
    let edges = t["edges"].as_array().unwrap();
    assert_eq!(edges.len(), 2, "{edges:?}");
    for e in edges {
        assert_eq!(e["taken"], count, "{e}");
        assert_eq!(e["lost"], 0, "{e}");
        assert_eq!(e["before_first"], 0, "{e}");
    }
    let scan = edges.iter().find(|e| e["topic"] == "/scan").unwrap();
    assert_eq!(scan["across_hosts"], true, "{scan}");
    assert_eq!(scan["publisher_host"], Value::Null, "{scan}");
    assert_eq!(scan["subscription_host"], far_host, "{scan}");
    assert_eq!(t["unjoined_takes"], 0);
    let c = &t["chains"][0];
    assert_eq!(c["topics"], serde_json::json!(["/scan", "/filtered"]), "{t}");
    assert_eq!(c["messages"], count);
    assert_eq!(c["across_hosts"], true);
    for w in c["worst"].as_array().unwrap() {
        let hops: i64 = w["hops_ns"].as_array().unwrap().iter().map(|h| h.as_i64().unwrap()).sum();
        assert_eq!(hops, w["end_to_end_ns"].as_i64().unwrap(), "the hops add up: {w}");
        assert!(w["takes"].as_array().unwrap().iter().all(|k| k["host"] == far_host), "{w}");
    }
    // the clock measured before and after: on one machine, within its own uncertainty of 0
    let clock = &t["clock"];
    for m in [&clock["before"], &clock["after"]] {
        let (o, u) = (m["offset_ns"].as_i64().unwrap(), m["uncertainty_ns"].as_i64().unwrap());
        assert!(o.abs() <= u, "one clock measured {o} ± {u}: {clock}");
        assert_eq!(m["exchanges"], 16);
    }
    // the far section, with the far kernel's counters
    let f = &doc["far"];
    assert_eq!(f["host"], far_host, "{f}");
    assert!(f["counters"].is_object(), "{f}");
    for needle in [
        "processes traced: 3".to_string(),
        format!("on {far_host}"),
        "chain /scan -> /filtered: ".to_string(),
        "far side ".to_string(),
        "far side's application".to_string(),
    ] {
        assert!(out.contains(&needle), "'{needle}' not in:\n{out}");
    }
}

#[test]
fn a_pipeline_split_over_a_far_namespace_is_traced_on_both_sides() {
    if ros2_node::skip() {
        return;
    }
    let _g = serial();
    let pair = Pair::up("tf");
    let dir = tempfile::tempdir().unwrap();
    let count = 150;
    let near = near_script(dir.path(), &pair.ns_a, domain(0), count);
    let far = far_script(dir.path(), domain(0), count);
    let json = dir.path().join("t.json");
    let o = rtlab()
        .env("RTLAB_LOCK", dir.path().join("lock"))
        .env("RTLAB_FAR_JOURNAL", dir.path().join("far-journal"))
        .args(["trace", "--far", &format!("netns:{}", pair.ns_b)])
        .args(["--far-command", &format!("sh {}", far.display())])
        .args(["--json", json.to_str().unwrap(), "--", "sh", near.to_str().unwrap()])
        .output()
        .unwrap();
    let out = ran(&o, "rtlab trace --far netns:");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let host = doc["far"]["host"].as_str().unwrap().to_string();
    check_pipeline(&doc, &out, &host, count);
    let clock = &doc["config"]["trace"]["clock"];
    assert_eq!(clock["clocks"], "one-host", "{clock}");
    assert_eq!(clock["applied"], false);
    assert_eq!(doc["config"]["trace"]["edges"][0]["clock_uncertainty_ns"], 0);
    assert!(out.contains("clocks: one (the far side is a namespace of this host)"), "{out}");
}

/// Wait (at most 10 s) until no address of the namespaces is tentative (IPv6's duplicate
/// address detection on a fresh veth): a DDS participant made before that does not discover
/// the other side (as `rtlab netns up` waits).
fn settled(namespaces: &[&str]) {
    let tentative = |ns: &str| {
        let o = std::process::Command::new("ip").args(["-n", ns, "-o", "addr"]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).contains("tentative")
    };
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while namespaces.iter().any(|ns| tentative(ns)) {
        assert!(std::time::Instant::now() < end, "addresses still tentative after 10 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_pipeline_split_over_ssh_joins_through_the_measured_clock_offset() {
    if ros2_node::skip() {
        return;
    }
    if let Err(why) = sshd::available() {
        rtlab_sys::test_skip::skipped(format_args!("{why}"));
        return;
    }
    let _g = serial();
    let pair = sshd::NetnsPair::up("trf").unwrap();
    settled(&pair.names());
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("lock").to_string_lossy().into_owned();
    let journal = dir.path().join("far-journal").to_string_lossy().into_owned();
    let env = [("RTLAB_LOCK", lock.as_str()), ("RTLAB_FAR_JOURNAL", journal.as_str())];
    let sshd = sshd::Sshd::start_with_env(&pair.ns_b, &pair.ip_b, &env).unwrap();
    let bin = std::fs::canonicalize(env!("CARGO_BIN_EXE_rtlab")).unwrap();
    let count = 150;
    let near = near_script(dir.path(), &pair.ns_a, domain(1), count);
    let far = far_script(dir.path(), domain(1), count);
    let json = dir.path().join("t.json");
    let o = rtlab()
        .env("RTLAB_LOCK", &lock)
        .env("RTLAB_SSH", sshd.rtlab_ssh_env(&pair.ns_a))
        .env("RTLAB_FAR_BIN", &bin)
        .args(["trace", "--far", &format!("ssh:{}", sshd.host_alias())])
        .args(["--far-command", &format!("sh {}", far.display())])
        .args(["--json", json.to_str().unwrap(), "--", "sh", near.to_str().unwrap()])
        .output()
        .unwrap();
    let out = ran(&o, "rtlab trace --far ssh:");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let host = doc["far"]["host"].as_str().unwrap().to_string();
    check_pipeline(&doc, &out, &host, count);
    let t = &doc["config"]["trace"];
    let clock = &t["clock"];
    assert_eq!(clock["clocks"], "measured-offset", "{clock}");
    assert_eq!(clock["applied"], true);
    let u = clock["uncertainty_ns"].as_i64().unwrap();
    assert!(u > 0, "{clock}");
    let scan = t["edges"].as_array().unwrap().iter().find(|e| e["topic"] == "/scan").unwrap();
    assert_eq!(scan["clock_uncertainty_ns"], u, "{scan}");
    let chain = doc["streams"].as_array().unwrap().iter().find(|s| s["metric"] == "chain_latency");
    let def = chain.unwrap()["definition"].as_str().unwrap();
    assert!(def.contains(&format!("± {u} ns")), "{def}");
    assert!(out.contains("clocks: two; the far one's offset measured over the link"), "{out}");
    assert_eq!(doc["far"]["clocks"], "measured-offset");
    assert_eq!(doc["far"]["far_address"], pair.ip_b.as_str());
}

#[test]
fn bad_far_input_is_one_line() {
    assert_error(&["trace", "--far-command", "x", "--", "true"], &["--far"]);
    assert_error(
        &["trace", "--far", "netns:rtlab-nowhere", "--", "true"],
        &["far", "nothing to trace there"],
    );
    assert_error(
        &["trace", "--far", "robot2", "--far-command", "x", "--", "true"],
        &["far", "expected ssh:[USER@]HOST[:PORT], netns:NAME or pair"],
    );
    assert_error(
        &["trace", "--far", "netns:rtlab-nowhere", "--far-command", "x"],
        &["duration", "the far side is traced for a duration"],
    );
    assert_error(
        &["trace", "--far", "netns:x", "--far-pid", "0", "-D", "1s"],
        &["--far-pid", "above 0"],
    );
}

#[test]
fn a_far_command_that_cannot_start_is_one_line_and_leaves_no_agent() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (network namespaces)"));
        return;
    }
    let _g = serial();
    let pair = Pair::up("tb");
    let dir = tempfile::tempdir().unwrap();
    let o = rtlab()
        .env("RTLAB_LOCK", dir.path().join("lock"))
        .env("RTLAB_FAR_JOURNAL", dir.path().join("far-journal"))
        .args(["trace", "--far", &format!("netns:{}", pair.ns_b)])
        .args(["--far-command", "/nonexistent/rtlab-far-app", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("--far-command /nonexistent/rtlab-far-app: "), "{err}");
    // the agent there ended with the run
    let pids = |ns: &str| {
        let o = std::process::Command::new("ip").args(["netns", "pids", ns]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !pids(&pair.ns_b).is_empty() && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(pids(&pair.ns_b), "", "a process outlived the run in the far namespace");
}

#[test]
fn running_processes_on_the_far_side_alone_are_traced_by_pid() {
    if ros2_node::skip() {
        return;
    }
    let _g = serial();
    let pair = Pair::up("tq");
    let d = domain(0).to_string();
    // the whole pipeline on the far side, running before the trace
    let node = |args: &[&str]| Node::pipeline(Some(&pair.ns_b), &d, args).ready(args[0]);
    let children = [
        node(&["sink", "--input", "/filtered", "--count", "100000", "--seconds", "40"]),
        node(&["relay", "--input", "/scan", "--output", "/filtered", "--seconds", "40"]),
        node(&["source", "--rate", "100", "--count", "1500"]),
    ];
    let pids: Vec<String> = children.iter().map(|n| n.child.id().to_string()).collect();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("t.json");
    let mut args = vec!["trace", "-D", "4s", "--json", json.to_str().unwrap()];
    let far = format!("netns:{}", pair.ns_b);
    args.extend(["--far", &far]);
    for p in &pids {
        args.extend(["--far-pid", p]);
    }
    let o = rtlab()
        .env("RTLAB_LOCK", dir.path().join("lock"))
        .env("RTLAB_FAR_JOURNAL", dir.path().join("far-journal"))
        .args(&args)
        .output()
        .unwrap();
    drop(children);
    let out = ran(&o, "rtlab trace --far-pid");
    assert_eq!(uprobes_left(), Vec::<String>::new(), "uprobes left behind");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let t = &doc["config"]["trace"];
    let host = doc["far"]["host"].as_str().unwrap();
    let procs = t["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 3, "{procs:?}");
    assert!(procs.iter().all(|p| p["host"] == host), "nothing traced here: {procs:?}");
    let edges = t["edges"].as_array().unwrap();
    assert_eq!(edges.len(), 2, "{t}");
    for e in edges {
        assert!(e["taken"].as_u64().unwrap() > 50, "{e}");
        assert_eq!(e["across_hosts"], false, "{e}");
        assert_eq!(e["publisher_host"], host, "{e}");
    }
    assert!(t["nodes"].as_array().unwrap().iter().all(|n| n["host"] == host), "{t}");
    assert!(t["notes"].to_string().contains("far side: read through uprobes"), "{t}");
    assert!(out.contains(&format!("{} on {host}", pids[1])), "{out}");
    assert!(out.contains("rtlab trace: nothing here; far side netns:"), "{out}");
}
