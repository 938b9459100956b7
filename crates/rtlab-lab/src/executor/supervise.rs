//! The supervisor above every case: the case runs on a thread of its own (`rtlab-case`)
//! while the executor's thread watches the clock and the run's stop flag.
//!
//! - A case that outlasts its plan by the overrun margin (`rtlab run --overrun`, default
//!   60 s + half the plan: middleware start-up and the far side are not in a plan) is asked
//!   to stop; a stopped run (Ctrl-C, SIGTERM) asks the same at once.
//! - [`GRACE`] later, if it has not ended, every real-time thread of rtlab is put back to
//!   the policy it had before the case, and those of the processes it started (role
//!   processes, agents) to SCHED_OTHER: a livelock at SCHED_FIFO, such as Fast DDS's
//!   `dds.asyn` spinning on every CPU, ends there and the case can see its stop flag.
//! - [`GRACE`] after that it is left behind: its processes (loads, roles, agents) are
//!   killed, its profile and tracer journals restored, its namespaces removed, and its thread
//!   disarmed (if it ever returns, its guards leave alone what the supervisor put back).
//!
//! A case stopped for overrunning is `hung` in the result, with the threads that were
//! running when it was asked to stop; its document, when it returned one, is kept. So a run
//! always ends, and SIGTERM ends it within 2 x [`GRACE`] plus the case's own stop.

use super::live::{run_here, LiveExecutor};
use super::marks::{abandon, set_supervisor};
use crate::runner::CaseResult;
use crate::scenario::CaseSpec;
use rtlab_core::run::CaseStatus;
use rtlab_sys::tasks::{restore_own_threads, OwnThreads};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a case asked to stop has to end, before its real-time threads are put back to
/// SCHED_OTHER, and as long again before it is left behind.
pub const GRACE: Duration = Duration::from_secs(5);

/// How much longer than its plan a case may run by default.
pub fn default_overrun(planned: Duration) -> Duration {
    Duration::from_secs(60) + planned / 2
}

/// Why the case was asked to stop.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Asked {
    Overran,
    RunStopped,
}

pub(super) fn run(
    exec: &mut LiveExecutor,
    case: &CaseSpec,
    run_stop: &Arc<AtomicBool>,
) -> CaseResult {
    let planned = Duration::from_nanos(case.planned_ns().max(0) as u64);
    let overrun = exec.overrun.unwrap_or_else(|| default_overrun(planned));
    let case_stop = Arc::new(AtomicBool::new(false));
    let before = OwnThreads::now();
    set_supervisor(rtlab_sys::tasks::gettid());
    struct Unset;
    impl Drop for Unset {
        fn drop(&mut self) {
            set_supervisor(0);
        }
    }
    let _unset = Unset;
    let (tx, rx) = mpsc::channel();
    let mut progress = exec.on_progress.take();
    let (online, trace_dir, owned) = (exec.online.clone(), exec.trace_dir.clone(), case.clone());
    let stop = case_stop.clone();
    exec.pairs += 1;
    let pair_name = format!("rtlab{}c{}", std::process::id() % 100_000, exec.pairs % 100);
    let pair = pair_name.clone();
    let spawned = std::thread::Builder::new().name("rtlab-case".into()).spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_here(&online, &trace_dir, progress.as_mut(), &owned, &stop, &pair)
        }))
        .unwrap_or_else(|_| {
            CaseResult::failed("the case panicked (a bug in rtlab: please report it)")
        });
        let _ = tx.send((r, progress));
    });
    let handle = match spawned {
        Ok(h) => h,
        Err(e) => return CaseResult::failed(format!("starting the case's thread: {e}")),
    };
    let started = Instant::now();
    let mut asked: Option<(Instant, Asked, String)> = None;
    let mut demoted = false;
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok((mut r, progress)) => {
                exec.on_progress = progress;
                if let Some((_, Asked::Overran, threads)) = &asked {
                    let how = if demoted {
                        "it ended once its real-time threads were put to SCHED_OTHER"
                    } else {
                        "it ended when asked to stop"
                    };
                    r.status =
                        Some(CaseStatus::Hung { error: hung_text(planned, overrun, how, threads) });
                }
                let _ = handle.join();
                return r;
            }
            Err(RecvTimeoutError::Disconnected) => {
                return CaseResult::failed("the case's thread ended without a result");
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
        if asked.is_none() {
            let why = if run_stop.load(Ordering::Relaxed) {
                Some(Asked::RunStopped)
            } else if started.elapsed() > planned + overrun {
                Some(Asked::Overran)
            } else {
                None
            };
            if let Some(w) = why {
                asked = Some((Instant::now(), w, running_threads()));
                case_stop.store(true, Ordering::Relaxed);
            }
        }
        let Some((at, why, threads)) = &asked else { continue };
        if !demoted && at.elapsed() > GRACE {
            // the case thread and whatever it made are new since `before`: back to the
            // policy this process ran with (a FIFO livelock ends here)
            let _ = restore_own_threads(&before);
            demote_children();
            demoted = true;
        }
        if demoted && at.elapsed() > 2 * GRACE {
            abandon(handle.thread().id());
            let cleanup = put_back(&pair_name);
            let how =
                format!(
                "it did not end: left behind ({}; its processes killed, its profile put back{})",
                "its real-time threads had been put to SCHED_OTHER",
                if cleanup.is_empty() { String::new() } else { format!("; {}", cleanup.join("; ")) }
            );
            return match why {
                Asked::Overran => CaseResult {
                    status: Some(CaseStatus::Hung {
                        error: hung_text(planned, overrun, &how, threads),
                    }),
                    ..Default::default()
                },
                // the runner marks the case interrupted (the run's stop flag is up)
                Asked::RunStopped => CaseResult::default(),
            };
        }
    }
}

fn hung_text(planned: Duration, overrun: Duration, how: &str, threads: &str) -> String {
    let d = |d: Duration| {
        rtlab_core::units::format_duration_exact(rtlab_core::units::Nanos(d.as_nanos() as i64))
    };
    format!(
        "ran {} past its plan of {} (the margin, --overrun) and was asked to stop: {how}; running then: {threads}",
        d(overrun),
        d(planned)
    )
}

/// This process's threads that were running or real-time when the case was asked to stop:
/// name, policy and priority, CPU time.
fn running_threads() -> String {
    let me = std::process::id();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten() {
        let tid = e.file_name().to_string_lossy().to_string();
        let stat =
            std::fs::read_to_string(format!("/proc/{me}/task/{tid}/stat")).unwrap_or_default();
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 2..]) else { continue };
        let f: Vec<&str> = after.split_whitespace().collect();
        let (state, utime, stime) = (f.first().copied().unwrap_or("?"), f.get(11), f.get(12));
        let ticks: u64 = utime.and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
            + stime.and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
        let (policy, prio) =
            rtlab_sys::tasks::sched_get(tid.parse().unwrap_or(0)).unwrap_or((0, 0));
        let policy = match rtlab_sys::sched::base_policy(policy) {
            1 => "fifo",
            2 => "rr",
            _ => "other",
        };
        if state != "R" && policy == "other" {
            continue;
        }
        let comm =
            std::fs::read_to_string(format!("/proc/{me}/task/{tid}/comm")).unwrap_or_default();
        out.push(format!(
            "{} ({policy} {prio}, {}, {:.1} s CPU)",
            comm.trim(),
            if state == "R" { "running" } else { "waiting" },
            ticks as f64 / 100.0
        ));
    }
    if out.is_empty() {
        "no thread running or real-time".into()
    } else {
        out.truncate(12);
        out.join(", ")
    }
}

/// This process's children (the processes a case starts: role processes, agents, loads).
fn children() -> Vec<(i32, Option<i32>)> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 2..]) else { continue };
        let f: Vec<&str> = after.split_whitespace().collect();
        if f.get(1).and_then(|p| p.parse::<i32>().ok()) == Some(me) {
            out.push((pid, f.get(2).and_then(|p| p.parse::<i32>().ok())));
        }
    }
    out
}

/// Every real-time thread of this process's children to SCHED_OTHER (a livelock between
/// rtlab and a role process it started, both at FIFO, ends only when both yield).
fn demote_children() {
    for (pid, _) in children() {
        for e in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
            let Ok(tid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
            if rtlab_sys::tasks::sched_get(tid).is_ok_and(|(p, _)| matches!(p & 0xff, 1 | 2)) {
                let _ = rtlab_sys::tasks::sched_set(tid, 0, 0);
            }
        }
    }
}

/// What a case left behind holds: its child processes killed, its journals restored, its
/// namespaces removed. Returns what could not be done.
fn put_back(pair_name: &str) -> Vec<String> {
    let mut left = Vec::new();
    for (pid, pgid) in children() {
        if pgid == Some(pid) {
            let _ = rtlab_sys::tasks::kill_group(pid, 9); // SIGKILL
        }
        let _ = rtlab_sys::tasks::kill_pid(pid, 9);
    }
    for journal in
        [rtlab_host::journal::DEFAULT_JOURNAL, rtlab_evidence::tracer::DEFAULT_TRACE_JOURNAL]
    {
        let path = std::path::Path::new(journal);
        match rtlab_host::journal::restore_journal(crate::host::host(), path) {
            Ok(r) if !r.is_clean() => {
                left.push(format!("{journal}: {} changes not put back", r.failed.len()))
            }
            Ok(_) => {}
            Err(e) => left.push(format!("{journal}: {e}")),
        }
    }
    for side in ["a", "b"] {
        let ns = format!("{pair_name}-{side}");
        if std::path::Path::new(&format!("/run/netns/{ns}")).exists() {
            let ok = std::process::Command::new("ip")
                .args(["netns", "del", &ns])
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                left.push(format!("namespace {ns} not removed"));
            }
        }
    }
    left
}
