//! What surrounds a case's measurement: its load and its profile (system side).
//!
//! Contract: the load starts first (so that the profile treats it as "every other task":
//! moved off an isolated CPU, never given the application's priority), then the profile is
//! applied through a journaled session; [`CaseSetup::finish`] (and Drop) restores the
//! profile, then stops the load — also on error and on panic. A load that cannot start
//! (a missing tool) or a profile that cannot be applied makes the case fail with the reason.

use rtlab_core::scenario::LoadSpec;
use rtlab_probes::netns::NetnsPair;
use rtlab_tune::host::RealHost;
use rtlab_tune::load::{Direction, LoadConfig, RunningLoad, TrafficConfig};
use rtlab_tune::session::Session;
use std::collections::BTreeMap;

/// The machine, for every case of the run (profiles borrow it).
pub fn host() -> &'static RealHost {
    static HOST: std::sync::OnceLock<RealHost> = std::sync::OnceLock::new();
    HOST.get_or_init(RealHost::new)
}

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
        LoadSpec::Stress { cpu, cpu_method, vm, io, hdd, .. } => vec![LoadConfig::Stress {
            cpu: if *cpu == 0 && *vm == 0 && *io == 0 && *hdd == 0 {
                online_cpus as u32
            } else {
                *cpu
            },
            vm: *vm,
            io: *io,
            hdd: *hdd,
            cpu_method: cpu_method.clone(),
        }],
        LoadSpec::Traffic { bits_per_second, direction, protocol } => {
            vec![LoadConfig::Traffic(TrafficConfig {
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

/// A case's load and profile, undone by `finish` or on drop.
#[derive(Default)]
pub struct CaseSetup {
    loads: Vec<RunningLoad>,
    session: Option<Session<'static>>,
    pub load_report: Option<serde_json::Value>,
    pub profile_report: Option<serde_json::Value>,
}

impl CaseSetup {
    /// Start the load (through `pair` when given), then apply `profile` for `pids`.
    pub fn start(
        spec: &LoadSpec,
        pair: Option<&NetnsPair>,
        profile: &str,
        rt_cpu: Option<usize>,
        pids: Vec<i32>,
    ) -> Result<CaseSetup, String> {
        let mut s = CaseSetup::default();
        let online = rtlab_sys::cpus::online_cpus(std::path::Path::new("/")).0.len();
        for cfg in load_configs(spec, pair, online) {
            let mut l = RunningLoad::start(&cfg).map_err(|e| format!("load: {e}"))?;
            // a load that dies at once (a bad option, a port in use) is an error, not a quiet idle case
            std::thread::sleep(std::time::Duration::from_millis(300));
            l.check_alive().map_err(|e| format!("load: {e}"))?;
            s.loads.push(l);
        }
        let target = rtlab_tune::profile::Target { rt_cpu, nic: None, netns: None, pids };
        let journal = std::path::Path::new(rtlab_tune::journal::DEFAULT_JOURNAL);
        let (session, outcomes) =
            rtlab_tune::profile::apply_profile(host(), profile, &BTreeMap::new(), &target, journal)
                .map_err(|e| format!("profile {profile}: {e}"))?;
        s.session = Some(session);
        s.profile_report = Some(serde_json::json!({
            "profile": profile,
            "steps": outcomes.iter().map(|o| serde_json::json!({ "what": o.what, "status": o.status, "detail": o.detail })).collect::<Vec<_>>(),
        }));
        Ok(s)
    }

    /// The measurement is over: put the profile back, stop the load, keep what it achieved.
    pub fn finish(&mut self) {
        if let Some(mut session) = self.session.take() {
            let r = session.restore();
            if let Some(p) = self.profile_report.as_mut() {
                p["restored"] = serde_json::json!(r.is_clean());
            }
        }
        let reports: Vec<_> = self.loads.drain(..).map(|l| l.stop()).collect();
        if !reports.is_empty() {
            self.load_report = serde_json::to_value(&reports).ok();
        }
    }
}

impl Drop for CaseSetup {
    fn drop(&mut self) {
        self.finish();
    }
}
