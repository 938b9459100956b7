//! Helpers for CLI tests: run the rtlab binary and collect exit code, stdout, stderr.
#![allow(dead_code)]

use std::process::{Command, Output};

pub fn rtlab() -> Command {
    // one machine lock per test binary: its tests run one measurement at a time, as rtlab
    // wants, and a test's lock never stands in the way of a real rtlab on this machine
    let lock = std::env::temp_dir().join(format!("rtlab-test-lock-{}", std::process::id()));
    let mut c = Command::new(env!("CARGO_BIN_EXE_rtlab"));
    c.env("RTLAB_LOCK", lock);
    c
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
    let o = run(args);
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

/// A network namespace a test made (`ip netns add`): removed, with its veth pairs, when
/// dropped, also when an assertion fails.
pub struct Netns(pub String);
impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}
