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
    // (tid, name, started): a thread not yet on a CPU still has its creator's name (a
    // library names its threads from inside them) and would be missed, then renamed at the
    // priority it inherited (seen in CI: Cyclone's `recv` behind busy real-time tests)
    let list = || -> Result<Vec<(String, String, bool)>, String> {
        let mut threads = Vec::new();
        for e in std::fs::read_dir("/proc/self/task")
            .map_err(|e| format!("/proc/self/task: {e}"))?
            .flatten()
        {
            let tid = e.file_name().to_string_lossy().to_string();
            if let Ok(comm) = std::fs::read_to_string(e.path().join("comm")) {
                let started = std::fs::read_to_string(e.path().join("schedstat"))
                    .map_or(true, |s| has_run(&s));
                threads.push((tid, comm.trim().to_string(), started));
            }
        }
        Ok(threads)
    };
    // libraries start some threads lazily (Cyclone's `recv` once discovery runs): give them 2 s
    let end = monotonic_ns() + 2_000_000_000;
    let mut threads = list()?;
    while !(rules.iter().all(|r| r.optional || threads.iter().any(|t| t.1.starts_with(&r.name)))
        && threads.iter().all(|t| t.2))
        && monotonic_ns() < end
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
        threads = list()?;
    }
    let threads: Vec<(String, String)> = threads.into_iter().map(|(t, c, _)| (t, c)).collect();
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

/// Whether a thread's `schedstat` (ns on a CPU, ns waiting, slices) says it has run.
fn has_run(schedstat: &str) -> bool {
    schedstat.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).is_none_or(|ns| ns > 0)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_has_run_once_its_schedstat_counts_time_on_a_cpu() {
        assert!(has_run("1234 5 1\n"));
        assert!(!has_run("0 0 0\n"), "created, never on a CPU");
        assert!(has_run(""), "unreadable: taken as started");
    }

    /// Found in CI: a library's thread created but not yet on a CPU (behind busy real-time
    /// threads) still has its creator's name, and was missed. Here a thread that names
    /// itself `rtlab-late` is created behind a SCHED_FIFO 99 spinner on its only CPU; the
    /// rule finds it once the spinner lets it run, and gives it its priority.
    #[test]
    fn root_a_thread_not_yet_on_a_cpu_is_waited_for_and_given_its_priority() {
        let cpus = rtlab_sys::sched::current_affinity();
        if !rtlab_sys::tasks::is_root() || cpus.len() < 2 {
            rtlab_sys::test_skip::skipped(format_args!(
                "needs root (SCHED_FIFO 99) and two CPUs (has {})",
                cpus.len()
            ));
            return;
        }
        let busy = cpus[cpus.len() - 1];
        let rest: Vec<usize> = cpus[..cpus.len() - 1].to_vec();
        // this thread stays off the busy CPU
        let here = std::thread::spawn(move || {
            rtlab_sys::sched::set_current_affinity(&rest).unwrap();
            let spinning = Arc::new(AtomicBool::new(false));
            let stop = Arc::new(AtomicBool::new(false));
            let spec = |name: &str| ThreadSpec {
                name: name.into(),
                policy: rtlab_sys::sched::Policy::Fifo,
                priority: 99,
                cpus: Some(vec![busy]),
                stack_bytes: 64 * 1024,
            };
            let spinner = rtlab_sys::sched::spawn_rt(&spec("rtlab-spinner"), {
                let (spinning, stop) = (spinning.clone(), stop.clone());
                move || {
                    spinning.store(true, Ordering::SeqCst);
                    let end = monotonic_ns() + 1_000_000_000;
                    while !stop.load(Ordering::Relaxed) && monotonic_ns() < end {}
                }
            })
            .unwrap();
            while !spinning.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            // made with its policy and CPU set before it starts, it names itself first
            let late_ends = Arc::new(AtomicBool::new(false));
            let late = rtlab_sys::sched::spawn_rt(&spec("rtlab-late"), {
                let late_ends = late_ends.clone();
                move || {
                    while !late_ends.load(Ordering::Relaxed) {
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                }
            })
            .unwrap();
            // the spinner gives the CPU up in 300 ms: the late thread runs then
            let release = std::thread::spawn({
                let stop = stop.clone();
                move || {
                    std::thread::sleep(std::time::Duration::from_millis(300));
                    stop.store(true, Ordering::Relaxed);
                }
            });
            let rule = ThreadPriority { name: "rtlab-late".into(), priority: 7, optional: true };
            let done = apply_thread_priorities(&[rule], &RtSpec::normal());
            stop.store(true, Ordering::Relaxed);
            release.join().unwrap();
            spinner.join().unwrap();
            let policy = rtlab_sys::usage::process_threads(std::process::id())
                .unwrap()
                .into_iter()
                .find(|t| t.comm == "rtlab-late")
                .map(|t| (t.policy, t.priority));
            late_ends.store(true, Ordering::Relaxed);
            late.join().unwrap();
            (done, policy)
        });
        let (done, policy) = here.join().unwrap();
        let done = done.unwrap();
        assert!(done.iter().any(|l| l.starts_with("thread rtlab-late (tid")), "{done:?}");
        assert_eq!(policy, Some(("fifo".to_string(), 7)));
    }
}
