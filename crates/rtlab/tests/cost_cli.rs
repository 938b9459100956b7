//! What every case cost, through the binary: a busy-polling pub/sub case shows about one CPU
//! per spinning thread, the far side's cost arrives through the agent (`--far netns:`), a
//! pub/sub case run in role processes brings their cost back, and every output path shows
//! it (the command's own table, `--json`, the store, `report` on the terminal and in HTML,
//! `export --what cost` and JSON, `compare`).
//!
//! Contract: counts, fields and orders of magnitude only, never a latency bound; CPU figures
//! are asserted broadly (this machine's vCPUs stall and are shared). Root tests say why they
//! skip when not root; they make their own namespaces and remove them in `Drop`.

mod common;
use common::*;

use serde_json::Value;
use std::path::Path;
use std::process::Output;

use std::sync::{Mutex, MutexGuard};

/// One measuring test at a time: they share the machine's CPUs and this binary's lock.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn ok(o: Output, what: &str) -> Output {
    assert_eq!(o.status.code(), Some(0), "{what}: stderr: {}\nstdout: {}", stderr(&o), stdout(&o));
    o
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn n(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

fn cpu(usage: &Value) -> i64 {
    n(&usage["user_ns"]) + n(&usage["system_ns"])
}

/// A busy-polling receiver never sleeps: over its window it used about one CPU. Asserted as
/// at least half its window (vCPU stalls take some); at FIFO priority as root, so that the
/// other tenants of a shared machine do not take half of it (at SCHED_OTHER they did here).
#[test]
fn a_busy_polling_case_uses_about_one_cpu_per_spinning_thread() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("p.json");
    let o = ok(
        run(&[
            "pubsub",
            "--transport",
            "intra",
            "--wait",
            "busy-poll",
            "--rate",
            "1khz",
            "--count",
            "2000",
            "--policy",
            if is_root() { "fifo" } else { "other" },
            "--json",
            json.to_str().unwrap(),
        ]),
        "pubsub intra busy-poll",
    );
    let out = stdout(&o);
    assert!(out.contains("cpu/msg us"), "the pub/sub table has its cpu/msg column:\n{out}");
    let doc = read_json(&json);
    let windows = doc["cost"]["windows"].as_array().expect("cost.windows");
    assert_eq!(windows.len(), 1, "one pub/sub case, one window: {windows:?}");
    let w = &windows[0];
    assert_eq!(n(&w["messages"]), 2000 - n(&doc["streams"][0]["stats"]["overruns"]));
    let threads = w["measuring"].as_array().unwrap();
    let spinners: Vec<&Value> = threads.iter().filter(|t| t["thread"] != "rtlab-pub").collect();
    assert!(!spinners.is_empty(), "a receiver is a measuring thread: {threads:?}");
    for t in spinners {
        let (used, window) = (cpu(&t["usage"]), n(&t["window_ns"]));
        assert!(window > 1_000_000_000, "a 2 s case: {t}");
        assert!(
            used * 2 >= window,
            "a spinning thread used {used} ns of CPU in its {window} ns window: {t}"
        );
    }
    // the sender sleeps on its grid: far less than a CPU
    let sender = threads.iter().find(|t| t["thread"] == "rtlab-pub").expect("the sender");
    assert!(cpu(&sender["usage"]) < n(&sender["window_ns"]) / 2, "{sender}");
    assert!(n(&sender["usage"]["voluntary_switches"]) > 1000, "it slept once a message: {sender}");
    // the whole side: at least the spinner's CPU
    let groups = w["groups"].as_array().unwrap();
    let side: i64 = groups.iter().map(|g| n(&g["user_ns"]) + n(&g["system_ns"])).sum();
    assert!(side * 2 >= n(&w["window_ns"]), "the side's CPU {side} over {}", w["window_ns"]);
    assert!(groups.iter().any(|g| g["group"] == "rtlab-sub*"), "{groups:?}");
    assert!(n(&doc["cost"]["max_rss_kib"]) > 1000, "rtlab's max RSS in KiB");
}

/// The timer and the cyclic job count every measuring thread over its window: it slept once
/// a slot (voluntary switches), it computed in the cyclic job (CPU of the order of its work).
#[test]
fn timer_and_cyclic_count_every_measuring_thread() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("t.json");
    let j = json.to_str().unwrap();
    ok(
        run(&[
            "timer",
            "-t",
            "2",
            "--loops",
            "300",
            "--interval",
            "1ms",
            "--policy",
            "other",
            "-q",
            "--json",
            j,
        ]),
        "timer",
    );
    let doc = read_json(&json);
    let w = &doc["cost"]["windows"][0];
    assert_eq!(w["name"], "timer");
    assert!(w["messages"].is_null(), "a timer moves no message: {w}");
    let mut threads: Vec<&str> =
        w["measuring"].as_array().unwrap().iter().map(|t| t["thread"].as_str().unwrap()).collect();
    threads.sort();
    assert_eq!(threads, ["rtlab-timer0", "rtlab-timer1"]);
    for t in w["measuring"].as_array().unwrap() {
        // slots already past are skipped: at least half of them slept (a loaded VM skips few)
        assert!(n(&t["usage"]["voluntary_switches"]) >= 150, "{t}");
        assert!(n(&t["window_ns"]) >= 250_000_000, "300 slots of 1 ms: {t}");
        assert_eq!(t["policy"], "other");
    }
    ok(
        run(&[
            "cyclic",
            "--interval",
            "1ms",
            "--work",
            "300us",
            "--count",
            "500",
            "--policy",
            "other",
            "-q",
            "--json",
            j,
        ]),
        "cyclic",
    );
    let doc = read_json(&json);
    let w = &doc["cost"]["windows"][0];
    assert_eq!(w["name"], "cyclic");
    let t = &w["measuring"][0];
    assert_eq!(t["thread"], "rtlab-cyclic0");
    // 500 jobs of 300 us of calibrated work: of the order of 150 ms of CPU (broad: the
    // calibration and a shared CPU move it)
    let used = cpu(&t["usage"]);
    assert!((50_000_000..2_000_000_000).contains(&used), "{used} ns for 500 x 300 us: {t}");
}

/// Subscribers in processes of their own report their threads and max RSS at their end.
#[test]
fn role_processes_bring_their_cost_back() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("p.json");
    ok(
        run(&[
            "pubsub",
            "--transport",
            "udp",
            "--rate",
            "1khz",
            "--count",
            "500",
            "--subscribers",
            "2",
            "--policy",
            "other",
            "-q",
            "--json",
            json.to_str().unwrap(),
        ]),
        "pubsub udp, 2 subscriber processes",
    );
    let doc = read_json(&json);
    let w = &doc["cost"]["windows"][0];
    let mut procs: Vec<&str> =
        w["processes"].as_array().unwrap().iter().map(|p| p["process"].as_str().unwrap()).collect();
    procs.sort();
    assert_eq!(procs, ["sub0", "sub1"], "{w}");
    for p in w["processes"].as_array().unwrap() {
        assert!(n(&p["max_rss_kib"]) > 100, "{p}");
    }
    let groups = w["groups"].as_array().unwrap();
    for role in ["sub0", "sub1", "rtlab"] {
        assert!(groups.iter().any(|g| g["process"] == role), "{role} in {groups:?}");
    }
    // each subscriber's receive thread measured in its process, the sender here
    let threads: Vec<&str> =
        w["measuring"].as_array().unwrap().iter().map(|t| t["thread"].as_str().unwrap()).collect();
    assert_eq!(threads.len(), 3, "{threads:?}");
    assert!(threads.contains(&"rtlab-pub"), "{threads:?}");
}

/// The far side's cost arrives through the agent: the reflector's window (its thread, the
/// agent's threads, the agent's max RSS), and a far pong process's window.
#[test]
fn root_the_far_sides_cost_arrives_through_the_agent() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!(
            "needs root (network namespaces; CI runs as root)"
        ));
        return;
    }
    let _g = serial();
    let pair = Pair::up("co");
    let d = tempfile::tempdir().unwrap();
    let journal = d.path().join("far-journal");
    let spec = format!("netns:{}", pair.ns_b);
    let json = d.path().join("udp.json");
    ok(
        rtlab()
            .env("RTLAB_FAR_JOURNAL", &journal)
            .args(["udp", "ping", "--netns", &pair.ns_a, "--far", &spec, "--count", "300"])
            .args(["--quiet", "--json"])
            .arg(&json)
            .output()
            .unwrap(),
        "udp ping --far netns:",
    );
    let doc = read_json(&json);
    let cost = &doc["cost"];
    // this side: the ping's window with its requests (the ping stream's `sent`: 300 slots,
    // sent or skipped as overruns)
    let near = &cost["windows"][0];
    assert_eq!(near["name"], "udp");
    let ping = doc["streams"].as_array().unwrap().iter().find(|s| s["name"] == "ping").unwrap();
    let sent: i64 = ping["labels"]["sent"].as_str().unwrap().parse().unwrap();
    assert_eq!(n(&near["messages"]), sent);
    assert_eq!(sent + n(&ping["stats"]["overruns"]), 300);
    // the far side, through the agent
    let far = cost["far"].as_array().expect("cost.far");
    let reflect = far.iter().find(|w| w["name"] == "reflect").unwrap_or_else(|| panic!("{cost}"));
    // the requests that arrived, and the ping's preflight
    assert!(n(&reflect["messages"]) >= n(&ping["stats"]["count"]), "{reflect}");
    assert_eq!(reflect["measuring"][0]["thread"], "rtlab-udp-refl");
    assert!(n(&reflect["measuring"][0]["usage"]["voluntary_switches"]) > 0, "{reflect}");
    assert!(reflect["groups"].as_array().unwrap().iter().all(|g| g["process"] == "agent"));
    assert_eq!(reflect["processes"][0]["process"], "agent");
    assert!(n(&reflect["processes"][0]["max_rss_kib"]) > 1000);
    // a far pong process
    let json = d.path().join("ps.json");
    ok(
        rtlab()
            .env("RTLAB_FAR_JOURNAL", &journal)
            .args(["pubsub", "--transport", "udp", "--mode", "roundtrip"])
            .args(["--netns", &pair.ns_a, "--far", &spec])
            .args(["--count", "200", "--rate", "1khz", "--quiet", "--json"])
            .arg(&json)
            .output()
            .unwrap(),
        "pubsub roundtrip --far netns:",
    );
    let doc = read_json(&json);
    let far = doc["cost"]["far"].as_array().expect("cost.far");
    assert_eq!(far.len(), 1, "{far:?}");
    assert_eq!(far[0]["processes"][0]["process"], "pong0");
    assert!(far[0]["groups"].as_array().unwrap().iter().all(|g| g["process"] == "pong0"));
    assert_eq!(far[0]["measuring"].as_array().unwrap().len(), 1, "the far echo's thread");
    // not in this side's window: only this process's threads there
    let near = &doc["cost"]["windows"][0];
    assert!(near["groups"].as_array().unwrap().iter().all(|g| g["process"] == "rtlab"), "{near}");
}

/// A run of two cases, stored twice: every output shows their cost.
#[test]
fn every_output_path_shows_the_cost() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("c.toml");
    std::fs::write(
        &f,
        "name = \"c\"\ncount = 300\nprofiles = [\"no-rt\"]\n[[probe]]\nkind = \"timer\"\ninterval = \"1ms\"\n[[probe]]\nkind = \"pubsub\"\ntransport = \"intra\"\nrate = \"1khz\"\n",
    )
    .unwrap();
    let db = d.path().join("r/rtlab.db");
    let db = db.to_str().unwrap();
    for _ in 0..2 {
        ok(run(&["run", f.to_str().unwrap(), "--db", db, "--wait"]), "run");
    }
    // the terminal report: the cost column group, a row per case, the detail lines
    let o = ok(run(&["report", "2", "--db", db]), "report");
    let t = stdout(&o);
    assert!(t.contains("\nCost\n"), "{t}");
    for h in ["cpu user ms", "cpu sys ms", "cpus", "cpu/msg us", "faults", "preempted", "rss MiB"] {
        assert!(t.contains(h), "{h} not in the terminal report");
    }
    assert!(t.contains("cost timer:"), "{t}");
    assert!(t.contains("cost intra.oneway.64B.1khz.n1:"), "{t}");
    assert!(t.contains("rtlab-timer0 (other):"), "{t}");
    // each group with its threads' policy at the window's end (no-rt: every thread at other)
    assert!(t.contains("threads by group: ") && t.contains("rtlab-timer* [other] "), "{t}");
    // HTML
    let html = d.path().join("r.html");
    ok(run(&["report", "2", "--db", db, "--html", html.to_str().unwrap()]), "report --html");
    let h = std::fs::read_to_string(&html).unwrap();
    assert!(h.contains("<h2>Cost</h2>") && h.contains("<table class=\"cost\">"), "no cost table");
    assert!(h.contains("<th>cpu/msg us</th>") && h.contains("<pre class=\"cost\">"));
    // CSV: a case row, window rows, measuring and group rows per case
    let o =
        ok(run(&["export", "2", "--format", "csv", "--what", "cost", "--db", db]), "export cost");
    let csv = stdout(&o);
    let head = csv.lines().next().unwrap();
    assert!(head.ends_with(",stream,kind,window,window_ns,messages,process,name,policy,threads,born,user_ns,system_ns,minor_faults,major_faults,voluntary_switches,involuntary_switches,max_rss_kib,cpu_per_message_ns"), "{head}");
    let cols = head.split(',').count();
    for kind in ["case", "window", "measuring", "group"] {
        let rows: Vec<&str> = csv.lines().filter(|l| l.split(',').any(|c| c == kind)).collect();
        assert!(rows.len() >= 2, "{kind} rows of both cases:\n{csv}");
    }
    assert!(csv.lines().skip(1).all(|l| l.split(',').count() == cols), "{csv}");
    let policy = head.split(',').position(|c| c == "policy").unwrap();
    for l in csv.lines().filter(|l| l.contains(",group,") || l.contains(",measuring,")) {
        assert_eq!(l.split(',').nth(policy), Some("other"), "no-rt: {l}");
    }
    let pub_window = csv
        .lines()
        .find(|l| l.contains(",window,intra.oneway.64B.1khz.n1,"))
        .unwrap_or_else(|| panic!("{csv}"));
    assert!(!pub_window.ends_with(','), "the pub/sub window has its cpu per message: {pub_window}");
    // JSON
    let o = ok(run(&["export", "2", "--format", "json", "--db", db]), "export json");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    for c in v["cases"].as_array().unwrap() {
        assert!(
            c["document"]["cost"]["windows"][0]["measuring"][0]["usage"]["voluntary_switches"]
                .as_u64()
                .unwrap()
                > 0,
            "{c}"
        );
    }
    // compare: the cost of both cases, A -> B
    let o = ok(run(&["compare", "1", "2", "--db", db]), "compare");
    let c = stdout(&o);
    assert!(c.contains("Cost (A -> B"), "{c}");
    assert!(
        c.lines().filter(|l| l.starts_with("timer/") || l.starts_with("pubsub/")).count() >= 2,
        "{c}"
    );
}
