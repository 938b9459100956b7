//! The kernel's evidence of an interval, kept for every interval and explained for a worst
//! one: what the kernel counted (IRQs, softirqs, ksoftirqd, context switches, steal) and the
//! threads that ran on the canary's CPU, by the CPU time they took in it.
//!
//! Contract: [`Evidence::interval`] is called once at each interval's end; it reads
//! /proc's counters and every thread's run time (`/proc/PID/task/TID/schedstat`) and CPU
//! (`stat` field 39), and returns what changed since the last call. A thread that ended within
//! the interval is not seen (its run time went with it): said in the worst case's note.

use rtlab_core::evidence::KernelCounters;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// A thread that ran in an interval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ran {
    pub pid: i32,
    pub tid: i32,
    pub comm: String,
    /// Its CPU when the interval ended.
    pub cpu: Option<usize>,
    /// CPU time it took in the interval, ns.
    pub ran_ns: u64,
    /// Its policy (`SCHED_FIFO` ...), when not SCHED_OTHER.
    pub policy: Option<String>,
    pub priority: i64,
    /// A real-time thread at or above the canary's priority: it preempts the canary.
    pub could_preempt: bool,
}

/// One interval's kernel evidence.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalEvidence {
    pub counters: KernelCounters,
    /// The busiest threads on the CPU asked for (every CPU when none), most run time first.
    pub threads: Vec<Ran>,
}

#[derive(Default)]
pub struct Evidence {
    counters: Option<KernelCounters>,
    runtime: HashMap<i32, u64>,
}

/// A thread now.
struct Task {
    pid: i32,
    tid: i32,
    comm: String,
    cpu: Option<usize>,
    run_ns: u64,
    policy: i64,
    rt_priority: i64,
}

/// Every thread now.
fn threads() -> Vec<Task> {
    let mut v = Vec::new();
    for p in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        for t in std::fs::read_dir(p.path().join("task")).into_iter().flatten().flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let run = std::fs::read_to_string(t.path().join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse::<u64>().ok()));
            let Some(run) = run else { continue };
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            // comm is in parentheses and may hold spaces: the fields after the last ')'
            let (comm, rest) = match (stat.find('('), stat.rfind(')')) {
                (Some(a), Some(b)) if b > a => (stat[a + 1..b].to_string(), &stat[b + 1..]),
                _ => continue,
            };
            let f: Vec<&str> = rest.split_whitespace().collect();
            // rest starts at field 3 (state): field N is f[N - 3]
            let num = |n: usize| f.get(n - 3).and_then(|x| x.parse::<i64>().ok());
            let cpu = num(39).and_then(|c| usize::try_from(c).ok());
            v.push(Task {
                pid,
                tid,
                comm,
                cpu,
                run_ns: run,
                policy: num(41).unwrap_or(0),
                rt_priority: num(40).unwrap_or(0),
            });
        }
    }
    v
}

fn policy_name(p: i64) -> Option<String> {
    match p {
        1 => Some("SCHED_FIFO".into()),
        2 => Some("SCHED_RR".into()),
        6 => Some("SCHED_DEADLINE".into()),
        _ => None,
    }
}

impl Evidence {
    /// What changed since the last call (the first call: since the machine started), the
    /// threads on `cpu` (every CPU when None) but `exclude`, the `keep` most suspect: those
    /// that preempt a thread of real-time priority `preempt_at` first (any real-time thread
    /// preempts one of SCHED_OTHER: None), then by the CPU time they took.
    pub fn interval(
        &mut self,
        cpu: Option<usize>,
        preempt_at: Option<i64>,
        exclude: &[i32],
        keep: usize,
    ) -> IntervalEvidence {
        let now = rtlab_evidence::counters::read_counters(crate::host::host());
        let counters = match &self.counters {
            Some(before) => before.delta(&now),
            None => now.clone(),
        };
        self.counters = Some(now);
        let mut ran = Vec::new();
        let mut runtime = HashMap::new();
        for Task { pid, tid, comm, cpu: on, run_ns: run, policy, rt_priority: prio } in threads() {
            runtime.insert(tid, run);
            let before = self.runtime.get(&tid).copied().unwrap_or(0);
            let d = run.saturating_sub(before);
            if d > 0 && (cpu.is_none() || on == cpu) && !exclude.contains(&tid) {
                let policy = policy_name(policy);
                // a real-time thread's priority: its rt_priority (stat field 40)
                let priority = if policy.is_some() { prio } else { 0 };
                let could_preempt = policy.is_some() && preempt_at.map_or(true, |p| p <= priority);
                ran.push(Ran {
                    pid,
                    tid,
                    comm,
                    cpu: on,
                    ran_ns: d,
                    policy,
                    priority,
                    could_preempt,
                });
            }
        }
        self.runtime = runtime;
        ran.sort_by_key(|r| std::cmp::Reverse((r.could_preempt, r.ran_ns)));
        ran.truncate(keep);
        IntervalEvidence { counters, threads: ran }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_threads_own_work_shows_in_the_next_interval() {
        let mut e = Evidence::default();
        let first = e.interval(None, None, &[], 10_000);
        assert!(!first.threads.is_empty());
        // spin ~30 ms of CPU on this thread
        let t0 = std::time::Instant::now();
        let mut x = 0u64;
        while t0.elapsed() < std::time::Duration::from_millis(30) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let tid = rtlab_sys::tasks::gettid();
        let next = e.interval(None, None, &[], 10_000);
        let me = next.threads.iter().find(|r| r.tid == tid).expect("this thread ran");
        assert!(me.ran_ns > 0, "{me:?}");
        assert_eq!(me.pid, std::process::id() as i32);
    }
}
