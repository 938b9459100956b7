//! What a case cost: the CPU time (user, system), page faults and context switches of
//! rtlab's measuring threads over their measured window, the CPU time of every thread of the
//! process by name group (the middleware's own threads: Fast DDS `dds.*`, Cyclone DDS `recv`,
//! `dq.*`, `tev`, Zenoh's and tokio's workers, iceoryx2, rcl), and the process's max RSS.
//!
//! Contract: pure data and arithmetic; the readings come from rtlab-sys (`usage`), taken by
//! each measuring thread right before its loop and right after it, never inside it. Every
//! figure here is documented in `docs/result-schema.md` ("cost") and `docs/words.md`.

use serde::{Deserialize, Serialize};

/// The counters of one thread at one instant (getrusage(RUSAGE_THREAD), or a thread's
/// `/proc/PID/task/TID/stat` and `status`), or their difference over a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// CPU time in user mode, ns.
    pub user_ns: i64,
    /// CPU time in the kernel on the thread's behalf, ns.
    pub system_ns: i64,
    /// Page faults served without I/O.
    pub minor_faults: u64,
    /// Page faults that needed I/O.
    pub major_faults: u64,
    /// The thread gave the CPU up (it blocked or slept).
    pub voluntary_switches: u64,
    /// The thread was preempted.
    pub involuntary_switches: u64,
}

impl Usage {
    /// `self - earlier`, each counter never below 0.
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            user_ns: (self.user_ns - earlier.user_ns).max(0),
            system_ns: (self.system_ns - earlier.system_ns).max(0),
            minor_faults: self.minor_faults.saturating_sub(earlier.minor_faults),
            major_faults: self.major_faults.saturating_sub(earlier.major_faults),
            voluntary_switches: self.voluntary_switches.saturating_sub(earlier.voluntary_switches),
            involuntary_switches: self
                .involuntary_switches
                .saturating_sub(earlier.involuntary_switches),
        }
    }

    /// Add `o` to `self`.
    pub fn add(&mut self, o: &Usage) {
        self.user_ns += o.user_ns;
        self.system_ns += o.system_ns;
        self.minor_faults += o.minor_faults;
        self.major_faults += o.major_faults;
        self.voluntary_switches += o.voluntary_switches;
        self.involuntary_switches += o.involuntary_switches;
    }

    /// User + system, ns.
    pub fn cpu_ns(&self) -> i64 {
        self.user_ns + self.system_ns
    }
}

/// One of rtlab's measuring threads over its measured window (its own getrusage right
/// before its loop and right after it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeasuringThread {
    /// Whose thread: `rtlab` (this process), a role process (`sub0`, `pong0`), `apart`,
    /// `agent` (far).
    pub process: String,
    /// The thread's name (`rtlab-timer0`, `rtlab-ping`, `rtlab-pub`, `rtlab-sub0`...).
    pub thread: String,
    /// Its scheduling policy in the window (`fifo`, `rr`, `other`...).
    pub policy: String,
    /// Its real-time priority (0 at a normal policy).
    #[serde(default)]
    pub priority: i32,
    /// Its window: from right before its loop to right after it, ns.
    pub window_ns: i64,
    /// What it used in the window.
    pub usage: Usage,
}

impl MeasuringThread {
    /// A real-time policy (FIFO or RR): its page faults and involuntary switches are warnings.
    pub fn realtime(&self) -> bool {
        matches!(self.policy.as_str(), "fifo" | "rr")
    }

    /// `fifo 80`, `other`.
    pub fn sched(&self) -> String {
        sched_label(&self.policy, self.priority)
    }
}

/// A policy and priority as the reports say them: `fifo 80`, `other`.
pub fn sched_label(policy: &str, priority: i32) -> String {
    if matches!(policy, "fifo" | "rr") || priority != 0 {
        format!("{policy} {priority}")
    } else {
        policy.to_string()
    }
}

/// Threads of a group at one policy and priority, as the window's end found them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedShare {
    /// `fifo`, `rr`, `other`, `batch`, `idle`, `deadline`.
    pub policy: String,
    /// The real-time priority (0 at a normal policy).
    pub priority: i32,
    pub threads: u32,
}

impl SchedShare {
    /// A real-time policy (FIFO or RR).
    pub fn realtime(&self) -> bool {
        matches!(self.policy.as_str(), "fifo" | "rr")
    }
}

/// The threads of one process whose names fall in one group (`dds.udp.*`), over the window.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadGroup {
    /// Whose threads: `rtlab` (this process), or a role process (`sub0`, `pong`...).
    pub process: String,
    /// The group's name: a thread name, with its trailing number or third dotted part as `*`
    /// ([`group_name`]); `other` gathers what is past [`MAX_GROUPS`].
    pub group: String,
    /// Threads of the group seen in the window.
    pub threads: u32,
    /// Of them, born during the window (counted from their birth).
    pub born: u32,
    /// CPU time in user mode, ns (the kernel's clock ticks: 1/USER_HZ resolution).
    pub user_ns: i64,
    /// CPU time in the kernel, ns (the same resolution).
    pub system_ns: i64,
    pub minor_faults: u64,
    pub major_faults: u64,
    /// Its threads by policy and priority at the window's end, most threads first (empty:
    /// not read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sched: Vec<SchedShare>,
}

impl ThreadGroup {
    /// User + system, ns.
    pub fn cpu_ns(&self) -> i64 {
        self.user_ns + self.system_ns
    }

    /// Its threads' policies: `fifo 75`, or `fifo 75 x2; other x2` when they differ (empty:
    /// not read).
    pub fn sched_text(&self) -> String {
        match self.sched.as_slice() {
            [one] => sched_label(&one.policy, one.priority),
            many => many
                .iter()
                .map(|s| format!("{} x{}", sched_label(&s.policy, s.priority), s.threads))
                .collect::<Vec<_>>()
                .join("; "),
        }
    }

    fn count_sched(&mut self, policy: &str, priority: i32, threads: u32) {
        match self.sched.iter_mut().find(|s| s.policy == policy && s.priority == priority) {
            Some(s) => s.threads += threads,
            None => self.sched.push(SchedShare { policy: policy.into(), priority, threads }),
        }
        self.sched.sort_by(|a, b| {
            b.threads
                .cmp(&a.threads)
                .then(b.priority.cmp(&a.priority))
                .then(a.policy.cmp(&b.policy))
        });
    }
}

/// At most this many groups per process: the rest are summed in `other`.
pub const MAX_GROUPS: usize = 24;

/// One measured window of a case: a probe's measurement, or one case of a pub/sub sweep.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostWindow {
    /// The window's name: the probe (`timer`, `cyclic`, `udp`, `observe`, `noise`), or the pub/sub
    /// case's stream prefix (`p64_r100hz_s1`).
    pub name: String,
    /// From the first measuring thread's start to the last one's end, ns.
    pub window_ns: i64,
    /// Messages moved in the window (pub/sub: published; udp: requests sent), when it has
    /// messages.
    pub messages: Option<u64>,
    pub measuring: Vec<MeasuringThread>,
    /// Every thread of the process by name group, over the same window (empty when
    /// /proc could not be read); role processes' threads under their role's name.
    pub groups: Vec<ThreadGroup>,
    /// The max RSS of the role processes that measured in the window.
    #[serde(default)]
    pub processes: Vec<ProcessMemory>,
}

/// A role process's max RSS (`VmHWM`), read by itself at its end.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessMemory {
    /// Its role (`sub0`, `pong1`).
    pub process: String,
    pub max_rss_kib: u64,
}

impl CostWindow {
    /// Add a role process's window (the same case's, measured there) to this one.
    pub fn merge(&mut self, o: CostWindow) {
        self.measuring.extend(o.measuring);
        self.groups.extend(o.groups);
        self.processes.extend(o.processes);
    }
}

impl CostWindow {
    /// The measuring threads' usage, summed.
    pub fn measuring_total(&self) -> Usage {
        let mut u = Usage::default();
        for t in &self.measuring {
            u.add(&t.usage);
        }
        u
    }

    /// CPU of the whole side (user, system), ns: every thread's group where they were read,
    /// else the measuring threads alone.
    pub fn cpu_ns(&self) -> (i64, i64) {
        if self.groups.is_empty() {
            let u = self.measuring_total();
            (u.user_ns, u.system_ns)
        } else {
            (
                self.groups.iter().map(|g| g.user_ns).sum(),
                self.groups.iter().map(|g| g.system_ns).sum(),
            )
        }
    }

    /// CPU per message, ns: the side's CPU (user + system) / messages.
    pub fn cpu_per_message_ns(&self) -> Option<i64> {
        let m = self.messages.filter(|m| *m > 0)?;
        let (u, s) = self.cpu_ns();
        Some((u + s) / m as i64)
    }

    /// The side's CPU in CPUs (CPU time / window): 1.0 is one CPU busy all the window.
    pub fn cpus(&self) -> Option<f64> {
        (self.window_ns > 0).then(|| {
            let (u, s) = self.cpu_ns();
            (u + s) as f64 / self.window_ns as f64
        })
    }

    /// The middleware's share: the groups that are not rtlab's own threads.
    pub fn middleware_cpu_ns(&self) -> i64 {
        self.groups.iter().filter(|g| !g.group.starts_with("rtlab")).map(|g| g.cpu_ns()).sum()
    }
}

/// What a case cost (the result document's `cost`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cost {
    /// The measured windows, in order.
    pub windows: Vec<CostWindow>,
    /// The rtlab process's max RSS (VmHWM), KiB, at the case's end.
    pub max_rss_kib: Option<u64>,
    /// What could not be counted, and why.
    pub notes: Vec<String>,
    /// The far side's windows, as its agent reported them (its reflector, with the agent's
    /// threads by group; its role processes): the same figures for that host. Not in the
    /// near side's totals.
    #[serde(default)]
    pub far: Vec<CostWindow>,
    /// The resident memory of rtlab and of a far agent on this machine, sampled while the
    /// case measured (a long case's memory must stay flat).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rss: Vec<RssSample>,
}

/// A process's resident memory (`VmRSS`) at one moment of a case.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RssSample {
    /// `rtlab` (this process) or `agent` (the far side's agent, when it runs here).
    pub process: String,
    /// From the start of the measurement, ms.
    pub at_ms: i64,
    pub rss_kib: u64,
}

impl Cost {
    /// `process`'s largest resident memory while the case measured (its VmRSS samples), KiB;
    /// None without samples. Unlike [`Cost::max_rss_kib`], the high-water mark of the whole
    /// process since it started, this is the case's own.
    pub fn case_rss_kib(&self, process: &str) -> Option<u64> {
        self.rss.iter().filter(|s| s.process == process).map(|s| s.rss_kib).max()
    }
}

/// At most this many RSS samples per process in a case: a longer case keeps every other
/// one and samples half as often from then on.
pub const MAX_RSS_SAMPLES: usize = 2048;

/// How a process's memory went over a case: (first sample after the first minute, or the
/// first sample; the largest after it), KiB.
pub fn rss_growth(samples: &[RssSample], process: &str) -> Option<(u64, u64)> {
    let mine: Vec<&RssSample> = samples.iter().filter(|s| s.process == process).collect();
    let from = mine.iter().position(|s| s.at_ms >= 60_000).unwrap_or(0);
    let base = mine.get(from)?.rss_kib;
    let max = mine[from..].iter().map(|s| s.rss_kib).max()?;
    Some((base, max))
}

/// What a far side may report at most (a bad or lying agent is refused, not trusted).
pub const FAR_LIMITS: (usize, usize) = (64, 256);

impl CostWindow {
    /// A far side's window as it must be: a name, a window >= 0, at most
    /// [`FAR_LIMITS`].1 measuring threads and groups, no negative CPU time.
    pub fn check(&self) -> Result<(), String> {
        let bad = |why: &str| Err(format!("the far side's cost window {:?}: {why}", self.name));
        if self.name.is_empty() || self.name.len() > 200 {
            return bad("no name, or a name longer than 200 bytes");
        }
        if self.window_ns < 0 {
            return bad("a negative window");
        }
        if self.measuring.len() > FAR_LIMITS.1
            || self.groups.len() > FAR_LIMITS.1
            || self.processes.len() > FAR_LIMITS.1
            || self.groups.iter().any(|g| g.sched.len() > g.threads.max(1) as usize)
        {
            return bad("more threads, groups or processes than any case has");
        }
        let neg = self
            .measuring
            .iter()
            .any(|t| t.usage.user_ns < 0 || t.usage.system_ns < 0 || t.window_ns < 0)
            || self.groups.iter().any(|g| g.user_ns < 0 || g.system_ns < 0);
        if neg {
            return bad("a negative CPU time");
        }
        Ok(())
    }
}

impl Cost {
    /// Every measuring thread's usage, summed over the windows.
    pub fn measuring_total(&self) -> Usage {
        let mut u = Usage::default();
        for w in &self.windows {
            u.add(&w.measuring_total());
        }
        u
    }

    /// The side's CPU over every window (user, system), ns.
    pub fn cpu_ns(&self) -> (i64, i64) {
        self.windows.iter().map(|w| w.cpu_ns()).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    }

    /// The windows' length, summed, ns.
    pub fn window_ns(&self) -> i64 {
        self.windows.iter().map(|w| w.window_ns).sum()
    }

    /// CPU per message over every window that has messages, ns.
    pub fn cpu_per_message_ns(&self) -> Option<i64> {
        let with: Vec<&CostWindow> =
            self.windows.iter().filter(|w| w.messages.unwrap_or(0) > 0).collect();
        let m: u64 = with.iter().filter_map(|w| w.messages).sum();
        if m == 0 {
            return None;
        }
        let cpu: i64 = with.iter().map(|w| w.cpu_ns().0 + w.cpu_ns().1).sum();
        Some(cpu / m as i64)
    }

    /// The window of a pub/sub case by its name.
    pub fn window(&self, name: &str) -> Option<&CostWindow> {
        self.windows.iter().find(|w| w.name == name)
    }

    /// The real-time measuring threads that page-faulted or were preempted in their
    /// window: (thread, minor + major faults, involuntary switches).
    pub fn realtime_disturbed(&self) -> Vec<(String, u64, u64)> {
        let mut v = Vec::new();
        for w in &self.windows {
            for t in w.measuring.iter().filter(|t| t.realtime()) {
                let faults = t.usage.minor_faults + t.usage.major_faults;
                if faults > 0 || t.usage.involuntary_switches > 0 {
                    let thread = if t.process == "rtlab" || t.process.is_empty() {
                        t.thread.clone()
                    } else {
                        format!("{}:{}", t.process, t.thread)
                    };
                    let name = if self.windows.len() > 1 {
                        format!("{} {thread}", w.name)
                    } else {
                        thread
                    };
                    v.push((name, faults, t.usage.involuntary_switches));
                }
            }
        }
        v
    }
}

/// The middleware's receive threads by group name, and whose they are: Fast DDS's
/// `dds.udp.<port>` and `dds.shm.<port>`, Cyclone DDS's `recv`, `recvUC`, `recvMC`.
pub fn receive_threads_of(group: &str) -> Option<&'static str> {
    if group.starts_with("dds.udp.") || group.starts_with("dds.shm.") {
        Some("Fast DDS")
    } else if group.starts_with("recv") {
        Some("Cyclone DDS")
    } else {
        None
    }
}

impl Cost {
    /// The middleware's receive threads that ran at a normal policy in a case whose
    /// measuring threads are real-time (what the case's profile promised), each group once
    /// (near and far side): (`process:group`, threads at a normal policy, threads, whose).
    pub fn receive_threads_not_realtime(&self) -> Vec<(String, u32, u32, &'static str)> {
        let windows: Vec<&CostWindow> = self.windows.iter().chain(&self.far).collect();
        if !windows.iter().any(|w| w.measuring.iter().any(|t| t.realtime())) {
            return Vec::new();
        }
        let mut v: Vec<(String, u32, u32, &'static str)> = Vec::new();
        for g in windows.iter().flat_map(|w| &w.groups) {
            let Some(whose) = receive_threads_of(&g.group) else { continue };
            let normal: u32 = g.sched.iter().filter(|s| !s.realtime()).map(|s| s.threads).sum();
            let who = format!("{}:{}", g.process, g.group);
            if normal > 0 && !v.iter().any(|(w, ..)| *w == who) {
                v.push((who, normal, g.threads, whose));
            }
        }
        v
    }
}

/// The group of a thread name: up to its second dotted part, with a third part or a trailing
/// number as `*` (`dds.udp.7400` -> `dds.udp.*`, `rtlab-timer0` -> `rtlab-timer*`,
/// `rx-3` -> `rx-*`, `dq.builtins` and `recv` kept).
pub fn group_name(comm: &str) -> String {
    let parts: Vec<&str> = comm.splitn(3, '.').collect();
    if parts.len() == 3 && !parts[0].is_empty() && !parts[1].is_empty() {
        return format!("{}.{}.*", parts[0], parts[1]);
    }
    let trimmed = comm.trim_end_matches(|c: char| c.is_ascii_digit());
    if trimmed.len() < comm.len() && !trimmed.is_empty() {
        let base = trimmed.trim_end_matches(['-', '_', '.', '#', ':', '/']);
        let sep = &trimmed[base.len()..];
        if base.is_empty() {
            return comm.to_string();
        }
        return format!("{base}{sep}*");
    }
    comm.to_string()
}

/// One thread as /proc showed it at the window's start or end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskSnapshot {
    pub tid: i32,
    pub comm: String,
    pub usage: Usage,
    /// Its policy and real-time priority (empty policy: not read).
    pub policy: String,
    pub priority: i32,
}

/// A process's threads by group over a window, from its snapshots at the start and the end:
/// a thread seen at both counts the difference; one born in the window counts from its birth;
/// one gone by the end is not counted (its time is unknown). At most [`MAX_GROUPS`] groups
/// (by CPU), the rest in `other`; ordered by CPU, most first.
pub fn groups_between(
    process: &str,
    start: &[TaskSnapshot],
    end: &[TaskSnapshot],
) -> Vec<ThreadGroup> {
    let mut by: std::collections::BTreeMap<String, ThreadGroup> = Default::default();
    for e in end {
        let (u, born) = match start.iter().find(|s| s.tid == e.tid) {
            Some(s) => (e.usage.since(&s.usage), false),
            None => (e.usage, true),
        };
        let name = group_name(&e.comm);
        let g = by.entry(name.clone()).or_insert_with(|| ThreadGroup {
            process: process.into(),
            group: name,
            ..Default::default()
        });
        g.threads += 1;
        g.born += born as u32;
        g.user_ns += u.user_ns;
        g.system_ns += u.system_ns;
        g.minor_faults += u.minor_faults;
        g.major_faults += u.major_faults;
        if !e.policy.is_empty() {
            g.count_sched(&e.policy, e.priority, 1);
        }
    }
    let mut v: Vec<ThreadGroup> = by.into_values().collect();
    v.sort_by(|a, b| b.cpu_ns().cmp(&a.cpu_ns()).then(a.group.cmp(&b.group)));
    if v.len() > MAX_GROUPS {
        let rest = v.split_off(MAX_GROUPS - 1);
        let mut o =
            ThreadGroup { process: process.into(), group: "other".into(), ..Default::default() };
        for g in rest {
            o.threads += g.threads;
            o.born += g.born;
            o.user_ns += g.user_ns;
            o.system_ns += g.system_ns;
            o.minor_faults += g.minor_faults;
            o.major_faults += g.major_faults;
            for s in &g.sched {
                o.count_sched(&s.policy, s.priority, s.threads);
            }
        }
        v.push(o);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_names_group_sensibly() {
        assert_eq!(group_name("dds.udp.7400"), "dds.udp.*");
        assert_eq!(group_name("dds.ev.0"), "dds.ev.*");
        assert_eq!(group_name("dq.builtins"), "dq.builtins");
        assert_eq!(group_name("recv"), "recv");
        assert_eq!(group_name("rtlab-timer0"), "rtlab-timer*");
        assert_eq!(group_name("rtlab-sub12"), "rtlab-sub*");
        assert_eq!(group_name("rx-3"), "rx-*");
        assert_eq!(group_name("tokio-runtime-w"), "tokio-runtime-w");
        assert_eq!(group_name("1234"), "1234");
    }

    fn snap(tid: i32, comm: &str, user_ms: i64) -> TaskSnapshot {
        TaskSnapshot {
            tid,
            comm: comm.into(),
            usage: Usage { user_ns: user_ms * 1_000_000, ..Default::default() },
            policy: "other".into(),
            priority: 0,
        }
    }

    #[test]
    fn a_group_says_its_threads_policies_at_the_end() {
        let at = |tid, comm: &str, policy: &str, priority| TaskSnapshot {
            policy: policy.into(),
            priority,
            ..snap(tid, comm, 1)
        };
        let end = vec![
            at(1, "dds.udp.7400", "fifo", 75),
            at(2, "dds.udp.7401", "other", 0),
            at(3, "dds.udp.7410", "fifo", 75),
            at(4, "rtlab-pub", "fifo", 80),
            TaskSnapshot { policy: String::new(), ..snap(5, "gc", 1) },
        ];
        let g = groups_between("rtlab", &[], &end);
        let by = |n: &str| g.iter().find(|g| g.group == n).unwrap();
        assert_eq!(by("dds.udp.*").sched_text(), "fifo 75 x2; other x1");
        assert_eq!(by("rtlab-pub").sched_text(), "fifo 80");
        assert_eq!(by("gc").sched_text(), "", "not read: nothing said");
        assert!(by("gc").sched.is_empty());
        // stored without the field when it was not read, and read back from older documents
        let j = serde_json::to_value(by("gc")).unwrap();
        assert!(j.get("sched").is_none(), "{j}");
        let back: ThreadGroup = serde_json::from_value(j).unwrap();
        assert_eq!(&back, by("gc"));
    }

    #[test]
    fn groups_count_differences_and_births_and_stay_bounded() {
        let start =
            vec![snap(1, "rtlab", 100), snap(2, "dds.udp.7400", 5), snap(3, "dds.udp.7401", 0)];
        let end = vec![
            snap(1, "rtlab", 110),
            snap(2, "dds.udp.7400", 25),
            snap(3, "dds.udp.7401", 10),
            snap(4, "dds.ev.0", 7),
        ];
        let g = groups_between("rtlab", &start, &end);
        assert_eq!(g[0].group, "dds.udp.*");
        assert_eq!((g[0].threads, g[0].born, g[0].user_ns), (2, 0, 30_000_000));
        let ev = g.iter().find(|g| g.group == "dds.ev.*").unwrap();
        assert_eq!((ev.born, ev.user_ns), (1, 7_000_000));
        let many: Vec<TaskSnapshot> =
            (0..100).map(|i| snap(i, &format!("t{}x", i), i as i64)).collect();
        let g = groups_between("rtlab", &[], &many);
        assert_eq!(g.len(), MAX_GROUPS);
        assert_eq!(g.last().unwrap().group, "other");
        assert_eq!(g.iter().map(|g| g.threads).sum::<u32>(), 100);
    }

    #[test]
    fn a_far_window_that_no_case_has_is_refused() {
        let good = CostWindow { name: "reflect".into(), window_ns: 5, ..Default::default() };
        assert!(good.check().is_ok());
        let bad = |f: &dyn Fn(&mut CostWindow)| {
            let mut w = good.clone();
            f(&mut w);
            w.check().unwrap_err()
        };
        assert!(bad(&|w| w.name.clear()).contains("no name"));
        assert!(bad(&|w| w.window_ns = -1).contains("negative window"));
        assert!(bad(&|w| w.groups = vec![ThreadGroup::default(); 257]).contains("more threads"));
        let many =
            ThreadGroup { threads: 1, sched: vec![SchedShare::default(); 2], ..Default::default() };
        assert!(
            bad(&|w| w.groups = vec![many.clone()]).contains("more threads"),
            "more policies than threads"
        );
        let e = bad(&|w| {
            w.measuring = vec![MeasuringThread {
                usage: Usage { user_ns: -5, ..Default::default() },
                ..Default::default()
            }]
        });
        assert!(e.contains("negative CPU") && e.contains("\"reflect\""), "{e}");
    }

    #[test]
    fn cpu_per_message_and_realtime_disturbances() {
        let w = CostWindow {
            name: "p64".into(),
            window_ns: 1_000_000_000,
            messages: Some(1000),
            measuring: vec![MeasuringThread {
                process: "rtlab".into(),
                thread: "rtlab-pub".into(),
                policy: "fifo".into(),
                priority: 80,
                window_ns: 1_000_000_000,
                usage: Usage {
                    user_ns: 10_000_000,
                    minor_faults: 3,
                    involuntary_switches: 2,
                    ..Default::default()
                },
            }],
            groups: vec![ThreadGroup {
                group: "recv".into(),
                user_ns: 20_000_000,
                system_ns: 10_000_000,
                ..Default::default()
            }],
            processes: vec![],
        };
        assert_eq!(w.cpu_per_message_ns(), Some(30_000));
        assert_eq!(w.middleware_cpu_ns(), 30_000_000);
        let c = Cost { windows: vec![w], ..Default::default() };
        assert_eq!(c.realtime_disturbed(), vec![("rtlab-pub".to_string(), 3, 2)]);
        assert_eq!(c.cpu_per_message_ns(), Some(30_000));
    }
}
