//! The store against real result documents: exact round trip, crash safety, schema
//! versioning, raw samples, queryable statistics and the CSV/JSON export.

#[path = "../../rtlab-report/tests/fixture/mod.rs"]
mod fixture;

use rtlab_core::run::{Run, RunStatus};
use rtlab_store::export::{to_csv, to_json, CsvWhat};
use rtlab_store::{Store, StoreError};

fn stored(dir: &tempfile::TempDir, run: &Run) -> (Store, i64) {
    let mut s = Store::open(dir.path().join("results/rtlab.db")).unwrap();
    let id = s.begin_run(&run.info).unwrap();
    for c in &run.cases {
        s.add_case(id, c).unwrap();
    }
    s.finish_run(id, RunStatus::Complete).unwrap();
    (s, id)
}

#[test]
fn a_run_round_trips_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let run = fixture::run();
    let (s, id) = stored(&dir, &run);
    let back = s.load_run(id).unwrap();
    assert_eq!(back.info, run.info);
    assert_eq!(back.status, RunStatus::Complete);
    assert!(back.finished_at.is_some());
    assert_eq!(back.cases.len(), run.cases.len());
    for (a, b) in back.cases.iter().zip(&run.cases) {
        assert_eq!(a, b, "case {} differs after the round trip", b.name);
    }
    assert_eq!(s.latest_run().unwrap(), id);
    let list = s.runs().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!((list[0].cases, list[0].failed), (9, 1));
    assert_eq!(list[0].hostname, run.info.environment.hostname);
}

#[test]
fn finished_cases_survive_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let run = fixture::run();
    let path = dir.path().join("r.db");
    {
        let mut s = Store::open(&path).unwrap();
        let id = s.begin_run(&run.info).unwrap();
        s.add_case(id, &run.cases[0]).unwrap();
        s.add_case(id, &run.cases[1]).unwrap();
        // dropped without finish_run: as after a crash
    }
    let s = Store::open_existing(&path).unwrap();
    let back = s.load_run(s.latest_run().unwrap()).unwrap();
    assert_eq!(back.status, RunStatus::Running);
    assert_eq!(back.cases, run.cases[..2].to_vec());
}

#[test]
fn a_store_from_a_newer_schema_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("CREATE TABLE future (x); PRAGMA user_version = 99;").unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    match Store::open(&path) {
        Err(e @ StoreError::NewerSchema { found: 99, .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("new.db") && msg.contains("99") && !msg.contains('\n'), "{msg}");
        }
        other => panic!("expected NewerSchema, got {:?}", other.map(|_| ())),
    }
    assert_eq!(std::fs::read(&path).unwrap(), before, "the file was changed");
}

#[test]
fn bad_files_and_ids_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, "this is not a database, it is a text file of some length........")
        .unwrap();
    let e = Store::open(&junk).err().expect("junk refused").to_string();
    assert!(e.contains("junk.db"), "{e}");
    assert!(matches!(
        Store::open_existing(dir.path().join("none.db")),
        Err(StoreError::Missing { .. })
    ));
    let (mut s, id) = stored(&dir, &fixture::run());
    assert!(matches!(s.load_run(id + 41), Err(StoreError::UnknownRun { .. })));
    let dup = s.add_case(id, &fixture::run().cases[0]);
    assert!(matches!(dup, Err(StoreError::DuplicateCase { .. })), "{:?}", dup.err());
    let empty = Store::open(dir.path().join("empty.db")).unwrap();
    assert!(matches!(empty.latest_run(), Err(StoreError::Empty { .. })));
    assert_eq!(empty.file_schema_version().unwrap(), rtlab_store::schema_version());
}

#[test]
fn statistics_are_queryable_with_sql() {
    let dir = tempfile::tempdir().unwrap();
    let run = fixture::run();
    let (s, _) = stored(&dir, &run);
    drop(s);
    let c = rusqlite::Connection::open(dir.path().join("results/rtlab.db")).unwrap();
    let want = run.cases[4].document.as_ref().unwrap().streams[0].stats.p99_9_ns;
    let got: Option<i64> = c
        .query_row("SELECT s.p99_9_ns FROM statistics s JOIN cases c ON c.id = s.case_id WHERE c.load = 'cpu' AND c.profile = 'no-rt' AND s.stream = 'thread0'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(got, want);
    let buckets: i64 =
        c.query_row("SELECT COUNT(*) FROM histogram_buckets", [], |r| r.get(0)).unwrap();
    let want_buckets: usize = run
        .cases
        .iter()
        .filter_map(|c| c.document.as_ref())
        .flat_map(|d| &d.streams)
        .map(|s| s.histogram.buckets.len())
        .sum();
    assert_eq!(buckets as usize, want_buckets);
}

#[test]
fn raw_samples_are_imported_when_the_file_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = fixture::run();
    let mut d = fixture::doc("timer-raw.json");
    let raw = fixture::data_dir().join("timer-raw.csv");
    for s in d.streams.iter_mut().filter(|s| s.raw_file.is_some()) {
        s.raw_file = Some(raw.display().to_string());
    }
    run.cases.truncate(1);
    run.cases[0].document = Some(d);
    let (s, id) = stored(&dir, &run);
    let text = std::fs::read_to_string(&raw).unwrap();
    let want: Vec<(u64, i64, i64)> = text
        .lines()
        .skip(1)
        .filter(|l| l.starts_with("thread0,"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[1].parse().unwrap(), f[2].parse().unwrap(), f[3].parse().unwrap())
        })
        .collect();
    assert!(!want.is_empty());
    assert_eq!(s.raw_samples(id, &run.cases[0].name, "thread0").unwrap(), want);
    assert_eq!(s.load_run(id).unwrap().cases, run.cases);
}

#[test]
fn csv_export_has_every_case_and_stream() {
    let run = fixture::run();
    let csv = to_csv(std::slice::from_ref(&run), CsvWhat::Stats);
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    for col in [
        "run_id",
        "case",
        "status",
        "param_interval",
        "param_payload",
        "stream",
        "p99_9_ns",
        "missed",
        "lost",
    ] {
        assert!(head.contains(&col), "{col} missing from {head:?}");
    }
    let streams: usize =
        run.cases.iter().map(|c| c.document.as_ref().map_or(1, |d| d.streams.len())).sum();
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), streams);
    for r in &rows {
        assert_eq!(csv_fields(r), head.len(), "ragged row {r}");
    }
    assert!(rows.iter().any(|r| r.contains(",failed,synthetic failure")));
    let hist = to_csv(std::slice::from_ref(&run), CsvWhat::Histogram);
    let buckets: usize = run
        .cases
        .iter()
        .filter_map(|c| c.document.as_ref())
        .flat_map(|d| &d.streams)
        .map(|s| s.histogram.buckets.len())
        .sum();
    assert_eq!(hist.lines().count(), buckets + 1);
    let win = to_csv(std::slice::from_ref(&run), CsvWhat::Windows);
    let windows: usize = run
        .cases
        .iter()
        .filter_map(|c| c.document.as_ref())
        .flat_map(|d| &d.streams)
        .map(|s| s.windows.max_ns.len())
        .sum();
    assert_eq!(win.lines().count(), windows + 1);
    let back: Run = serde_json::from_str(&to_json(std::slice::from_ref(&run))).unwrap();
    assert_eq!(back, run);
}

/// Number of fields of a CSV line (RFC 4180 quotes).
fn csv_fields(line: &str) -> usize {
    let mut n = 1;
    let mut quoted = false;
    for ch in line.chars() {
        match ch {
            '"' => quoted = !quoted,
            ',' if !quoted => n += 1,
            _ => {}
        }
    }
    n
}

#[test]
fn evidence_round_trips_and_a_version_1_store_is_migrated() {
    use rtlab_core::evidence::{Evidence, KernelCounters, SpikeEvidence, WindowCounters};
    let dir = tempfile::tempdir().unwrap();
    let mut run = fixture::run();
    let doc = run.cases[0].document.as_mut().unwrap();
    let n = doc.streams[0].windows.max_ns.len();
    doc.streams[0].start_monotonic_ns = Some(123_456_789);
    doc.evidence = Some(Evidence {
        counters: Some(WindowCounters {
            width_ns: doc.streams[0].windows.width_ns,
            start_monotonic_ns: Some(123_456_789),
            resolution_ns: 125_000_000,
            windows: (0..n as u64)
                .map(|i| KernelCounters {
                    net_rx: vec![i, 2 * i],
                    timer: vec![1, 2],
                    interrupts: vec![3, 4],
                    ksoftirqd_ns: vec![5, 6],
                    context_switches: 7 + i,
                    steal_ticks: vec![0, 1],
                })
                .collect(),
            last_partial: true,
        }),
        spike: Some(SpikeEvidence {
            threshold_ns: 500_000,
            stream: Some("thread0".into()),
            index: Some(3),
            at_ns: Some(3_000_000),
            value_ns: Some(812_000),
            trace_file: Some("/tmp/x.trace".into()),
            attribution: vec!["preempted by pid 9".into()],
            timerlat: None,
            spikes: vec![rtlab_core::evidence::ExplainedSpike {
                stream: Some("thread0".into()),
                index: 3,
                at_ns: 3_000_000,
                value_ns: 812_000,
                trace_file: Some("/tmp/x.trace".into()),
                attribution: vec!["preempted by pid 9".into()],
            }],
        }),
        notes: vec!["no timerlat".into()],
    });
    let (s, id) = stored(&dir, &run);
    assert_eq!(s.load_run(id).unwrap().cases, run.cases, "evidence and stream starts round trip");
    // the windows CSV carries the counters beside the stream whose grid they follow
    let csv = to_csv(std::slice::from_ref(&run), CsvWhat::Windows);
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    assert_eq!(
        &head[head.len() - 6..],
        [
            "net_rx",
            "timer_softirqs",
            "interrupts",
            "ksoftirqd_ns",
            "context_switches",
            "steal_ticks"
        ]
    );
    let with: Vec<&str> =
        csv.lines().filter(|l| !l.ends_with(",,,,,,") && !l.starts_with("run_id")).collect();
    assert_eq!(with.len(), n, "one row per window of case 0's first stream");
    assert!(
        with[2].ends_with(",6,3,7,11,9,1"),
        "window 2: NET_RX 2+4, TIMER 1+2, IRQs 7, ksoftirqd 11, ctxsw 9, steal 1: {}",
        with[2]
    );
    assert!(csv.lines().all(|l| csv_fields(l) == head.len()), "no ragged row");
    // the counters are rows, one per window, queryable with SQL
    let path = dir.path().join("results/rtlab.db");
    drop(s);
    let c = rusqlite::Connection::open(&path).unwrap();
    let rows: i64 = c.query_row("SELECT COUNT(*) FROM window_counters", [], |r| r.get(0)).unwrap();
    assert_eq!(rows, n as i64);

    // the same store as a version-1 file (schema 1 had neither, nor the resumptions of
    // schema 3): reopened, it is migrated
    // and every case reads back, without evidence
    c.execute_batch("DROP TABLE case_costs; DROP INDEX cases_name; DROP TABLE gate_verdicts; DROP INDEX runs_uuid; DROP INDEX runs_host; ALTER TABLE runs DROP COLUMN uuid; ALTER TABLE runs DROP COLUMN hostname; ALTER TABLE runs DROP COLUMN machine_id; ALTER TABLE runs DROP COLUMN cpu_model; ALTER TABLE runs DROP COLUMN kernel_release; ALTER TABLE runs DROP COLUMN preemption_model; ALTER TABLE runs DROP COLUMN profiles; DROP TABLE far_sides; DROP TABLE run_resumptions; DROP INDEX environments_run; DROP INDEX cases_run_status; DROP TABLE evidence; DROP TABLE window_counters; ALTER TABLE statistics DROP COLUMN start_monotonic_ns; PRAGMA user_version = 1;").unwrap();
    drop(c);
    let s = Store::open(&path).unwrap();
    assert_eq!(s.file_schema_version().unwrap(), rtlab_store::schema_version());
    let back = s.load_run(id).unwrap();
    let mut want = run.cases.clone();
    want[0].document.as_mut().unwrap().evidence = None;
    want[0].document.as_mut().unwrap().streams[0].start_monotonic_ns = None;
    assert_eq!(back.cases, want);
}

#[test]
fn an_interrupted_run_is_resumed_under_the_same_id() {
    use rtlab_core::run::CaseStatus;
    use rtlab_store::StoredCaseStatus;
    let dir = tempfile::tempdir().unwrap();
    let run = fixture::run();
    let mut s = Store::open(dir.path().join("results/rtlab.db")).unwrap();
    let id = s.begin_run(&run.info).unwrap();
    // cases 0..=4 finished (ok), 7 failed, 8 skipped; case 5 was cut short by Ctrl-C
    for i in [0, 1, 2, 3, 4, 7, 8] {
        s.add_case(id, &run.cases[i]).unwrap();
    }
    let mut cut = run.cases[5].clone();
    cut.status = CaseStatus::Interrupted;
    s.add_case(id, &cut).unwrap();
    s.finish_run(id, RunStatus::Interrupted).unwrap();

    let p = s.resume_point(id).unwrap();
    assert_eq!(p.run_id, id);
    assert_eq!(p.scenario_text, run.info.scenario_text);
    assert_eq!((p.scale, p.source.as_str()), (run.info.scale, run.info.source.as_str()));
    assert_eq!(p.command_line, run.info.command_line);
    assert_eq!(p.status, RunStatus::Interrupted);
    let idx: Vec<u32> = p.done.iter().map(|c| c.index).collect();
    assert_eq!(idx, [0, 1, 2, 3, 4, 7, 8]);
    assert_eq!(p.done[5].status, StoredCaseStatus::Failed);
    assert_eq!(p.done[6].status, StoredCaseStatus::Skipped);
    assert_eq!(p.interrupted.len(), 1);
    assert_eq!((p.interrupted[0].index, &p.interrupted[0].name), (5, &run.cases[5].name));
    assert!(p.is_done(&run.cases[7].name) && !p.is_done(&run.cases[5].name));

    let cmd: Vec<String> = ["rtlab", "run", "fixture", "--resume", "1"].map(String::from).into();
    let after = s.reopen_run(id, &cmd).unwrap();
    assert_eq!(after.status, RunStatus::Running);
    assert!(after.interrupted.is_empty(), "the interrupted case is removed to be run again");
    assert_eq!(after.done, p.done);
    assert!(s.load_run(id).unwrap().finished_at.is_none());
    let r = s.resumptions(id).unwrap();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].previous_status, RunStatus::Interrupted);
    assert_eq!(r[0].command_line, cmd);
    assert_eq!(r[0].dropped_cases, [run.cases[5].name.clone()]);

    // the remaining cases go to the same run id; the run reads back in scenario order
    for i in [5, 6] {
        assert!(!after.is_done(&run.cases[i].name));
        s.add_case(id, &run.cases[i]).unwrap();
    }
    s.finish_run(id, RunStatus::Complete).unwrap();
    let back = s.load_run(id).unwrap();
    assert_eq!(back.status, RunStatus::Complete);
    assert_eq!(back.cases, run.cases, "a resumed run is the run");
    assert_eq!(s.runs().unwrap().len(), 1);
    // nothing of the dropped attempt is left behind
    let path = dir.path().join("results/rtlab.db");
    let c = rusqlite::Connection::open(&path).unwrap();
    let envs: i64 = c
        .query_row("SELECT COUNT(*) FROM environments WHERE case_id IS NOT NULL", [], |r| r.get(0))
        .unwrap();
    assert_eq!(envs as usize, run.cases.iter().filter(|c| c.document.is_some()).count());

    // a complete run has nothing to resume: refused, untouched
    match s.reopen_run(id, &cmd) {
        Err(StoreError::NotResumable { id: i, .. }) => assert_eq!(i, id),
        other => panic!("expected NotResumable, got {:?}", other.map(|p| p.status)),
    }
    assert_eq!(s.resumptions(id).unwrap().len(), 1);
    assert!(matches!(s.resume_point(99), Err(StoreError::UnknownRun { id: 99, .. })));
}

#[test]
fn a_far_side_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = fixture::run();
    let doc =
        run.cases.iter_mut().find_map(|c| c.document.as_mut()).expect("a case with a document");
    doc.far = Some(rtlab_core::schema::FarSide {
        link: "netns:rtlab-b".into(),
        host: "robot2".into(),
        version: "0.1.0".into(),
        near_address: "198.18.0.1".into(),
        far_address: "198.18.0.2".into(),
        clocks: "one-host".into(),
        notes: vec!["a note".into()],
        ..Default::default()
    });
    let (s, id) = stored(&dir, &run);
    assert_eq!(s.load_run(id).unwrap().cases, run.cases);
}

/// A real pub/sub document with its cost (role processes' windows merged in) round-trips
/// exactly, and its headline figures are columns a query reads.
#[test]
fn a_cost_round_trips_and_its_figures_are_columns() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = fixture::run();
    let doc = fixture::doc("pubsub-cost.json");
    let cost = doc.cost.clone().expect("the recorded document has its cost");
    run.cases[0].document = Some(doc);
    let (s, id) = stored(&dir, &run);
    assert_eq!(s.load_run(id).unwrap().cases, run.cases);
    let c = rusqlite::Connection::open(s.path()).unwrap();
    let row: (i64, i64, i64, Option<i64>, Option<i64>, i64) = c
        .query_row(
            "SELECT window_ns, cpu_user_ns + cpu_system_ns, minor_faults + major_faults, cpu_per_message_ns, max_rss_kib, involuntary_switches FROM case_costs",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
        )
        .unwrap();
    let (u, sys) = cost.cpu_ns();
    let m = cost.measuring_total();
    assert_eq!(row.0, cost.window_ns());
    assert_eq!(row.1, u + sys);
    assert_eq!(row.2 as u64, m.minor_faults + m.major_faults);
    assert_eq!(row.3, cost.cpu_per_message_ns());
    assert!(row.3.is_some(), "a pub/sub case has messages");
    assert_eq!(row.4, cost.max_rss_kib.map(|k| k as i64));
    assert_eq!(row.5 as u64, m.involuntary_switches);
    // the cases without a cost (the fixture's older timer documents) have no row
    let n: i64 = c.query_row("SELECT COUNT(*) FROM case_costs", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 1);
    // CSV: the case, its window, its three measuring threads, its groups, its two processes
    let csv = to_csv(&[s.load_run(id).unwrap()], CsvWhat::Cost);
    let kinds = |k: &str| csv.lines().filter(|l| l.contains(&format!(",,{k},"))).count();
    assert_eq!(kinds("case"), 1, "{csv}");
    assert_eq!(kinds("window"), 1, "{csv}");
    assert_eq!(kinds("measuring"), 3, "{csv}");
    assert_eq!(kinds("process"), 2, "{csv}");
    assert_eq!(kinds("group"), cost.windows[0].groups.len(), "{csv}");
}

#[test]
fn a_version_2_store_is_migrated_and_its_runs_can_be_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let run = fixture::run();
    let (s, id) = stored(&dir, &run);
    let path = s.path().to_path_buf();
    drop(s);
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute_batch("DROP TABLE case_costs; DROP INDEX cases_name; DROP TABLE gate_verdicts; DROP INDEX runs_uuid; DROP INDEX runs_host; ALTER TABLE runs DROP COLUMN uuid; ALTER TABLE runs DROP COLUMN hostname; ALTER TABLE runs DROP COLUMN machine_id; ALTER TABLE runs DROP COLUMN cpu_model; ALTER TABLE runs DROP COLUMN kernel_release; ALTER TABLE runs DROP COLUMN preemption_model; ALTER TABLE runs DROP COLUMN profiles; DROP TABLE far_sides; DROP TABLE run_resumptions; DROP INDEX environments_run; DROP INDEX cases_run_status; UPDATE runs SET status = 'running', finished_at = NULL; PRAGMA user_version = 2;").unwrap();
    drop(c);
    let mut s = Store::open(&path).unwrap();
    assert_eq!(s.file_schema_version().unwrap(), 8);
    assert_eq!(rtlab_store::schema_version(), 8);
    // schema 5 gave the old run a global identity and its host
    let host = s.run_host(id).unwrap();
    assert_eq!(host.uuid.len(), 36, "{host:?}");
    assert_eq!(host.hostname.as_deref(), Some(run.info.environment.hostname.as_str()));
    assert_eq!(host.kernel_release.as_deref(), Some(run.info.environment.kernel_release.as_str()));
    assert_eq!(host.machine_id, None, "unknown for a run stored before schema 5");
    assert!(host.profiles.is_some());
    assert_eq!(s.load_run(id).unwrap().cases, run.cases, "cases read back after migration");
    assert!(s.resumptions(id).unwrap().is_empty());
    let p = s.reopen_run(id, &["rtlab".to_string()]).unwrap();
    assert_eq!(p.done.len(), run.cases.len());
    assert_eq!(s.resumptions(id).unwrap()[0].previous_status, RunStatus::Running);
}

#[test]
fn listing_a_store_of_1000_runs() {
    use rtlab_core::run::{CaseRecord, CaseStatus};
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path().join("rtlab.db")).unwrap();
    let info = fixture::run().info;
    for i in 0..1000u32 {
        let id = s.begin_run(&info).unwrap();
        let status = if i % 3 == 0 {
            CaseStatus::Failed { error: "x".into() }
        } else {
            CaseStatus::Skipped { reason: "y".into() }
        };
        let c = CaseRecord {
            index: 0,
            name: format!("case{i}"),
            probe: "timer".into(),
            load: "idle".into(),
            profile: "no-rt".into(),
            params: Default::default(),
            repetition: 1,
            status,
            document: None,
            load_report: None,
            profile_report: None,
            spike_evidence: None,
            published: None,
            started_at: info.started_at.clone(),
            duration_ns: 0,
        };
        s.add_case(id, &c).unwrap();
        if i % 2 == 0 {
            s.finish_run(id, RunStatus::Complete).unwrap();
        }
    }
    let list = s.runs().unwrap();
    assert_eq!(list.len(), 1000);
    assert_eq!(list.iter().map(|r| r.cases).sum::<u32>(), 1000);
    assert_eq!(list.iter().map(|r| r.failed).sum::<u32>(), 334);
    assert_eq!(list.iter().filter(|r| r.status == RunStatus::Complete).count(), 500);
    assert!(list.windows(2).all(|w| w[0].id < w[1].id), "oldest first");
    assert!(list.iter().all(|r| r.hostname == info.environment.hostname));
    // the listing is one pass over `runs`, with indexed look-ups for counts and the machine
    let c = rusqlite::Connection::open(dir.path().join("rtlab.db")).unwrap();
    let plan: Vec<String> = c
        .prepare(&format!("EXPLAIN QUERY PLAN {}", rtlab_store::RUNS_QUERY))
        .unwrap()
        .query_map([], |r| r.get::<_, String>(3))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert!(
        plan.iter().filter(|l| l.starts_with("SCAN")).all(|l| l.starts_with("SCAN r")),
        "only the runs table is scanned: {plan:?}"
    );
}
