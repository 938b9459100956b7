//! Checks of real-time scheduling: RT throttling and its period, the privilege to use
//! SCHED_FIFO, and RT group scheduling of this process's cgroup.

use super::status::{c, Check, Env, Status};

/// RT throttling (kernel.sched_rt_runtime_us).
pub(super) fn rt_throttling(env: &Env) -> Check {
    match env.sched_rt_runtime_us {
        Some(-1) => c("rt-throttling", "RT throttling", Status::Pass, "off (sched_rt_runtime_us = -1)", ""),
        Some(0) => c("rt-throttling", "RT throttling", Status::Fail, "sched_rt_runtime_us = 0: real-time tasks get no runtime at all (FIFO/RR can be refused with EPERM)", "sysctl kernel.sched_rt_runtime_us=-1 (the rt-* profiles do, and put it back)"),
        Some(v) => c("rt-throttling", "RT throttling", Status::Warn, format!("sched_rt_runtime_us = {v}"), "a busy RT thread is stopped for the rest of each second: the rt-* profiles set -1 (and put it back)"),
        None => c("rt-throttling", "RT throttling", Status::Info, "unknown", ""),
    }
}

/// kernel.sched_rt_period_us: the window RT throttling counts `sched_rt_runtime_us` in.
pub(super) fn rt_period(a: &rtlab_sys::rt_access::RtAccess) -> Check {
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
pub(super) fn rt_privilege(a: &rtlab_sys::rt_access::RtAccess) -> Check {
    let t = "real-time privilege (root, CAP_SYS_NICE, RLIMIT_RTPRIO)";
    let fix = match &a.container {
        Some(_) => rtlab_sys::rt_access::CONTAINER_NICE,
        None => "run as root, grant CAP_SYS_NICE (setcap cap_sys_nice+ep $(which rtlab)), or an rtprio limit (limits.conf: @group - rtprio 99)",
    };
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
    let who = match (a.root_user, &a.container) {
        (Some(true), Some(e)) => format!("root in a {e} container without CAP_SYS_NICE"),
        (Some(true), None) => {
            "root without CAP_SYS_NICE (a container or service that drops it)".into()
        }
        (_, Some(e)) => format!("not root, no CAP_SYS_NICE, in a {e} container"),
        (_, None) => "not root, no CAP_SYS_NICE".into(),
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
pub(super) fn rt_group_sched(a: &rtlab_sys::rt_access::RtAccess) -> Check {
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
    let remedy = match &a.container {
        Some(_) => rtlab_sys::rt_access::CONTAINER_RT_RUNTIME.to_string(),
        None => format!(
            "move the real-time process to the root cgroup (echo $$ > {root_procs}), or run rtlab with an rt-* profile, which moves its own process there (journaled, put back); in a systemd service or container, give that group real-time runtime or run it outside"
        ),
    };
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
