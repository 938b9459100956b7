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
            Err(format!(
                "`{}` failed: {}",
                argv.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
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
    fn sched_get(&self, pid: i32) -> Result<(i32, i32), String> {
        self.check_task(pid)?;
        let s =
            std::fs::read_to_string(self.task_file(pid, "sched")).unwrap_or_else(|_| "0 0".into());
        let mut it = s.split_whitespace().map(|v| v.parse::<i32>().unwrap_or(0));
        Ok((it.next().unwrap_or(0), it.next().unwrap_or(0)))
    }
    fn sched_set(&self, pid: i32, policy: i32, priority: i32) -> Result<(), String> {
        self.check_task(pid)?;
        std::fs::write(self.task_file(pid, "sched"), format!("{policy} {priority}"))
            .map_err(|e| e.to_string())
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
        std::fs::write(self.task_file(pid, "affinity"), crate::cpu_list(cpus))
            .map_err(|e| e.to_string())
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
