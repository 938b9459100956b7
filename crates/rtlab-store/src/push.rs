//! `rtlab push`: copy runs from one store (a robot's SQLite file) into another (the team's
//! PostgreSQL), offline first.
//!
//! Contract:
//! - A run is identified across stores by its uuid: a run the target holds already is not
//!   stored again ([`Pushed::Already`]), so pushing twice stores it once, also when two
//!   hosts push it at the same moment (the unique index on `runs.uuid` decides, the loser
//!   reports `Already`).
//! - A run is copied in ONE transaction on the target (the run, its environment, every case
//!   with its statistics, histograms, windows, evidence and raw samples, its resumptions and
//!   its gate verdicts):
//!   a push cut short (the server stopped, the link cut) leaves nothing of it, and the next
//!   push stores it whole.
//! - The source is only read: the local copy is never changed or deleted.
//! - A run still `running` is not pushed ([`Pushed::Running`]): it would be frozen half
//!   measured in the target; finish or resume it first.
//! - The target gives the run its own short id; the uuid, host and command line are kept.

use crate::resume::insert_resumption;
use crate::{insert_case, insert_run, RawSource, Result, Store};
use rtlab_core::run::RunStatus;
use std::collections::BTreeMap;

/// What pushing one run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pushed {
    /// Copied: the run's id here and in the target, its uuid and number of cases.
    Stored { local: i64, remote: i64, uuid: String, cases: usize },
    /// The target held it already (same uuid), under id `remote`.
    Already { local: i64, remote: i64, uuid: String },
    /// Still `running` here (being measured, or cut short and not yet marked): not pushed.
    Running { local: i64 },
}

impl Store {
    /// Copy run `id` of this store into `to` (see the module's contract).
    pub fn push_run(&self, id: i64, to: &Store) -> Result<Pushed> {
        let host = self.run_host(id)?;
        let status: String = self
            .query_row("SELECT status FROM runs WHERE id = ?1", crate::db::p![id], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        if self.run_status(&status)? == RunStatus::Running {
            return Ok(Pushed::Running { local: id });
        }
        if let Some(remote) = to.run_by_uuid(&host.uuid)? {
            return Ok(Pushed::Already { local: id, remote, uuid: host.uuid });
        }
        let run = self.load_run(id)?;
        let resumptions = self.resumptions(id)?;
        let mut raws = Vec::with_capacity(run.cases.len());
        for c in &run.cases {
            let mut m = BTreeMap::new();
            for s in c.document.iter().flat_map(|d| &d.streams) {
                let rows = self.raw_samples(id, &c.name, &s.name)?;
                if !rows.is_empty() {
                    m.insert(s.name.clone(), rows);
                }
            }
            raws.push(RawSource::Rows(m));
        }
        let stored = to.transaction(|db| {
            let rid = insert_run(db, &run.info, &host, run.status, run.finished_at.as_deref())?;
            for (c, raw) in run.cases.iter().zip(&raws) {
                insert_case(db, rid, c, raw)?;
            }
            for r in &resumptions {
                insert_resumption(db, rid, r)?;
            }
            crate::gates::insert_verdicts(db, rid, &run.gates)?;
            Ok(rid)
        });
        match stored {
            Ok(remote) => {
                Ok(Pushed::Stored { local: id, remote, uuid: host.uuid, cases: run.cases.len() })
            }
            // another host pushed the same run first: it is there once
            Err(e) if e.is_unique_violation() => match to.run_by_uuid(&host.uuid)? {
                Some(remote) => Ok(Pushed::Already { local: id, remote, uuid: host.uuid }),
                None => Err(to.err(e)),
            },
            Err(e) => Err(to.err(e)),
        }
    }
}
