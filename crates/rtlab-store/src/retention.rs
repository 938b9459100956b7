//! Removing runs: a bounded store for what adds runs without end (`rtlab monitor`, one run a
//! period).
//!
//! Contract: [`Store::delete_run`] removes a run and every row stored with it (its cases,
//! their documents, statistics, histograms, windows, raw samples, evidence, costs, far sides,
//! its environments, resumptions and gate verdicts) in one transaction: all of it or none.
//! [`Store::runs_started_before`] lists the runs of one scenario and source that started
//! before an RFC 3339 instant (UTC, as the store writes them, so they compare as text).

use crate::db::p;
use crate::{Result, Store};

/// Tables keyed by a case's statistics row.
const BY_STREAM: [&str; 3] = ["histogram_buckets", "windows", "raw_samples"];
/// Tables keyed by a case.
const BY_CASE: [&str; 10] = [
    "case_params",
    "documents",
    "configurations",
    "warnings",
    "spike_evidence",
    "evidence",
    "window_counters",
    "far_sides",
    "case_costs",
    "statistics",
];
/// Tables keyed by the run.
const BY_RUN: [&str; 4] = ["environments", "run_resumptions", "gate_verdicts", "cases"];

impl Store {
    /// Remove run `id` and everything stored with it.
    pub fn delete_run(&mut self, id: i64) -> Result<()> {
        self.check_run(id)?;
        self.transaction(|db| {
            let cases = "SELECT id FROM cases WHERE run_id = ?1";
            let streams = format!("SELECT id FROM statistics WHERE case_id IN ({cases})");
            for t in BY_STREAM {
                db.execute(&format!("DELETE FROM {t} WHERE stream_id IN ({streams})"), p![id])?;
            }
            for t in BY_CASE {
                db.execute(&format!("DELETE FROM {t} WHERE case_id IN ({cases})"), p![id])?;
            }
            for t in BY_RUN {
                db.execute(&format!("DELETE FROM {t} WHERE run_id = ?1"), p![id])?;
            }
            db.execute("DELETE FROM runs WHERE id = ?1", p![id])?;
            Ok(())
        })
        .map_err(|e| self.err(e))
    }

    /// The runs of `scenario` from `source` that started before `before` (RFC 3339, UTC).
    pub fn runs_started_before(
        &self,
        scenario: &str,
        source: &str,
        before: &str,
    ) -> Result<Vec<i64>> {
        let rows = self
            .db
            .borrow_mut()
            .query(
                "SELECT id FROM runs WHERE scenario = ?1 AND source = ?2 AND started_at < ?3 ORDER BY id",
                p![scenario, source, before],
            )
            .map_err(|e| self.err(e))?;
        rows.iter().map(|r| r.get::<i64>(0).map_err(|e| self.err(e))).collect()
    }
}
