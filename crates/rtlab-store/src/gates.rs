//! Gate verdicts of a run (`[[gate]]`, `rtlab run --gate`) and the last good run
//! (`rtlab compare --baseline`).
//!
//! Contract: [`Store::save_gate_verdicts`] replaces a run's verdicts in one transaction (a
//! resumed run is judged again over all its cases); [`Store::gate_verdicts`] gives them back
//! in order; [`Store::last_good_run`] is one query: the newest run before a given one of the
//! same scenario and host that is complete, has cases, every case `ok` and no verdict that
//! fails ([`Outcome::fails`]).

use crate::db::p;
use crate::{OptionalRow, Result, Store};
use rtlab_core::gate::{GateMetric, GateVerdict, Outcome};

/// The outcomes a good run may hold (every other one fails it).
const GOOD_OUTCOMES: &str = "'kept', 'skipped', 'no_case'";

impl Store {
    /// Store run `run_id`'s gate verdicts, replacing any stored before.
    pub fn save_gate_verdicts(&mut self, run_id: i64, verdicts: &[GateVerdict]) -> Result<()> {
        self.check_run(run_id)?;
        self.transaction(|db| {
            db.execute("DELETE FROM gate_verdicts WHERE run_id = ?1", p![run_id])?;
            insert_verdicts(db, run_id, verdicts)
        })
        .map_err(|e| self.err(e))
    }

    /// Run `run_id`'s gate verdicts, in the order they were stored.
    pub fn gate_verdicts(&self, run_id: i64) -> Result<Vec<GateVerdict>> {
        type Row = (
            String,
            String,
            Option<String>,
            Option<String>,
            String,
            String,
            Option<String>,
            String,
            String,
        );
        let rows: Vec<Row> = self.rows(
            "SELECT gate, origin, case_name, stream, metric, limit_text, value_text, verdict, message
             FROM gate_verdicts WHERE run_id = ?1 ORDER BY pos",
            p![run_id],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                ))
            },
        )?;
        let mut out = Vec::new();
        for (gate, origin, case, stream, metric, limit, value, verdict, message) in rows {
            out.push(GateVerdict {
                metric: GateMetric::parse(&metric).ok_or_else(|| {
                    self.corrupt(format!("gate {gate}: unknown metric '{metric}'"))
                })?,
                outcome: Outcome::parse(&verdict).ok_or_else(|| {
                    self.corrupt(format!("gate {gate}: unknown verdict '{verdict}'"))
                })?,
                gate,
                origin,
                case,
                stream,
                limit,
                value,
                message,
            });
        }
        Ok(out)
    }

    /// The newest good run of `scenario` on the host `hostname` with an id below `before`:
    /// complete, at least one case, every case ok, and no gate verdict other than kept or
    /// skipped. The same host: the same hostname, and the same machine id (`/etc/machine-id`)
    /// where both runs recorded one, so two robots that share a name are not each other's
    /// baseline (a machine renamed starts a new baseline).
    pub fn last_good_run(
        &self,
        scenario: &str,
        hostname: &str,
        machine_id: Option<&str>,
        before: i64,
    ) -> Result<Option<i64>> {
        let sql = format!(
            "SELECT r.id FROM runs r
             WHERE r.scenario = ?1 AND r.hostname = ?2 AND r.id < ?3 AND r.status = 'complete'
               AND (CAST(?4 AS TEXT) IS NULL OR r.machine_id IS NULL OR r.machine_id = ?4)
               AND EXISTS (SELECT 1 FROM cases c WHERE c.run_id = r.id)
               AND NOT EXISTS (SELECT 1 FROM cases c WHERE c.run_id = r.id AND c.status <> 'ok')
               AND NOT EXISTS (SELECT 1 FROM gate_verdicts g WHERE g.run_id = r.id AND g.verdict NOT IN ({GOOD_OUTCOMES}))
             ORDER BY r.id DESC LIMIT 1"
        );
        self.query_row(&sql, p![scenario, hostname, before, machine_id], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))
    }
}

/// Insert `verdicts` as run `run_id`'s, in order (inside the caller's transaction: a save,
/// or a push that copies a run with its verdicts).
pub(crate) fn insert_verdicts(
    db: &mut crate::db::Db,
    run_id: i64,
    verdicts: &[GateVerdict],
) -> std::result::Result<(), crate::db::DbErr> {
    for (pos, v) in verdicts.iter().enumerate() {
        db.execute(
            "INSERT INTO gate_verdicts (run_id, pos, gate, origin, case_name, stream, metric, limit_text, value_text, verdict, message)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            p![
                run_id,
                pos as i64,
                v.gate,
                v.origin,
                v.case,
                v.stream,
                v.metric.name(),
                v.limit,
                v.value,
                v.outcome.name(),
                v.message
            ],
        )?;
    }
    Ok(())
}
