//! The live executor's case on this machine: its namespaces when the probe needs two hosts,
//! its load, its profile, its far side, the probe run through the one probe interface, and
//! everything undone (the supervisor runs it on a thread of its own).

use super::setup;
use super::watch;
use crate::error::LabError;
use crate::far::link::{FarLink, REQUEST_TIMEOUT};
use crate::far::protocol::Request;
use crate::far::FarSpec;
use crate::probe::Context;
use crate::runner::CaseResult;
use crate::scenario::CaseSpec;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A lab error as a case's outcome.
pub fn case_error(e: LabError) -> CaseResult {
    match e {
        LabError::Missing(m) => CaseResult::skipped(m.to_string()),
        other => CaseResult::failed(other.to_string()),
    }
}

/// Runs cases for real on this machine.
pub struct LiveExecutor {
    pub(super) online: Vec<usize>,
    /// Where traces around spikes are saved.
    pub(super) trace_dir: std::path::PathBuf,
    /// Progress of the running case (done, planned), for the runner's ETA.
    pub on_progress: Option<Box<dyn FnMut(u64, u64) + Send>>,
    /// How much longer than planned a case may run before the supervisor stops it (None:
    /// [`super::supervise::default_overrun`]).
    pub overrun: Option<std::time::Duration>,
    /// Cases that made a namespace pair so far (each pair has a name of its own).
    pub(super) pairs: u32,
}

impl LiveExecutor {
    pub fn new(trace_dir: std::path::PathBuf) -> LiveExecutor {
        let (online, _) = crate::host::online_cpus();
        LiveExecutor { online, trace_dir, on_progress: None, overrun: None, pairs: 0 }
    }
}

/// One case, on the calling thread (the supervisor's `rtlab-case`).
pub(super) fn run_here(
    online: &[usize],
    trace_dir: &std::path::Path,
    on_progress: Option<&mut Box<dyn FnMut(u64, u64) + Send>>,
    case: &CaseSpec,
    stop: &Arc<AtomicBool>,
    pair_name: &str,
) -> CaseResult {
    {
        let probe = case.config.clone();
        let base = case.profile_spec.profile.rt_settings(online, None);
        let rt = probe.rt(&base);
        if let Err(m) = rt.check() {
            return CaseResult::failed(format!("priority: {m}"));
        }
        // network cases (and their traffic) go through two namespaces made for the case
        let pair = if probe.needs_pair() {
            match case_pair(pair_name) {
                Ok(p) => Some(p),
                Err(r) => return *r,
            }
        } else {
            None
        };
        // the profile's application settings go to this process, except for multi-threaded
        // middleware, whose threads must not be pinned as a whole (pin threads, not processes)
        let isolation = case.profile_spec.profile.isolate_cpus.is_some();
        let pids = if probe.pins_process() || isolation {
            vec![std::process::id() as i32]
        } else {
            vec![]
        };
        let planned = std::time::Duration::from_nanos(case.planned_ns().max(0) as u64);
        // the far side: an agent in side b of the pair, or on another computer
        let far_spec = match probe.far() {
            Some(FarSpec::Pair) => pair.as_ref().map(|p| FarSpec::Netns(p.ns_b.clone())),
            other => other.cloned(),
        };
        let link = match far_spec.as_ref().map(FarLink::open).transpose() {
            Ok(l) => l,
            Err(e) => return case_error(e),
        };
        let mut far_notes = Vec::new();
        let loads = match (&link, &far_spec) {
            // another computer: its own profile, and the traffic's server there
            (Some(l), Some(FarSpec::Ssh { .. })) => {
                match far_setup(l, case, planned, online.len()) {
                    Ok((near, notes)) => {
                        far_notes = notes;
                        near
                    }
                    Err(e) => return case_error(e),
                }
            }
            _ => {
                if link.is_some() {
                    far_notes.push("the far side is a namespace of this machine: the case's profile, applied here, is in force there too".into());
                }
                setup::load_configs(&case.load_spec, pair.as_ref(), online.len())
            }
        };
        let mut setup = match setup::CaseSetup::start_loads(
            loads,
            &case.profile_spec,
            rt.cpu_of(0),
            pids,
            planned,
        ) {
            Ok(s) => s,
            Err(e) => return case_error(e),
        };
        let mut ev = crate::evidence::EvidenceOptions::new(1_000_000_000, "");
        ev.counters = case.counters;
        ev.trace_on_spike_ns = case.trace_on_spike_ns;
        ev.trace_dir = trace_dir.to_path_buf();
        let mut noop = |_: u64, _: u64| {};
        let progress: &mut dyn FnMut(u64, u64) = match on_progress {
            Some(p) => p.as_mut(),
            None => &mut noop,
        };
        let watch = watch::CaseWatch::start(watch::WatchSpec {
            loads: setup.load_pids(),
            agent: link.as_ref().and_then(|l| l.local_agent_pid()),
            link: pair.as_ref().map(|p| (p.path_a(), p.dev_a.clone())),
            far: link.as_ref().map(|l| (**l).clone()),
            run_stop: Some(stop.clone()),
        });
        let mut ctx = Context {
            rt: base,
            stop: watch.case_stop.clone(),
            evidence: ev,
            pair: pair.as_ref(),
            far: link.as_ref(),
            progress,
            mlockall_off_by_profile: !rt.mlockall,
        };
        let measured = match test_hang(&ctx.stop) {
            Some(r) => r,
            None => probe.measure(&mut ctx),
        };
        let mut r = match measured {
            Ok(doc) => CaseResult { document: Some(doc), ..Default::default() },
            Err(e) => case_error(e),
        };
        let seen = watch.stop();
        // the spike's explanation is also kept with the case (reports show it)
        r.spike_evidence = r
            .document
            .as_ref()
            .and_then(|d| d.evidence.as_ref())
            .and_then(|e| e.spike.as_ref())
            .and_then(|s| serde_json::to_value(s).ok());
        setup.finish();
        if let Some(d) = r.document.as_mut() {
            watch::seen_into(&seen, d, setup.load_report.as_ref());
            if let Some(w) = setup.restore_warning() {
                d.warnings.push(w);
            }
        }
        if let Some(l) = link {
            finish_far(l, &mut r, far_notes);
        }
        drop(pair);
        r.load_report = setup.load_report.take();
        r.profile_report = setup.profile_report.take();
        r
    }
}

/// The case's two namespaces (its network cases and their traffic go through them); what
/// the machine lacks (`ip`, the privilege) skips the case, another failure fails it.
fn case_pair(name: &str) -> Result<rtlab_engines::netns::NetnsPair, Box<CaseResult>> {
    use rtlab_engines::netns::{NetnsConfig, NetnsError, NetnsPair};
    let cfg = NetnsConfig { name: name.to_string(), ..Default::default() };
    NetnsPair::up(&cfg).map_err(|e| {
        Box::new(match e {
            NetnsError::ToolMissing { tool } => {
                CaseResult::skipped(rtlab_core::error::Missing::tool(&tool, "iproute2").to_string())
            }
            e @ NetnsError::NoPrivilege { .. } => CaseResult::skipped(format!("netns pair: {e}")),
            e => CaseResult::failed(format!("netns pair: {e}")),
        })
    })
}

/// The far side's end of a case: its profile, load and notes into the result's far part,
/// then bye (the agent restores its host and ends).
fn finish_far(l: FarLink, r: &mut CaseResult, far_notes: Vec<String>) {
    let finished = l.finish();
    if let Some(far) = r.document.as_mut().and_then(|d| d.far.as_mut()) {
        match finished {
            Ok(f) => {
                far.profile = f.profile;
                far.load = f.load;
                far.notes.extend(f.notes);
            }
            Err(e) => far.notes.push(format!("finishing the far side: {e}")),
        }
        far.notes.extend(far_notes);
    }
    drop(l);
}

/// Tests of the supervisor, in debug builds only: `RTLAB_TEST_HANG=spin` makes the case's
/// measuring thread spin and never end, at the profile's policy when that is real-time, else
/// at SCHED_FIFO 1 (where it may); `livelock` makes it spin until it is both asked to stop
/// and no longer real-time (a livelock the supervisor's SCHED_OTHER ends).
fn test_hang(
    stop: &Arc<AtomicBool>,
) -> Option<Result<rtlab_core::schema::ResultDocument, crate::error::LabError>> {
    if !cfg!(debug_assertions) {
        return None;
    }
    let how = std::env::var("RTLAB_TEST_HANG").ok()?;
    if rtlab_sys::tasks::sched_get(0).is_ok_and(|(p, _)| p & 0xff == 0) {
        let _ = rtlab_sys::sched::set_current_policy(rtlab_core::rt::Policy::Fifo, 1);
    }
    loop {
        std::hint::spin_loop();
        let asked = stop.load(std::sync::atomic::Ordering::Relaxed);
        // the kernel's policy of this thread (glibc's pthread_getschedparam answers what it
        // last set itself, not what the supervisor set since)
        let other = rtlab_sys::tasks::sched_get(0).is_ok_and(|(p, _)| p & 0xff == 0);
        if how == "livelock" && asked && other {
            return Some(Err(crate::error::LabError::Failed("(test) the livelock ended".into())));
        }
    }
}

/// The far computer's part of a case: its profile (the case's, journaled there) and the
/// server end of a traffic load; returns the loads that run here.
fn far_setup(
    link: &FarLink,
    case: &CaseSpec,
    planned: std::time::Duration,
    online: usize,
) -> Result<(Vec<rtlab_load::LoadConfig>, Vec<String>), LabError> {
    let facts = link.facts()?;
    let (_, far_addr) = link.addresses(&facts, case.config.near_netns())?;
    let near_netns = case.config.near_netns();
    let (near, far) = setup::far_load_configs(&case.load_spec, &far_addr, near_netns, online);
    let mut notes = Vec::new();
    let p = &case.profile_spec;
    link.request(
        Request::Profile { name: p.name.clone(), profile: p.profile.clone(), rt_cpu: None },
        REQUEST_TIMEOUT,
    )?;
    notes.push(format!("far profile {} applied there (journaled, restored at the end)", p.name));
    if !far.is_empty() {
        let limit = rtlab_load::max_duration_for(planned);
        link.request(
            Request::Load { loads: far, limit_ns: limit.as_nanos().min(i64::MAX as u128) as i64 },
            REQUEST_TIMEOUT,
        )?;
        notes.push(format!("traffic: iperf3 server on the far host ({far_addr}), client here"));
    }
    Ok((near, notes))
}
