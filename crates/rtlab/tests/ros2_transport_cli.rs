//! `rtlab pubsub --transport ros2` through the binary: ROS 2 itself (rcl and the installation's
//! RMW; scripts/setup.sh installs the package registry's ROS 2 in /opt/rtlab/ros2, found by
//! default). What a user sees: the table and the notes naming the ROS 2 it ran on, the JSON's
//! `config.ros2` and the `rmw` label, one line and exit 2 for every bad input, and `ros2`
//! beside another DDS implementation as the far side. Counts and labels are asserted, never
//! a latency.

mod common;

use common::*;
use serde_json::Value;

fn read_json(p: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Every stream of a finished document: sent = samples + lost + late, once each.
fn check_accounting(doc: &Value) {
    let streams = doc["streams"].as_array().unwrap();
    for s in streams.iter().filter(|s| s["metric"] != "send_lateness") {
        let st = &s["stats"];
        let published: u64 = s["labels"]["published"].as_str().unwrap().parse().unwrap();
        assert!(u(&st["count"]) > 0, "{}: no samples: {st}", s["name"]);
        assert_eq!(u(&st["count"]) + u(&st["lost"]) + u(&st["late"]), published, "{}", s["name"]);
        assert_eq!(u(&st["duplicates"]) + u(&st["malformed"]), 0, "{st}");
    }
}

/// Run the scenario `toml` into a store of its own and return the run as `export` gives it.
fn run_scenario(toml: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.toml");
    std::fs::write(&scenario, toml).unwrap();
    let db = dir.path().join("r.db");
    // --wait: the other tests of this binary measure beside (one measurement per machine)
    let o = run(&["run", scenario.to_str().unwrap(), "--db", db.to_str().unwrap(), "--wait", "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&["export", "1", "--db", db.to_str().unwrap(), "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

#[test]
fn bad_ros2_flags_are_one_line_and_exit_2() {
    assert_error(
        &["pubsub", "--transport", "ros2", "--ros2-prefix", "/nonexistent/ros", "--count", "10"],
        &["/nonexistent/ros", "not a ROS 2 installation"],
    );
    assert_error(
        &["pubsub", "--transport", "ros2", "--rmw", "rmw_nothing_cpp", "--count", "10"],
        &["rmw_nothing_cpp"],
    );
    assert_error(
        &["pubsub", "--transport", "ros2", "--rmw", "fastrtps", "--count", "10"],
        &["rmw", "fastrtps"],
    );
    assert_error(
        &["pubsub", "--transport", "cyclonedds", "--ros2-prefix", "/opt/ros/jazzy"],
        &["--ros2-prefix", "for the ros2 transport"],
    );
    assert_error(&["pubsub", "--transport", "ros2", "--domain", "233", "--count", "10"], &["233"]);
    // an installation built for the other machine (an aarch64 ROS 2 beside an x86-64 rtlab,
    // or the reverse): its rcl's ELF header says so
    let (theirs, machine, ours) = if cfg!(target_arch = "aarch64") {
        (62u16, "x86-64", "aarch64")
    } else {
        (183u16, "aarch64", "x86-64")
    };
    let other = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(other.path().join("share/rcl")).unwrap();
    std::fs::create_dir_all(other.path().join("lib")).unwrap();
    std::fs::write(
        other.path().join("share/rcl/package.xml"),
        "<package><version>10.1.3</version></package>",
    )
    .unwrap();
    let mut header = vec![0u8; 64];
    header[..6].copy_from_slice(b"\x7fELF\x02\x01");
    header[18..20].copy_from_slice(&theirs.to_le_bytes());
    std::fs::write(other.path().join("lib/librcl.so"), header).unwrap();
    let prefix = other.path().to_str().unwrap();
    assert_error(
        &["pubsub", "--transport", "ros2", "--ros2-prefix", prefix, "--count", "10"],
        &[prefix, &format!("built for {machine}"), &format!("this rtlab for {ours}"), "needs"],
    );
    // found here: Fast DDS 3 under the RMW announces the host's address, the loopback-only
    // fastdds reaches 127.0.0.1 alone: said before anything runs, both ways
    for (near, far) in [("fastdds", "ros2"), ("ros2", "fastdds")] {
        assert_error(
            &[
                "pubsub",
                "--transport",
                near,
                "--far-transport",
                far,
                "--mode",
                "roundtrip",
                "--count",
                "10",
            ],
            &["do not meet on one host", "--far netns:"],
        );
    }
}

#[test]
fn oneway_through_ros2_prints_its_table_and_records_the_ros2_it_ran_on() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let o = run(&[
        "pubsub",
        "--transport",
        "ros2",
        "--subscribers",
        "2",
        "--payload",
        "64,4kib",
        "--rate",
        "200hz",
        "--count",
        "200",
        "--reliability",
        "reliable",
        "--history",
        "keep-last:100",
        "--no-mlockall",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    // the headline, a row per size and subscriber (the sweep), the QoS in RMW words, the
    // installation named
    assert!(out.contains("rtlab pubsub: ros2 oneway"), "{out}");
    for row in
        ["64B 200hz n2 sub0", "64B 200hz n2 sub1", "4096B 200hz n2 sub0", "4096B 200hz n2 sub1"]
    {
        assert!(out.contains(row), "{row}: {out}");
    }
    assert!(out.contains("RMW_QOS_POLICY_RELIABILITY_RELIABLE"), "{out}");
    assert!(out.contains("note: ros2: ROS 2 "), "{out}");
    assert!(out.contains("rcl_take"), "{out}");
    let doc = read_json(&json);
    let r = &doc["config"]["ros2"];
    assert!(r["rcl_version"].as_str().is_some_and(|v| !v.is_empty()), "{r}");
    let rmw = r["rmw"].as_str().unwrap();
    assert!(rmw.starts_with("rmw_"), "{r}");
    assert_eq!(r["discovery"]["range"], "LOCALHOST", "{r}");
    let streams: Vec<&Value> = doc["streams"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["metric"] != "send_lateness")
        .collect();
    assert_eq!(streams.len(), 4, "2 sizes x 2 subscribers");
    for s in streams {
        assert_eq!(s["labels"]["transport"], "ros2");
        assert_eq!(s["labels"]["rmw"], rmw);
        assert_eq!(s["labels"]["ros_distro"], r["distro"]);
        assert_eq!(s["labels"]["placement"], "processes");
    }
    check_accounting(&doc);
}

#[test]
fn a_closed_loop_busy_polling_in_process_round_trip_through_ros2() {
    // the non-blocking take (rcl_take alone) in the pinger's own thread
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let o = run(&[
        "pubsub",
        "--transport",
        "ros2",
        "--mode",
        "roundtrip",
        "--schedule",
        "closed-loop",
        "--wait",
        "busy-poll",
        "--in-process",
        "--count",
        "300",
        "--no-mlockall",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc = read_json(&json);
    let s = &doc["streams"][0];
    assert_eq!(s["metric"], "rtt");
    assert_eq!(s["labels"]["placement"], "threads");
    assert_eq!(s["labels"]["wait"], "busy-poll");
    check_accounting(&doc);
}

#[test]
fn ros2_and_cyclonedds_are_each_others_far_side_on_one_host() {
    for (near, far) in [("ros2", "cyclonedds"), ("cyclonedds", "ros2")] {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        let o = run(&[
            "pubsub",
            "--transport",
            near,
            "--far-transport",
            far,
            "--mode",
            "roundtrip",
            "--rate",
            "100hz",
            "--count",
            "100",
            "--reliability",
            "reliable",
            "--history",
            "keep-last:100",
            "--no-mlockall",
            "-q",
            "--json",
            json.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{near} -> {far}: {}", stderr(&o));
        let doc = read_json(&json);
        let s = &doc["streams"][0];
        assert_eq!(s["labels"]["transport"], near);
        assert_eq!(s["labels"]["far_transport"], far);
        // the ROS 2 side is named whichever side it is on
        assert!(s["labels"]["rmw"].as_str().is_some_and(|r| r.starts_with("rmw_")), "{s}");
        assert!(doc["config"]["ros2"]["rmw"].is_string(), "{near} -> {far}");
        check_accounting(&doc);
    }
}

#[test]
fn root_thread_priority_reaches_the_rmws_own_threads() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("SCHED_FIFO needs root"));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let with = |policy: &str, priority: &str, rule: &str| {
        run(&[
            "pubsub",
            "--transport",
            "ros2",
            "--mode",
            "roundtrip",
            "--count",
            "100",
            "--rate",
            "100hz",
            "--policy",
            policy,
            "--priority",
            priority,
            "--thread-priority",
            rule,
            "--no-mlockall",
            "--json",
            json.to_str().unwrap(),
        ])
    };
    // Fast DDS 3 names its threads dds.udp.PORT, dds.ev.N, dds.shm.*, dds.asyn.*: all of
    // them below the app's 80 (lowering only some of them under the asynchronous writer,
    // which inherits 80, livelocked here: docs/ros2.md)
    let o = with("fifo", "80", "dds.=75");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    if !out.contains("rmw_fastrtps") {
        rtlab_sys::test_skip::skipped(format_args!(
            "the RMW is not Fast DDS's (thread names differ)"
        ));
        return;
    }
    assert!(
        out.contains("note: publisher process: thread dds.") && out.contains("-> fifo 75"),
        "{out}"
    );
    assert!(out.contains("subscriber processes: the same --thread-priority rules"), "{out}");

    // the same under the measuring threads' priority (dds.=-5: 75 under 80), and the cost's
    // thread groups say what the RMW's threads ran at, the pong process's too
    let relative = |policy: &str, priority: &str| with(policy, priority, "dds.=-5");
    // the receive threads' policy and priority at the window's end, per process
    let receive_sched = || -> Vec<(String, String)> {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let groups = doc["cost"]["windows"][0]["groups"].as_array().unwrap().clone();
        let mut v: Vec<(String, String)> = groups
            .iter()
            .filter(|g| g["group"] == "dds.udp.*")
            .map(|g| {
                let s = &g["sched"][0];
                let sched = format!("{} {}", s["policy"].as_str().unwrap(), s["priority"]);
                (g["process"].as_str().unwrap().to_string(), sched)
            })
            .collect();
        v.sort();
        v
    };
    let o = relative("fifo", "80");
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(
        out.contains("note: publisher process: thread dds.") && out.contains("-> fifo 75"),
        "{out}"
    );
    let both = |s: &str| vec![("pong0".to_string(), s.to_string()), ("rtlab".into(), s.into())];
    assert_eq!(receive_sched(), both("fifo 75"), "{out}");
    assert!(!stderr(&o).contains("receive threads"), "{}", stderr(&o));
    // at a normal policy a relative rule gives nothing, and says so
    let o = relative("other", "0");
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("--thread-priority dds.=-5: the measuring threads run at other"), "{out}");
    assert!(!out.contains("[fifo"), "nothing real-time: {out}");
    assert_eq!(receive_sched(), both("other 0"), "{out}");
}

#[test]
fn ros2_and_fastdds_side_by_side_in_one_run() {
    // one rtlab run process measures both: the case whose Fast DDS is not the one the
    // process holds runs its near side in a process of its own (a process holds one Fast DDS)
    let d = run_scenario(
        r#"name = "side"
description = "ros2 beside fastdds"
profiles = ["no-rt"]
[[probe]]
kind = "pubsub"
transport = ["fastdds", "ros2"]
rate = "200hz"
count = 150
reliability = "reliable"
history = "keep-last:100"
[[probe]]
kind = "pubsub"
transport = "fastdds"
fastdds_lib = "ros2"
rate = "200hz"
count = 150
reliability = "reliable"
history = "keep-last:100"
"#,
    );
    let cases = d["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 3, "{d}");
    let mut versions = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let doc = &c["document"];
        assert!(doc.is_object(), "a case failed: {c}");
        check_accounting(doc);
        let labels = &doc["streams"][0]["labels"];
        let apart = doc["config"]["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("ran in a process of its own"));
        // fastdds first (Debian's 2.9 held by the run), then ros2 apart (its RMW's Fast DDS),
        // then fastdds on ROS 2's own Fast DDS: the library ros2 ran on, in a process of its
        // own again (this one still holds Debian's)
        assert_eq!(apart, i > 0, "case {i}: {}", doc["config"]["notes"]);
        // its cost: measured where the case ran (a case apart: that process's threads and
        // max RSS, under `apart`), a publisher and a subscriber thread at least
        let w = &doc["cost"]["windows"][0];
        assert!(w["measuring"].as_array().unwrap().len() >= 2, "case {i}: {w}");
        let process = if apart { "apart" } else { "rtlab" };
        assert!(
            w["groups"].as_array().unwrap().iter().any(|g| g["process"] == process),
            "case {i}: {w}"
        );
        let has_apart = w["processes"].as_array().unwrap().iter().any(|p| p["process"] == "apart");
        assert_eq!(has_apart, apart, "case {i}: {w}");
        versions.push(match i {
            1 => doc["config"]["ros2"]["middleware_version"].clone(),
            _ => labels["fastdds_version"].clone(),
        });
    }
    assert!(versions[0].as_str().is_some_and(|v| v.starts_with("2.9")), "{versions:?}");
    assert_eq!(versions[1], versions[2], "fastdds_lib ros2 runs on the RMW's Fast DDS");
}

/// The same pairing with a far side (each case's own namespace pair): the ros2 case's near
/// side runs apart and asks this process for its far pong (the agent's), whose answers reach
/// it; every round trip is accounted for on both.
#[test]
fn ros2_beside_fastdds_with_a_far_side() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (network namespaces)"));
        return;
    }
    let d = run_scenario(
        r#"name = "far-side"
far = "pair"
profiles = ["no-rt"]
[[probe]]
kind = "pubsub"
transport = ["fastdds", "ros2"]
mode = "roundtrip"
rate = "200hz"
count = 150
reliability = "reliable"
history = "keep-last:100"
"#,
    );
    let cases = d["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2, "{d}");
    for (i, c) in cases.iter().enumerate() {
        let doc = &c["document"];
        assert!(doc.is_object(), "a case failed: {c}");
        check_accounting(doc);
        assert!(doc["far"]["link"].as_str().unwrap().starts_with("netns:"), "case {i}");
        let notes = doc["config"]["notes"].to_string();
        let apart = notes.contains("ran in a process of its own");
        assert_eq!(apart, i == 1, "case {i}: fastdds here, then ros2 apart: {notes}");
        assert_eq!(doc["streams"][0]["labels"]["transport"], ["fastdds", "ros2"][i], "case {i}");
    }
}

/// A wrong `--ros2-prefix` is said at once, not after waiting for another rtlab's measurement
/// to end (the machine's lock).
#[test]
fn a_wrong_ros2_prefix_is_said_before_waiting_for_the_machine() {
    use std::io::BufRead;
    // another rtlab measures (this test binary's lock): 60 s, unless ended below
    let mut holder = rtlab()
        .args(["timer", "--policy", "other", "--duration", "60s", "--interval", "10ms"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(holder.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with("rtlab timer"), "the holder measures: {first}");
    let o = run(&["pubsub", "--transport", "ros2", "--ros2-prefix", "/nonexistent/ros"]);
    let still_measuring = holder.try_wait().unwrap().is_none();
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("not a ROS 2 installation"), "{}", stderr(&o));
    assert!(still_measuring, "pubsub waited for the other measurement to end first");
}
