//! `rtlab timer --mode roscpp*` through the binary: roscpp itself (Debian's ROS 1, libroscpp
//! 1.15, scripts/setup.sh installs it), a node of its own per thread, with a master rtlab
//! starts and stops. What is asserted is behaviour roscpp's code guarantees and S4 describes,
//! never a latency bound: every callback accounted for, roscpp's periodic timers never run a
//! callback before its expected time (the timer thread queues it once `next_expected <= now`),
//! the policy reaching roscpp's threads when set before `ros::init` and not when set after.

mod common;
use common::*;
use serde_json::Value;

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `rtlab timer ARGS --json FILE` (exit 0 asserted): the document and the terminal's text.
fn timer(dir: &std::path::Path, name: &str, args: &[&str]) -> (Value, String) {
    let json = dir.join(format!("{name}.json"));
    let mut all = vec!["timer"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--json", json.to_str().unwrap()]);
    let o = run(&all);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    (read_json(&json), stdout(&o))
}

/// The stream named `name`'s stats.
fn stats<'a>(doc: &'a Value, name: &str) -> &'a Value {
    let s = doc["streams"].as_array().unwrap().iter().find(|s| s["name"] == name);
    &s.unwrap_or_else(|| panic!("no stream {name} in {}", doc["streams"]))["stats"]
}

#[test]
fn every_roscpp_timer_runs_roscpp_itself_and_every_callback_is_accounted_for() {
    let d = tempfile::tempdir().unwrap();
    for (mode, second, metric) in [
        ("roscpp", "thread0.expiry", "expiry_error"),
        ("roscpp-wall", "thread0.expiry", "expiry_error"),
        ("roscpp-steady", "thread0.expiry", "expiry_error"),
        ("roscpp-oneshot", "thread0.anchor", "anchor_error"),
    ] {
        let (doc, text) = timer(
            d.path(),
            mode,
            &[
                "--mode",
                mode,
                "-i",
                "1ms",
                "--count",
                "200",
                "--policy",
                "fifo",
                "--priority",
                "80",
            ],
        );
        assert_eq!(doc["config"]["mode"], mode);
        let node = &doc["config"]["roscpp"][0];
        assert!(node["error"].is_null(), "{mode}: {node}");
        assert!(node["roscpp"].as_str().unwrap().starts_with("1.15"), "{mode}: {node}");
        // the count is of callbacks: each one is a sample, in both streams
        assert_eq!(node["callbacks"], 200, "{mode}: {node}");
        assert_eq!(stats(&doc, "thread0")["count"], 200, "{mode}");
        assert_eq!(stats(&doc, second)["count"], 200, "{mode}");
        let s = doc["streams"].as_array().unwrap().iter().find(|s| s["name"] == second).unwrap();
        assert_eq!(s["metric"], metric);
        // the node's spinning thread ran at the asked policy (set before ros::init)
        assert_eq!(node["spin"]["policy"], "fifo", "{mode}: {node}");
        assert_eq!(node["spin"]["priority"], 80, "{mode}: {node}");
        let labels = &doc["streams"][0]["labels"];
        assert_eq!(labels["policy_seen"], "fifo", "{mode}");
        if mode != "roscpp-oneshot" {
            // roscpp queues a periodic callback once its expected time has come, and reads
            // current_real after that: never early, on the timer's own clock
            assert!(stats(&doc, "thread0")["min_ns"].as_i64().unwrap() >= 0, "{mode}");
            assert!(stats(&doc, second)["min_ns"].as_i64().unwrap() >= 0, "{mode}");
            assert_eq!(stats(&doc, "thread0.jitter")["count"], 199, "{mode}");
        } else {
            // the anchor error is roscpp's own: callback against the anchor setPeriod took
            assert!(stats(&doc, second)["min_ns"].as_i64().unwrap() >= 0, "{mode}");
        }
        // the terminal says where roscpp's threads ran
        assert!(text.contains(&format!("{mode} mode")), "{text}");
        assert!(text.contains("note: thread0: roscpp's threads (node pid"), "{text}");
        assert_rosmaster_gone(node["master"].as_str().unwrap());
    }
}

#[test]
fn the_policy_set_after_ros_init_does_not_reach_roscpps_timer_thread() {
    // S4: "Priority and policy must be set before the middleware starts its threads, or the
    // threads it spawns run at normal priority"
    let d = tempfile::tempdir().unwrap();
    let args = |mode: &'static str, order: &'static str| {
        [
            "--mode",
            mode,
            "-i",
            "1ms",
            "--count",
            "100",
            "--policy",
            "rr",
            "--priority",
            "70",
            "--roscpp-rt",
            order,
        ]
    };
    let (before, text) = timer(d.path(), "before", &args("roscpp", "before-init"));
    let node = &before["config"]["roscpp"][0];
    assert_eq!(node["order"], "before-init");
    assert_eq!(node["timer"]["policy"], "rr", "{node}");
    assert_eq!(node["timer"]["priority"], 70, "{node}");
    for t in node["others"].as_array().unwrap() {
        assert_eq!(t["policy"], "rr", "every roscpp thread inherited it: {node}");
    }
    assert!(text.contains("set before ros::init (S4's order)"), "{text}");
    let codes = |doc: &Value| -> Vec<String> {
        doc["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["code"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(!codes(&before).contains(&"timer-thread-not-realtime".to_string()));

    let (after, text) = timer(d.path(), "after", &args("roscpp", "after-init"));
    let node = &after["config"]["roscpp"][0];
    assert_eq!(node["order"], "after-init");
    assert_eq!(node["spin"]["policy"], "rr", "{node}");
    assert_eq!(node["timer"]["policy"], "other", "{node}");
    assert!(!node["others"].as_array().unwrap().is_empty(), "{node}");
    for t in node["others"].as_array().unwrap() {
        assert_eq!(t["policy"], "other", "{node}");
    }
    assert!(text.contains("timer thread at other") && text.contains("(S4's warning)"), "{text}");
    let notes = after["config"]["notes"].as_array().unwrap();
    assert!(notes[0].as_str().unwrap().contains("S4's warning"), "{notes:?}");
    assert_eq!(stats(&after, "thread0")["count"], 100);
    // and the run warns, with what to do
    let w = after["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "timer-thread-not-realtime");
    let w = w.unwrap_or_else(|| panic!("no timer-thread-not-realtime in {}", after["warnings"]));
    assert!(
        w["message"].as_str().unwrap().contains("ran at other")
            && w["message"].as_str().unwrap().contains("--roscpp-rt before-init"),
        "{w}"
    );
    // S4's one-shot loop too (the preset's after-init rows): roscpp's timer thread exists
    // once the timer does, though the loop starts it later
    let (oneshot, _) = timer(d.path(), "oneshot-after", &args("roscpp-oneshot", "after-init"));
    let node = &oneshot["config"]["roscpp"][0];
    assert_eq!(node["timer"]["policy"], "other", "{node}");
    assert!(codes(&oneshot).contains(&"timer-thread-not-realtime".to_string()), "{node}");
}

#[test]
fn the_roscpp_timer_beside_its_model_at_the_same_settings() {
    // the model and roscpp itself, RT priority, both kept in one store's terms: the same
    // streams, and neither runs a periodic callback early
    let d = tempfile::tempdir().unwrap();
    for (real, model) in [("roscpp", "roscpp-model"), ("roscpp-oneshot", "oneshot-model")] {
        let args =
            |m: &'static str| ["--mode", m, "-i", "2ms", "--count", "100", "--policy", "fifo"];
        let (r, _) = timer(d.path(), real, &args(real));
        let (m, _) = timer(d.path(), model, &args(model));
        let names = |doc: &Value| -> Vec<String> {
            doc["streams"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["name"].as_str().unwrap().replace(".expiry", ".jitter"))
                .filter(|n| !n.ends_with(".jitter"))
                .collect()
        };
        assert_eq!(names(&r), names(&m), "{real} beside {model}");
        assert!(r["config"]["roscpp"].is_array() && m["config"].get("roscpp").is_none());
        for doc in [&r, &m] {
            let anchor_or_main = if real == "roscpp" { "thread0" } else { "thread0.anchor" };
            assert!(stats(doc, anchor_or_main)["min_ns"].as_i64().unwrap() >= 0, "{real}/{model}");
            // roscpp's count is of callbacks; a model's of slots (a skipped one counts)
            let main = stats(doc, "thread0");
            let skipped = if doc == &m { main["overruns"].as_u64().unwrap_or(0) } else { 0 };
            assert_eq!(main["count"].as_u64().unwrap() + skipped, 100, "{real}/{model}");
        }
    }
}

#[test]
fn ctrl_c_stops_the_node_and_keeps_every_callback() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("c.json");
    let child = rtlab()
        .args([
            "timer",
            "--mode",
            "roscpp-steady",
            "-i",
            "1ms",
            "--duration",
            "60s",
            "--policy",
            "other",
            "--json",
            json.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let o = interrupt(child);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc = read_json(&json);
    assert_eq!(doc["interrupted"], true);
    let node = &doc["config"]["roscpp"][0];
    assert!(node["error"].is_null(), "the node stopped through its ring and reported: {node}");
    let callbacks = node["callbacks"].as_u64().unwrap();
    assert!(callbacks > 0);
    assert_eq!(stats(&doc, "thread0")["count"].as_u64().unwrap(), callbacks);
    assert_rosmaster_gone(node["master"].as_str().unwrap());
    let prefix = format!("rtlab-ros1-{pid}-");
    let left = std::fs::read_dir(std::env::temp_dir()).unwrap().flatten();
    let left: Vec<_> =
        left.filter(|e| e.file_name().to_string_lossy().starts_with(&prefix)).collect();
    assert!(left.is_empty(), "the master's ROS_HOME left: {left:?}");
}

#[test]
fn bad_input_and_missing_parts_are_one_line() {
    assert_error(
        &["timer", "--mode", "abs", "--roscpp-rt", "after-init", "--count", "5"],
        &["--roscpp-rt", "roscpp modes only"],
    );
    assert_error(
        &["timer", "--mode", "roscpp", "--roscpp-rt", "later", "--count", "5"],
        &["--roscpp-rt"],
    );
    assert_error(
        &["timer", "--mode", "roscpp-oneshot", "--policy", "fifo", "--cpus", "0", "--count", "5"],
        &["roscpp-oneshot", "starve", "CPU 0"],
    );
    // the user's master, not answering
    assert_error_of(
        rtlab()
            .args(["timer", "--mode", "roscpp", "--count", "5", "-q"])
            .env("ROS_MASTER_URI", "http://127.0.0.1:9/"),
        &["http://127.0.0.1:9/ (ROS_MASTER_URI) does not answer"],
    );
    // no master to start: rosmaster not on the PATH
    assert_error_of(
        rtlab()
            .args(["timer", "--mode", "roscpp", "--count", "5", "-q"])
            .env("PATH", "/nonexistent")
            .env_remove("ROS_MASTER_URI"),
        &["rosmaster", "python3-rosmaster"],
    );
}
