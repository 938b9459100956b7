//! `rtlab compare` through the binary: exit 1 on a planted regression, 0 on the same run,
//! 2 on bad input.

mod common;
mod stored;
use stored::{fixture, store_run as store};

use common::{assert_error, run, stdout};
use rtlab_core::schema::Stream;
use rtlab_core::{Histogram, Running, Summary};

/// PLANTED regression (not a measurement): every sample of the stream doubled, rebuilt
/// from the real histogram's buckets (each bucket's count at twice its lower bound).
fn doubled(s: &mut Stream) {
    let mut h = Histogram::new();
    let mut r = Running::default();
    let mut i = 0;
    for b in &s.histogram.buckets {
        for _ in 0..b.count {
            h.record(b.low_ns * 2);
            r.record(i, 0, b.low_ns * 2);
            i += 1;
        }
    }
    let mut sum = Summary::from_parts(&r, &h);
    sum.missed = s.stats.missed;
    sum.overruns = s.stats.overruns;
    s.stats = sum;
    s.histogram = h.to_data();
    for m in s.windows.max_ns.iter_mut().flatten() {
        *m *= 2;
    }
}

fn two_runs(dir: &std::path::Path) -> String {
    let db = dir.join("c.db");
    let a = fixture::run();
    let mut b = fixture::run();
    for s in b.cases[2]
        .document
        .as_mut()
        .unwrap()
        .streams
        .iter_mut()
        .filter(|s| s.metric == "wakeup_latency")
    {
        doubled(s);
    }
    assert_eq!(store(&db, &a), 1);
    assert_eq!(store(&db, &b), 2);
    db.display().to_string()
}

#[test]
fn a_planted_regression_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let db = two_runs(dir.path());
    let o = run(&["compare", "1", "2", "--db", &db, "--threshold", "10"]);
    let out = stdout(&o);
    eprintln!("{out}");
    assert_eq!(o.status.code(), Some(1), "{out}{}", common::stderr(&o));
    let bad: Vec<&str> = out.lines().filter(|l| l.contains("REGRESSION")).collect();
    assert_eq!(bad.len(), 1, "{out}");
    assert!(bad[0].starts_with("timer/idle/no-rt/interval=1ms#1 / thread0"), "{}", bad[0]);
    assert!(out.contains("1 regression(s)"));
    // the other way round it is an improvement, not a regression
    let o = run(&["compare", "2", "1", "--db", &db, "--threshold", "10"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("better"));
}

#[test]
fn the_same_run_exits_0_and_without_threshold_nothing_fails() {
    let dir = tempfile::tempdir().unwrap();
    let db = two_runs(dir.path());
    let o = run(&["compare", "1", "1", "--db", &db, "--threshold", "0", "--metric", "max"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(!stdout(&o).contains("REGRESSION"));
    let o = run(&["compare", "1", "2", "--db", &db]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("no --threshold"));
    // failed and skipped cases are named, not dropped
    assert!(
        stdout(&o).contains("not compared: udp/tx/no-rt/payload=500#1: failed in A, failed in B")
    );
}

#[test]
fn compare_bad_input_is_one_line_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let db = two_runs(dir.path());
    assert_error(&["compare", "1", "99", "--db", &db], &["no run with id 99"]);
    assert_error(&["compare", "1", "2", "--db", &db, "--threshold", "lots"], &["--threshold lots"]);
    assert_error(&["compare", "1", "2", "--db", &db, "--metric", "p42"], &["p42"]);
    assert_error(&["compare", "1", "2", "--db", &db, "--alpha", "2"], &["--alpha"]);
}

/// Runs 1..=4 of one scenario and host: 1 good; 2 good (no gate); 3 a gate broken; 4 the
/// candidate, with a planted regression when `regress`. Another host's good run is 5.
fn baseline_store(dir: &std::path::Path, regress: bool) -> String {
    use rtlab_core::gate::Gate;
    use rtlab_core::judging::evaluate;
    use rtlab_core::run::CaseStatus;
    let db = dir.join("b.db");
    let mut good = fixture::run();
    good.cases.retain(|c| c.status == CaseStatus::Ok);
    let mut cand = good.clone();
    if regress {
        for s in cand.cases[0]
            .document
            .as_mut()
            .unwrap()
            .streams
            .iter_mut()
            .filter(|s| s.metric == "wakeup_latency")
        {
            doubled(s);
        }
    }
    let mut other = good.clone();
    other.info.environment.hostname = "robot-2".into();
    let names: Vec<String> = good.cases.iter().map(|c| c.name.clone()).collect();
    let judge = |id: i64, r: &rtlab_core::run::Run, gate: &str| {
        let mut s = rtlab_store::Store::open(&db).unwrap();
        let v = evaluate(&[Gate::parse_flag(gate).unwrap()], &r.cases, &names);
        s.save_gate_verdicts(id, &v).unwrap();
    };
    assert_eq!(store(&db, &good), 1);
    judge(1, &good, "*:*:missed<=100%");
    assert_eq!(store(&db, &good), 2);
    assert_eq!(store(&db, &good), 3);
    judge(3, &good, "*:*:max<=1ns");
    assert_eq!(store(&db, &cand), 4);
    assert_eq!(store(&db, &other), 5);
    db.display().to_string()
}

#[test]
fn baseline_compares_with_the_last_good_run_of_the_same_scenario_and_host() {
    let dir = tempfile::tempdir().unwrap();
    let db = baseline_store(dir.path(), false);
    let o = run(&["compare", "--baseline", "4", "--db", &db, "--threshold", "10"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", common::stderr(&o));
    let first = out.lines().next().unwrap();
    let host = fixture::run().info.environment.hostname;
    assert!(first.starts_with("baseline: run 2 (started "), "{first}");
    assert!(
        first.ends_with(&format!(
            "the last good run of scenario 'fixture-timer' on host '{host}' before run 4"
        )),
        "{first}"
    );
    assert!(!out.contains("REGRESSION"), "{out}");
    // without RUN: the latest run (5, another host) has no good run before it on its host
    assert_error(
        &["compare", "--baseline", "--db", &db],
        &["--baseline: ", "no good run of scenario 'fixture-timer' on host 'robot-2' before run 5"],
    );
    // run 2's baseline is run 1
    let o = run(&["compare", "--baseline", "2", "--db", &db]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    assert!(stdout(&o).starts_with("baseline: run 1 "), "{}", stdout(&o));
    assert_error(&["compare", "--baseline", "1", "--db", &db], &["no good run", "before run 1"]);
    assert_error(&["compare", "--baseline", "1", "2", "--db", &db], &["--baseline"]);
    assert_error(&["compare", "1", "--db", &db], &["RUN_B"]);
    assert_error(&["compare", "--baseline", "9", "--db", &db], &["no run with id 9"]);
}

#[test]
fn baseline_exits_1_on_a_planted_regression() {
    let dir = tempfile::tempdir().unwrap();
    let db = baseline_store(dir.path(), true);
    assert_error(&["compare", "--baseline", "latest", "--db", &db], &["robot-2"]);
    let o = run(&["compare", "--baseline", "4", "--db", &db, "--threshold", "10"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{}", common::stderr(&o));
    assert!(out.starts_with("baseline: run 2 "), "{out}");
    assert_eq!(out.lines().filter(|l| l.contains("REGRESSION")).count(), 1, "{out}");
}
