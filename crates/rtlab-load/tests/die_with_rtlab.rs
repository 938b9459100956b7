//! Loads never outlive rtlab: a process that started a load is killed with SIGKILL (no
//! `Drop` runs) and every process of the load must be gone soon after — stress-ng and its
//! workers, the iperf3 server and client over loopback, and iperf3 inside a network
//! namespace behind `ip netns exec`. And the second guard: a load given a time limit ends
//! by itself.
//!
//! The trick: the test binary re-executes itself (`current_exe() --exact NAME`) with
//! [`PARENT`] set; that copy starts the load, writes the load's pids to a file and sleeps
//! until it is killed. Needs stress-ng and iperf3 (scripts/setup.sh); the netns test needs
//! root (CI runs as root). No timing bound: the only limit is generous polling (5 s).

use rtlab_load::{LoadConfig, LoadError, RunningLoad, TrafficConfig};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Set in the re-executed copy: the file to write the load's pids to.
const PARENT: &str = "RTLAB_LOAD_TEST_PARENT";

/// In the re-executed copy: start `cfg`, publish its pids, sleep until killed.
fn be_the_parent(cfg: &LoadConfig, pid_file: &str) -> ! {
    // a 60 s limit only tidies up after a failed test; the assertions poll 5 s
    let load = RunningLoad::start(cfg, Some(Duration::from_secs(60))).unwrap();
    let pids: Vec<String> = load.pids().iter().map(|p| p.to_string()).collect();
    let tmp = format!("{pid_file}.tmp");
    std::fs::write(&tmp, pids.join(" ")).unwrap();
    std::fs::rename(&tmp, pid_file).unwrap();
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// (state, ppid, pgrp, comm) of a process, None if it is gone.
fn stat(pid: u32) -> Option<(char, u32, u32, String)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, rest) = s.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_string();
    let w: Vec<&str> = rest.split_whitespace().collect();
    Some((w.first()?.chars().next()?, w.get(1)?.parse().ok()?, w.get(2)?.parse().ok()?, comm))
}

/// The live (not zombie) processes in any of the process groups `pgids`.
fn members(pgids: &[u32]) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if let Some((state, _, pgrp, comm)) = stat(pid) {
            if state != 'Z' && state != 'X' && pgids.contains(&pgrp) {
                out.push((pid, comm));
            }
        }
    }
    out
}

/// Kills what is left of the groups if an assertion fails, so no test leaves a load behind.
struct Tidy(Vec<u32>);
impl Drop for Tidy {
    fn drop(&mut self) {
        for g in &self.0 {
            let _ = rtlab_sys::tasks::kill_group(*g as i32, 9);
        }
    }
}

/// Run this test's body as a separate parent process, SIGKILL it once its load runs, and
/// assert every process of the load is gone within 5 s. `comms`: the programs expected to
/// run in the load's groups before the kill, `at_least` processes in all (stress-ng's
/// workers included).
fn kill_the_parent_and_look(test: &str, comms: &[&str], at_least: usize) {
    kill_the_parent_in(test, comms, at_least, &std::env::temp_dir());
}

/// [`kill_the_parent_and_look`] with the parent's temporary directory `tmp`; returns the
/// parent's pid.
fn kill_the_parent_in(test: &str, comms: &[&str], at_least: usize, tmp: &Path) -> u32 {
    let d = tempfile::tempdir().unwrap();
    let pid_file = d.path().join("pids");
    let mut parent = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(PARENT, &pid_file)
        .env("TMPDIR", tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    let pids: Vec<u32> = loop {
        if let Ok(s) = std::fs::read_to_string(&pid_file) {
            break s.split_whitespace().map(|p| p.parse().unwrap()).collect();
        }
        if let Ok(Some(st)) = parent.try_wait() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut parent.stderr.take().unwrap(), &mut err).unwrap();
            panic!("the parent ended before its load ran ({st}): {err}");
        }
        assert!(Instant::now() < end, "the parent never started its load");
        std::thread::sleep(Duration::from_millis(20));
    };
    let _tidy = Tidy(pids.clone());
    for &p in &pids {
        let (_, ppid, pgrp, _) = stat(p).expect("a process of the load is running");
        assert_eq!(ppid, parent.id(), "pid {p} is a child of the parent");
        assert_eq!(pgrp, p, "pid {p} leads its own group");
    }
    let end = Instant::now() + Duration::from_secs(5);
    let mut before = members(&pids);
    while before.len() < at_least && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
        before = members(&pids);
    }
    assert!(before.len() >= at_least, "fewer than {at_least} processes: {before:?}");
    for c in comms {
        assert!(before.iter().any(|(_, comm)| comm == c), "no {c} among {before:?}");
    }

    parent.kill().unwrap(); // SIGKILL: no Drop, no handler runs in the parent
    parent.wait().unwrap();

    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let left = members(&pids);
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < end, "still running 5 s after the parent's kill -9: {left:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    parent.id()
}

#[test]
fn kill9_of_the_parent_takes_stress_ng_and_its_workers_along() {
    let cfg = LoadConfig::Stress { cpu: 1, vm: 0, io: 0, hdd: 0, cpu_method: None, cpu_load: None };
    if let Ok(f) = std::env::var(PARENT) {
        be_the_parent(&cfg, &f);
    }
    kill_the_parent_and_look(
        "kill9_of_the_parent_takes_stress_ng_and_its_workers_along",
        &["stress-ng"],
        2,
    );
}

/// Set in a re-executed copy that starts its load, stops it and ends.
const ONCE: &str = "RTLAB_LOAD_TEST_ONCE";

/// stress-ng's files (`--hdd`) are in a directory of the load's own, `rtlab-load-PID-N` in
/// the temporary directory: one a killed parent left (its workers died by SIGKILL with it)
/// is removed by the next load that keeps files, and that load's own when it stops.
#[test]
fn kill9_of_the_parent_leaves_stress_ngs_files_to_the_next_load() {
    let cfg = LoadConfig::Stress { cpu: 0, vm: 0, io: 0, hdd: 2, cpu_method: None, cpu_load: None };
    if let Ok(f) = std::env::var(PARENT) {
        be_the_parent(&cfg, &f);
    }
    if std::env::var(ONCE).is_ok() {
        let load = RunningLoad::start(&cfg, Some(Duration::from_secs(60))).unwrap();
        let dir = std::env::temp_dir().join(format!("rtlab-load-{}-0", std::process::id()));
        assert!(load.command().join(" ").contains(&format!("--temp-path {}", dir.display())));
        assert!(dir.is_dir(), "{}", dir.display());
        std::thread::sleep(Duration::from_millis(300));
        let r = load.stop();
        assert!(r.alive_until_stop, "{:?}", r.ended);
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let test = "kill9_of_the_parent_leaves_stress_ngs_files_to_the_next_load";
    let parent = kill_the_parent_in(test, &["stress-ng-hdd"], 3, tmp.path());
    let left = tmp.path().join(format!("rtlab-load-{parent}-0"));
    assert!(left.is_dir(), "the killed parent's directory: {}", left.display());
    let o = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(ONCE, "1")
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    let after: Vec<_> =
        std::fs::read_dir(tmp.path()).unwrap().flatten().map(|e| e.path()).collect();
    assert!(after.is_empty(), "{after:?}");
}

fn loopback_tcp(port: u16) -> LoadConfig {
    LoadConfig::Traffic(TrafficConfig {
        side: Default::default(),
        protocol: "tcp".into(),
        bitrate_bps: 1_000_000,
        direction: rtlab_load::Direction::Tx,
        netns: None,
        client_netns: None,
        peer: "127.0.0.1".into(),
        port,
    })
}

#[test]
fn kill9_of_the_parent_takes_the_iperf3_server_and_client_along() {
    if let Ok(f) = std::env::var(PARENT) {
        be_the_parent(&loopback_tcp(5391), &f);
    }
    kill_the_parent_and_look(
        "kill9_of_the_parent_takes_the_iperf3_server_and_client_along",
        &["iperf3"],
        2,
    );
}

/// Removes the namespace also when an assertion fails.
struct Netns(String);
impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

const NETNS: &str = "RTLAB_LOAD_TEST_NETNS";

#[test]
fn root_kill9_of_the_parent_takes_iperf3_inside_a_netns_along() {
    if let (Ok(f), Ok(ns)) = (std::env::var(PARENT), std::env::var(NETNS)) {
        // server and client both behind `ip netns exec`, over the namespace's loopback
        let cfg = LoadConfig::Traffic(TrafficConfig {
            netns: Some(ns.clone()),
            client_netns: Some(ns),
            ..match loopback_tcp(5392) {
                LoadConfig::Traffic(t) => t,
                _ => unreachable!(),
            }
        });
        be_the_parent(&cfg, &f);
    }
    if !rtlab_sys::tasks::is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (CI runs as root)"));
        return;
    }
    let ns = Netns(format!("rtlab-load-{}", std::process::id()));
    let ok = |args: &[&str]| Command::new("ip").args(args).status().unwrap().success();
    assert!(ok(&["netns", "add", &ns.0]));
    assert!(ok(&["-n", &ns.0, "link", "set", "lo", "up"]));
    std::env::set_var(NETNS, &ns.0);
    // `ip` execs iperf3 in the same process: the pids the parent saw are iperf3's now
    kill_the_parent_and_look(
        "root_kill9_of_the_parent_takes_iperf3_inside_a_netns_along",
        &["iperf3"],
        2,
    );
}

fn wait_for_the_end(load: &mut RunningLoad) -> LoadError {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        if let Err(e) = load.check_alive() {
            return e;
        }
        assert!(Instant::now() < end, "the load did not end at its time limit");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_stress_load_with_a_time_limit_ends_by_itself() {
    if std::env::var(PARENT).is_ok() {
        return;
    }
    let cfg =
        LoadConfig::Stress { cpu: 1, vm: 0, io: 0, hdd: 0, cpu_method: None, cpu_load: Some(30) };
    let mut load = RunningLoad::start(&cfg, Some(Duration::from_secs(1))).unwrap();
    let pids = load.pids();
    let _tidy = Tidy(pids.clone());
    assert!(load.command().join(" ").contains("--cpu-load 30 --timeout 1s"));
    let e = wait_for_the_end(&mut load);
    assert!(matches!(e, LoadError::Expired { limit_s: 1, .. }), "{e}");
    let r = load.stop();
    assert!(!r.alive_until_stop);
    assert_eq!(r.cpu_load_percent, Some(30));
    assert_eq!(r.max_duration_ns, Some(1_000_000_000));
    assert!(r.ended.unwrap().contains("time limit of 1 s"));
    assert!(members(&pids).is_empty());
}

#[test]
fn an_iperf3_load_with_a_time_limit_ends_by_itself() {
    if std::env::var(PARENT).is_ok() {
        return;
    }
    let mut load = RunningLoad::start(&loopback_tcp(5393), Some(Duration::from_secs(1))).unwrap();
    let pids = load.pids();
    let _tidy = Tidy(pids.clone());
    let e = wait_for_the_end(&mut load);
    assert!(matches!(e, LoadError::Expired { .. }), "{e}");
    // the client ended at -t 1, the one-off server after its one client
    let end = Instant::now() + Duration::from_secs(30);
    while !members(&pids).is_empty() {
        assert!(Instant::now() < end, "still running: {:?}", members(&pids));
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = load.stop();
    assert!(r.bitrate_bps.unwrap_or(0.0) > 0.0, "{r:?}");
}

#[test]
fn a_load_started_from_a_short_lived_thread_lives_on() {
    if std::env::var(PARENT).is_ok() {
        return;
    }
    // PR_SET_PDEATHSIG fires when the forking *thread* ends: the spawner thread is why not
    let mut load = std::thread::spawn(|| {
        RunningLoad::start(
            &LoadConfig::Command { argv: vec!["sleep".into(), "30".into()] },
            Some(Duration::from_secs(1)), // not passed to a user command
        )
        .unwrap()
    })
    .join()
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    load.check_alive().unwrap();
    assert_eq!(load.command(), ["sleep", "30"]);
    let r = load.stop();
    assert!(r.alive_until_stop, "{r:?}");
}
