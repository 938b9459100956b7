//! Measuring a pub/sub run: the evidence fitted to its threads, the cases run (in this
//! process or one of their own, from inside the near side's namespace, with a far side), the
//! result document with its warnings, and the summary its tables are rendered from.
//!
//! Contract: memory locked and /dev/cpu_dma_latency held (when asked) for the run only; a
//! refused priority is a [`LabError::Missing`]; never prints.

use super::config::PubsubProbeConfig;
use crate::document::{new_document, run_warnings, RunFacts};
use crate::error::LabError;
use crate::far::roles::AgentRoles;
use crate::far::run::FarRun;
use crate::probe::Context;
use rtlab_core::rt::{Policy, RtSettings};
use rtlab_core::schema::ResultDocument;
use rtlab_pubsub::engine::{self, Mode, PubsubConfig, PubsubOutcome, TransportKind};
use rtlab_pubsub::transport::{EchoStyle, WaitStyle};
use rtlab_report::summary::pubsub::{PubsubCase, PubsubSummary, QosLine};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The threads explained (the publisher, the receivers and echoes in this process) and the
/// streams that raise the flag.
pub fn fit_evidence(cfg: &PubsubConfig, o: &mut crate::evidence::EvidenceOptions) {
    let in_process = cfg.in_process || cfg.transport.kind == TransportKind::Intra;
    // a round trip's latency goes through the echoes (rtlab-subN) and the pong receivers
    o.victim = if cfg.mode == Mode::Roundtrip {
        "rtlab-pub|rtlab-pong|rtlab-sub"
    } else {
        "rtlab-pub|rtlab-sub"
    }
    .into();
    o.window_ns = cfg.window_ns;
    // source 0: any receiver here (several streams); 1: the publisher's lateness
    o.sources = vec![String::new(), "pub.send_lateness".into()];
    o.cpus = cfg.rt.cpus.clone().unwrap_or_default();
    let cases = (cfg.payloads.len() * cfg.periods_ns.len() * cfg.subscribers.len()) as u64;
    o.planned =
        Some(std::time::Duration::from_nanos(cfg.case_duration_ns.max(0) as u64 * cases.max(1)));
    if o.trace_on_spike_ns.is_some() && cfg.mode == Mode::Oneway && !in_process {
        o.notes.push("trace on spike: the subscribers run in their own processes and cannot raise the spike flag, only the publisher's send lateness does; for the message latency use in-process subscribers or roundtrip mode".into());
    }
}

/// Run the probe with memory locked and, when asked, /dev/cpu_dma_latency held; the
/// document (with its evidence and warnings), the outcome and the engine configuration.
pub fn measure(
    cfg: &PubsubProbeConfig,
    ctx: &mut Context<'_>,
) -> Result<(ResultDocument, PubsubOutcome, PubsubConfig), LabError> {
    crate::cost::before_case();
    let rt = cfg.rt.over(&ctx.rt);
    let mut engine = cfg.engine(&rt)?;
    let mut ev = ctx.evidence.clone();
    fit_evidence(&engine, &mut ev);
    let evidence = crate::evidence::EvidenceRun::start(crate::host::host(), &ev)?;
    engine.spike = evidence.hook();
    let env = rtlab_sys::env::detect(std::path::Path::new("/"));
    let started = std::time::SystemTime::now();
    let (lock_guard, memory_lock) = rtlab_engines::hold::lock_memory(rt.mlockall);
    let (dma_guard, dma) = rtlab_engines::hold::cpu_dma_latency(
        cfg.cpu_dma_latency.map(|v| v.min(i32::MAX as u32) as i32),
    );
    let exe = std::env::current_exe().map_err(|e| {
        LabError::Failed(format!("finding the rtlab binary to start subscriber processes: {e}"))
    })?;
    // the near side's namespace: its own, or side a of the case's pair (far = "pair")
    let near_netns = cfg.netns.clone().or_else(|| ctx.pair.map(|p| p.ns_a.clone()));
    let far = match &cfg.far {
        Some(spec) => {
            let far_rt = RtSettings { cpus: None, ..rt.clone() };
            let window = ctx.evidence.counters.then_some(engine.window_ns);
            Some(FarRun::start(
                ctx.far,
                spec,
                near_netns.as_deref(),
                cfg.synced_clocks,
                &far_rt,
                &[],
                window,
            )?)
        }
        None => None,
    };
    let roles = far.as_ref().map(|f| AgentRoles { link: (*f.link()).clone() });
    let placement = far.as_ref().zip(roles.as_ref()).map(|(f, r)| engine::FarPlacement {
        near: f.near.clone(),
        far: f.far.clone(),
        roles: r,
    });
    let progress = &mut *ctx.progress;
    let stop = ctx.stop.clone();
    // a Fast DDS other than the one this process already holds (ros2 after fastdds in one
    // run, or the reverse), or roscpp in a namespace of the case's own: the case's near side
    // runs in a process of its own (its far roles still started here, through the agent)
    let apart =
        rtlab_pubsub::engine::apart::conflict(&engine, placement.is_some(), near_netns.is_some());
    let outcome = run_cases(
        &engine,
        placement.as_ref(),
        apart.as_deref(),
        &exe,
        near_netns.as_deref(),
        stop,
        progress,
    );
    let streams: Vec<_> = match &outcome {
        Ok(o) => o
            .cases
            .iter()
            .flat_map(|c| c.streams.iter().cloned().chain(c.publisher.clone()))
            .collect(),
        Err(_) => Vec::new(),
    };
    let evidence = evidence.finish(&streams);
    let outcome = outcome.map_err(|e| match e {
        engine::ProbeError::Rt(m) if m.contains("EPERM") || m.contains("refused") => {
            LabError::Missing(crate::error::refused(rt.policy.name(), rt.priority))
        }
        e if e.is_bad_input() => LabError::Failed(e.to_string()),
        e => LabError::failed(e),
    })?;
    if let Some(first) =
        outcome.cases.first().filter(|_| outcome.cases.iter().all(|c| c.error.is_some()))
    {
        return Err(LabError::Failed(
            first.error.clone().unwrap_or_else(|| "no case could run".into()),
        ));
    }
    let mut doc = new_document("pubsub", started, env, config_value(&engine, &outcome));
    doc.far = far.map(FarRun::finish);
    doc.duration_ns = outcome.duration_ns;
    doc.interrupted = outcome.interrupted;
    doc.environment.memory_locked = matches!(memory_lock, Some(Ok(())));
    doc.environment.cpu_dma_latency_us = dma.as_ref().and_then(|r| r.as_ref().ok().copied());
    // per case: its subscribers, then the publisher's own lateness
    doc.streams = streams;
    doc.evidence = Some(evidence);
    let facts = RunFacts {
        memory_lock: &memory_lock,
        any_other_policy: rt.policy == Policy::Other,
        mlockall_off_by_profile: ctx.mlockall_off_by_profile,
        cpu_dma_latency_error: match &dma {
            Some(Err(why)) => Some(why.as_str()),
            _ => None,
        },
        fewest_samples: doc.streams.iter().map(|s| s.stats.count).min().unwrap_or(0),
        interrupted: outcome.interrupted,
    };
    doc.warnings = warnings(&doc, &facts, &engine, &outcome);
    drop(dma_guard);
    drop(lock_guard);
    crate::cost::attach(&mut doc);
    Ok((doc, outcome, engine))
}

/// Run the cases: in this process, or in a process of its own when `apart` says why (another
/// Fast DDS than the one this process holds, roscpp in a namespace of its own); from inside
/// the near side's namespace when it has one: a thread of its own enters it, so the transport's sockets and threads and the
/// local role processes are born there, and its progress comes back over a channel.
fn run_cases(
    engine: &PubsubConfig,
    placement: Option<&engine::FarPlacement>,
    apart: Option<&str>,
    exe: &std::path::Path,
    near_netns: Option<&str>,
    stop: Arc<AtomicBool>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<PubsubOutcome, engine::ProbeError> {
    let launcher = move |json: &str| {
        let mut c = std::process::Command::new(exe);
        c.args(["pubsub", "--role-config", json]);
        c
    };
    let run = |engine: &PubsubConfig,
               placement: Option<&engine::FarPlacement>,
               stop,
               progress: &mut dyn FnMut(usize, usize)| match apart {
        Some(why) => {
            rtlab_pubsub::engine::apart::run_apart(engine, exe, why, placement, stop, progress)
        }
        None => engine::run_with(engine, &launcher, placement, stop, progress),
    };
    match near_netns {
        None => run(engine, placement, stop, &mut |d, t| progress(d as u64, t as u64)),
        Some(ns) => {
            let (tx, rx) = std::sync::mpsc::channel::<(u64, u64)>();
            let run = &run;
            std::thread::scope(|s| {
                let h = s.spawn(move || {
                    rtlab_sys::net::enter_netns(&format!("/run/netns/{ns}"))
                        .map_err(|e| engine::ProbeError::Setup(format!("--netns {ns}: {e}")))?;
                    run(engine, placement, stop, &mut |d, t| {
                        let _ = tx.send((d as u64, t as u64));
                    })
                });
                for (d, t) in rx.iter() {
                    progress(d, t);
                }
                h.join().unwrap_or_else(|_| {
                    Err(engine::ProbeError::Setup("the measuring thread panicked".into()))
                })
            })
        }
    }
}

/// A run's warnings: the shared ones, the far side's, spinners starving a middleware, and a
/// line per case that measured nothing.
fn warnings(
    doc: &ResultDocument,
    facts: &RunFacts<'_>,
    engine: &PubsubConfig,
    outcome: &PubsubOutcome,
) -> Vec<rtlab_core::schema::Warning> {
    let mut warnings = run_warnings(&doc.environment, facts, Vec::new());
    if let Some(w) = doc.far.as_ref().and_then(|f| f.warning()) {
        warnings.push(w);
    }
    if doc.far.is_none() {
        let cpus = match &engine.rt.cpus {
            Some(c) => c.len(),
            None => crate::host::online_cpus().0.len(),
        };
        warnings.extend(spinners_warning(engine, cpus));
    }
    for c in outcome.cases.iter().filter(|c| c.error.is_some()) {
        warnings.push(rtlab_core::schema::Warning {
            code: "case-failed".into(),
            message: format!(
                "case {}B {} n{} measured nothing: {}",
                c.payload,
                engine::rate_label(c.period_ns),
                c.subscribers,
                c.error.as_deref().unwrap_or("")
            ),
        });
    }
    warnings
}

/// Busy-poll with as many spinning threads as CPUs starves a middleware's own receive threads
/// (DDS, Zenoh): they run only when the scheduler preempts a spinner, so the tail is rtlab's
/// doing. Measured: dds and zenoh closed loops on 2 CPUs, p99 3.6-8.8 ms busy-polling against
/// 0.2-0.7 ms blocking (BENCHMARKS.md).
fn spinners_warning(cfg: &PubsubConfig, cpus: usize) -> Option<rtlab_core::schema::Warning> {
    let own_threads = cfg.transport.kind.is_dds() || cfg.transport.kind == TransportKind::Zenoh;
    if cfg.wait != WaitStyle::BusyPoll || !own_threads {
        return None;
    }
    let roundtrip = cfg.mode == Mode::Roundtrip;
    let callback = roundtrip && cfg.echo == EchoStyle::Callback;
    // every subscriber (a pong in roundtrip) spins, unless it answers from the middleware's
    // callback, and so does the pinger
    let spinners = if callback { 0 } else { cfg.subscribers.iter().copied().max().unwrap_or(1) }
        + usize::from(roundtrip);
    let remedy = if roundtrip && !callback && cfg.far_kind().callback_echo().is_some() {
        "use --echo callback (the pong answers from the middleware's own receive thread: one spinner per round trip, as the middlewares' own ping-pong benchmarks run), --wait blocking, or fewer spinners than CPUs"
    } else {
        "use --wait blocking, or fewer spinners than CPUs"
    };
    (spinners >= cpus).then(|| rtlab_core::schema::Warning {
        code: "busy-poll-starves-middleware".into(),
        message: format!(
            "busy-poll: {spinners} thread{} spin on {cpus} CPU{}, so {}'s own receive threads run only when the scheduler preempts a spinner: millisecond tails here are rtlab's doing, not the middleware's ({remedy})",
            if spinners == 1 { "" } else { "s" },
            if cpus == 1 { "" } else { "s" },
            cfg.transport.kind.name()
        ),
    })
}

/// The configuration as recorded: the probe config, what the QoS became, notes, per-case figures.
fn config_value(cfg: &PubsubConfig, o: &PubsubOutcome) -> serde_json::Value {
    let cases: Vec<serde_json::Value> = o
        .cases
        .iter()
        .map(|c| {
            serde_json::json!({
                "payload_bytes": c.payload, "period_ns": c.period_ns, "subscribers": c.subscribers,
                "published": c.published, "overruns": c.overruns,
                "p50_spread_ns": c.p50_spread_ns, "fastest_subscriber": c.fastest, "slowest_subscriber": c.slowest,
                "error": c.error,
            })
        })
        .collect();
    serde_json::json!({
        "probe": serde_json::to_value(cfg).unwrap_or_default(),
        "qos_mapping": serde_json::to_value(&o.qos_mapping).unwrap_or_default(),
        "ros2": o.ros2,
        "notes": o.notes,
        "cases": cases,
    })
}

/// The run as its tables show it (rendered by [`rtlab_report::summary::pubsub`]).
pub fn summary<'a>(
    cfg: &PubsubConfig,
    o: &'a PubsubOutcome,
    cost: Option<&'a rtlab_core::cost::Cost>,
) -> PubsubSummary<'a> {
    let definition = match cfg.mode {
        Mode::Oneway => engine::oneway_definition(cfg.oneway_clock()),
        Mode::Roundtrip => cfg.mode.definition().to_string(),
    };
    let cases = o
        .cases
        .iter()
        .map(|c| PubsubCase {
            name: format!("{}B {} n{}", c.payload, engine::rate_label(c.period_ns), c.subscribers),
            streams: &c.streams,
            publisher: c.publisher.as_ref(),
            published: c.published,
            overruns: c.overruns,
            spread: match (c.p50_spread_ns, c.fastest, c.slowest) {
                (Some(sp), Some(f), Some(sl)) => Some((sp, f, sl)),
                _ => None,
            },
            // the case's window is its streams' prefix
            cost: c
                .streams
                .first()
                .or(c.publisher.as_ref())
                .and_then(|s| {
                    s.name
                        .strip_suffix(".pub.send_lateness")
                        .or(s.name.rsplit_once('.').map(|x| x.0))
                })
                .and_then(|w| cost.and_then(|k| k.window(w))),
        })
        .collect();
    let m = &o.qos_mapping;
    let qos =
        [("reliability", &m.reliability), ("history", &m.history), ("durability", &m.durability)]
            .into_iter()
            .map(|(what, it)| QosLine {
                what,
                asked: it.asked.clone(),
                native: it.native.clone(),
                fidelity: format!("{:?}", it.fidelity),
            })
            .collect();
    PubsubSummary {
        metric: cfg.mode.metric().replace('_', " "),
        definition,
        send_lateness: engine::SEND_LATENESS_DEFINITION,
        cases,
        qos,
        notes: &o.notes,
    }
}
