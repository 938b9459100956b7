//! `rtlab export` through the binary: JSON (the run as one document) and long CSV.

mod common;
mod stored;
use stored::{fixture, store_with_fixture};

use common::{assert_error, run, stdout};
use rtlab_core::run::Run;

#[test]
fn json_export_is_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = store_with_fixture(dir.path());
    let o = run(&["export", "1", "--db", &db, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let back: Run = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(back.cases, fixture::run().cases);
    let file = dir.path().join("run.json");
    let o =
        run(&["export", "latest", "--db", &db, "--format", "json", "-o", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        std::fs::read(&file).unwrap(),
        run(&["export", "1", "--db", &db, "--format", "json"]).stdout
    );
}

#[test]
fn csv_export_has_a_row_per_stream_bucket_and_window() {
    let dir = tempfile::tempdir().unwrap();
    let db = store_with_fixture(dir.path());
    let r = fixture::run();
    let docs: Vec<_> = r.cases.iter().filter_map(|c| c.document.as_ref()).collect();
    let streams: usize = docs.iter().map(|d| d.streams.len()).sum::<usize>()
        + r.cases.iter().filter(|c| c.document.is_none()).count();
    let buckets: usize =
        docs.iter().flat_map(|d| &d.streams).map(|s| s.histogram.buckets.len()).sum();
    let windows: usize = docs.iter().flat_map(|d| &d.streams).map(|s| s.windows.max_ns.len()).sum();
    for (what, rows) in [("stats", streams), ("histogram", buckets), ("windows", windows)] {
        let o = run(&["export", "1", "--db", &db, "--format", "csv", "--what", what]);
        assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
        let out = stdout(&o);
        assert_eq!(out.lines().count(), rows + 1, "--what {what}");
        assert!(out.starts_with("run_id,scenario,case_index,case,"));
    }
}

#[test]
fn export_bad_input_is_one_line_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let db = store_with_fixture(dir.path());
    assert_error(&["export", "3", "--db", &db, "--format", "csv"], &["no run with id 3"]);
    assert_error(&["export", "1", "--db", &db, "--format", "xml"], &["xml"]);
    assert_error(
        &["export", "1", "--db", &db, "--format", "json", "--what", "histogram"],
        &["--what"],
    );
    assert_error(
        &["export", "1", "--db", &db, "--format", "csv", "-o", "/nonexistent-dir/x.csv"],
        &["--output"],
    );
}
