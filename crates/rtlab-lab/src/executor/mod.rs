//! The live case executor: turns a [`CaseSpec`] into a probe configuration under the case's
//! profile, starts the case's load, runs the probe, stops the load and puts the profile back.
//!
//! Contract: whatever happens inside a case (a missing tool, a refused priority, a probe
//! error), `run_case` returns a [`CaseResult`] — it never panics the run away — and every
//! change it made to the machine is undone before it returns (guards dropped in reverse).

use crate::runner::{CaseExecutor, CaseResult};
use rtlab_core::scenario::CaseSpec;
use rtlab_core::units::parse_duration;
use rtlab_probes::timer::TimerMode;
use rtlab_probes::timer_run::{self, TimerConfig, TimerThreadConfig};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

mod pubsub;
mod setup;
mod udp;

/// The process side of a profile: how the probe's own threads run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessSettings {
    pub policy: &'static str,
    pub priority: i32,
    /// CPU the measuring threads are pinned to.
    pub cpu: Option<usize>,
    pub mlockall: bool,
}

/// The probe threads' settings under a profile (S1/S3): `no-rt` is SCHED_OTHER without
/// memory lock; every rt-* profile runs them SCHED_FIFO 80 with mlockall (S1, S3 Test 4:
/// app 80); `rt-affinities` and `rt-isolation` pin them to the last online CPU (S1 pins the
/// client and the RT queue's IRQ to CPU 1). A `policy` parameter (S4: rr or fifo) overrides
/// the RT policy.
pub fn process_settings(
    profile: &str,
    policy_param: Option<&str>,
    online: &[usize],
) -> ProcessSettings {
    let last = online.last().copied();
    let rt_policy = match policy_param {
        Some("rr") => "rr",
        Some("other") => "other",
        _ => "fifo",
    };
    let rt = |cpu| ProcessSettings {
        policy: rt_policy,
        priority: if rt_policy == "other" { 0 } else { 80 },
        cpu,
        mlockall: true,
    };
    match profile {
        "no-rt" => ProcessSettings { policy: "other", priority: 0, cpu: None, mlockall: false },
        "rt-affinities" | "rt-isolation" => rt(last),
        _ => rt(None),
    }
}

/// Build the timer probe's configuration of a case.
pub fn timer_config(case: &CaseSpec, ps: &ProcessSettings) -> anyhow::Result<TimerConfig> {
    let interval =
        parse_duration(case.params.get("interval").map(String::as_str).unwrap_or("1ms"))?.0;
    let distance = case
        .params
        .get("distance")
        .map(|d| parse_duration(d))
        .transpose()?
        .map(|n| n.0)
        .unwrap_or(0);
    let threads: usize = case.params.get("threads").map(|t| t.parse()).transpose()?.unwrap_or(1);
    let mode = match case.params.get("mode").map(String::as_str) {
        Some("rel") => TimerMode::Rel,
        _ => TimerMode::Abs,
    };
    Ok(TimerConfig {
        mode,
        threads: (0..threads)
            .map(|i| {
                let iv = interval + distance * i as i64;
                TimerThreadConfig {
                    interval_ns: iv,
                    policy: ps.policy.into(),
                    priority: ps.priority,
                    cpu: ps.cpu,
                    deadline_ns: case.deadline_ns.unwrap_or(iv),
                }
            })
            .collect(),
        duration_ns: case.duration_ns,
        loops: case.count,
        window_ns: 1_000_000_000,
        mlockall: ps.mlockall,
        cpu_dma_latency_us: None,
        stack_prefault_bytes: 256 * 1024,
        histogram_us_buckets: None,
        raw_file: None,
    })
}

/// Runs cases for real on this machine.
pub struct LiveExecutor {
    online: Vec<usize>,
    /// Where traces around spikes are saved.
    trace_dir: std::path::PathBuf,
}

impl LiveExecutor {
    pub fn new(trace_dir: std::path::PathBuf) -> LiveExecutor {
        let (online, _) = rtlab_sys::cpus::online_cpus(std::path::Path::new("/"));
        LiveExecutor { online, trace_dir }
    }

    /// The case's evidence options (counters, trace on spike) for its probe's threads.
    fn evidence_options(
        &self,
        case: &CaseSpec,
        ps: &ProcessSettings,
    ) -> crate::evidence::EvidenceOptions {
        let victim = match case.probe.as_str() {
            "udp" => crate::evidence::UDP_PAIR_THREADS,
            "timer" => "rtlab-timer",
            _ => "", // pubsub: set from its configuration
        };
        let mut o = crate::evidence::EvidenceOptions::new(1_000_000_000, victim);
        o.counters = case.counters;
        o.trace_on_spike_ns = case.trace_on_spike_ns;
        o.trace_dir = self.trace_dir.clone();
        o.cpus = ps.cpu.into_iter().collect();
        o.sources = match case.probe.as_str() {
            "udp" => crate::evidence::UDP_PING_SOURCES.iter().map(|s| s.to_string()).collect(),
            "timer" => {
                (0..case.params.get("threads").and_then(|t| t.parse().ok()).unwrap_or(1usize))
                    .map(|i| format!("thread{i}"))
                    .collect()
            }
            _ => Vec::new(),
        };
        o.planned = Some(std::time::Duration::from_nanos(case.planned_ns().max(0) as u64));
        o
    }

    fn timer(
        &self,
        case: &CaseSpec,
        ps: &ProcessSettings,
        ev: &crate::evidence::EvidenceOptions,
        stop: &Arc<AtomicBool>,
    ) -> CaseResult {
        let cfg = match timer_config(case, ps) {
            Ok(c) => c,
            Err(e) => return CaseResult::failed(format!("timer configuration: {e}")),
        };
        let env = rtlab_sys::env::detect(std::path::Path::new("/"));
        let started = std::time::SystemTime::now();
        let evidence = match crate::evidence::EvidenceRun::start(setup::host(), ev) {
            Ok(e) => e,
            Err(e) => return CaseResult::failed(e.to_string()),
        };
        let measured = timer_run::run_with_spike(&cfg, stop.clone(), evidence.hook(), |_, _| {});
        // finished (tracefs put back) before anything else, whatever the probe did
        let evidence = evidence
            .finish(measured.as_ref().map(|o| o.streams(&cfg)).unwrap_or_default().as_slice());
        match measured {
            Ok(outcome) => match crate::cmd::timer::document(&cfg, &outcome, env, started) {
                Ok(mut doc) => {
                    doc.evidence = Some(evidence);
                    CaseResult { document: Some(doc), ..Default::default() }
                }
                Err(e) => CaseResult::failed(format!("timer result: {e}")),
            },
            Err(e) => CaseResult::failed(format!("timer: {e}")),
        }
    }
}

impl CaseExecutor for LiveExecutor {
    fn run_case(&mut self, case: &CaseSpec, stop: &Arc<AtomicBool>) -> CaseResult {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let ps = process_settings(
                &case.profile,
                case.params.get("policy").map(String::as_str),
                &self.online,
            );
            // udp cases (and their traffic) go through two namespaces made for the case
            let pair = if case.probe == "udp" {
                let cfg = rtlab_probes::netns::NetnsConfig {
                    name: format!("rtlab{}", std::process::id() % 100_000),
                    ..Default::default()
                };
                match rtlab_probes::netns::NetnsPair::up(&cfg) {
                    Ok(p) => Some(p),
                    Err(e) => return CaseResult::failed(format!("netns pair: {e}")),
                }
            } else {
                None
            };
            // the profile's application settings go to this process, except for pub/sub, whose
            // middleware threads must not be pinned as a whole (pin threads, not processes)
            let pids = if case.probe != "pubsub" || case.profile == "rt-isolation" {
                vec![std::process::id() as i32]
            } else {
                vec![]
            };
            let mut setup = match setup::CaseSetup::start(
                &case.load_spec,
                pair.as_ref(),
                &case.profile,
                ps.cpu,
                pids,
            ) {
                Ok(s) => s,
                // a tool this machine lacks: the case cannot apply here, said with the package to install
                Err(e) if e.contains("is not installed") => return CaseResult::skipped(e),
                Err(e) => return CaseResult::failed(e),
            };
            let ev = self.evidence_options(case, &ps);
            let mut r = match case.probe.as_str() {
                "timer" => self.timer(case, &ps, &ev, stop),
                "udp" => udp::run(case, &ps, pair.as_ref().expect("made above"), &ev, stop),
                "pubsub" => pubsub::run(case, &ps, ev, stop),
                other => CaseResult::failed(format!("unknown probe {other}")),
            };
            // the spike's explanation is also kept with the case (reports show it)
            r.spike_evidence = r
                .document
                .as_ref()
                .and_then(|d| d.evidence.as_ref())
                .and_then(|e| e.spike.as_ref())
                .and_then(|s| serde_json::to_value(s).ok());
            setup.finish();
            drop(pair);
            r.load_report = setup.load_report.take();
            r.profile_report = setup.profile_report.take();
            r
        }));
        outcome.unwrap_or_else(|_| {
            CaseResult::failed("the case panicked (a bug in rtlab: please report it)")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_set_the_probe_threads() {
        let online = [0, 1];
        assert_eq!(
            process_settings("no-rt", None, &online),
            ProcessSettings { policy: "other", priority: 0, cpu: None, mlockall: false }
        );
        assert_eq!(
            process_settings("rt-normal", None, &online),
            ProcessSettings { policy: "fifo", priority: 80, cpu: None, mlockall: true }
        );
        assert_eq!(process_settings("rt-affinities", Some("rr"), &online).cpu, Some(1));
        assert_eq!(process_settings("rt-normal", Some("rr"), &online).policy, "rr");
        assert_eq!(
            process_settings("no-rt", Some("fifo"), &online).policy,
            "other",
            "no-rt stays normal"
        );
    }

    #[test]
    fn a_timer_case_becomes_a_timer_config() {
        let s = rtlab_core::scenario::Scenario::parse(
            "t",
            "name='t'\ncount=100\n[[probe]]\nkind='timer'\nthreads=5\ninterval='1000us'\ndistance='500us'\nmode='rel'\n",
            1.0,
        )
        .unwrap();
        let ps = process_settings("rt-normal", None, &[0, 1]);
        let c = timer_config(&s.cases()[0], &ps).unwrap();
        assert_eq!(
            c.threads.iter().map(|t| t.interval_ns).collect::<Vec<_>>(),
            [1_000_000, 1_500_000, 2_000_000, 2_500_000, 3_000_000]
        );
        assert_eq!(c.mode, TimerMode::Rel);
        assert_eq!(c.loops, Some(100));
        assert_eq!(c.threads[4].deadline_ns, 3_000_000);
        assert!(c.mlockall);
    }
}
