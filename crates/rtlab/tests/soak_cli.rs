//! The short soak: `scripts/soak.sh --minutes 1` — S3's long case (a DDS round trip across
//! the far side in a netns pair, stress + 40 Mbit/s, rt-kthreads) with every fault once: the
//! link down, the far side stopped, the wall clock stepped and stepped back, the loads killed,
//! the store's disk full, the agent killed, SIGTERM and `--resume`. The script checks the
//! run; this test reads what it stored and checks again, from the store's own export, never a
//! latency: every message accounted for, every fault said in its window, the machine as
//! found. Bad arguments: one line, exit 2.
//!
//! Contract: root only (it prints why it skips otherwise); about 2.5 minutes; one test
//! measures in this binary.

mod common;
use common::*;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/soak.sh")
}

#[test]
fn bad_arguments_are_one_line_and_exit_2() {
    for (args, needle) in [
        (&["--minutes", "soon"][..], "--minutes 'soon'"),
        (&["--rate", "0"][..], "--rate '0'"),
        (&["--transport", "carrier-pigeon"][..], "--transport 'carrier-pigeon'"),
        (&["--frobnicate"][..], "unknown argument '--frobnicate'"),
    ] {
        let o = Command::new("bash").arg(script()).args(args).output().unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("soak: error: ") && err.contains(needle), "{args:?}: {err}");
        assert!(stdout(&o).is_empty(), "{args:?}");
    }
    // an rtlab that is not there is named
    let o = Command::new("bash")
        .arg(script())
        .args(["--rtlab", "/nonexistent/rtlab"])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    if is_root() {
        assert!(err.contains("no rtlab binary at '/nonexistent/rtlab'"), "{err}");
    } else {
        assert!(err.contains("needs root"), "{err}");
    }
}

/// A case's receivers' streams (a round trip's: what was published, what came back), from
/// the export.
fn published_streams(case: &Value) -> Vec<&Value> {
    case["document"]["streams"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|s| s["labels"]["published"].is_string() && s["stats"]["lost"].is_u64())
                .collect()
        })
        .unwrap_or_default()
}

fn warnings<'a>(case: &'a Value, code: &str) -> Vec<&'a str> {
    case["document"]["warnings"]
        .as_array()
        .map(|a| {
            a.iter().filter(|w| w["code"] == code).filter_map(|w| w["message"].as_str()).collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_short_soak_accounts_for_every_message_and_leaves_the_machine_as_found() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!(
            "the soak needs root (namespaces, profiles, the clock, a tmpfs)"
        ));
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let o = Command::new("bash")
        .arg(script())
        .args(["--minutes", "1", "--rate", "1000", "--rtlab", env!("CARGO_BIN_EXE_rtlab")])
        .arg("--out")
        .arg(d.path())
        .output()
        .unwrap();
    let (out, err) = (stdout(&o), stderr(&o));
    let logs = ["run.err", "resume.err"]
        .iter()
        .map(|f| std::fs::read_to_string(d.path().join(f)).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n---\n");
    assert!(o.status.success(), "{out}\n{err}\n{logs}");
    assert!(out.contains("soak: passed"), "{out}");

    // the schedule: every fault once, in order
    let faults: Vec<Value> = std::fs::read_to_string(d.path().join("faults.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = faults.iter().map(|f| f["fault"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "link-down",
            "far-side-stopped",
            "wall-clock-stepped+50ms",
            "wall-clock-stepped-50ms",
            "loads-killed",
            "store-full",
            "store-freed",
            "agent-killed",
            "rtlab-sigterm"
        ]
    );

    // the store's own export, read here, not the script's summary
    let export: Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("export.json")).unwrap())
            .unwrap();
    let run = &export;
    let cases = run["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 3, "{run}");
    for (i, c) in cases.iter().enumerate() {
        for s in published_streams(c) {
            let st = &s["stats"];
            let published: u64 = s["labels"]["published"].as_str().unwrap().parse().unwrap();
            let n = st["count"].as_u64().unwrap();
            let (late, lost) = (st["late"].as_u64().unwrap_or(0), st["lost"].as_u64().unwrap_or(0));
            assert_eq!(published, n + late + lost, "case {i} {}: {st}", s["name"]);
        }
    }
    // case 1: its link was down 2 s and its far side stopped 3 s at 1 kHz: lost, not invented
    let c1 = &cases[0];
    let s1 = published_streams(c1);
    assert!(!s1.is_empty(), "{c1}");
    assert!(s1.iter().any(|s| s["stats"]["lost"].as_u64().unwrap_or(0) > 0), "{c1}");
    for (code, n) in
        [("link-down", 1), ("far-side-stopped", 1), ("wall-clock-stepped", 2), ("load-ended", 1)]
    {
        let w = warnings(c1, code);
        assert!(w.len() >= n, "{code}: {w:?}");
        assert!(w.iter().all(|m| m.contains("(window ")), "{code}: {w:?}");
    }
    // the store was full when it ended: it waited in memory and says so
    let waited = warnings(c1, "store-waited");
    assert_eq!(waited.len(), 1, "{c1}");
    assert!(waited[0].contains("nothing of it was lost"), "{waited:?}");
    // its memory was sampled, rtlab's and the agent's
    let rss = c1["document"]["cost"]["rss"].as_array().expect("rss samples");
    for p in ["rtlab", "agent"] {
        assert!(rss.iter().any(|r| r["process"] == p && r["rss_kib"].as_u64() > Some(0)), "{p}");
    }
    // case 2 ended where its far side did, saying so; case 3 was finished by --resume
    let ended = warnings(&cases[1], "far-side-ended");
    assert_eq!(ended.len(), 1, "{}", cases[1]);
    assert!(ended[0].contains("the case stopped there"), "{ended:?}");
    assert!(warnings(&cases[1], "interrupted").is_empty(), "{}", cases[1]);
    assert!(!published_streams(&cases[2]).is_empty(), "{}", cases[2]);

    // the machine as found: no profile applied, nothing left running, the clock stepped back
    let show = rtlab().args(["tune", "show"]).output().unwrap();
    assert!(stdout(&show).starts_with("nothing applied by rtlab"), "{}", stdout(&show));
    for p in ["stress-ng", "iperf3"] {
        let o = Command::new("pgrep").args(["-x", p]).output().unwrap();
        assert!(!o.status.success(), "{p} left running: {}", stdout(&o));
    }
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(!stdout(&ns).lines().any(|l| l.starts_with("rtlab")), "{}", stdout(&ns));
}
