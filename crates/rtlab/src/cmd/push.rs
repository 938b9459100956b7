//! `rtlab push [RUN...] --to URL`: copy runs of the local store into a team's store
//! (PostgreSQL), offline first: a robot measures into its SQLite file and pushes when online.
//!
//! Contract (the store's `push_run`): a run is stored once by its uuid however often it is
//! pushed (a copy pushed interrupted or failed is replaced once the run was resumed and
//! finished here); each run goes in one transaction (cut short, nothing of it is stored, the next
//! push does it); the local copy is only read. Prints one line per run (pushed, already
//! there, or still running and not pushed) and a total; errors are one line, exit 2, and
//! name the store with its password redacted.

use super::runs::{open_store, resolve};
use clap::Args;
use rtlab_store::{Pushed, Store, DEFAULT_DB};

#[derive(Args, Debug)]
pub struct PushArgs {
    /// The runs to push: ids or `latest` (default: every run of the local store).
    pub runs: Vec<String>,
    /// The store to push into: postgres://USER[:PASSWORD]@HOST[:PORT]/DB (or a SQLite file).
    #[arg(long, value_name = "URL")]
    pub to: String,
    /// The store to push from (the local SQLite file).
    #[arg(long, default_value = DEFAULT_DB, value_name = "FILE|URL")]
    pub db: String,
}

pub fn run(a: PushArgs) -> anyhow::Result<u8> {
    let from = open_store(&a.db)?;
    let ids: Vec<i64> = if a.runs.is_empty() {
        from.runs().map_err(|e| anyhow::anyhow!("{e}"))?.iter().map(|r| r.id).collect()
    } else {
        a.runs.iter().map(|s| resolve(&from, s)).collect::<anyhow::Result<_>>()?
    };
    let to = Store::open(&a.to).map_err(|e| anyhow::anyhow!("--to {e}"))?;
    let (mut stored, mut already, mut running) = (0, 0, 0);
    for id in ids {
        let pushed = from.push_run(id, &to).map_err(|e| {
            anyhow::anyhow!("push run {id}: {e} (nothing of run {id} was stored; push again)")
        })?;
        match pushed {
            Pushed::Stored { local, remote, uuid, cases } => {
                stored += 1;
                println!("run {local}: pushed as run {remote} ({cases} cases, uuid {uuid})");
            }
            Pushed::Replaced { local, remote, uuid, cases, was } => {
                stored += 1;
                println!(
                    "run {local}: pushed over its {} copy, run {remote} ({cases} cases, uuid {uuid})",
                    was.name()
                );
            }
            Pushed::Already { local, remote, uuid } => {
                already += 1;
                println!("run {local}: already there as run {remote} (uuid {uuid})");
            }
            Pushed::Running { local } => {
                running += 1;
                println!(
                    "run {local}: still running, not pushed (finish it, or `rtlab run --resume {local}`)"
                );
            }
        }
    }
    println!(
        "{stored} pushed, {already} already there, {running} not pushed to {}; the local store {} is unchanged",
        to.label(),
        from.label()
    );
    Ok(0)
}
