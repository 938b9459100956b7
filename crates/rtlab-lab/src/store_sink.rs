//! Where `rtlab run` keeps its runs: the SQLite store, each case committed as it ends so
//! that a Ctrl-C or a crash keeps every finished case; and the HTML report of a stored run.

use crate::runner::RunSink;
use anyhow::Context;
use rtlab_core::run::{CaseRecord, RunInfo, RunStatus};
use rtlab_store::Store;
use std::path::Path;

impl RunSink for Store {
    fn begin_run(&mut self, info: &RunInfo) -> anyhow::Result<i64> {
        Ok(Store::begin_run(self, info)?)
    }
    fn add_case(&mut self, run: i64, case: &CaseRecord) -> anyhow::Result<()> {
        Ok(Store::add_case(self, run, case)?)
    }
    fn finish_run(&mut self, run: i64, status: RunStatus) -> anyhow::Result<()> {
        Ok(Store::finish_run(self, run, status)?)
    }
}

/// Open (creating if needed) the store at `db`.
pub fn open(db: &str) -> anyhow::Result<Store> {
    if let Some(dir) = Path::new(db).parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--db {db}: cannot create '{}'", dir.display()))?;
    }
    Store::open(db).map_err(|e| anyhow::anyhow!("--db {db}: {e}"))
}

/// Render run `id` from the store to HTML (`html`, default `run-<ID>.html` beside the store).
pub fn render_report(
    store: &Store,
    db: &str,
    id: i64,
    html: Option<&str>,
) -> anyhow::Result<String> {
    let path = match html {
        Some(p) => p.to_string(),
        None => {
            let dir = Path::new(db)
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            dir.join(format!("run-{id}.html")).display().to_string()
        }
    };
    let run = store.load_run(id)?;
    crate::document::write_text(&rtlab_report::render_html(&[run]), &path)
        .with_context(|| format!("report {path}"))?;
    Ok(path)
}
