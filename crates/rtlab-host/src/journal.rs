//! The journal: every system change, written and fsync'd *before* it is made, with the value
//! that puts it back; and the restore that replays it backwards.
//!
//! Format: one JSON object per line (append-only, so a power cut loses at most the line
//! being written, and a torn last line is ignored on reading):
//! `{"t":"begin",...}` (who applied what), `{"t":"change","seq":N,"change":{...}}` (before
//! the change is made), `{"t":"restored","seq":N,"outcome":"..."}` (after it is undone, or
//! when making it failed). A change without a `restored` line is pending: `rtlab tune
//! restore` undoes it, newest first. A journal whose changes are all restored is removed.
//!
//! Contract: nothing is changed on the machine without a pending line on disk first; restore
//! never acts on a process that is not the one journaled (pid + start time); undoing a
//! change that was never made is harmless (it writes the value already there).

use crate::host::{Host, HostError};
use rtlab_core::error::Missing;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The default journal location.
pub const DEFAULT_JOURNAL: &str = "/var/lib/rtlab/journal";

/// One system change and how to put it back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    /// A sysfs/procfs/tracefs/cgroup file was written; restore writes `old` back.
    File { path: String, old: String, new: String },
    /// A control file was written with `new` (cgroup.subtree_control: `+cpuset`); restore
    /// writes `undo` (`-cpuset`), because what the file reads back cannot be written back.
    WriteWithUndo { path: String, new: String, undo: String },
    /// The policy/priority of a task (thread) was set.
    Sched {
        pid: i32,
        comm: String,
        start_time: u64,
        old_policy: i32,
        old_priority: i32,
        new_policy: i32,
        new_priority: i32,
    },
    /// The CPU affinity of a task was set.
    Affinity { pid: i32, comm: String, start_time: u64, old_cpus: Vec<usize>, new_cpus: Vec<usize> },
    /// Tasks were moved from one cgroup membership file to another (cgroup-v1 `tasks`, or
    /// cgroup-v2 `cgroup.procs`: whole processes); restore moves them back.
    CgroupMove { from: String, to: String, tasks: Vec<Task> },
    /// A directory (a cpuset) was created; restore moves what is left in it to `parent_tasks`
    /// (the parent's `tasks` or `cgroup.procs`; the same file of the directory is read) and
    /// removes it.
    MkDir { path: String, parent_tasks: String },
    /// A command (tc, ip) was run; restore runs `undo`.
    Command { did: Vec<String>, undo: Vec<String> },
    /// A filesystem (tracefs) was mounted; restore unmounts it.
    Mount { fstype: String, target: String },
    /// /dev/cpu_dma_latency held by `holder_pid`; the kernel drops it when that process exits.
    PmQos { path: String, value_us: i32, holder_pid: i32 },
    /// An XDP program named `name` attached to `dev` (in network namespace `netns`) through
    /// a BPF link: the kernel detaches it when the link's holder exits; restore detaches a
    /// program of that name still attached (through netlink) and touches no other.
    XdpProgram { netns: Option<String>, dev: String, name: String },
}

/// A task named by pid, command and start time (so a reused pid is never touched).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub pid: i32,
    pub comm: String,
    pub start_time: u64,
}

impl Change {
    /// One line for the plan, `show` and restore reports.
    pub fn describe(&self) -> String {
        match self {
            Change::File { path, old, new } => format!("{path}: {} -> {}", short(old), short(new)),
            Change::WriteWithUndo { path, new, undo } => {
                format!("{path}: wrote '{}' (undo: '{}')", short(new), short(undo))
            }
            Change::Sched {
                pid, comm, old_policy, old_priority, new_policy, new_priority, ..
            } => format!(
                "pid {pid} ({comm}): {} {old_priority} -> {} {new_priority}",
                policy_name(*old_policy),
                policy_name(*new_policy)
            ),
            Change::Affinity { pid, comm, old_cpus, new_cpus, .. } => {
                format!(
                    "pid {pid} ({comm}): CPUs {} -> {}",
                    crate::cpu_list(old_cpus),
                    crate::cpu_list(new_cpus)
                )
            }
            Change::CgroupMove { from, to, tasks } => {
                format!("{} tasks moved {from} -> {to}", tasks.len())
            }
            Change::MkDir { path, .. } => format!("created {path}"),
            Change::Command { did, undo } => {
                format!("ran `{}` (undo: `{}`)", did.join(" "), undo.join(" "))
            }
            Change::Mount { fstype, target } => format!("mounted {fstype} on {target}"),
            Change::PmQos { path, value_us, holder_pid } => {
                format!("{path} held at {value_us} us by pid {holder_pid}")
            }
            Change::XdpProgram { netns, dev, name } => match netns {
                Some(ns) => format!("XDP program {name} attached to {dev} (netns {ns})"),
                None => format!("XDP program {name} attached to {dev}"),
            },
        }
    }
}

fn short(s: &str) -> String {
    let one = s.replace('\n', " ");
    if one.len() > 60 {
        format!("{}...", &one[..one.char_indices().nth(57).map(|(i, _)| i).unwrap_or(one.len())])
    } else if one.is_empty() {
        "''".into()
    } else {
        one
    }
}

/// The name of a raw scheduling policy.
pub fn policy_name(raw: i32) -> String {
    let flag = if rtlab_sys::sched::base_policy(raw) != raw { "|reset-on-fork" } else { "" };
    let base = rtlab_sys::sched::policy_word(raw.into()).unwrap_or("policy?");
    format!("{base}{flag}")
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
enum Line {
    Begin { pid: i32, what: String, at_unix_s: u64 },
    Change { seq: u64, change: Change },
    Restored { seq: u64, outcome: String },
}

/// Errors of the journal.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The journal file or its directory could not be read or written.
    #[error("journal {path}: {source}")]
    Io { path: String, source: std::io::Error, missing: Option<Box<Missing>> },
    /// The journal still holds changes of an earlier session.
    #[error("journal {path} holds {pending} changes not yet restored (applied by pid {pid}{alive}): {advice}")]
    Pending { path: String, pending: usize, pid: i32, alive: &'static str, advice: &'static str },
}

impl JournalError {
    /// An I/O error on the journal at `path`: EACCES/EPERM/EROFS is a missing privilege.
    pub fn io(path: &Path, source: std::io::Error) -> JournalError {
        let missing = matches!(source.raw_os_error(), Some(1) | Some(13) | Some(30)).then(|| {
            Missing::privilege(
                &format!("write the journal {}", path.display()),
                "run rtlab as root, or give --journal a path you can write",
            )
        });
        JournalError::Io {
            path: path.display().to_string(),
            source,
            missing: missing.map(Box::new),
        }
    }

    /// What this machine lacks, when that is the cause.
    pub fn missing(&self) -> Option<&Missing> {
        match self {
            JournalError::Io { missing, .. } => missing.as_deref(),
            JournalError::Pending { .. } => None,
        }
    }
}

/// What a journal file says.
#[derive(Clone, Debug, Default)]
pub struct JournalState {
    /// Pid and description of the session that wrote it.
    pub owner: Option<(i32, String)>,
    /// When that session began (seconds since the Unix epoch; 0 when unknown).
    pub began_at_unix_s: u64,
    /// Changes not yet restored, oldest first.
    pub pending: Vec<(u64, Change)>,
    /// Restored changes with their outcome.
    pub restored: Vec<(u64, String)>,
}

/// Read a journal; a missing file is an empty journal; a torn last line is ignored.
pub fn read_journal(path: &Path) -> Result<JournalState, JournalError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(JournalState::default()),
        Err(e) => return Err(JournalError::io(path, e)),
    };
    let mut st = JournalState::default();
    let mut changes = Vec::new();
    for l in text.lines() {
        match serde_json::from_str::<Line>(l) {
            Ok(Line::Begin { pid, what, at_unix_s }) => {
                st.owner = Some((pid, what));
                st.began_at_unix_s = at_unix_s;
            }
            Ok(Line::Change { seq, change }) => changes.push((seq, change)),
            Ok(Line::Restored { seq, outcome }) => st.restored.push((seq, outcome)),
            Err(_) => {} // a line torn by a crash while it was written
        }
    }
    st.pending =
        changes.into_iter().filter(|(s, _)| !st.restored.iter().any(|(r, _)| r == s)).collect();
    Ok(st)
}

/// A journal still holding changes: what the lab warns about before it measures.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PendingJournal {
    pub path: PathBuf,
    /// The process that began it (0 when the journal does not say).
    pub pid: i32,
    /// That process still runs *and* is an rtlab (/proc/PID/comm or exe is `rtlab`): a
    /// recycled pid, or a process that is not rtlab, is not alive here.
    pub alive: bool,
    /// What began it (`rtlab tune apply rt-normal`, `profile rt-isolation`).
    pub what: String,
    /// When it began (seconds since the Unix epoch; 0 when unknown).
    pub began_at_unix_s: u64,
    /// Changes not yet restored.
    pub changes: usize,
}

impl PendingJournal {
    /// One line: "journal /var/lib/rtlab/journal holds 9 changes of pid 812 (profile
    /// rt-affinities), which is no longer running".
    pub fn describe(&self) -> String {
        format!(
            "journal {} holds {} changes of pid {} ({}), {}",
            self.path.display(),
            self.changes,
            self.pid,
            self.what,
            if self.alive { "which still runs" } else { "which is no longer running" }
        )
    }
}

/// The journal at `path` when it still holds changes not restored (None: no journal, an
/// unreadable one, or everything restored). Reads the real /proc for the owner's liveness.
pub fn pending(path: &Path) -> Option<PendingJournal> {
    let st = read_journal(path).ok()?;
    if st.pending.is_empty() {
        return None;
    }
    let (pid, what) = st.owner.clone().unwrap_or((0, "?".into()));
    Some(PendingJournal {
        path: path.to_path_buf(),
        pid,
        alive: pid > 0 && rtlab_alive(pid),
        what,
        began_at_unix_s: st.began_at_unix_s,
        changes: st.pending.len(),
    })
}

/// Whether `pid` runs and is an rtlab binary: its /proc/PID/comm is `rtlab`, or its
/// /proc/PID/exe is a file named `rtlab` (also when replaced meanwhile: `rtlab (deleted)`).
pub fn rtlab_alive(pid: i32) -> bool {
    if pid <= 0 || !rtlab_sys::tasks::pid_alive(pid) {
        return false;
    }
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    if comm.trim() == "rtlab" {
        return true;
    }
    std::fs::read_link(format!("/proc/{pid}/exe")).ok().is_some_and(|exe| {
        exe.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.trim_end_matches(" (deleted)") == "rtlab")
    })
}

/// An open journal, appended to and fsync'd line by line.
pub struct Journal {
    path: PathBuf,
    file: std::fs::File,
    next_seq: u64,
}

impl Journal {
    /// Start a session's journal at `path`. Refuses when the file holds pending changes.
    pub fn begin(path: &Path, what: &str) -> Result<Journal, JournalError> {
        let io = |e| JournalError::io(path, e);
        if let Some(p) = pending(path) {
            let own = p.pid == std::process::id() as i32;
            return Err(JournalError::Pending {
                path: path.display().to_string(),
                pending: p.changes,
                pid: p.pid,
                alive: if own {
                    ", this rtlab"
                } else if p.alive {
                    ", still running"
                } else {
                    ", no longer running"
                },
                advice: if own {
                    "this rtlab could not put back what it changed before (`rtlab tune show` lists it; `rtlab tune restore` tries again once this rtlab has ended)"
                } else if p.alive {
                    "another rtlab is using this machine; wait for it to end"
                } else {
                    "run `rtlab tune restore` first"
                },
            });
        }
        read_journal(path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(path)
            .map_err(io)?;
        let mut j = Journal { path: path.to_path_buf(), file, next_seq: 1 };
        let at_unix_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        j.append(&Line::Begin { pid: std::process::id() as i32, what: what.into(), at_unix_s })?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // the new directory entry must survive a power cut too
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(j)
    }

    /// Open an existing journal to append `restored` lines to it.
    pub fn reopen(path: &Path) -> Result<Journal, JournalError> {
        let io = |e| JournalError::io(path, e);
        let st = read_journal(path)?;
        let next_seq = st
            .pending
            .iter()
            .map(|p| p.0)
            .chain(st.restored.iter().map(|r| r.0))
            .max()
            .unwrap_or(0)
            + 1;
        let file = std::fs::OpenOptions::new().append(true).open(path).map_err(io)?;
        Ok(Journal { path: path.to_path_buf(), file, next_seq })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn append(&mut self, line: &Line) -> Result<(), JournalError> {
        let mut text = serde_json::to_string(line).expect("journal lines serialize");
        text.push('\n');
        let io = |e| JournalError::io(&self.path, e);
        self.file.write_all(text.as_bytes()).map_err(io)?;
        self.file.sync_data().map_err(io)
    }

    /// Write (and fsync) a change before it is made; returns its sequence number.
    pub fn record(&mut self, change: &Change) -> Result<u64, JournalError> {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.append(&Line::Change { seq, change: change.clone() })?;
        Ok(seq)
    }

    /// Mark a change as put back (or never made).
    pub fn mark_restored(&mut self, seq: u64, outcome: &str) -> Result<(), JournalError> {
        self.append(&Line::Restored { seq, outcome: outcome.into() })
    }
}

/// What a restore did.
#[derive(Clone, Debug, Default)]
pub struct RestoreReport {
    /// (description, outcome) per change, newest first.
    pub restored: Vec<(String, String)>,
    /// (description, error) of what could not be put back; the journal keeps them.
    pub failed: Vec<(String, String)>,
}

impl RestoreReport {
    pub fn is_clean(&self) -> bool {
        self.failed.is_empty()
    }
}

/// Undo every pending change of the journal at `path`, newest first; remove the journal
/// when nothing is left pending. A missing journal is nothing to do.
pub fn restore_journal(host: &dyn Host, path: &Path) -> Result<RestoreReport, JournalError> {
    let st = read_journal(path)?;
    let mut report = RestoreReport::default();
    if st.pending.is_empty() {
        if path.exists() {
            let _ = std::fs::remove_file(path);
        }
        return Ok(report);
    }
    let mut j = Journal::reopen(path)?;
    for (seq, change) in st.pending.iter().rev() {
        match undo(host, change) {
            Ok(outcome) => {
                j.mark_restored(*seq, &outcome)?;
                report.restored.push((change.describe(), outcome));
            }
            Err(e) => report.failed.push((change.describe(), e.to_string())),
        }
    }
    if report.failed.is_empty() {
        std::fs::remove_file(path).map_err(|e| JournalError::io(path, e))?;
    }
    Ok(report)
}

/// The start time (clock ticks after boot, /proc/PID/stat field 22) and comm of a task.
pub fn task_identity(host: &dyn Host, pid: i32) -> Option<Task> {
    let stat = host.read(&format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    let start_time = after.split_whitespace().nth(19)?.parse().ok()?;
    let comm = host.read(&format!("/proc/{pid}/comm")).unwrap_or_default();
    Some(Task { pid, comm, start_time })
}

fn same_task(host: &dyn Host, pid: i32, start_time: u64) -> bool {
    task_identity(host, pid).is_some_and(|t| t.start_time == start_time)
}

/// Put one change back. Ok(outcome) also when there is nothing left to undo (task gone).
pub fn undo(host: &dyn Host, change: &Change) -> Result<String, HostError> {
    match change {
        Change::File { path, old, .. } => {
            if !host.exists(path) {
                return Ok("gone (nothing to restore)".into());
            }
            host.write(path, old)
                .map_err(|e| HostError::file(format!("writing '{}' to", short(old)), path, e))?;
            Ok("restored".into())
        }
        Change::WriteWithUndo { path, undo, .. } => {
            if !host.exists(path) {
                return Ok("gone (nothing to restore)".into());
            }
            host.write(path, undo)
                .map_err(|e| HostError::file(format!("writing '{}' to", short(undo)), path, e))?;
            Ok("restored".into())
        }
        Change::Sched { pid, start_time, old_policy, old_priority, .. } => {
            if !same_task(host, *pid, *start_time) {
                return Ok("task gone".into());
            }
            host.sched_set(*pid, *old_policy, *old_priority)?;
            Ok("restored".into())
        }
        Change::Affinity { pid, start_time, old_cpus, .. } => {
            if !same_task(host, *pid, *start_time) {
                return Ok("task gone".into());
            }
            host.affinity_set(*pid, old_cpus)?;
            Ok("restored".into())
        }
        Change::CgroupMove { from, tasks, .. } => undo_cgroup_move(host, from, tasks),
        Change::MkDir { path, parent_tasks } => undo_mkdir(host, path, parent_tasks),
        Change::Command { undo, .. } => {
            host.run(undo)?;
            Ok("restored".into())
        }
        Change::Mount { target, .. } => {
            host.umount(target)?;
            Ok("unmounted".into())
        }
        Change::PmQos { holder_pid, .. } => {
            if *holder_pid != std::process::id() as i32
                && rtlab_sys::tasks::pid_alive(*holder_pid)
                && !host.is_fake()
            {
                return Ok(format!("still held by pid {holder_pid} until it exits"));
            }
            Ok("released by the kernel when its holder closed it".into())
        }
        Change::XdpProgram { netns, dev, name } => undo_xdp(host, netns.as_deref(), dev, name),
    }
}

/// Tasks moved into a cgroup go back to the one they came from (those still alive, not
/// already there).
fn undo_cgroup_move(host: &dyn Host, from: &str, tasks: &[Task]) -> Result<String, HostError> {
    if !host.exists(from) {
        // a cgroup-v2 source cgroup removed meanwhile (its scope ended): the tasks
        // go to the parent with the cgroup rtlab made
        return Ok(format!("{from} is gone: {} tasks not moved back", tasks.len()));
    }
    let (mut back, mut gone) = (0, 0);
    let already: std::collections::HashSet<String> =
        host.read(from).unwrap_or_default().lines().map(|l| l.trim().to_string()).collect();
    for t in tasks {
        if !same_task(host, t.pid, t.start_time) {
            gone += 1;
            continue;
        }
        if already.contains(&t.pid.to_string()) {
            continue; // never moved (a per-CPU kernel thread)
        }
        match host.write(from, &t.pid.to_string()) {
            Ok(()) => back += 1,
            // exited between the check and the write
            Err(e) if e.raw_os_error() == Some(libc_esrch()) => gone += 1,
            // the kernel refuses a real-time thread a cgroup with no RT runtime
            Err(e) if e.raw_os_error() == Some(22) => {
                return Err(HostError::file(
                    format!("moving pid {} back (one of its threads still runs at a real-time policy, which a cgroup without real-time runtime refuses) to", t.pid),
                    from,
                    e,
                ))
            }
            Err(e) => {
                return Err(HostError::file(
                    format!("moving pid {} back to", t.pid),
                    from,
                    e,
                ))
            }
        }
    }
    Ok(format!("{back} moved back, {gone} gone"))
}

/// A cgroup rtlab made is removed, the tasks forked in it since moved to its parent first.
fn undo_mkdir(host: &dyn Host, path: &str, parent_tasks: &str) -> Result<String, HostError> {
    if !host.exists(path) {
        return Ok("gone".into());
    }
    // tasks forked inside the cpuset since it was made go back to the parent too,
    // read from the same membership file as the parent's (`tasks` or `cgroup.procs`)
    let members = parent_tasks.rsplit('/').next().filter(|f| !f.is_empty()).unwrap_or("tasks");
    let tasks_file = format!("{path}/{members}");
    let mut moved = 0;
    for _round in 0..5 {
        let left: Vec<String> =
            host.read(&tasks_file).unwrap_or_default().lines().map(String::from).collect();
        if left.is_empty() {
            break;
        }
        for pid in left {
            if host.write(parent_tasks, &pid).is_ok() {
                moved += 1;
            }
        }
    }
    if host.is_fake() {
        let _ = std::fs::remove_dir_all(host.path(path));
    } else {
        host.rmdir(path).map_err(|e| HostError::file("removing", path, e))?;
    }
    Ok(if moved > 0 {
        format!("removed ({moved} later tasks moved to the parent)")
    } else {
        "removed".into()
    })
}

/// rtlab's XDP program is detached from its device, if it is still the one attached.
fn undo_xdp(
    host: &dyn Host,
    netns: Option<&str>,
    dev: &str,
    name: &str,
) -> Result<String, HostError> {
    let ip = |args: &[&str]| -> Vec<String> {
        let mut v = vec!["ip".to_string()];
        if let Some(ns) = netns {
            v.extend(["-n".to_string(), ns.to_string()]);
        }
        v.extend(args.iter().map(|a| a.to_string()));
        v
    };
    let shown = match host.run(&ip(&["-d", "-j", "link", "show", "dev", dev])) {
        Ok(s) => s,
        // the device (or its namespace) is gone, and the program with it
        Err(_) => return Ok(format!("{dev} is gone, and the program with it")),
    };
    match xdp_attached(&shown) {
        Some((n, mode)) if n == *name => {
            let kw = if mode == 2 { "xdpgeneric" } else { "xdpdrv" };
            host.run(&ip(&["link", "set", "dev", dev, kw, "off"]))?;
            Ok(format!("detached {name} from {dev}"))
        }
        Some((other, _)) => Ok(format!(
            "gone (the kernel detached it; {dev} now has {other}, not rtlab's: left alone)"
        )),
        None => Ok("gone (the kernel detached it with its link)".into()),
    }
}

/// The XDP program attached to a device, from `ip -d -j link show`: (name, mode:
/// 1 driver, 2 generic, 3 offload).
pub fn xdp_attached(ip_json: &str) -> Option<(String, u64)> {
    let v: serde_json::Value = serde_json::from_str(ip_json).ok()?;
    let x = v.get(0)?.get("xdp")?;
    let mode = x.get("mode").and_then(|m| m.as_u64()).unwrap_or(0);
    let name = x.get("prog").and_then(|p| p.get("name")).and_then(|n| n.as_str());
    Some((name.unwrap_or("(unnamed)").to_string(), mode))
}

fn libc_esrch() -> i32 {
    3
}
