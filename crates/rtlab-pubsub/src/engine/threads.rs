//! This process's threads: rtlab's own (their policy, priority and CPU, [`RtUse`]), the
//! middleware's (a SCHED_FIFO priority by thread name, [`apply_thread_priorities`]), and the
//! case's threads joined before their ports go ([`JoinOnDrop`]).
//!
//! Set-up only: nothing here runs in the measured phase.

use super::config::{RtSpec, ThreadPriority};
use rtlab_sys::clock::monotonic_ns;
use rtlab_sys::sched::{set_current_policy, ThreadSpec};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What the probe does with its real-time settings.
pub(super) trait RtUse {
    fn cpu(&self, slot: usize) -> Option<usize>;
    fn apply_policy_here(&self) -> Result<(), String>;
    fn spec(&self, name: &str, slot: usize) -> ThreadSpec;
}

impl RtUse for RtSpec {
    /// The CPU of app thread `slot` (0: sender, 1 + i: subscriber i).
    fn cpu(&self, slot: usize) -> Option<usize> {
        self.cpu_of(slot)
    }
    /// Set the calling thread's policy (so that threads it creates later inherit it).
    fn apply_policy_here(&self) -> Result<(), String> {
        if self.policy.is_realtime() {
            set_current_policy(self.policy, self.priority).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
    fn spec(&self, name: &str, slot: usize) -> ThreadSpec {
        ThreadSpec {
            name: name.into(),
            policy: self.policy,
            priority: self.priority,
            cpus: self.cpu(slot).map(|c| vec![c]),
            stack_bytes: 512 * 1024,
        }
    }
}

/// `rules`, and with `steps` (0 or below) a rule for each of `transport`'s own thread names
/// that far under the measuring threads' priority (optional: a name no thread has is
/// skipped).
pub fn with_middleware(
    rules: &[ThreadPriority],
    steps: Option<i32>,
    transport: &dyn crate::transport::Transport,
) -> Vec<ThreadPriority> {
    let mut v = rules.to_vec();
    if let Some(s) = steps {
        v.extend(transport.thread_names().iter().map(|n| ThreadPriority {
            name: n.to_string(),
            priority: s,
            optional: true,
        }));
    }
    v
}

/// Give this process's threads named by `rules` their SCHED_FIFO priority (through
/// util-linux `chrt -f -p`, once, before measuring), a relative rule under the measuring
/// threads' `rt` ([`ThreadPriority::resolve`]). Returns what was done, one line per thread
/// (and per relative rule left out at a normal policy); a rule that names no thread is an
/// error listing the threads there are.
pub fn apply_thread_priorities(
    rules: &[ThreadPriority],
    rt: &RtSpec,
) -> Result<Vec<String>, String> {
    let mut done = Vec::new();
    let mut resolved = Vec::new();
    for r in rules {
        match r.resolve(rt).map_err(|m| format!("--thread-priority {m}"))? {
            Some(priority) => resolved.push(ThreadPriority { priority, ..r.clone() }),
            None => done.push(format!(
                "--thread-priority {}={}: the measuring threads run at {}: the middleware's threads keep their policy",
                r.name,
                r.priority,
                rt.policy.name()
            )),
        }
    }
    let rules = resolved.as_slice();
    if rules.is_empty() {
        return Ok(done);
    }
    let list = || -> Result<Vec<(String, String)>, String> {
        let mut threads = Vec::new();
        for e in std::fs::read_dir("/proc/self/task")
            .map_err(|e| format!("/proc/self/task: {e}"))?
            .flatten()
        {
            let tid = e.file_name().to_string_lossy().to_string();
            if let Ok(comm) = std::fs::read_to_string(e.path().join("comm")) {
                threads.push((tid, comm.trim().to_string()));
            }
        }
        Ok(threads)
    };
    // libraries start some threads lazily (Cyclone's `recv` once discovery runs): give them 2 s
    let end = monotonic_ns() + 2_000_000_000;
    let mut threads = list()?;
    while !rules.iter().all(|r| r.optional || threads.iter().any(|(_, c)| c.starts_with(&r.name)))
        && monotonic_ns() < end
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
        threads = list()?;
    }
    for r in rules {
        let matched: Vec<&(String, String)> =
            threads.iter().filter(|(_, c)| c.starts_with(&r.name)).collect();
        if matched.is_empty() && r.optional {
            continue;
        }
        if matched.is_empty() {
            let mut names: Vec<&str> = threads.iter().map(|(_, c)| c.as_str()).collect();
            names.sort();
            names.dedup();
            return Err(format!(
                "--thread-priority {}={}: no thread named {} here (threads: {})",
                r.name,
                r.priority,
                r.name,
                names.join(", ")
            ));
        }
        for (tid, comm) in matched {
            let o = Command::new("chrt")
                .args(["-f", "-p", &r.priority.to_string(), tid])
                .output()
                .map_err(|e| format!("--thread-priority: running chrt (util-linux): {e}"))?;
            if !o.status.success() {
                return Err(format!(
                    "--thread-priority {}={}: chrt refused thread {comm} ({tid}): {}",
                    r.name,
                    r.priority,
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
            }
            done.push(format!("thread {comm} (tid {tid}) -> fifo {}", r.priority));
        }
    }
    Ok(done)
}

/// Threads of this process that use ports of the case, with their stop flag: an early
/// return (an error) stops and joins the ones still there, so that no port, transport or
/// library object goes while a thread is still inside a take (seen: a Fast DDS reader
/// freed at exit under a pong receiver, a segmentation fault). Normal paths take them out.
pub(super) struct JoinOnDrop<T> {
    pub(super) stop: Arc<AtomicBool>,
    pub(super) threads: Vec<rtlab_sys::sched::RtThread<T>>,
}
impl<T> JoinOnDrop<T> {
    pub(super) fn new(stop: &Arc<AtomicBool>) -> Self {
        JoinOnDrop { stop: stop.clone(), threads: Vec::new() }
    }
}
impl<T> Drop for JoinOnDrop<T> {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.stop.store(true, Ordering::Relaxed);
            for t in self.threads.drain(..) {
                let _ = t.join();
            }
        }
    }
}
