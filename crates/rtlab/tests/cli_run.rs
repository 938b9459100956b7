//! `rtlab run` through the binary: scenario errors, presets, a short real matrix.

mod common;
use common::*;

#[test]
fn scenario_errors_name_file_line_and_field_and_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("bad.toml");
    std::fs::write(&f, "name = \"bad\"\nduration = \"1s\"\n[[probe]]\nkind = \"timer\"\ninterval = \"-3ms\"\n").unwrap();
    let path = f.to_str().unwrap();
    assert_error(&["run", path, "--db", d.path().join("x.db").to_str().unwrap()], &[&format!("{path}:5: probe[0].interval")]);
    std::fs::write(&f, "name = \"bad\"\nduration = \"1s\"\nspeed = 3\n[[probe]]\nkind = \"timer\"\n").unwrap();
    assert_error(&["run", path], &[&format!("{path}:3: speed: unknown field")]);
    assert_error(&["run", "no-such-preset"], &["'no-such-preset' is neither a preset", "quick"]);
    assert_error(&["run", "quick", "--scale", "0"], &["--scale"]);
    assert!(!d.path().join("x.db").exists(), "nothing is created for a scenario that does not validate");
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
    assert!(out.contains("udp/stress/rt-isolation") && out.contains("6000 samples"), "{out}");
    assert!(out.contains("20 cases"), "{out}");
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
    let o = run(&["run", f.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().filter(|l| l.starts_with('[')).count(), 4, "{out}");
    let report = out.lines().find_map(|l| l.strip_prefix("report: ")).expect("the report's path is printed");
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
