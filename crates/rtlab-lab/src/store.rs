//! The store as the commands read it: open one (never creating it), name runs (`latest` or
//! an id), load them, find a run's baseline, and the dashboard's pages (`dashboard`).
//!
//! Contract: every error is one line naming the store or the run; nothing here prints.

use crate::error::LabError;
use rtlab_core::run::Run;
pub use rtlab_store::export::{to_csv, to_json, CsvWhat};
pub use rtlab_store::url::redact;
pub use rtlab_store::{Pushed, Store, StoreError, DEFAULT_DB};

/// Open an existing store for reading (`flag`: the flag that named it, said on error).
pub fn open_existing(db: &str, flag: &str) -> Result<Store, LabError> {
    Store::open_existing(db).map_err(|e| LabError::Failed(format!("{flag} {e}")))
}

/// Open a store, creating it when it is not there (`push --to`).
pub fn open(db: &str, flag: &str) -> Result<Store, LabError> {
    Store::open(db).map_err(|e| LabError::Failed(format!("{flag} {e}")))
}

/// A RUN argument: `latest` or a run id.
pub fn resolve(store: &Store, spec: &str) -> Result<i64, LabError> {
    if spec == "latest" {
        return store.latest_run().map_err(LabError::failed);
    }
    spec.parse().map_err(|_| {
        LabError::Failed(format!("run '{spec}': expected a run id (see `rtlab runs`) or `latest`"))
    })
}

/// Load the runs named by `specs` (an unknown id is an error naming it).
pub fn load_runs(store: &Store, specs: &[String]) -> Result<Vec<Run>, LabError> {
    specs.iter().map(|s| store.load_run(resolve(store, s)?).map_err(LabError::failed)).collect()
}

/// A run and the run it is compared with (`compare --baseline`).
pub struct Baseline {
    /// The last good run before it of the same scenario and host.
    pub base: Run,
    /// The run named.
    pub run: Run,
}

/// `spec`'s run and the last good run before it of the same scenario and host (complete,
/// every case ok, every gate kept); an error saying so when there is none.
pub fn baseline(store: &Store, spec: &str) -> Result<Baseline, LabError> {
    let run = load_runs(store, &[spec.to_string()])?.remove(0);
    let (scenario, host) = (&run.info.scenario, &run.info.environment.hostname);
    let machine = store.run_host(run.id).map_err(LabError::failed)?.machine_id;
    let good = store
        .last_good_run(scenario, host, machine.as_deref(), run.id)
        .map_err(LabError::failed)?;
    let Some(good) = good else {
        return Err(LabError::Failed(format!(
            "--baseline: {}: no good run of scenario '{scenario}' on host '{host}' before run {} (a good run: complete, every case ok, every gate kept{})",
            store.label(),
            run.id,
            machine.map(|m| format!(", of machine id {m}")).unwrap_or_default()
        )));
    };
    let base = store.load_run(good).map_err(LabError::failed)?;
    Ok(Baseline { base, run })
}

/// Every run of `from` named by `specs` (none: every run), pushed into `to` one after
/// another, each said to `each` as it is done; the first failure ends it, naming the run.
pub fn push(
    from: &Store,
    to: &Store,
    specs: &[String],
    each: &mut dyn FnMut(&Pushed),
) -> Result<(), LabError> {
    let ids: Vec<i64> = if specs.is_empty() {
        from.runs().map_err(LabError::failed)?.iter().map(|r| r.id).collect()
    } else {
        specs.iter().map(|s| resolve(from, s)).collect::<Result<_, _>>()?
    };
    for id in ids {
        let pushed = from.push_run(id, to).map_err(|e| {
            LabError::Failed(format!(
                "push run {id}: {e} (nothing of run {id} was stored; push again)"
            ))
        })?;
        each(&pushed);
    }
    Ok(())
}
