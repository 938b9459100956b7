//! A scenario session, `rtlab run`'s whole life after its flags: the plan (a preset, a file,
//! or a stored run to resume), then the machine's lock, a dead rtlab's journal put back, the
//! store, every case run and stored, the gates judged over the whole run and stored, its HTML
//! report and its JUnit file.
//!
//! Contract: nothing here prints; what happens is said through the caller's `say` and
//! [`RunProgress`], and the binary renders the ended session. An error names the flag it
//! comes from (`--db`, `--resume`, `--gate`, `--only`, `--far`).

use crate::error::LabError;
use crate::executor::LiveExecutor;
use crate::runner::{run_scenario, Keeping, RunProgress};
use crate::scenario::{preset, Scenario, PRESETS};
use rtlab_core::gate::{Gate, GateVerdict};
use rtlab_core::run::{Run, RunInfo, RunStatus};
use rtlab_store::Store;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The text of a preset or a scenario file, and its origin for errors.
pub fn scenario_text(name: &str) -> Result<(String, String), LabError> {
    if let Some(text) = preset(name) {
        return Ok((format!("preset {name}"), text.to_string()));
    }
    let path = Path::new(name);
    if !path.exists() {
        let names: Vec<_> = PRESETS.iter().map(|(n, _)| *n).collect();
        return Err(LabError::Failed(format!(
            "'{name}' is neither a preset ({}) nor a scenario file",
            names.join(", ")
        )));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| LabError::Failed(format!("reading scenario {name}: {e}")))?;
    Ok((name.to_string(), text))
}

/// A scenario by name (a preset, else a file), with `far` over the file's own far side.
pub fn load_scenario(
    name: &str,
    scale: f64,
    far: Option<&crate::far::FarSpec>,
) -> Result<Scenario, LabError> {
    let (origin, text) = scenario_text(name)?;
    Scenario::parse_with_far(&origin, &text, scale, far).map_err(LabError::failed)
}

/// The run to make: its scenario, where it came from, its scale, the stored run it resumes.
pub struct Plan {
    pub scenario: Scenario,
    /// `preset` or the scenario file's path.
    pub source: String,
    pub scale: f64,
    /// The stored run this session continues.
    pub resume: Option<i64>,
    /// The store, open already when resuming.
    store: Option<Store>,
    /// The names of every case the run is to hold (a resumed run's stored ones too).
    pub planned: Vec<String>,
}

impl Plan {
    /// The preset or file `name` at `scale` with `far` (`--far`'s text) over its far side;
    /// or, with `resume`, the stored run's own scenario and scale, without its stored cases.
    pub fn new(
        name: &str,
        scale: f64,
        far: Option<&str>,
        resume: Option<i64>,
        db: &str,
    ) -> Result<Plan, LabError> {
        let Some(id) = resume else {
            let far = far
                .map(crate::far::FarSpec::parse)
                .transpose()
                .map_err(|e| LabError::Failed(format!("--far {e}")))?;
            let s = load_scenario(name, scale, far.as_ref())?;
            let source = if preset(name).is_some() { "preset".into() } else { name.to_string() };
            let planned = s.cases().iter().map(|c| c.name.clone()).collect();
            return Ok(Plan { scenario: s, source, scale, resume: None, store: None, planned });
        };
        if !rtlab_store::url::is_postgres(db) && !Path::new(db).is_file() {
            return Err(LabError::Failed(format!(
                "--db {db}: no store there, so no run {id} to resume"
            )));
        }
        let st = crate::store_sink::open(db)?;
        let rp =
            st.resume_point(id).map_err(|e| LabError::Failed(format!("--resume {id}: {e}")))?;
        let origin = format!("run {id} ({})", rp.source);
        let mut s =
            Scenario::parse(&origin, &rp.scenario_text, rp.scale).map_err(LabError::failed)?;
        let planned = s.cases().iter().map(|c| c.name.clone()).collect();
        let done: std::collections::BTreeSet<u32> =
            s.cases().iter().filter(|c| rp.is_done(&c.name)).map(|c| c.index).collect();
        s.skip_indices(&done);
        Ok(Plan {
            scenario: s,
            source: rp.source.clone(),
            scale: rp.scale,
            resume: Some(id),
            store: Some(st),
            planned,
        })
    }

    /// Only the cases whose name contains `pattern` (or matches it, with `*`).
    pub fn only(&mut self, pattern: &str) -> Result<(), LabError> {
        self.scenario.retain_matching(pattern);
        if self.scenario.cases().is_empty() {
            return Err(LabError::Failed(format!(
                "--only {pattern}: no case of {} matches",
                self.scenario.name
            )));
        }
        self.planned = self.scenario.cases().iter().map(|c| c.name.clone()).collect();
        Ok(())
    }

    /// The scenario's gates and `--gate`'s; a `--gate` that is malformed or matches no case
    /// to be run is an error before anything is measured.
    pub fn gates(&self, flags: &[String]) -> Result<Vec<Gate>, LabError> {
        let mut gates = self.scenario.gates.clone();
        for f in flags {
            let g = Gate::parse_flag(f).map_err(LabError::Failed)?;
            if !self.planned.iter().any(|c| g.matches_case(c)) {
                let some: Vec<&str> = self.planned.iter().take(3).map(String::as_str).collect();
                let more = if self.planned.len() > 3 { ", ..." } else { "" };
                return Err(LabError::Failed(format!(
                    "--gate {f}: '{}' matches no case of {} to run (a whole name, or a glob with *; cases: {}{more})",
                    g.case,
                    self.scenario.name,
                    some.join(", ")
                )));
            }
            gates.push(g);
        }
        Ok(gates)
    }
}

/// Where a session keeps what it makes, and how it waits.
pub struct Options<'a> {
    /// The store: a SQLite file or a PostgreSQL URL.
    pub db: &'a str,
    /// The HTML report's path (default: beside the store, `run-<ID>.html`).
    pub html: Option<&'a str>,
    /// Wait for another rtlab measuring instead of refusing at once.
    pub wait: bool,
    /// How much longer than its plan a case may run (default: the executor's).
    pub overrun: Option<std::time::Duration>,
    /// The command line, as the store keeps it (passwords redacted: [`redact_args`]).
    pub command_line: Vec<String>,
}

/// The command line with every password of a store URL in it redacted, as a run keeps it.
pub fn redact_args(args: impl IntoIterator<Item = String>) -> Vec<String> {
    rtlab_store::url::redact_args(args)
}

/// A store URL or path with its password redacted, to be said.
pub fn redact(db: &str) -> String {
    rtlab_store::url::redact(db)
}

/// A session that holds the machine and its store, ready to run its plan.
pub struct Session<'a> {
    plan: Plan,
    opts: Options<'a>,
    store: Store,
    _lock: Option<rtlab_host::lock::MachineLock>,
}

/// Take the machine (waiting with `wait`, `waiting` told once what it waits for), put a
/// dead rtlab's journal back (`say` told what and how much), open the store and, when
/// resuming, reopen the stored run.
pub fn open<'a>(
    plan: Plan,
    opts: Options<'a>,
    waiting: impl FnOnce(&str),
    say: &mut dyn FnMut(&str),
) -> Result<Session<'a>, LabError> {
    let holder = format!("rtlab run {}", plan.scenario.name);
    let lock = crate::guard::lock(&holder, opts.wait, waiting)?;
    crate::guard::restore_dead_journal(say)?;
    let mut plan = plan;
    let mut store = match plan.store.take() {
        Some(s) => s,
        None => crate::store_sink::open(opts.db)?,
    };
    if let Some(id) = plan.resume {
        store
            .reopen_run(id, &opts.command_line)
            .map_err(|e| LabError::Failed(format!("--resume {id}: {e}")))?;
    }
    Ok(Session { plan, opts, store, _lock: lock })
}

/// A session that has ended: its run as stored, with its gates judged.
pub struct Ended {
    pub run_id: i64,
    pub status: RunStatus,
    /// The run as stored (a resumed run's earlier cases too).
    pub run: Run,
    pub verdicts: Vec<GateVerdict>,
    /// The HTML report's path.
    pub report: String,
    store: Store,
    db: String,
}

impl Session<'_> {
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Run every case (each stored as it ends; a Ctrl-C through `stop` keeps what finished),
    /// then judge `gates` over the stored run, store the verdicts and write the report.
    pub fn run(
        mut self,
        gates: &[Gate],
        progress: &mut dyn RunProgress,
        stop: &Arc<AtomicBool>,
    ) -> Result<Ended, LabError> {
        let db = self.opts.db;
        let scenario = &self.plan.scenario;
        let info = RunInfo {
            scenario: scenario.name.clone(),
            source: self.plan.source.clone(),
            scenario_text: scenario.text.clone(),
            scale: self.plan.scale,
            command_line: self.opts.command_line.clone(),
            started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            environment: rtlab_sys::env::detect(Path::new("/")),
        };
        // traces around spikes are kept next to the store
        let trace_dir = crate::store_sink::local_dir(db);
        let mut exec = LiveExecutor::new(trace_dir.clone());
        exec.overrun = self.opts.overrun;
        // a case the store cannot take is kept in memory, tried again, then kept in a file:
        // next to the store, else in the temporary directory, else here
        let keeping = Keeping {
            aside: vec![trace_dir, std::env::temp_dir(), ".".into()],
            ..Keeping::default()
        };
        let (run_id, status) = run_scenario(
            scenario,
            &info,
            &mut exec,
            &mut self.store,
            progress,
            stop,
            self.plan.resume,
            &keeping,
        )
        .map_err(|e| LabError::Failed(format!("--db {}: {e}", redact(db))))?;
        // the gates are judged over every case of the run (a resumed run's earlier ones too)
        let db_error = |e: rtlab_store::StoreError| LabError::Failed(format!("--db {db}: {e}"));
        let stored = self.store.load_run(run_id).map_err(db_error)?;
        let verdicts = rtlab_core::judging::evaluate(gates, &stored.cases, &self.plan.planned);
        self.store.save_gate_verdicts(run_id, &verdicts).map_err(db_error)?;
        let report = crate::store_sink::render_report(&self.store, db, run_id, self.opts.html)?;
        Ok(Ended {
            run_id,
            status,
            run: stored,
            verdicts,
            report,
            store: self.store,
            db: db.to_string(),
        })
    }
}

impl Ended {
    /// Write the run, its gate verdicts with it, as JUnit XML to `path` (a testcase per case
    /// and gate).
    pub fn write_junit(&self, path: &str) -> Result<(), LabError> {
        let run = self
            .store
            .load_run(self.run_id)
            .map_err(|e| LabError::Failed(format!("--db {}: {e}", self.db)))?;
        crate::document::write_text(&rtlab_report::junit::junit(&run), path)
            .map_err(|e| LabError::Failed(format!("--junit {path}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(r: Result<impl Sized, LabError>) -> String {
        match r {
            Err(LabError::Failed(s)) => s,
            Err(e) => panic!("not a one-line failure: {e}"),
            Ok(_) => panic!("no error"),
        }
    }

    #[test]
    fn a_plan_names_what_is_wrong_before_anything_is_measured() {
        let db = "/nonexistent/rtlab.db";
        let e = failed(Plan::new("no-such-preset", 1.0, None, None, db));
        assert!(e.starts_with("'no-such-preset' is neither a preset (quick,"), "{e}");
        let e = failed(Plan::new("", 1.0, None, Some(7), db));
        assert_eq!(e, "--db /nonexistent/rtlab.db: no store there, so no run 7 to resume");
        let e = failed(Plan::new("quick", 1.0, Some("nowhere:x"), None, db));
        assert!(e.starts_with("--far "), "{e}");

        let mut p = Plan::new("quick", 0.01, None, None, db).unwrap();
        assert_eq!((p.source.as_str(), p.scale, p.resume), ("preset", 0.01, None));
        assert_eq!(p.planned.len(), p.scenario.cases().len());
        let e = failed(p.gates(&["nothing-like-it:*:max<=1ms".into()]));
        assert!(e.starts_with("--gate nothing-like-it:*:max<=1ms: 'nothing-like-it' matches no case of quick to run"), "{e}");
        assert!(p.gates(&["not a gate".into()]).is_err());
        let g = p.gates(&["timer/*:*:max<=1ms".into()]).unwrap();
        assert_eq!(g.len(), p.scenario.gates.len() + 1);
        let e = failed(p.only("nothing-like-it"));
        assert_eq!(e, "--only nothing-like-it: no case of quick matches");
        let mut p = Plan::new("quick", 0.01, None, None, db).unwrap();
        p.only("timer/").unwrap();
        assert!(!p.planned.is_empty() && p.planned.iter().all(|c| c.contains("timer/")));
        assert_eq!(p.planned.len(), p.scenario.cases().len());
    }

    #[test]
    fn a_stored_run_is_resumed_with_its_own_scenario_without_its_stored_cases() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db").display().to_string();
        let mut st = crate::store_sink::open(&db).unwrap();
        let s = load_scenario("quick", 0.01, None).unwrap();
        let info = RunInfo {
            scenario: s.name.clone(),
            source: "preset".into(),
            scenario_text: s.text.clone(),
            scale: 0.01,
            command_line: vec!["rtlab".into()],
            started_at: "2026-11-29T00:00:00Z".into(),
            tool_version: "0".into(),
            environment: Default::default(),
        };
        let id = st.begin_run(&info).unwrap();
        st.finish_run(id, RunStatus::Interrupted).unwrap();
        drop(st);
        let p = Plan::new("", 1.0, None, Some(id), &db).unwrap();
        assert_eq!((p.source.as_str(), p.scale, p.resume), ("preset", 0.01, Some(id)));
        assert_eq!(p.planned.len(), s.cases().len());
        let e = failed(Plan::new("", 1.0, None, Some(id + 1), &db));
        assert!(e.starts_with(&format!("--resume {}: ", id + 1)), "{e}");
    }
}
