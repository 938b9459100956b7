//! The machine a profile is applied to: files under a root (`/`, or a fake tree in tests),
//! the scheduling of other tasks, commands (`tc`, `ip`) and mounts.
//!
//! Contract: [`RealHost`] acts on the running kernel; [`FakeHost`] keeps every effect as
//! files under its root (`proc/<pid>/rtlab-fake-sched`, `rtlab-fake-commands`, ...) so that
//! an apply in one process and a restore in another see the same fake machine. Paths are
//! absolute kernel paths (`/proc/irq/36/smp_affinity`); the host joins them to its root.
//!
//! The fake kernel's cgroups: a cgroup-v1 cpuset tree at /sys/fs/cgroup/cpuset (`tasks`
//! files), and a cgroup-v2 tree wherever a directory holds `cgroup.controllers`
//! ([`crate::testing::cgroup2`]): `cgroup.procs` takes whole processes (and updates the
//! `0::` line of /proc/PID/cgroup when the fake has one), `cgroup.subtree_control` takes
//! `+x`/`-x` for the controllers the directory's `cgroup.controllers` offers, a new
//! directory gets the interface files of the controllers its parent enables, and
//! `cpuset.cpus.partition` takes `member`/`root`/`isolated` unless the fake root's
//! `rtlab-fake-partition` says otherwise: a line `MODE EINVAL` refuses that mode, `MODE
//! TEXT` makes the file read TEXT after MODE is written (`root root invalid (reason)`), and
//! `absent` leaves the file out of new cgroups (a kernel without partitions).
//!
//! Errors: [`HostError`], one line naming the path, pid or command; its
//! [`HostError::missing`] is Some when the machine lacks something (a privilege: EPERM/EACCES;
//! a kernel interface: ENOENT of a file under /proc or /sys; a program: not installed).

use rtlab_core::error::Missing;
use std::path::{Path, PathBuf};

/// What went wrong on the machine: a file, a task, a command or a mount.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A kernel file or directory could not be read, written, created or removed
    /// (`what`: "reading", "writing '1' to", "creating", "removing").
    #[error("{what} {path}: {source}")]
    File {
        what: String,
        path: String,
        #[source]
        source: std::io::Error,
        missing: Option<Box<Missing>>,
    },
    /// The task is gone (or never was).
    #[error("pid {pid}: no such process (ESRCH)")]
    NoTask { pid: i32 },
    /// A scheduling, affinity or mount syscall failed (the message names the call and pid).
    #[error("{source}")]
    Sys {
        #[source]
        source: rtlab_sys::SysError,
        missing: Option<Box<Missing>>,
    },
    /// A program could not be started.
    #[error("{program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
        missing: Option<Box<Missing>>,
    },
    /// A command exited with an error.
    #[error("`{command}` failed: {stderr}")]
    Command { command: String, stderr: String },
}

impl HostError {
    /// A file operation on `path` failed; EPERM/EACCES is a missing privilege, ENOENT of a
    /// /proc or /sys file a missing kernel feature.
    pub fn file(what: impl Into<String>, path: &str, source: std::io::Error) -> HostError {
        let what = what.into();
        let missing = match source.raw_os_error() {
            Some(1) | Some(13) => {
                Some(Missing::privilege(&format!("write {path}"), "run rtlab as root (sudo)"))
            }
            Some(2) if is_kernel_path(path) => Some(Missing::kernel(
                path,
                "a kernel built with this interface (rtlab tune check says which)",
            )),
            _ => None,
        };
        HostError::File { what, path: path.into(), source, missing: missing.map(Box::new) }
    }

    /// A failed syscall; EPERM (and the refused RT priority) is a missing privilege, ENODEV
    /// of a mount a missing kernel filesystem.
    pub fn sys(source: rtlab_sys::SysError) -> HostError {
        let missing = match &source {
            // the real cause (a cgroup without RT runtime for root too) and its fix
            rtlab_sys::SysError::RtRefused { policy, priority, cause, fix } => Some(Missing {
                need: rtlab_core::error::Need::Privilege {
                    what: format!("{policy} priority {priority}"),
                },
                what: format!("the kernel refused {policy} priority {priority} (EPERM){cause}"),
                fix: fix.clone(),
            }),
            rtlab_sys::SysError::Os { what, source } => match source.raw_os_error() {
                Some(1) | Some(13) => Some(Missing::privilege(what, "run rtlab as root (sudo)")),
                Some(19) => Some(Missing::kernel(what, "a kernel with this filesystem")),
                _ => None,
            },
            _ => None,
        };
        HostError::Sys { source, missing: missing.map(Box::new) }
    }

    /// A program that could not be started: ENOENT is a tool that is not installed.
    pub fn spawn(program: &str, source: std::io::Error) -> HostError {
        let missing = (source.kind() == std::io::ErrorKind::NotFound)
            .then(|| Missing::tool(program, package_of(program)));
        HostError::Spawn { program: program.into(), source, missing: missing.map(Box::new) }
    }

    /// What this machine lacks, when that is the cause (the case is then skipped).
    pub fn missing(&self) -> Option<&Missing> {
        match self {
            HostError::File { missing, .. }
            | HostError::Sys { missing, .. }
            | HostError::Spawn { missing, .. } => missing.as_deref(),
            HostError::NoTask { .. } | HostError::Command { .. } => None,
        }
    }

    /// The errno behind the error, if any.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            HostError::File { source, .. } | HostError::Spawn { source, .. } => {
                source.raw_os_error()
            }
            HostError::Sys { source: rtlab_sys::SysError::Os { source, .. }, .. } => {
                source.raw_os_error()
            }
            HostError::NoTask { .. } => Some(3),
            _ => None,
        }
    }
}

/// A kernel interface (its absence is the kernel's, not a typo of rtlab's).
fn is_kernel_path(path: &str) -> bool {
    ["/proc/", "/sys/", "/dev/"].iter().any(|p| path.starts_with(p))
}

/// The Debian package of a program rtlab runs.
pub fn package_of(program: &str) -> &str {
    match program.rsplit('/').next().unwrap_or(program) {
        "tc" | "ip" => "iproute2",
        "rtla" => "rtla",
        "stress-ng" => "stress-ng",
        "iperf3" => "iperf3",
        "ethtool" => "ethtool",
        other => other,
    }
}

/// What profiles, the journal and the tracer need from a machine.
pub trait Host {
    /// `/` on a real machine.
    fn root(&self) -> &Path;
    /// The real path of a kernel path under the root.
    fn path(&self, p: &str) -> PathBuf {
        self.root().join(p.trim_start_matches('/'))
    }
    fn read(&self, p: &str) -> std::io::Result<String> {
        std::fs::read_to_string(self.path(p)).map(|s| s.trim_end_matches('\n').to_string())
    }
    fn write(&self, p: &str, value: &str) -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().write(true).open(self.path(p))?;
        f.write_all(value.as_bytes())
    }
    fn exists(&self, p: &str) -> bool {
        self.path(p).exists()
    }
    fn mkdir(&self, p: &str) -> std::io::Result<()> {
        std::fs::create_dir(self.path(p))
    }
    fn rmdir(&self, p: &str) -> std::io::Result<()> {
        std::fs::remove_dir(self.path(p))
    }
    /// Raw policy and priority of a task.
    fn sched_get(&self, pid: i32) -> Result<(i32, i32), HostError>;
    fn sched_set(&self, pid: i32, policy: i32, priority: i32) -> Result<(), HostError>;
    fn affinity_get(&self, pid: i32) -> Result<Vec<usize>, HostError>;
    fn affinity_set(&self, pid: i32, cpus: &[usize]) -> Result<(), HostError>;
    /// Run a command (argv[0] is the program); Ok(stdout) on exit 0, Err(stderr) otherwise.
    fn run(&self, argv: &[String]) -> Result<String, HostError>;
    fn mount(&self, fstype: &str, target: &str) -> Result<(), HostError>;
    fn umount(&self, target: &str) -> Result<(), HostError>;
    /// True for a fake tree (tests, `--root`).
    fn is_fake(&self) -> bool {
        false
    }
}

/// The running kernel.
pub struct RealHost {
    root: PathBuf,
}

impl RealHost {
    pub fn new() -> RealHost {
        RealHost { root: PathBuf::from("/") }
    }
}

impl Default for RealHost {
    fn default() -> Self {
        Self::new()
    }
}

impl Host for RealHost {
    fn root(&self) -> &Path {
        &self.root
    }
    fn sched_get(&self, pid: i32) -> Result<(i32, i32), HostError> {
        rtlab_sys::tasks::sched_get(pid).map_err(HostError::sys)
    }
    fn sched_set(&self, pid: i32, policy: i32, priority: i32) -> Result<(), HostError> {
        rtlab_sys::tasks::sched_set(pid, policy, priority).map_err(HostError::sys)
    }
    fn affinity_get(&self, pid: i32) -> Result<Vec<usize>, HostError> {
        rtlab_sys::tasks::affinity_get(pid).map_err(HostError::sys)
    }
    fn affinity_set(&self, pid: i32, cpus: &[usize]) -> Result<(), HostError> {
        rtlab_sys::tasks::affinity_set(pid, cpus).map_err(HostError::sys)
    }
    fn run(&self, argv: &[String]) -> Result<String, HostError> {
        let out = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .map_err(|e| HostError::spawn(&argv[0], e))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(HostError::Command {
                command: argv.join(" "),
                stderr: String::from_utf8_lossy(&out.stderr).trim().replace('\n', "; "),
            })
        }
    }
    fn mount(&self, fstype: &str, target: &str) -> Result<(), HostError> {
        rtlab_sys::mount::mount_fs(fstype, target).map_err(HostError::sys)
    }
    fn umount(&self, target: &str) -> Result<(), HostError> {
        rtlab_sys::mount::umount_fs(target).map_err(HostError::sys)
    }
}

/// A fake machine: a directory tree with `proc/` and `sys/`; process state and commands
/// are files too (see the module doc).
pub struct FakeHost {
    root: PathBuf,
}

impl FakeHost {
    pub fn new(root: impl Into<PathBuf>) -> FakeHost {
        FakeHost { root: root.into() }
    }

    fn task_file(&self, pid: i32, what: &str) -> PathBuf {
        self.root.join(format!("proc/{pid}/rtlab-fake-{what}"))
    }

    fn check_task(&self, pid: i32) -> Result<(), HostError> {
        if self.root.join(format!("proc/{pid}")).is_dir() {
            Ok(())
        } else {
            Err(HostError::NoTask { pid })
        }
    }

    fn log(&self, line: &str) {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.join("rtlab-fake-commands"))
        {
            let _ = writeln!(f, "{line}");
        }
    }

    /// Every command and mount the fake machine was asked to run, in order.
    pub fn commands(&self) -> Vec<String> {
        std::fs::read_to_string(self.root.join("rtlab-fake-commands"))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }
}

impl Host for FakeHost {
    fn root(&self) -> &Path {
        &self.root
    }
    fn is_fake(&self) -> bool {
        true
    }
    fn write(&self, p: &str, value: &str) -> std::io::Result<()> {
        let real = self.path(p);
        if !real.is_file() {
            return Err(std::io::Error::from_raw_os_error(2));
        }
        if p.ends_with("/cgroup.procs") && self.v2_top(&real).is_some() {
            return self.v2_move(&real, value);
        }
        if p.ends_with("/cgroup.subtree_control") {
            return v2_subtree_control(&real, value);
        }
        if p.ends_with("/cpuset.cpus.partition") {
            let mode = value.trim();
            for rule in self.partition_rules() {
                if let Some(reaction) = rule.strip_prefix(mode).and_then(|r| r.strip_prefix(' ')) {
                    if reaction.trim() == "EINVAL" {
                        return Err(std::io::Error::from_raw_os_error(22));
                    }
                    return std::fs::write(real, format!("{}\n", reaction.trim()));
                }
            }
            if !["member", "root", "isolated"].contains(&mode) {
                return Err(std::io::Error::from_raw_os_error(22));
            }
            return std::fs::write(real, format!("{mode}\n"));
        }
        if p.ends_with("/tasks") {
            // cgroup v1: a task is in exactly one cpuset; kernel threads named in
            // rtlab-fake-pinned refuse to move (EINVAL), like per-CPU kthreads
            let pid = value.trim();
            let pinned =
                std::fs::read_to_string(self.root.join("rtlab-fake-pinned")).unwrap_or_default();
            if pinned.lines().any(|l| l.trim() == pid) {
                return Err(std::io::Error::from_raw_os_error(22));
            }
            for f in walk_files(&self.path("/sys/fs/cgroup/cpuset"), "tasks") {
                let text = std::fs::read_to_string(&f).unwrap_or_default();
                let kept: Vec<&str> = text.lines().filter(|l| l.trim() != pid).collect();
                std::fs::write(&f, kept.iter().map(|l| format!("{l}\n")).collect::<String>())?;
            }
            // the kernel lists a cgroup's tasks sorted
            let text = std::fs::read_to_string(&real).unwrap_or_default();
            let mut pids: Vec<i64> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
            pids.push(pid.parse().map_err(|_| std::io::Error::from_raw_os_error(22))?);
            pids.sort_unstable();
            return std::fs::write(real, pids.iter().map(|p| format!("{p}\n")).collect::<String>());
        }
        std::fs::write(real, value)
    }
    fn mkdir(&self, p: &str) -> std::io::Result<()> {
        let real = self.path(p);
        if let Some(parent) = real.parent().filter(|d| d.join("cgroup.controllers").is_file()) {
            return self.v2_mkdir(parent, &real);
        }
        std::fs::create_dir(&real)?;
        for (f, v) in
            [("cpuset.cpus", ""), ("cpuset.mems", ""), ("cpuset.cpu_exclusive", "0"), ("tasks", "")]
        {
            std::fs::write(real.join(f), v)?;
        }
        Ok(())
    }
    fn sched_get(&self, pid: i32) -> Result<(i32, i32), HostError> {
        self.check_task(pid)?;
        let s =
            std::fs::read_to_string(self.task_file(pid, "sched")).unwrap_or_else(|_| "0 0".into());
        let mut it = s.split_whitespace().map(|v| v.parse::<i32>().unwrap_or(0));
        Ok((it.next().unwrap_or(0), it.next().unwrap_or(0)))
    }
    fn sched_set(&self, pid: i32, policy: i32, priority: i32) -> Result<(), HostError> {
        self.check_task(pid)?;
        let f = self.task_file(pid, "sched");
        std::fs::write(&f, format!("{policy} {priority}"))
            .map_err(|e| HostError::file("writing", &f.display().to_string(), e))
    }
    fn affinity_get(&self, pid: i32) -> Result<Vec<usize>, HostError> {
        self.check_task(pid)?;
        match std::fs::read_to_string(self.task_file(pid, "affinity")) {
            Ok(s) => rtlab_sys::cpus::parse_cpu_list(&s).map_err(|m| {
                let f = self.task_file(pid, "affinity").display().to_string();
                HostError::file(
                    "parsing",
                    &f,
                    std::io::Error::new(std::io::ErrorKind::InvalidData, m),
                )
            }),
            Err(_) => Ok(rtlab_sys::cpus::online_cpus(&self.root).0),
        }
    }
    fn affinity_set(&self, pid: i32, cpus: &[usize]) -> Result<(), HostError> {
        self.check_task(pid)?;
        let f = self.task_file(pid, "affinity");
        std::fs::write(&f, crate::cpu_list(cpus))
            .map_err(|e| HostError::file("writing", &f.display().to_string(), e))
    }
    fn run(&self, argv: &[String]) -> Result<String, HostError> {
        let line = argv.join(" ");
        self.log(&line);
        // a fake machine can be told that a command fails
        if let Ok(fail) = std::fs::read_to_string(self.root.join("rtlab-fake-fail")) {
            if fail.lines().any(|f| !f.is_empty() && line.contains(f)) {
                return Err(HostError::Command {
                    command: line,
                    stderr: "refused by the fake machine".into(),
                });
            }
        }
        Ok(String::new())
    }
    fn mount(&self, fstype: &str, target: &str) -> Result<(), HostError> {
        self.log(&format!("mount -t {fstype} {target}"));
        std::fs::create_dir_all(self.path(target))
            .map_err(|e| HostError::file("mounting on", target, e))
    }
    fn umount(&self, target: &str) -> Result<(), HostError> {
        self.log(&format!("umount {target}"));
        Ok(())
    }
}

/// The fake kernel's cgroup v2 (see the module doc).
impl FakeHost {
    fn partition_rules(&self) -> Vec<String> {
        std::fs::read_to_string(self.root.join("rtlab-fake-partition"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.trim().to_string())
            .collect()
    }

    /// The root of the cgroup-v2 tree holding `file`: its topmost directory with cgroup.controllers.
    fn v2_top(&self, file: &Path) -> Option<PathBuf> {
        let mut top = None;
        let mut dir = file.parent();
        while let Some(d) = dir.filter(|d| d.starts_with(&self.root)) {
            if d.join("cgroup.controllers").is_file() {
                top = Some(d.to_path_buf());
            }
            dir = d.parent();
        }
        top
    }

    /// A process is in exactly one cgroup: take it out of the others, list it sorted here.
    fn v2_move(&self, real: &Path, value: &str) -> std::io::Result<()> {
        let pid = value.trim();
        let pinned =
            std::fs::read_to_string(self.root.join("rtlab-fake-pinned")).unwrap_or_default();
        if pinned.lines().any(|l| l.trim() == pid) {
            return Err(std::io::Error::from_raw_os_error(22));
        }
        let n: i64 = pid.parse().map_err(|_| std::io::Error::from_raw_os_error(22))?;
        if !self.root.join(format!("proc/{n}")).is_dir() {
            return Err(std::io::Error::from_raw_os_error(3));
        }
        let top = self.v2_top(real).ok_or_else(|| std::io::Error::from_raw_os_error(2))?;
        for f in walk_files(&top, "cgroup.procs") {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            let kept: Vec<&str> = text.lines().filter(|l| l.trim() != pid).collect();
            std::fs::write(&f, kept.iter().map(|l| format!("{l}\n")).collect::<String>())?;
        }
        let text = std::fs::read_to_string(real).unwrap_or_default();
        let mut pids: Vec<i64> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
        pids.push(n);
        pids.sort_unstable();
        std::fs::write(real, pids.iter().map(|p| format!("{p}\n")).collect::<String>())?;
        // /proc/PID/cgroup names the cgroup from the mount's root ("0::/rtlab-rt")
        let rel = real
            .parent()
            .and_then(|d| d.strip_prefix(&top).ok())
            .map(|r| format!("/{}", r.display()))
            .unwrap_or_else(|| "/".into());
        let cg = self.root.join(format!("proc/{n}/cgroup"));
        if let Ok(text) = std::fs::read_to_string(&cg) {
            let lines: Vec<String> = text
                .lines()
                .map(|l| if l.starts_with("0::") { format!("0::{rel}") } else { l.to_string() })
                .collect();
            std::fs::write(&cg, lines.iter().map(|l| format!("{l}\n")).collect::<String>())?;
        }
        Ok(())
    }

    /// A new cgroup: the core files, and the cpuset files when the parent enables cpuset.
    fn v2_mkdir(&self, parent: &Path, real: &Path) -> std::io::Result<()> {
        std::fs::create_dir(real)?;
        let enabled =
            std::fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap_or_default();
        let mut files = vec![
            ("cgroup.controllers", format!("{}\n", enabled.trim())),
            ("cgroup.subtree_control", "\n".to_string()),
            ("cgroup.procs", String::new()),
            ("cgroup.type", "domain\n".to_string()),
        ];
        if enabled.split_whitespace().any(|c| c == "cpuset") {
            let eff = |f: &str| std::fs::read_to_string(parent.join(f)).unwrap_or_default();
            files.extend([
                ("cpuset.cpus", "\n".to_string()),
                ("cpuset.mems", "\n".to_string()),
                ("cpuset.cpus.effective", eff("cpuset.cpus.effective")),
                ("cpuset.mems.effective", eff("cpuset.mems.effective")),
            ]);
            if !self.partition_rules().iter().any(|r| r == "absent") {
                files.push(("cpuset.cpus.partition", "member\n".to_string()));
            }
        }
        for (f, v) in files {
            std::fs::write(real.join(f), v)?;
        }
        Ok(())
    }
}

/// `+x`/`-x` for the controllers `cgroup.controllers` offers (ENOENT for others), listed in
/// that file's order like the kernel does.
fn v2_subtree_control(real: &Path, value: &str) -> std::io::Result<()> {
    let dir = real.parent().ok_or_else(|| std::io::Error::from_raw_os_error(2))?;
    let offered = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
    let offered: Vec<&str> = offered.split_whitespace().collect();
    let now = std::fs::read_to_string(real)?;
    let mut on: Vec<String> = now.split_whitespace().map(String::from).collect();
    for tok in value.split_whitespace() {
        let (sign, name) = tok.split_at(1);
        if !offered.contains(&name) {
            return Err(std::io::Error::from_raw_os_error(2));
        }
        match sign {
            "+" if !on.iter().any(|c| c == name) => on.push(name.to_string()),
            "+" => {}
            "-" => on.retain(|c| c != name),
            _ => return Err(std::io::Error::from_raw_os_error(22)),
        }
    }
    on.sort_by_key(|c| offered.iter().position(|o| o == c));
    std::fs::write(real, format!("{}\n", on.join(" ")))
}

fn walk_files(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk_files(&p, name));
            } else if p.file_name().is_some_and(|n| n == name) {
                out.push(p);
            }
        }
    }
    out
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

/// The mounts of /proc/mounts: (mount point, fstype, options).
pub fn mounts(host: &dyn Host) -> Vec<(String, String, String)> {
    rtlab_sys::rt_access::parse_mounts(&host.read("/proc/mounts").unwrap_or_default())
}

/// Where the cgroup-v2 (unified) hierarchy is: /sys/fs/cgroup when it is the unified root,
/// else the first cgroup2 mount of /proc/mounts (`/sys/fs/cgroup/unified` on a hybrid setup).
pub fn cgroup2_mount(host: &dyn Host) -> Option<String> {
    if host.exists("/sys/fs/cgroup/cgroup.controllers") {
        return Some("/sys/fs/cgroup".into());
    }
    mounts(host)
        .into_iter()
        .find(|m| m.1 == "cgroup2")
        .map(|m| m.0.trim_end_matches('/').to_string())
        .filter(|m| host.exists(&format!("{m}/cgroup.controllers")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::error::Need;

    fn errno(n: i32) -> std::io::Error {
        std::io::Error::from_raw_os_error(n)
    }

    #[test]
    fn the_machine_s_lacks_are_missing_and_the_rest_is_not() {
        let e =
            HostError::file("writing '-1' to", "/proc/sys/kernel/sched_rt_runtime_us", errno(1));
        assert!(matches!(e.missing().unwrap().need, Need::Privilege { .. }));
        let msg = e.to_string();
        assert!(msg.starts_with("writing '-1' to /proc/sys/kernel/sched_rt_runtime_us: "), "{msg}");
        let e = HostError::file("reading", "/sys/fs/cgroup/cpuset.cpus.partition", errno(2));
        assert!(matches!(e.missing().unwrap().need, Need::Kernel { .. }));
        // a file of rtlab's own that is not there is not the kernel's lack
        assert!(HostError::file("reading", "/tmp/x", errno(2)).missing().is_none());
        assert!(HostError::file("writing 'x' to", "/proc/irq/5/smp_affinity", errno(22))
            .missing()
            .is_none());
        let e = HostError::spawn("tc", std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(e.missing().unwrap().fix, "apt-get install iproute2");
        assert!(HostError::Command { command: "tc qdisc".into(), stderr: "no".into() }
            .missing()
            .is_none());
        let e = HostError::sys(rtlab_sys::SysError::RtRefused {
            policy: "fifo",
            priority: 80,
            cause: " although this process has CAP_SYS_NICE: it runs in cgroup /a.scope".into(),
            fix: "move it to the root cgroup".into(),
        });
        let m = e.missing().unwrap();
        assert!(matches!(m.need, Need::Privilege { .. }));
        assert_eq!(
            m.to_string(),
            "the kernel refused fifo priority 80 (EPERM) although this process has CAP_SYS_NICE: it runs in cgroup /a.scope (move it to the root cgroup)"
        );
        assert!(HostError::NoTask { pid: 7 }.missing().is_none());
    }

    #[test]
    fn a_fake_task_that_is_gone_is_no_task() {
        let d = tempfile::tempdir().unwrap();
        let h = FakeHost::new(d.path());
        assert!(matches!(h.sched_set(4242, 1, 80), Err(HostError::NoTask { pid: 4242 })));
        assert_eq!(h.sched_get(4242).unwrap_err().raw_os_error(), Some(3));
    }
}
