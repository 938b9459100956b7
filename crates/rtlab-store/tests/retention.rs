//! Removing a run leaves no row of it in any table, and the other runs as they were.

#[path = "../../rtlab-report/tests/fixture/mod.rs"]
mod fixture;

use rtlab_core::run::RunStatus;
use rtlab_store::Store;

#[test]
fn a_deleted_run_leaves_nothing_and_the_others_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let run = fixture::run();
    let mut s = Store::open(&path).unwrap();
    let mut ids = Vec::new();
    for started in ["2026-01-01T00:00:00Z", "2026-03-01T00:00:00Z"] {
        let mut info = run.info.clone();
        info.started_at = started.into();
        let id = s.begin_run(&info).unwrap();
        for c in &run.cases {
            s.add_case(id, c).unwrap();
        }
        s.save_gate_verdicts(id, &[]).unwrap();
        s.finish_run(id, RunStatus::Complete).unwrap();
        ids.push(id);
    }
    let (old, kept) = (ids[0], ids[1]);
    let before = s
        .runs_started_before(&run.info.scenario, &run.info.source, "2026-02-01T00:00:00Z")
        .unwrap();
    assert_eq!(before, vec![old]);
    s.delete_run(old).unwrap();
    assert!(s.load_run(old).is_err(), "the run is gone");
    assert!(s.delete_run(old).is_err(), "a run that is not there is an error");
    let back = s.load_run(kept).unwrap();
    assert_eq!(back.cases, run.cases, "the other run as it was");
    drop(s);
    // every table: nothing of the deleted run's cases or streams is left
    let c = rusqlite::Connection::open(&path).unwrap();
    let tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for t in &tables {
        let cols: Vec<String> = c
            .prepare(&format!("PRAGMA table_info({t})"))
            .unwrap()
            .query_map([], |r| r.get(1))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let q = if cols.iter().any(|x| x == "run_id") {
            format!("SELECT COUNT(*) FROM {t} WHERE run_id = {old}")
        } else if cols.iter().any(|x| x == "case_id") {
            format!("SELECT COUNT(*) FROM {t} WHERE case_id NOT IN (SELECT id FROM cases)")
        } else if cols.iter().any(|x| x == "stream_id") {
            format!("SELECT COUNT(*) FROM {t} WHERE stream_id NOT IN (SELECT id FROM statistics)")
        } else if t == "runs" {
            format!("SELECT COUNT(*) FROM runs WHERE id = {old}")
        } else {
            continue;
        };
        let n: i64 = c.query_row(&q, [], |r| r.get(0)).unwrap();
        assert_eq!(n, 0, "{t}: {n} rows of the deleted run left");
    }
}
