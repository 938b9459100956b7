//! The store's side of `rtlab run PRESET --resume RUN`: continue an interrupted run under
//! the same run id.
//!
//! Contract:
//! - [`Store::resume_point`] only reads: the run's scenario text, source, scale, status and
//!   the cases already stored. Cases with status `ok`, `failed` or `skipped` are done
//!   ([`ResumePoint::done`]); a case stored as `interrupted` is to be run again
//!   ([`ResumePoint::interrupted`]).
//! - [`Store::reopen_run`] in ONE transaction: removes the interrupted cases (with everything
//!   stored under them) so that they can be added again under the same name, sets the run's
//!   status back to `running` (and clears `finished_at`), and notes the resumption in
//!   `run_resumptions` (when, by which command, from which status, which cases it dropped).
//!   A `complete` run is refused ([`StoreError::NotResumable`]), untouched.
//! - The caller then adds the remaining cases with [`Store::add_case`] and ends the run with
//!   [`Store::finish_run`], exactly as for a new run; `load_run` orders cases by index, so a
//!   resumed run reads back in scenario order.
//! - Never decides which cases remain: the caller expands the scenario again and skips the
//!   names in [`ResumePoint::done`].

use crate::db::{p, Db, DbErr};
use crate::{json, now_rfc3339, OptionalRow, Result, Store, StoreError};
use rtlab_core::run::RunStatus;

/// How a stored case ended (the `cases.status` column).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoredCaseStatus {
    Ok,
    Failed,
    Skipped,
    /// Cut short (Ctrl-C, crash): run again on resume.
    Interrupted,
    /// Left behind by the run's supervisor: not run again on resume (it would hang again).
    Hung,
}

impl StoredCaseStatus {
    /// The name stored in `cases.status`.
    pub fn name(self) -> &'static str {
        match self {
            StoredCaseStatus::Ok => "ok",
            StoredCaseStatus::Failed => "failed",
            StoredCaseStatus::Skipped => "skipped",
            StoredCaseStatus::Interrupted => "interrupted",
            StoredCaseStatus::Hung => "hung",
        }
    }

    fn parse(s: &str) -> Option<StoredCaseStatus> {
        Some(match s {
            "ok" => StoredCaseStatus::Ok,
            "failed" => StoredCaseStatus::Failed,
            "skipped" => StoredCaseStatus::Skipped,
            "interrupted" => StoredCaseStatus::Interrupted,
            "hung" => StoredCaseStatus::Hung,
            _ => return None,
        })
    }
}

/// A case already stored in a run: its index in the scenario, its name and how it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredCase {
    pub index: u32,
    pub name: String,
    pub status: StoredCaseStatus,
}

/// What a resume needs to know about a stored run.
#[derive(Clone, Debug, PartialEq)]
pub struct ResumePoint {
    pub run_id: i64,
    /// Scenario name (preset name or the file's `name`).
    pub scenario: String,
    /// `preset` or the scenario file's path.
    pub source: String,
    /// The scenario text (TOML) as it was run: expand THIS, not today's file or preset.
    pub scenario_text: String,
    /// The `--scale` the run was started with.
    pub scale: f64,
    /// The command that started the run.
    pub command_line: Vec<String>,
    pub started_at: String,
    /// The rtlab version that started the run.
    pub tool_version: String,
    pub status: RunStatus,
    /// Cases stored as ok, failed or skipped, by index: not to be run again.
    pub done: Vec<StoredCase>,
    /// Cases stored as interrupted, by index: to be run again ([`Store::reopen_run`]
    /// removes them).
    pub interrupted: Vec<StoredCase>,
}

impl ResumePoint {
    /// True when a case of this name is done (ok, failed or skipped) in the stored run.
    pub fn is_done(&self, name: &str) -> bool {
        self.done.iter().any(|c| c.name == name)
    }
}

/// One time a run was reopened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resumption {
    /// UTC, RFC 3339.
    pub resumed_at: String,
    /// The run's status before it was reopened.
    pub previous_status: RunStatus,
    /// The resuming command.
    pub command_line: Vec<String>,
    /// The interrupted cases that were removed to be run again.
    pub dropped_cases: Vec<String>,
}

/// Tables that hang off a case, children first (foreign keys are on).
pub(crate) const CASE_CHILDREN: &[&str] = &[
    "DELETE FROM histogram_buckets WHERE stream_id IN (SELECT id FROM statistics WHERE case_id = ?1)",
    "DELETE FROM windows WHERE stream_id IN (SELECT id FROM statistics WHERE case_id = ?1)",
    "DELETE FROM raw_samples WHERE stream_id IN (SELECT id FROM statistics WHERE case_id = ?1)",
    "DELETE FROM statistics WHERE case_id = ?1",
    "DELETE FROM window_counters WHERE case_id = ?1",
    "DELETE FROM evidence WHERE case_id = ?1",
    "DELETE FROM spike_evidence WHERE case_id = ?1",
    "DELETE FROM warnings WHERE case_id = ?1",
    "DELETE FROM far_sides WHERE case_id = ?1",
    "DELETE FROM case_costs WHERE case_id = ?1",
    "DELETE FROM configurations WHERE case_id = ?1",
    "DELETE FROM documents WHERE case_id = ?1",
    "DELETE FROM environments WHERE case_id = ?1",
    "DELETE FROM case_params WHERE case_id = ?1",
    "DELETE FROM cases WHERE id = ?1",
];

impl Store {
    /// What is stored of run `run_id`, for resuming it (reads only; no document is loaded).
    pub fn resume_point(&self, run_id: i64) -> Result<ResumePoint> {
        type Row = (String, String, String, f64, String, String, String, String);
        let row: Option<Row> = self.query_row(
                "SELECT scenario, source, scenario_text, scale, command_line, started_at, tool_version, status FROM runs WHERE id = ?1",
                p![run_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let Some((scenario, source, scenario_text, scale, cmd, started_at, tool_version, status)) =
            row
        else {
            return Err(self.unknown_run(run_id));
        };
        let mut done = Vec::new();
        let mut interrupted = Vec::new();
        for c in self.stored_cases(run_id)? {
            if c.status == StoredCaseStatus::Interrupted {
                interrupted.push(c);
            } else {
                done.push(c);
            }
        }
        Ok(ResumePoint {
            run_id,
            scenario,
            source,
            scenario_text,
            scale,
            command_line: self.parse(&cmd)?,
            started_at,
            tool_version,
            status: self.run_status(&status)?,
            done,
            interrupted,
        })
    }

    /// The cases stored in run `run_id` (index, name, status), by index.
    pub fn stored_cases(&self, run_id: i64) -> Result<Vec<StoredCase>> {
        let rows = self.rows(
            "SELECT idx, name, status FROM cases WHERE run_id = ?1 ORDER BY idx, id",
            p![run_id],
            |r| Ok((r.get::<u32>(0)?, r.get::<String>(1)?, r.get::<String>(2)?)),
        )?;
        let mut out = Vec::new();
        for (index, name, status) in rows {
            let status = StoredCaseStatus::parse(&status)
                .ok_or_else(|| self.corrupt(format!("case {name}: unknown status '{status}'")))?;
            out.push(StoredCase { index, name, status });
        }
        Ok(out)
    }

    /// Reopen run `run_id` to add its remaining cases: its interrupted cases are removed (to
    /// be run again), its status goes back to `running`, `finished_at` is cleared, and the
    /// resumption is noted with `command_line` (the resuming command). One transaction.
    /// Refuses a `complete` run. Returns the resume point as it is after reopening.
    pub fn reopen_run(&mut self, run_id: i64, command_line: &[String]) -> Result<ResumePoint> {
        let before = self.resume_point(run_id)?;
        if before.status == RunStatus::Complete {
            return Err(StoreError::NotResumable { path: self.label.clone(), id: run_id });
        }
        let dropped: Vec<String> = before.interrupted.iter().map(|c| c.name.clone()).collect();
        self.transaction(|db| {
            for c in &before.interrupted {
                let cid: i64 = db
                    .query_one(
                        "SELECT id FROM cases WHERE run_id = ?1 AND name = ?2",
                        p![run_id, c.name],
                    )?
                    .get(0)?;
                for sql in CASE_CHILDREN {
                    db.execute(sql, p![cid])?;
                }
            }
            let r = Resumption {
                resumed_at: now_rfc3339(),
                previous_status: before.status,
                command_line: command_line.to_vec(),
                dropped_cases: dropped.clone(),
            };
            insert_resumption(db, run_id, &r)?;
            db.execute(
                "UPDATE runs SET status = ?1, finished_at = NULL WHERE id = ?2",
                p![RunStatus::Running.name(), run_id],
            )?;
            Ok(())
        })
        .map_err(|e| self.err(e))?;
        self.resume_point(run_id)
    }

    /// Every time run `run_id` was reopened, oldest first (empty for a run never resumed).
    pub fn resumptions(&self, run_id: i64) -> Result<Vec<Resumption>> {
        self.check_run(run_id)?;
        let rows = self.rows(
            "SELECT resumed_at, previous_status, command_line, dropped_cases FROM run_resumptions WHERE run_id = ?1 ORDER BY pos",
            p![run_id],
            |r| {
                Ok((
                    r.get::<String>(0)?,
                    r.get::<String>(1)?,
                    r.get::<String>(2)?,
                    r.get::<String>(3)?,
                ))
            },
        )?;
        let mut out = Vec::new();
        for (resumed_at, previous, cmd, dropped) in rows {
            out.push(Resumption {
                resumed_at,
                previous_status: self.run_status(&previous)?,
                command_line: self.parse(&cmd)?,
                dropped_cases: self.parse(&dropped)?,
            });
        }
        Ok(out)
    }
}

/// One resumption of run `run_id`, next after those stored (call inside a transaction).
pub(crate) fn insert_resumption(
    db: &mut Db,
    run_id: i64,
    r: &Resumption,
) -> std::result::Result<(), DbErr> {
    let pos: i64 = db
        .query_one("SELECT COUNT(*) FROM run_resumptions WHERE run_id = ?1", p![run_id])?
        .get(0)?;
    db.execute(
        "INSERT INTO run_resumptions (run_id, pos, resumed_at, previous_status, command_line, dropped_cases) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        p![run_id, pos, r.resumed_at, r.previous_status.name(), json(&r.command_line), json(&r.dropped_cases)],
    )?;
    Ok(())
}
