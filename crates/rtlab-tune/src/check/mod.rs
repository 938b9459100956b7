//! `rtlab tune check`: how far this machine is from a real-time setup (S2 Table 3 and more),
//! each item pass/warn/fail/info with what was found and what to do.
//!
//! Contract: read-only; built on [`rtlab_sys::env::detect`] plus a few more reads under the
//! host's root, so it is tested on fake trees. What cannot be read says so (never a guess
//! reported as a pass). Sources: Documentation/admin-guide/kernel-parameters.txt,
//! Documentation/scheduler/sched-rt-group.rst, Documentation/admin-guide/mm/transhuge.rst,
//! Documentation/admin-guide/kernel-per-CPU-kthreads.rst (timer migration, watchdogs, vmstat,
//! workqueues), Documentation/admin-guide/lockup-watchdogs.rst. Privilege and RT group
//! scheduling come from [`rtlab_sys::rt_access`] for this process (`/proc/self` under the root).
//!
//! The rooms: the kernel, its boot options and the hardware in `kernel.rs`; real-time
//! scheduling (throttling, privilege, RT group scheduling) in `rt.rs`; what else runs on the
//! real-time CPUs (timers, watchdogs, workers, IRQs, softirqs, qdiscs) in `housekeeping.rs`.

mod housekeeping;
mod kernel;
mod rt;
mod status;

pub use status::{counts, running_comms, Check, Status};

use housekeeping::{irqbalance, ksoftirqd, qdiscs, timer_migration, vmstat, watchdogs, workqueue};
use kernel::{
    cpu_dma_latency, cstates, governor, preemption, smt, swap, thp, threaded_irqs, ticks, tracing,
    virtualization,
};
use rt::{rt_group_sched, rt_period, rt_privilege, rt_throttling};
use rtlab_host::host::Host;
use status::isolated_cpus;

/// Every check, in the order they are printed.
pub fn run_checks(host: &dyn Host) -> Vec<Check> {
    let env = rtlab_sys::env::detect(host.root());
    let mut out = preemption(&env);
    out.extend(ticks(&env));
    let isolated = isolated_cpus(&env);
    out.push(timer_migration(host));
    out.push(watchdogs(host, &isolated));
    out.push(vmstat(host, &isolated));
    out.push(workqueue(host, &isolated));
    out.push(governor(&env));
    out.push(cstates(host, &env));
    out.push(smt(host));
    out.push(rt_throttling(&env));
    let access = rtlab_sys::rt_access::RtAccess::detect(host.root(), None);
    out.push(rt_period(&access));
    out.push(rt_privilege(&access));
    out.push(rt_group_sched(&access));
    out.push(irqbalance(host));
    out.push(thp(host));
    out.push(swap(host));
    out.push(virtualization(&env));
    out.push(threaded_irqs(&env));
    out.push(ksoftirqd(host));
    out.extend(qdiscs(host));
    out.push(cpu_dma_latency(host));
    out.push(tracing(host));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_host::host::FakeHost;
    use rtlab_host::testing::put;
    use std::path::Path;

    fn row(root: &Path, id: &str) -> Check {
        run_checks(&FakeHost::new(root)).into_iter().find(|c| c.id == id).expect(id)
    }

    /// `tune check` as root in a systemd scope on an Ubuntu 24.04-like guest.
    fn ubuntu(r: &Path) {
        rtlab_host::testing::machine_v2(r);
        put(r, "proc/sys/kernel/osrelease", "6.8.0-45-generic\n");
        put(r, "boot/config-6.8.0-45-generic", "CONFIG_HZ=1000\nCONFIG_RT_GROUP_SCHED=y\n");
        put(r, "proc/self/status", "Uid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\n");
        put(r, "proc/self/limits", "Max realtime priority     0                    0\n");
        put(r, "proc/self/cgroup", "0::/system.slice/x.scope\n");
    }

    #[test]
    fn rt_group_sched_fails_for_a_scope_without_runtime_and_passes_at_the_root() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        ubuntu(r);
        let c = row(r, "rt-group-sched");
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(c.found.contains("on (kernel config: CONFIG_RT_GROUP_SCHED=y)"), "{}", c.found);
        assert!(c.found.contains("/system.slice/x.scope") && c.found.contains("even to root"));
        assert!(c.remedy.contains("echo $$ > /sys/fs/cgroup/cgroup.procs"), "{}", c.remedy);
        let p = row(r, "rt-privilege");
        assert_eq!(
            (p.status, p.found.as_str()),
            (Status::Pass, "root with CAP_SYS_NICE (rtprio limit 0)")
        );
        put(r, "proc/self/cgroup", "0::/\n");
        let c = row(r, "rt-group-sched");
        assert_eq!(c.status, Status::Pass, "{c:?}");
        assert!(c.found.ends_with("this process is in the root cgroup") && c.remedy.is_empty());
        // off in the kernel: any cgroup passes
        put(r, "proc/self/cgroup", "0::/system.slice/x.scope\n");
        put(
            r,
            "boot/config-6.8.0-45-generic",
            "CONFIG_HZ=1000\n# CONFIG_RT_GROUP_SCHED is not set\n",
        );
        assert_eq!(row(r, "rt-group-sched").status, Status::Pass);
        // no config: unknown is info, never a pass
        std::fs::remove_file(r.join("boot/config-6.8.0-45-generic")).unwrap();
        let c = row(r, "rt-group-sched");
        assert_eq!(c.status, Status::Info, "{c:?}");
        assert!(c.found.starts_with("unknown") && c.remedy.contains("refused as root"), "{c:?}");
    }

    #[test]
    fn rt_privilege_follows_capabilities_and_the_rtprio_limit() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        ubuntu(r);
        put(r, "proc/self/status", "Uid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\n");
        let c = row(r, "rt-privilege");
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(c.remedy.contains("run as root") && c.remedy.contains("rtprio"));
        put(r, "proc/self/limits", "Max realtime priority     50                   50\n");
        let c = row(r, "rt-privilege");
        assert_eq!(c.status, Status::Warn, "{c:?}");
        assert!(c.found.contains("rtprio limit 50") && c.remedy.contains("50 or less"));
        put(r, "proc/self/limits", "Max realtime priority     99                   99\n");
        assert_eq!(row(r, "rt-privilege").status, Status::Pass);
        put(r, "proc/self/status", "Uid:\t0\t0\t0\t0\nCapEff:\t0000000000000000\n");
        put(r, "proc/self/limits", "Max realtime priority     0                    0\n");
        let c = row(r, "rt-privilege");
        assert!(
            c.status == Status::Fail && c.found.starts_with("root without CAP_SYS_NICE"),
            "{c:?}"
        );
    }

    #[test]
    fn rt_throttling_at_zero_fails_and_the_period_is_said() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        ubuntu(r);
        put(r, "proc/sys/kernel/sched_rt_period_us", "1000000\n");
        let c = row(r, "rt-period");
        assert_eq!(c.status, Status::Info);
        assert!(c.found.contains("stopped for 50000 us of every period"), "{}", c.found);
        put(r, "proc/sys/kernel/sched_rt_runtime_us", "-1\n");
        assert_eq!(row(r, "rt-period").status, Status::Pass);
        put(r, "proc/sys/kernel/sched_rt_runtime_us", "0\n");
        assert_eq!(row(r, "rt-throttling").status, Status::Fail);
        std::fs::remove_file(r.join("proc/sys/kernel/sched_rt_period_us")).unwrap();
        assert_eq!(row(r, "rt-period").status, Status::Info);
    }

    #[test]
    fn timer_migration_watchdogs_vmstat_and_workqueues_on_isolated_cpus() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        rtlab_host::testing::machine(r);
        // nothing readable: info, not pass
        for id in ["timer-migration", "watchdogs", "vmstat", "workqueue"] {
            assert_eq!(row(r, id).status, Status::Info, "{id}");
        }
        put(r, "proc/sys/kernel/timer_migration", "1\n");
        put(r, "proc/sys/kernel/watchdog", "1\n");
        put(r, "proc/sys/kernel/nmi_watchdog", "1\n");
        put(r, "proc/sys/kernel/soft_watchdog", "1\n");
        put(r, "proc/sys/kernel/watchdog_cpumask", "0-1\n");
        put(r, "proc/sys/vm/stat_interval", "1\n");
        put(r, "sys/devices/virtual/workqueue/cpumask", "3\n");
        let c = row(r, "timer-migration");
        assert_eq!(c.status, Status::Warn);
        assert!(c.remedy.contains("echo 0 > /proc/sys/kernel/timer_migration"));
        // no isolated CPUs: the watchdogs, vmstat and workqueues are facts, not faults
        for id in ["watchdogs", "vmstat", "workqueue"] {
            assert_eq!(row(r, id).status, Status::Info, "{id}");
        }
        put(r, "sys/devices/system/cpu/isolated", "1\n");
        let c = row(r, "watchdogs");
        assert_eq!(c.status, Status::Warn, "{c:?}");
        assert!(
            c.found.contains("nmi_watchdog and soft lockup detector on for CPUs 0-1"),
            "{}",
            c.found
        );
        assert!(c.found.contains("also on the isolated CPUs 1") && c.remedy.contains("nowatchdog"));
        let c = row(r, "vmstat");
        assert!(c.status == Status::Warn && c.remedy.contains("vm.stat_interval=10"), "{c:?}");
        let c = row(r, "workqueue");
        assert_eq!(c.status, Status::Warn, "{c:?}");
        assert!(
            c.remedy.starts_with("echo 1 > /sys/devices/virtual/workqueue/cpumask"),
            "{}",
            c.remedy
        );
        // tuned
        put(r, "proc/sys/kernel/timer_migration", "0\n");
        put(r, "proc/sys/kernel/watchdog_cpumask", "0\n");
        put(r, "proc/sys/vm/stat_interval", "10\n");
        put(r, "sys/devices/virtual/workqueue/cpumask", "1\n");
        for id in ["timer-migration", "watchdogs", "vmstat", "workqueue"] {
            let c = row(r, id);
            assert_eq!((c.status, c.remedy.as_str()), (Status::Pass, ""), "{c:?}");
        }
        put(r, "proc/sys/kernel/watchdog", "0\n");
        assert_eq!(row(r, "watchdogs").found, "off");
    }
}
