//! `rtlab runs`: list the stored runs. Also the helpers the store commands share: open the
//! store of `--db` (never creating one) and resolve a RUN argument (`latest` or an id).

use clap::Args;
use rtlab_store::{Store, DEFAULT_DB};
use std::io::Write;

#[derive(Args, Debug)]
pub struct RunsArgs {
    /// The store: a SQLite file or postgres://USER[:PASSWORD]@HOST[:PORT]/DB.
    #[arg(long, env = "RTLAB_DB", hide_env_values = true, default_value = DEFAULT_DB, value_name = "FILE|URL")]
    pub db: String,
    /// Print the list as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Open an existing store for reading; every error is one line naming the file.
pub fn open_store(db: &str) -> anyhow::Result<Store> {
    Store::open_existing(db).map_err(|e| anyhow::anyhow!("--db {e}"))
}

/// A RUN argument: `latest` or a run id.
pub fn resolve(store: &Store, spec: &str) -> anyhow::Result<i64> {
    if spec == "latest" {
        return store.latest_run().map_err(|e| anyhow::anyhow!("{e}"));
    }
    let id: i64 = spec.parse().map_err(|_| {
        anyhow::anyhow!("run '{spec}': expected a run id (see `rtlab runs`) or `latest`")
    })?;
    Ok(id)
}

/// Load the runs named by `specs` (an unknown id is an error naming it).
pub fn load_runs(store: &Store, specs: &[String]) -> anyhow::Result<Vec<rtlab_core::run::Run>> {
    let mut runs = Vec::new();
    for s in specs {
        let id = resolve(store, s)?;
        runs.push(store.load_run(id).map_err(|e| anyhow::anyhow!("{e}"))?);
    }
    Ok(runs)
}

pub fn run(a: RunsArgs) -> anyhow::Result<u8> {
    let store = open_store(&a.db)?;
    let runs = store.runs().map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut out = std::io::stdout().lock();
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&runs)?)?;
        return Ok(0);
    }
    if runs.is_empty() {
        writeln!(out, "{}: no run stored yet", store.label())?;
        return Ok(0);
    }
    let mut rows =
        vec![["id", "scenario", "started", "status", "cases", "failed", "host", "kernel"]
            .map(String::from)
            .to_vec()];
    for r in &runs {
        rows.push(vec![
            r.id.to_string(),
            r.scenario.clone(),
            r.started_at.clone(),
            r.status.name().into(),
            r.cases.to_string(),
            r.failed.to_string(),
            r.hostname.clone(),
            r.kernel_release.clone(),
        ]);
    }
    write!(out, "{}", rtlab_report::table::align_left(&rows, &[1, 2, 3, 6, 7]))?;
    Ok(0)
}
