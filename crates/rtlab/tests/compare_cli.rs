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
