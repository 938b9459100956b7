//! Real-time profiles (S1's no-rt / rt-normal / rt-affinities / rt-isolation, S3's
//! rt-kthreads, and user profiles from a TOML file) and the plan that applies one to a
//! machine: a list of steps, each a set of journaled [`crate::session::Action`]s or a skip with its reason.
//!
//! Contract: planning only reads; what does not apply on this machine (no cpufreq, IRQs not
//! threaded, no VLAN, no cpuset controller, a qdisc the kernel lacks) becomes a skip naming why.
//! Interfaces: /proc/irq/N/smp_affinity (Documentation/core-api/irq/irq-affinity.rst),
//! cgroup-v1 cpusets (Documentation/admin-guide/cgroup-v1/cpusets.rst), cgroup-v2 cpuset
//! partitions (Documentation/admin-guide/cgroup-v2.rst, "Cpuset Interface Files"), tc-htb(8),
//! tc-mqprio(8), sched_setscheduler(2).
//!
//! The rooms: the profiles, their registry and their files here; the plan and its steps in
//! `plan.rs` (cgroups and cpusets in `cgroup.rs`); applying a plan through a journaled
//! session, and what is still in force, in `apply.rs`.

mod apply;
mod cgroup;
mod plan;

pub use apply::{apply_named, apply_profile, apply_step, in_force, StepOutcome};
pub use cgroup::{cgroup2_mount, rt_cgroup_step};
pub use plan::{default_nic, nic_irqs, plan, threads_of, Report, Step, Target};

use crate::journal::JournalError;
use plan::resolve_cpus;
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
    /// Root qdisc of the NIC, first the kernel takes: `mqprio`, `htb`, `pfifo_fast`, `etf`
    /// (launch times for `udp ping --txtime`), `taprio` (an 802.1Qbv window for SKB
    /// priority 4).
    pub qdisc: Option<Vec<String>>,
    /// etf's delta: how long before its launch time a datagram is released to the driver
    /// (default 200). It must cover the machine's wake-up latency: a datagram released after
    /// its time is dropped and reported as a launch error.
    pub etf_delta_us: Option<i64>,
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
        if let Some(k) = q
            .iter()
            .find(|k| !["mqprio", "htb", "pfifo_fast", "etf", "taprio"].contains(&k.as_str()))
        {
            return Err(bad(format!(
                "qdisc: \"{k}\" is not one of mqprio, htb, pfifo_fast, etf, taprio"
            )));
        }
    }
    if let Some(v) = p.etf_delta_us {
        if !(1..=1_000_000).contains(&v) {
            return Err(bad(format!("etf_delta_us = {v}: must be 1 to 1000000 (1 s)")));
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
        etf_delta_us: over.etf_delta_us.or(base.etf_delta_us),
        vlan_egress_map: over.vlan_egress_map.or(base.vlan_egress_map),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn etf_releases_each_datagram_the_profiles_delta_before_its_time() {
        let d = tempfile::tempdir().unwrap();
        let f = "[profile.slow]\nqdisc = [\"etf\"]\netf_delta_us = 5000\n\
                 [profile.default]\nqdisc = [\"etf\"]\n";
        put(d.path(), "p.toml", f);
        let ps = load_file(&d.path().join("p.toml")).unwrap();
        let host = crate::host::FakeHost::new(d.path());
        let t = Target { nic: Some("eth0".into()), ..Default::default() };
        let etf = |p: &Profile| {
            let steps = plan(p, &t, &host);
            let a: Vec<String> = steps
                .iter()
                .flat_map(|s| s.alternatives.iter().flat_map(|a| a.1.iter()))
                .map(|a| a.describe())
                .collect();
            let label = steps.iter().flat_map(|s| &s.alternatives).map(|a| a.0.clone()).collect();
            (a.into_iter().find(|a| a.contains(" etf ")).unwrap(), label)
        };
        let (cmd, label): (String, Vec<String>) = etf(&ps["slow"]);
        assert!(cmd.contains("etf clockid CLOCK_TAI delta 5000000"), "{cmd}");
        assert!(label[0].contains("released 5000 us before its time"), "{label:?}");
        let (cmd, _) = etf(&ps["default"]);
        assert!(cmd.contains("delta 200000"), "{cmd}");
        for bad in ["0", "-5", "1000001"] {
            put(d.path(), "bad.toml", &format!("[profile.x]\netf_delta_us = {bad}\n"));
            let e = load_file(&d.path().join("bad.toml")).unwrap_err().to_string();
            assert!(e.contains(&format!("etf_delta_us = {bad}: must be 1 to 1000000")), "{e}");
        }
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
}
