//! The team store through the binary, on a real PostgreSQL server the test starts
//! (initdb + pg_ctl in a temporary directory, as `nobody` when root; see
//! rtlab-store/tests/support/pg_server.rs): `run` straight into it (`RTLAB_DB` and `--db`),
//! `runs`/`report`/`export`/`compare` from it, `push` from SQLite (twice = once; 8 processes
//! at once; the server stopped mid-push), and bad URLs and passwords: one line, exit 2, the
//! password nowhere.

mod common;
#[path = "../../rtlab-store/tests/support/pg_server.rs"]
mod pg_server;
mod stored;

use common::{assert_error, rtlab, stderr, stdout};
use pg_server::{PgServer, PASSWORD};
use std::process::Output;

fn no_password(o: &Output) {
    let (out, err) = (stdout(o), stderr(o));
    assert!(
        !out.contains(PASSWORD) && !err.contains(PASSWORD),
        "the password was shown: {out}{err}"
    );
}

fn ok(o: &Output) {
    assert_eq!(o.status.code(), Some(0), "stdout: {}\nstderr: {}", stdout(o), stderr(o));
    no_password(o);
}

#[test]
fn run_straight_into_postgres_then_runs_report_export_compare_from_it() {
    let Some(pg) = PgServer::start() else { return };
    let url = pg.database("lab");
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("m.toml");
    std::fs::write(&f, "name = \"m\"\ncount = 50\nprofiles = [\"no-rt\"]\n[[probe]]\nkind = \"timer\"\ninterval = [\"200us\", \"300us\"]\nmode = \"rel\"\n").unwrap();
    // RTLAB_DB is the default of --db
    let o = rtlab()
        .current_dir(d.path())
        .env("RTLAB_DB", &url)
        .args(["run", f.to_str().unwrap(), "--wait"])
        .output()
        .unwrap();
    ok(&o);
    let out = stdout(&o);
    assert!(
        out.contains(&format!("store postgres://rtlab:***@127.0.0.1:{}/lab", pg.port)),
        "{out}"
    );
    let report = out.lines().find_map(|l| l.strip_prefix("report: ")).expect("the report's path");
    assert!(d.path().join(report).is_file(), "{report}");
    // and --db on the command line: stored with the password redacted
    let o = rtlab()
        .current_dir(d.path())
        .args(["run", f.to_str().unwrap(), "--db", &url, "--wait", "-q"])
        .output()
        .unwrap();
    ok(&o);
    assert!(!d.path().join("postgres:").exists(), "no directory named after the URL");
    let o = rtlab().args(["runs", "--db", &url]).output().unwrap();
    ok(&o);
    assert_eq!(
        stdout(&o).lines().filter(|l| l.contains(" m ") && l.contains("complete")).count(),
        2,
        "{}",
        stdout(&o)
    );
    let o = rtlab().env("RTLAB_DB", &url).args(["report", "1"]).output().unwrap();
    ok(&o);
    assert!(stdout(&o).contains("timer/idle/no-rt/interval=300us"));
    let o = rtlab().args(["export", "2", "--format", "json", "--db", &url]).output().unwrap();
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["cases"].as_array().unwrap().len(), 2);
    let cmd = v["info"]["command_line"].to_string();
    assert!(cmd.contains(":***@127.0.0.1") && !cmd.contains(PASSWORD), "{cmd}");
    let doc_cmd = v["cases"][0]["document"]["command_line"].to_string();
    assert!(doc_cmd.contains(":***@") && !doc_cmd.contains(PASSWORD), "{doc_cmd}");
    let o = rtlab().args(["export", "1", "--format", "csv", "--db", &url]).output().unwrap();
    ok(&o);
    let csv = stdout(&o);
    assert!(
        csv.starts_with("run_id,") && csv.lines().count() >= 3,
        "a header and the rows of 2 cases: {csv}"
    );
    assert!(csv.lines().skip(1).all(|l| l.starts_with("1,")), "{csv}");
    let o = rtlab().args(["compare", "1", "2", "--db", &url]).output().unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    no_password(&o);
    // the host is a column: runs of this host, filtered by SQL
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(pg.psql("lab", &format!("SELECT COUNT(*) FROM runs WHERE hostname = '{}' AND uuid IS NOT NULL AND profiles = 'no-rt'", host.trim())), "2");
}

/// A SQLite store at `path` holding `n` copies of the fixture run whose first case has 5000
/// raw samples (written to `dir`): a push of 20 takes long enough to be cut. The run.
fn robot_with_raw(path: &std::path::Path, n: usize, dir: &std::path::Path) -> rtlab_core::run::Run {
    let mut run = stored::fixture::run();
    let raw = dir.join("raw.csv");
    let mut text = String::from("stream,index,at_ns,value_ns\n");
    for i in 0..5000 {
        text.push_str(&format!("thread0,{i},{},{}\n", i * 1000, 1000 + i % 77));
    }
    std::fs::write(&raw, text).unwrap();
    let mut doc = stored::fixture::doc("timer-raw.json");
    for s in doc.streams.iter_mut().filter(|s| s.raw_file.is_some()) {
        s.raw_file = Some(raw.display().to_string());
    }
    run.cases[0].document = Some(doc);
    robot(path, n, &run);
    run
}

/// A SQLite store at `path` holding `n` copies of the fixture run (each its own uuid).
fn robot(path: &std::path::Path, n: usize, run: &rtlab_core::run::Run) {
    for _ in 0..n {
        stored::store_run(path, run);
    }
}

fn count(pg: &PgServer, db: &str, sql: &str) -> usize {
    pg.psql(db, sql).parse().unwrap()
}

#[test]
fn push_twice_stores_once_and_eight_processes_at_once_store_every_case_once() {
    let Some(pg) = PgServer::start() else { return };
    let url = pg.database("fleet");
    let d = tempfile::tempdir().unwrap();
    let run = stored::fixture::run();
    let n_cases = run.cases.len();
    let dbs: Vec<String> =
        (0..8).map(|i| d.path().join(format!("robot{i}.db")).display().to_string()).collect();
    for db in &dbs {
        robot(std::path::Path::new(db), 2, &run);
    }
    let o = rtlab().args(["push", "1", "--db", &dbs[0], "--to", &url]).output().unwrap();
    ok(&o);
    assert!(
        stdout(&o).contains("run 1: pushed as run 1")
            && stdout(&o).contains("1 pushed, 0 already there"),
        "{}",
        stdout(&o)
    );
    let o = rtlab().args(["push", "1", "--db", &dbs[0], "--to", &url]).output().unwrap();
    ok(&o);
    assert!(
        stdout(&o).contains("run 1: already there as run 1")
            && stdout(&o).contains("0 pushed, 1 already there"),
        "{}",
        stdout(&o)
    );
    assert_eq!(count(&pg, "fleet", "SELECT COUNT(*) FROM runs"), 1);
    // 8 processes at once, each every run of its store (robot 0's run 1 is there already)
    let children: Vec<_> = dbs
        .iter()
        .map(|db| {
            rtlab()
                .args(["push", "--db", db, "--to", &url])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        ok(&c.wait_with_output().unwrap());
    }
    assert_eq!(count(&pg, "fleet", "SELECT COUNT(*) FROM runs"), 16);
    assert_eq!(count(&pg, "fleet", "SELECT COUNT(DISTINCT uuid) FROM runs"), 16);
    assert_eq!(count(&pg, "fleet", "SELECT COUNT(*) FROM cases"), 16 * n_cases);
    assert_eq!(count(&pg, "fleet", "SELECT COUNT(*) FROM (SELECT run_id, name FROM cases GROUP BY 1, 2 HAVING COUNT(*) > 1) d"), 0);
    // the local copies are kept
    for db in &dbs {
        let o = rtlab().args(["runs", "--db", db, "--json"]).output().unwrap();
        ok(&o);
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&o.stdout)
                .unwrap()
                .as_array()
                .unwrap()
                .len(),
            2
        );
    }
    // and read back from the team store as they were measured
    let o = rtlab().args(["export", "16", "--format", "json", "--db", &url]).output().unwrap();
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["cases"].as_array().unwrap().len(), n_cases);
}

#[test]
fn the_server_stopped_mid_push_then_the_next_push_completes_nothing_doubled() {
    let Some(pg) = PgServer::start() else { return };
    let url = pg.database("fleet");
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("robot.db");
    let run = robot_with_raw(&db, 20, d.path());
    let db = db.display().to_string();
    let child = rtlab()
        .args(["push", "--db", &db, "--to", &url])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    // until two runs are in (before its first run, the push's migration makes the tables)
    while pg
        .try_psql("fleet", "SELECT COUNT(*) FROM runs")
        .map_or(true, |n| n.parse::<usize>().unwrap() < 2)
    {
        assert!(t0.elapsed().as_secs() < 120, "the push stored nothing");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    pg.stop();
    let o = child.wait_with_output().unwrap();
    no_password(&o);
    let err = stderr(&o);
    if o.status.code() == Some(0) {
        // the push finished before the stop took effect: the test proves nothing
        panic!("the push was not cut (make it longer): {}", stdout(&o));
    }
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(&format!("postgres://rtlab:***@127.0.0.1:{}/fleet", pg.port)), "{err}");
    let pushed_before = stdout(&o).lines().filter(|l| l.contains(": pushed as run")).count();
    pg.start_again();
    // every run stored before the stop is whole: its 9 cases, none half-stored
    let runs = count(&pg, "fleet", "SELECT COUNT(*) FROM runs");
    assert!(
        runs >= pushed_before && runs < 20,
        "{runs} runs after the cut, {pushed_before} said pushed"
    );
    assert_eq!(count(&pg, "fleet", "SELECT COUNT(*) FROM cases"), runs * run.cases.len());
    let o = rtlab().args(["push", "--db", &db, "--to", &url]).output().unwrap();
    ok(&o);
    assert!(
        stdout(&o).contains(&format!("{} pushed, {runs} already there", 20 - runs)),
        "{}",
        stdout(&o)
    );
    assert_eq!(count(&pg, "fleet", "SELECT COUNT(*) FROM runs"), 20);
    assert_eq!(count(&pg, "fleet", "SELECT COUNT(DISTINCT uuid) FROM runs"), 20);
    assert_eq!(count(&pg, "fleet", "SELECT COUNT(*) FROM cases"), 20 * run.cases.len());
    assert_eq!(count(&pg, "fleet", "SELECT COUNT(*) FROM raw_samples"), 20 * 5000);
}

#[test]
fn a_wrong_password_and_wrong_urls_are_one_line_exit_2_without_the_password() {
    let Some(pg) = PgServer::start() else { return };
    let url = pg.database("lab");
    let d = tempfile::tempdir().unwrap();
    let local = d.path().join("robot.db");
    robot(&local, 1, &stored::fixture::run());
    let local = local.display().to_string();
    let wrong = url.replace(PASSWORD, "Wr0ng-pw");
    let shown = format!("postgres://rtlab:***@127.0.0.1:{}/lab", pg.port);
    let closed = format!("postgres://rtlab:{PASSWORD}@127.0.0.1:1/lab");
    let malformed = format!("postgres://rtlab:{PASSWORD}@127.0.0.1:port/lab");
    let f = d.path().join("m.toml");
    std::fs::write(&f, "name = \"m\"\ncount = 50\n[[probe]]\nkind = \"timer\"\n").unwrap();
    let f = f.to_str().unwrap();
    for args in [
        vec!["runs", "--db", &wrong],
        vec!["push", "--db", &local, "--to", &wrong],
        vec!["run", f, "--db", &wrong, "--wait"],
    ] {
        assert_error(&args, &[&shown, "password authentication failed"]);
    }
    for args in [vec!["runs", "--db", &closed], vec!["push", "--db", &local, "--to", &closed]] {
        assert_error(&args, &["postgres://rtlab:***@127.0.0.1:1/lab", "cannot connect"]);
    }
    for args in
        [vec!["report", "--db", &malformed], vec!["push", "--db", &local, "--to", &malformed]]
    {
        assert_error(&args, &["postgres://rtlab:***@127.0.0.1:port/lab", "port 'port'"]);
    }
    // assert_error saw one line; none of them held the password
    for args in [
        vec!["runs", "--db", &wrong],
        vec!["push", "--db", &local, "--to", &closed],
        vec!["report", "--db", &malformed],
    ] {
        let o = rtlab().args(&args).output().unwrap();
        no_password(&o);
        assert!(!stderr(&o).contains("Wr0ng-pw"));
    }
    // nothing was stored by the failed attempts; the local run is still there
    assert_eq!(
        pg.psql(
            "lab",
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ),
        "0"
    );
    let o = rtlab().args(["runs", "--db", &local, "--json"]).output().unwrap();
    ok(&o);
}

/// `rtlab netns down` for NAME whatever happens to the test (and the namespaces by hand).
struct NetnsCleanup(String);
impl Drop for NetnsCleanup {
    fn drop(&mut self) {
        let _ = rtlab().args(["netns", "down", "--name", &self.0]).output();
        for s in ["a", "b"] {
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", &format!("{}-{s}", self.0)])
                .output();
        }
    }
}

/// rtlab in network namespace `ns`.
fn rtlab_in(ns: &str, args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new("ip");
    c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_rtlab")]).args(args);
    c.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    c
}

#[test]
fn root_netns_pushes_over_a_veth_eight_at_once_then_the_link_cut_mid_push() {
    if !common::is_root() {
        rtlab_sys::test_skip::skipped(format_args!(
            "needs root (network namespaces; CI runs as root)"
        ));
        return;
    }
    let name = format!("rtpg{}", std::process::id() % 10_000);
    let _cleanup = NetnsCleanup(name.clone());
    let o = rtlab().args(["netns", "up", "--name", &name]).output().unwrap();
    ok(&o);
    // rtlab netns up: NAME-a (IP_A, ...) <-> NAME-b (IP_B, ...) over veth DEV_A / DEV_B
    let line = stdout(&o).lines().find(|l| l.starts_with("rtlab netns up:")).unwrap().to_string();
    let ip_b = line
        .split(&format!("{name}-b ("))
        .nth(1)
        .unwrap()
        .split([',', ')'])
        .next()
        .unwrap()
        .to_string();
    let dev_a = line.split("over veth ").nth(1).unwrap().split(" / ").next().unwrap().to_string();
    let (ns_a, ns_b) = (format!("{name}-a"), format!("{name}-b"));
    let Some(pg) = PgServer::start_in(Some(&ns_b), &ip_b) else { return };
    let url = pg.database("fleet");
    assert!(url.contains(&ip_b));
    let d = tempfile::tempdir().unwrap();
    let run = stored::fixture::run();
    let n_cases = run.cases.len();
    let dbs: Vec<String> =
        (0..8).map(|i| d.path().join(format!("robot{i}.db")).display().to_string()).collect();
    for db in &dbs {
        robot(std::path::Path::new(db), 2, &run);
    }
    // 8 robots in namespace a push at once over the veth
    let children: Vec<_> = dbs
        .iter()
        .map(|db| rtlab_in(&ns_a, &["push", "--db", db, "--to", &url]).spawn().unwrap())
        .collect();
    for c in children {
        ok(&c.wait_with_output().unwrap());
    }
    assert_eq!(count(&pg, "fleet", "SELECT COUNT(*) FROM runs"), 16);
    assert_eq!(count(&pg, "fleet", "SELECT COUNT(DISTINCT uuid) FROM runs"), 16);
    assert_eq!(count(&pg, "fleet", "SELECT COUNT(*) FROM cases"), 16 * n_cases);
    // the link cut mid-push: an error within the TCP user timeout, exit 2; up again, the
    // next push completes, nothing doubled
    let big = d.path().join("big.db");
    robot_with_raw(&big, 20, d.path());
    let big = big.display().to_string();
    let child = rtlab_in(&ns_a, &["push", "--db", &big, "--to", &url]).spawn().unwrap();
    let t0 = std::time::Instant::now();
    while count(&pg, "fleet", "SELECT COUNT(*) FROM runs") < 18 {
        assert!(t0.elapsed().as_secs() < 120, "the push stored nothing");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let cut = std::process::Command::new("ip")
        .args(["-n", &ns_a, "link", "set", &dev_a, "down"])
        .status()
        .unwrap();
    assert!(cut.success());
    let o = child.wait_with_output().unwrap();
    no_password(&o);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "the push was not cut: {}{err}", stdout(&o));
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(&format!("postgres://rtlab:***@{ip_b}:{}/fleet", pg.port)), "{err}");
    let up = std::process::Command::new("ip")
        .args(["-n", &ns_a, "link", "set", &dev_a, "up"])
        .status()
        .unwrap();
    assert!(up.success());
    let o = rtlab_in(&ns_a, &["push", "--db", &big, "--to", &url]).output().unwrap();
    ok(&o);
    assert_eq!(count(&pg, "fleet", "SELECT COUNT(*) FROM runs"), 36);
    assert_eq!(count(&pg, "fleet", "SELECT COUNT(DISTINCT uuid) FROM runs"), 36);
    assert_eq!(count(&pg, "fleet", "SELECT COUNT(*) FROM cases"), 36 * n_cases);
    assert_eq!(count(&pg, "fleet", "SELECT COUNT(*) FROM raw_samples"), 20 * 5000);
}
