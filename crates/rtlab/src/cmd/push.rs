//! `rtlab push [RUN...] --to URL`: copy runs of the local store into a team's store
//! (PostgreSQL), offline first: a robot measures into its SQLite file and pushes when online.
//!
//! Contract (the store's `push_run`): a run is stored once by its uuid however often it is
//! pushed (a copy pushed interrupted or failed is replaced once the run was resumed and
//! finished here); each run goes in one transaction (cut short, nothing of it is stored, the next
//! push does it); the local copy is only read. Prints one line per run (pushed, already
//! there, or still running and not pushed) and a total; errors are one line, exit 2, and
//! name the store with its password redacted.

use super::runs::open_store;
use clap::Args;
use rtlab_lab::store::{Pushed, DEFAULT_DB};

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
    // every RUN named is checked before the store pushed into is opened
    for s in &a.runs {
        rtlab_lab::store::resolve(&from, s).map_err(super::lab_error)?;
    }
    let to = rtlab_lab::store::open(&a.to, "--to").map_err(super::lab_error)?;
    let (mut stored, mut already, mut running) = (0, 0, 0);
    let mut each = |pushed: &Pushed| match pushed {
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
    };
    rtlab_lab::store::push(&from, &to, &a.runs, &mut each).map_err(super::lab_error)?;
    println!(
        "{stored} pushed, {already} already there, {running} not pushed to {}; the local store {} is unchanged",
        to.label(),
        from.label()
    );
    Ok(0)
}
