//! The store on a real PostgreSQL server (started by the test, see support/pg_server.rs):
//! the same API and the same round trip as on SQLite, push from SQLite (idempotent, by
//! uuid; many hosts at once), schema versions, and errors that never show the password.

#[path = "../../rtlab-report/tests/fixture/mod.rs"]
mod fixture;
#[path = "support/pg_server.rs"]
mod pg_server;

use pg_server::{PgServer, PASSWORD};
use rtlab_core::run::{Run, RunStatus};
use rtlab_store::{Pushed, Store, StoreError};

/// The fixture run with the raw samples of its first case imported from the fixture's file.
fn run_with_raw() -> Run {
    let mut run = fixture::run();
    let mut d = fixture::doc("timer-raw.json");
    let raw = fixture::data_dir().join("timer-raw.csv");
    for s in d.streams.iter_mut().filter(|s| s.raw_file.is_some()) {
        s.raw_file = Some(raw.display().to_string());
    }
    run.cases[0].document = Some(d);
    // a real pub/sub case with its cost (schema 8's case_costs) on both stores
    run.cases[1].document = Some(fixture::doc("pubsub-cost.json"));
    run
}

fn store_run(s: &mut Store, run: &Run) -> i64 {
    let id = s.begin_run(&run.info).unwrap();
    for c in &run.cases {
        s.add_case(id, c).unwrap();
    }
    s.finish_run(id, RunStatus::Complete).unwrap();
    id
}

#[test]
fn pg_a_run_round_trips_exactly_as_on_sqlite() {
    let Some(pg) = PgServer::start() else { return };
    let url = pg.database("roundtrip");
    let run = run_with_raw();
    let mut s = Store::open(&url).unwrap();
    assert!(s.is_postgres());
    assert_eq!(s.file_schema_version().unwrap(), rtlab_store::schema_version());
    assert!(!s.label().contains(PASSWORD), "{}", s.label());
    let id = store_run(&mut s, &run);
    let back = s.load_run(id).unwrap();
    assert_eq!(back.info, run.info);
    assert_eq!(back.status, RunStatus::Complete);
    assert_eq!(back.cases, run.cases);
    let raw = s.raw_samples(id, &run.cases[0].name, "thread0").unwrap();
    assert!(!raw.is_empty());
    let list = s.runs().unwrap();
    assert_eq!((list.len(), list[0].cases, list[0].failed), (1, 9, 1));
    let host = s.run_host(id).unwrap();
    assert_eq!(host.uuid.len(), 36);
    assert_eq!(host.hostname.as_deref(), Some(run.info.environment.hostname.as_str()));
    // the host is a column a query can filter on
    let n = pg.psql(
        "roundtrip",
        &format!(
            "SELECT COUNT(*) FROM runs WHERE hostname = '{}' AND kernel_release IS NOT NULL",
            run.info.environment.hostname
        ),
    );
    assert_eq!(n, "1");
    // the cost's figures are columns there too
    let cpm = pg.psql("roundtrip", "SELECT cpu_per_message_ns FROM case_costs");
    let want = run.cases[1].document.as_ref().unwrap().cost.as_ref().unwrap().cpu_per_message_ns();
    assert_eq!(cpm, want.unwrap().to_string());
    // a resumable run: interrupted, reopened, finished, on PostgreSQL too
    let id2 = s.begin_run(&run.info).unwrap();
    s.add_case(id2, &run.cases[1]).unwrap();
    s.finish_run(id2, RunStatus::Interrupted).unwrap();
    let p = s.reopen_run(id2, &["rtlab".into()]).unwrap();
    assert_eq!(p.done.len(), 1);
    assert_eq!(s.resumptions(id2).unwrap().len(), 1);
    // a run removed (rtlab monitor's retention): every row of it, its foreign keys kept
    s.delete_run(id2).unwrap();
    assert!(s.load_run(id2).is_err());
    assert_eq!(
        pg.psql("roundtrip", &format!("SELECT COUNT(*) FROM cases WHERE run_id = {id2}")),
        "0"
    );
    assert_eq!(
        pg.psql("roundtrip", &format!("SELECT COUNT(*) FROM run_resumptions WHERE run_id = {id2}")),
        "0"
    );
    // reopening: the second connection migrates nothing and reads the same
    drop(s);
    let s = Store::open_existing(&url).unwrap();
    assert_eq!(s.load_run(id).unwrap().cases, run.cases);
}

#[test]
fn pg_push_twice_is_stored_once_and_eight_hosts_at_once_store_every_case_once() {
    let Some(pg) = PgServer::start() else { return };
    let url = pg.database("fleet");
    let dir = tempfile::tempdir().unwrap();
    let run = run_with_raw();
    // 8 robots, each with its own SQLite store and two runs
    let mut locals = Vec::new();
    for i in 0..8 {
        let path = dir.path().join(format!("robot{i}.db"));
        let mut s = Store::open(&path).unwrap();
        store_run(&mut s, &run);
        store_run(&mut s, &run);
        locals.push(path);
    }
    // robot 0's first run was judged by a gate: its verdict travels with it
    let verdict = rtlab_core::gate::GateVerdict {
        gate: "*:thread0:max<=1ns".into(),
        origin: "--gate".into(),
        case: Some(run.cases[0].name.clone()),
        stream: Some("thread0".into()),
        metric: rtlab_core::gate::GateMetric::Max,
        limit: "1ns".into(),
        value: Some("12.3us".into()),
        outcome: rtlab_core::gate::Outcome::Broken,
        message: String::new(),
    };
    Store::open_existing(&locals[0])
        .unwrap()
        .save_gate_verdicts(1, std::slice::from_ref(&verdict))
        .unwrap();
    // robot 0 pushes its first run twice: stored once
    let local = Store::open_existing(&locals[0]).unwrap();
    let team = Store::open(&url).unwrap();
    let first = local.push_run(1, &team).unwrap();
    let Pushed::Stored { remote, cases, .. } = first else { panic!("{first:?}") };
    assert_eq!(cases, run.cases.len());
    assert!(
        matches!(local.push_run(1, &team).unwrap(), Pushed::Already { remote: r, .. } if r == remote)
    );
    assert_eq!(team.load_run(remote).unwrap().cases, run.cases, "pushed exactly");
    assert_eq!(team.load_run(remote).unwrap().gates, vec![verdict], "with its gate verdicts");
    assert_eq!(team.run_host(remote).unwrap(), local.run_host(1).unwrap(), "same uuid and host");
    assert_eq!(
        team.raw_samples(remote, &run.cases[0].name, "thread0").unwrap(),
        local.raw_samples(1, &run.cases[0].name, "thread0").unwrap()
    );
    drop((local, team));
    // then all 8 push all their runs at once, robot 0 its run 1 again
    std::thread::scope(|sc| {
        for path in &locals {
            let url = url.clone();
            sc.spawn(move || {
                let local = Store::open_existing(path).unwrap();
                let team = Store::open(&url).unwrap();
                for id in [1, 2] {
                    local.push_run(id, &team).unwrap();
                }
            });
        }
    });
    let team = Store::open_existing(&url).unwrap();
    let runs = team.runs().unwrap();
    assert_eq!(runs.len(), 16, "8 robots x 2 runs, each once");
    let total = pg.psql("fleet", "SELECT COUNT(*) FROM cases");
    assert_eq!(total, (16 * run.cases.len()).to_string());
    let dup = pg.psql(
        "fleet",
        "SELECT COUNT(*) FROM (SELECT uuid FROM runs GROUP BY uuid HAVING COUNT(*) > 1) d",
    );
    assert_eq!(dup, "0");
    // the local copies are untouched
    for path in &locals {
        assert_eq!(Store::open_existing(path).unwrap().runs().unwrap().len(), 2);
    }
}

#[test]
fn pg_a_run_pushed_interrupted_is_replaced_once_resumed_and_finished() {
    let Some(pg) = PgServer::start() else { return };
    let url = pg.database("resumed");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("robot.db");
    let run = run_with_raw();
    let mut local = Store::open(&path).unwrap();
    let id = local.begin_run(&run.info).unwrap();
    local.add_case(id, &run.cases[0]).unwrap();
    local.finish_run(id, RunStatus::Interrupted).unwrap();
    let team = Store::open(&url).unwrap();
    let Pushed::Stored { remote, cases: 1, .. } = local.push_run(id, &team).unwrap() else {
        panic!("the interrupted run is pushed as it is")
    };
    assert_eq!(team.load_run(remote).unwrap().status, RunStatus::Interrupted);
    // pushed again unchanged: already there
    assert!(matches!(local.push_run(id, &team).unwrap(), Pushed::Already { .. }));
    // resumed here: the rest of its cases, finished
    local.reopen_run(id, &["rtlab".into(), "run".into()]).unwrap();
    for c in &run.cases[1..] {
        local.add_case(id, c).unwrap();
    }
    local.finish_run(id, RunStatus::Complete).unwrap();
    // two pushes of it at once: one replaces, the other finds it done
    let results: Vec<Pushed> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let (path, url) = (&path, &url);
                sc.spawn(move || {
                    let local = Store::open_existing(path).unwrap();
                    let team = Store::open_existing(url).unwrap();
                    local.push_run(id, &team).unwrap()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let replaced = results
        .iter()
        .filter(|p| {
            matches!(p, Pushed::Replaced { remote: r, was: RunStatus::Interrupted, cases, .. }
                if *r == remote && *cases == run.cases.len())
        })
        .count();
    let already = results
        .iter()
        .filter(|p| matches!(p, Pushed::Already { remote: r, .. } if *r == remote))
        .count();
    assert_eq!((replaced, already), (1, 1), "{results:?}");
    let (here, there) = (local.load_run(id).unwrap(), team.load_run(remote).unwrap());
    assert_eq!(there.status, RunStatus::Complete);
    assert_eq!(there.finished_at, here.finished_at);
    assert_eq!(there.cases, here.cases, "the whole finished run, each case once");
    assert_eq!(team.resumptions(remote).unwrap(), local.resumptions(id).unwrap());
    assert_eq!(
        team.raw_samples(remote, &run.cases[0].name, "thread0").unwrap(),
        local.raw_samples(id, &run.cases[0].name, "thread0").unwrap()
    );
    assert_eq!(pg.psql("resumed", "SELECT COUNT(*) FROM runs"), "1");
    assert_eq!(
        pg.psql("resumed", "SELECT COUNT(*) FROM environments WHERE case_id IS NULL"),
        "1",
        "one run environment"
    );
    // a complete run is never replaced
    assert!(matches!(local.push_run(id, &team).unwrap(), Pushed::Already { .. }));
}

/// Nine runs of three hosts (the third's name is markup), kernel 6.1 then 6.6-rt, one a day.
fn fleet(s: &mut Store) {
    let base = fixture::run();
    for i in 0..9 {
        let mut run = base.clone();
        run.info.environment.hostname = ["a", "b", "c<script>"][i % 3].into();
        run.info.environment.kernel_release = if i < 6 { "6.1" } else { "6.6-rt" }.into();
        run.info.started_at = format!("2026-11-{:02}T00:00:00Z", 10 + i);
        store_run(s, &run);
    }
}

fn ids(pg: &rtlab_core::fleet::RunsPage) -> Vec<i64> {
    pg.runs.iter().map(|r| r.id).collect()
}

/// The dashboard's queries (a page of runs with filters, the hosts, the case names, a
/// trend, each case's newest value on a host) answer the same on SQLite and PostgreSQL, and
/// what the filters say.
#[test]
fn pg_the_dashboards_queries_answer_the_same_on_both_stores() {
    use rtlab_core::fleet::RunFilter;
    let Some(pg) = PgServer::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut lite = Store::open(dir.path().join("fleet.db")).unwrap();
    let mut team = Store::open(pg.database("dashboard")).unwrap();
    fleet(&mut lite);
    fleet(&mut team);
    let f = |host: &str, since: &str, until: &str| RunFilter {
        host: host.into(),
        since: since.into(),
        until: until.into(),
        ..Default::default()
    };
    let base = fixture::run();
    let measured: Vec<&rtlab_core::run::CaseRecord> =
        base.cases.iter().filter(|c| c.document.is_some()).collect();
    let case = measured[0];
    for s in [&lite, &team] {
        let all = s.runs_page(&RunFilter::default(), 0, 4).unwrap();
        assert_eq!(ids(&all), [9, 8, 7, 6]);
        assert_eq!((all.older.as_ref().map(|r| r.id), all.matching, all.total), (Some(5), 9, 9));
        assert_eq!(
            (all.runs[0].hostname.as_str(), all.runs[0].kernel_release.as_str()),
            ("c<script>", "6.6-rt")
        );
        assert_eq!(all.runs[0].cases as usize, base.cases.len());
        let next = s.runs_page(&RunFilter::default(), 8, 4).unwrap();
        assert_eq!((ids(&next), next.older), (vec![1], None));
        assert_eq!(ids(&s.runs_page(&f("a", "", ""), 0, 100).unwrap()), [7, 4, 1]);
        assert_eq!(ids(&s.runs_page(&f("c<script>", "", ""), 0, 100).unwrap()), [9, 6, 3]);
        assert_eq!(ids(&s.runs_page(&f("", "2026-11-15", ""), 0, 100).unwrap()), [9, 8, 7, 6]);
        assert_eq!(ids(&s.runs_page(&f("", "", "2026-11-12"), 0, 100).unwrap()), [3, 2, 1]);
        let kernel = RunFilter { kernel: "6.6-rt".into(), ..Default::default() };
        assert_eq!(s.runs_page(&kernel, 0, 100).unwrap().matching, 3);
        assert_eq!(s.hosts().unwrap(), ["a", "b", "c<script>"]);
        let mut names: Vec<String> = base.cases.iter().map(|c| c.name.clone()).collect();
        names.sort();
        names.dedup();
        assert_eq!(s.case_names(&RunFilter::default()).unwrap(), names);
        assert!(s.case_names(&f("nobody", "", "")).unwrap().is_empty());
        // a trend: one point per run, oldest first, the headline stream's figures
        let head = rtlab_report_headline(case);
        let (pts, n) = s.trend(&case.name, &RunFilter::default(), 1000).unwrap();
        assert_eq!(n, 9);
        assert_eq!(pts.iter().map(|p| p.run).collect::<Vec<_>>(), (1..=9).collect::<Vec<_>>());
        for p in &pts {
            assert_eq!(
                (p.stream.as_str(), p.p50_ns, p.p99_9_ns, p.max_ns, p.missed),
                (
                    head.name.as_str(),
                    head.stats.p50_ns,
                    head.stats.p99_9_ns,
                    head.stats.max_ns,
                    head.stats.missed
                )
            );
            assert_eq!(p.profile, case.profile);
        }
        assert_eq!(pts[8].kernel, "6.6-rt");
        let (last2, n) = s.trend(&case.name, &f("b", "", ""), 2).unwrap();
        assert_eq!((last2.iter().map(|p| p.run).collect::<Vec<_>>(), n), (vec![5, 8], 3));
        // each case's newest run on host b: run 8
        let newest = s.latest_cases("b").unwrap();
        assert_eq!(
            newest.len(),
            measured.iter().map(|c| &c.name).collect::<std::collections::BTreeSet<_>>().len()
        );
        assert!(newest.iter().all(|(_, p)| p.run == 8 && p.host == "b"));
        assert!(s.latest_cases("nobody").unwrap().is_empty());
    }
    assert_eq!(
        lite.trend(&case.name, &RunFilter::default(), 5).unwrap(),
        team.trend(&case.name, &RunFilter::default(), 5).unwrap()
    );
    assert_eq!(lite.latest_cases("a").unwrap(), team.latest_cases("a").unwrap());
}

/// The report's headline rule: the stream named `all`, else the first.
fn rtlab_report_headline(c: &rtlab_core::run::CaseRecord) -> &rtlab_core::schema::Stream {
    let d = c.document.as_ref().unwrap();
    d.streams.iter().find(|s| s.name == "all").unwrap_or(&d.streams[0])
}

#[test]
fn pg_newer_schema_is_refused_and_bad_urls_are_clear_without_the_password() {
    let Some(pg) = PgServer::start() else { return };
    let url = pg.database("versions");
    drop(Store::open(&url).unwrap());
    // a read command never creates a store
    let empty = pg.database("empty");
    assert!(matches!(Store::open_existing(&empty), Err(StoreError::Missing { .. })));
    assert_eq!(
        pg.psql(
            "empty",
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ),
        "0"
    );
    pg.psql("versions", "UPDATE rtlab_schema SET version = 99");
    let e = Store::open(&url).err().unwrap();
    assert!(matches!(e, StoreError::NewerSchema { found: 99, .. }), "{e}");
    assert_eq!(pg.psql("versions", "SELECT version FROM rtlab_schema"), "99", "untouched");
    let wrong = url.replace(PASSWORD, "not-the-password");
    let e = Store::open(&wrong).err().unwrap().to_string();
    assert!(e.contains("password authentication failed"), "{e}");
    assert!(!e.contains("not-the-password") && !e.contains(PASSWORD), "{e}");
    assert!(e.contains(":***@127.0.0.1"), "{e}");
    let closed = format!("postgres://rtlab:{PASSWORD}@127.0.0.1:1/fleet");
    let e = Store::open(&closed).err().unwrap().to_string();
    assert!(e.contains("cannot connect") && !e.contains(PASSWORD), "{e}");
    let bad = format!("postgres://rtlab:{PASSWORD}@127.0.0.1:notaport/fleet");
    let e = Store::open(&bad).err().unwrap().to_string();
    assert!(e.contains("port 'notaport'") && !e.contains(PASSWORD), "{e}");
}
