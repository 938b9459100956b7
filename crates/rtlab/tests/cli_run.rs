//! `rtlab run` through the binary: scenario errors, presets, a short real matrix.

mod common;
use common::*;

#[test]
fn scenario_errors_name_file_line_and_field_and_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("bad.toml");
    std::fs::write(
        &f,
        "name = \"bad\"\nduration = \"1s\"\n[[probe]]\nkind = \"timer\"\ninterval = \"-3ms\"\n",
    )
    .unwrap();
    let path = f.to_str().unwrap();
    assert_error(
        &["run", path, "--db", d.path().join("x.db").to_str().unwrap()],
        &[&format!("{path}:5: probe[0].interval")],
    );
    std::fs::write(
        &f,
        "name = \"bad\"\nduration = \"1s\"\nspeed = 3\n[[probe]]\nkind = \"timer\"\n",
    )
    .unwrap();
    assert_error(&["run", path], &[&format!("{path}:3: speed: unknown field")]);
    assert_error(&["run", "no-such-preset"], &["'no-such-preset' is neither a preset", "quick"]);
    assert_error(&["run", "quick", "--scale", "0"], &["--scale"]);
    assert!(
        !d.path().join("x.db").exists(),
        "nothing is created for a scenario that does not validate"
    );
}

#[test]
fn presets_list_and_dry_run() {
    let o = run(&["run", "--list"]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    for p in ["quick", "s1-udp-linux", "s2-ros2-rt", "s3-ros2-rtt", "s4-timer"] {
        assert!(out.contains(p), "{p} not listed: {out}");
    }
    let o = run(&["run", "s1-udp-linux", "--scale", "0.01", "--dry-run"]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    assert!(out.contains("udp/stress/rt-isolation") && out.contains("6000 slots"), "{out}");
    // udp: 4 profiles x 4 loads x 2 paths (socket, xdp); timer and noise: 4 profiles idle
    assert!(out.contains("udp/tx/rt-normal/path=xdp"), "{out}");
    assert!(out.contains("noise/idle/rt-isolation") && out.contains("40 cases"), "{out}");
}

#[test]
fn a_small_matrix_runs_and_every_case_is_kept() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("m.toml");
    std::fs::write(
        &f,
        "name = \"m\"\ncount = 50\nprofiles = [\"no-rt\", \"rt-normal\"]\n[[probe]]\nkind = \"timer\"\ninterval = [\"200us\", \"300us\"]\nmode = \"rel\"\n",
    )
    .unwrap();
    let db = d.path().join("r/rtlab.db");
    let o = run(&["run", f.to_str().unwrap(), "--db", db.to_str().unwrap(), "--wait"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().filter(|l| l.starts_with('[')).count(), 4, "{out}");
    let report =
        out.lines().find_map(|l| l.strip_prefix("report: ")).expect("the report's path is printed");
    let html = std::fs::read_to_string(report).unwrap();
    for case in ["timer/idle/no-rt/interval=200us", "timer/idle/rt-normal/interval=300us"] {
        assert!(html.contains(case), "{case} not in the report");
    }
    // the store holds the run and its 4 cases, re-rendered without re-running
    let o = run(&["export", "latest", "--format", "json", "--db", db.to_str().unwrap(), "-o", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["cases"].as_array().unwrap().len(), 4);
    assert_eq!(v["status"], "complete");
    let o = run(&["report", "--db", db.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("timer/idle/rt-normal/interval=200us"));
}

#[test]
fn root_a_scenario_arms_the_tracer_per_case_and_keeps_the_evidence() {
    if !is_root() {
        eprintln!("skipped: needs root (CI runs as root)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("s.toml");
    // a threshold of 1 ns: every case's first sample crosses it, so each case has a capture
    std::fs::write(&f, "name = \"s\"\ncount = 400\ntrace_on_spike = \"1ns\"\nprofiles = [\"rt-normal\"]\n[[probe]]\nkind = \"timer\"\ninterval = \"1ms\"\n[[probe]]\nkind = \"pubsub\"\ntransport = \"udp\"\ncounters = false\nrate = \"1khz\"\ncount = 50\n").unwrap();
    let db = d.path().join("r/rtlab.db");
    let o = run(&["run", f.to_str().unwrap(), "--db", db.to_str().unwrap(), "--wait"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&["export", "latest", "--format", "json", "--db", db.to_str().unwrap(), "-o", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    let timer = &cases[0];
    assert_eq!(timer["status"]["status"], "ok", "{timer}");
    let ev = &timer["document"]["evidence"];
    assert_eq!(ev["spike"]["threshold_ns"], 1);
    assert!(ev["spike"]["value_ns"].is_i64(), "the first sample was caught: {ev}");
    assert_eq!(timer["spike_evidence"]["threshold_ns"], 1, "the case keeps the capture too");
    let why = ev["spike"]["attribution"][0].as_str().unwrap();
    assert!(
        why.starts_with("rtlab-timer0 (pid "),
        "the timer thread's wake-up is in the trace: {why}"
    );
    let trace = ev["spike"]["trace_file"].as_str().expect("a trace was saved");
    assert!(
        std::path::Path::new(trace).starts_with(d.path().join("r")),
        "next to the store: {trace}"
    );
    // 400 ms of 1 s windows: the counters of one window on the stream's grid
    assert_eq!(ev["counters"]["windows"].as_array().unwrap().len(), 1, "{ev}");
    assert_eq!(
        ev["counters"]["start_monotonic_ns"],
        timer["document"]["streams"][0]["start_monotonic_ns"]
    );
    // pubsub (subscribers in other processes, counters off): only the publisher raises the
    // flag (its send lateness), and the notes say why
    let ps = &cases[1];
    let pev = &ps["document"]["evidence"];
    assert!(pev["counters"].is_null(), "{pev}");
    assert_eq!(pev["spike"]["stream"], "pub.send_lateness", "{pev}");
    assert!(
        pev["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("own processes")),
        "{pev}"
    );
    assert!(
        !std::path::Path::new(rtlab_evidence::tracer::DEFAULT_TRACE_JOURNAL).exists(),
        "tracefs put back"
    );
}

#[test]
fn only_runs_the_matching_cases_and_resume_finishes_an_interrupted_run() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("r.toml");
    std::fs::write(
        &f,
        "name = \"r\"\nduration = \"2s\"\n[[probe]]\nkind = \"timer\"\ninterval = [\"1ms\", \"2ms\", \"3ms\"]\npolicy = \"other\"\n",
    )
    .unwrap();
    let db = d.path().join("rtlab.db");
    let (f, db) = (f.to_str().unwrap(), db.to_str().unwrap());
    let store = || rtlab_store::Store::open(db).unwrap();

    // --only: one case of three
    let o = run(&["run", f, "--db", db, "--only", "interval=2ms", "--wait", "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let only = store().runs().unwrap().last().unwrap().id;
    let names: Vec<_> =
        store().load_run(only).unwrap().cases.iter().map(|c| c.name.clone()).collect();
    assert_eq!(names, ["timer/idle/no-rt/interval=2ms"]);

    // a run stopped by Ctrl-C during its first case, then resumed: every case once, complete
    let mut child = rtlab()
        .args(["run", f, "--db", db, "--wait"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert!(line.starts_with("rtlab run r:"), "{line}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let id = store().runs().unwrap().last().unwrap().id;
    assert_eq!(store().load_run(id).unwrap().status, rtlab_core::run::RunStatus::Interrupted);
    assert!(rest.contains(&format!("rtlab run --resume {id}")), "the way on is said: {rest}");

    let o = run(&["run", "--resume", &id.to_string(), "--db", db, "--wait", "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = store().load_run(id).unwrap();
    assert_eq!(r.status, rtlab_core::run::RunStatus::Complete);
    let mut names: Vec<_> = r.cases.iter().map(|c| c.name.clone()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "timer/idle/no-rt/interval=1ms",
            "timer/idle/no-rt/interval=2ms",
            "timer/idle/no-rt/interval=3ms"
        ]
    );
    assert!(r.cases.iter().all(|c| c.status == rtlab_core::run::CaseStatus::Ok));
    // a complete run is not resumed again
    let o = run(&["run", "--resume", &id.to_string(), "--db", db]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// A scenario with a far side: the pong (dds, answering from its listener) and the reflector
/// (udp) in side b of each case's own namespaces, traffic on the same link; both hosts' kernel counters stored with
/// each case and shown by the report.
#[test]
fn root_a_scenario_with_a_far_side_in_the_case_pair() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("far.toml");
    std::fs::write(
        &f,
        r#"name = "far"
far = "pair"
loads = ["idle", "tx"]
[load.tx]
kind = "traffic"
rate = "20mbit"
direction = "tx"
[[probe]]
kind = "udp"
period = "1ms"
count = 300
path = ["socket", "xdp"]
[[probe]]
kind = "pubsub"
transport = "dds"
mode = "roundtrip"
echo = "callback"
rate = "1khz"
count = 200
"#,
    )
    .unwrap();
    let db = d.path().join("r/rtlab.db");
    let o = run(&["run", f.to_str().unwrap(), "--db", db.to_str().unwrap(), "--wait"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&["export", "latest", "--format", "json", "--db", db.to_str().unwrap(), "-o", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let cases = v["cases"].as_array().unwrap();
    // udp on both paths (socket, xdp: the far reflector too) and the pubsub, idle and loaded
    assert_eq!(cases.len(), 6);
    for c in cases {
        assert_eq!(c["status"]["status"], "ok", "{}: {}", c["name"], c["status"]);
        let doc = &c["document"];
        let far = &doc["far"];
        assert!(far["link"].as_str().unwrap().starts_with("netns:"), "{}", c["name"]);
        assert_eq!(far["clocks"], "one-host");
        assert_ne!(far["near_address"], far["far_address"]);
        assert!(!far["counters"]["windows"].as_array().unwrap().is_empty(), "far counters");
        assert!(!doc["evidence"]["counters"]["windows"].as_array().unwrap().is_empty());
        if doc["probe"] == "pubsub" {
            // the far pong answered from its listener (scenario key `echo`)
            let s = &doc["streams"][0];
            assert_eq!(s["labels"]["echo"], "callback", "{}", c["name"]);
            let n = |k: &str| s["stats"][k].as_u64().unwrap();
            assert!(n("count") > 0, "{}", c["name"]);
        }
        if doc["probe"] == "udp" {
            let r = doc["streams"].as_array().unwrap().iter().find(|s| s["name"] == "reflector");
            assert!(
                r.is_some_and(|r| r["labels"]["host"].is_string()),
                "the far reflector's stream"
            );
            // the case's path on both ends (the iperf3 load shared the XDP device)
            let path =
                if c["name"].as_str().unwrap().contains("path=xdp") { "xdp" } else { "socket" };
            assert_eq!(doc["streams"][0]["labels"]["path"], path, "{}", c["name"]);
            assert_eq!(r.unwrap()["labels"]["path"], path, "{}", c["name"]);
        }
    }
    let o = run(&["report", "--db", db.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.matches("far kernel counters over").count(), 6, "{out}");
}
