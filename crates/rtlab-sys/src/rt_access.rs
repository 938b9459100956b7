//! May this process use a real-time policy, and if the kernel refuses one, why: privilege
//! (root, CAP_SYS_NICE, RLIMIT_RTPRIO), RT group scheduling with the process in a cgroup
//! that has no real-time runtime, and `kernel.sched_rt_runtime_us`.
//!
//! Contract: read-only; [`RtAccess::detect`] takes `root` (`/` on a real machine, a fake tree
//! in tests) and a pid (None: `self`) and never fails: what cannot be read is None or
//! [`RtGroupSched::Unknown`], never a guess. Sources: sched(7) ("Privileges and resource
//! limits"), capabilities(7) (CAP_SYS_NICE is bit 23 of `CapEff` in /proc/PID/status),
//! proc(5) (/proc/PID/limits, /proc/PID/cgroup),
//! Documentation/scheduler/sched-rt-group.rst (with CONFIG_RT_GROUP_SCHED a task group
//! whose `cpu.rt_runtime_us` is 0 may not run real-time tasks: sched_setscheduler(2) says
//! EPERM; cgroup v2 has no rt file and gives every group but the root none), and
//! Documentation/admin-guide/kernel-parameters.txt (`rt_group_sched=`).

use std::path::Path;

/// CAP_SYS_NICE (include/uapi/linux/capability.h).
const CAP_SYS_NICE: u32 = 23;

/// Whether the kernel schedules real-time tasks by group (CONFIG_RT_GROUP_SCHED).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RtGroupSched {
    /// On; `source` says how that is known.
    On { source: String },
    /// Off; `source` says how that is known.
    Off { source: String },
    /// Nothing readable says (no kernel config, cgroup v2 only).
    Unknown,
}

impl RtGroupSched {
    pub fn is_on(&self) -> bool {
        matches!(self, RtGroupSched::On { .. })
    }
}

/// The cgroup a process is in, where it decides its real-time runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupPlace {
    /// 2 (the unified hierarchy) or 1 (the cgroup-v1 hierarchy with the cpu controller).
    pub version: u8,
    /// The cgroup as /proc/PID/cgroup names it (`/system.slice/x.scope`; `/` is the root).
    pub path: String,
    /// Where that hierarchy is mounted (`/sys/fs/cgroup`, `/sys/fs/cgroup/cpu,cpuacct`).
    pub mount: Option<String>,
    /// cgroup v1: `cpu.rt_runtime_us` of the group (None on v2 or when not readable).
    pub rt_runtime_us: Option<i64>,
    /// cgroup v2: whether the cpu controller reaches the group (the root's
    /// `cgroup.subtree_control` lists `cpu`), which makes it a task group of its own; without
    /// it the process runs in the root task group. None: not readable, or cgroup v1.
    pub cpu_controller: Option<bool>,
}

impl CgroupPlace {
    /// The root cgroup.
    pub fn is_root(&self) -> bool {
        self.path.trim_end_matches('/').is_empty()
    }

    /// The `cgroup.procs` file of the process's cgroup and of the root, when mounted.
    pub fn procs_files(&self) -> Option<(String, String)> {
        let m = self.mount.as_deref()?.trim_end_matches('/');
        let p = self.path.trim_end_matches('/');
        Some((format!("{m}{p}/cgroup.procs"), format!("{m}/cgroup.procs")))
    }
}

/// What decides whether this process may use a real-time policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtAccess {
    /// Effective uid 0 (/proc/PID/status `Uid:`).
    pub root_user: Option<bool>,
    /// CAP_SYS_NICE in the effective set (/proc/PID/status `CapEff:`).
    pub cap_sys_nice: Option<bool>,
    /// The soft RLIMIT_RTPRIO (/proc/PID/limits `Max realtime priority`; u64::MAX: unlimited).
    pub rtprio_limit: Option<u64>,
    pub rt_group_sched: RtGroupSched,
    /// The process's cgroup (None: /proc/PID/cgroup not readable).
    pub cgroup: Option<CgroupPlace>,
    /// /proc/sys/kernel/sched_rt_runtime_us (-1: no limit).
    pub sched_rt_runtime_us: Option<i64>,
    /// /proc/sys/kernel/sched_rt_period_us.
    pub sched_rt_period_us: Option<i64>,
    /// The container engine this process runs under, when it runs in one (`container()`).
    pub container: Option<String>,
}

/// What gives a process in a container the privilege for real-time policies.
pub const CONTAINER_NICE: &str = "start the container with CAP_SYS_NICE (podman or docker run --cap-add SYS_NICE --ulimit rtprio=99, or --privileged), or measure without a real-time policy (--policy other)";

/// What gives a container's cgroup real-time runtime (RT group scheduling on), or takes rtlab
/// out of it.
pub const CONTAINER_RT_RUNTIME: &str = "start the container with real-time runtime for its cgroup (podman run --cgroup-parent=/ --cpu-rt-runtime=N, or docker run --cpu-rt-runtime=N with dockerd --cpu-rt-runtime set; N in us of each second), or --privileged with an rt-* profile (--profile rt-normal), which moves rtlab's process to the host's root cgroup (journaled, put back)";

/// The container engine the processes under `root` run in: podman (`/run/.containerenv`),
/// docker (`/.dockerenv`), or what init's `container=` says (systemd-nspawn, lxc, ...).
pub fn container(root: &Path) -> Option<String> {
    if root.join("run/.containerenv").exists() {
        return Some("podman".into());
    }
    if root.join(".dockerenv").exists() {
        return Some("docker".into());
    }
    let env = std::fs::read(root.join("proc/1/environ")).ok()?;
    env.split(|b| *b == 0).find_map(|kv| {
        let v = std::str::from_utf8(kv.strip_prefix(b"container=")?).ok()?;
        Some(v.to_string()).filter(|v| !v.is_empty())
    })
}

/// Why the kernel refused a real-time priority, in two parts of one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefusalCause {
    /// Follows "the kernel refused fifo priority 80 (EPERM)": empty for a missing privilege,
    /// else " although this process has CAP_SYS_NICE: it runs in cgroup ...".
    pub cause: String,
    /// What to do.
    pub fix: String,
}

fn read(root: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(root.join(rel.trim_start_matches('/'))).ok()
}

fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|l| l.strip_prefix(key)).map(str::trim)
}

/// The mounts of /proc/mounts: (mount point, fstype, options).
fn mounts(root: &Path) -> Vec<(String, String, String)> {
    parse_mounts(&read(root, "proc/mounts").unwrap_or_default())
}

/// The root, inside its hierarchy, of the cgroup-v1 mount holding the cpu controller as
/// process `who` sees it (/proc/WHO/mountinfo's fourth field): "/" on a host, the
/// container's own group inside one.
fn v1_cpu_mount_root(root: &Path, who: &str) -> Option<String> {
    read(root, &format!("proc/{who}/mountinfo"))?.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mut r = right.split_whitespace();
        let (fstype, _source, opts) = (r.next()?, r.next()?, r.next()?);
        (fstype == "cgroup" && opts.split(',').any(|o| o == "cpu"))
            .then(|| left.split_whitespace().nth(3).map(String::from))?
    })
}

/// The mounts of a /proc/mounts text: (mount point, fstype, options); a mount point with a
/// space, tab or backslash in it is written with octal escapes (\040, \011, \134).
pub fn parse_mounts(text: &str) -> Vec<(String, String, String)> {
    let unescape = |s: &str| s.replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\");
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            Some((unescape(w.get(1)?), w.get(2)?.to_string(), w.get(3)?.to_string()))
        })
        .collect()
}

/// Whether RT group scheduling is on: the kernel config, the `rt_group_sched=` boot
/// parameter, or a cgroup-v1 cpu controller offering `cpu.rt_runtime_us`.
pub fn rt_group_sched(root: &Path) -> RtGroupSched {
    let cmdline = read(root, "proc/cmdline").unwrap_or_default();
    let param = cmdline.split_whitespace().find_map(|w| w.strip_prefix("rt_group_sched="));
    let release = read(root, "proc/sys/kernel/osrelease").unwrap_or_default();
    if let Some(config) = crate::env::kernel_config(root, release.trim()) {
        let on = config.lines().any(|l| l.trim() == "CONFIG_RT_GROUP_SCHED=y");
        if !on {
            return RtGroupSched::Off {
                source: "kernel config: CONFIG_RT_GROUP_SCHED not set".into(),
            };
        }
        // Linux 6.16+: built in, and switched off at boot by rt_group_sched=0 (or by default)
        let default_off =
            config.lines().any(|l| l.trim() == "CONFIG_RT_GROUP_SCHED_DEFAULT_DISABLED=y");
        return match param {
            Some("0") => RtGroupSched::Off {
                source: "CONFIG_RT_GROUP_SCHED=y, switched off by rt_group_sched=0".into(),
            },
            None if default_off => RtGroupSched::Off {
                source: "CONFIG_RT_GROUP_SCHED=y, off by default (CONFIG_RT_GROUP_SCHED_DEFAULT_DISABLED)".into(),
            },
            _ => RtGroupSched::On { source: "kernel config: CONFIG_RT_GROUP_SCHED=y".into() },
        };
    }
    if param == Some("0") {
        return RtGroupSched::Off { source: "rt_group_sched=0 on the command line".into() };
    }
    for (mnt, fstype, opts) in mounts(root) {
        if fstype == "cgroup" && opts.split(',').any(|o| o == "cpu") {
            let f = format!("{}/cpu.rt_runtime_us", mnt.trim_end_matches('/'));
            return if root.join(f.trim_start_matches('/')).exists() {
                RtGroupSched::On { source: format!("{f} exists (cgroup v1)") }
            } else {
                RtGroupSched::Off { source: format!("no cpu.rt_runtime_us in {mnt} (cgroup v1)") }
            };
        }
    }
    RtGroupSched::Unknown
}

/// The cgroup of `pid` (`self` when None) where its real-time runtime is decided: the
/// cgroup-v1 hierarchy with the cpu controller when mounted, else the unified one.
pub fn cgroup_place(root: &Path, pid: Option<i32>) -> Option<CgroupPlace> {
    let who = pid.map(|p| p.to_string()).unwrap_or_else(|| "self".into());
    let text = read(root, &format!("proc/{who}/cgroup"))?;
    let all = mounts(root);
    let v1 = text.lines().find_map(|l| {
        let mut it = l.splitn(3, ':');
        let (_, ctrl, path) = (it.next()?, it.next()?, it.next()?);
        ctrl.split(',').any(|c| c == "cpu").then(|| path.trim().to_string())
    });
    if let Some(path) = v1 {
        let mount = all
            .iter()
            .find(|m| m.1 == "cgroup" && m.2.split(',').any(|o| o == "cpu"))
            .map(|m| m.0.trim_end_matches('/').to_string());
        // a container sees its own group at the mount point (the mount's root in mountinfo
        // is that group): the path below it is what follows the mount's root
        let below = v1_cpu_mount_root(root, &who)
            .and_then(|r| path.strip_prefix(r.trim_end_matches('/')).map(String::from))
            .unwrap_or_else(|| path.clone());
        let rt_runtime_us = mount.as_ref().and_then(|m| {
            let p = below.trim_end_matches('/');
            read(root, &format!("{m}{p}/cpu.rt_runtime_us"))?.trim().parse().ok()
        });
        return Some(CgroupPlace { version: 1, path, mount, rt_runtime_us, cpu_controller: None });
    }
    let path = text.lines().find_map(|l| l.strip_prefix("0::"))?.trim().to_string();
    let path = path.trim_end_matches(" (deleted)").to_string();
    let mount = if root.join("sys/fs/cgroup/cgroup.controllers").exists() {
        Some("/sys/fs/cgroup".to_string())
    } else {
        all.iter().find(|m| m.1 == "cgroup2").map(|m| m.0.trim_end_matches('/').to_string())
    };
    let cpu_controller = mount.as_ref().and_then(|m| {
        let s = read(root, &format!("{m}/cgroup.subtree_control"))?;
        Some(s.split_whitespace().any(|c| c == "cpu"))
    });
    Some(CgroupPlace { version: 2, path, mount, rt_runtime_us: None, cpu_controller })
}

impl RtAccess {
    /// Read everything under `root` for `pid` (None: the calling process, `/proc/self`).
    pub fn detect(root: &Path, pid: Option<i32>) -> RtAccess {
        let who = pid.map(|p| p.to_string()).unwrap_or_else(|| "self".into());
        let status = read(root, &format!("proc/{who}/status")).unwrap_or_default();
        let root_user = field(&status, "Uid:")
            .and_then(|u| u.split_whitespace().nth(1))
            .and_then(|u| u.parse::<u32>().ok())
            .map(|u| u == 0);
        let cap_sys_nice = field(&status, "CapEff:")
            .and_then(|c| u64::from_str_radix(c, 16).ok())
            .map(|c| c & (1 << CAP_SYS_NICE) != 0);
        let rtprio_limit = read(root, &format!("proc/{who}/limits")).and_then(|t| {
            let rest = field(&t, "Max realtime priority")?;
            let soft = rest.split_whitespace().next()?;
            if soft == "unlimited" {
                Some(u64::MAX)
            } else {
                soft.parse().ok()
            }
        });
        let num = |rel: &str| read(root, rel).and_then(|v| v.trim().parse().ok());
        RtAccess {
            root_user,
            cap_sys_nice,
            rtprio_limit,
            rt_group_sched: rt_group_sched(root),
            cgroup: cgroup_place(root, pid),
            sched_rt_runtime_us: num("proc/sys/kernel/sched_rt_runtime_us"),
            sched_rt_period_us: num("proc/sys/kernel/sched_rt_period_us"),
            container: container(root),
        }
    }

    /// The calling process on the running kernel.
    pub fn of_this_process() -> RtAccess {
        RtAccess::detect(Path::new("/"), None)
    }

    /// Privileged for any real-time priority: CAP_SYS_NICE (root has it, outside a
    /// container that drops it).
    pub fn privileged(&self) -> bool {
        self.cap_sys_nice == Some(true)
            || (self.cap_sys_nice.is_none() && self.root_user == Some(true))
    }

    /// Whether the process's group has no real-time runtime while RT group scheduling is on
    /// (Some(true): the kernel refuses real-time policies there even to root). None: unknown.
    pub fn group_without_runtime(&self) -> Option<bool> {
        let place = self.cgroup.as_ref()?;
        if place.is_root() {
            return Some(false);
        }
        match &self.rt_group_sched {
            RtGroupSched::Off { .. } => Some(false),
            RtGroupSched::Unknown => None,
            RtGroupSched::On { .. } => match place.version {
                1 => place.rt_runtime_us.map(|r| r == 0),
                // v2: no rt file; every group of the cpu controller but the root gets none
                _ => Some(place.cpu_controller != Some(false)),
            },
        }
    }

    /// Why the kernel refused a real-time `priority` with EPERM, most likely cause first.
    pub fn refusal(&self, priority: i32) -> RefusalCause {
        let cg_line = |p: &CgroupPlace| match p.procs_files() {
            Some((_, root_procs)) => format!("echo $$ > {root_procs}"),
            None => "echo $$ > /sys/fs/cgroup/cgroup.procs".into(),
        };
        let profile = "or use an rt-* profile (--profile rt-normal), which does that for rtlab's process (journaled, put back)";
        if !self.privileged() {
            let limit = self.rtprio_limit.unwrap_or(0);
            if let (0, Some(engine)) = (limit, &self.container) {
                return RefusalCause {
                    cause: format!(
                        ": this process runs in a {engine} container without CAP_SYS_NICE and with no rtprio limit"
                    ),
                    fix: CONTAINER_NICE.into(),
                };
            }
            if limit == 0 {
                return RefusalCause {
                    cause: String::new(),
                    fix: "run as root, or grant CAP_SYS_NICE or an rtprio limit".into(),
                };
            }
            if (limit as i128) < priority as i128 {
                return RefusalCause {
                    cause: format!(
                        ": this process has no CAP_SYS_NICE and its rtprio limit (ulimit -r) is {limit}, below {priority}"
                    ),
                    fix: format!(
                        "run as root, grant CAP_SYS_NICE, raise the rtprio limit to {priority} (limits.conf: @group - rtprio {priority}), or ask for priority {limit} or less"
                    ),
                };
            }
        }
        let who = match (self.privileged(), self.root_user) {
            (true, Some(true)) => " although this process is root with CAP_SYS_NICE".to_string(),
            (true, _) => " although this process has CAP_SYS_NICE".to_string(),
            _ => format!(
                " although this process's rtprio limit ({}) allows it",
                self.rtprio_limit
                    .map(|l| if l == u64::MAX { "unlimited".into() } else { l.to_string() })
                    .unwrap_or_default()
            ),
        };
        if self.sched_rt_runtime_us == Some(0) {
            return RefusalCause {
                cause: format!(
                    "{who}: kernel.sched_rt_runtime_us is 0, which leaves real-time tasks no runtime at all"
                ),
                fix: "sysctl kernel.sched_rt_runtime_us=950000 (or -1), or use an rt-* profile, which sets -1 (journaled, put back)".into(),
            };
        }
        if let (Some(true), Some(p)) = (self.group_without_runtime(), self.cgroup.as_ref()) {
            let what = if p.version == 1 {
                format!(
                    "whose cpu.rt_runtime_us is 0 (cgroup v1 at {})",
                    p.mount.as_deref().unwrap_or("?")
                )
            } else {
                "which gives that group no real-time runtime".to_string()
            };
            return RefusalCause {
                cause: format!(
                    "{who}: it runs in cgroup {} and the kernel has RT group scheduling (CONFIG_RT_GROUP_SCHED), {what}",
                    p.path
                ),
                fix: match &self.container {
                    Some(_) => CONTAINER_RT_RUNTIME.to_string(),
                    None => format!("move it to the root cgroup ({}), {profile}", cg_line(p)),
                },
            };
        }
        if let (None, Some(p)) = (self.group_without_runtime(), self.cgroup.as_ref()) {
            return RefusalCause {
                cause: format!(
                    "{who}: it runs in cgroup {}, and if the kernel has RT group scheduling (CONFIG_RT_GROUP_SCHED: not readable here, no /proc/config.gz or /boot/config-*) that group has no real-time runtime",
                    p.path
                ),
                fix: format!("move it to the root cgroup ({}), {profile}", cg_line(p)),
            };
        }
        RefusalCause {
            cause: format!("{who}: no cause found in its cgroup ({}) or kernel.sched_rt_runtime_us ({})",
                self.cgroup.as_ref().map(|p| p.path.as_str()).unwrap_or("unknown"),
                self.sched_rt_runtime_us.map(|v| v.to_string()).unwrap_or_else(|| "unknown".into())),
            fix: "in a container, CAP_SYS_NICE must be held in the host's user namespace (docker run --cap-add SYS_NICE, not a rootless user namespace); rtlab tune check says more".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    use crate::testing::put;

    const ROOT_STATUS: &str = "Name:\trtlab\nUid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\n";
    const USER_STATUS: &str =
        "Name:\trtlab\nUid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\n";

    fn limits(rtprio: &str) -> String {
        format!("Limit                     Soft Limit           Hard Limit           Units\nMax nice priority         0                    0\nMax realtime priority     {rtprio}                    {rtprio}\n")
    }

    /// An Ubuntu 24.04 guest: CONFIG_RT_GROUP_SCHED=y, root in a systemd scope under cgroup v2.
    fn ubuntu(r: &Path) {
        put(r, "proc/sys/kernel/osrelease", "6.8.0-45-generic\n");
        put(r, "boot/config-6.8.0-45-generic", "CONFIG_HZ=1000\nCONFIG_RT_GROUP_SCHED=y\n");
        put(r, "proc/self/status", ROOT_STATUS);
        put(r, "proc/self/limits", &limits("0"));
        put(r, "proc/self/cgroup", "0::/system.slice/x.scope\n");
        put(r, "sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
        put(r, "sys/fs/cgroup/cgroup.subtree_control", "cpu io memory pids\n");
        put(r, "proc/sys/kernel/sched_rt_runtime_us", "950000\n");
        put(r, "proc/sys/kernel/sched_rt_period_us", "1000000\n");
    }

    #[test]
    fn root_in_a_v2_scope_with_rt_group_sched_is_told_to_move_to_the_root_cgroup() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        ubuntu(r);
        let a = RtAccess::detect(r, None);
        assert_eq!(
            (a.root_user, a.cap_sys_nice, a.rtprio_limit),
            (Some(true), Some(true), Some(0))
        );
        assert!(a.rt_group_sched.is_on());
        assert_eq!(a.cgroup.as_ref().unwrap().path, "/system.slice/x.scope");
        assert_eq!(a.group_without_runtime(), Some(true));
        assert_eq!((a.sched_rt_runtime_us, a.sched_rt_period_us), (Some(950000), Some(1000000)));
        let c = a.refusal(80);
        let line = format!("the kernel refused fifo priority 80 (EPERM){}: {}", c.cause, c.fix);
        assert_eq!(
            line,
            "the kernel refused fifo priority 80 (EPERM) although this process is root with CAP_SYS_NICE: it runs in cgroup /system.slice/x.scope and the kernel has RT group scheduling (CONFIG_RT_GROUP_SCHED), which gives that group no real-time runtime: move it to the root cgroup (echo $$ > /sys/fs/cgroup/cgroup.procs), or use an rt-* profile (--profile rt-normal), which does that for rtlab's process (journaled, put back)"
        );
        // the same in the root cgroup: no group cause; the cpu controller not enabled: the
        // process is in the root task group
        put(r, "proc/self/cgroup", "0::/\n");
        assert_eq!(RtAccess::detect(r, None).group_without_runtime(), Some(false));
        put(r, "proc/self/cgroup", "0::/system.slice/x.scope\n");
        put(r, "sys/fs/cgroup/cgroup.subtree_control", "io memory\n");
        assert_eq!(RtAccess::detect(r, None).group_without_runtime(), Some(false));
        // rt_group_sched=0 at boot turns it off
        put(r, "proc/cmdline", "quiet rt_group_sched=0\n");
        assert!(!RtAccess::detect(r, None).rt_group_sched.is_on());
    }

    #[test]
    fn no_config_on_cgroup_v2_is_unknown_and_said_so() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        ubuntu(r);
        fs::remove_file(r.join("boot/config-6.8.0-45-generic")).unwrap();
        let a = RtAccess::detect(r, None);
        assert_eq!(a.rt_group_sched, RtGroupSched::Unknown);
        assert_eq!(a.group_without_runtime(), None);
        let c = a.refusal(80);
        assert!(
            c.cause.contains("not readable here") && c.cause.contains("/system.slice/x.scope"),
            "{}",
            c.cause
        );
        assert!(c.fix.contains("echo $$ > /sys/fs/cgroup/cgroup.procs"), "{}", c.fix);
    }

    #[test]
    fn cgroup_v1_reads_the_group_s_rt_runtime() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        put(r, "proc/self/status", ROOT_STATUS);
        put(
            r,
            "proc/mounts",
            "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,cpu,cpuacct 0 0\n",
        );
        put(r, "proc/self/cgroup", "4:cpu,cpuacct:/docker/abc\n0::/\n");
        put(r, "sys/fs/cgroup/cpu,cpuacct/cpu.rt_runtime_us", "950000\n");
        put(r, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.rt_runtime_us", "0\n");
        let a = RtAccess::detect(r, None);
        assert!(
            matches!(&a.rt_group_sched, RtGroupSched::On { source } if source.contains("cgroup v1"))
        );
        let p = a.cgroup.clone().unwrap();
        assert_eq!((p.version, p.path.as_str(), p.rt_runtime_us), (1, "/docker/abc", Some(0)));
        assert_eq!(
            p.procs_files().unwrap(),
            (
                "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cgroup.procs".to_string(),
                "/sys/fs/cgroup/cpu,cpuacct/cgroup.procs".to_string()
            )
        );
        assert_eq!(a.group_without_runtime(), Some(true));
        assert!(a.refusal(80).cause.contains("cpu.rt_runtime_us is 0"));
        put(r, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.rt_runtime_us", "100000\n");
        assert_eq!(RtAccess::detect(r, None).group_without_runtime(), Some(false));
    }

    #[test]
    fn a_container_s_own_group_is_read_below_its_mount_and_its_remedy_names_the_options() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        put(r, "proc/self/status", ROOT_STATUS);
        // podman on cgroup v1: the container's group is what it sees at the mount point
        put(r, "proc/mounts", "cgroup /sys/fs/cgroup/cpu cgroup ro,nosuid,cpu 0 0\n");
        put(
            r,
            "proc/self/mountinfo",
            "1 0 0:5 / / rw - overlay overlay rw\n\
             30 29 0:28 /libpod_parent/libpod-abc /sys/fs/cgroup/cpu ro,nosuid - cgroup cgroup ro,cpu\n",
        );
        put(r, "proc/self/cgroup", "1:cpu:/libpod_parent/libpod-abc\n");
        put(r, "sys/fs/cgroup/cpu/cpu.rt_runtime_us", "0\n");
        put(r, "run/.containerenv", "");
        let a = RtAccess::detect(r, None);
        assert_eq!(a.cgroup.as_ref().unwrap().rt_runtime_us, Some(0));
        assert_eq!(a.group_without_runtime(), Some(true));
        let c = a.refusal(80);
        assert!(c.cause.contains("cpu.rt_runtime_us is 0"), "{}", c.cause);
        assert!(c.fix.contains("--cgroup-parent=/ --cpu-rt-runtime=N"), "{}", c.fix);
        assert!(c.fix.contains("--profile rt-normal"), "{}", c.fix);
        // outside a container: the host's own mount, the group below it
        put(
            r,
            "proc/self/mountinfo",
            "30 29 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n",
        );
        put(r, "sys/fs/cgroup/cpu/libpod_parent/libpod-abc/cpu.rt_runtime_us", "5000\n");
        let a = RtAccess::detect(r, None);
        assert_eq!(a.cgroup.as_ref().unwrap().rt_runtime_us, Some(5000));
    }

    #[test]
    fn root_in_a_container_without_cap_sys_nice_is_told_the_container_options() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        ubuntu(r);
        put(r, "proc/self/status", USER_STATUS);
        assert_eq!(container(r), None);
        put(r, "proc/1/environ", "PATH=/bin\0container=lxc\0HOME=/\0");
        assert_eq!(container(r).as_deref(), Some("lxc"));
        put(r, ".dockerenv", "");
        assert_eq!(container(r).as_deref(), Some("docker"));
        put(r, "run/.containerenv", "engine=\"podman-4.3.1\"\n");
        let a = RtAccess::detect(r, None);
        assert_eq!(a.container.as_deref(), Some("podman"));
        let c = a.refusal(80);
        assert!(c.cause.contains("in a podman container without CAP_SYS_NICE"), "{}", c.cause);
        assert!(c.fix.contains("--cap-add SYS_NICE --ulimit rtprio=99"), "{}", c.fix);
        assert!(c.fix.contains("--policy other"), "{}", c.fix);
        // an rtprio limit given to the container is used as anywhere else
        put(r, "proc/self/limits", &limits("50"));
        let c = RtAccess::detect(r, None).refusal(80);
        assert!(c.fix.contains("priority 50 or less"), "{}", c.fix);
    }

    #[test]
    fn a_user_without_privilege_is_told_to_run_as_root_or_raise_the_limit() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        ubuntu(r);
        put(r, "proc/self/status", USER_STATUS);
        let a = RtAccess::detect(r, None);
        assert!(!a.privileged());
        let c = a.refusal(80);
        assert_eq!(
            (c.cause.as_str(), c.fix.as_str()),
            ("", "run as root, or grant CAP_SYS_NICE or an rtprio limit")
        );
        put(r, "proc/self/limits", &limits("50"));
        let c = RtAccess::detect(r, None).refusal(80);
        assert!(c.cause.contains("rtprio limit (ulimit -r) is 50, below 80"), "{}", c.cause);
        assert!(c.fix.contains("priority 50 or less"), "{}", c.fix);
        // allowed by the limit, refused anyway: the cgroup
        put(r, "proc/self/limits", &limits("unlimited"));
        let c = RtAccess::detect(r, None).refusal(80);
        assert!(
            c.cause.contains("rtprio limit (unlimited) allows it")
                && c.cause.contains("RT group scheduling"),
            "{}",
            c.cause
        );
    }

    #[test]
    fn no_rt_runtime_at_all_is_named() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        ubuntu(r);
        put(r, "proc/sys/kernel/sched_rt_runtime_us", "0\n");
        let c = RtAccess::detect(r, None).refusal(10);
        assert!(c.cause.contains("sched_rt_runtime_us is 0"), "{}", c.cause);
    }

    #[test]
    fn this_process_is_readable() {
        let a = RtAccess::of_this_process();
        assert!(a.root_user.is_some() && a.cap_sys_nice.is_some() && a.cgroup.is_some());
    }
}
