//! `rtlab report` through the binary: the terminal and HTML reports from the store alone,
//! including a run measured now on this machine (a short real `rtlab timer`).

mod common;
mod stored;
use stored::{fixture, store_with_fixture};

use common::{assert_error, run, stdout};
use rtlab_core::run::{CaseRecord, CaseStatus, RunInfo, RunStatus};

#[test]
fn report_renders_the_latest_run_in_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let db = store_with_fixture(dir.path());
    let o = run(&["report", "--db", &db]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let out = stdout(&o);
    for c in &fixture::run().cases {
        assert!(out.contains(&c.name), "{} missing", c.name);
    }
    assert!(out.contains("error: synthetic failure for the report tests"));
    assert_eq!(out, stdout(&run(&["report", "1", "--db", &db])));
}

#[test]
fn report_writes_one_self_contained_html_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = store_with_fixture(dir.path());
    let html = dir.path().join("r.html").display().to_string();
    let o = run(&["report", "latest", "--db", &db, "--html", &html]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    assert!(stdout(&o).contains(&format!("report: {html}")));
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(
        text.starts_with("<!DOCTYPE html>") && !text.contains("<script") && text.contains("<svg")
    );
}

#[test]
fn report_bad_input_is_one_line_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let db = store_with_fixture(dir.path());
    assert_error(&["report", "7", "--db", &db], &["no run with id 7"]);
    assert_error(&["report", "seven", "--db", &db], &["run 'seven'"]);
    assert_error(&["report", "--db", &db, "--html", "/nonexistent-dir/r.html"], &["--html"]);
}

/// A short real measurement on this machine, stored as a one-case run and re-rendered:
/// asserts counts and structure, never a latency bound.
#[test]
fn a_real_timer_measurement_is_stored_and_rendered() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("t.json");
    let o = run(&[
        "timer",
        "--loops",
        "200",
        "--interval",
        "1ms",
        "--policy",
        "other",
        "--window",
        "50ms",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let doc: rtlab_core::schema::ResultDocument =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // the samples the probe kept (200 slots less any skipped as overruns)
    let samples = doc.streams[0].stats.count.to_string();
    let info = RunInfo {
        scenario: "test-timer".into(),
        source: "report_cli test".into(),
        scenario_text: String::new(),
        scale: 1.0,
        command_line: doc.command_line.clone(),
        started_at: doc.started_at.clone(),
        tool_version: doc.tool.version.clone(),
        environment: doc.environment.clone(),
    };
    let case = CaseRecord {
        index: 0,
        name: "timer/idle/no-rt/interval=1ms#1".into(),
        probe: "timer".into(),
        load: "idle".into(),
        profile: "no-rt".into(),
        params: [("interval".to_string(), "1ms".to_string())].into(),
        repetition: 1,
        status: CaseStatus::Ok,
        started_at: doc.started_at.clone(),
        duration_ns: doc.duration_ns,
        document: Some(doc),
        load_report: None,
        profile_report: None,
        spike_evidence: None,
        published: None,
    };
    let db = dir.path().join("real.db");
    let mut s = rtlab_store::Store::open(&db).unwrap();
    let id = s.begin_run(&info).unwrap();
    s.add_case(id, &case).unwrap();
    s.finish_run(id, RunStatus::Complete).unwrap();
    assert_eq!(s.load_run(id).unwrap().cases[0], case);
    let db = db.display().to_string();
    let out = stdout(&run(&["report", "--db", &db]));
    let row = out
        .lines()
        .find(|l| l.starts_with("thread0 (wakeup_latency)"))
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(row.split_whitespace().nth(2), Some(samples.as_str()), "{row}");
    let html = dir.path().join("real.html");
    let o = run(&["report", "--db", &db, "--html", html.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(&html).unwrap().matches("class=\"plot histogram\"").count(),
        1
    );
}
