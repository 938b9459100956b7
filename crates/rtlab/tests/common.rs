//! Helpers for CLI tests: run the rtlab binary and collect exit code, stdout, stderr.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

pub fn rtlab() -> Command {
    rtlab_at(std::path::Path::new(env!("CARGO_BIN_EXE_rtlab")))
}

/// The rtlab binary `bin` (another build: the aarch64 one under qemu-user).
pub fn rtlab_at(bin: &std::path::Path) -> Command {
    // one machine lock per test binary: its tests run one measurement at a time, as rtlab
    // wants, and a test's lock never stands in the way of a real rtlab on this machine
    let lock = scratch(&format!("rtlab-test-lock-{}", std::process::id()));
    let mut c = Command::new(bin);
    c.env("RTLAB_LOCK", lock);
    c
}

/// A file of this test binary's own (its machine lock, a tool it builds): in cargo's
/// directory for them under target/ (gone with the build), or in the temporary directory
/// where that cannot be written (the RT VM's guest sees the host's files read-only but /tmp).
pub fn scratch(name: &str) -> std::path::PathBuf {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let t = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let probe = t.join(format!(".rtlab-writable-{}", std::process::id()));
        if std::fs::write(&probe, b"").is_ok() {
            let _ = std::fs::remove_file(&probe);
            t
        } else {
            std::env::temp_dir()
        }
    });
    dir.join(name)
}

pub fn run(args: &[&str]) -> Output {
    rtlab().args(args).output().expect("run rtlab")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Exit 2 with exactly one line on stderr that contains every `needle`.
pub fn assert_error(args: &[&str], needles: &[&str]) {
    assert_error_of(rtlab().args(args), needles);
}

/// [`assert_error`] of a prepared command (its environment set).
pub fn assert_error_of(cmd: &mut Command, needles: &[&str]) {
    let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    let o = cmd.output().expect("run rtlab");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: expected exit 2, stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: expected one line, got: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: '{n}' not in: {err}");
    }
}

pub fn is_root() -> bool {
    // SAFETY-free check through /proc: the effective uid of this process
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// A test that cannot run here: it says why and passes, except where `.ci/run` set the
/// variable `require` to 1 (it must run there): then it fails with the reason.
pub fn skip(require: &str, what: &str, why: &str) {
    let required = std::env::var(require).as_deref() == Ok("1");
    assert!(!required, "{require}=1 and {what} cannot run: {why}");
    rtlab_sys::test_skip::skipped(format_args!("{what} cannot run here: {why}"));
}

/// Whether a test that needs root and `bash SCRIPT --check` can run here; when not, `skip`'s
/// reason is root (`not_root` says what for) or what the script says is missing.
pub fn script_ready(script: &std::path::Path, require: &str, what: &str, not_root: &str) -> bool {
    let why = if !is_root() {
        format!("not root ({not_root})")
    } else {
        let o = Command::new("bash").arg(script).arg("--check").output().unwrap();
        if o.status.success() {
            return true;
        }
        stdout(&o).trim().to_string()
    };
    skip(require, what, &why);
    false
}

/// A network namespace a test made (`ip netns add`): removed, with its veth pairs, when
/// dropped, also when an assertion fails.
pub struct Netns(pub String);
impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// A child cgroup of the cpu controller, as a systemd service or a CI job runs in (cgroup
/// v1: /sys/fs/cgroup/cpu/NAME, whose cpu.rt_runtime_us starts at 0 where the kernel has RT
/// group scheduling; v2: /sys/fs/cgroup/NAME). Whatever runs in it when dropped goes back to
/// the parent, then it is removed. None on a machine with neither.
pub struct ChildCgroup {
    pub dir: std::path::PathBuf,
    parent_procs: std::path::PathBuf,
}

impl ChildCgroup {
    pub fn new(name: &str) -> Option<ChildCgroup> {
        let root = ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup"]
            .into_iter()
            .map(std::path::Path::new)
            .find(|r| {
            r.join("cgroup.procs").exists()
                && (r.join("cpu.shares").exists() || r.join("cgroup.controllers").exists())
        })?;
        let dir = root.join(name);
        let _ = std::fs::create_dir(&dir);
        dir.join("cgroup.procs")
            .exists()
            .then(|| ChildCgroup { dir, parent_procs: root.join("cgroup.procs") })
    }

    /// Whether a real-time policy is refused in it (RT group scheduling, no runtime given).
    pub fn refuses_realtime(&self) -> bool {
        std::fs::read_to_string(self.dir.join("cpu.rt_runtime_us")).is_ok_and(|v| v.trim() == "0")
    }

    /// rtlab ARGS, started inside it (the process joins it before exec).
    pub fn rtlab(&self, args: &[&str]) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!("echo $$ > {} && exec \"$@\"", self.dir.join("cgroup.procs").display()))
            .arg("sh")
            .arg(env!("CARGO_BIN_EXE_rtlab"))
            .args(args);
        let lock = scratch(&format!("rtlab-test-lock-{}", std::process::id()));
        c.env("RTLAB_LOCK", lock);
        c
    }
}

impl Drop for ChildCgroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            let left = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
            for pid in left.split_whitespace() {
                let _ = std::fs::write(&self.parent_procs, pid);
            }
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// `rtlab run quick`'s output: all 14 cases ended, none failed, and each skipped one says
/// why in one line holding one of `reasons`; `tune show` said nothing is applied after it.
pub fn assert_quick_completed(out: &str, reasons: &[&str]) {
    let done = out.lines().find(|l| l.starts_with("run 1 complete: 14 of 14 cases (0 failed"));
    let done = done.unwrap_or_else(|| panic!("run quick did not complete every case: {out}"));
    let skipped: Vec<&str> = out.lines().filter(|l| l.contains(" skipped: ")).collect();
    for s in &skipped {
        assert!(reasons.iter().any(|r| s.contains(r)), "{s}");
    }
    assert!(done.contains(&format!("{} skipped", skipped.len())), "{done}: {skipped:?}");
    assert!(out.contains("nothing applied by rtlab"), "{out}");
    // the answer first: the run's verdict and what to do
    assert!(out.lines().any(|l| l.starts_with("verdict: ")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("so: ")), "{out}");
}

/// Exit 0 (else the output in the panic); its stdout.
pub fn ran(o: &Output, what: &str) -> String {
    assert_eq!(o.status.code(), Some(0), "{what}: {}{}", stdout(o), stderr(o));
    stdout(o)
}

/// Every stream of a result (its send lateness aside) has samples, and one labelled with
/// how many were published accounts for each: samples + lost + late = published.
pub fn assert_accounted(doc: &serde_json::Value, what: &str) {
    let streams = doc["streams"].as_array().unwrap();
    assert!(!streams.is_empty(), "{what}: no streams");
    for s in streams.iter().filter(|s| s["metric"] != "send_lateness") {
        let st = &s["stats"];
        assert!(st["count"].as_u64().unwrap() > 0, "{what}: {}: no samples: {st}", s["name"]);
        if let Some(p) = s["labels"]["published"].as_str() {
            let sent: u64 = p.parse().unwrap();
            let got =
                ["count", "lost", "late"].map(|k| st[k].as_u64().unwrap()).iter().sum::<u64>();
            assert_eq!(got, sent, "{what}: {}: {st}", s["name"]);
        }
    }
}

static PAIRS: AtomicU32 = AtomicU32::new(0);

/// `rtlab netns up --name N`: namespaces `N-a` and `N-b` joined by the veth pair `N-a` /
/// `N-b` (198.18.0.1 / 198.18.0.2); `rtlab netns down --name N` on drop (and `ip netns del`
/// if that left anything). N is `PREFIX` (two letters: the test binary), this process and a
/// count, at most 13 characters (the name prefixes interface names).
pub struct Pair {
    pub name: String,
    pub ns_a: String,
    pub ns_b: String,
}

impl Pair {
    pub fn up(prefix: &str) -> Pair {
        let n = PAIRS.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}{}x{n}", std::process::id() % 1_000_000);
        let pair = Pair { ns_a: format!("{name}-a"), ns_b: format!("{name}-b"), name };
        pair.remove();
        let o = run(&["netns", "up", "--name", &pair.name, "--no-ipv6"]);
        assert_eq!(o.status.code(), Some(0), "netns up {}: {}", pair.name, stderr(&o));
        pair
    }

    fn remove(&self) {
        let _ = rtlab()
            .args(["netns", "down", "--name", &self.name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        for ns in [&self.ns_a, &self.ns_b] {
            if Path::new("/run/netns").join(ns).exists() {
                let _ =
                    Command::new("ip").args(["netns", "del", ns]).stderr(Stdio::null()).status();
            }
        }
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Sends SIGINT (the user's Ctrl-C) to `child` and waits (at most 30 s) for its output.
pub fn interrupt(child: std::process::Child) -> std::process::Output {
    let rc = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(rc.success());
    let mut child = child;
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    child.wait_with_output().unwrap()
}

/// Start `rtlab ARGS`, wait for its first line on stdout (it starts with `first`), let it
/// measure half a second, interrupt it (SIGINT, as Ctrl-C); what it wrote after the first line,
/// and its exit code.
pub fn run_interrupted(args: &[&str], first: &str) -> (String, Option<i32>) {
    let mut child = rtlab()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert!(line.starts_with(first), "{line}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    (rest, child.wait().unwrap().code())
}

/// The uprobes and tracefs instances rtlab left (none after any run of `rtlab trace --pid`).
pub fn uprobes_left() -> Vec<String> {
    let t = "/sys/kernel/tracing";
    let mut v: Vec<String> = std::fs::read_to_string(format!("{t}/uprobe_events"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("rtlab_"))
        .map(String::from)
        .collect();
    for e in std::fs::read_dir(format!("{t}/instances")).into_iter().flatten().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with("rtlab_") {
            v.push(format!("instance {n}"));
        }
    }
    v
}

/// The ROS master rtlab started on `uri`'s port (named in its notes or report) is gone: it
/// stops with rtlab (the parent-death signal; its exit may take a moment, waited for 10 s).
pub fn assert_rosmaster_gone(uri: &str) {
    let port = uri.trim_end_matches('/').rsplit(':').next().unwrap().to_string();
    let running = || {
        std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            (cmd.contains("rosmaster") && cmd.contains(&format!("-p {port} "))).then_some(cmd)
        })
    };
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while running().is_some() && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(running(), None, "rtlab's rosmaster on port {port} left running");
}
