//! The machine a profile is applied to: files under a root (`/`, or a fake tree in tests),
//! the scheduling of other tasks, commands (`tc`, `ip`) and mounts.
//!
//! Contract: [`RealHost`] acts on the running kernel; [`FakeHost`] keeps every effect as
//! files under its root (`proc/<pid>/rtlab-fake-sched`, `rtlab-fake-commands`, ...) so that
//! an apply in one process and a restore in another see the same fake machine. Paths are
//! absolute kernel paths (`/proc/irq/36/smp_affinity`); the host joins them to its root.

use std::path::{Path, PathBuf};

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
    fn sched_get(&self, pid: i32) -> Result<(i32, i32), String>;
    fn sched_set(&self, pid: i32, policy: i32, priority: i32) -> Result<(), String>;
    fn affinity_get(&self, pid: i32) -> Result<Vec<usize>, String>;
    fn affinity_set(&self, pid: i32, cpus: &[usize]) -> Result<(), String>;
    /// Run a command (argv[0] is the program); Ok(stdout) on exit 0, Err(stderr) otherwise.
    fn run(&self, argv: &[String]) -> Result<String, String>;
    fn mount(&self, fstype: &str, target: &str) -> Result<(), String>;
    fn umount(&self, target: &str) -> Result<(), String>;
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
    fn sched_get(&self, pid: i32) -> Result<(i32, i32), String> {
        rtlab_sys::tune_sys::sched_get(pid).map_err(|e| e.to_string())
    }
    fn sched_set(&self, pid: i32, policy: i32, priority: i32) -> Result<(), String> {
        rtlab_sys::tune_sys::sched_set(pid, policy, priority).map_err(|e| e.to_string())
    }
    fn affinity_get(&self, pid: i32) -> Result<Vec<usize>, String> {
        rtlab_sys::tune_sys::affinity_get(pid).map_err(|e| e.to_string())
    }
    fn affinity_set(&self, pid: i32, cpus: &[usize]) -> Result<(), String> {
        rtlab_sys::tune_sys::affinity_set(pid, cpus).map_err(|e| e.to_string())
    }
    fn run(&self, argv: &[String]) -> Result<String, String> {
        let out = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .map_err(|e| format!("{}: {e}", argv[0]))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!("`{}` failed: {}", argv.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
        }
    }
    fn mount(&self, fstype: &str, target: &str) -> Result<(), String> {
        rtlab_sys::tune_sys::mount_fs(fstype, target).map_err(|e| e.to_string())
    }
    fn umount(&self, target: &str) -> Result<(), String> {
        rtlab_sys::tune_sys::umount_fs(target).map_err(|e| e.to_string())
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

    fn check_task(&self, pid: i32) -> Result<(), String> {
        if self.root.join(format!("proc/{pid}")).is_dir() {
            Ok(())
        } else {
            Err(format!("pid {pid}: no such process (ESRCH)"))
        }
    }

    fn log(&self, line: &str) {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(self.root.join("rtlab-fake-commands")) {
            let _ = writeln!(f, "{line}");
        }
    }

    /// Every command and mount the fake machine was asked to run, in order.
    pub fn commands(&self) -> Vec<String> {
        std::fs::read_to_string(self.root.join("rtlab-fake-commands")).unwrap_or_default().lines().map(String::from).collect()
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
        if p.ends_with("/tasks") {
            // cgroup v1: a task is in exactly one cpuset; kernel threads named in
            // rtlab-fake-pinned refuse to move (EINVAL), like per-CPU kthreads
            let pid = value.trim();
            let pinned = std::fs::read_to_string(self.root.join("rtlab-fake-pinned")).unwrap_or_default();
            if pinned.lines().any(|l| l.trim() == pid) {
                return Err(std::io::Error::from_raw_os_error(22));
            }
            for f in walk_tasks(&self.path("/sys/fs/cgroup/cpuset")) {
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
        std::fs::create_dir(&real)?;
        for (f, v) in [("cpuset.cpus", ""), ("cpuset.mems", ""), ("cpuset.cpu_exclusive", "0"), ("tasks", "")] {
            std::fs::write(real.join(f), v)?;
        }
        Ok(())
    }
    fn sched_get(&self, pid: i32) -> Result<(i32, i32), String> {
        self.check_task(pid)?;
        let s = std::fs::read_to_string(self.task_file(pid, "sched")).unwrap_or_else(|_| "0 0".into());
        let mut it = s.split_whitespace().map(|v| v.parse::<i32>().unwrap_or(0));
        Ok((it.next().unwrap_or(0), it.next().unwrap_or(0)))
    }
    fn sched_set(&self, pid: i32, policy: i32, priority: i32) -> Result<(), String> {
        self.check_task(pid)?;
        std::fs::write(self.task_file(pid, "sched"), format!("{policy} {priority}")).map_err(|e| e.to_string())
    }
    fn affinity_get(&self, pid: i32) -> Result<Vec<usize>, String> {
        self.check_task(pid)?;
        match std::fs::read_to_string(self.task_file(pid, "affinity")) {
            Ok(s) => rtlab_sys::cpus::parse_cpu_list(&s),
            Err(_) => Ok(rtlab_sys::cpus::online_cpus(&self.root).0),
        }
    }
    fn affinity_set(&self, pid: i32, cpus: &[usize]) -> Result<(), String> {
        self.check_task(pid)?;
        std::fs::write(self.task_file(pid, "affinity"), crate::cpu_list(cpus)).map_err(|e| e.to_string())
    }
    fn run(&self, argv: &[String]) -> Result<String, String> {
        let line = argv.join(" ");
        self.log(&line);
        // a fake machine can be told that a command fails
        if let Ok(fail) = std::fs::read_to_string(self.root.join("rtlab-fake-fail")) {
            if fail.lines().any(|f| !f.is_empty() && line.contains(f)) {
                return Err(format!("`{line}` failed: refused by the fake machine"));
            }
        }
        Ok(String::new())
    }
    fn mount(&self, fstype: &str, target: &str) -> Result<(), String> {
        self.log(&format!("mount -t {fstype} {target}"));
        std::fs::create_dir_all(self.path(target)).map_err(|e| e.to_string())
    }
    fn umount(&self, target: &str) -> Result<(), String> {
        self.log(&format!("umount {target}"));
        Ok(())
    }
}

fn walk_tasks(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk_tasks(&p));
            } else if p.file_name().is_some_and(|n| n == "tasks") {
                out.push(p);
            }
        }
    }
    out
}
