//! A step of a profile's plan: where the profile is applied ([`Target`]), what one step
//! changes or why it is skipped ([`Step`]), what it reports, and the reads the steps share.

use rtlab_core::rt::Policy;
use rtlab_host::host::Host;
use rtlab_host::session::Action;
use serde::Serialize;

/// Where a profile is applied.
#[derive(Clone, Debug, Default)]
pub struct Target {
    /// The CPU for real-time work (None: the last online CPU).
    pub rt_cpu: Option<usize>,
    /// The NIC (None: the default route's interface).
    pub nic: Option<String>,
    /// The network namespace of the NIC (a test veth).
    pub netns: Option<String>,
    /// Processes that get the application settings (all their threads).
    pub pids: Vec<i32>,
    /// Threads of those left as they are (rtlab's case supervisor, which must keep running
    /// beside a case that spins at the application's priority on its CPU).
    pub keep: Vec<i32>,
}

/// One step of a plan: actions tried in order (alternatives: the first that works), or a skip.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    pub what: String,
    /// Alternatives, each a (label, actions) pair; the first whose first action succeeds is kept.
    pub alternatives: Vec<(String, Vec<Action>)>,
    /// Why nothing is done (the step does not apply here).
    pub skip: Option<String>,
    /// A note shown with the step (e.g. the SO_PRIORITY map).
    pub note: Option<String>,
    /// What is measured after the actions and added to the outcome.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<Report>,
}

/// A measurement made after a step's actions (read-only), one line in its outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Report {
    /// The tasks outside a cgroup (its `cgroup.procs`) whose affinity (/proc/PID/task/TID/status
    /// `Cpus_allowed_list`) still holds any of `cpus`: what could not move off them.
    TasksStillOn { cpus: Vec<usize>, cgroup_procs: String },
}

impl Report {
    /// Measure now.
    pub fn run(&self, host: &dyn Host) -> String {
        match self {
            Report::TasksStillOn { cpus, cgroup_procs } => {
                let inside: Vec<i32> = host
                    .read(cgroup_procs)
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect();
                let dir = cgroup_procs.trim_end_matches("/cgroup.procs");
                let (read, still) = tasks_on(host, cpus, &inside);
                if read == 0 {
                    return format!("no /proc/PID/status could be read: cannot tell which tasks still run on CPUs {}", rtlab_host::cpu_list(cpus));
                }
                if still.is_empty() {
                    return format!(
                        "no task outside {dir} can run on CPUs {} any more",
                        rtlab_host::cpu_list(cpus)
                    );
                }
                let names: Vec<String> =
                    still.iter().map(|(tid, comm)| format!("{comm} ({tid})")).collect();
                format!(
                    "{} tasks outside {dir} can still run on CPUs {} (they cannot move: per-CPU kernel threads keep their CPU): {}",
                    still.len(),
                    rtlab_host::cpu_list(cpus),
                    rtlab_host::session::abbreviate(&names, 8)
                )
            }
        }
    }
}

/// (tasks whose status was read, (tid, name) of those allowed on any of `cpus`), leaving out
/// the processes `except` and their threads.
fn tasks_on(host: &dyn Host, cpus: &[usize], except: &[i32]) -> (usize, Vec<(i32, String)>) {
    let mut pids: Vec<i32> = std::fs::read_dir(host.path("/proc"))
        .map(|rd| rd.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    pids.sort_unstable();
    let (mut read, mut still) = (0, Vec::new());
    for pid in pids.into_iter().filter(|p| !except.contains(p)) {
        for tid in threads_of(host, pid) {
            let status = host
                .read(&format!("/proc/{pid}/task/{tid}/status"))
                .or_else(|_| host.read(&format!("/proc/{pid}/status")));
            let Ok(status) = status else { continue };
            let field = |k: &str| {
                status.lines().find_map(|l| l.strip_prefix(k)).map(|v| v.trim().to_string())
            };
            let Some(allowed) =
                field("Cpus_allowed_list:").and_then(|l| rtlab_sys::cpus::parse_cpu_list(&l).ok())
            else {
                continue;
            };
            read += 1;
            if allowed.iter().any(|c| cpus.contains(c)) {
                still.push((tid, field("Name:").unwrap_or_default()));
            }
        }
    }
    (read, still)
}

impl Step {
    pub(super) fn act(what: impl Into<String>, actions: Vec<Action>) -> Step {
        Step {
            what: what.into(),
            alternatives: vec![(String::new(), actions)],
            skip: None,
            note: None,
            report: None,
        }
    }
    pub(super) fn skip(what: impl Into<String>, why: impl Into<String>) -> Step {
        Step {
            what: what.into(),
            alternatives: vec![],
            skip: Some(why.into()),
            note: None,
            report: None,
        }
    }
    pub(super) fn note(mut self, n: impl Into<String>) -> Step {
        self.note = Some(n.into());
        self
    }
}

pub(super) fn resolve_cpus(sel: &str, rt: usize, online: &[usize]) -> Vec<usize> {
    match sel {
        "rt" => vec![rt],
        "others" => online.iter().copied().filter(|&c| c != rt).collect(),
        list => rtlab_sys::cpus::parse_cpu_list(list).unwrap_or_default(),
    }
}

/// The raw policy number of sched_setscheduler(2).
pub(super) fn policy_raw(p: Policy) -> i32 {
    match p {
        Policy::Fifo => 1,
        Policy::Rr => 2,
        Policy::Other => 0,
    }
}

/// Threads of a process (/proc/PID/task).
pub fn threads_of(host: &dyn Host, pid: i32) -> Vec<i32> {
    let mut v: Vec<i32> = std::fs::read_dir(host.path(&format!("/proc/{pid}/task")))
        .map(|rd| rd.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    if v.is_empty() && host.exists(&format!("/proc/{pid}")) {
        v.push(pid);
    }
    v.sort_unstable();
    v
}
