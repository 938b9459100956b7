//! `rtlab timer` through the binary: bad input, outputs, Ctrl-C, privileges.

mod common;
use common::*;
use serde_json::Value;

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    assert_error(&["timer", "--interval", "0ms", "--loops", "5"], &["--interval", "above zero"]);
    assert_error(&["timer", "--interval", "abc", "--loops", "5"], &["--interval", "'abc'"]);
    // a bare number is microseconds (cyclictest's -i); a unit rtlab does not know is refused
    assert_error(&["timer", "--interval", "1000xs", "--loops", "5"], &["--interval", "unit"]);
    assert_error(&["timer", "-t", "two", "--loops", "5"], &["--threads two"]);
    assert_error(&["timer", "--priority", "120", "--loops", "5"], &["--priority", "1..=99"]);
    assert_error(
        &["timer", "--policy", "other", "--priority", "5", "--loops", "5"],
        &["--priority", "other"],
    );
    assert_error(&["timer", "--cpus", "99", "--loops", "5"], &["--cpus", "CPU 99", "not online"]);
    assert_error(&["timer", "--cpus", "x", "--loops", "5"], &["--cpus", "'x'"]);
    assert_error(&["timer", "--loops", "0"], &["--count"]);
    assert_error(&["timer", "--duration", "0s"], &["--duration"]);
    assert_error(
        &["timer", "-t", "2", "--interval", "1ms,2ms,3ms", "--loops", "5"],
        &["--interval", "3 values for 2 threads"],
    );
    assert_error(&["timer", "--policy", "deadline", "--loops", "5"], &["--policy"]);
    assert_error(&["timer", "--mode", "ros", "--loops", "5"], &["--mode", "oneshot-model"]);
    assert_error(
        &["timer", "--mode", "oneshot", "--policy", "fifo", "--cpus", "0", "--loops", "5"],
        &["mode", "starve", "CPU 0"],
    );
    assert_error(
        &["timer", "--loops", "5", "--json", "/nonexistent-dir/x.json"],
        &["--json", "does not exist"],
    );
}

#[test]
fn a_short_run_writes_every_output() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("t.json");
    let hist = d.path().join("h.txt");
    let raw = d.path().join("raw.csv");
    let o = run(&[
        "timer",
        "-t",
        "2",
        "--interval",
        "200us",
        "--loops",
        "200",
        "--policy",
        if is_root() { "fifo" } else { "other" },
        "--json",
        json.to_str().unwrap(),
        "--histogram-file",
        hist.to_str().unwrap(),
        "--histogram-max",
        "100us",
        "--raw-file",
        raw.to_str().unwrap(),
        "--histogram",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("thread0") && out.contains("thread1") && out.contains("all"), "{out}");
    assert!(out.contains("cycle jitter") && out.contains("histogram"), "{out}");

    let v = read_json(&json);
    assert_eq!(v["probe"], "timer");
    assert_eq!(v["interrupted"], false);
    let names: Vec<_> = v["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["thread0", "thread0.jitter", "thread1", "thread1.jitter", "all"]);
    let s0 = &v["streams"][0];
    // 200 slots: the samples and the slots skipped as overruns
    let slots =
        s0["stats"]["count"].as_u64().unwrap() + s0["stats"]["overruns"].as_u64().unwrap_or(0);
    assert_eq!(slots, 200);
    assert_eq!(s0["metric"], "wakeup_latency");
    assert_eq!(s0["deadline_ns"], 200_000);
    assert!(s0["stats"]["min_ns"].as_i64().unwrap() >= 0, "abs-mode latency is never negative");
    assert!(s0["stats"]["p99_99_ns"].as_i64() <= s0["stats"]["max_ns"].as_i64());
    // P_k needs two wake-ups: one less than the samples; `all` holds both threads' samples
    let samples = |i: usize| v["streams"][i]["stats"]["count"].as_u64().unwrap();
    assert_eq!(samples(1), samples(0) - 1);
    assert_eq!(samples(4), samples(0) + samples(2));
    let bucket_total: u64 = s0["histogram"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert_eq!(
        bucket_total + s0["histogram"]["overflow_high"].as_u64().unwrap(),
        s0["stats"]["count"].as_u64().unwrap(),
        "every sample is in the histogram"
    );

    let h = std::fs::read_to_string(&hist).unwrap();
    let lines: Vec<_> = h.lines().collect();
    assert_eq!(lines[0], "# Histogram");
    assert_eq!(lines[1].split_whitespace().count(), 3, "bin + one column per thread: {}", lines[1]);
    assert_eq!(lines.iter().filter(|l| !l.starts_with('#')).count(), 100);
    assert!(h.contains("# Max Latencies:") && h.contains("# Thread 1:"));

    let r = std::fs::read_to_string(&raw).unwrap();
    let dropped = s0["raw_dropped"].as_u64().unwrap();
    assert_eq!(r.lines().next(), Some("stream,index,at_ns,value_ns"));
    let samples = s0["stats"]["count"].as_u64().unwrap();
    assert_eq!(r.lines().filter(|l| l.starts_with("thread0,")).count() as u64 + dropped, samples);
}

#[test]
fn s2_threads_and_rel_mode() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("t.json");
    let o = run(&[
        "timer",
        "-t",
        "5",
        "-i",
        "1000us",
        "-d",
        "500us",
        "--loops",
        "3",
        "--mode",
        "rel",
        "--policy",
        "other",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).is_empty(), "-q prints nothing");
    let v = read_json(&json);
    let intervals: Vec<_> = v["config"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["interval_ns"].as_i64().unwrap())
        .collect();
    assert_eq!(intervals, [1_000_000, 1_500_000, 2_000_000, 2_500_000, 3_000_000]);
    assert_eq!(v["config"]["mode"], "rel");
    assert_eq!(v["streams"][0]["metric"], "timer_error");
    let codes: Vec<_> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["code"].as_str().unwrap().to_string())
        .collect();
    assert!(codes.contains(&"run-too-short".to_string()), "{codes:?}");
}

#[test]
fn ros_timer_models_write_their_streams() {
    let d = tempfile::tempdir().unwrap();
    // the models' names, and the two they had before roscpp itself ran here (still taken)
    for (given, mode, names, metrics) in [
        (
            "oneshot-model",
            "oneshot-model",
            vec!["thread0", "thread0.anchor"],
            vec!["timer_error", "anchor_error"],
        ),
        (
            "roscpp-model",
            "roscpp-model",
            vec!["thread0", "thread0.jitter"],
            vec!["timer_error", "cycle_jitter"],
        ),
        (
            "rclcpp-model",
            "rclcpp-model",
            vec!["thread0", "thread0.jitter"],
            vec!["timer_error", "cycle_jitter"],
        ),
        (
            "oneshot",
            "oneshot-model",
            vec!["thread0", "thread0.anchor"],
            vec!["timer_error", "anchor_error"],
        ),
        (
            "rclcpp",
            "rclcpp-model",
            vec!["thread0", "thread0.jitter"],
            vec!["timer_error", "cycle_jitter"],
        ),
    ] {
        let json = d.path().join(format!("{given}.json"));
        let o = run(&[
            "timer",
            "--mode",
            given,
            "--interval",
            "1ms",
            "--loops",
            "30",
            "--policy",
            "other",
            "--json",
            json.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{mode}: {}", stderr(&o));
        assert!(stdout(&o).contains(&format!("{mode} mode")), "{mode}: {}", stdout(&o));
        let v = read_json(&json);
        assert_eq!(v["config"]["mode"], mode);
        let streams = v["streams"].as_array().unwrap();
        let got: Vec<_> = streams.iter().map(|s| s["name"].as_str().unwrap()).collect();
        assert_eq!(got, names, "{mode}");
        let got: Vec<_> = streams.iter().map(|s| s["metric"].as_str().unwrap()).collect();
        assert_eq!(got, metrics, "{mode}");
        // every slot is a callback or a skipped period (a count ends on time)
        let s0 = &streams[0]["stats"];
        let overruns = s0["overruns"].as_u64().unwrap_or(0);
        assert_eq!(s0["count"].as_u64().unwrap() + overruns, 30, "{mode}");
        if mode == "oneshot-model" {
            assert_eq!(streams[1]["stats"]["count"], 30, "one anchor value per callback");
        }
    }
}

#[test]
fn json_to_stdout_is_pure_json() {
    let o =
        run(&["timer", "--loops", "5", "--interval", "100us", "--policy", "other", "--json", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("stdout is one JSON document");
    assert_eq!(v["schema_version"], 2);
}

#[test]
fn ctrl_c_stops_cleanly_and_keeps_what_was_measured() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("t.json");
    let child = rtlab()
        .args([
            "timer",
            "--duration",
            "60s",
            "--interval",
            "1ms",
            "--policy",
            "other",
            "--json",
            json.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let o = interrupt(child);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = read_json(&json);
    assert_eq!(v["interrupted"], true);
    let n = v["streams"][0]["stats"]["count"].as_u64().unwrap();
    assert!(n > 0 && n < 60_000, "measured {n} before the stop");
    assert!(v["warnings"].as_array().unwrap().iter().any(|w| w["code"] == "interrupted"));
}

#[test]
fn root_fifo_refused_without_privilege_is_exit_2() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!(
            "needs root to drop to the nobody user (CI runs as root)"
        ));
        return;
    }
    // as nobody (no CAP_SYS_NICE, RLIMIT_RTPRIO 0) the kernel refuses SCHED_FIFO at thread creation
    let o = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            env!("CARGO_BIN_EXE_rtlab"),
            "timer",
            "--loops",
            "5",
            "--no-mlockall",
        ])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("refused fifo priority 80") && err.contains("EPERM"), "{err}");
}

#[test]
fn profile_runs_a_probe_under_a_profile_and_puts_it_back() {
    // a bad name is one line, exit 2, nothing measured or changed
    assert_error(
        &["timer", "--profile", "rt-fast", "--count", "10"],
        &["--profile rt-fast", "no-rt, rt-normal"],
    );
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("the rest: needs root (CI runs as root)"));
        return;
    }
    let Some(cg) = ChildCgroup::new(&format!("rtlab-profile-{}", std::process::id())) else {
        rtlab_sys::test_skip::skipped(format_args!(
            "the rest: no cpu cgroup controller to make a child cgroup in"
        ));
        return;
    };
    let d = tempfile::tempdir().unwrap();
    if cg.refuses_realtime() {
        // what the refusal says to do exists: the probe's own --profile
        let o = cg.rtlab(&["timer", "--count", "10", "-q"]).output().unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert!(e.contains("EPERM") && e.contains("--profile rt-normal"), "{e}");
    }
    // from the child cgroup, under rt-normal: FIFO, then everything put back
    let f = d.path().join("t.json");
    let o = cg
        .rtlab(&[
            "timer",
            "--profile",
            "rt-normal",
            "--count",
            "200",
            "--json",
            f.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", stderr(&o));
    assert!(out.contains("profile rt-normal (journaled, put back when the run ends):"), "{out}");
    assert!(out.contains("profile rt-normal: put back"), "{out}");
    let v = read_json(&f);
    let p = &v["config"]["profile"];
    assert_eq!(
        (p["profile"].as_str(), p["restored"].as_bool()),
        (Some("rt-normal"), Some(true)),
        "{p}"
    );
    assert!(!p["steps"].as_array().unwrap().is_empty(), "{p}");
    assert_eq!(v["config"]["threads"][0]["policy"], "fifo", "{}", v["config"]);
    assert!(!std::path::Path::new(rtlab_host::journal::DEFAULT_JOURNAL).exists());
    let o = run(&["tune", "show"]);
    assert!(stdout(&o).contains("nothing applied by rtlab"), "{}", stdout(&o));
    // --profile no-rt: the probe at SCHED_OTHER, the process where it was
    let o = cg
        .rtlab(&[
            "timer",
            "--profile",
            "no-rt",
            "--count",
            "50",
            "-q",
            "--json",
            f.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(read_json(&f)["config"]["threads"][0]["policy"], "other");
}

/// `rtlab timer ARGS --json FILE` (exit 0): its document and stdout.
fn timer_json(args: &str, d: &std::path::Path) -> (Value, String) {
    let f = d.join("c.json");
    let mut a: Vec<&str> = vec!["timer"];
    a.extend(args.split_whitespace());
    let f_s = f.to_str().unwrap().to_string();
    a.extend(["--json", &f_s]);
    let o = run(&a);
    assert_eq!(o.status.code(), Some(0), "rtlab {}: {}", a.join(" "), stderr(&o));
    (read_json(&f), stdout(&o))
}

#[test]
fn root_cyclictest_command_lines_run_with_cyclictests_meanings() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!(
            "needs root (the command lines ask for FIFO priorities)"
        ));
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let online = rtlab_sys::cpus::online_cpus(std::path::Path::new("/")).0;
    let threads = |v: &Value| v["config"]["threads"].as_array().unwrap().clone();
    let field =
        |v: &Value, k: &str| -> Vec<Value> { threads(v).iter().map(|t| t[k].clone()).collect() };
    // rt-tests' documented command lines (the RT wiki's cyclictest page, OSADL's QA farm,
    // cyclictest --help), their loops cut short: -i/-d/-h in microseconds, -p for every thread,
    // -n and -m accepted (rtlab always uses clock_nanosleep and locks memory)
    let (v, _) = timer_json("-t1 -p 80 -n -i 10000 -l 20", d.path());
    assert_eq!(field(&v, "interval_ns"), [serde_json::json!(10_000_000)]);
    assert_eq!(
        (field(&v, "policy"), field(&v, "priority")),
        (vec![serde_json::json!("fifo")], vec![serde_json::json!(80)])
    );
    assert_eq!(v["config"]["loops"], 20);
    assert_eq!(v["config"]["mlockall"], true);
    // OSADL: -m -Sp90 -i200 -h400 -q (one thread per CPU, each on its CPU, one priority; the
    // cyclictest histogram up to 400 us on stdout although -q)
    let (v, out) = timer_json("-l50 -m -Sp90 -i200 -h400 -q", d.path());
    assert_eq!(threads(&v).len(), online.len());
    let cpus: Vec<Value> = online.iter().map(|c| serde_json::json!(c)).collect();
    assert_eq!(field(&v, "cpu"), cpus);
    assert!(field(&v, "priority").iter().all(|p| p == 90), "{}", v["config"]);
    assert!(field(&v, "interval_ns").iter().all(|i| i == 200_000), "{}", v["config"]);
    assert!(out.starts_with("# Histogram\n"), "{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("000")).count(), 400, "{out}");
    assert!(out.contains("# Max Latencies:"), "{out}");
    // --smp -p95 -m, and -a -t with -d: thread N on CPU N, intervals 500, 600, ... us
    let (v, _) = timer_json("--smp -p95 -m -l 20", d.path());
    assert_eq!(field(&v, "cpu"), cpus);
    let (v, _) = timer_json("-a -t -i 500 -d 100 -l 20", d.path());
    assert_eq!(field(&v, "cpu"), cpus);
    let want: Vec<Value> =
        (0..online.len()).map(|n| serde_json::json!(500_000 + n * 100_000)).collect();
    assert_eq!(field(&v, "interval_ns"), want);
    // -D: a bare number is seconds; -r: relative sleeps; --policy normal is other; -a CPUSET
    let (v, _) = timer_json("-t 2 -p 80 -i 1000 -D 1", d.path());
    assert_eq!(v["config"]["duration_ns"], 1_000_000_000u64);
    assert_eq!(threads(&v).len(), 2);
    let (v, _) = timer_json("-r -l 20", d.path());
    assert_eq!(v["config"]["mode"], "rel");
    let (v, _) = timer_json("--policy=normal -p 0 -l 20", d.path());
    assert_eq!(field(&v, "policy"), [serde_json::json!("other")]);
    let last = *online.last().unwrap();
    let (v, _) = timer_json(&format!("-a {last} -t 2 -l 20"), d.path());
    assert_eq!(field(&v, "cpu"), [serde_json::json!(last), serde_json::json!(last)]);
    // what rtlab does not take is one line, exit 2; --help still helps, -h wants its US
    assert_error(&["timer", "-b", "100"], &["-b"]);
    assert_error(&["timer", "-h"], &["-h"]);
    let o = run(&["timer", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("-h <US>"), "{}", stdout(&o));
}

/// The exit status by verdict is the gates', as for `rtlab run`: a measuring command with
/// `--gate STREAM:METRIC<=VALUE` exits 1 when one is broken (every sample is above 1 ns) and 0
/// when all are kept (no wake-up takes 60 s); its verdict is its last word; a malformed gate
/// is refused before anything is measured.
#[test]
fn gates_give_a_probe_its_exit_status_and_its_verdict_is_said() {
    let o = run(&["timer", "--count", "50", "--policy", "other", "--gate", "thread0:max<=1ns"]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(err.contains("rtlab: gate broken: timer thread0: max "), "{err}");
    assert!(err.contains(" > 1ns (--gate *:thread0:max<=1ns)"), "{err}");
    assert!(out.contains("gates FAILED: 1 broken"), "{out}");
    let verdict =
        out.lines().find(|l| l.starts_with("verdict: ")).unwrap_or_else(|| panic!("{out}"));
    assert!(verdict.contains("gate broken"), "{verdict}");
    let o = run(&[
        "timer",
        "--count",
        "50",
        "--policy",
        "other",
        "--gate",
        "*:max<=60s",
        "--gate",
        "all:lost<=0",
    ]);
    let (out, err) = (stdout(&o), stderr(&o));
    // the timer counts no losses: that gate matches no stream with a value, which fails
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(err.contains("rtlab: gate unmatched: "), "{err}");
    let o = run(&["timer", "--count", "50", "--policy", "other", "--gate", "*:max<=60s", "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "", "quiet");
    assert_error(
        &["timer", "--count", "5", "--gate", "max<=1ms"],
        &["--gate max<=1ms", "STREAM:METRIC<=VALUE"],
    );
    assert_error(
        &["timer", "--count", "5", "--gate", "*:p42<=1ms"],
        &["--gate *:p42<=1ms", "unknown metric 'p42'"],
    );
}
