//! Running a scenario: every case in order, each set up and torn down by an executor,
//! each stored as soon as it ends; progress with ETA; Ctrl-C keeps finished cases and marks
//! the run interrupted; a failed case is recorded with its error and the run goes on.
//!
//! Contract: the runner never loses a finished case (it is handed to the [`RunSink`] before
//! the next case starts) and never stops on a case's error. The executor owns everything a
//! case changes (load, profile, namespaces) and must have put it back when `run_case`
//! returns, whatever happened.

use crate::scenario::{CaseSpec, Scenario};
use rtlab_core::run::{CaseRecord, CaseStatus, RunInfo, RunStatus};
use rtlab_core::schema::ResultDocument;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What one case produced.
#[derive(Debug, Default)]
pub struct CaseResult {
    /// None = Ok.
    pub status: Option<CaseStatus>,
    pub document: Option<ResultDocument>,
    pub load_report: Option<serde_json::Value>,
    pub profile_report: Option<serde_json::Value>,
    pub spike_evidence: Option<serde_json::Value>,
}

impl CaseResult {
    pub fn failed(error: impl Into<String>) -> CaseResult {
        CaseResult {
            status: Some(CaseStatus::Failed { error: error.into() }),
            ..Default::default()
        }
    }
    pub fn skipped(reason: impl Into<String>) -> CaseResult {
        CaseResult {
            status: Some(CaseStatus::Skipped { reason: reason.into() }),
            ..Default::default()
        }
    }
}

/// Sets up, measures and tears down one case (model: hyperfine's executor, mockable).
pub trait CaseExecutor {
    fn run_case(&mut self, case: &CaseSpec, stop: &Arc<AtomicBool>) -> CaseResult;
}

/// Why the store could not take a run or a case.
pub type SinkError = Box<dyn std::error::Error + Send + Sync>;

/// Where runs and cases go (the SQLite store; a vector in tests).
pub trait RunSink {
    fn begin_run(&mut self, info: &RunInfo) -> Result<i64, SinkError>;
    fn add_case(&mut self, run: i64, case: &CaseRecord) -> Result<(), SinkError>;
    fn finish_run(&mut self, run: i64, status: RunStatus) -> Result<(), SinkError>;
    /// Make ready to try again after a failure (a PostgreSQL store opens a new connection).
    fn reconnect(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

/// What the runner does when the store cannot take a finished case (its disk full, its
/// server gone): it tries again `tries` times, `wait` apart (the case stays in memory; a
/// Ctrl-C stops the waiting), then writes the case as JSON into the first of `aside` that
/// takes it and stops the run saying which file. A measured case is never silently lost.
#[derive(Clone, Debug)]
pub struct Keeping {
    pub tries: u32,
    pub wait: std::time::Duration,
    pub aside: Vec<std::path::PathBuf>,
}

impl Default for Keeping {
    fn default() -> Keeping {
        Keeping { tries: 30, wait: std::time::Duration::from_secs(1), aside: Vec::new() }
    }
}

/// Progress of the whole run (called between and during cases, never from a probe thread).
pub trait RunProgress {
    fn case_started(&mut self, case: &CaseSpec, done_ns: i64, planned_ns: i64);
    fn case_finished(&mut self, case: &CaseRecord);
    /// The store could not take `case` (`error`); it is tried again for a while.
    fn store_waiting(&mut self, _case: &CaseRecord, _error: &str, _keeping: &Keeping) {}
}

/// Run every case of `scenario`; returns the run id and how it ended.
// its collaborators (each one a test replaces) and the run's controls, named one by one
#[allow(clippy::too_many_arguments)]
pub fn run_scenario(
    scenario: &Scenario,
    info: &RunInfo,
    exec: &mut dyn CaseExecutor,
    sink: &mut dyn RunSink,
    progress: &mut dyn RunProgress,
    stop: &Arc<AtomicBool>,
    resume: Option<i64>,
    keeping: &Keeping,
) -> Result<(i64, RunStatus), SinkError> {
    // a resumed run goes on under its own id (the caller reopened it)
    let run = match resume {
        Some(id) => id,
        None => sink.begin_run(info)?,
    };
    let planned = scenario.planned_ns();
    let mut done_ns = 0;
    let mut status = RunStatus::Complete;
    for case in scenario.cases() {
        if stop.load(Ordering::Relaxed) {
            status = RunStatus::Interrupted;
            break;
        }
        progress.case_started(case, done_ns, planned);
        let started_at =
            humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        let t0 = std::time::Instant::now();
        let r = exec.run_case(case, stop);
        let interrupted =
            stop.load(Ordering::Relaxed) || r.document.as_ref().is_some_and(|d| d.interrupted);
        let case_status = match r.status {
            Some(s) => s,
            None if interrupted => CaseStatus::Interrupted,
            None => CaseStatus::Ok,
        };
        let mut record = CaseRecord {
            index: case.index,
            name: case.name.clone(),
            probe: case.probe.clone(),
            load: case.load.clone(),
            profile: case.profile.clone(),
            params: case.params.clone(),
            repetition: case.repetition,
            status: case_status,
            document: r.document,
            load_report: r.load_report,
            profile_report: r.profile_report,
            spike_evidence: r.spike_evidence,
            published: case.published.clone(),
            started_at,
            duration_ns: t0.elapsed().as_nanos() as i64,
        };
        if let Err(e) = store_case(sink, run, &mut record, keeping, stop, progress) {
            // the run stops here; its store may take the end of it still
            let _ = sink.finish_run(run, RunStatus::Interrupted);
            return Err(e);
        }
        progress.case_finished(&record);
        done_ns += case.planned_ns();
        if interrupted {
            status = RunStatus::Interrupted;
            break;
        }
    }
    sink.finish_run(run, status)?;
    Ok((run, status))
}

/// Say in `record`'s document that the store made it wait (replacing what an earlier try
/// said): the first error, how long since it, which try this is.
fn note_waited(record: &mut CaseRecord, first: &str, since: std::time::Instant, tries: u32) {
    if let Some(d) = record.document.as_mut() {
        let w = rtlab_core::warnings::Warn::StoreWaited {
            error: first.to_string(),
            waited_ms: since.elapsed().as_millis() as i64,
            tries,
        };
        d.warnings.retain(|x| x.code != w.code());
        d.warnings.push(w.to_warning());
    }
}

/// Store `record`, as [`Keeping`] says; a record the store made wait says so in its
/// document (`store-waited`).
fn store_case(
    sink: &mut dyn RunSink,
    run: i64,
    record: &mut CaseRecord,
    keeping: &Keeping,
    stop: &Arc<AtomicBool>,
    progress: &mut dyn RunProgress,
) -> Result<(), SinkError> {
    let mut last = match sink.add_case(run, record) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    progress.store_waiting(record, &last.to_string(), keeping);
    let (first, since) = (last.to_string(), std::time::Instant::now());
    let mut tries = 1;
    while tries < keeping.tries && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(keeping.wait);
        tries += 1;
        if let Err(e) = sink.reconnect() {
            last = e;
            continue;
        }
        note_waited(record, &first, since, tries);
        match sink.add_case(run, record) {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
    }
    // not stored: the file kept aside is its account, not a try that never succeeded
    if let Some(d) = record.document.as_mut() {
        d.warnings.retain(|x| x.code != "store-waited");
    }
    let name = format!("rtlab-run{run}-case{}.json", record.index);
    let text = serde_json::to_string(record).map_err(|e| e.to_string())?;
    let mut refused = Vec::new();
    for dir in &keeping.aside {
        let path = dir.join(&name);
        let tmp = dir.join(format!(".{name}.tmp"));
        let written = std::fs::write(&tmp, &text).and_then(|()| std::fs::rename(&tmp, &path));
        match written {
            Ok(()) => {
                return Err(format!(
                    "case '{}' could not be stored after {tries} tries ({last}); it is kept in {} (its case record as JSON); the run stops here",
                    record.name,
                    path.display()
                )
                .into())
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                refused.push(format!("{}: {e}", dir.display()));
            }
        }
    }
    Err(format!(
        "case '{}' could not be stored after {tries} tries ({last}), nor kept in a file ({}): it is lost",
        record.name,
        if refused.is_empty() { "no directory to keep it in".to_string() } else { refused.join("; ") }
    )
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCENARIO: &str = r#"
name = "mini"
duration = "1s"
loads = ["idle", "cpu"]
[[probe]]
kind = "timer"
interval = ["1ms", "2ms"]
"#;

    /// Fails one named case, raises the stop flag during another, records what it saw.
    struct MockExec {
        fail: &'static str,
        stop_at: Option<&'static str>,
        seen: Vec<String>,
    }
    impl CaseExecutor for MockExec {
        fn run_case(&mut self, case: &CaseSpec, stop: &Arc<AtomicBool>) -> CaseResult {
            self.seen.push(case.name.clone());
            if case.name == self.fail {
                return CaseResult::failed("stress-ng: not found (Debian package stress-ng)");
            }
            if Some(case.name.as_str()) == self.stop_at {
                stop.store(true, Ordering::Relaxed);
            }
            CaseResult::default()
        }
    }

    /// Every case measured: a real document (a timer's).
    struct DocExec;
    impl CaseExecutor for DocExec {
        fn run_case(&mut self, _: &CaseSpec, _: &Arc<AtomicBool>) -> CaseResult {
            let d = serde_json::from_str(include_str!(
                "../../rtlab-report/tests/data/timer-idle-fifo-1ms.json"
            ))
            .unwrap();
            CaseResult { document: Some(d), ..Default::default() }
        }
    }

    #[derive(Default)]
    struct MemSink {
        cases: Vec<CaseRecord>,
        status: Option<RunStatus>,
    }
    impl RunSink for MemSink {
        fn begin_run(&mut self, _: &RunInfo) -> Result<i64, SinkError> {
            Ok(7)
        }
        fn add_case(&mut self, run: i64, c: &CaseRecord) -> Result<(), SinkError> {
            assert_eq!(run, 7);
            self.cases.push(c.clone());
            Ok(())
        }
        fn finish_run(&mut self, _: i64, s: RunStatus) -> Result<(), SinkError> {
            self.status = Some(s);
            Ok(())
        }
    }
    struct NoProgress;
    impl RunProgress for NoProgress {
        fn case_started(&mut self, _: &CaseSpec, _: i64, _: i64) {}
        fn case_finished(&mut self, _: &CaseRecord) {}
    }

    fn info() -> RunInfo {
        RunInfo {
            scenario: "mini".into(),
            source: "test".into(),
            scenario_text: SCENARIO.into(),
            scale: 1.0,
            command_line: vec![],
            started_at: String::new(),
            tool_version: String::new(),
            environment: Default::default(),
        }
    }

    #[test]
    fn a_failed_case_is_recorded_and_the_run_goes_on() {
        let s = Scenario::parse("mini.toml", SCENARIO, 1.0).unwrap();
        let mut exec =
            MockExec { fail: "timer/cpu/no-rt/interval=1ms", stop_at: None, seen: vec![] };
        let mut sink = MemSink::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (id, status) = run_scenario(
            &s,
            &info(),
            &mut exec,
            &mut sink,
            &mut NoProgress,
            &stop,
            None,
            &Keeping::default(),
        )
        .unwrap();
        assert_eq!((id, status), (7, RunStatus::Complete));
        assert_eq!(sink.cases.len(), 4);
        assert_eq!(exec.seen.len(), 4);
        let failed: Vec<_> = sink
            .cases
            .iter()
            .filter(|c| matches!(c.status, CaseStatus::Failed { .. }))
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(failed, ["timer/cpu/no-rt/interval=1ms"]);
        assert_eq!(sink.status, Some(RunStatus::Complete));
    }

    /// A store that refuses the first `refuse` cases it is given, then takes them.
    struct FlakySink {
        refuse: u32,
        inner: MemSink,
        reconnects: u32,
    }
    impl RunSink for FlakySink {
        fn begin_run(&mut self, i: &RunInfo) -> Result<i64, SinkError> {
            self.inner.begin_run(i)
        }
        fn add_case(&mut self, run: i64, c: &CaseRecord) -> Result<(), SinkError> {
            if self.refuse > 0 {
                self.refuse -= 1;
                return Err("database or disk is full".into());
            }
            self.inner.add_case(run, c)
        }
        fn finish_run(&mut self, run: i64, s: RunStatus) -> Result<(), SinkError> {
            self.inner.finish_run(run, s)
        }
        fn reconnect(&mut self) -> Result<(), SinkError> {
            self.reconnects += 1;
            Ok(())
        }
    }

    fn quick(tries: u32, aside: Vec<std::path::PathBuf>) -> Keeping {
        Keeping { tries, wait: std::time::Duration::from_millis(1), aside }
    }

    #[test]
    fn a_case_the_store_refuses_is_tried_again_then_kept_in_a_file_never_lost() {
        let s = Scenario::parse("mini.toml", SCENARIO, 1.0).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        // the store takes it back after 3 refusals: every case stored, the run complete
        let mut exec = MockExec { fail: "", stop_at: None, seen: vec![] };
        let mut sink = FlakySink { refuse: 3, inner: MemSink::default(), reconnects: 0 };
        let (_, status) = run_scenario(
            &s,
            &info(),
            &mut exec,
            &mut sink,
            &mut NoProgress,
            &stop,
            None,
            &quick(5, vec![]),
        )
        .unwrap();
        assert_eq!((status, sink.inner.cases.len(), sink.reconnects), (RunStatus::Complete, 4, 3));
        // a case with a document says it waited, and on which try it was written
        let mut sink = FlakySink { refuse: 2, inner: MemSink::default(), reconnects: 0 };
        run_scenario(
            &s,
            &info(),
            &mut DocExec,
            &mut sink,
            &mut NoProgress,
            &stop,
            None,
            &quick(5, vec![]),
        )
        .unwrap();
        let said = |c: &CaseRecord| -> Vec<String> {
            let d = c.document.as_ref().unwrap();
            d.warnings
                .iter()
                .filter(|w| w.code == "store-waited")
                .map(|w| w.message.clone())
                .collect()
        };
        let first = said(&sink.inner.cases[0]);
        assert_eq!(first.len(), 1, "{first:?}");
        assert!(first[0].contains("(database or disk is full)") && first[0].contains("on try 3"));
        assert!(said(&sink.inner.cases[1]).is_empty(), "the store took the next one at once");
        // it never does: the case goes to the first directory that takes it, the run stops
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("no-such-dir");
        let mut exec = MockExec { fail: "", stop_at: None, seen: vec![] };
        let mut sink = FlakySink { refuse: u32::MAX, inner: MemSink::default(), reconnects: 0 };
        let keeping = quick(4, vec![gone.clone(), dir.path().to_path_buf()]);
        let e =
            run_scenario(&s, &info(), &mut exec, &mut sink, &mut NoProgress, &stop, None, &keeping)
                .unwrap_err()
                .to_string();
        let file = dir.path().join("rtlab-run7-case0.json");
        assert!(e.contains("after 4 tries (database or disk is full)"), "{e}");
        assert!(e.contains(&file.display().to_string()) && e.contains("the run stops here"), "{e}");
        let kept: CaseRecord =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(kept.name, exec.seen[0], "the measured case, whole");
        assert_eq!(exec.seen.len(), 1, "nothing more is measured");
        assert_eq!(sink.inner.status, Some(RunStatus::Interrupted));
        // and with nowhere to keep it, the error says it is lost and why
        let mut sink = FlakySink { refuse: u32::MAX, inner: MemSink::default(), reconnects: 0 };
        let mut exec = MockExec { fail: "", stop_at: None, seen: vec![] };
        let e = run_scenario(
            &s,
            &info(),
            &mut exec,
            &mut sink,
            &mut NoProgress,
            &stop,
            None,
            &quick(2, vec![gone]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("it is lost") && e.contains("no-such-dir"), "{e}");
    }

    #[test]
    fn ctrl_c_keeps_finished_cases_and_marks_the_run_interrupted() {
        let s = Scenario::parse("mini.toml", SCENARIO, 1.0).unwrap();
        let mut exec =
            MockExec { fail: "", stop_at: Some("timer/cpu/no-rt/interval=1ms"), seen: vec![] };
        let mut sink = MemSink::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (_, status) = run_scenario(
            &s,
            &info(),
            &mut exec,
            &mut sink,
            &mut NoProgress,
            &stop,
            None,
            &Keeping::default(),
        )
        .unwrap();
        assert_eq!(status, RunStatus::Interrupted);
        assert_eq!(sink.cases.len(), 2, "the finished case and the interrupted one are kept");
        assert_eq!(sink.cases[0].status, CaseStatus::Ok);
        assert_eq!(sink.cases[1].status, CaseStatus::Interrupted);
        assert_eq!(exec.seen.len(), 2, "nothing runs after the stop");
        assert_eq!(sink.status, Some(RunStatus::Interrupted));
    }
}
