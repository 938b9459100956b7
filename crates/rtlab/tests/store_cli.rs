//! `rtlab runs` through the binary: listing, a missing store, a store from a newer schema.

mod common;
mod stored;
use stored::store_with_fixture;

use common::{assert_error, run, stdout};

#[test]
fn runs_lists_the_stored_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = store_with_fixture(dir.path());
    let o = run(&["runs", "--db", &db]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("1 "))
        .unwrap_or_else(|| panic!("no run 1 in: {out}"));
    assert!(line.contains("fixture-timer") && line.contains("complete"), "{line}");
    let o = run(&["runs", "--db", &db, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["cases"], 9);
    assert_eq!(v[0]["failed"], 1);
}

#[test]
fn runs_on_a_missing_store_is_one_line_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nothing.db").display().to_string();
    assert_error(&["runs", "--db", &db], &["--db", "nothing.db", "no store"]);
    assert!(!dir.path().join("nothing.db").exists(), "a read command created a store");
}

#[test]
fn a_store_from_a_newer_schema_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    newer_store(&path);
    let before = std::fs::read(&path).unwrap();
    let db = path.display().to_string();
    for args in [
        vec!["runs", "--db", &db],
        vec!["report", "--db", &db],
        vec!["export", "1", "--format", "json", "--db", &db],
    ] {
        assert_error(&args, &["future.db", "newer"]);
    }
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

/// A store file whose schema version is above this rtlab's: a current store with its
/// `PRAGMA user_version` (a big-endian u32 at byte 60 of the SQLite header) raised.
fn newer_store(path: &std::path::Path) {
    {
        rtlab_store::Store::open(path).unwrap();
    }
    let mut bytes = std::fs::read(path).unwrap();
    let v = rtlab_store::schema_version() + 1;
    bytes[60..64].copy_from_slice(&v.to_be_bytes());
    std::fs::write(path, bytes).unwrap();
}
