//! A tuning session: the guard through which every system change is made.
//!
//! Contract: [`Session::apply`] reads the value in force, writes the journal line (fsync'd),
//! then makes the change; [`Session::restore`] (or `Drop`, also while a panic unwinds) puts
//! everything back, newest first, and removes the journal. A kill -9 leaves the journal on
//! disk for `rtlab tune restore`. A Ctrl-C is a flag the caller's loop checks, after which the
//! guard is dropped normally. Nothing is changed when [`Session::dry_run`] is set.

use crate::host::{Host, HostError};
use crate::journal::{
    restore_journal, task_identity, Change, Journal, JournalError, RestoreReport,
};
use rtlab_core::error::Missing;
use serde::Serialize;
use std::path::Path;

/// Why a change was not made (it is then marked "not made" in the journal, or never
/// journaled). One line naming the path, pid or value.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The machine refused (a file, a task, a command, a mount).
    #[error(transparent)]
    Host(#[from] HostError),
    /// The journal line could not be written: nothing was changed.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The session was restored already; no more changes go through it.
    #[error("the session is already restored")]
    Restored,
    /// A directory rtlab creates is there already.
    #[error("{path} exists already (left by another tool, or by rtlab without a journal): remove it first")]
    Exists { path: String },
    /// This kernel has no cpuset partitions.
    #[error("{path}: no such file: this kernel has no cpuset partitions, the CPUs stay shared with other cgroups")]
    NoPartitions { path: String, missing: Box<Missing> },
    /// The kernel took the partition mode and did not make a partition of it.
    #[error("{path}: wrote '{mode}', the kernel says '{now}'")]
    PartitionInvalid { path: String, mode: String, now: String },
    /// The kernel refused every partition mode.
    #[error("{path}: the kernel refused {refused}")]
    PartitionRefused { path: String, refused: String },
    /// /dev/cpu_dma_latency could not be held.
    #[error("{path}: {source}")]
    PmQos {
        path: String,
        #[source]
        source: std::io::Error,
        missing: Option<Box<Missing>>,
    },
}

impl ApplyError {
    /// What this machine lacks, when that is the cause (a privilege, a kernel feature, a tool).
    pub fn missing(&self) -> Option<&Missing> {
        match self {
            ApplyError::Host(e) => e.missing(),
            ApplyError::Journal(e) => e.missing(),
            ApplyError::NoPartitions { missing, .. } => Some(missing),
            ApplyError::PmQos { missing, .. } => missing.as_deref(),
            _ => None,
        }
    }
}

/// One change a profile wants.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// Write a sysfs/procfs/tracefs/cgroup file.
    WriteFile { path: String, value: String },
    /// Write a file whose read-back is not a value that could be written back, with the write
    /// that undoes it: cgroup.subtree_control takes `+cpuset` and reads `cpuset cpu io`, so
    /// it is undone by `-cpuset`. Tokens `+x`/`-x` are "already so" when the file lists /
    /// does not list `x`; any other value when the file reads exactly it.
    WriteWithUndo { path: String, value: String, undo: String },
    /// Set the raw policy and priority of a task.
    SetSched { pid: i32, policy: i32, priority: i32 },
    /// Pin a task.
    SetAffinity { pid: i32, cpus: Vec<usize> },
    /// Create a cgroup directory. `parent_tasks` is the parent's membership file (`tasks` in
    /// cgroup v1, `cgroup.procs` in v2): where what is left inside goes when it is removed.
    MakeDir { path: String, parent_tasks: String },
    /// Move tasks from one cgroup membership file to another: cgroup-v1 `tasks` (threads) or
    /// cgroup-v2 `cgroup.procs` (whole processes).
    MoveTasks { from: String, to: String, pids: Vec<i32> },
    /// Make a cgroup-v2 cpuset a partition: write the first of `modes` (`isolated`, `root`)
    /// the kernel takes to its `cpuset.cpus.partition` file (`path`) and read it back; a
    /// read-back of "root invalid (reason)" is an error naming the kernel's reason (the change
    /// stays journaled and is undone). Journaled as a [`Change::File`] (old: `member`).
    Partition { path: String, modes: Vec<String> },
    /// Run a command, with the command that undoes it.
    Command { did: Vec<String>, undo: Vec<String> },
    /// Mount a filesystem.
    Mount { fstype: String, target: String },
    /// Hold /dev/cpu_dma_latency while the session lives.
    HoldPmQos { path: String, value_us: i32 },
}

impl Action {
    /// One line for `--dry-run`.
    pub fn describe(&self) -> String {
        match self {
            Action::WriteFile { path, value } => format!("write '{value}' to {path}"),
            Action::WriteWithUndo { path, value, undo } => {
                format!("write '{value}' to {path} (undone by '{undo}')")
            }
            Action::SetSched { pid, policy, priority } => {
                format!("set pid {pid} to {} {priority}", crate::journal::policy_name(*policy))
            }
            Action::SetAffinity { pid, cpus } => {
                format!("pin pid {pid} to CPUs {}", crate::cpu_list(cpus))
            }
            Action::MakeDir { path, .. } => format!("create {path}"),
            Action::MoveTasks { from, to, pids } => {
                format!("move {} tasks from {from} to {to}", pids.len())
            }
            Action::Partition { path, modes } => format!(
                "write '{}' to {path} (the first the kernel takes) and check it",
                modes.join("', else '")
            ),
            Action::Command { did, .. } => format!("run `{}`", did.join(" ")),
            Action::Mount { fstype, target } => format!("mount {fstype} on {target}"),
            Action::HoldPmQos { path, value_us } => format!("hold {path} at {value_us} us"),
        }
    }
}

/// The guard. Dropping it restores.
pub struct Session<'h> {
    host: &'h dyn Host,
    journal: Option<Journal>,
    pmqos: Vec<rtlab_sys::pmqos::CpuDmaLatency>,
    last_report: Option<RestoreReport>,
}

impl<'h> Session<'h> {
    /// Start a session journaled at `journal`; refuses if that journal has pending changes.
    pub fn begin(
        host: &'h dyn Host,
        journal: &Path,
        what: &str,
    ) -> Result<Session<'h>, JournalError> {
        Ok(Session {
            host,
            journal: Some(Journal::begin(journal, what)?),
            pmqos: Vec::new(),
            last_report: None,
        })
    }

    pub fn host(&self) -> &dyn Host {
        self.host
    }

    pub fn journal_path(&self) -> Option<&Path> {
        self.journal.as_ref().map(|j| j.path())
    }

    fn record(&mut self, c: &Change) -> Result<u64, ApplyError> {
        let j = self.journal.as_mut().ok_or(ApplyError::Restored)?;
        Ok(j.record(c)?)
    }

    fn failed(&mut self, seq: u64, e: impl Into<ApplyError>) -> Result<String, ApplyError> {
        let e = e.into();
        if let Some(j) = self.journal.as_mut() {
            let _ = j.mark_restored(seq, &format!("not made: {e}"));
        }
        Err(e)
    }

    /// Make one change (journaled first). Ok(what happened) or Err(why it was not made).
    pub fn apply(&mut self, action: &Action) -> Result<String, ApplyError> {
        match action {
            Action::WriteFile { path, value } => self.write_file(path, value),
            Action::WriteWithUndo { path, value, undo } => self.write_with_undo(path, value, undo),
            Action::Partition { path, modes } => self.partition(path, modes),
            Action::SetSched { pid, policy, priority } => self.set_sched(*pid, *policy, *priority),
            Action::SetAffinity { pid, cpus } => self.set_affinity(*pid, cpus),
            Action::MakeDir { path, parent_tasks } => self.make_dir(path, parent_tasks),
            Action::MoveTasks { from, to, pids } => self.move_tasks(from, to, pids),
            Action::Command { did, undo } => {
                let seq = self.record(&Change::Command { did: did.clone(), undo: undo.clone() })?;
                let r = self.host.run(did).map(|_| ());
                self.made(seq, r)
            }
            Action::Mount { fstype, target } => {
                let seq =
                    self.record(&Change::Mount { fstype: fstype.clone(), target: target.clone() })?;
                let r = self.host.mount(fstype, target);
                self.made(seq, r)
            }
            Action::HoldPmQos { path, value_us } => self.hold_pmqos(path, *value_us),
        }
    }

    /// "done" when the change journaled as `seq` was made; else the journal line is marked
    /// not made and the error returned.
    fn made(
        &mut self,
        seq: u64,
        r: Result<(), impl Into<ApplyError>>,
    ) -> Result<String, ApplyError> {
        match r {
            Ok(()) => Ok("done".into()),
            Err(e) => self.failed(seq, e),
        }
    }

    /// Write `value` to `path` (a choice file, "none [fifo] rr", is written back with the
    /// chosen word).
    fn write_file(&mut self, path: &str, value: &str) -> Result<String, ApplyError> {
        let old = self.host.read(path).map_err(|e| HostError::file("reading", path, e))?;
        let old = match (old.find('['), old.find(']')) {
            (Some(a), Some(b)) if a < b && !path.ends_with("/tasks") => old[a + 1..b].to_string(),
            _ => old,
        };
        if old.trim() == value.trim() {
            return Ok("already so".into());
        }
        let seq = self.record(&Change::File { path: path.into(), old, new: value.into() })?;
        let r = self
            .host
            .write(path, value)
            .map_err(|e| HostError::file(format!("writing '{value}' to"), path, e));
        self.made(seq, r)
    }

    /// Write `value` to a control file that is put back by writing `undo`.
    fn write_with_undo(
        &mut self,
        path: &str,
        value: &str,
        undo: &str,
    ) -> Result<String, ApplyError> {
        let now = self.host.read(path).map_err(|e| HostError::file("reading", path, e))?;
        if control_holds(&now, value) {
            return Ok("already so".into());
        }
        let seq = self.record(&Change::WriteWithUndo {
            path: path.into(),
            new: value.into(),
            undo: undo.into(),
        })?;
        let r = self
            .host
            .write(path, value)
            .map_err(|e| HostError::file(format!("writing '{value}' to"), path, e));
        self.made(seq, r)
    }

    /// Make a cpuset partition: the first of `modes` the kernel takes and makes one of.
    fn partition(&mut self, path: &str, modes: &[String]) -> Result<String, ApplyError> {
        let host = self.host;
        if !host.exists(path) {
            return Err(ApplyError::NoPartitions {
                path: path.into(),
                missing: Box::new(Missing::kernel(
                    "cpuset partitions (cpuset.cpus.partition)",
                    "Linux 5.11 or later with cgroup v2 cpusets",
                )),
            });
        }
        let old = host.read(path).map_err(|e| HostError::file("reading", path, e))?;
        let mut refused = Vec::new();
        for mode in modes {
            if old.trim() == mode {
                return Ok("already so".into());
            }
            let seq = self.record(&Change::File {
                path: path.into(),
                old: old.clone(),
                new: mode.clone(),
            })?;
            if let Err(e) = host.write(path, mode) {
                // older kernels refuse `isolated` (EINVAL): try the next mode
                let why = format!("'{mode}' {}", errno_word(&e));
                if let Some(j) = self.journal.as_mut() {
                    let _ = j.mark_restored(seq, &format!("not made: {why}"));
                }
                refused.push(why);
                continue;
            }
            // the kernel takes the write and may still not make a partition of it:
            // "isolated invalid (Cpu list in cpuset.cpus not exclusive)" (made: restore
            // writes `old` back)
            let now = host.read(path).unwrap_or_default();
            if now.trim() != mode {
                return Err(ApplyError::PartitionInvalid {
                    path: path.into(),
                    mode: mode.clone(),
                    now: now.trim().to_string(),
                });
            }
            return Ok(if refused.is_empty() {
                "done".into()
            } else {
                format!("a {mode} partition ({} refused)", refused.join(", "))
            });
        }
        Err(ApplyError::PartitionRefused { path: path.into(), refused: refused.join(", ") })
    }

    /// Set a task's scheduling policy and priority.
    fn set_sched(&mut self, pid: i32, policy: i32, priority: i32) -> Result<String, ApplyError> {
        let host = self.host;
        let t = task_identity(host, pid).ok_or(HostError::NoTask { pid })?;
        let (op, opr) = host.sched_get(pid)?;
        if (op, opr) == (policy, priority) {
            return Ok("already so".into());
        }
        let seq = self.record(&Change::Sched {
            pid,
            comm: t.comm,
            start_time: t.start_time,
            old_policy: op,
            old_priority: opr,
            new_policy: policy,
            new_priority: priority,
        })?;
        let r = host.sched_set(pid, policy, priority);
        self.made(seq, r)
    }

    /// Set a task's CPU affinity.
    fn set_affinity(&mut self, pid: i32, cpus: &[usize]) -> Result<String, ApplyError> {
        let host = self.host;
        let t = task_identity(host, pid).ok_or(HostError::NoTask { pid })?;
        let old = host.affinity_get(pid)?;
        if old == cpus {
            return Ok("already so".into());
        }
        let seq = self.record(&Change::Affinity {
            pid,
            comm: t.comm,
            start_time: t.start_time,
            old_cpus: old,
            new_cpus: cpus.to_vec(),
        })?;
        let r = host.affinity_set(pid, cpus);
        self.made(seq, r)
    }

    /// Create a directory rtlab owns (a cgroup); one that is there already is refused.
    fn make_dir(&mut self, path: &str, parent_tasks: &str) -> Result<String, ApplyError> {
        if self.host.exists(path) {
            return Err(ApplyError::Exists { path: path.into() });
        }
        let seq =
            self.record(&Change::MkDir { path: path.into(), parent_tasks: parent_tasks.into() })?;
        let r = self.host.mkdir(path).map_err(|e| HostError::file("creating", path, e));
        self.made(seq, r)
    }

    /// Move tasks into the cgroup file `to` (those that cannot move are said, not an error).
    fn move_tasks(&mut self, from: &str, to: &str, pids: &[i32]) -> Result<String, ApplyError> {
        let host = self.host;
        let tasks: Vec<_> = pids.iter().filter_map(|p| task_identity(host, *p)).collect();
        self.record(&Change::CgroupMove {
            from: from.into(),
            to: to.into(),
            tasks: tasks.clone(),
        })?;
        let mut stuck = Vec::new();
        let mut moved = 0;
        for t in &tasks {
            match host.write(to, &t.pid.to_string()) {
                Ok(()) => moved += 1,
                Err(e) if e.raw_os_error() == Some(3) => {} // exited meanwhile
                Err(e) => stuck.push(format!("{} ({}): {}", t.pid, t.comm, errno_word(&e))),
            }
        }
        if stuck.is_empty() {
            Ok(format!("moved {moved}"))
        } else {
            Ok(format!(
                "moved {moved}; {} cannot move (per-CPU kernel threads): {}",
                stuck.len(),
                abbreviate(&stuck, 8)
            ))
        }
    }

    /// Journal a change the caller makes itself (an XDP program attached through bpf(2)):
    /// it is undone with the others by [`Session::restore`].
    pub fn record_made_by_caller(&mut self, change: &Change) -> Result<u64, ApplyError> {
        self.record(change)
    }

    /// Hold a PM QoS request (/dev/cpu_dma_latency) at `value_us` while the session lives.
    fn hold_pmqos(&mut self, path: &str, value_us: i32) -> Result<String, ApplyError> {
        let real = self.host.path(path);
        let seq = self.record(&Change::PmQos {
            path: path.into(),
            value_us,
            holder_pid: std::process::id() as i32,
        })?;
        match rtlab_sys::pmqos::CpuDmaLatency::hold(&real, value_us) {
            Ok(g) => {
                self.pmqos.push(g);
                Ok("held while rtlab runs".into())
            }
            Err(e) => {
                let missing = matches!(e.raw_os_error(), Some(1) | Some(13)).then(|| {
                    Missing::privilege(&format!("hold {path}"), "run rtlab as root (sudo)")
                });
                let e = ApplyError::PmQos {
                    path: path.into(),
                    source: e,
                    missing: missing.map(Box::new),
                };
                self.failed(seq, e)
            }
        }
    }

    /// Put everything back now (newest first) and remove the journal if all went back.
    pub fn restore(&mut self) -> RestoreReport {
        self.pmqos.clear();
        let Some(j) = self.journal.take() else {
            return self.last_report.clone().unwrap_or_default();
        };
        let path = j.path().to_path_buf();
        drop(j);
        let report = match restore_journal(self.host, &path) {
            Ok(r) => r,
            Err(e) => RestoreReport {
                restored: vec![],
                failed: vec![("the journal".into(), e.to_string())],
            },
        };
        self.last_report = Some(report.clone());
        report
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        if self.journal.is_some() {
            let r = self.restore();
            if !r.is_clean() {
                // the abnormal path (panic): the caller cannot be told any other way
                eprintln!(
                    "rtlab: {} changes could not be restored; the journal keeps them: run `rtlab tune restore`",
                    r.failed.len()
                );
            }
        }
    }
}

fn errno_word(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(22) => "EINVAL".into(),
        Some(1) => "EPERM".into(),
        Some(16) => "EBUSY".into(),
        Some(28) => "ENOSPC".into(),
        _ => e.to_string(),
    }
}

/// Whether a control file reading `now` holds what writing `written` asked for: `+x` / `-x`
/// tokens (cgroup.subtree_control) when `now` lists / does not list `x`, any other value when
/// `now` is exactly it.
pub fn control_holds(now: &str, written: &str) -> bool {
    let words: Vec<&str> = now.split_whitespace().collect();
    let tokens: Vec<&str> = written.split_whitespace().collect();
    if !tokens.is_empty() && tokens.iter().all(|t| t.starts_with('+') || t.starts_with('-')) {
        tokens.iter().all(|t| words.contains(&&t[1..]) == t.starts_with('+'))
    } else {
        now.trim() == written.trim()
    }
}

/// The first `n` items and how many more.
pub fn abbreviate(items: &[String], n: usize) -> String {
    if items.len() <= n {
        items.join(", ")
    } else {
        format!("{} and {} more", items[..n].join(", "), items.len() - n)
    }
}

#[cfg(test)]
mod tests {
    use super::control_holds;

    #[test]
    fn control_files_hold_plus_minus_tokens_by_membership() {
        assert!(control_holds("cpuset cpu io memory", "+cpuset"));
        assert!(!control_holds("cpu io memory", "+cpuset"));
        assert!(control_holds("cpu io memory", "-cpuset"));
        assert!(!control_holds("cpuset cpu", "+cpu -cpuset"));
        assert!(control_holds("", "-cpuset"));
        // a plain value: the file reads exactly it ("cpuset" is not "+cpuset")
        assert!(control_holds("isolated\n", "isolated"));
        assert!(!control_holds("cpuset", "cpu"));
    }
}
