//! `rtlab cyclic`: what the command says about the job it was given.

mod common;
use common::*;
use serde_json::Value;

fn warnings_of(work: &str, dir: &std::path::Path) -> (Vec<Value>, String) {
    let json = dir.join(format!("c-{work}.json"));
    let o = run(&[
        "cyclic",
        "--work",
        work,
        "--interval",
        "1ms",
        "--count",
        "100",
        "--policy",
        "other",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (doc["warnings"].as_array().unwrap().clone(), stderr(&o))
}

/// A job longer than its period misses every deadline whatever the machine does: the result
/// and the terminal say so, with what to change; a job that fits is not warned about.
#[test]
fn a_job_longer_than_its_period_is_said() {
    let d = tempfile::tempdir().unwrap();
    let (w, err) = warnings_of("2ms", d.path());
    let long = w.iter().find(|w| w["code"] == "job-longer-than-period").expect("warned");
    let m = long["message"].as_str().unwrap();
    assert!(m.starts_with("thread0's job took "), "{m}");
    assert!(m.contains("longer than its period of 1.000 ms") && m.contains("(--interval)"), "{m}");
    assert!(err.lines().any(|l| l == format!("warning: {m}")), "{err}");
    let (w, _) = warnings_of("50us", d.path());
    assert!(!w.iter().any(|w| w["code"] == "job-longer-than-period"), "{w:?}");
}
