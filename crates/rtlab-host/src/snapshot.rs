//! A snapshot of everything a profile or the tracer may change, to prove a restore left the
//! machine exactly as it was found (tests, and `rtlab tune snapshot` for users who want to
//! check by hand).
//!
//! Contract: read-only. Tasks are keyed by (tid, start time) and compared only when present
//! in both snapshots (other programs start and end meanwhile).

use crate::host::Host;
use std::collections::BTreeMap;

/// A task's settings: (comm, policy, priority, CPUs, cpuset).
pub type TaskSettings = (String, i32, i32, Vec<usize>, String);

/// What the machine looks like.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub files: BTreeMap<String, String>,
    /// (tid, start time) -> (comm, policy, priority, CPUs, cpuset)
    pub tasks: BTreeMap<(i32, u64), TaskSettings>,
    pub cpusets: Vec<String>,
    pub qdiscs: String,
    pub tracefs_mounts: Vec<String>,
    pub cpu_dma_latency: Option<i32>,
}

fn list_dir(host: &dyn Host, p: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(host.path(p))
        .map(|rd| rd.flatten().filter_map(|e| e.file_name().to_str().map(String::from)).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Take a snapshot; `netns` adds that namespace's qdiscs.
pub fn take(host: &dyn Host, netns: Option<&str>) -> Snapshot {
    let mut s = Snapshot::default();
    let mut file = |p: String| {
        if let Ok(v) = host.read(&p) {
            s.files.insert(p, v.trim().to_string());
        }
    };
    file("/proc/sys/kernel/sched_rt_runtime_us".into());
    file("/proc/irq/default_smp_affinity".into());
    for irq in list_dir(host, "/proc/irq") {
        file(format!("/proc/irq/{irq}/smp_affinity"));
    }
    for cpu in list_dir(host, "/sys/devices/system/cpu")
        .into_iter()
        .filter(|c| c.starts_with("cpu") && c[3..].parse::<u32>().is_ok())
    {
        file(format!("/sys/devices/system/cpu/{cpu}/cpufreq/scaling_governor"));
    }
    for f in ["cpuset.sched_load_balance", "cpuset.cpus", "cpuset.mems"] {
        file(format!("/sys/fs/cgroup/cpuset/{f}"));
    }
    let v2 = crate::host::cgroup2_mount(host);
    if let Some(m) = &v2 {
        file(format!("{m}/cgroup.subtree_control"));
    }
    for f in ["tracing_on", "current_tracer", "buffer_size_kb", "events/enable", "trace_options"] {
        file(format!("/sys/kernel/tracing/{f}"));
    }
    s.cpusets = list_dir(host, "/sys/fs/cgroup/cpuset")
        .into_iter()
        .filter(|d| host.path(&format!("/sys/fs/cgroup/cpuset/{d}")).is_dir())
        .collect();
    // cgroup v2: only rtlab's own cgroup (systemd makes and removes others all the time)
    if let Some(rt) = v2.map(|m| format!("{m}/rtlab-rt")).filter(|rt| host.path(rt).is_dir()) {
        s.cpusets.push(rt);
    }
    for pid in list_dir(host, "/proc").into_iter().filter_map(|p| p.parse::<i32>().ok()) {
        for tid in list_dir(host, &format!("/proc/{pid}/task"))
            .into_iter()
            .filter_map(|t| t.parse::<i32>().ok())
        {
            let Some(t) = crate::journal::task_identity(host, tid) else { continue };
            let (Ok((pol, prio)), Ok(cpus)) = (host.sched_get(tid), host.affinity_get(tid)) else {
                continue;
            };
            let cpuset = host.read(&format!("/proc/{pid}/task/{tid}/cpuset")).unwrap_or_default();
            s.tasks
                .insert((tid, t.start_time), (t.comm, pol, prio, cpus, cpuset.trim().to_string()));
        }
    }
    s.qdiscs = host.run(&["tc".into(), "qdisc".into(), "show".into()]).unwrap_or_default();
    if let Some(ns) = netns {
        s.qdiscs.push_str(
            &host
                .run(&["tc".into(), "-n".into(), ns.into(), "qdisc".into(), "show".into()])
                .unwrap_or_default(),
        );
    }
    s.tracefs_mounts = host
        .read("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.split_whitespace().nth(2) == Some("tracefs"))
        .map(String::from)
        .collect();
    s.cpu_dma_latency =
        rtlab_sys::pmqos::CpuDmaLatency::current(&host.path("/dev/cpu_dma_latency")).ok();
    s
}

impl Snapshot {
    /// Every difference to `later`, one line each (empty: the same machine).
    pub fn diff(&self, later: &Snapshot) -> Vec<String> {
        let mut d = Vec::new();
        let keys: std::collections::BTreeSet<&String> =
            self.files.keys().chain(later.files.keys()).collect();
        for k in keys {
            let (a, b) = (self.files.get(k), later.files.get(k));
            if a != b {
                d.push(format!("{k}: {a:?} -> {b:?}"));
            }
        }
        for (key, a) in &self.tasks {
            if let Some(b) = later.tasks.get(key) {
                // a kworker's comm names its current work: compare the settings only. An IRQ
                // thread's CPUs are the kernel's: they follow its IRQ's affinity (compared
                // above, /proc/irq/N/smp_affinity), applied when the thread next runs (seen:
                // irq/24-ACPI:Ged on [0] before a profile, [0, 1] after its restore put the
                // IRQ's mask back, until that rare IRQ fires): its CPUs are not compared
                let irq_thread = a.0.starts_with("irq/");
                let cpus_differ = a.3 != b.3 && !irq_thread;
                if (a.1, a.2, &a.4) != (b.1, b.2, &b.4) || cpus_differ {
                    d.push(format!(
                        "task {} ({}): {:?} -> {:?}",
                        key.0,
                        a.0,
                        (a.1, a.2, &a.3, &a.4),
                        (b.1, b.2, &b.3, &b.4)
                    ));
                }
            }
        }
        if self.cpusets != later.cpusets {
            d.push(format!("cpusets: {:?} -> {:?}", self.cpusets, later.cpusets));
        }
        if self.qdiscs != later.qdiscs {
            d.push(format!("qdiscs:\n{}\n->\n{}", self.qdiscs, later.qdiscs));
        }
        if self.tracefs_mounts != later.tracefs_mounts {
            d.push(format!(
                "tracefs mounts: {:?} -> {:?}",
                self.tracefs_mounts, later.tracefs_mounts
            ));
        }
        if self.cpu_dma_latency != later.cpu_dma_latency {
            d.push(format!(
                "cpu_dma_latency: {:?} -> {:?}",
                self.cpu_dma_latency, later.cpu_dma_latency
            ));
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(comm: &str, cpus: Vec<usize>, prio: i32) -> Snapshot {
        let mut s = Snapshot::default();
        s.tasks.insert((50, 7), (comm.into(), 1, prio, cpus, "/".into()));
        s
    }

    #[test]
    fn an_irq_threads_cpus_are_the_kernels_but_its_priority_is_compared() {
        let before = with("irq/24-ACPI:Ged", vec![0], 50);
        assert!(before.diff(&with("irq/24-ACPI:Ged", vec![0, 1], 50)).is_empty());
        assert_eq!(before.diff(&with("irq/24-ACPI:Ged", vec![0], 90)).len(), 1);
        // any other task's CPUs are compared
        let app = with("app", vec![0], 50);
        assert_eq!(app.diff(&with("app", vec![0, 1], 50)).len(), 1);
    }
}
