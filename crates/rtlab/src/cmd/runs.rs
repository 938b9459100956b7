//! `rtlab runs`: list the stored runs. Also the helpers the store commands share: open the
//! store of `--db` (never creating one) and load the runs named (`latest` or ids).

use clap::Args;
use rtlab_lab::store::{Store, DEFAULT_DB};
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
    rtlab_lab::store::open_existing(db, "--db").map_err(super::lab_error)
}

/// Load the runs named by `specs`: ids or `latest` (an unknown id is an error naming it).
pub fn load_runs(store: &Store, specs: &[String]) -> anyhow::Result<Vec<rtlab_core::run::Run>> {
    rtlab_lab::store::load_runs(store, specs).map_err(super::lab_error)
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
