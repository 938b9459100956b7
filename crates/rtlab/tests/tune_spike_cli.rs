//! `rtlab timer --trace-on-spike` through the binary: a SCHED_FIFO 90 hog on the timer's CPU
//! for a known 20 ms must be named in the explanation, and tracefs must be back as found.
//! The spike test needs root (tracefs, SCHED_FIFO); CI runs as root.

use rtlab_sys::sched::{spawn_rt, Policy, ThreadSpec};
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

fn rtlab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rtlab"))
}

#[test]
fn tune_spike_bad_threshold_is_one_line_and_exit_2() {
    for (v, want) in [("0s", "--trace-on-spike 0s: must be above zero"), ("soon", "--trace-on-spike")] {
        let o = rtlab().args(["timer", "--loops", "1", "--policy", "other", "--trace-on-spike", v]).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(want), "{stderr}");
    }
}

#[test]
fn tune_spike_root_timer_names_a_fifo_hog() {
    if !rtlab_sys::tune_sys::is_root() {
        eprintln!("skipped: needs root (CI runs as root)");
        return;
    }
    let (online, _) = rtlab_sys::cpus::online_cpus(std::path::Path::new("/"));
    let cpu = *online.last().unwrap();
    let host = rtlab_tune::host::RealHost::new();
    let before = rtlab_tune::snapshot::take(&host, None);
    let mut child = rtlab()
        .args(["timer", "--cpus", &cpu.to_string(), "--priority", "80", "--duration", "3s", "--trace-on-spike", "5ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap(); // printed once the tracer is armed
    assert!(first.starts_with("rtlab timer:"), "{first}");
    std::thread::sleep(Duration::from_millis(500));
    let hog = spawn_rt(&ThreadSpec { name: "rtlab-hog".into(), policy: Policy::Fifo, priority: 90, cpus: Some(vec![cpu]), stack_bytes: 256 * 1024 }, || {
        let end = rtlab_sys::clock::monotonic_ns() + 20_000_000;
        while rtlab_sys::clock::monotonic_ns() < end {
            std::hint::spin_loop();
        }
    })
    .unwrap();
    hog.join().unwrap();
    let mut text = String::new();
    out.read_to_string(&mut text).unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(status.code(), Some(0), "{text}{err}");
    assert!(text.contains("spike evidence (--trace-on-spike 5000 us)"), "{text}");
    assert!(text.lines().any(|l| l.contains("preempted by pid ") && l.contains("(rtlab-hog, kernel prio 9) for ")), "the hog is not named:\n{text}");
    assert!(text.contains("trace saved: "), "{text}");
    assert!(text.contains("window ") && text.contains("counters: NET_RX"), "{text}");
    let diff = before.diff(&rtlab_tune::snapshot::take(&host, None));
    assert!(diff.is_empty(), "tracefs not restored:\n{}", diff.join("\n"));
    assert!(!std::path::Path::new(rtlab_tune::spike::DEFAULT_TRACE_JOURNAL).exists());
    // kept when an assertion above fails, for a look
    if let Some(f) = text.lines().find_map(|l| l.trim().strip_prefix("trace saved: ")) {
        let _ = std::fs::remove_file(f);
    }
}
