//! Checks of the kernel, its boot options and the hardware: preemption, the tick, the
//! governor and C-states, SMT, huge pages, swap, virtualization, threaded IRQs, PM QoS and
//! ftrace.

use super::status::{c, cmdline_value, read_trim, Check, Env, Status};
use rtlab_host::host::Host;

/// A PREEMPT_RT kernel, and the preemption model in force.
pub(super) fn preemption(env: &Env) -> Vec<Check> {
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
pub(super) fn ticks(env: &Env) -> Vec<Check> {
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
pub(super) fn governor(env: &Env) -> Check {
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
pub(super) fn smt(host: &dyn Host) -> Check {
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

/// Transparent huge pages (compaction stalls in `always` mode).
pub(super) fn thp(host: &dyn Host) -> Check {
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
pub(super) fn swap(host: &dyn Host) -> Check {
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
pub(super) fn virtualization(env: &Env) -> Check {
    match &env.virtualization {
        Some(v) => c("virtualization", "bare metal", Status::Warn, format!("a {v} guest"), "measure on the robot's own hardware: the hypervisor can delay any wake-up (steal time)"),
        None => c("virtualization", "bare metal", Status::Pass, "bare metal", ""),
    }
}

/// Threaded IRQs (so NIC IRQ threads can get a priority).
pub(super) fn threaded_irqs(env: &Env) -> Check {
    c(
        "threaded-irqs",
        "threaded IRQs",
        if env.threaded_irqs { Status::Pass } else { Status::Warn },
        if env.threaded_irqs { "yes" } else { "no (no threadirqs, not PREEMPT_RT)" },
        "boot with threadirqs (or a PREEMPT_RT kernel) so NIC IRQ threads can get a priority (rt-kthreads)",
    )
}

/// The PM QoS request on /dev/cpu_dma_latency.
pub(super) fn cpu_dma_latency(host: &dyn Host) -> Check {
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
pub(super) fn tracing(host: &dyn Host) -> Check {
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

pub(super) fn cstates(host: &dyn Host, env: &rtlab_core::schema::Environment) -> Check {
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
