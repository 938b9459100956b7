//! `rtlab trace` against a real ROS 2 application: a three-node rclpy pipeline (rcl,
//! rmw_fastrtps_cpp, Fast DDS 3.2 from the venv scripts/setup.sh installs in /opt/rtlab/ros2;
//! tests/support/rclpy_pipeline.py), its source in namespace `a` and its relay and sink in
//! namespace `b` (a veth between them), started by a shell script that rtlab traces.
//!
//! Asserted: every published message found at every take (per edge: taken = published,
//! nothing lost), the chain found by itself with every message along it, its hops adding up
//! to its end-to-end, and against the stamps the nodes write themselves (the Header stamp
//! before the source's publish, the sink's clock in its callback) each message's traced
//! latency inside them; the terminal's tables; bad input as one line. Never a latency bound.
//! Needs root (namespaces): skipped with a reason otherwise; the ROS 2 venv is a dependency.

mod common;
#[path = "support/ros2_node.rs"]
mod ros2_node;

use common::*;
use ros2_node::Node;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

static DOMAIN: AtomicU32 = AtomicU32::new(0);

fn domain() -> u32 {
    // a domain of this test process's own (tests run side by side)
    150 + (std::process::id() % 40) * 2 + DOMAIN.fetch_add(1, Ordering::Relaxed) % 2
}

fn script(dir: &std::path::Path, pair: &Pair, domain: u32, count: u32) -> PathBuf {
    script_in(dir, (&pair.ns_a, &pair.ns_b), domain, count)
}

/// The pipeline's script: its source in namespace `ns.0`, its relay and sink in `ns.1`.
fn script_in(dir: &std::path::Path, ns: (&str, &str), domain: u32, count: u32) -> PathBuf {
    let py = ros2_node::PYTHON;
    let p = ros2_node::pipeline_script();
    let p = p.display();
    let sink = dir.join("sink.json");
    let text = format!(
        "#!/bin/sh\nexport ROS_DOMAIN_ID={domain}\n\
         ip netns exec {b} {py} {p} sink --input /filtered --count {count} --seconds 40 > {sink} & S=$!\n\
         ip netns exec {b} {py} {p} relay --input /scan --output /filtered --seconds 40 > /dev/null & R=$!\n\
         sleep 3\n\
         ip netns exec {a} {py} {p} source --rate 100 --count {count} > /dev/null\n\
         wait $S\nkill -INT $R\nwait\n",
        a = ns.0,
        b = ns.1,
        sink = sink.display()
    );
    let s = dir.join("pipeline.sh");
    std::fs::write(&s, text).unwrap();
    s
}

#[test]
fn trace_accounts_for_every_message_of_an_rclpy_pipeline_across_two_namespaces() {
    if ros2_node::skip() {
        return;
    }
    let pair = Pair::up("tr");
    let dir = std::env::temp_dir().join(format!("rtlab-trace-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let count = 200;
    let s = script(&dir, &pair, domain(), count);
    let json = dir.join("trace.json");
    let o = rtlab()
        .args(["trace", "--json", json.to_str().unwrap(), "--", "sh", s.to_str().unwrap()])
        .output()
        .unwrap();
    let out = ran(&o, "rtlab trace");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let t = &doc["config"]["trace"];
    assert_eq!(t["ended"]["by"], "exit", "{t}");
    let procs = t["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 3, "the three nodes' processes (not sh, not ip): {procs:?}");
    assert!(procs.iter().all(|p| p["dropped"] == 0 && p["abandoned"] == 0), "{procs:?}");
    // every published message found at every take
    let edges = t["edges"].as_array().unwrap();
    assert_eq!(edges.len(), 2, "{edges:?}");
    for e in edges {
        assert_eq!(e["taken"], count, "{e}");
        assert_eq!(e["lost"], 0, "{e}");
        assert_eq!(e["before_first"], 0, "{e}");
    }
    assert_eq!(t["unjoined_takes"], 0);
    assert_eq!(t["publishes"], 2 * count);
    // the chain, found from the graph and the timing
    let chains = t["chains"].as_array().unwrap();
    assert_eq!(chains.len(), 1, "{chains:?}");
    let c = &chains[0];
    assert_eq!(c["topics"], serde_json::json!(["/scan", "/filtered"]));
    assert_eq!(c["messages"], count);
    assert_eq!(c["incomplete"], 0);
    for w in c["worst"].as_array().unwrap() {
        let hops: i64 = w["hops_ns"].as_array().unwrap().iter().map(|h| h.as_i64().unwrap()).sum();
        assert_eq!(hops, w["end_to_end_ns"].as_i64().unwrap(), "the hops add up: {w}");
    }
    // the nodes' own stamps bracket each traced message: the sum of the traced end-to-end
    // latencies is at most the sum of the sink's (stamp before publish, clock in callback)
    let sink: Value = std::fs::read_to_string(dir.join("sink.json"))
        .unwrap()
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .expect("the sink's summary");
    assert_eq!(sink["received"], count);
    let nodes_sum: i64 =
        sink["e2e_ns"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).sum();
    let stream = doc["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["metric"] == "chain_latency")
        .expect("the chain's stream");
    let traced_sum = stream["stats"]["mean_ns"].as_i64().unwrap() * i64::from(count);
    assert!(
        traced_sum <= nodes_sum + i64::from(count),
        "traced {traced_sum} > the nodes' {nodes_sum}"
    );
    assert_eq!(stream["stats"]["count"], count);
    // the terminal: the relay's row of the nodes' table, then the rest
    let relay: Vec<&str> = out
        .lines()
        .find(|l| l.starts_with("/pipeline_relay_filtered "))
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    assert_eq!(
        relay.get(..5),
        Some(&["/pipeline_relay_filtered", "/scan", "/filtered", "200", "200"][..]),
        "{out}"
    );
    for needle in [
        "processes traced: 3",
        "/scan      /pipeline_source -> /pipeline_relay_filtered",
        "chain /scan -> /filtered: 200 messages, 0 incomplete",
        "/pipeline_relay_filtered (node)",
        "worst at",
        "note: no callbacks",
    ] {
        assert!(out.contains(needle), "'{needle}' not in:\n{out}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_is_one_line() {
    assert_error(&["trace"], &["command", "none given"]);
    assert_error(&["trace", "--", "/nonexistent/rtlab-app"], &["/nonexistent/rtlab-app"]);
    assert_error(&["trace", "--chain", "/a", "--", "true"], &["chain", "two topics"]);
    assert_error(&["trace", "--deadline", "/a", "--", "true"], &["deadline", "TOPIC=DURATION"]);
    assert_error(&["trace", "--slots", "1000", "--", "true"], &["slots", "power of two"]);
    assert_error(
        &["trace", "--trace-on-spike", "1ms", "--", "true"],
        &["--trace-on-spike", "not with rtlab trace yet"],
    );
}

#[test]
fn a_command_that_starts_no_ros_2_is_said_so() {
    let o = rtlab().args(["trace", "--", "sh", "-c", "echo $((40 + 2))-app"]).output().unwrap();
    let out = ran(&o, "rtlab trace");
    let err = stderr(&o);
    assert!(out.contains("processes traced: 0"), "{out}");
    assert!(err.contains("no process of the command started ROS 2"), "{err}");
    // the application's output goes to rtlab's stderr, rtlab's stdout stays its own
    assert!(err.contains("42-app") && !out.contains("42-app"), "{out}\n{err}");
}

/// tests/support/tracepoints.c built once per test binary (gcc, as build.rs's C): a
/// stand-in application that calls the tracepoints as rcl and the RMW do, as fast as it can.
fn stand_in() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/tracepoints.c");
            let out = crate::common::scratch(&format!("rtlab-tracepoints-{}", std::process::id()));
            let s = std::process::Command::new("cc")
                .args(["-O2", "-o", out.to_str().unwrap(), src.to_str().unwrap(), "-ldl"])
                .status()
                .expect("cc (gcc) builds the stand-in");
            assert!(s.success(), "cc {}", src.display());
            out
        })
        .clone()
}

fn said(out: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(out).unwrap_or_default().split_whitespace().map(String::from).collect()
}

#[test]
fn a_full_ring_drops_and_counts_and_the_application_goes_on() {
    let app = stand_in();
    let dir = tempfile::tempdir().unwrap();
    let (json, out) = (dir.path().join("t.json"), dir.path().join("app.out"));
    let calls = 2_000_000u64;
    let o = rtlab()
        .args(["trace", "--slots", "1024", "--json", json.to_str().unwrap(), "--"])
        .args([app.to_str().unwrap(), &calls.to_string(), out.to_str().unwrap()])
        .output()
        .unwrap();
    ran(&o, "rtlab trace of the stand-in");
    // the application made every call and ended by itself
    assert_eq!(said(&out)[..2], ["calls".to_string(), calls.to_string()]);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let t = &doc["config"]["trace"];
    assert_eq!(t["ended"]["status"], "exit 0");
    let p = &t["processes"][0];
    let (events, dropped) = (p["events"].as_u64().unwrap(), p["dropped"].as_u64().unwrap());
    assert!(dropped > 0, "a ring of 1024 slots keeps up with {calls} calls back to back? {p}");
    // every call is either read or counted as dropped: init, node, publisher, 2 per call
    assert_eq!(events + dropped, 3 + 2 * calls, "{p}");
    let codes: Vec<&str> =
        doc["warnings"].as_array().unwrap().iter().filter_map(|w| w["code"].as_str()).collect();
    assert!(codes.contains(&"trace-dropped"), "{codes:?}");
    assert!(stderr(&o).contains("did not fit their process's ring"), "{}", stderr(&o));
}

#[test]
fn the_application_goes_on_when_rtlab_dies_and_the_next_rtlab_removes_what_it_left() {
    let app = stand_in();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("app.out");
    // 2000 calls over 3 s
    let mut child = rtlab()
        .args(["trace", "--", app.to_str().unwrap(), "2000", out.to_str().unwrap(), "3"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let prefix = format!("rtlab-trace-{}-", child.id());
    let rings = || {
        std::fs::read_dir("/dev/shm")
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
            .collect::<Vec<_>>()
    };
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !rings().first().is_some_and(|d| {
        std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .any(|e| e.path().extension().is_some_and(|x| x == "ring"))
    }) {
        assert!(std::time::Instant::now() < end, "no ring appeared");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no Drop, no handler
    child.wait().unwrap();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while said(&out).len() < 2 {
        assert!(std::time::Instant::now() < end, "the application did not end after rtlab died");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(said(&out)[..2], ["calls".to_string(), "2000".to_string()]);
    // the dead rtlab's directory goes at the next rtlab trace's start (this one's, or one of
    // the tests beside it)
    let o = rtlab().args(["trace", "--", "true"]).output().unwrap();
    ran(&o, "the next rtlab trace");
    assert_eq!(rings(), Vec::<PathBuf>::new(), "the dead rtlab's directory was not removed");
}

#[test]
fn a_killed_process_is_kept_with_what_it_said() {
    let app = stand_in();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("t.json");
    let line = format!("{} 100000 /dev/null 10 & sleep 1; kill -9 $!; wait; exit 0", app.display());
    let o = rtlab()
        .args(["trace", "--json", json.to_str().unwrap(), "--", "sh", "-c", &line])
        .output()
        .unwrap();
    ran(&o, "rtlab trace");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let p = &doc["config"]["trace"]["processes"][0];
    let events = p["events"].as_u64().unwrap();
    assert!(events > 3 && events < 3 + 200_000, "killed after 1 s of 10: {p}");
    assert_eq!(doc["config"]["trace"]["nodes"][0]["name"], "/stand_in");
}

#[test]
fn a_trace_inside_a_trace_is_refused() {
    let bin = env!("CARGO_BIN_EXE_rtlab");
    let dir = tempfile::tempdir().unwrap();
    let err = dir.path().join("inner.err");
    let line = format!("{bin} trace -- true 2> {}; echo $? >> {}", err.display(), err.display());
    let o = rtlab().args(["trace", "--", "sh", "-c", &line]).output().unwrap();
    ran(&o, "the outer rtlab trace");
    let inner = std::fs::read_to_string(&err).unwrap();
    let lines: Vec<&str> = inner.lines().collect();
    assert_eq!(lines.len(), 2, "one line, then the exit status: {inner}");
    assert!(lines[0].contains("runs under `rtlab trace` already"), "{inner}");
    assert_eq!(lines[1], "2");
}

#[test]
fn a_scenarios_trace_is_stored_reported_gated_by_its_chain_and_compared() {
    if ros2_node::skip() {
        return;
    }
    let pair = Pair::up("ts");
    let dir = tempfile::tempdir().unwrap();
    let s = script_in(dir.path(), (&pair.ns_a, &pair.ns_a), domain(), 100);
    let scenario = dir.path().join("trace.toml");
    std::fs::write(
        &scenario,
        format!(
            "name = \"trace-pipeline\"\nduration = \"60s\"\n\n[[probe]]\nkind = \"trace\"\ncommand = \"sh {}\"\n\n[[gate]]\nchain = \"/scan,/filtered\"\nlost = 0\nmax = \"10s\"\n",
            s.display()
        ),
    )
    .unwrap();
    let db = dir.path().join("r.db");
    let html = dir.path().join("r.html");
    let (db, html) = (db.to_str().unwrap(), html.to_str().unwrap());
    for _ in 0..2 {
        // a lock of its own: the tests beside it trace at the same time on purpose
        let o = rtlab()
            .env("RTLAB_LOCK", dir.path().join("lock"))
            .args(["run", scenario.to_str().unwrap(), "--db", db, "--html", html])
            .output()
            .unwrap();
        let out = ran(&o, "rtlab run of a trace scenario");
        assert!(out.contains("gates passed: 2 kept"), "{out}");
    }
    let o = rtlab().args(["report", "--db", db]).output().unwrap();
    let out = ran(&o, "rtlab report");
    for needle in [
        "processes traced: 3",
        "chain /scan -> /filtered: 100 messages, 0 incomplete",
        "/pipeline_relay_filtered (node)",
    ] {
        assert!(out.contains(needle), "'{needle}' not in:\n{out}");
    }
    let page = std::fs::read_to_string(html).unwrap();
    for needle in [
        "<h2>Trace</h2>",
        "<svg class=\"tracegraph\"",
        "/pipeline_source",
        "<table class=\"tracechain\">",
        "<table class=\"tracenodes\">",
    ] {
        assert!(page.contains(needle), "'{needle}' not in the HTML report");
    }
    let o = rtlab().args(["compare", "1", "2", "--db", db]).output().unwrap();
    let out = ran(&o, "rtlab compare");
    assert!(out.contains("chain /scan -> /filtered"), "{out}");
    // a gate's chain that is not one is refused in one line
    std::fs::write(&scenario, "name = \"t\"\nduration = \"1s\"\n[[probe]]\nkind = \"trace\"\ncommand = \"true\"\n[[gate]]\nchain = \"/scan\"\nmax = \"1ms\"\n").unwrap();
    assert_error(&["run", scenario.to_str().unwrap(), "--db", db], &["gate[0].chain", "topics"]);
}

#[test]
fn a_running_pipeline_is_traced_by_pid_through_uprobes_and_nothing_is_left() {
    if ros2_node::skip() {
        return;
    }
    let pair = Pair::up("tp");
    let d = domain().to_string();
    let node = |args: &[&str]| Node::pipeline(Some(&pair.ns_a), &d, args).ready(args[0]);
    let sink = node(&["sink", "--input", "/filtered", "--count", "100000", "--seconds", "40"]);
    let relay = node(&["relay", "--input", "/scan", "--output", "/filtered", "--seconds", "40"]);
    let source = node(&["source", "--rate", "100", "--count", "1500"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("t.json");
    let pids: Vec<String> =
        [&sink, &relay, &source].iter().map(|n| n.child.id().to_string()).collect();
    let mut args = vec!["trace", "-D", "4s", "--json", json.to_str().unwrap()];
    for p in &pids {
        args.extend(["--pid", p]);
    }
    let o = rtlab().args(&args).output().unwrap();
    drop((sink, relay, source));
    let out = ran(&o, "rtlab trace --pid");
    assert_eq!(uprobes_left(), Vec::<String>::new(), "uprobes left behind");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let t = &doc["config"]["trace"];
    assert_eq!(t["ended"]["by"], "duration");
    let edges = t["edges"].as_array().unwrap();
    assert_eq!(edges.len(), 2, "{t}");
    for e in edges {
        assert!(e["taken"].as_u64().unwrap() > 50, "{e}");
    }
    // every message of a publisher the probes saw is accounted for on each edge: taken, lost
    // between the first and last take, before the first (published before the probes, or
    // before the subscription took one), after the last (taken after the probes went)
    let published = |pid: &Value, topic: &Value| {
        t["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| &n["pid"] == pid && n["outputs"].as_array().unwrap().contains(topic))
            .map(|n| n["published"].as_u64().unwrap())
    };
    for e in edges {
        let sum: u64 = ["taken", "lost", "before_first", "after_last"]
            .iter()
            .map(|k| e[*k].as_u64().unwrap())
            .sum();
        assert_eq!(Some(sum), published(&e["publisher_pid"], &e["topic"]), "{e}");
    }
    let c = &t["chains"][0];
    assert_eq!(c["topics"], serde_json::json!(["/scan", "/filtered"]));
    assert!(c["messages"].as_u64().unwrap() > 50, "{t}");
    assert!(out.contains("(uprobes)") && out.contains("note: read through uprobes"), "{out}");
    assert!(out.contains(&format!("pid {}", pids[1])), "{out}");
}

#[test]
fn a_pid_that_runs_no_ros_2_is_one_line() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("uprobes need root"));
        return;
    }
    let mut sleeper = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id().to_string();
    assert_error(
        &["trace", "--pid", &pid, "-D", "1s"],
        &["--pid", &pid, "maps no libtracetools.so"],
    );
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert_error(&["trace", "--pid", "0"], &["--pid", "above 0"]);
    assert_error(&["trace", "--pid", &pid, "-D", "1s"], &["no such process"]);
    assert_error(&["trace", "--pid", "1", "--", "true"], &["--pid", "cannot be used with"]);
    assert_eq!(uprobes_left(), Vec::<String>::new());
}

#[test]
fn rtlabs_own_ros2_nodes_are_traced_message_by_message() {
    if ros2_node::skip() {
        return;
    }
    // rtlab pubsub through rcl, its subscriber a process of its own (forked, then exec'd:
    // a second ring under the same pid), traced by an rtlab outside it
    let dir = tempfile::tempdir().unwrap();
    let (t, p) = (dir.path().join("t.json"), dir.path().join("p.json"));
    let bin = env!("CARGO_BIN_EXE_rtlab");
    let o = rtlab()
        .args(["trace", "--json", t.to_str().unwrap(), "--", bin, "pubsub", "--transport", "ros2"])
        .args(["--count", "200", "--rate", "200hz", "--reliability", "reliable"])
        .args(["--history", "keep-last:100", "--no-mlockall", "--json", p.to_str().unwrap()])
        .output()
        .unwrap();
    ran(&o, "rtlab trace -- rtlab pubsub --transport ros2");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&t).unwrap()).unwrap();
    let pubsub: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    let tr = &doc["config"]["trace"];
    let procs = tr["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 2, "rtlab and its subscriber's process: {procs:?}");
    assert!(procs.iter().all(|p| p["events"].as_u64().unwrap() > 0), "{procs:?}");
    let edges = tr["edges"].as_array().unwrap();
    assert_eq!(edges.len(), 1, "{edges:?}");
    let e = &edges[0];
    assert!(e["topic"].as_str().unwrap().starts_with("/rtlab_"), "{e}");
    assert_ne!(e["publisher_pid"], e["subscription_pid"], "across processes: {e}");
    // every message rtlab published (its 200 and its warm-up) taken, none lost
    // (200 asked; fewer when a case ran out of its time on a loaded machine)
    let measured = pubsub["streams"][0]["stats"]["count"].as_u64().unwrap();
    assert!(measured > 0, "{pubsub}");
    assert!(e["taken"].as_u64().unwrap() >= measured, "{e}");
    // warm-up messages sent before the subscription matched are not lost: before its first
    let (taken, before) = (e["taken"].as_u64().unwrap(), e["before_first"].as_u64().unwrap());
    assert_eq!(tr["publishes"].as_u64(), Some(taken + before), "{tr}");
    assert_eq!(tr["takes"].as_u64(), Some(taken), "{tr}");
    assert_eq!((e["lost"].as_u64(), e["after_last"].as_u64()), (Some(0), Some(0)), "{e}");
}

#[test]
fn callbacks_are_named_timed_and_their_dispatch_measured() {
    // the stand-in takes each message back and hands it to a callback, as rclcpp does
    let app = stand_in();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("t.json");
    let o = rtlab()
        .args(["trace", "--json", json.to_str().unwrap(), "--"])
        .args([app.to_str().unwrap(), "300", "/dev/null", "0.3", "take"])
        .output()
        .unwrap();
    let out = ran(&o, "rtlab trace of the stand-in with callbacks");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let t = &doc["config"]["trace"];
    let c = &t["callbacks"][0];
    assert_eq!(c["symbol"], "stand_in_cb", "{t}");
    assert_eq!(c["duration"]["count"], 300);
    assert_eq!(c["dispatch"]["count"], 300, "each run after its take: {c}");
    assert_eq!(t["edges"][0]["taken"], 300);
    assert!(out.contains("callback stand_in_cb (pid "), "{out}");
    assert!(!out.contains("note: no callbacks"), "{out}");
}

#[test]
fn what_the_command_leaves_running_is_stopped_with_it() {
    // the shell ends at once; the stand-in it started in the background (30 s of calls)
    // goes with it: SIGINT, the trace keeps what it recorded
    let app = stand_in();
    let dir = tempfile::tempdir().unwrap();
    let (json, out) = (dir.path().join("t.json"), dir.path().join("app.out"));
    let line = format!("{} 300000 {} 30 & sleep 1; exit 0", app.display(), out.display());
    let began = std::time::Instant::now();
    let o = rtlab()
        .args(["trace", "--json", json.to_str().unwrap(), "--", "sh", "-c", &line])
        .output()
        .unwrap();
    ran(&o, "rtlab trace");
    assert!(began.elapsed() < std::time::Duration::from_secs(25), "the stand-in was left to run");
    assert!(!out.exists(), "the stand-in ran to its end");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let t = &doc["config"]["trace"];
    assert_eq!(t["ended"]["status"], "exit 0", "{t}");
    assert!(t["processes"][0]["events"].as_u64().unwrap() > 3, "{t}");
}
