//! Where `rtlab run` keeps its runs: the SQLite store, each case committed as it ends so
//! that a Ctrl-C or a crash keeps every finished case; and the HTML report of a stored run.

use crate::error::LabError;
use crate::runner::RunSink;
use rtlab_core::run::{CaseRecord, RunInfo, RunStatus};
use rtlab_store::Store;
use std::path::Path;

/// The store a command uses when none is named (`--db`, `RTLAB_DB`).
pub use rtlab_store::DEFAULT_DB;

impl RunSink for Store {
    fn begin_run(&mut self, info: &RunInfo) -> Result<i64, crate::runner::SinkError> {
        Ok(Store::begin_run(self, info)?)
    }
    fn add_case(&mut self, run: i64, case: &CaseRecord) -> Result<(), crate::runner::SinkError> {
        Ok(Store::add_case(self, run, case)?)
    }
    fn finish_run(&mut self, run: i64, status: RunStatus) -> Result<(), crate::runner::SinkError> {
        Ok(Store::finish_run(self, run, status)?)
    }
    fn reconnect(&mut self) -> Result<(), crate::runner::SinkError> {
        Ok(Store::reconnect(self)?)
    }
}

/// The local directory of the store `db` (traces and reports are kept there): the file's
/// directory, or `results` for a PostgreSQL store.
pub fn local_dir(db: &str) -> std::path::PathBuf {
    if rtlab_store::url::is_postgres(db) {
        return "results".into();
    }
    Path::new(db).parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).into()
}

/// Open (creating if needed) the store at `db` (a file or a PostgreSQL URL).
pub fn open(db: &str) -> Result<Store, LabError> {
    if rtlab_store::url::is_postgres(db) {
        return Store::open(db).map_err(|e| LabError::Failed(format!("--db {e}")));
    }
    if let Some(dir) = Path::new(db).parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            LabError::Failed(format!("--db {db}: cannot create '{}': {e}", dir.display()))
        })?;
    }
    Store::open(db).map_err(|e| LabError::Failed(format!("--db {db}: {e}")))
}

/// Render run `id` from the store to HTML (`html`, default `run-<ID>.html` beside the store).
pub fn render_report(
    store: &Store,
    db: &str,
    id: i64,
    html: Option<&str>,
) -> Result<String, LabError> {
    let path = match html {
        Some(p) => p.to_string(),
        None => {
            let dir = local_dir(db);
            std::fs::create_dir_all(&dir)
                .map_err(|e| LabError::Failed(format!("report {}: {e}", dir.display())))?;
            dir.join(format!("run-{id}.html")).display().to_string()
        }
    };
    let run = store.load_run(id).map_err(|e| LabError::Failed(format!("run {id}: {e}")))?;
    crate::document::write_text(&rtlab_report::render_html(&[run]), &path)
        .map_err(|e| LabError::Failed(format!("report {path}: {e}")))?;
    Ok(path)
}
