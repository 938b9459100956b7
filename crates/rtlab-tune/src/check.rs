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

type Env = rtlab_core::schema::Environment;

/// A PREEMPT_RT kernel, and the preemption model in force.
fn preemption(env: &Env) -> Vec<Check> {
    let mut out = Vec::new();
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
    out
}

/// The timer tick and what keeps it and RCU off the real-time CPUs: CONFIG_HZ,
/// high-resolution timers, nohz_full, isolcpus, rcu_nocbs.
fn ticks(env: &Env) -> Vec<Check> {
    let mut out = Vec::new();
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
    out
}

/// The CPU frequency governor.
fn governor(env: &Env) -> Check {
    match &env.cpufreq_governor {
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
    }
}

/// SMT (hyper-threading): a sibling's load shares the real-time CPU's core.
fn smt(host: &dyn Host) -> Check {
    let smt = read_trim(host, "/sys/devices/system/cpu/smt/control");
    let smt_active = read_trim(host, "/sys/devices/system/cpu/smt/active");
    match (smt.as_deref(), smt_active.as_deref()) {
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
    }
}

/// RT throttling (kernel.sched_rt_runtime_us).
fn rt_throttling(env: &Env) -> Check {
    match env.sched_rt_runtime_us {
        Some(-1) => c("rt-throttling", "RT throttling", Status::Pass, "off (sched_rt_runtime_us = -1)", ""),
        Some(0) => c("rt-throttling", "RT throttling", Status::Fail, "sched_rt_runtime_us = 0: real-time tasks get no runtime at all (FIFO/RR can be refused with EPERM)", "sysctl kernel.sched_rt_runtime_us=-1 (the rt-* profiles do, and put it back)"),
        Some(v) => c("rt-throttling", "RT throttling", Status::Warn, format!("sched_rt_runtime_us = {v}"), "a busy RT thread is stopped for the rest of each second: the rt-* profiles set -1 (and put it back)"),
        None => c("rt-throttling", "RT throttling", Status::Info, "unknown", ""),
    }
}

/// irqbalance, which rewrites the IRQ affinities a profile sets.
fn irqbalance(host: &dyn Host) -> Check {
    let irqbalance = running_comms(host).iter().any(|c| c == "irqbalance");
    c(
        "irqbalance",
        "irqbalance",
        if irqbalance { Status::Warn } else { Status::Pass },
        if irqbalance { "running" } else { "not running" },
        "stop irqbalance (systemctl stop irqbalance): it rewrites the IRQ affinities a profile sets",
    )
}

/// Transparent huge pages (compaction stalls in `always` mode).
fn thp(host: &dyn Host) -> Check {
    let thp = read_trim(host, "/sys/kernel/mm/transparent_hugepage/enabled");
    let thp_mode = thp
        .as_deref()
        .and_then(|t| t.split_whitespace().find(|w| w.starts_with('[')))
        .map(|w| w.trim_matches(['[', ']']).to_string());
    match thp_mode.as_deref() {
        Some("always") => c("thp", "transparent huge pages", Status::Warn, "always", "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (compaction stalls otherwise)"),
        Some(m) => c("thp", "transparent huge pages", Status::Pass, m.to_string(), ""),
        None => c("thp", "transparent huge pages", Status::Info, "not available", ""),
    }
}

/// Swap areas.
fn swap(host: &dyn Host) -> Check {
    let swaps = read_trim(host, "/proc/swaps")
        .map(|s| s.lines().skip(1).filter(|l| !l.trim().is_empty()).count());
    match swaps {
        Some(0) => c("swap", "swap", Status::Pass, "none", ""),
        Some(n) => c(
            "swap",
            "swap",
            Status::Warn,
            format!("{n} swap area(s)"),
            "swapoff -a, or make sure every RT process locks its memory (mlockall)",
        ),
        None => c("swap", "swap", Status::Info, "unknown", ""),
    }
}

/// Bare metal or a guest (whose hypervisor can delay any wake-up).
fn virtualization(env: &Env) -> Check {
    match &env.virtualization {
        Some(v) => c("virtualization", "bare metal", Status::Warn, format!("a {v} guest"), "measure on the robot's own hardware: the hypervisor can delay any wake-up (steal time)"),
        None => c("virtualization", "bare metal", Status::Pass, "bare metal", ""),
    }
}

/// Threaded IRQs (so NIC IRQ threads can get a priority).
fn threaded_irqs(env: &Env) -> Check {
    c(
        "threaded-irqs",
        "threaded IRQs",
        if env.threaded_irqs { Status::Pass } else { Status::Warn },
        if env.threaded_irqs { "yes" } else { "no (no threadirqs, not PREEMPT_RT)" },
        "boot with threadirqs (or a PREEMPT_RT kernel) so NIC IRQ threads can get a priority (rt-kthreads)",
    )
}

/// The PM QoS request on /dev/cpu_dma_latency.
fn cpu_dma_latency(host: &dyn Host) -> Check {
    match rtlab_sys::pmqos::CpuDmaLatency::current(&host.path("/dev/cpu_dma_latency")) {
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
    }
}

/// ftrace and the timerlat tracer, for spike evidence.
fn tracing(host: &dyn Host) -> Check {
    let tracing =
        ["/sys/kernel/tracing/available_tracers", "/sys/kernel/debug/tracing/available_tracers"]
            .iter()
            .find_map(|p| read_trim(host, p));
    match tracing {
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
    }
}

/// The CPUs set apart for real-time work: isolcpus and nohz_full together.
fn isolated_cpus(env: &rtlab_core::schema::Environment) -> Vec<usize> {
    let mut v = rtlab_sys::cpus::parse_cpu_list(&env.isolcpus).unwrap_or_default();
    if let Some(n) = env.nohz_full.as_deref().filter(|n| *n != "(null)") {
        v.extend(rtlab_sys::cpus::parse_cpu_list(n).unwrap_or_default());
    }
    v.sort_unstable();
    v.dedup();
    v
}

fn read_trim(host: &dyn Host, p: &str) -> Option<String> {
    host.read(p).ok().map(|s| s.trim().to_string())
}

/// kernel.sched_rt_period_us: the window RT throttling counts `sched_rt_runtime_us` in.
fn rt_period(a: &rtlab_sys::rt_access::RtAccess) -> Check {
    let t = "RT bandwidth period (sched_rt_period_us)";
    match (a.sched_rt_period_us, a.sched_rt_runtime_us) {
        (None, _) => c("rt-period", t, Status::Info, "not readable (/proc/sys/kernel/sched_rt_period_us)", ""),
        (Some(p), Some(-1)) => c("rt-period", t, Status::Pass, format!("{p} us (throttling off: the period does not matter)"), ""),
        (Some(p), Some(r)) if r >= p => c("rt-period", t, Status::Pass, format!("{p} us, runtime {r} us: real-time tasks may use the whole period"), ""),
        (Some(p), Some(r)) => c(
            "rt-period",
            t,
            Status::Info,
            format!("{p} us, runtime {r} us: real-time tasks are stopped for {} us of every period when they use it all", p - r),
            "the rt-* profiles set sched_rt_runtime_us = -1 (no throttling) for the run",
        ),
        (Some(p), None) => c("rt-period", t, Status::Info, format!("{p} us (runtime not readable)"), ""),
    }
}

/// Root, CAP_SYS_NICE or RLIMIT_RTPRIO: may this user's processes use SCHED_FIFO 80?
fn rt_privilege(a: &rtlab_sys::rt_access::RtAccess) -> Check {
    let t = "real-time privilege (root, CAP_SYS_NICE, RLIMIT_RTPRIO)";
    let fix = "run as root, grant CAP_SYS_NICE (setcap cap_sys_nice+ep $(which rtlab)), or an rtprio limit (limits.conf: @group - rtprio 99)";
    let limit = match a.rtprio_limit {
        Some(u64::MAX) => "unlimited".to_string(),
        Some(l) => l.to_string(),
        None => "unknown".to_string(),
    };
    if a.cap_sys_nice == Some(true) {
        let who = if a.root_user == Some(true) { "root with CAP_SYS_NICE" } else { "CAP_SYS_NICE" };
        return c("rt-privilege", t, Status::Pass, format!("{who} (rtprio limit {limit})"), "");
    }
    if a.cap_sys_nice.is_none() && a.root_user.is_none() {
        return c("rt-privilege", t, Status::Info, "not readable (/proc/self/status)", "");
    }
    let who = if a.root_user == Some(true) {
        "root without CAP_SYS_NICE (a container or service that drops it)"
    } else {
        "not root, no CAP_SYS_NICE"
    };
    match a.rtprio_limit {
        Some(l) if l >= 80 => c(
            "rt-privilege",
            t,
            Status::Pass,
            format!("{who}; rtprio limit {limit}: priorities up to {limit} allowed"),
            "",
        ),
        Some(l) if l > 0 => c(
            "rt-privilege",
            t,
            Status::Warn,
            format!("{who}; rtprio limit {l}: rtlab's default FIFO 80 is refused"),
            format!("ask for priority {l} or less (--priority), or {fix}"),
        ),
        Some(_) => c(
            "rt-privilege",
            t,
            Status::Fail,
            format!("{who}; rtprio limit 0: every real-time policy is refused"),
            fix,
        ),
        None => c(
            "rt-privilege",
            t,
            Status::Info,
            format!("{who}; rtprio limit not readable (/proc/self/limits)"),
            fix,
        ),
    }
}

/// RT group scheduling and this process's cgroup: with CONFIG_RT_GROUP_SCHED a cgroup without
/// real-time runtime refuses FIFO/RR even to root (Documentation/scheduler/sched-rt-group.rst).
fn rt_group_sched(a: &rtlab_sys::rt_access::RtAccess) -> Check {
    use rtlab_sys::rt_access::RtGroupSched;
    let t = "RT group scheduling and this process's cgroup";
    let Some(place) = &a.cgroup else {
        return c(
            "rt-group-sched",
            t,
            Status::Info,
            "this process's cgroup is not readable (/proc/self/cgroup)",
            "",
        );
    };
    let gs = match &a.rt_group_sched {
        RtGroupSched::On { source } => format!("on ({source})"),
        RtGroupSched::Off { source } => format!("off ({source})"),
        RtGroupSched::Unknown => {
            "unknown (no /proc/config.gz or /boot/config-*; cgroup v2 has no rt file)".to_string()
        }
    };
    let root_procs =
        place.procs_files().map(|(_, r)| r).unwrap_or_else(|| "/sys/fs/cgroup/cgroup.procs".into());
    let remedy = format!(
        "move the real-time process to the root cgroup (echo $$ > {root_procs}), or run rtlab with an rt-* profile, which moves its own process there (journaled, put back); in a systemd service or container, give that group real-time runtime or run it outside"
    );
    match a.group_without_runtime() {
        Some(false) => {
            let why = if place.is_root() {
                "this process is in the root cgroup".to_string()
            } else if !a.rt_group_sched.is_on() {
                format!("this process is in cgroup {}", place.path)
            } else if let Some(r) = place.rt_runtime_us {
                format!("this process is in cgroup {} with cpu.rt_runtime_us = {r}", place.path)
            } else {
                format!("this process is in cgroup {}, which the cpu controller does not reach (it runs in the root task group)", place.path)
            };
            c("rt-group-sched", t, Status::Pass, format!("{gs}; {why}"), "")
        }
        Some(true) => c(
            "rt-group-sched",
            t,
            Status::Fail,
            format!("{gs}; this process is in cgroup {}, which has no real-time runtime: FIFO/RR are refused there with EPERM, even to root", place.path),
            remedy,
        ),
        None => c(
            "rt-group-sched",
            t,
            Status::Info,
            format!("{gs}; this process is in cgroup {}", place.path),
            format!("if a real-time priority is refused as root: {remedy}"),
        ),
    }
}

/// kernel.timer_migration: 1 lets the timers of an idle CPU be moved to a busy one, so
/// timer callbacks land on other CPUs unpredictably.
fn timer_migration(host: &dyn Host) -> Check {
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
fn watchdogs(host: &dyn Host, isolated: &[usize]) -> Check {
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
                    format!("{on_text}, not on the isolated CPUs {}", crate::cpu_list(isolated)),
                    "",
                )
            } else {
                c(
                    "watchdogs",
                    t,
                    Status::Warn,
                    format!("{on_text}, also on the isolated CPUs {}", crate::cpu_list(&hit)),
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
                crate::cpu_list(isolated)
            ),
            housekeeping,
        ),
    }
}

/// vm.stat_interval: how often the per-CPU vmstat worker folds counters
/// (Documentation/admin-guide/kernel-per-CPU-kthreads.rst).
fn vmstat(host: &dyn Host, isolated: &[usize]) -> Check {
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
            format!("{v} s, with isolated CPUs {}", crate::cpu_list(isolated)),
            remedy,
        ),
    }
}

/// /sys/devices/virtual/workqueue/cpumask: the CPUs unbound workqueues may run on
/// (Documentation/core-api/workqueue.rst, kernel-per-CPU-kthreads.rst).
fn workqueue(host: &dyn Host, isolated: &[usize]) -> Check {
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
    let cpus = crate::parse_cpu_mask(&mask);
    let list = crate::cpu_list(&cpus);
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
            format!("CPUs {list}, not the isolated {}", crate::cpu_list(isolated)),
            "",
        )
    } else {
        c(
            "workqueue",
            t,
            Status::Warn,
            format!("CPUs {list} (mask {mask}), also the isolated CPUs {}", crate::cpu_list(&hit)),
            if rest.is_empty() {
                "echo <housekeeping CPUs' mask> > /sys/devices/virtual/workqueue/cpumask"
                    .to_string()
            } else {
                format!("echo {} > /sys/devices/virtual/workqueue/cpumask (the CPUs that are not isolated)", crate::cpu_mask(&rest))
            },
        )
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::FakeHost;
    use crate::testing::put;
    use std::path::Path;

    fn row(root: &Path, id: &str) -> Check {
        run_checks(&FakeHost::new(root)).into_iter().find(|c| c.id == id).expect(id)
    }

    /// `tune check` as root in a systemd scope on an Ubuntu 24.04-like guest.
    fn ubuntu(r: &Path) {
        crate::testing::machine_v2(r);
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
        crate::testing::machine(r);
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
