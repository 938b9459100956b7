//! What surrounds a case's measurement: its load and its profile (system side).
//!
//! Contract: the load starts first (so that the profile treats it as "every other task":
//! moved off an isolated CPU, never given the application's priority), then the profile is
//! applied through a journaled session; [`CaseSetup::finish`] (and Drop) restores the
//! profile, then stops the load — also on error and on panic. Every load child dies with
//! rtlab (PR_SET_PDEATHSIG) and carries a time limit of its own (the case's planned time
//! plus a margin), so a kill -9 of rtlab leaves no load burning.

use crate::error::LabError;
use crate::scenario::LoadSpec;
use rtlab_engines::netns::NetnsPair;
use rtlab_host::session::Session;
use rtlab_load::{Direction, LoadConfig, RunningLoad, TrafficConfig, TrafficSide};
use rtlab_tune::profile::NamedProfile;
use std::collections::BTreeMap;
use std::time::Duration;

/// The iperf3 port used by traffic loads.
const IPERF_PORT: u16 = 5299;

/// The load configs of a case's load (several for a combined load). Traffic goes through
/// `pair` when there is one (server in side b), else over loopback.
pub fn load_configs(
    spec: &LoadSpec,
    pair: Option<&NetnsPair>,
    online_cpus: usize,
) -> Vec<LoadConfig> {
    match spec {
        LoadSpec::Idle => vec![],
        LoadSpec::Stress { cpu, cpu_method, cpu_load, vm, io, hdd } => vec![LoadConfig::Stress {
            cpu: if *cpu == 0 && *vm == 0 && *io == 0 && *hdd == 0 {
                online_cpus as u32
            } else {
                *cpu
            },
            vm: *vm,
            io: *io,
            hdd: *hdd,
            cpu_method: cpu_method.clone(),
            cpu_load: *cpu_load,
        }],
        LoadSpec::Traffic { bits_per_second, direction, protocol } => {
            vec![LoadConfig::Traffic(TrafficConfig {
                side: Default::default(),
                protocol: protocol.clone(),
                bitrate_bps: *bits_per_second,
                direction: if direction == "rx" { Direction::Rx } else { Direction::Tx },
                netns: pair.map(|p| p.ns_b.clone()),
                client_netns: pair.map(|p| p.ns_a.clone()),
                peer: pair.map(|p| p.ip_b.clone()).unwrap_or_else(|| "127.0.0.1".into()),
                port: IPERF_PORT,
            })]
        }
        LoadSpec::Command { argv } => vec![LoadConfig::Command { argv: argv.clone() }],
        LoadSpec::Combined { parts } => {
            parts.iter().flat_map(|p| load_configs(p, pair, online_cpus)).collect()
        }
    }
}

/// A case's load split between this host and a far host at `far_addr` (another computer):
/// traffic runs its iperf3 server there and its client here, so it crosses the link the
/// probe measures; the other loads stay here.
pub fn far_load_configs(
    spec: &LoadSpec,
    far_addr: &str,
    near_netns: Option<&str>,
    online_cpus: usize,
) -> (Vec<LoadConfig>, Vec<LoadConfig>) {
    let mut near = Vec::new();
    let mut far = Vec::new();
    for cfg in load_configs(spec, None, online_cpus) {
        match cfg {
            LoadConfig::Traffic(t) => {
                let t = TrafficConfig {
                    peer: far_addr.to_string(),
                    netns: None,
                    // the client where the probe's near side is, so both cross the link
                    client_netns: near_netns.map(str::to_string),
                    ..t
                };
                far.push(LoadConfig::Traffic(TrafficConfig {
                    side: TrafficSide::Server,
                    ..t.clone()
                }));
                near.push(LoadConfig::Traffic(TrafficConfig { side: TrafficSide::Client, ..t }));
            }
            other => near.push(other),
        }
    }
    (near, far)
}

/// A case's load and profile, undone by `finish` or on drop.
#[derive(Default)]
pub struct CaseSetup {
    loads: Vec<RunningLoad>,
    session: Option<Session<'static>>,
    /// This process's threads and their policies before the case: the case's real-time
    /// policies are its own, put back before its profile (a task moved out of a child cgroup
    /// for FIFO cannot go back while one of its threads is still real-time).
    threads: rtlab_sys::tasks::OwnThreads,
    pub load_report: Option<serde_json::Value>,
    pub profile_report: Option<serde_json::Value>,
}

impl CaseSetup {
    /// Each running load's name and process ids (for [`super::watch::LoadWatch`]).
    pub fn load_pids(&self) -> Vec<(String, Vec<u32>)> {
        self.loads.iter().map(|l| (l.name().to_string(), l.pids())).collect()
    }

    /// Start the load (through `pair` when given; its tools limited to `planned` plus a
    /// margin), then apply `profile` for `pids`.
    pub fn start(
        spec: &LoadSpec,
        pair: Option<&NetnsPair>,
        profile: &NamedProfile,
        rt_cpu: Option<usize>,
        pids: Vec<i32>,
        planned: Duration,
    ) -> Result<CaseSetup, LabError> {
        let online = crate::host::online_cpus().0.len();
        Self::start_loads(load_configs(spec, pair, online), profile, rt_cpu, pids, planned)
    }

    /// Start these loads, then apply `profile` for `pids`.
    pub fn start_loads(
        loads: Vec<LoadConfig>,
        profile: &NamedProfile,
        rt_cpu: Option<usize>,
        pids: Vec<i32>,
        planned: Duration,
    ) -> Result<CaseSetup, LabError> {
        let mut s = CaseSetup::default();
        s.threads = rtlab_sys::tasks::OwnThreads::now();
        let limit = rtlab_load::max_duration_for(planned);
        for cfg in loads {
            let mut l = RunningLoad::start(&cfg, Some(limit)).map_err(load_error)?;
            // a load that dies at once (a bad option, a port in use) is an error, not a quiet idle case
            std::thread::sleep(Duration::from_millis(300));
            l.check_alive().map_err(load_error)?;
            s.loads.push(l);
        }
        // the supervisor of the case (when there is one) keeps its policy and CPUs
        let keep = super::marks::supervisor_tid().into_iter().collect();
        let target = rtlab_tune::profile::Target { rt_cpu, nic: None, netns: None, pids, keep };
        let journal = std::path::Path::new(rtlab_host::journal::DEFAULT_JOURNAL);
        // what this rtlab's previous case could not put back (warned there) is tried again
        // now that its threads are back to their policies; what still fails refuses the case
        let own = std::process::id() as i32;
        if rtlab_host::journal::pending(journal).is_some_and(|p| p.pid == own) {
            let _ = rtlab_host::journal::restore_journal(crate::host::host(), journal);
        }
        let user = BTreeMap::from([(profile.name.clone(), profile.profile.clone())]);
        let (session, outcomes) = rtlab_tune::profile::apply_profile(
            crate::host::host(),
            &profile.name,
            &user,
            &target,
            journal,
        )
        .map_err(|e| LabError::Failed(format!("profile {}: {e}", profile.name)))?;
        s.session = Some(session);
        s.profile_report = Some(serde_json::json!({
            "profile": profile.name,
            "steps": outcomes.iter().map(|o| serde_json::json!({ "what": o.what, "status": o.status, "detail": o.detail })).collect::<Vec<_>>(),
        }));
        Ok(s)
    }

    /// The measurement is over: put the profile back, stop the load, keep what it achieved.
    pub fn finish(&mut self) {
        if super::marks::abandoned() {
            // left behind by the supervisor, which put the machine back itself (the journal
            // may hold a later case's changes by now): touch nothing
            if let Some(s) = self.session.take() {
                std::mem::forget(s);
            }
            for l in self.loads.drain(..) {
                std::mem::forget(l);
            }
            return;
        }
        if let Some(mut session) = self.session.take() {
            let (_, refused) = rtlab_sys::tasks::restore_own_threads(&self.threads);
            let r = session.restore();
            if let Some(p) = self.profile_report.as_mut() {
                p["restored"] = serde_json::json!(r.is_clean());
                let mut failed: Vec<String> =
                    r.failed.iter().map(|(what, e)| format!("{what}: {e}")).collect();
                failed.extend(refused.iter().map(|(tid, e)| {
                    format!("thread {tid}: its policy before the case could not be put back: {e}")
                }));
                if !failed.is_empty() {
                    p["restore_failed"] = serde_json::json!(failed);
                }
            }
        }
        let reports: Vec<_> = self.loads.drain(..).map(|l| l.stop()).collect();
        if !reports.is_empty() {
            self.load_report = serde_json::to_value(&reports).ok();
        }
    }
}

impl CaseSetup {
    /// What the case's profile could not put back, as a warning of the case (the journal
    /// keeps it: `tune show` lists it, the next case or `tune restore` tries again).
    pub fn restore_warning(&self) -> Option<rtlab_core::schema::Warning> {
        let p = self.profile_report.as_ref()?;
        let failed = p["restore_failed"].as_array()?;
        let list: Vec<&str> = failed.iter().filter_map(|f| f.as_str()).collect();
        Some(rtlab_core::schema::Warning {
            code: "profile-not-restored".into(),
            message: format!(
                "profile {}: not everything was put back after the case: {} (`rtlab tune show` lists what is still in force; `rtlab tune restore` tries again)",
                p["profile"].as_str().unwrap_or("?"),
                list.join("; ")
            ),
        })
    }
}

impl Drop for CaseSetup {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A load error: what the machine lacks makes the case skipped, the rest failed.
fn load_error(e: rtlab_load::LoadError) -> LabError {
    match e.missing() {
        Some(m) => LabError::Missing(m.clone()),
        None => LabError::Failed(format!("load: {e}")),
    }
}
