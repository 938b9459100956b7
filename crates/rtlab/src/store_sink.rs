//! Where `rtlab run` keeps its runs. TEMPORARY until the SQLite store lands: each run is
//! one JSON document (rtlab_core::run::Run) beside the store path, rewritten after every
//! case so that nothing finished is lost.

use crate::runner::RunSink;
use rtlab_core::run::{CaseRecord, Run, RunInfo, RunStatus};
use std::path::{Path, PathBuf};

struct JsonRunSink {
    dir: PathBuf,
    run: Option<Run>,
}

pub fn open(db: &str) -> anyhow::Result<Box<dyn RunSink>> {
    let dir = Path::new(db).parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
    std::fs::create_dir_all(&dir).map_err(|e| anyhow::anyhow!("--db {db}: cannot create '{}': {e}", dir.display()))?;
    Ok(Box::new(JsonRunSink { dir, run: None }))
}

impl JsonRunSink {
    fn path(&self, id: i64) -> PathBuf {
        self.dir.join(format!("run-{id}.json"))
    }
    fn save(&self) -> anyhow::Result<()> {
        if let Some(r) = &self.run {
            let tmp = self.path(r.id).with_extension("json.tmp");
            std::fs::write(&tmp, serde_json::to_string_pretty(r)?)?;
            std::fs::rename(tmp, self.path(r.id))?;
        }
        Ok(())
    }
}

impl RunSink for JsonRunSink {
    fn begin_run(&mut self, info: &RunInfo) -> anyhow::Result<i64> {
        let mut id = 1;
        while self.path(id).exists() {
            id += 1;
        }
        self.run = Some(Run { id, info: info.clone(), status: RunStatus::Running, finished_at: None, cases: vec![] });
        self.save()?;
        Ok(id)
    }
    fn add_case(&mut self, _run: i64, case: &CaseRecord) -> anyhow::Result<()> {
        if let Some(r) = self.run.as_mut() {
            r.cases.push(case.clone());
        }
        self.save()
    }
    fn finish_run(&mut self, _run: i64, status: RunStatus) -> anyhow::Result<()> {
        if let Some(r) = self.run.as_mut() {
            r.status = status;
            r.finished_at = Some(humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string());
        }
        self.save()
    }
}

/// Until reports land: the run's JSON is the report.
pub fn render_report(db: &str, run: i64, _html: Option<&str>) -> anyhow::Result<String> {
    let dir = Path::new(db).parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    Ok(dir.join(format!("run-{run}.json")).display().to_string())
}
