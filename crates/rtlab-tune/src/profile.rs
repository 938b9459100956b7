//! Real-time profiles (S1's no-rt / rt-normal / rt-affinities / rt-isolation, S3's
//! rt-kthreads, and user profiles from a TOML file) and the plan that applies one to a
//! machine: a list of steps, each a set of journaled [`Action`]s or a skip with its reason.
//!
//! Contract: planning only reads; what does not apply on this machine (no cpufreq, IRQs not
//! threaded, no VLAN, no cpuset controller, a qdisc the kernel lacks) becomes a skip naming why.
//! Interfaces: /proc/irq/N/smp_affinity (Documentation/core-api/irq/irq-affinity.rst),
//! cgroup-v1 cpusets (Documentation/admin-guide/cgroup-v1/cpusets.rst), cgroup-v2 cpuset
//! partitions (Documentation/admin-guide/cgroup-v2.rst, "Cpuset Interface Files"), tc-htb(8),
//! tc-mqprio(8), sched_setscheduler(2).

use crate::host::Host;
use crate::journal::{Change, JournalError};
use crate::session::Action;
use rtlab_core::error::Missing;
use rtlab_core::rt::{Policy, RtSettings};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// A profile: what it sets. `None` leaves a thing alone. CPU selections are `rt` (the RT
/// CPU), `others` (every other online CPU) or a list like `1` or `2-3`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    #[serde(default)]
    pub description: String,
    /// A built-in profile this one starts from.
    pub base: Option<String>,
    /// Application (the probe, or `--pid`): `fifo`, `rr` or `other`.
    pub app_policy: Option<Policy>,
    /// Its priority (fifo/rr: 1..=99, other: 0; default: 80 for fifo/rr).
    pub app_priority: Option<i32>,
    /// Its CPUs (`rt`, `others` or a list); None: not pinned.
    pub app_cpus: Option<String>,
    /// mlockall(MCL_CURRENT | MCL_FUTURE) for rtlab's measuring threads (default: when
    /// `app_policy` is fifo or rr).
    pub mlockall: Option<bool>,
    /// Middleware threads (DDS, zenoh): lowest and highest priority (S3: 70-80).
    pub middleware_priority: Option<[i32; 2]>,
    /// /proc/sys/kernel/sched_rt_runtime_us (-1: no RT throttling).
    pub rt_runtime_us: Option<i64>,
    /// CPU frequency governor of every CPU.
    pub governor: Option<String>,
    /// Hold /dev/cpu_dma_latency at this many us.
    pub cpu_dma_latency_us: Option<i32>,
    /// Affinity of the NIC's queue IRQs.
    pub nic_irq_cpus: Option<String>,
    /// Affinity of every other IRQ (and the default for new ones).
    pub other_irq_cpus: Option<String>,
    /// SCHED_FIFO priority of the NIC's IRQ threads (where IRQs are threaded).
    pub irq_thread_priority: Option<i32>,
    /// SCHED_FIFO priority of ksoftirqd/N.
    pub ksoftirqd_priority: Option<i32>,
    /// A cpuset holding these CPUs for the application alone; every movable task moves off.
    pub isolate_cpus: Option<String>,
    /// Root qdisc of the NIC, first the kernel has: `mqprio`, `htb`, `pfifo_fast`.
    pub qdisc: Option<Vec<String>>,
    /// Identity VLAN egress map (SKB priority n -> PCP n) on the NIC's VLANs.
    pub vlan_egress_map: Option<bool>,
}

/// The built-in profile names: the one list ([`builtin_names`]).
const BUILTIN: &[&str] = &["no-rt", "rt-normal", "rt-affinities", "rt-isolation", "rt-kthreads"];

/// The built-in profile names, in S1/S3 order: the one list every part of rtlab reads.
pub fn builtin_names() -> &'static [&'static str] {
    BUILTIN
}

/// A built-in profile.
pub fn builtin(name: &str) -> Option<Profile> {
    let normal = Profile {
        description: "S1 rt-normal: SCHED_FIFO 80 for the application, no RT throttling, performance governor, no deep C-states; nothing pinned".into(),
        app_policy: Some(Policy::Fifo),
        app_priority: Some(80),
        rt_runtime_us: Some(-1),
        governor: Some("performance".into()),
        cpu_dma_latency_us: Some(0),
        ..Default::default()
    };
    Some(match name {
        "no-rt" => Profile {
            description: "S1 no-rt: the machine as it is, the application under SCHED_OTHER (the baseline)".into(),
            app_policy: Some(Policy::Other),
            app_priority: Some(0),
            ..Default::default()
        },
        "rt-normal" => normal,
        "rt-affinities" => Profile {
            description: "S1 rt-affinities: rt-normal + the application and its NIC's queue IRQs on the RT CPU, RT traffic prioritised".into(),
            app_cpus: Some("rt".into()),
            nic_irq_cpus: Some("rt".into()),
            qdisc: Some(vec!["mqprio".into(), "htb".into()]),
            vlan_egress_map: Some(true),
            ..normal
        },
        "rt-isolation" => Profile {
            description: "S1 rt-isolation: rt-affinities + a cpuset holding the RT CPU for the application alone, every other IRQ off it".into(),
            app_cpus: Some("rt".into()),
            nic_irq_cpus: Some("rt".into()),
            other_irq_cpus: Some("others".into()),
            isolate_cpus: Some("rt".into()),
            qdisc: Some(vec!["mqprio".into(), "htb".into()]),
            vlan_egress_map: Some(true),
            ..normal
        },
        "rt-kthreads" => Profile {
            description: "S3 Test 4: NIC IRQ threads FIFO 90, application 80, middleware 70-80, ksoftirqd FIFO 60".into(),
            middleware_priority: Some([70, 80]),
            irq_thread_priority: Some(90),
            ksoftirqd_priority: Some(60),
            ..normal
        },
        _ => return None,
    })
}

/// Errors of profile files and names.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("profile '{name}' does not exist (built-in: {}{extra})", BUILTIN.join(", "))]
    Unknown { name: String, extra: String },
    /// A profile file that cannot be read.
    #[error("{path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A profile file that is not valid TOML of `[profile.NAME]` tables.
    #[error("{path}: {msg}")]
    File { path: String, msg: String },
    /// A profile with a bad value.
    #[error("profile '{name}': {msg}")]
    Invalid { name: String, msg: String },
    /// A file of several profiles named without `#NAME`.
    #[error("{path} holds {} profiles ({}): name one as {path}#NAME", names.len(), names.join(", "))]
    Ambiguous { path: String, names: Vec<String> },
    /// `FILE#NAME` where the file has no NAME.
    #[error("{path} has no profile '{name}' (it holds: {})", names.join(", "))]
    NotInFile { path: String, name: String, names: Vec<String> },
    /// The journal of the session applying the profile.
    #[error(transparent)]
    Journal(#[from] JournalError),
}

impl ProfileError {
    /// What this machine lacks, when that is the cause (only a journal that cannot be written).
    pub fn missing(&self) -> Option<&Missing> {
        match self {
            ProfileError::Journal(e) => e.missing(),
            _ => None,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    profile: BTreeMap<String, Profile>,
}

/// Read user profiles (`[profile.NAME]` tables) from a TOML file.
pub fn load_file(path: &std::path::Path) -> Result<BTreeMap<String, Profile>, ProfileError> {
    let p = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ProfileError::Read { path: p.clone(), source: e })?;
    let f: ProfileFile = toml::from_str(&text).map_err(|e| ProfileError::File {
        path: p.clone(),
        msg: e.to_string().replace('\n', " ").trim().to_string(),
    })?;
    for (name, prof) in &f.profile {
        validate(name, prof)?;
    }
    Ok(f.profile)
}

fn validate(name: &str, p: &Profile) -> Result<(), ProfileError> {
    let bad = |msg: String| ProfileError::Invalid { name: name.into(), msg };
    if let Some(b) = &p.base {
        if builtin(b).is_none() {
            return Err(bad(format!(
                "base = \"{b}\" is not a built-in profile ({})",
                BUILTIN.join(", ")
            )));
        }
    }
    if let Some(policy) = p.app_policy {
        if let Some(prio) = p.app_priority {
            policy.check_priority(prio).map_err(|e| bad(format!("app_priority: {e}")))?;
        }
    }
    for (field, v) in [
        ("irq_thread_priority", p.irq_thread_priority),
        ("ksoftirqd_priority", p.ksoftirqd_priority),
    ] {
        if let Some(v) = v {
            if !(1..=99).contains(&v) {
                return Err(bad(format!("{field} = {v}: SCHED_FIFO priorities are 1..=99")));
            }
        }
    }
    for (field, v) in [
        ("app_cpus", &p.app_cpus),
        ("nic_irq_cpus", &p.nic_irq_cpus),
        ("other_irq_cpus", &p.other_irq_cpus),
        ("isolate_cpus", &p.isolate_cpus),
    ] {
        if let Some(v) = v {
            if v != "rt" && v != "others" {
                rtlab_sys::cpus::parse_cpu_list(v)
                    .map_err(|e| bad(format!("{field} = \"{v}\": {e} (or rt, others)")))?;
            }
        }
    }
    if let Some(q) = &p.qdisc {
        if let Some(k) = q.iter().find(|k| !["mqprio", "htb", "pfifo_fast"].contains(&k.as_str())) {
            return Err(bad(format!("qdisc: \"{k}\" is not one of mqprio, htb, pfifo_fast")));
        }
    }
    if let Some(v) = p.cpu_dma_latency_us {
        if v < 0 {
            return Err(bad(format!("cpu_dma_latency_us = {v}: must be 0 or more")));
        }
    }
    Ok(())
}

/// Find a profile by name: user profiles first, then the built-ins; `base` is merged in.
pub fn find(name: &str, user: &BTreeMap<String, Profile>) -> Result<Profile, ProfileError> {
    if let Some(p) = user.get(name) {
        let mut p = p.clone();
        if let Some(b) = p.base.clone() {
            let base = builtin(&b).expect("validated");
            p = merge(base, p);
        }
        return Ok(p);
    }
    builtin(name).ok_or_else(|| ProfileError::Unknown {
        name: name.into(),
        extra: if user.is_empty() {
            String::new()
        } else {
            format!("; in the file: {}", user.keys().cloned().collect::<Vec<_>>().join(", "))
        },
    })
}

/// A profile with the name it was asked by: a built-in name, or a user file path as given
/// (`./my.toml`, `./lab.toml#fast`).
#[derive(Clone, Debug, PartialEq)]
pub struct NamedProfile {
    pub name: String,
    pub profile: Profile,
}

/// Whether `s` names a profile file rather than a built-in: it starts with `./`, `../`, `/`
/// or `~/`, or ends in `.toml` (before an optional `#NAME`).
pub fn is_file_ref(s: &str) -> bool {
    let file = s.split_once('#').map_or(s, |(f, _)| f);
    ["./", "../", "/", "~/"].iter().any(|p| file.starts_with(p)) || file.ends_with(".toml")
}

/// Resolve a profile as a scenario or `tune apply` names it: a built-in name, or a user
/// profile file (`[profile.NAME]` tables, the `tune apply --file` format).
///
/// A file is named by a path ([`is_file_ref`]); a relative path is taken from `base_dir`
/// (the scenario file's directory). A file holding one profile is used as it is; of a file
/// holding several, one is chosen with `FILE#NAME` (`./lab.toml#fast`). A profile's `base`
/// (a built-in) is merged in. The [`NamedProfile::name`] is `name_or_path` as given.
pub fn resolve(name_or_path: &str, base_dir: &Path) -> Result<NamedProfile, ProfileError> {
    if !is_file_ref(name_or_path) {
        let profile = builtin(name_or_path).ok_or_else(|| ProfileError::Unknown {
            name: name_or_path.into(),
            extra: "; or a profile file: ./my.toml".into(),
        })?;
        return Ok(NamedProfile { name: name_or_path.into(), profile });
    }
    let (file, pick) = match name_or_path.split_once('#') {
        Some((f, n)) => (f, Some(n)),
        None => (name_or_path, None),
    };
    let path = match file.strip_prefix("~/") {
        Some(rest) => {
            std::env::var_os("HOME").map(std::path::PathBuf::from).unwrap_or_default().join(rest)
        }
        None => base_dir.join(file),
    };
    let user = load_file(&path)?;
    let shown = path.display().to_string();
    let names: Vec<String> = user.keys().cloned().collect();
    let name = match pick {
        Some(n) if user.contains_key(n) => n.to_string(),
        Some(n) => {
            return Err(ProfileError::NotInFile { path: shown, name: n.into(), names });
        }
        None if names.len() == 1 => names[0].clone(),
        None if names.is_empty() => {
            return Err(ProfileError::File {
                path: shown,
                msg: "holds no [profile.NAME] table".into(),
            });
        }
        None => return Err(ProfileError::Ambiguous { path: shown, names }),
    };
    Ok(NamedProfile { name: name_or_path.into(), profile: find(&name, &user)? })
}

impl Profile {
    /// How rtlab's own measuring threads run under this profile, from its own fields:
    /// `app_policy` (none: other), `app_priority` (none: the policy's default, 80 for
    /// fifo/rr), `app_cpus` resolved against `online` (`rt` is the last online CPU, `others`
    /// the rest) and `mlockall` (none: when the policy is real-time).
    ///
    /// `policy_override` (a scenario's `policy = "rr"`) replaces a real-time policy; a
    /// profile whose policy is `other` (no-rt) stays `other`. An override to `other` runs at
    /// priority 0 and keeps the profile's memory lock and CPUs.
    pub fn rt_settings(&self, online: &[usize], policy_override: Option<Policy>) -> RtSettings {
        let own = self.app_policy.unwrap_or(Policy::Other);
        let policy = match policy_override {
            Some(p) if own.is_realtime() => p,
            _ => own,
        };
        let priority = if policy.is_realtime() {
            self.app_priority
                .filter(|&p| policy.check_priority(p).is_ok())
                .unwrap_or_else(|| policy.default_priority())
        } else {
            0
        };
        let cpus = self.app_cpus.as_deref().and_then(|sel| {
            let rt = *online.last()?;
            Some(resolve_cpus(sel, rt, online)).filter(|c| !c.is_empty())
        });
        RtSettings { policy, priority, cpus, mlockall: self.mlockall.unwrap_or(own.is_realtime()) }
    }
}

fn merge(base: Profile, over: Profile) -> Profile {
    Profile {
        description: if over.description.is_empty() { base.description } else { over.description },
        base: over.base,
        app_policy: over.app_policy.or(base.app_policy),
        app_priority: over.app_priority.or(base.app_priority),
        app_cpus: over.app_cpus.or(base.app_cpus),
        mlockall: over.mlockall.or(base.mlockall),
        middleware_priority: over.middleware_priority.or(base.middleware_priority),
        rt_runtime_us: over.rt_runtime_us.or(base.rt_runtime_us),
        governor: over.governor.or(base.governor),
        cpu_dma_latency_us: over.cpu_dma_latency_us.or(base.cpu_dma_latency_us),
        nic_irq_cpus: over.nic_irq_cpus.or(base.nic_irq_cpus),
        other_irq_cpus: over.other_irq_cpus.or(base.other_irq_cpus),
        irq_thread_priority: over.irq_thread_priority.or(base.irq_thread_priority),
        ksoftirqd_priority: over.ksoftirqd_priority.or(base.ksoftirqd_priority),
        isolate_cpus: over.isolate_cpus.or(base.isolate_cpus),
        qdisc: over.qdisc.or(base.qdisc),
        vlan_egress_map: over.vlan_egress_map.or(base.vlan_egress_map),
    }
}

/// Where a profile is applied.
#[derive(Clone, Debug, Default)]
pub struct Target {
    /// The CPU for real-time work (None: the last online CPU).
    pub rt_cpu: Option<usize>,
    /// The NIC (None: the default route's interface).
    pub nic: Option<String>,
    /// The network namespace of the NIC (a test veth).
    pub netns: Option<String>,
    /// Processes that get the application settings (all their threads).
    pub pids: Vec<i32>,
}

/// One step of a plan: actions tried in order (alternatives: the first that works), or a skip.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    pub what: String,
    /// Alternatives, each a (label, actions) pair; the first whose first action succeeds is kept.
    pub alternatives: Vec<(String, Vec<Action>)>,
    /// Why nothing is done (the step does not apply here).
    pub skip: Option<String>,
    /// A note shown with the step (e.g. the SO_PRIORITY map).
    pub note: Option<String>,
    /// What is measured after the actions and added to the outcome.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<Report>,
}

/// A measurement made after a step's actions (read-only), one line in its outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Report {
    /// The tasks outside a cgroup (its `cgroup.procs`) whose affinity (/proc/PID/task/TID/status
    /// `Cpus_allowed_list`) still holds any of `cpus`: what could not move off them.
    TasksStillOn { cpus: Vec<usize>, cgroup_procs: String },
}

impl Report {
    /// Measure now.
    pub fn run(&self, host: &dyn Host) -> String {
        match self {
            Report::TasksStillOn { cpus, cgroup_procs } => {
                let inside: Vec<i32> = host
                    .read(cgroup_procs)
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect();
                let dir = cgroup_procs.trim_end_matches("/cgroup.procs");
                let (read, still) = tasks_on(host, cpus, &inside);
                if read == 0 {
                    return format!("no /proc/PID/status could be read: cannot tell which tasks still run on CPUs {}", crate::cpu_list(cpus));
                }
                if still.is_empty() {
                    return format!(
                        "no task outside {dir} can run on CPUs {} any more",
                        crate::cpu_list(cpus)
                    );
                }
                let names: Vec<String> =
                    still.iter().map(|(tid, comm)| format!("{comm} ({tid})")).collect();
                format!(
                    "{} tasks outside {dir} can still run on CPUs {} (they cannot move: per-CPU kernel threads keep their CPU): {}",
                    still.len(),
                    crate::cpu_list(cpus),
                    crate::session::abbreviate(&names, 8)
                )
            }
        }
    }
}

/// (tasks whose status was read, (tid, name) of those allowed on any of `cpus`), leaving out
/// the processes `except` and their threads.
fn tasks_on(host: &dyn Host, cpus: &[usize], except: &[i32]) -> (usize, Vec<(i32, String)>) {
    let mut pids: Vec<i32> = std::fs::read_dir(host.path("/proc"))
        .map(|rd| rd.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    pids.sort_unstable();
    let (mut read, mut still) = (0, Vec::new());
    for pid in pids.into_iter().filter(|p| !except.contains(p)) {
        for tid in threads_of(host, pid) {
            let status = host
                .read(&format!("/proc/{pid}/task/{tid}/status"))
                .or_else(|_| host.read(&format!("/proc/{pid}/status")));
            let Ok(status) = status else { continue };
            let field = |k: &str| {
                status.lines().find_map(|l| l.strip_prefix(k)).map(|v| v.trim().to_string())
            };
            let Some(allowed) =
                field("Cpus_allowed_list:").and_then(|l| rtlab_sys::cpus::parse_cpu_list(&l).ok())
            else {
                continue;
            };
            read += 1;
            if allowed.iter().any(|c| cpus.contains(c)) {
                still.push((tid, field("Name:").unwrap_or_default()));
            }
        }
    }
    (read, still)
}

impl Step {
    fn act(what: impl Into<String>, actions: Vec<Action>) -> Step {
        Step {
            what: what.into(),
            alternatives: vec![(String::new(), actions)],
            skip: None,
            note: None,
            report: None,
        }
    }
    fn skip(what: impl Into<String>, why: impl Into<String>) -> Step {
        Step {
            what: what.into(),
            alternatives: vec![],
            skip: Some(why.into()),
            note: None,
            report: None,
        }
    }
    fn note(mut self, n: impl Into<String>) -> Step {
        self.note = Some(n.into());
        self
    }
}

fn resolve_cpus(sel: &str, rt: usize, online: &[usize]) -> Vec<usize> {
    match sel {
        "rt" => vec![rt],
        "others" => online.iter().copied().filter(|&c| c != rt).collect(),
        list => rtlab_sys::cpus::parse_cpu_list(list).unwrap_or_default(),
    }
}

/// The raw policy number of sched_setscheduler(2).
fn policy_raw(p: Policy) -> i32 {
    match p {
        Policy::Fifo => 1,
        Policy::Rr => 2,
        Policy::Other => 0,
    }
}

/// Threads of a process (/proc/PID/task).
pub fn threads_of(host: &dyn Host, pid: i32) -> Vec<i32> {
    let mut v: Vec<i32> = std::fs::read_dir(host.path(&format!("/proc/{pid}/task")))
        .map(|rd| rd.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    if v.is_empty() && host.exists(&format!("/proc/{pid}")) {
        v.push(pid);
    }
    v.sort_unstable();
    v
}

/// The interface of the default route (/proc/net/route).
pub fn default_nic(host: &dyn Host) -> Option<String> {
    let t = host.read("/proc/net/route").ok()?;
    t.lines().skip(1).find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        (w.get(1) == Some(&"00000000")).then(|| w[0].to_string())
    })
}

/// The queue IRQs of a NIC: its PCI device's MSI IRQs (not the config one), else the
/// /proc/interrupts lines that name it.
pub fn nic_irqs(host: &dyn Host, nic: &str) -> Vec<u32> {
    let interrupts = host.read("/proc/interrupts").unwrap_or_default();
    let name_of = |irq: u32| {
        interrupts
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{irq}:")))
            .map(|l| l.split_whitespace().last().unwrap_or("").to_string())
    };
    let mut irqs = Vec::new();
    let dev = host.path(&format!("/sys/class/net/{nic}/device"));
    for dir in [dev.join("msi_irqs"), dev.join("../msi_irqs")] {
        if let Ok(rd) = std::fs::read_dir(&dir) {
            irqs.extend(rd.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok()));
        }
        if !irqs.is_empty() {
            break;
        }
    }
    if irqs.is_empty() {
        for l in interrupts.lines() {
            let mut w = l.split_whitespace();
            if let (Some(n), Some(name)) = (w.next(), l.split_whitespace().last()) {
                if let Ok(irq) = n.trim_end_matches(':').parse::<u32>() {
                    if name.starts_with(nic) {
                        irqs.push(irq);
                    }
                }
            }
        }
    }
    irqs.retain(|&i| !name_of(i).is_some_and(|n| n.ends_with("-config")));
    irqs.sort_unstable();
    irqs.dedup();
    irqs
}

/// Every IRQ with an smp_affinity file.
fn all_irqs(host: &dyn Host) -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_dir(host.path("/proc/irq"))
        .map(|rd| rd.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    v.sort_unstable();
    v
}

fn tc(netns: &Option<String>, args: &[&str]) -> Vec<String> {
    let mut v = vec!["tc".to_string()];
    if let Some(ns) = netns {
        v.push("-n".into());
        v.push(ns.clone());
    }
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

/// Build the plan of `p` on `host`.
pub fn plan(p: &Profile, t: &Target, host: &dyn Host) -> Vec<Step> {
    let (online, _) = rtlab_sys::cpus::online_cpus(host.root());
    let rt = t.rt_cpu.unwrap_or_else(|| *online.last().unwrap_or(&0));
    let env = rtlab_sys::env::detect(host.root());
    let mut steps = Vec::new();
    let tasks = crate::check::tasks(host);

    // before any real-time policy: a cgroup that gives none refuses it (EPERM, even to root)
    if p.app_policy.is_some_and(|pol| pol.is_realtime()) {
        steps.push(rt_cgroup_step(host, t));
    }

    // the application
    if let (Some(pol), Some(prio)) = (p.app_policy, p.app_priority) {
        let cpus = p.app_cpus.as_deref().map(|s| resolve_cpus(s, rt, &online));
        steps.push(app_step(host, t, pol, prio, cpus));
    }
    if let Some([lo, hi]) = p.middleware_priority {
        steps.push(Step::skip(
            format!("middleware threads: FIFO {lo}-{hi}"),
            "set by the pubsub probe on the threads it creates (no outside threads named)",
        ));
    }
    if let Some(v) = p.rt_runtime_us {
        steps.push(rt_throttling_step(host, v));
    }
    if let Some(g) = &p.governor {
        steps.push(governor_step(host, g, &online));
    }
    if let Some(v) = p.cpu_dma_latency_us {
        steps.push(dma_latency_step(host, v));
    }

    // the NIC
    let nic = t.nic.clone().or_else(|| default_nic(host));
    let irqs = match (&nic, &t.netns) {
        (Some(n), None) => nic_irqs(host, n),
        _ => vec![],
    };
    let nic_label = nic.clone().unwrap_or_else(|| "(no NIC)".into());
    if let Some(sel) = &p.nic_irq_cpus {
        steps.push(nic_irqs_step(t, &nic_label, &irqs, &resolve_cpus(sel, rt, &online)));
    }
    if let Some(sel) = &p.other_irq_cpus {
        steps.push(other_irqs_step(host, &irqs, &resolve_cpus(sel, rt, &online)));
    }
    if let Some(prio) = p.irq_thread_priority {
        steps.push(irq_threads_step(&tasks, &irqs, &nic_label, env.threaded_irqs, prio));
    }
    if let Some(prio) = p.ksoftirqd_priority {
        steps.push(ksoftirqd_step(&tasks, prio));
    }
    if let Some(sel) = &p.isolate_cpus {
        steps.push(isolation(host, t, resolve_cpus(sel, rt, &online), &online));
    }
    if let Some(kinds) = &p.qdisc {
        steps.push(qdisc_step(host, t, nic.as_deref(), kinds));
    }
    if p.vlan_egress_map == Some(true) {
        steps.push(vlan_egress_step(host, t, nic.as_deref(), &nic_label));
    }
    if steps.is_empty() {
        steps.push(Step::skip("nothing", "this profile changes nothing on the machine"));
    }
    steps
}

/// The application's threads (every thread of the `--pid`s): `pol` at `prio`, on `cpus`.
fn app_step(host: &dyn Host, t: &Target, pol: Policy, prio: i32, cpus: Option<Vec<usize>>) -> Step {
    let what = format!(
        "application: {pol} {prio}{}",
        cpus.as_ref().map(|c| format!(" on CPUs {}", crate::cpu_list(c))).unwrap_or_default()
    );
    if t.pids.is_empty() {
        return Step::skip(
            what,
            "no --pid given: rtlab's probes take these settings from the profile",
        );
    }
    let mut acts = Vec::new();
    for &pid in &t.pids {
        for tid in threads_of(host, pid) {
            acts.push(Action::SetSched { pid: tid, policy: policy_raw(pol), priority: prio });
            if let Some(c) = &cpus {
                acts.push(Action::SetAffinity { pid: tid, cpus: c.clone() });
            }
        }
    }
    if acts.is_empty() {
        Step::skip(what, format!("pids {:?}: no such process", t.pids))
    } else {
        Step::act(what, acts)
    }
}

/// RT throttling: sched_rt_runtime_us = `v`.
fn rt_throttling_step(host: &dyn Host, v: i64) -> Step {
    if host.exists("/proc/sys/kernel/sched_rt_runtime_us") {
        Step::act(
            format!("RT throttling: sched_rt_runtime_us = {v}"),
            vec![Action::WriteFile {
                path: "/proc/sys/kernel/sched_rt_runtime_us".into(),
                value: v.to_string(),
            }],
        )
    } else {
        Step::skip("RT throttling", "no /proc/sys/kernel/sched_rt_runtime_us")
    }
}

/// The cpufreq governor `g` on every online CPU that offers it.
fn governor_step(host: &dyn Host, g: &str, online: &[usize]) -> Step {
    let mut acts = Vec::new();
    let mut lacking = Vec::new();
    for &c in online {
        let base = format!("/sys/devices/system/cpu/cpu{c}/cpufreq");
        if !host.exists(&format!("{base}/scaling_governor")) {
            continue;
        }
        let avail = host.read(&format!("{base}/scaling_available_governors")).unwrap_or_default();
        if avail.split_whitespace().any(|a| a == g) {
            acts.push(Action::WriteFile {
                path: format!("{base}/scaling_governor"),
                value: g.to_string(),
            });
        } else {
            lacking.push(c);
        }
    }
    if acts.is_empty() && lacking.is_empty() {
        Step::skip(
            format!("governor {g}"),
            "no cpufreq on this machine (a VM or a fixed frequency)",
        )
    } else if acts.is_empty() {
        Step::skip(
            format!("governor {g}"),
            format!("CPUs {} do not offer it", crate::cpu_list(&lacking)),
        )
    } else {
        Step::act(format!("governor {g}"), acts)
    }
}

/// /dev/cpu_dma_latency held at `v` us while rtlab runs.
fn dma_latency_step(host: &dyn Host, v: i32) -> Step {
    if host.exists("/dev/cpu_dma_latency") {
        Step::act(
            format!("/dev/cpu_dma_latency held at {v} us (no deep C-states) while rtlab runs"),
            vec![Action::HoldPmQos { path: "/dev/cpu_dma_latency".into(), value_us: v }],
        )
    } else {
        Step::skip("/dev/cpu_dma_latency", "no /dev/cpu_dma_latency (CONFIG_PM)")
    }
}

/// The NIC's queue IRQs (`irqs`) on `cpus`.
fn nic_irqs_step(t: &Target, nic_label: &str, irqs: &[u32], cpus: &[usize]) -> Step {
    let what = format!("{nic_label} queue IRQs on CPUs {}", crate::cpu_list(cpus));
    if let Some(ns) = &t.netns {
        Step::skip(
            what,
            format!("{nic_label} lives in netns {ns}: a virtual device without IRQs of its own"),
        )
    } else if irqs.is_empty() {
        Step::skip(what, format!("no IRQs found for {nic_label} (a virtual device?)"))
    } else {
        Step::act(
            format!(
                "{what} (IRQs {})",
                irqs.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(",")
            ),
            irqs.iter()
                .map(|i| Action::WriteFile {
                    path: format!("/proc/irq/{i}/smp_affinity"),
                    value: crate::cpu_mask(cpus),
                })
                .collect(),
        )
    }
}

/// Every IRQ but the NIC's (`nic_irqs`), and the default affinity of new ones, on `cpus`.
fn other_irqs_step(host: &dyn Host, nic_irqs: &[u32], cpus: &[usize]) -> Step {
    let mut acts = vec![];
    if host.exists("/proc/irq/default_smp_affinity") {
        acts.push(Action::WriteFile {
            path: "/proc/irq/default_smp_affinity".into(),
            value: crate::cpu_mask(cpus),
        });
    }
    for i in all_irqs(host).into_iter().filter(|i| !nic_irqs.contains(i)) {
        if host.exists(&format!("/proc/irq/{i}/smp_affinity")) {
            acts.push(Action::WriteFile {
                path: format!("/proc/irq/{i}/smp_affinity"),
                value: crate::cpu_mask(cpus),
            });
        }
    }
    Step::act(
        format!("every other IRQ on CPUs {} (some refuse: managed IRQs)", crate::cpu_list(cpus)),
        acts,
    )
}

/// The irq/N threads of the NIC's IRQs: FIFO `prio`.
fn irq_threads_step(
    tasks: &[(i32, String)],
    irqs: &[u32],
    nic_label: &str,
    threaded_irqs: bool,
    prio: i32,
) -> Step {
    let threads: Vec<&(i32, String)> = tasks
        .iter()
        .filter(|(_, c)| {
            c.strip_prefix("irq/")
                .and_then(|r| r.split('-').next())
                .and_then(|n| n.parse::<u32>().ok())
                .is_some_and(|n| irqs.contains(&n))
        })
        .collect();
    let what = format!("{nic_label} IRQ threads: FIFO {prio}");
    if threads.is_empty() {
        Step::skip(
            what,
            if threaded_irqs {
                format!("no irq/N threads for {nic_label}'s IRQs {irqs:?}")
            } else {
                format!("IRQs are not threaded on this kernel (boot with threadirqs or use PREEMPT_RT); {nic_label}'s IRQs {irqs:?} run in hard-IRQ context")
            },
        )
    } else {
        Step::act(
            format!(
                "{what} ({})",
                threads.iter().map(|(_, c)| c.as_str()).collect::<Vec<_>>().join(", ")
            ),
            threads
                .iter()
                .map(|(pid, _)| Action::SetSched { pid: *pid, policy: 1, priority: prio })
                .collect(),
        )
    }
}

/// Every ksoftirqd/N: FIFO `prio`.
fn ksoftirqd_step(tasks: &[(i32, String)], prio: i32) -> Step {
    let k: Vec<&(i32, String)> =
        tasks.iter().filter(|(_, c)| c.starts_with("ksoftirqd/")).collect();
    if k.is_empty() {
        Step::skip(format!("ksoftirqd: FIFO {prio}"), "no ksoftirqd threads found")
    } else {
        Step::act(
            format!("ksoftirqd: FIFO {prio} ({} threads)", k.len()),
            k.iter()
                .map(|(pid, _)| Action::SetSched { pid: *pid, policy: 1, priority: prio })
                .collect(),
        )
    }
}

/// A file of /proc/net/vlan as the NIC's network namespace shows it (/proc/net shows the
/// reader's namespace: a --netns NIC's VLANs are read there).
fn vlan_file(host: &dyn Host, t: &Target, path: &str) -> Option<String> {
    match &t.netns {
        None => host.read(path).ok(),
        Some(ns) => host.run(&["ip", "netns", "exec", ns, "cat", path].map(String::from)).ok(),
    }
}

/// The egress map SKB priority n -> PCP n on every VLAN of the NIC.
fn vlan_egress_step(host: &dyn Host, t: &Target, nic: Option<&str>, nic_label: &str) -> Step {
    let vlans = vlan_file(host, t, "/proc/net/vlan/config");
    let what = format!("VLAN egress map on {nic_label}'s VLANs (SKB priority n -> PCP n)");
    match (vlans, nic) {
        (None, _) => Step::skip(what, "no VLAN here (8021q not loaded or not in this kernel)"),
        (Some(cfg), Some(n)) => {
            let mine: Vec<String> = cfg
                .lines()
                .skip(2)
                .filter(|l| l.split('|').nth(2).map(|d| d.trim()) == Some(n))
                .map(|l| l.split('|').next().unwrap_or("").trim().to_string())
                .collect();
            if mine.is_empty() {
                Step::skip(what, format!("no VLAN on {n}"))
            } else {
                Step::act(what, mine.iter().map(|v| vlan_egress_action(host, t, v)).collect())
            }
        }
        (Some(_), None) => Step::skip(what, "no NIC"),
    }
}

/// `ip link set VLAN type vlan egress-qos-map 0:0 .. 7:7`, undone to the map in force.
fn vlan_egress_action(host: &dyn Host, t: &Target, v: &str) -> Action {
    let map: Vec<String> = (0..8).map(|i| format!("{i}:{i}")).collect();
    // the map in force (/proc/net/vlan/DEV "EGRESS priority mappings: 0:0 5:3"), unmapped = 0
    let info = vlan_file(host, t, &format!("/proc/net/vlan/{v}")).unwrap_or_default();
    let old: BTreeMap<u32, u32> = info
        .lines()
        .find_map(|l| l.trim().strip_prefix("EGRESS priority mappings:"))
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|m| {
            m.split_once(':').and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        })
        .collect();
    let mut did = vec!["ip".to_string()];
    if let Some(ns) = &t.netns {
        did.extend(["-n".to_string(), ns.clone()]);
    }
    did.extend([
        "link".into(),
        "set".into(),
        v.to_string(),
        "type".into(),
        "vlan".into(),
        "egress-qos-map".into(),
    ]);
    let mut undo = did.clone();
    did.extend(map);
    undo.extend((0..8).map(|i| format!("{i}:{}", old.get(&i).copied().unwrap_or(0))));
    Action::Command { did, undo }
}

/// The processes that run real-time threads under a profile: rtlab's own (when the host's
/// /proc has it: always on the real machine) and the target's `--pid`s, sorted, once each.
fn rt_processes(host: &dyn Host, t: &Target) -> Vec<i32> {
    let mut pids: Vec<i32> = t.pids.clone();
    pids.push(std::process::id() as i32);
    pids.sort_unstable();
    pids.dedup();
    pids.retain(|p| host.exists(&format!("/proc/{p}")));
    pids
}

/// With RT group scheduling (CONFIG_RT_GROUP_SCHED) a cgroup without real-time runtime refuses
/// FIFO/RR even to root: cgroup v2 gives none to any group but the root (there is no rt file
/// to give it some), v1 to a group whose `cpu.rt_runtime_us` is 0. So rtlab's process and the
/// `--pid`s in such a group move to the root cgroup of that hierarchy (`cgroup.procs`: whole
/// processes), journaled as a [`Change::CgroupMove`] that restore undoes by writing each pid
/// back to its own group's `cgroup.procs` (a group removed meanwhile is said, not recreated).
/// Skipped, with the reason, when nothing is in such a group (RT group scheduling off or
/// unknown, already in the root cgroup, a group with runtime).
/// (Documentation/scheduler/sched-rt-group.rst, Documentation/admin-guide/cgroup-v2.rst)
pub fn rt_cgroup_step(host: &dyn Host, t: &Target) -> Step {
    use rtlab_sys::rt_access::{RtAccess, RtGroupSched};
    let what = "RT group scheduling: real-time processes to a cgroup with real-time runtime";
    let pids = rt_processes(host, t);
    if pids.is_empty() {
        return Step::skip(what, "no process to move (rtlab's own is not under this root's /proc)");
    }
    let mut by_source: BTreeMap<(String, String), Vec<i32>> = BTreeMap::new();
    let mut fine = Vec::new();
    let mut gs = RtGroupSched::Unknown;
    for pid in pids {
        let a = RtAccess::detect(host.root(), Some(pid));
        gs = a.rt_group_sched.clone();
        let place = a.cgroup.clone();
        match (a.group_without_runtime(), place.as_ref().and_then(|p| p.procs_files())) {
            (Some(true), Some((from, to))) if host.exists(&from) && host.exists(&to) => {
                by_source.entry((from, to)).or_default().push(pid);
            }
            (Some(true), _) => fine.push(format!(
                "pid {pid} is in {} without real-time runtime, but its hierarchy's cgroup.procs are not found",
                place.map(|p| p.path).unwrap_or_default()
            )),
            (Some(false), _) => fine.push(format!(
                "pid {pid} in {}",
                place.map(|p| if p.is_root() { "the root cgroup".to_string() } else { format!("{} (it has real-time runtime)", p.path) }).unwrap_or_default()
            )),
            (None, _) => fine.push(format!(
                "pid {pid} in {}",
                place.map(|p| p.path).unwrap_or_else(|| "an unknown cgroup".into())
            )),
        }
    }
    if by_source.is_empty() {
        let why = match &gs {
            RtGroupSched::Off { source } => format!("RT group scheduling is off ({source})"),
            RtGroupSched::On { source } => format!("RT group scheduling is on ({source}); nothing to move: {}", fine.join("; ")),
            RtGroupSched::Unknown => format!("RT group scheduling is unknown here (no kernel config readable; cgroup v2 has no rt file): nothing moved ({}); if FIFO is refused as root, rtlab tune check row rt-group-sched says what to do", fine.join("; ")),
        };
        return Step::skip(what, why);
    }
    let mut acts = Vec::new();
    let mut notes = Vec::new();
    for ((from, to), pids) in by_source {
        notes.push(format!(
            "{} from {} (no real-time runtime) to {}",
            pids.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(","),
            from.trim_end_matches("/cgroup.procs"),
            to.trim_end_matches("/cgroup.procs")
        ));
        acts.push(Action::MoveTasks { from, to, pids });
    }
    let mut step = Step::act(what, acts).note(format!(
        "pid {}; restore moves each back to its group (a group removed meanwhile is said)",
        notes.join("; pid ")
    ));
    if !fine.is_empty() {
        step.note = Some(format!("{}; left: {}", step.note.unwrap_or_default(), fine.join("; ")));
    }
    step
}

fn isolation(host: &dyn Host, t: &Target, iso: Vec<usize>, online: &[usize]) -> Step {
    let what = format!(
        "cpuset: CPUs {} for the application alone, every movable task off them",
        crate::cpu_list(&iso)
    );
    let root = "/sys/fs/cgroup/cpuset";
    // a cgroup-v1 cpuset hierarchy; a cgroup-v2 child named "cpuset" would have cgroup.controllers
    if !host.exists(&format!("{root}/cpuset.cpus"))
        || host.exists(&format!("{root}/cgroup.controllers"))
    {
        return isolation_v2(host, t, iso, online, what);
    }
    let rest: Vec<usize> = online.iter().copied().filter(|c| !iso.contains(c)).collect();
    if rest.is_empty() || iso.is_empty() {
        return Step::skip(what, "needs at least one CPU left for everything else");
    }
    let mems = host.read(&format!("{root}/cpuset.mems")).unwrap_or_else(|_| "0".into());
    let sys = format!("{root}/rtlab-system");
    let rtd = format!("{root}/rtlab-rt");
    let root_tasks = format!("{root}/tasks");
    let app: Vec<i32> = t.pids.iter().flat_map(|&p| threads_of(host, p)).collect();
    let everyone: Vec<i32> = host
        .read(&root_tasks)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .filter(|p| !app.contains(p))
        .collect();
    let mut acts = vec![
        Action::MakeDir { path: sys.clone(), parent_tasks: root_tasks.clone() },
        Action::WriteFile { path: format!("{sys}/cpuset.cpus"), value: crate::cpu_list(&rest) },
        Action::WriteFile { path: format!("{sys}/cpuset.mems"), value: mems.clone() },
        Action::MakeDir { path: rtd.clone(), parent_tasks: root_tasks.clone() },
        Action::WriteFile { path: format!("{rtd}/cpuset.cpus"), value: crate::cpu_list(&iso) },
        Action::WriteFile { path: format!("{rtd}/cpuset.mems"), value: mems },
        Action::WriteFile { path: format!("{rtd}/cpuset.cpu_exclusive"), value: "1".into() },
    ];
    if !app.is_empty() {
        acts.push(Action::MoveTasks {
            from: root_tasks.clone(),
            to: format!("{rtd}/tasks"),
            pids: app,
        });
    }
    acts.push(Action::MoveTasks { from: root_tasks, to: format!("{sys}/tasks"), pids: everyone });
    if host.exists(&format!("{root}/cpuset.sched_load_balance")) {
        acts.push(Action::WriteFile {
            path: format!("{root}/cpuset.sched_load_balance"),
            value: "0".into(),
        });
    }
    Step::act(what, acts)
}

/// The mounts of /proc/mounts: (mount point, fstype, options).
fn mounts(host: &dyn Host) -> Vec<(String, String, String)> {
    // a mount point with a space or tab in it is written with octal escapes (\040, \011)
    let unescape = |s: &str| s.replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\");
    host.read("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            Some((unescape(w.get(1)?), w.get(2)?.to_string(), w.get(3)?.to_string()))
        })
        .collect()
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

/// Where a cgroup-v1 hierarchy with the cpuset controller is mounted, if anywhere.
fn cgroup1_cpuset_mount(host: &dyn Host) -> Option<String> {
    mounts(host)
        .into_iter()
        .find(|m| m.1 == "cgroup" && m.2.split(',').any(|o| o == "cpuset"))
        .map(|m| m.0)
}

/// The cgroup (a cgroup.procs file under `mnt`) a process is in, from its /proc/PID/cgroup
/// `0::PATH` line (relative to the mount in a cgroup namespace too); the root when unknown.
fn cgroup2_procs_of(host: &dyn Host, mnt: &str, pid: i32) -> String {
    let path = host
        .read(&format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("0::").map(|p| p.trim().to_string()));
    match path.as_deref().map(|p| p.trim_end_matches('/')) {
        Some(p) if !p.is_empty() && !p.contains(" (deleted)") => format!("{mnt}{p}/cgroup.procs"),
        _ => format!("{mnt}/cgroup.procs"),
    }
}

/// cgroup v2: `rtlab-rt` under the unified root holds the isolated CPUs as a cpuset
/// *partition* and the application's processes.
///
/// No `rtlab-system` (the v1 path's cpuset for everything else) is needed here: a partition
/// root (`cpuset.cpus.partition` = `root` or `isolated`) takes its CPUs exclusively, and the
/// kernel removes them from the effective CPUs of its parent and of every other cgroup under
/// it (and from the affinity of their tasks), so every movable task is moved off by the
/// kernel itself. An `isolated` partition also has no scheduler load balancing (v1's
/// `sched_load_balance = 0`): with more than one CPU in it, the application's threads should
/// be pinned (`app_cpus`), as rt-isolation does. Only per-CPU kernel threads keep those CPUs;
/// they are counted after applying ([`Report::TasksStillOn`]). See
/// Documentation/admin-guide/cgroup-v2.rst, "cpuset.cpus.partition". `isolated` came in
/// Linux 6.1 (commit f28e22441f35; the "root invalid (reason)" read-back with 7476a636d310);
/// older kernels refuse it (EINVAL) and get `root`.
fn isolation_v2(
    host: &dyn Host,
    t: &Target,
    iso: Vec<usize>,
    online: &[usize],
    what: String,
) -> Step {
    let Some(mnt) = cgroup2_mount(host) else {
        let v1 =
            mounts(host).into_iter().filter(|m| m.1 == "cgroup").map(|m| m.0).collect::<Vec<_>>();
        return Step::skip(
            what,
            match cgroup1_cpuset_mount(host) {
                Some(m) => format!("the cgroup-v1 cpuset hierarchy is mounted at {m}, not at /sys/fs/cgroup/cpuset where rtlab uses it, and there is no cgroup2 mount"),
                None if !v1.is_empty() => format!("no cpuset hierarchy: cgroup v1 only ({}), none with the cpuset controller, and no cgroup2 mount", v1.join(", ")),
                None => "no cpuset hierarchy: no cgroup-v1 cpuset at /sys/fs/cgroup/cpuset and no cgroup2 mount (/sys/fs/cgroup/cgroup.controllers, /proc/mounts)".into(),
            },
        );
    };
    let controllers = host.read(&format!("{mnt}/cgroup.controllers")).unwrap_or_default();
    if !controllers.split_whitespace().any(|c| c == "cpuset") {
        let why = match cgroup1_cpuset_mount(host) {
            Some(m) => format!("it is bound to the cgroup-v1 hierarchy at {m}"),
            None => "the kernel has no cpuset controller (CONFIG_CPUSETS) or a cgroup-v1 hierarchy holds it".into(),
        };
        return Step::skip(
            what,
            format!(
                "cgroup2 at {mnt} offers no cpuset controller (cgroup.controllers: '{}'): {why}",
                controllers.trim()
            ),
        );
    }
    let rest: Vec<usize> = online.iter().copied().filter(|c| !iso.contains(c)).collect();
    if rest.is_empty() || iso.is_empty() {
        return Step::skip(what, "needs at least one CPU left for everything else");
    }
    let subtree = format!("{mnt}/cgroup.subtree_control");
    let Ok(enabled) = host.read(&subtree) else {
        return Step::skip(what, format!("{subtree} cannot be read: not a cgroup2 root"));
    };
    let rtd = format!("{mnt}/rtlab-rt");
    if host.exists(&rtd) {
        return Step::skip(what, format!("{rtd} exists already (left by another tool, or by rtlab without a journal): remove it first"));
    }
    let mems = host
        .read(&format!("{mnt}/cpuset.mems.effective"))
        .ok()
        .filter(|m| !m.trim().is_empty())
        .unwrap_or_else(|| "0".into());
    let mut acts = Vec::new();
    if !enabled.split_whitespace().any(|c| c == "cpuset") {
        acts.push(Action::WriteWithUndo {
            path: subtree,
            value: "+cpuset".into(),
            undo: "-cpuset".into(),
        });
    }
    acts.push(Action::MakeDir { path: rtd.clone(), parent_tasks: format!("{mnt}/cgroup.procs") });
    acts.push(Action::WriteFile {
        path: format!("{rtd}/cpuset.cpus"),
        value: crate::cpu_list(&iso),
    });
    acts.push(Action::WriteFile {
        path: format!("{rtd}/cpuset.mems"),
        value: mems.trim().to_string(),
    });
    // the application before the partition is made: left outside until then, the kernel
    // would take the RT CPUs (where the application step pinned it) from it for a moment.
    // Domain cgroups take whole processes, each from the cgroup it is in now (restore puts
    // it back there). +cpuset comes first: refused (EBUSY in a cgroup namespace whose root
    // holds processes), nothing else is done.
    let mut by_source: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    let mut pids = t.pids.clone();
    pids.sort_unstable();
    pids.dedup();
    for pid in pids.into_iter().filter(|p| host.exists(&format!("/proc/{p}"))) {
        by_source.entry(cgroup2_procs_of(host, &mnt, pid)).or_default().push(pid);
    }
    for (from, pids) in by_source {
        acts.push(Action::MoveTasks { from, to: format!("{rtd}/cgroup.procs"), pids });
    }
    acts.push(Action::Partition {
        path: format!("{rtd}/cpuset.cpus.partition"),
        modes: vec!["isolated".into(), "root".into()],
    });
    let mut step = Step::act(what, acts).note(format!(
        "cgroup v2 at {mnt}: {rtd} becomes an isolated partition (else root), which takes CPUs {} from every other cgroup; no rtlab-system needed",
        crate::cpu_list(&iso)
    ));
    if rtlab_sys::rt_access::rt_group_sched(host.root()).is_on() {
        // a new cgroup-v2 group gets no real-time runtime under RT group scheduling
        let n = step.note.take().unwrap_or_default();
        step.note = Some(format!("{n}; RT group scheduling is on: if the cpu controller reaches {rtd}, FIFO/RR are refused inside it (EPERM) and the application runs better without rt-isolation's cpuset"));
    }
    step.report =
        Some(Report::TasksStillOn { cpus: iso, cgroup_procs: format!("{rtd}/cgroup.procs") });
    step
}

fn qdisc_step(host: &dyn Host, t: &Target, nic: Option<&str>, kinds: &[String]) -> Step {
    let Some(nic) = nic else { return Step::skip("qdisc", "no NIC (give --nic)") };
    let what = format!("{nic}: root qdisc for RT traffic ({})", kinds.join(" or "));
    let shown = host.run(&tc(&t.netns, &["qdisc", "show", "dev", nic]));
    let current = match &shown {
        Ok(s) => s.lines().find(|l| l.contains(" root ")).unwrap_or("").to_string(),
        Err(e) => return Step::skip(what, format!("cannot read the qdisc: {e}")),
    };
    let w: Vec<&str> = current.split_whitespace().collect();
    let (kind, handle) = (w.get(1).copied().unwrap_or(""), w.get(2).copied().unwrap_or(""));
    if !host.is_fake() && !current.is_empty() && handle != "0:" {
        return Step::skip(what, format!("{nic} has a configured root qdisc ({kind} {handle}): rtlab replaces only the kernel's default"));
    }
    let undo = tc(&t.netns, &["qdisc", "del", "dev", nic, "root"]);
    let mut alts = Vec::new();
    for k in kinds {
        match k.as_str() {
            "mqprio" => alts.push((
                "mqprio (S1: SKB priority 4 -> queue 0, 2-3 -> queue 1, the rest -> queue 2)".to_string(),
                vec![Action::Command {
                    did: tc(&t.netns, &["qdisc", "replace", "dev", nic, "root", "mqprio", "num_tc", "3", "map", "2", "2", "1", "1", "0", "2", "2", "2", "2", "2", "2", "2", "2", "2", "2", "2", "queues", "1@0", "1@1", "1@2", "hw", "0"]),
                    undo: undo.clone(),
                }],
            )),
            "htb" => alts.push((
                "htb: SO_PRIORITY 0x10001 (class 1:1) served first (prio 0), everything else class 1:2".to_string(),
                vec![
                    Action::Command { did: tc(&t.netns, &["qdisc", "replace", "dev", nic, "root", "handle", "1:", "htb", "default", "2"]), undo: undo.clone() },
                    Action::Command {
                        did: tc(&t.netns, &["class", "add", "dev", nic, "parent", "1:", "classid", "1:1", "htb", "rate", "10gbit", "prio", "0"]),
                        undo: tc(&t.netns, &["class", "del", "dev", nic, "classid", "1:1"]),
                    },
                    Action::Command {
                        did: tc(&t.netns, &["class", "add", "dev", nic, "parent", "1:", "classid", "1:2", "htb", "rate", "10gbit", "prio", "1"]),
                        undo: tc(&t.netns, &["class", "del", "dev", nic, "classid", "1:2"]),
                    },
                ],
            )),
            _ => alts.push((
                "pfifo_fast: fixed priomap, SO_PRIORITY 6 and 7 -> band 0 (served first)".to_string(),
                vec![Action::Command { did: tc(&t.netns, &["qdisc", "replace", "dev", nic, "root", "pfifo_fast"]), undo: undo.clone() }],
            )),
        }
    }
    Step { what, alternatives: alts, skip: None, note: None, report: None }
        .note(format!("was: {}", if current.is_empty() { "none" } else { current.trim() }))
}

/// Whether a journaled change is still in force (for `rtlab tune show`).
pub fn in_force(host: &dyn Host, c: &Change) -> String {
    match c {
        Change::File { path, new, .. } => match host.read(path) {
            Ok(v) if v.trim() == new.trim() => "in force".into(),
            Ok(v) => format!("changed since: now '{}'", v.trim()),
            Err(_) => "gone".into(),
        },
        Change::Sched { pid, new_policy, new_priority, .. } => match host.sched_get(*pid) {
            Ok((p, pr)) if (p, pr) == (*new_policy, *new_priority) => "in force".into(),
            Ok((p, pr)) => format!("changed since: now {} {pr}", crate::journal::policy_name(p)),
            Err(_) => "task gone".into(),
        },
        Change::Affinity { pid, new_cpus, .. } => match host.affinity_get(*pid) {
            Ok(c) if &c == new_cpus => "in force".into(),
            Ok(c) => format!("changed since: now CPUs {}", crate::cpu_list(&c)),
            Err(_) => "task gone".into(),
        },
        Change::WriteWithUndo { path, new, .. } => match host.read(path) {
            Ok(v) if crate::session::control_holds(&v, new) => "in force".into(),
            Ok(v) => format!("changed since: now '{}'", v.trim()),
            Err(_) => "gone".into(),
        },
        Change::MkDir { path, .. } => if host.exists(path) { "exists" } else { "gone" }.into(),
        Change::PmQos { holder_pid, .. } => {
            if rtlab_sys::tune_sys::pid_alive(*holder_pid) {
                "held".into()
            } else {
                "released (holder exited)".into()
            }
        }
        _ => "recorded".into(),
    }
}

/// What applying one step did.
#[derive(Clone, Debug, Serialize)]
pub struct StepOutcome {
    pub what: String,
    /// `done`, `partial`, `failed` or `skipped`.
    pub status: &'static str,
    /// The alternative kept, the skip reason, outcomes and errors.
    pub detail: Vec<String>,
}

/// Apply one step through the session (journaled); alternatives are tried in order.
pub fn apply_step(s: &mut crate::session::Session<'_>, step: &Step) -> StepOutcome {
    let mut detail = Vec::new();
    if let Some(why) = &step.skip {
        return StepOutcome {
            what: step.what.clone(),
            status: "skipped",
            detail: vec![why.clone()],
        };
    }
    let mut tried = Vec::new();
    for (label, actions) in &step.alternatives {
        let Some(first) = actions.first() else { continue };
        match s.apply(first) {
            Err(e) => {
                tried.push(if label.is_empty() {
                    e.to_string()
                } else {
                    format!(
                        "{}: {e}",
                        label.split_whitespace().next().unwrap_or(label).trim_end_matches(':')
                    )
                });
                continue;
            }
            Ok(o) => {
                if !label.is_empty() {
                    detail.push(label.clone());
                }
                if !tried.is_empty() {
                    detail.push(format!("not available: {}", tried.join("; ")));
                }
                let mut errors = Vec::new();
                let mut outcomes = vec![o];
                for a in &actions[1..] {
                    match s.apply(a) {
                        Ok(o) => outcomes.push(o),
                        Err(e) => errors.push(e.to_string()),
                    }
                }
                let changed = outcomes.iter().filter(|o| o.as_str() != "already so").count();
                let special: Vec<&String> = outcomes
                    .iter()
                    .filter(|o| !["done", "already so"].contains(&o.as_str()))
                    .collect();
                detail.push(format!(
                    "{changed} of {} changed, {} already so",
                    actions.len(),
                    outcomes.len() - changed
                ));
                detail.extend(special.into_iter().cloned());
                let status = if errors.is_empty() { "done" } else { "partial" };
                if !errors.is_empty() {
                    detail.push(format!(
                        "{} refused: {}",
                        errors.len(),
                        crate::session::abbreviate(&errors, 4)
                    ));
                }
                if let Some(r) = &step.report {
                    detail.push(r.run(s.host()));
                }
                return StepOutcome { what: step.what.clone(), status, detail };
            }
        }
    }
    StepOutcome { what: step.what.clone(), status: "failed", detail: tried }
}

/// Apply a profile for a probe or scenario: plan it on `host`, apply every step through a new
/// journaled session, and hand back the session (the guard: drop it, or call `restore`, after
/// the measurement window) with what each step did.
pub fn apply_profile<'h>(
    host: &'h dyn Host,
    name: &str,
    user: &BTreeMap<String, Profile>,
    target: &Target,
    journal: &std::path::Path,
) -> Result<(crate::session::Session<'h>, Vec<StepOutcome>), ProfileError> {
    let profile = find(name, user)?;
    Ok(apply_named(host, &NamedProfile { name: name.into(), profile }, target, journal)?)
}

/// Apply a resolved profile ([`resolve`]): plan it on `host`, apply every step through a new
/// session journaled at `journal` (its `begin` line says `profile NAME`), and hand back the
/// session (the guard: drop it, or call `restore`, after the measurement) with what each
/// step did. Err only when the journal cannot be begun (pending changes, no privilege).
pub fn apply_named<'h>(
    host: &'h dyn Host,
    p: &NamedProfile,
    target: &Target,
    journal: &Path,
) -> Result<(crate::session::Session<'h>, Vec<StepOutcome>), JournalError> {
    let steps = plan(&p.profile, target, host);
    let mut s = crate::session::Session::begin(host, journal, &format!("profile {}", p.name))?;
    let outcomes = steps.iter().map(|st| apply_step(&mut s, st)).collect();
    Ok((s, outcomes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::FakeHost;
    use crate::testing::put;

    /// Today's settings (rtlab's `process_settings` before the registry): no-rt SCHED_OTHER
    /// 0 unlocked and unpinned; every rt-* FIFO 80 locked; rt-affinities and rt-isolation on
    /// the last online CPU; a policy override replaces the RT policy, never no-rt's.
    #[test]
    fn the_builtins_give_todays_process_settings() {
        let online = [0, 1, 2, 3];
        let rt = |name: &str, over| builtin(name).unwrap().rt_settings(&online, over);
        let pinned = |cpu| RtSettings { cpus: Some(vec![cpu]), ..RtSettings::fifo80() };
        assert_eq!(rt("no-rt", None), RtSettings::normal());
        assert_eq!(rt("rt-normal", None), RtSettings::fifo80());
        assert_eq!(rt("rt-kthreads", None), RtSettings::fifo80());
        assert_eq!(rt("rt-affinities", None), pinned(3));
        assert_eq!(rt("rt-isolation", None), pinned(3));
        for name in builtin_names() {
            assert_eq!(rt(name, Some(Policy::Fifo)), rt(name, None), "{name}");
        }
        assert_eq!(rt("no-rt", Some(Policy::Rr)), RtSettings::normal());
        assert_eq!(rt("no-rt", Some(Policy::Fifo)), RtSettings::normal());
        assert_eq!(
            rt("rt-normal", Some(Policy::Rr)),
            RtSettings { policy: Policy::Rr, ..RtSettings::fifo80() }
        );
        assert_eq!(
            rt("rt-affinities", Some(Policy::Other)),
            RtSettings { policy: Policy::Other, priority: 0, ..pinned(3) }
        );
        assert_eq!(builtin("rt-affinities").unwrap().rt_settings(&[0, 1], None), pinned(1));
        assert_eq!(builtin("rt-affinities").unwrap().rt_settings(&[], None).cpus, None);
    }

    #[test]
    fn a_user_profile_gets_its_own_process_settings() {
        let p = Profile {
            app_policy: Some(Policy::Rr),
            app_priority: Some(60),
            app_cpus: Some("others".into()),
            ..Default::default()
        };
        assert_eq!(
            p.rt_settings(&[0, 1, 2], None),
            RtSettings { policy: Policy::Rr, priority: 60, cpus: Some(vec![0, 1]), mlockall: true }
        );
        let p = Profile { mlockall: Some(false), app_cpus: Some("2".into()), ..p };
        assert_eq!(
            p.rt_settings(&[0, 1, 2], Some(Policy::Fifo)),
            RtSettings { policy: Policy::Fifo, priority: 60, cpus: Some(vec![2]), mlockall: false }
        );
        assert_eq!(Profile::default().rt_settings(&[0, 1], None), RtSettings::normal());
    }

    #[test]
    fn resolve_takes_builtins_and_user_files_beside_the_scenario() {
        let d = tempfile::tempdir().unwrap();
        let one = "[profile.fast]\nbase = \"rt-normal\"\napp_priority = 90\napp_policy = \"rr\"\n";
        put(d.path(), "one.toml", one);
        put(
            d.path(),
            "sub/two.toml",
            "[profile.a]\nbase = \"no-rt\"\n[profile.b]\nmlockall = true\n",
        );
        let r = resolve("rt-isolation", d.path()).unwrap();
        assert_eq!(
            (r.name.as_str(), r.profile),
            ("rt-isolation", builtin("rt-isolation").unwrap())
        );
        let r = resolve("./one.toml", d.path()).unwrap();
        assert_eq!(r.name, "./one.toml");
        assert_eq!(r.profile.app_policy, Some(Policy::Rr));
        assert_eq!(r.profile.rt_runtime_us, Some(-1), "the base is merged in");
        assert_eq!(r.profile.rt_settings(&[0, 1], None).priority, 90);
        assert!(resolve("one.toml", d.path()).is_ok(), "anything ending in .toml is a file");
        let abs = d.path().join("one.toml").display().to_string();
        assert!(resolve(&abs, Path::new("/nonexistent")).is_ok());
        let e = resolve("./sub/two.toml", d.path()).unwrap_err();
        assert!(matches!(e, ProfileError::Ambiguous { .. }), "{e}");
        assert!(e.to_string().contains("two.toml#NAME") && e.to_string().contains("a, b"), "{e}");
        let r = resolve("./sub/two.toml#b", d.path()).unwrap();
        assert_eq!((r.name.as_str(), r.profile.mlockall), ("./sub/two.toml#b", Some(true)));
        assert!(matches!(
            resolve("./sub/two.toml#c", d.path()),
            Err(ProfileError::NotInFile { .. })
        ));
        assert!(matches!(resolve("./none.toml", d.path()), Err(ProfileError::Read { .. })));
        let e = resolve("rt-fast", d.path()).unwrap_err();
        assert!(e.to_string().contains("no-rt, rt-normal") && e.to_string().contains("./my.toml"));
        put(d.path(), "bad.toml", "[profile.x]\napp_policy = \"deadline\"\n");
        let e = resolve("./bad.toml", d.path()).unwrap_err();
        assert!(matches!(e, ProfileError::File { .. }) && !e.to_string().contains('\n'), "{e}");
    }

    #[test]
    fn cgroup2_is_found_at_the_unified_root_or_in_proc_mounts() {
        let d = tempfile::tempdir().unwrap();
        let host = FakeHost::new(d.path());
        assert_eq!(cgroup2_mount(&host), None);
        // a mount point with a space is escaped in /proc/mounts
        put(d.path(), "proc/mounts", "cgroup /sys/fs/cgroup/cpuset cgroup rw,cpuset 0 0\ncgroup2 /mnt/cg\\0402 cgroup2 rw 0 0\n");
        assert_eq!(cgroup2_mount(&host), None, "listed but not there");
        put(d.path(), "mnt/cg 2/cgroup.controllers", "cpu\n");
        assert_eq!(cgroup2_mount(&host).as_deref(), Some("/mnt/cg 2"));
        assert_eq!(cgroup1_cpuset_mount(&host).as_deref(), Some("/sys/fs/cgroup/cpuset"));
        put(d.path(), "sys/fs/cgroup/cgroup.controllers", "cpuset cpu\n");
        assert_eq!(cgroup2_mount(&host).as_deref(), Some("/sys/fs/cgroup"));
    }

    /// An Ubuntu-like fake: CONFIG_RT_GROUP_SCHED=y, cgroup v2 with cpu enabled at the root,
    /// rtlab's own process (this test's pid) and `rustc` (812) in user.slice.
    fn rt_group_machine(r: &Path) -> i32 {
        crate::testing::machine_v2(r);
        put(r, "boot/config-6.18.0", "CONFIG_HZ=1000\nCONFIG_RT_GROUP_SCHED=y\n");
        let me = std::process::id() as i32;
        crate::testing::task(r, me, "rtlab", 999);
        put(r, &format!("proc/{me}/cgroup"), "0::/user.slice\n");
        let mut procs = [812, me];
        procs.sort_unstable();
        let text: String = procs.iter().map(|p| format!("{p}\n")).collect();
        put(r, "sys/fs/cgroup/user.slice/cgroup.procs", &text);
        me
    }

    #[test]
    fn rt_profiles_move_processes_out_of_a_group_without_rt_runtime_and_back() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let me = rt_group_machine(r);
        let host = FakeHost::new(r);
        let before = crate::testing::tree_snapshot(r);
        let t = Target { rt_cpu: Some(1), pids: vec![812], ..Default::default() };
        let steps = plan(&builtin("rt-normal").unwrap(), &t, &host);
        let st = &steps[0];
        assert!(st.what.starts_with("RT group scheduling"), "first, before any policy: {st:?}");
        let mut pids = vec![812, me];
        pids.sort_unstable();
        assert_eq!(
            st.alternatives[0].1,
            vec![Action::MoveTasks {
                from: "/sys/fs/cgroup/user.slice/cgroup.procs".into(),
                to: "/sys/fs/cgroup/cgroup.procs".into(),
                pids: pids.clone(),
            }]
        );
        assert!(st.note.as_deref().unwrap().contains("restore moves each back"), "{st:?}");
        let j = r.join("journal");
        let mut s = crate::session::Session::begin(&host, &j, "profile rt-normal").unwrap();
        let o = apply_step(&mut s, st);
        assert_eq!(o.status, "done", "{o:?}");
        let root_procs = host.read("/sys/fs/cgroup/cgroup.procs").unwrap();
        for p in &pids {
            assert!(root_procs.lines().any(|l| l == p.to_string()), "{p} in {root_procs}");
            assert_eq!(host.read(&format!("/proc/{p}/cgroup")).unwrap(), "0::/");
        }
        // journaled before it was made
        let pending = crate::journal::read_journal(&j).unwrap().pending;
        assert!(matches!(&pending[0].1, Change::CgroupMove { tasks, .. } if tasks.len() == 2));
        let rep = s.restore();
        assert!(rep.is_clean(), "{rep:?}");
        assert_eq!(rep.restored[0].1, "2 moved back, 0 gone");
        assert_eq!(crate::testing::tree_snapshot(r), before);
    }

    #[test]
    fn a_group_gone_before_restore_is_said_and_nothing_moves_when_not_needed() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        rt_group_machine(r);
        let host = FakeHost::new(r);
        let t = Target { rt_cpu: Some(1), ..Default::default() };
        let st = rt_cgroup_step(&host, &t);
        let j = r.join("journal");
        let mut s = crate::session::Session::begin(&host, &j, "profile rt-normal").unwrap();
        assert_eq!(apply_step(&mut s, &st).status, "done");
        std::fs::remove_dir_all(r.join("sys/fs/cgroup/user.slice")).unwrap();
        let rep = s.restore();
        assert!(rep.is_clean(), "{rep:?}");
        assert_eq!(
            rep.restored[0].1,
            "/sys/fs/cgroup/user.slice/cgroup.procs is gone: 1 tasks not moved back"
        );
        // in the root cgroup now: nothing to do, said
        let st = rt_cgroup_step(&host, &t);
        assert!(st.skip.as_deref().unwrap().contains("the root cgroup"), "{st:?}");
        // RT group scheduling off: skipped with the reason
        put(r, "boot/config-6.18.0", "CONFIG_HZ=1000\n");
        put(r, &format!("proc/{}/cgroup", std::process::id()), "0::/user.slice\n");
        let st = rt_cgroup_step(&host, &t);
        assert!(st.skip.as_deref().unwrap().starts_with("RT group scheduling is off"), "{st:?}");
        // no-rt asks for no real-time policy: no such step
        let steps = plan(&builtin("no-rt").unwrap(), &t, &host);
        assert!(!steps.iter().any(|s| s.what.starts_with("RT group scheduling")));
    }

    #[test]
    fn a_process_cgroup_comes_from_its_0_line() {
        let d = tempfile::tempdir().unwrap();
        let host = FakeHost::new(d.path());
        let m = "/sys/fs/cgroup";
        assert_eq!(
            cgroup2_procs_of(&host, m, 7),
            "/sys/fs/cgroup/cgroup.procs",
            "unknown: the root"
        );
        put(
            d.path(),
            "proc/7/cgroup",
            "12:cpuset:/\n0::/user.slice/user-1000.slice/session-2.scope\n",
        );
        assert_eq!(
            cgroup2_procs_of(&host, m, 7),
            "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope/cgroup.procs"
        );
        put(d.path(), "proc/7/cgroup", "0::/\n");
        assert_eq!(cgroup2_procs_of(&host, m, 7), "/sys/fs/cgroup/cgroup.procs");
    }
}
