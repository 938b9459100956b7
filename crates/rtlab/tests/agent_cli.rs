//! `rtlab agent` driven over its pipes, as the near side drives it: it speaks first, refuses
//! another protocol, ends when its stdin closes or the near side falls silent, and always puts
//! its host back: a profile it applied is restored on bye, on silence, and — when the agent
//! itself was killed — by the next agent's start.

mod common;
use common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const TAG: &str = "rtlab-far/1 ";

struct Agent {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

fn agent(dir: &std::path::Path, keepalive: &str) -> Agent {
    let mut child = rtlab()
        .args(["agent", "--keepalive", keepalive])
        .env("RTLAB_FAR_JOURNAL", dir.join("far-journal"))
        .env("RTLAB_LOCK", dir.join("lock"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    Agent { stdin: child.stdin.take(), child, lines: rx }
}

impl Agent {
    fn send(&mut self, m: Value) {
        let s = self.stdin.as_mut().unwrap();
        writeln!(s, "{TAG}{m}").unwrap();
        s.flush().unwrap();
    }
    fn next(&self) -> Value {
        let l = self.lines.recv_timeout(Duration::from_secs(30)).expect("a line from the agent");
        let at = l.find(TAG).unwrap_or_else(|| panic!("not a protocol line: {l}"));
        serde_json::from_str(&l[at + TAG.len()..]).unwrap()
    }
    fn hello(&mut self) -> Value {
        let h = self.next();
        assert_eq!(h["type"], "hello", "{h}");
        self.send(json!({"type": "hello", "protocol": 3, "version": h["version"]}));
        h
    }
    fn request(&mut self, id: u64, request: Value) -> Value {
        self.send(json!({"type": "request", "id": id, "request": request}));
        let r = self.next();
        assert_eq!(r["type"], "reply", "{r}");
        assert_eq!(r["id"], id);
        r["result"].clone()
    }
    /// Wait (bounded) for the agent to end; its exit code and stderr.
    fn end(mut self, within: Duration) -> (Option<i32>, String) {
        let end = Instant::now() + within;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                let mut err = String::new();
                std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut err)
                    .unwrap();
                return (st.code(), err);
            }
            assert!(Instant::now() < end, "the agent did not end within {within:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn it_speaks_first_and_answers_facts() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = agent(dir.path(), "10s");
    let h = a.hello();
    assert_eq!(h["protocol"], 3);
    assert!(h["host"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(h["refused"].is_null());
    let f = a.request(1, json!({"kind": "facts"}));
    let facts = &f["Ok"];
    assert!(facts["addresses"].as_array().unwrap().iter().any(|x| x[1] == "127.0.0.1"), "{f}");
    assert!(facts["environment"]["kernel_release"].is_string());
    // an unknown tool there is a missing tool, said as such
    let c = a.request(
        2,
        json!({"kind": "check", "tools": ["no-such-tool-rtlab"], "policy": "other", "priority": 0}),
    );
    assert_eq!(c["Err"]["missing"]["need"]["program"], "no-such-tool-rtlab", "{c}");
    a.send(json!({"type": "bye"}));
    let (code, _) = a.end(Duration::from_secs(10));
    assert_eq!(code, Some(0));
}

fn monotonic_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec to fill
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

#[test]
fn it_reads_its_clock_and_traces_a_command_for_rtlab_trace_far() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = agent(dir.path(), "10s");
    a.hello();
    // one machine: the agent's clock reading lies between this process's two
    let before = monotonic_ns();
    let c = a.request(1, json!({"kind": "clock"}));
    let after = monotonic_ns();
    let t = c["Ok"]["monotonic_ns"].as_i64().unwrap();
    assert!(before <= t && t <= after, "{before} <= {t} <= {after}");
    // nothing to stop, a trace asked of nothing, a command that is not there
    let r = a.request(2, json!({"kind": "stop_trace"}));
    assert_eq!(r["Err"]["message"], "no trace ran there", "{r}");
    let none = json!({"command": [], "pid": [], "duration_ns": null, "slots": 65536});
    let r = a.request(3, json!({"kind": "trace", "trace": none}));
    assert!(r["Err"]["message"].as_str().unwrap().contains("a command or pids"), "{r}");
    let bad = json!({"command": ["/nonexistent/rtlab-app"], "pid": [], "duration_ns": null, "slots": 65536});
    let r = a.request(4, json!({"kind": "trace", "trace": bad}));
    assert!(r["Err"]["message"].as_str().unwrap().contains("/nonexistent/rtlab-app"), "{r}");
    // a command that ends by itself at once: its end kept for the stop
    let quick =
        json!({"command": ["sh", "-c", "exit 3"], "pid": [], "duration_ns": null, "slots": 65536});
    assert_eq!(a.request(5, json!({"kind": "trace", "trace": quick})), json!({"Ok": null}));
    let r = a.request(6, json!({"kind": "stop_trace"}));
    assert_eq!(r["Ok"]["ended"], json!({"exited": "exit 3"}), "{r}");
    assert_eq!(r["Ok"]["processes"], json!([]), "{r}");
    let r = a.request(7, json!({"kind": "trace_events", "process": 0, "from": 0}));
    assert!(r["Err"]["message"].as_str().unwrap().contains("no process 0"), "{r}");
    // a command still running at finish is stopped with the agent's other work
    let long = json!({"command": ["sleep", "30"], "pid": [], "duration_ns": null, "slots": 65536});
    assert_eq!(a.request(8, json!({"kind": "trace", "trace": long})), json!({"Ok": null}));
    let r = a.request(9, json!({"kind": "trace", "trace": long}));
    assert_eq!(r["Err"]["message"], "a trace runs there already", "{r}");
    let began = Instant::now();
    let f = a.request(10, json!({"kind": "finish"}));
    assert!(f["Ok"].is_object(), "{f}");
    assert!(began.elapsed() < Duration::from_secs(20), "finish waited for sleep 30");
    a.send(json!({"type": "bye"}));
    let (code, _) = a.end(Duration::from_secs(10));
    assert_eq!(code, Some(0));
}

#[test]
fn another_protocol_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = agent(dir.path(), "10s");
    let _ = a.next();
    a.send(json!({"type": "hello", "protocol": 99, "version": "9.9.9"}));
    let (code, err) = a.end(Duration::from_secs(10));
    assert_eq!(code, Some(2));
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("protocol 99") && err.contains("protocol 3"), "{err}");
}

#[test]
fn it_ends_when_stdin_closes_or_the_near_side_falls_silent() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = agent(dir.path(), "10s");
    a.hello();
    drop(a.stdin.take());
    let (code, err) = a.end(Duration::from_secs(10));
    assert_eq!(code, Some(1));
    assert!(err.contains("stdin closed"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let mut a = agent(dir.path(), "1s");
    a.hello();
    let (code, err) = a.end(Duration::from_secs(15));
    assert_eq!(code, Some(1));
    assert!(err.contains("keep-alive"), "{err}");
}

#[test]
fn a_broken_near_side_is_ignored_line_by_line_and_an_endless_line_ends_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = agent(dir.path(), "10s");
    a.hello();
    // lines that are no message: not UTF-8, broken JSON after the tag, an unknown type
    let s = a.stdin.as_mut().unwrap();
    s.write_all(b"\xff\xfe\x00 not text\n").unwrap();
    writeln!(s, "{TAG}{{\"type\": \"request\", \"id\": ").unwrap();
    writeln!(s, "{TAG}{{\"type\": \"launch_missiles\"}}").unwrap();
    s.flush().unwrap();
    let f = a.request(1, json!({"kind": "facts"}));
    assert!(f["Ok"]["environment"]["kernel_release"].is_string(), "still answering: {f}");
    // a line longer than any message (64 MiB): the agent reads it in bounded memory and ends
    let s = a.stdin.as_mut().unwrap();
    let chunk = vec![b'x'; 1 << 20];
    let mut wrote = 0;
    for _ in 0..65 {
        if s.write_all(&chunk).is_err() {
            break;
        }
        wrote += 1;
    }
    let _ = s.write_all(b"\n");
    let _ = s.flush();
    let (code, err) = a.end(Duration::from_secs(30));
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(wrote, 65, "the agent read the whole line before ending");
    assert!(err.contains("more than a message may have") && err.contains("restored"), "{err}");
}

#[test]
fn one_agent_per_host() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = agent(dir.path(), "20s");
    a.hello();
    let b = agent(dir.path(), "20s");
    let h = b.next();
    assert!(h["refused"].as_str().is_some_and(|r| r.contains("another rtlab agent")), "{h}");
    let (code, _) = b.end(Duration::from_secs(10));
    assert_eq!(code, Some(2));
    a.send(json!({"type": "bye"}));
    a.end(Duration::from_secs(10));
}

fn rt_runtime() -> String {
    std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap().trim().to_string()
}

/// One test changes the machine's RT runtime: the others never look at it.
#[test]
fn a_far_profile_is_restored_on_silence_and_after_a_kill() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!(
            "needs root (a profile changes /proc/sys/kernel/sched_rt_runtime_us)"
        ));
        return;
    }
    let before = rt_runtime();
    // raised (this kernel refuses to lower it below what its deadline servers reserve)
    let changed: i64 = match before.parse::<i64>().unwrap() {
        -1 => 950_000,
        v => v + 1_000,
    };
    let profile = json!({"kind": "profile", "name": "test", "rt_cpu": null,
        "profile": {"description": "test", "rt_runtime_us": changed}});

    // silence: the agent restores, then ends
    let dir = tempfile::tempdir().unwrap();
    let mut a = agent(dir.path(), "2s");
    a.hello();
    let r = a.request(1, profile.clone());
    assert!(r["Ok"].is_object(), "{r}");
    assert_eq!(rt_runtime(), changed.to_string(), "{r}");
    let (code, _) = a.end(Duration::from_secs(20));
    assert_eq!(code, Some(1));
    assert_eq!(rt_runtime(), before, "restored when the near side fell silent");

    // kill -9: the change stays journaled; the next agent restores it before its hello
    let mut a = agent(dir.path(), "20s");
    a.hello();
    let r = a.request(1, profile);
    assert!(r["Ok"].is_object(), "{r}");
    assert_eq!(rt_runtime(), changed.to_string(), "{r}");
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    assert_eq!(rt_runtime(), changed.to_string(), "a killed agent restores nothing itself");
    let mut b = agent(dir.path(), "20s");
    let h = b.hello();
    assert!(h["restored"].as_str().is_some_and(|r| r.contains("restored")), "{h}");
    assert_eq!(rt_runtime(), before, "restored by the next agent's start");
    b.send(json!({"type": "bye"}));
    let (code, _) = b.end(Duration::from_secs(10));
    assert_eq!(code, Some(0));
}
