//! Stores for CLI tests: the report crate's fixture run (real rtlab timer documents) put
//! into a fresh SQLite store, the way `rtlab run` puts its runs there.
#![allow(dead_code)]

#[path = "../../../rtlab-report/tests/fixture/mod.rs"]
pub mod fixture;

use rtlab_core::run::{Run, RunStatus};

/// Store `r` in the store at `db` (created if needed); returns the run id.
pub fn store_run(db: &std::path::Path, r: &Run) -> i64 {
    let mut s = rtlab_store::Store::open(db).unwrap();
    let id = s.begin_run(&r.info).unwrap();
    for c in &r.cases {
        s.add_case(id, c).unwrap();
    }
    s.finish_run(id, RunStatus::Complete).unwrap();
    id
}

/// A store in `dir` holding the fixture run; returns its path.
pub fn store_with_fixture(dir: &std::path::Path) -> String {
    let db = dir.join("rtlab.db");
    store_run(&db, &fixture::run());
    db.display().to_string()
}
