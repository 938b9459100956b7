//! `rtlab tune check`: how far this machine is from a real-time setup (S2 Table 3 and more),
//! each item pass/warn/fail/info with what was found and what to do.
//!
//! Contract: read-only; built on [`rtlab_sys::env::detect`] plus a few more reads under the
//! host's root, so it is tested on fake trees. What cannot be read says so (never a guess
//! reported as a pass). Sources: Documentation/admin-guide/kernel-parameters.txt,
//! Documentation/scheduler/sched-rt-group.rst, Documentation/admin-guide/mm/transhuge.rst.

use crate::host::Host;
use serde::Serialize;

/// The verdict of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pass,
    Warn,
    Fail,
    /// Facts that are neither good nor bad (or could not be read).
    Info,
}

impl Status {
    pub fn word(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
            Status::Info => "info",
        }
    }
}

/// One line of the check.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub id: &'static str,
    pub title: &'static str,
    pub status: Status,
    pub found: String,
    /// What to do (empty when nothing is to be done).
    pub remedy: String,
}

fn c(
    id: &'static str,
    title: &'static str,
    status: Status,
    found: impl Into<String>,
    remedy: impl Into<String>,
) -> Check {
    Check {
        id,
        title,
        status,
        found: found.into(),
        remedy: if status == Status::Pass { String::new() } else { remedy.into() },
    }
}

fn cmdline_value<'a>(cmdline: &'a str, key: &str) -> Option<&'a str> {
    cmdline.split_whitespace().find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// Every check, in the order they are printed.
pub fn run_checks(host: &dyn Host) -> Vec<Check> {
    let env = rtlab_sys::env::detect(host.root());
    let mut out = Vec::new();
    let rd = |p: &str| host.read(p).ok().map(|s| s.trim().to_string());

    out.push(c(
        "preempt-rt",
        "PREEMPT_RT kernel",
        if env.preempt_rt { Status::Pass } else { Status::Fail },
        if env.preempt_rt { "PREEMPT_RT".to_string() } else { format!("not PREEMPT_RT ({})", env.kernel_release) },
        "boot a PREEMPT_RT kernel (Debian: apt install linux-image-rt-amd64 / linux-image-rt-arm64)",
    ));
    let model = env.preemption_model.as_str();
    out.push(c(
        "preemption-model",
        "preemption model",
        match model {
            "rt" | "full" => Status::Pass,
            "lazy" | "voluntary" => Status::Warn,
            "none" => Status::Fail,
            _ => Status::Info,
        },
        format!(
            "{model} (from {}{})",
            env.preemption_source,
            if env.preempt_dynamic { ", PREEMPT_DYNAMIC" } else { "" }
        ),
        if env.preempt_dynamic {
            "boot with preempt=full (this kernel is PREEMPT_DYNAMIC), or better a PREEMPT_RT kernel"
        } else {
            "use a kernel built with CONFIG_PREEMPT or PREEMPT_RT"
        },
    ));
    out.push(match env.hz {
        Some(1000) => c("hz", "timer tick (CONFIG_HZ)", Status::Pass, "1000", ""),
        Some(hz) => c("hz", "timer tick (CONFIG_HZ)", Status::Warn, hz.to_string(), "S2 uses CONFIG_HZ=1000: a coarser tick delays tick-driven work (RCU, timers without hrtimers)"),
        None => c("hz", "timer tick (CONFIG_HZ)", Status::Info, "unknown (no /proc/config.gz or /boot/config-*)", "install the kernel's config file to check it"),
    });
    out.push(match env.high_res_timers {
        Some(true) => c("high-res-timers", "high-resolution timers", Status::Pass, "active", ""),
        Some(false) => c(
            "high-res-timers",
            "high-resolution timers",
            Status::Fail,
            "not active",
            "enable CONFIG_HIGH_RES_TIMERS and do not boot with highres=off",
        ),
        None => c(
            "high-res-timers",
            "high-resolution timers",
            Status::Info,
            "unknown (/proc/timer_list not readable)",
            "run as root",
        ),
    });
    let nohz = env.nohz_full.clone().filter(|s| !s.is_empty() && s != "(null)");
    out.push(c(
        "nohz-full",
        "full dynticks (nohz_full)",
        if nohz.is_some() { Status::Pass } else { Status::Warn },
        nohz.clone().unwrap_or_else(|| "none".into()),
        "boot with nohz_full=<RT CPUs> (CONFIG_NO_HZ_FULL) so the tick stops on the RT CPUs",
    ));
    out.push(c(
        "isolcpus",
        "isolated CPUs (isolcpus)",
        if env.isolcpus.is_empty() { Status::Warn } else { Status::Pass },
        if env.isolcpus.is_empty() { "none".to_string() } else { env.isolcpus.clone() },
        "boot with isolcpus=<RT CPUs>, or use the rt-isolation profile (a cpuset) at run time",
    ));
    let nocbs = cmdline_value(&env.cmdline, "rcu_nocbs").map(String::from);
    out.push(c(
        "rcu-nocbs",
        "RCU callbacks offloaded (rcu_nocbs)",
        if nocbs.is_some() { Status::Pass } else { Status::Warn },
        nocbs.unwrap_or_else(|| "not set".into()),
        "boot with rcu_nocbs=<RT CPUs> so RCU callbacks run elsewhere",
    ));
    out.push(match &env.cpufreq_governor {
        Some(g) if g == "performance" => {
            c("governor", "CPU frequency governor", Status::Pass, g.clone(), "")
        }
        Some(g) => c(
            "governor",
            "CPU frequency governor",
            Status::Warn,
            g.clone(),
            "set the performance governor (the rt-* profiles do, and put it back)",
        ),
        None => c(
            "governor",
            "CPU frequency governor",
            Status::Info,
            "no cpufreq (fixed frequency or a VM)",
            "",
        ),
    });
    out.push(cstates(host, &env));
    let smt = rd("/sys/devices/system/cpu/smt/control");
    let smt_active = rd("/sys/devices/system/cpu/smt/active");
    out.push(match (smt.as_deref(), smt_active.as_deref()) {
        (Some("notsupported") | Some("notimplemented"), _) => {
            c("smt", "SMT (hyper-threading)", Status::Pass, "not supported on this CPU", "")
        }
        (_, Some("1")) => c(
            "smt",
            "SMT (hyper-threading)",
            Status::Warn,
            "active",
            "boot with nosmt, or keep the RT CPU's sibling idle (its load shares the core)",
        ),
        (Some(s), _) => c("smt", "SMT (hyper-threading)", Status::Pass, s.to_string(), ""),
        (None, _) => c("smt", "SMT (hyper-threading)", Status::Info, "unknown", ""),
    });
    out.push(match env.sched_rt_runtime_us {
        Some(-1) => c("rt-throttling", "RT throttling", Status::Pass, "off (sched_rt_runtime_us = -1)", ""),
        Some(v) => c("rt-throttling", "RT throttling", Status::Warn, format!("sched_rt_runtime_us = {v}"), "a busy RT thread is stopped for the rest of each second: the rt-* profiles set -1 (and put it back)"),
        None => c("rt-throttling", "RT throttling", Status::Info, "unknown", ""),
    });
    let irqbalance = running_comms(host).iter().any(|c| c == "irqbalance");
    out.push(c(
        "irqbalance",
        "irqbalance",
        if irqbalance { Status::Warn } else { Status::Pass },
        if irqbalance { "running" } else { "not running" },
        "stop irqbalance (systemctl stop irqbalance): it rewrites the IRQ affinities a profile sets",
    ));
    let thp = rd("/sys/kernel/mm/transparent_hugepage/enabled");
    let thp_mode = thp
        .as_deref()
        .and_then(|t| t.split_whitespace().find(|w| w.starts_with('[')))
        .map(|w| w.trim_matches(['[', ']']).to_string());
    out.push(match thp_mode.as_deref() {
        Some("always") => c("thp", "transparent huge pages", Status::Warn, "always", "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (compaction stalls otherwise)"),
        Some(m) => c("thp", "transparent huge pages", Status::Pass, m.to_string(), ""),
        None => c("thp", "transparent huge pages", Status::Info, "not available", ""),
    });
    let swaps =
        rd("/proc/swaps").map(|s| s.lines().skip(1).filter(|l| !l.trim().is_empty()).count());
    out.push(match swaps {
        Some(0) => c("swap", "swap", Status::Pass, "none", ""),
        Some(n) => c(
            "swap",
            "swap",
            Status::Warn,
            format!("{n} swap area(s)"),
            "swapoff -a, or make sure every RT process locks its memory (mlockall)",
        ),
        None => c("swap", "swap", Status::Info, "unknown", ""),
    });
    out.push(match &env.virtualization {
        Some(v) => c("virtualization", "bare metal", Status::Warn, format!("a {v} guest"), "measure on the robot's own hardware: the hypervisor can delay any wake-up (steal time)"),
        None => c("virtualization", "bare metal", Status::Pass, "bare metal", ""),
    });
    out.push(c(
        "threaded-irqs",
        "threaded IRQs",
        if env.threaded_irqs { Status::Pass } else { Status::Warn },
        if env.threaded_irqs { "yes" } else { "no (no threadirqs, not PREEMPT_RT)" },
        "boot with threadirqs (or a PREEMPT_RT kernel) so NIC IRQ threads can get a priority (rt-kthreads)",
    ));
    out.push(ksoftirqd(host));
    out.extend(qdiscs(host));
    out.push(match rtlab_sys::pmqos::CpuDmaLatency::current(&host.path("/dev/cpu_dma_latency")) {
        Ok(v) if v <= 10 => c(
            "cpu-dma-latency",
            "/dev/cpu_dma_latency",
            Status::Pass,
            format!("held at {v} us"),
            "",
        ),
        Ok(v) => c(
            "cpu-dma-latency",
            "/dev/cpu_dma_latency",
            Status::Info,
            format!("{v} us (no request held)"),
            "rtlab holds it during a run (--cpu-dma-latency, rt-* profiles)",
        ),
        Err(e) => c(
            "cpu-dma-latency",
            "/dev/cpu_dma_latency",
            Status::Info,
            format!("not readable: {e}"),
            "run as root",
        ),
    });
    let tracing =
        ["/sys/kernel/tracing/available_tracers", "/sys/kernel/debug/tracing/available_tracers"]
            .iter()
            .find_map(|p| rd(p));
    out.push(match tracing {
        Some(t) if t.split_whitespace().any(|w| w == "timerlat") => c(
            "tracing",
            "ftrace for spike evidence",
            Status::Pass,
            "tracefs mounted, timerlat available",
            "",
        ),
        Some(_) => c(
            "tracing",
            "ftrace for spike evidence",
            Status::Info,
            "tracefs mounted; no timerlat tracer (CONFIG_TIMERLAT_TRACER)",
            "sched/irq/softirq events still work; rtla timerlat needs CONFIG_TIMERLAT_TRACER",
        ),
        None if host.exists("/sys/kernel/tracing") => c(
            "tracing",
            "ftrace for spike evidence",
            Status::Info,
            "tracefs not mounted",
            "rtlab mounts it while tracing (and unmounts it after)",
        ),
        None => c(
            "tracing",
            "ftrace for spike evidence",
            Status::Warn,
            "no tracefs",
            "enable CONFIG_FTRACE",
        ),
    });
    out
}

fn cstates(host: &dyn Host, env: &rtlab_core::schema::Environment) -> Check {
    let driver = env.cpuidle_driver.clone().unwrap_or_else(|| "none".into());
    let mut deep = Vec::new();
    for i in 0..16 {
        let base = format!("/sys/devices/system/cpu/cpu0/cpuidle/state{i}");
        let Ok(name) = host.read(&format!("{base}/name")) else { break };
        let latency: u64 = host
            .read(&format!("{base}/latency"))
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let disabled =
            host.read(&format!("{base}/disable")).map(|v| v.trim() == "1").unwrap_or(false);
        if latency > 0 && !disabled {
            deep.push(format!("{} ({latency} us)", name.trim()));
        }
    }
    let found = if deep.is_empty() {
        format!("driver {driver}, no deep state enabled")
    } else {
        format!("driver {driver}, enabled: {}", deep.join(", "))
    };
    let status = if deep.is_empty() && driver != "haltpoll" { Status::Pass } else { Status::Warn };
    let remedy = if driver == "haltpoll" {
        "a VM guest's haltpoll idle: hold /dev/cpu_dma_latency at 0 during runs (rt-* profiles, --cpu-dma-latency); the host's C-states still apply"
    } else {
        "forbid deep C-states: hold /dev/cpu_dma_latency at 0 (rt-* profiles) or boot with processor.max_cstate=1 intel_idle.max_cstate=0"
    };
    c("c-states", "C-states and cpuidle driver", status, found, remedy)
}

/// The comm of every process (from /proc/<pid>/comm under the root).
pub fn running_comms(host: &dyn Host) -> Vec<String> {
    tasks(host).into_iter().map(|(_, c)| c).collect()
}

/// (pid, comm) of every process under the root's /proc.
pub fn tasks(host: &dyn Host) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(host.path("/proc")) {
        for e in rd.flatten() {
            if let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) {
                if let Ok(comm) = host.read(&format!("/proc/{pid}/comm")) {
                    out.push((pid, comm.trim().to_string()));
                }
            }
        }
    }
    out.sort();
    out
}

fn ksoftirqd(host: &dyn Host) -> Check {
    let mut seen = Vec::new();
    for (pid, comm) in tasks(host).into_iter().filter(|(_, c)| c.starts_with("ksoftirqd/")) {
        if let Ok((pol, prio)) = host.sched_get(pid) {
            seen.push((comm, pol & !0x4000_0000, prio));
        }
    }
    if seen.is_empty() {
        return c("ksoftirqd", "ksoftirqd policy", Status::Info, "no ksoftirqd threads seen", "");
    }
    let all_rt = seen.iter().all(|(_, p, _)| *p == 1 || *p == 2);
    let found = seen
        .iter()
        .map(|(c, p, pr)| format!("{c} {} {pr}", crate::journal::policy_name(*p)))
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

fn qdiscs(host: &dyn Host) -> Vec<Check> {
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

/// (pass, warn, fail) counts.
pub fn counts(checks: &[Check]) -> (usize, usize, usize) {
    let n = |s| checks.iter().filter(|c| c.status == s).count();
    (n(Status::Pass), n(Status::Warn), n(Status::Fail))
}
