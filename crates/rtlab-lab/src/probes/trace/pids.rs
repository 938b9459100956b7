//! `rtlab trace --pid`: processes that run already, through uprobes on the libtracetools each
//! maps (rtlab-evidence `uprobe`), read every 10 ms until the duration passes, rtlab is
//! stopped or every process ended; the probes removed (journaled) however it ends.

use crate::config::ConfigError;
use crate::error::LabError;
use rtlab_evidence::uprobe;
use rtlab_pubsub::trace::run::{Ended, TraceOutcome, Traced, MAX_EVENTS};
use rtlab_pubsub::trace::uprobe::{events, parse, Hit};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub(crate) fn tgid_of(tid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    s.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
}

fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_string()
}

/// Probe the processes `pids` for `duration` (None: until stopped or they all end).
pub fn probe(
    pids: &[i32],
    duration: Option<Duration>,
    stop: &AtomicBool,
) -> Result<TraceOutcome, LabError> {
    let host = crate::host::host();
    let mut libs: Vec<PathBuf> = Vec::new();
    for &pid in pids {
        let lib = uprobe::find_lib(host, pid)
            .map_err(|m| LabError::Config(ConfigError::new("pid", m)))?;
        if !libs.contains(&lib) {
            libs.push(lib);
        }
    }
    let comms: HashMap<i32, String> = pids.iter().map(|&p| (p, comm(p))).collect();
    let mut probes =
        uprobe::attach(host, std::path::Path::new(uprobe::DEFAULT_UPROBE_JOURNAL), &libs).map_err(
            |e| match e.missing() {
                Some(m) => LabError::Missing(m.clone()),
                None => LabError::Failed(format!("uprobes: {e}")),
            },
        )?;
    let start_monotonic_ns = rtlab_sys::clock::monotonic_ns();
    let began = Instant::now();
    let (mut lines, mut hits): (Vec<String>, Vec<Hit>) = (Vec::new(), Vec::new());
    let mut not_kept = 0u64;
    let ended = loop {
        probes.read(&mut lines);
        for l in lines.drain(..) {
            match parse(&l) {
                Some(h) if hits.len() < MAX_EVENTS => hits.push(h),
                Some(_) => not_kept += 1,
                None => {}
            }
        }
        if duration.is_some_and(|d| began.elapsed() >= d) {
            break Ended::Duration("still running".into());
        }
        if stop.load(Ordering::Relaxed) {
            break Ended::Stopped("still running".into());
        }
        if pids.iter().all(|p| !std::path::Path::new(&format!("/proc/{p}")).exists()) {
            break Ended::Exited("every process ended".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    probes.read(&mut lines);
    hits.extend(lines.drain(..).filter_map(|l| parse(&l)));
    let end_monotonic_ns = rtlab_sys::clock::monotonic_ns();
    let overruns = probes.overruns(host);
    let report = probes.detach();
    if !report.is_clean() {
        let what: Vec<String> = report.failed.iter().map(|(d, e)| format!("{d}: {e}")).collect();
        return Err(LabError::Failed(format!("uprobes: not all put back: {}", what.join("; "))));
    }
    let mut cache: HashMap<i32, Option<i32>> = HashMap::new();
    let mut tgid = |t: i32| *cache.entry(t).or_insert_with(|| tgid_of(t));
    let per = events(&hits, &mut tgid, pids);
    let processes = pids
        .iter()
        .map(|&pid| Traced {
            pid,
            comm: comms.get(&pid).cloned().unwrap_or_default(),
            events: per.iter().find(|p| p.pid == pid).map_or(0, |p| p.events.len() as u64),
            ..Traced::default()
        })
        .collect();
    let mut notes = vec![format!(
        "read through uprobes on {} (each hit a trap into the kernel: a few microseconds more per message than the interposer); publishers and subscriptions are named by their topics, nodes by their processes (their init events came before the probes)",
        libs.iter().map(|l| l.display().to_string()).collect::<Vec<_>>().join(", ")
    )];
    if overruns > 0 {
        notes.push(format!("the tracefs buffer lost {overruns} events (overruns): the messages they were are missing"));
    }
    Ok(TraceOutcome {
        processes,
        events: per,
        ended,
        not_kept,
        start_monotonic_ns,
        end_monotonic_ns,
        notes,
    })
}
