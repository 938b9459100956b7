//! What a profile is ([`Profile`]): its fields, the built-in ones, user profiles from a TOML
//! file, finding one by name or path ([`NamedProfile`]), and its errors.

use super::step::resolve_cpus;
use rtlab_core::error::Missing;
use rtlab_core::rt::{Policy, RtSettings};
use rtlab_host::journal::JournalError;
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
