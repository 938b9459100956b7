//! `rtlab push`: copy runs from one store (a robot's SQLite file) into another (the team's
//! PostgreSQL), offline first.
//!
//! Contract:
//! - A run is identified across stores by its uuid: a run the target holds already, as it
//!   is here, is not stored again ([`Pushed::Already`]), so pushing twice stores it once, also
//!   when two hosts push it at the same moment (the unique index on `runs.uuid` decides, the
//!   loser reports `Already`).
//! - A run the target holds as it was when it was pushed `interrupted` or `failed`, and that
//!   has since been resumed here (its status or its finish time differ), is replaced there
//!   whole, under the same short id ([`Pushed::Replaced`]): the team sees the finished run,
//!   never both. A `complete` run in the target is never replaced.
//! - A run is copied in ONE transaction on the target (the run, its environment, every case
//!   with its statistics, histograms, windows, evidence and raw samples, its resumptions and
//!   its gate verdicts): a push cut short (the server stopped, the link cut) leaves nothing of
//!   it, and the next push stores it whole. Rows go in bulk (PostgreSQL's COPY: a round trip
//!   per table and case, not per row); raw samples stream from the source to the target as
//!   they are read, so a case of millions of samples is pushed in constant memory.
//! - The source is only read: the local copy is never changed or deleted.
//! - A run still `running` is not pushed ([`Pushed::Running`]): it would be frozen half
//!   measured in the target; finish or resume it first.
//! - The target gives the run its own short id; the uuid, host and command line are kept.

use crate::db::{p, Db, DbErr};
use crate::insert::{insert_case, insert_env, insert_run, RAW_COLS};
use crate::resume::{insert_resumption, CASE_CHILDREN};
use crate::{RawSource, Result, RunHost, Store};
use rtlab_core::run::{Run, RunStatus};

/// What pushing one run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pushed {
    /// Copied: the run's id here and in the target, its uuid and number of cases.
    Stored { local: i64, remote: i64, uuid: String, cases: usize },
    /// The target held it interrupted or failed; it was resumed here since, and now replaces
    /// the target's copy under the same id `remote`.
    Replaced { local: i64, remote: i64, uuid: String, cases: usize, was: RunStatus },
    /// The target held it already (same uuid), under id `remote`.
    Already { local: i64, remote: i64, uuid: String },
    /// Still `running` here (being measured, or cut short and not yet marked): not pushed.
    Running { local: i64 },
}

impl Store {
    /// Copy run `id` of this store into `to` (see the module's contract).
    pub fn push_run(&self, id: i64, to: &Store) -> Result<Pushed> {
        let host = self.run_host(id)?;
        let (status, finished) = self.status_of(id)?;
        if status == RunStatus::Running {
            return Ok(Pushed::Running { local: id });
        }
        let already = |remote| Pushed::Already { local: id, remote, uuid: host.uuid.clone() };
        let there = to.run_by_uuid(&host.uuid)?;
        let mut replace = None;
        if let Some(remote) = there {
            let (was, f) = to.status_of(remote)?;
            let same = was == status && f == finished;
            if same || !matches!(was, RunStatus::Interrupted | RunStatus::Failed) {
                return Ok(already(remote));
            }
            replace = Some((remote, was, f));
        }
        let run = self.load_run(id)?;
        let resumptions = self.resumptions(id)?;
        let raw = RawSource::Store { from: self, run: id };
        let cases = run.cases.len();
        let uuid = host.uuid.clone();
        let stored = to.transaction(|db| {
            let rid = match &replace {
                None => insert_run(db, &run.info, &host, run.status, run.finished_at.as_deref())?,
                Some((remote, was, f)) => {
                    if !clear_run(db, *remote, *was, f.as_deref(), &run, &host)? {
                        // another push replaced it first
                        return Ok(None);
                    }
                    *remote
                }
            };
            for c in &run.cases {
                insert_case(db, rid, c, &raw)?;
            }
            for r in &resumptions {
                insert_resumption(db, rid, r)?;
            }
            crate::gates::insert_verdicts(db, rid, &run.gates)?;
            Ok(Some(rid))
        });
        match (stored, replace) {
            (Ok(Some(remote)), None) => Ok(Pushed::Stored { local: id, remote, uuid, cases }),
            (Ok(Some(remote)), Some((_, was, _))) => {
                Ok(Pushed::Replaced { local: id, remote, uuid, cases, was })
            }
            (Ok(None), Some((remote, ..))) => Ok(already(remote)),
            (Ok(None), None) => unreachable!("only a replacement can find its run taken"),
            // another host pushed the same run first: it is there once
            (Err(e), _) if e.is_unique_violation() => match to.run_by_uuid(&uuid)? {
                Some(remote) => Ok(already(remote)),
                None => Err(to.err(e)),
            },
            (Err(e), _) => Err(to.err(e)),
        }
    }

    /// Copy the raw samples of stream `stream` of case `case` of run `run` into stream `sid`
    /// of the target `to` (inside its transaction), streamed as they are read.
    pub(crate) fn copy_raw(
        &self,
        run: i64,
        case: &str,
        stream: &str,
        sid: i64,
        to: &mut Db,
    ) -> std::result::Result<(), DbErr> {
        const FROM: &str = "FROM raw_samples r JOIN statistics s ON s.id = r.stream_id JOIN cases c ON c.id = s.case_id
             WHERE c.run_id = ?1 AND c.name = ?2 AND s.stream = ?3";
        let mut src = self.db.borrow_mut();
        let source = |e: DbErr| DbErr::new(format!("{} (reading {})", e.what, self.label));
        let any = src
            .query_opt(&format!("SELECT 1 {FROM} LIMIT 1"), p![run, case, stream])
            .map_err(source)?;
        if any.is_none() {
            return Ok(());
        }
        to.bulk("raw_samples", RAW_COLS, |put| {
            src.for_each(
                &format!("SELECT r.idx, r.at_ns, r.value_ns {FROM}"),
                p![run, case, stream],
                |r| put(p![sid, r.get::<i64>(0)?, r.get::<i64>(1)?, r.get::<i64>(2)?]),
            )
        })
    }
}

/// Empty run `remote` of the target for its replacement (inside the push's transaction): its
/// `runs` row takes the pushed run's status, finish time and host, if it is still as it was
/// read (`was`, `finished`: false when another push changed it first); then every case with
/// everything under it, its environment, resumptions and gate verdicts are removed.
fn clear_run(
    db: &mut Db,
    remote: i64,
    was: RunStatus,
    finished: Option<&str>,
    run: &Run,
    host: &RunHost,
) -> std::result::Result<bool, DbErr> {
    let changed = db.execute(
        "UPDATE runs SET status = ?1, finished_at = ?2, profiles = ?3, command_line = ?4
         WHERE id = ?5 AND status = ?6 AND COALESCE(finished_at, '') = ?7",
        p![
            run.status.name(),
            run.finished_at,
            host.profiles,
            crate::json(&run.info.command_line),
            remote,
            was.name(),
            finished.unwrap_or("")
        ],
    )?;
    if changed == 0 {
        return Ok(false);
    }
    let cases: Vec<i64> = db
        .query("SELECT id FROM cases WHERE run_id = ?1", p![remote])?
        .iter()
        .map(|r| r.get(0))
        .collect::<std::result::Result<_, _>>()?;
    for cid in cases {
        for sql in CASE_CHILDREN {
            db.execute(sql, p![cid])?;
        }
    }
    for sql in [
        "DELETE FROM environments WHERE run_id = ?1",
        "DELETE FROM run_resumptions WHERE run_id = ?1",
        "DELETE FROM gate_verdicts WHERE run_id = ?1",
    ] {
        db.execute(sql, p![remote])?;
    }
    insert_env(db, remote, None, &run.info.environment)?;
    Ok(true)
}
