//! The far side through the binary: `--far netns:NAME` and `--far ssh:HOST` (a throw-away
//! sshd in a network namespace) for `udp ping` and `pubsub --mode roundtrip`, the document's
//! `far` section (link, clocks, addresses, the far kernel counters beside the near ones, the
//! reflector's stream labelled with its host), bad `--far` input in one line, and what is
//! left when things go wrong: a near side killed with SIGKILL takes its agent with it, a link
//! cut mid-run ends as lost packets (netns) or as an agent that ends by its keep-alive (ssh).
//!
//! Contract: counts, fields and accounting only, never a latency bound. Root tests print why
//! they skip when not root (or when the sshd harness lacks a tool). Every root test makes its
//! own namespaces, named with the pid and a counter, and removes them in `Drop`, also when
//! it fails. The measuring tests run one at a time ([`serial`]): the near side waits for the
//! machine lock anyway, and the far agents of this binary share one far lock, which a killed
//! run's agent still holds for a moment.

mod common;
use common::*;

#[path = "support/sshd.rs"]
mod sshd;

use serde_json::Value;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One measuring test at a time (see the file's contract).
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn skip_unless_root() -> bool {
    if is_root() {
        return false;
    }
    rtlab_sys::test_skip::skipped(format_args!("needs root (network namespaces; CI runs as root)"));
    true
}

fn skip_unless_sshd() -> bool {
    match sshd::available() {
        Ok(()) => false,
        Err(why) => {
            rtlab_sys::test_skip::skipped(format_args!("{why}"));
            true
        }
    }
}

/// A per-test temp dir and the far journal in it: the agents of these tests never read or
/// write the machine's `/var/lib/rtlab/far-journal`.
fn scratch() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("far-journal");
    (dir, journal)
}

/// The machine lock of this test binary, as `common::rtlab()` sets it (the agents of the
/// ssh tests are told the same one, so their far lock is `<this>.far` too).
fn test_lock() -> String {
    crate::common::scratch(&format!("rtlab-test-lock-{}", std::process::id()))
        .to_string_lossy()
        .into_owned()
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn ok_run(cmd: &mut Command, what: &str) -> Output {
    let o = cmd.output().expect("run rtlab");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{what}: exit {:?}\nstderr: {}\nstdout: {}",
        o.status.code(),
        stderr(&o),
        stdout(&o)
    );
    o
}

fn u64_of(v: &Value) -> u64 {
    v.as_u64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("not a count: {v}"))
}

fn stream<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no stream '{name}' in {}", names(doc)))
}

fn names(doc: &Value) -> String {
    let v: Vec<&str> =
        doc["streams"].as_array().unwrap().iter().filter_map(|s| s["name"].as_str()).collect();
    v.join(", ")
}

/// The ping stream's accounting: (sent, replies, lost), checked to add up.
fn ping_accounting(doc: &Value) -> (u64, u64, u64) {
    let ping = stream(doc, "ping");
    let sent = u64_of(&ping["labels"]["sent"]);
    let (replies, lost) = (u64_of(&ping["stats"]["count"]), u64_of(&ping["stats"]["lost"]));
    assert_eq!(replies + lost, sent, "replies {replies} + lost {lost} != sent {sent}");
    (sent, replies, lost)
}

/// Slots the ping skipped (its sender was late past them).
fn overruns(doc: &Value) -> u64 {
    u64_of(&stream(doc, "ping")["stats"]["overruns"])
}

/// The far reflector's stream: present, labelled with the far host, counts of its own.
fn check_reflector(doc: &Value) {
    let r = stream(doc, "reflector");
    let host = r["labels"]["host"].as_str().expect("reflector stream without labels.host");
    assert!(!host.is_empty());
    assert_eq!(host, doc["far"]["host"], "the reflector's host is the far side's");
    assert!(u64_of(&r["stats"]["count"]) > 0, "the reflector turned nothing around");
}

fn windows(counters: &Value) -> usize {
    counters["windows"].as_array().map(Vec::len).unwrap_or(0)
}

/// Every subscriber stream of a pubsub document: samples, and count + lost + late equals
/// what the publisher published (as the stream's label and the document's case say).
fn check_pubsub(doc: &Value, transport: &str) {
    assert_eq!(doc["probe"], "pubsub");
    let cases = doc["config"]["cases"].as_array().expect("config.cases");
    assert!(!cases.is_empty());
    let case_published: Vec<u64> = cases.iter().map(|c| u64_of(&c["published"])).collect();
    for c in cases {
        assert!(c["error"].is_null(), "{transport}: case failed: {c}");
        assert!(u64_of(&c["published"]) > 0, "{transport}: nothing published: {c}");
    }
    let subs: Vec<&Value> = doc["streams"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["labels"].get("subscriber").is_some())
        .collect();
    assert_eq!(subs.len(), cases.len(), "{transport}: one subscriber stream per case");
    for s in subs {
        assert_eq!(s["labels"]["transport"], transport);
        assert_eq!(s["labels"]["mode"], "roundtrip");
        let st = &s["stats"];
        let published = u64_of(&s["labels"]["published"]);
        assert!(case_published.contains(&published), "{transport}: {published} not a case's");
        let count = u64_of(&st["count"]);
        assert!(count > 0, "{transport}: no round trips in {}", s["name"]);
        assert_eq!(
            count + u64_of(&st["lost"]) + u64_of(&st["late"]),
            published,
            "{transport}: {} does not add up: {st}",
            s["name"]
        );
    }
}

fn check_far_netns(doc: &Value, ns_b: &str) {
    let far = &doc["far"];
    assert!(far.is_object(), "no far section");
    assert_eq!(far["link"], format!("netns:{ns_b}"));
    assert_eq!(far["clocks"], "one-host");
    assert_eq!(far["near_address"], "198.18.0.1");
    assert_eq!(far["far_address"], "198.18.0.2");
    assert!(far["version"].as_str().is_some_and(|v| !v.is_empty()));
}

// ---- processes and sockets of a namespace ----

/// `net:[INODE]` of a named network namespace, as `/proc/PID/ns/net` links read.
fn netns_id(ns: &str) -> Option<String> {
    std::fs::metadata(Path::new("/run/netns").join(ns)).ok().map(|m| format!("net:[{}]", m.ino()))
}

/// Processes in namespace `ns` whose command line has `agent --keepalive` (the agent, or
/// the shell ssh runs it with).
fn agents_in(ns: &str) -> Vec<u32> {
    let Some(id) = netns_id(ns) else { return Vec::new() };
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if !cmd.contains("agent --keepalive") {
            continue;
        }
        let net = std::fs::read_link(e.path().join("ns/net")).ok();
        if net.is_some_and(|l| l.to_string_lossy() == id) {
            found.push(pid);
        }
    }
    found
}

/// The UDP sockets open in namespace `ns` (`ss -Huan`), one per line; empty when none.
fn udp_sockets_in(ns: &str) -> String {
    let o = Command::new("ip").args(["netns", "exec", ns, "ss", "-Huan"]).output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Polls `cond` every 100 ms until it holds or `limit` passes; whether it held.
fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Kills and reaps a spawned near side that a failed test leaves behind.
struct Reap(Option<Child>);

impl Reap {
    fn child(&mut self) -> &mut Child {
        self.0.as_mut().unwrap()
    }

    /// Waits (bounded) for the child to end by itself; its output, or None on timeout.
    fn wait_bounded(&mut self, limit: Duration) -> Option<Output> {
        let end = Instant::now() + limit;
        loop {
            if self.child().try_wait().unwrap().is_some() {
                return Some(self.0.take().unwrap().wait_with_output().unwrap());
            }
            if Instant::now() > end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Reap {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().unwrap();
    assert!(o.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

// ---- bad input ----

#[test]
fn bad_far_specs_and_far_refusals_are_one_line_and_exit_2() {
    assert_error(
        &["udp", "ping", "--far", "bogus", "--count", "3"],
        &["bogus", "ssh:[USER@]HOST[:PORT]", "netns:NAME"],
    );
    assert_error(
        &["pubsub", "--far", "tcp:h", "--mode", "roundtrip", "--count", "3"],
        &["tcp:h", "ssh:[USER@]HOST[:PORT]", "netns:NAME"],
    );
    let missing = format!("nonexistent{}", std::process::id());
    let spec = format!("netns:{missing}");
    assert_error(
        &["udp", "ping", "--far", &spec, "--count", "3"],
        &[&spec, "no such network namespace", "rtlab netns up"],
    );
    assert_error(
        &[
            "pubsub",
            "--transport",
            "shm",
            "--mode",
            "roundtrip",
            "--far",
            "netns:X",
            "--count",
            "3",
        ],
        &["--transport shm", "one host only", "dds, ros1, zenoh or udp"],
    );
    assert_error(
        &["pubsub", "--transport", "udp", "--mode", "oneway", "--far", "ssh:h", "--count", "3"],
        &["--mode oneway", "ssh:h", "--synced-clocks", "roundtrip"],
    );
}

// ---- --far netns: ----

#[test]
fn root_udp_ping_far_netns_reflector_accounting_and_both_hosts_counters() {
    if skip_unless_root() {
        return;
    }
    let _g = serial();
    let pair = Pair::up("fc");
    let (dir, journal) = scratch();
    let json = dir.path().join("udp.json");
    let spec = format!("netns:{}", pair.ns_b);
    ok_run(
        rtlab()
            .env("RTLAB_FAR_JOURNAL", &journal)
            .args(["udp", "ping", "--netns", &pair.ns_a, "--far", &spec, "--count", "300"])
            .args(["--quiet", "--json"])
            .arg(&json),
        "udp ping --far netns:",
    );
    let doc = read_json(&json);
    check_far_netns(&doc, &pair.ns_b);
    let (sent, _, _) = ping_accounting(&doc);
    assert_eq!(sent + overruns(&doc), 300, "a count is of slots: sent or skipped");
    check_reflector(&doc);
    // two hosts' kernel counters in one document
    assert!(windows(&doc["evidence"]["counters"]) > 0, "no near kernel counter windows");
    assert!(windows(&doc["far"]["counters"]) > 0, "no far kernel counter windows");
    // the run left nothing in the far namespace
    assert!(agents_in(&pair.ns_b).is_empty(), "an agent outlived the run");
    assert_eq!(udp_sockets_in(&pair.ns_b), "", "a socket outlived the run in {}", pair.ns_b);
}

#[test]
fn root_pubsub_roundtrip_far_netns_three_dds_zenoh_udp() {
    if skip_unless_root() {
        return;
    }
    let _g = serial();
    let pair = Pair::up("fc");
    let (dir, journal) = scratch();
    let spec = format!("netns:{}", pair.ns_b);
    // rustdds included: in the far namespace (and the near one) the veth is the only
    // interface up, which its network rule asks for
    // ros2: ROS 2 itself (rcl and the installation's RMW) in both namespaces, multicast
    // discovery on the veth as ROS 2's default
    for t in ["cyclonedds", "fastdds", "rustdds", "ros2", "zenoh", "udp"] {
        let json = dir.path().join(format!("{t}.json"));
        ok_run(
            rtlab()
                .env("RTLAB_FAR_JOURNAL", &journal)
                .args(["pubsub", "--transport", t, "--mode", "roundtrip"])
                .args(["--netns", &pair.ns_a, "--far", &spec])
                .args(["--count", "200", "--rate", "1khz", "--quiet", "--json"])
                .arg(&json),
            &format!("pubsub {t} --far netns:"),
        );
        let doc = read_json(&json);
        check_far_netns(&doc, &pair.ns_b);
        check_pubsub(&doc, t);
        assert!(
            wait_for(Duration::from_secs(5), || agents_in(&pair.ns_b).is_empty()),
            "{t}: an agent outlived the run"
        );
    }
}

#[test]
fn root_fast_dds_2_9_and_ros2s_fast_dds_meet_across_the_pair() {
    // Debian's Fast DDS 2.9 (fastdds) on one side, ROS 2's RMW on its own Fast DDS (3.2 in
    // the package registry's ROS 2) on the other, both ways: two Fast DDS versions across
    // processes and a link (on one host they do not meet: ros2_transport_cli)
    if skip_unless_root() {
        return;
    }
    let _g = serial();
    let pair = Pair::up("fc");
    let (dir, journal) = scratch();
    let spec = format!("netns:{}", pair.ns_b);
    for (near, far) in [("fastdds", "ros2"), ("ros2", "fastdds")] {
        let json = dir.path().join(format!("{near}.json"));
        ok_run(
            rtlab()
                .env("RTLAB_FAR_JOURNAL", &journal)
                .args(["pubsub", "--transport", near, "--far-transport", far])
                .args(["--mode", "roundtrip", "--reliability", "reliable"])
                .args(["--netns", &pair.ns_a, "--far", &spec])
                .args(["--count", "200", "--rate", "200hz", "--quiet", "--json"])
                .arg(&json),
            &format!("pubsub {near} -> {far} --far netns:"),
        );
        let doc = read_json(&json);
        check_far_netns(&doc, &pair.ns_b);
        check_pubsub(&doc, near);
        for s in doc["streams"].as_array().unwrap().iter().filter(|s| s["metric"] == "rtt") {
            assert_eq!(s["labels"]["far_transport"], far, "{s}");
        }
    }
}

#[test]
fn root_sigkill_of_the_near_side_ends_the_far_agent_and_leaves_nothing() {
    if skip_unless_root() {
        return;
    }
    let _g = serial();
    let pair = Pair::up("fc");
    let (_dir, journal) = scratch();
    let spec = format!("netns:{}", pair.ns_b);
    let child = rtlab()
        .env("RTLAB_FAR_JOURNAL", &journal)
        .args(["udp", "ping", "--netns", &pair.ns_a, "--far", &spec, "--duration", "30s"])
        .arg("--quiet")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut near = Reap(Some(child));
    // the agent is there and its reflector listens: the run is under way
    assert!(
        wait_for(Duration::from_secs(20), || !agents_in(&pair.ns_b).is_empty()
            && !udp_sockets_in(&pair.ns_b).is_empty()),
        "no agent with a reflector in {} (agents {:?}, sockets '{}')",
        pair.ns_b,
        agents_in(&pair.ns_b),
        udp_sockets_in(&pair.ns_b)
    );
    assert!(near.child().try_wait().unwrap().is_none(), "the near side ended early");
    near.child().kill().unwrap(); // SIGKILL
    near.child().wait().unwrap();
    near.0 = None;
    assert!(
        wait_for(Duration::from_secs(10), || agents_in(&pair.ns_b).is_empty()
            && udp_sockets_in(&pair.ns_b).is_empty()),
        "10 s after the near side was killed: agents {:?}, sockets '{}' in {}",
        agents_in(&pair.ns_b),
        udp_sockets_in(&pair.ns_b),
        pair.ns_b
    );
}

#[test]
fn root_link_cut_mid_run_far_netns_counts_the_loss_and_ends() {
    if skip_unless_root() {
        return;
    }
    let _g = serial();
    let pair = Pair::up("fc");
    let (dir, journal) = scratch();
    let json = dir.path().join("cut.json");
    let spec = format!("netns:{}", pair.ns_b);
    // the near veth end is named like its namespace
    let links = Command::new("ip").args(["-n", &pair.ns_a, "-o", "link"]).output().unwrap();
    let links = String::from_utf8_lossy(&links.stdout).into_owned();
    assert!(links.contains(&format!(" {}@", pair.ns_a)), "no veth {} in: {links}", pair.ns_a);
    let child = rtlab()
        .env("RTLAB_FAR_JOURNAL", &journal)
        .args(["udp", "ping", "--netns", &pair.ns_a, "--far", &spec])
        .args(["--count", "3000", "--period", "1ms", "--loss-timeout", "100ms", "--quiet"])
        .arg("--json")
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut near = Reap(Some(child));
    // cut once the reflector listens (the agent started: the pings are about to flow)
    assert!(
        wait_for(Duration::from_secs(20), || !udp_sockets_in(&pair.ns_b).is_empty()),
        "no reflector in {}",
        pair.ns_b
    );
    std::thread::sleep(Duration::from_millis(1000));
    ip(&["-n", &pair.ns_a, "link", "set", &pair.ns_a, "down"]);
    std::thread::sleep(Duration::from_millis(1000));
    ip(&["-n", &pair.ns_a, "link", "set", &pair.ns_a, "up"]);
    let o = near.wait_bounded(Duration::from_secs(60)).expect("the run did not end within 60 s");
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    let doc = read_json(&json);
    let (sent, replies, lost) = ping_accounting(&doc);
    assert!(lost > 0, "a 1 s cut lost nothing: sent {sent}, replies {replies}");
    assert!(replies > 0);
    check_far_netns(&doc, &pair.ns_b);
    assert!(agents_in(&pair.ns_b).is_empty(), "an agent outlived the run");
}

// ---- --far ssh: ----

/// A pair with sshd in its far namespace; the agents there get this binary's lock and a
/// temp far journal through sshd's `SetEnv` (ssh passes no environment of ours).
struct SshFar {
    // field order: the sshd is dropped before the namespaces
    sshd: sshd::Sshd,
    pair: sshd::NetnsPair,
    dir: tempfile::TempDir,
}

impl SshFar {
    fn up(tag: &str) -> SshFar {
        let pair = sshd::NetnsPair::up(tag).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("far-journal").to_string_lossy().into_owned();
        let env = [("RTLAB_LOCK", test_lock()), ("RTLAB_FAR_JOURNAL", journal)];
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let sshd = sshd::Sshd::start_with_env(&pair.ns_b, &pair.ip_b, &env).unwrap();
        SshFar { sshd, pair, dir }
    }

    fn spec(&self) -> String {
        format!("ssh:{}", self.sshd.host_alias())
    }

    /// rtlab with `RTLAB_SSH` (ssh from the near namespace) and `RTLAB_FAR_BIN` (this very
    /// binary, by absolute path) set.
    fn rtlab(&self) -> Command {
        let mut c = rtlab();
        c.env("RTLAB_SSH", self.sshd.rtlab_ssh_env(&self.pair.ns_a))
            .env("RTLAB_FAR_BIN", far_bin());
        c
    }

    fn check_far(&self, doc: &Value) {
        let far = &doc["far"];
        assert!(far.is_object(), "no far section");
        assert_eq!(far["link"], self.spec());
        assert_eq!(far["clocks"], "round-trips-only");
        assert_eq!(far["near_address"], self.pair.ip_a.as_str());
        assert_eq!(far["far_address"], self.pair.ip_b.as_str());
    }
}

fn far_bin() -> String {
    let p = std::fs::canonicalize(env!("CARGO_BIN_EXE_rtlab")).unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn root_udp_ping_and_pubsub_far_ssh() {
    if skip_unless_sshd() {
        return;
    }
    let _g = serial();
    let far = SshFar::up("udp");
    let json = far.dir.path().join("udp.json");
    ok_run(
        far.rtlab()
            .args(["udp", "ping", "--netns", &far.pair.ns_a, "--far", &far.spec()])
            .args(["--count", "200", "--quiet", "--json"])
            .arg(&json),
        "udp ping --far ssh:",
    );
    let doc = read_json(&json);
    far.check_far(&doc);
    let (sent, _, _) = ping_accounting(&doc);
    assert_eq!(sent + overruns(&doc), 200, "a count is of slots: sent or skipped");
    check_reflector(&doc);
    assert!(windows(&doc["far"]["counters"]) > 0, "no far kernel counter windows");
    assert!(
        wait_for(Duration::from_secs(5), || agents_in(&far.pair.ns_b).is_empty()),
        "an agent outlived the udp run"
    );

    let json = far.dir.path().join("dds.json");
    ok_run(
        far.rtlab()
            .args(["pubsub", "--transport", "dds", "--mode", "roundtrip"])
            .args(["--netns", &far.pair.ns_a, "--far", &far.spec()])
            .args(["--count", "200", "--rate", "1khz", "--quiet", "--json"])
            .arg(&json),
        "pubsub dds --far ssh:",
    );
    let doc = read_json(&json);
    far.check_far(&doc);
    check_pubsub(&doc, "cyclonedds"); // `dds` is read as cyclonedds
    assert!(
        wait_for(Duration::from_secs(5), || agents_in(&far.pair.ns_b).is_empty()),
        "an agent outlived the dds run"
    );
}

#[test]
fn root_far_ssh_without_rtlab_there_is_one_line() {
    if skip_unless_sshd() {
        return;
    }
    let _g = serial();
    let far = SshFar::up("nobin");
    let o = far
        .rtlab()
        .env("RTLAB_FAR_BIN", "/nonexistent/rtlab")
        .args(["udp", "ping", "--netns", &far.pair.ns_a, "--far", &far.spec(), "--count", "3"])
        .arg("--quiet")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "expected one line, got: {err}");
    assert!(err.contains(&far.spec()), "{err}");
    assert!(err.contains("not installed there"), "{err}");
    assert!(err.contains("RTLAB_FAR_BIN"), "{err}");
}

#[test]
fn root_link_cut_longer_than_the_keepalive_ends_the_far_ssh_agent() {
    if skip_unless_sshd() {
        return;
    }
    let _g = serial();
    let far = SshFar::up("cut");
    // the near veth end: the only interface in ns_a besides lo
    let links = Command::new("ip").args(["-n", &far.pair.ns_a, "-o", "link"]).output().unwrap();
    let links = String::from_utf8_lossy(&links.stdout).into_owned();
    let veth = links
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap().to_string())
        .find(|n| n != "lo")
        .unwrap_or_else(|| panic!("no veth in {}: {links}", far.pair.ns_a));
    let child = far
        .rtlab()
        .args(["udp", "ping", "--netns", &far.pair.ns_a, "--far", &far.spec()])
        .args(["--duration", "15s", "--loss-timeout", "100ms", "--quiet", "--json"])
        .arg(far.dir.path().join("cut.json"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut near = Reap(Some(child));
    assert!(
        wait_for(Duration::from_secs(30), || !agents_in(&far.pair.ns_b).is_empty()
            && !udp_sockets_in(&far.pair.ns_b).is_empty()),
        "no agent with a reflector in {}",
        far.pair.ns_b
    );
    std::thread::sleep(Duration::from_millis(1000));
    ip(&["-n", &far.pair.ns_a, "link", "set", &veth, "down"]);
    // the agent hears no keep-alive for 6 s: it ends by itself
    let gone = wait_for(Duration::from_secs(20), || agents_in(&far.pair.ns_b).is_empty());
    let left = agents_in(&far.pair.ns_b);
    ip(&["-n", &far.pair.ns_a, "link", "set", &veth, "up"]);
    assert!(gone, "the far agent outlived a cut link by 20 s: {left:?}");
    // the near side ends by itself: a result or one error, either is fine here
    let o = near.wait_bounded(Duration::from_secs(60)).expect("the near side did not end");
    let err = stderr(&o);
    if o.status.success() {
        // a result: its accounting holds, and its far section says the far side was lost
        let doc = read_json(&far.dir.path().join("cut.json"));
        let _ = ping_accounting(&doc);
        let notes = doc["far"]["notes"].to_string();
        assert!(notes.contains("not answered"), "the lost far side unsaid: {notes}");
        assert!(doc["far"]["link_lost"].is_string(), "far.link_lost: {}", doc["far"]);
        let warned =
            doc["warnings"].as_array().unwrap().iter().any(|w| w["code"] == "far-link-lost");
        assert!(warned, "no far-link-lost warning: {}", doc["warnings"]);
    } else {
        assert_eq!(err.trim_end().lines().count(), 1, "expected one error line, got: {err}");
    }
    assert!(agents_in(&far.pair.ns_b).is_empty(), "an agent is back after the cut");
}

/// A scenario case with its far side on "another computer" (sshd in the far namespace): the
/// case's profile is applied there too (journaled there) and its traffic runs iperf3's server
/// there and the client here, so it crosses the link; both restored at the end.
#[test]
fn root_a_scenario_case_over_ssh_applies_the_far_profile_and_load() {
    if skip_unless_sshd() {
        return;
    }
    if rtlab_load_missing("iperf3") {
        rtlab_sys::test_skip::skipped(format_args!("iperf3 is not installed"));
        return;
    }
    let _g = serial();
    let far = SshFar::up("scen");
    let rt_runtime = || std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap();
    let before = rt_runtime();
    let f = far.dir.path().join("s.toml");
    std::fs::write(
        &f,
        format!(
            r#"name = "ssh-far"
far = "{}"
profiles = ["rt-normal"]
loads = ["tx"]
[load.tx]
kind = "traffic"
rate = "10mbit"
direction = "tx"
[[probe]]
kind = "udp"
netns = "{}"
count = 300
"#,
            far.spec(),
            far.pair.ns_a
        ),
    )
    .unwrap();
    let db = far.dir.path().join("r.db");
    let o = far
        .rtlab()
        .args(["run", f.to_str().unwrap(), "--db", db.to_str().unwrap(), "--wait", "-q"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = rtlab()
        .args(["export", "latest", "--format", "json", "--db", db.to_str().unwrap(), "-o", "-"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let case = &v["cases"][0];
    assert_eq!(case["status"]["status"], "ok", "{}", case["status"]);
    let doc = &case["document"];
    far.check_far(doc);
    let f = &doc["far"];
    assert_eq!(f["profile"]["profile"], "rt-normal", "{f}");
    assert!(!f["profile"]["steps"].as_array().unwrap().is_empty(), "{f}");
    let load = f["load"].as_array().expect("the far load's report");
    assert!(load[0]["command"].to_string().contains("iperf3"), "{f}");
    assert!(f["notes"].to_string().contains("iperf3 server on the far host"), "{f}");
    // the client ran here, into the far host's address
    let near_load = case["load_report"].to_string();
    assert!(near_load.contains(far.pair.ip_b.as_str()), "{near_load}");
    let (sent, _, _) = ping_accounting(doc);
    assert_eq!(sent + overruns(doc), 300);
    // both profiles put back: this machine as before, no far journal pending
    assert_eq!(rt_runtime(), before);
    assert!(!far.dir.path().join("far-journal").exists(), "the far journal is still there");
    assert!(wait_for(Duration::from_secs(10), || agents_in(&far.pair.ns_b).is_empty()));
}

fn rtlab_load_missing(tool: &str) -> bool {
    !std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false)
}
