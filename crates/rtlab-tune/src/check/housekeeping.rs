//! Checks of the housekeeping that runs on the real-time CPUs besides the probe: irqbalance,
//! timer migration, the watchdogs, the vmstat worker, unbound workqueues, ksoftirqd and the
//! NIC's qdiscs.

use super::status::{c, read_trim, running_comms, Check, Status};
use rtlab_host::host::tasks;
use rtlab_host::host::Host;

/// irqbalance, which rewrites the IRQ affinities a profile sets.
pub(super) fn irqbalance(host: &dyn Host) -> Check {
    let irqbalance = running_comms(host).iter().any(|c| c == "irqbalance");
    c(
        "irqbalance",
        "irqbalance",
        if irqbalance { Status::Warn } else { Status::Pass },
        if irqbalance { "running" } else { "not running" },
        "stop irqbalance (systemctl stop irqbalance): it rewrites the IRQ affinities a profile sets",
    )
}

/// kernel.timer_migration: 1 lets the timers of an idle CPU be moved to a busy one, so
/// timer callbacks land on other CPUs unpredictably.
pub(super) fn timer_migration(host: &dyn Host) -> Check {
    let t = "timer migration (kernel.timer_migration)";
    match read_trim(host, "/proc/sys/kernel/timer_migration").as_deref() {
        Some("0") => {
            c("timer-migration", t, Status::Pass, "0 (timers stay on the CPU that armed them)", "")
        }
        Some(v) => c(
            "timer-migration",
            t,
            Status::Warn,
            format!("{v} (timers may move to other CPUs, also onto a real-time one)"),
            "echo 0 > /proc/sys/kernel/timer_migration (sysctl kernel.timer_migration=0)",
        ),
        None => c(
            "timer-migration",
            t,
            Status::Info,
            "not readable (/proc/sys/kernel/timer_migration: CONFIG_NO_HZ_COMMON off)",
            "",
        ),
    }
}

/// The NMI watchdog and the soft lockup detector, and the CPUs they run on
/// (Documentation/admin-guide/lockup-watchdogs.rst, sysctl/kernel.rst).
pub(super) fn watchdogs(host: &dyn Host, isolated: &[usize]) -> Check {
    let t = "lockup watchdogs (nmi_watchdog, soft lockup detector)";
    let rd = |p: &str| read_trim(host, p);
    let (wd, nmi, soft) = (
        rd("/proc/sys/kernel/watchdog"),
        rd("/proc/sys/kernel/nmi_watchdog"),
        rd("/proc/sys/kernel/soft_watchdog"),
    );
    if wd.is_none() && nmi.is_none() && soft.is_none() {
        return c(
            "watchdogs",
            t,
            Status::Info,
            "not readable (no /proc/sys/kernel/watchdog: CONFIG_LOCKUP_DETECTOR off?)",
            "",
        );
    }
    let on = |v: &Option<String>| v.as_deref().is_some_and(|v| v != "0");
    let mut running = Vec::new();
    if on(&nmi) {
        running.push("nmi_watchdog");
    }
    if on(&soft) || (soft.is_none() && on(&wd)) {
        running.push("soft lockup detector");
    }
    if wd.as_deref() == Some("0") || running.is_empty() {
        return c("watchdogs", t, Status::Pass, "off", "");
    }
    let mask = rd("/proc/sys/kernel/watchdog_cpumask");
    let cpus = mask.as_deref().and_then(|m| rtlab_sys::cpus::parse_cpu_list(m).ok());
    let on_text = format!(
        "{} on{}",
        running.join(" and "),
        mask.as_deref().map(|m| format!(" for CPUs {m} (watchdog_cpumask)")).unwrap_or_default()
    );
    let housekeeping = "boot with nmi_watchdog=0 nowatchdog, or keep them to the other CPUs: echo <housekeeping CPUs> > /proc/sys/kernel/watchdog_cpumask";
    if isolated.is_empty() {
        return c(
            "watchdogs",
            t,
            Status::Info,
            format!("{on_text}; no isolated CPUs"),
            format!("with isolated real-time CPUs: {housekeeping}"),
        );
    }
    match cpus {
        Some(cs) => {
            let hit: Vec<usize> = isolated.iter().copied().filter(|c| cs.contains(c)).collect();
            if hit.is_empty() {
                c(
                    "watchdogs",
                    t,
                    Status::Pass,
                    format!(
                        "{on_text}, not on the isolated CPUs {}",
                        rtlab_host::cpu_list(isolated)
                    ),
                    "",
                )
            } else {
                c(
                    "watchdogs",
                    t,
                    Status::Warn,
                    format!("{on_text}, also on the isolated CPUs {}", rtlab_host::cpu_list(&hit)),
                    housekeeping,
                )
            }
        }
        None => c(
            "watchdogs",
            t,
            Status::Warn,
            format!(
                "{on_text}; watchdog_cpumask not readable: they may run on the isolated CPUs {}",
                rtlab_host::cpu_list(isolated)
            ),
            housekeeping,
        ),
    }
}

/// vm.stat_interval: how often the per-CPU vmstat worker folds counters
/// (Documentation/admin-guide/kernel-per-CPU-kthreads.rst).
pub(super) fn vmstat(host: &dyn Host, isolated: &[usize]) -> Check {
    let t = "vmstat interval (vm.stat_interval)";
    let remedy = "sysctl vm.stat_interval=10 (or more): the per-CPU vmstat worker wakes less often on the real-time CPUs";
    match read_trim(host, "/proc/sys/vm/stat_interval").and_then(|v| v.parse::<u64>().ok()) {
        None => c("vmstat", t, Status::Info, "not readable (/proc/sys/vm/stat_interval)", ""),
        Some(v) if v >= 10 => c("vmstat", t, Status::Pass, format!("{v} s"), ""),
        Some(v) if isolated.is_empty() => c(
            "vmstat",
            t,
            Status::Info,
            format!("{v} s; no isolated CPUs"),
            format!("with isolated real-time CPUs: {remedy}"),
        ),
        Some(v) => c(
            "vmstat",
            t,
            Status::Warn,
            format!("{v} s, with isolated CPUs {}", rtlab_host::cpu_list(isolated)),
            remedy,
        ),
    }
}

/// /sys/devices/virtual/workqueue/cpumask: the CPUs unbound workqueues may run on
/// (Documentation/core-api/workqueue.rst, kernel-per-CPU-kthreads.rst).
pub(super) fn workqueue(host: &dyn Host, isolated: &[usize]) -> Check {
    let t = "unbound workqueue CPUs (workqueue cpumask)";
    let Some(mask) = read_trim(host, "/sys/devices/virtual/workqueue/cpumask") else {
        return c(
            "workqueue",
            t,
            Status::Info,
            "not readable (/sys/devices/virtual/workqueue/cpumask)",
            "",
        );
    };
    let cpus = rtlab_host::parse_cpu_mask(&mask);
    let list = rtlab_host::cpu_list(&cpus);
    if isolated.is_empty() {
        return c(
            "workqueue",
            t,
            Status::Info,
            format!("CPUs {list} (mask {mask}); no isolated CPUs"),
            "",
        );
    }
    let hit: Vec<usize> = isolated.iter().copied().filter(|c| cpus.contains(c)).collect();
    let rest: Vec<usize> = cpus.iter().copied().filter(|c| !isolated.contains(c)).collect();
    if hit.is_empty() {
        c(
            "workqueue",
            t,
            Status::Pass,
            format!("CPUs {list}, not the isolated {}", rtlab_host::cpu_list(isolated)),
            "",
        )
    } else {
        c(
            "workqueue",
            t,
            Status::Warn,
            format!(
                "CPUs {list} (mask {mask}), also the isolated CPUs {}",
                rtlab_host::cpu_list(&hit)
            ),
            if rest.is_empty() {
                "echo <housekeeping CPUs' mask> > /sys/devices/virtual/workqueue/cpumask"
                    .to_string()
            } else {
                format!("echo {} > /sys/devices/virtual/workqueue/cpumask (the CPUs that are not isolated)", rtlab_host::cpu_mask(&rest))
            },
        )
    }
}

pub(super) fn ksoftirqd(host: &dyn Host) -> Check {
    let mut seen = Vec::new();
    for (pid, comm) in tasks(host).into_iter().filter(|(_, c)| c.starts_with("ksoftirqd/")) {
        if let Ok((pol, prio)) = host.sched_get(pid) {
            seen.push((comm, rtlab_sys::sched::base_policy(pol), prio));
        }
    }
    if seen.is_empty() {
        return c("ksoftirqd", "ksoftirqd policy", Status::Info, "no ksoftirqd threads seen", "");
    }
    let all_rt = seen.iter().all(|(_, p, _)| *p == 1 || *p == 2);
    let found = seen
        .iter()
        .map(|(c, p, pr)| format!("{c} {} {pr}", rtlab_host::journal::policy_name(*p)))
        .collect::<Vec<_>>()
        .join(", ");
    c(
        "ksoftirqd",
        "ksoftirqd policy",
        if all_rt { Status::Pass } else { Status::Warn },
        found,
        "S3: under heavy traffic NET_RX work moves into ksoftirqd (SCHED_OTHER) and breaks bounds: the rt-kthreads profile sets FIFO 60",
    )
}

pub(super) fn qdiscs(host: &dyn Host) -> Vec<Check> {
    let text = match host.run(&["tc".to_string(), "qdisc".into(), "show".into()]) {
        Ok(t) => t,
        Err(e) => {
            return vec![c(
                "qdisc",
                "qdisc per interface",
                Status::Info,
                format!("tc not usable: {e}"),
                "apt install iproute2",
            )]
        }
    };
    let mut out = Vec::new();
    for l in text.lines().filter(|l| l.contains(" root ")) {
        let w: Vec<&str> = l.split_whitespace().collect();
        let kind = w.get(1).copied().unwrap_or("?");
        let dev =
            w.iter().position(|x| *x == "dev").and_then(|i| w.get(i + 1)).copied().unwrap_or("?");
        let (status, found, remedy) = match kind {
            "noqueue" => (Status::Pass, format!("{dev}: noqueue (no queue: nothing to prioritise)"), String::new()),
            "pfifo_fast" => (Status::Pass, format!("{dev}: pfifo_fast (fixed priomap: SO_PRIORITY 6 and 7 go to band 0, the first served)"), String::new()),
            "mqprio" | "prio" | "htb" | "taprio" => (Status::Pass, format!("{dev}: {kind} (priority-aware)"), String::new()),
            "mq" => (Status::Info, format!("{dev}: mq (per-queue children decide)"), "check the child qdiscs; S1 used mqprio to give RT traffic its own queue".into()),
            other => (
                Status::Warn,
                format!("{dev}: {other} (does not serve by SO_PRIORITY)"),
                "give RT traffic priority: pfifo_fast, htb with an RT class, or mqprio where the kernel has it (S1)".to_string(),
            ),
        };
        out.push(Check { id: "qdisc", title: "qdisc per interface", status, found, remedy });
    }
    if out.is_empty() {
        out.push(c("qdisc", "qdisc per interface", Status::Info, "no root qdisc listed", ""));
    }
    out
}
