//! A pubsub case of a scenario: one transport, mode, payload, rate (or period), subscriber
//! count and QoS, under the case's process settings (S2, S3). Subscribers run in separate
//! processes (this binary re-executed in its hidden subscriber role).

use super::ProcessSettings;
use crate::runner::CaseResult;
use rtlab_core::scenario::CaseSpec;
use rtlab_core::units::{parse_duration, parse_size, period_of_rate};
use rtlab_pubsub::probe::{Mode, PubsubConfig, RtSpec, TransportKind, TransportSpec};
use rtlab_pubsub::transport::{Durability, History, Qos, Reliability, WaitStyle};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The probe configuration of a case (defaults: oneway, 64 B, 100 Hz, 1 subscriber,
/// best effort, keep last 1, volatile, blocking waits).
pub fn pubsub_config(case: &CaseSpec, ps: &ProcessSettings) -> anyhow::Result<PubsubConfig> {
    let p = |k: &str| case.params.get(k).map(String::as_str);
    let kind = TransportKind::parse(p("transport").unwrap_or("intra"))
        .ok_or_else(|| anyhow::anyhow!("unknown transport"))?;
    let period_ns = match (p("period"), p("rate")) {
        (Some(d), _) => parse_duration(d)?.0,
        (None, Some(r)) => period_of_rate(r)?.0,
        (None, None) => 10_000_000,
    };
    let history = History::parse(p("history").unwrap_or("keep-last:1"))
        .ok_or_else(|| anyhow::anyhow!("history"))?;
    Ok(PubsubConfig {
        transport: TransportSpec::new(kind),
        mode: if p("mode") == Some("roundtrip") { Mode::Roundtrip } else { Mode::Oneway },
        wait: if p("wait") == Some("busy-poll") {
            WaitStyle::BusyPoll
        } else {
            WaitStyle::Blocking
        },
        qos: Qos {
            reliability: if p("reliability") == Some("reliable") {
                Reliability::Reliable
            } else {
                Reliability::BestEffort
            },
            history,
            durability: if p("durability") == Some("transient-local") {
                Durability::TransientLocal
            } else {
                Durability::Volatile
            },
        },
        payloads: vec![parse_size(p("payload").unwrap_or("64"))? as usize],
        periods_ns: vec![period_ns],
        subscribers: vec![p("subscribers").map(str::parse).transpose()?.unwrap_or(1)],
        // a count-only case runs as long as its messages need, plus the loss timeout
        case_duration_ns: case
            .duration_ns
            .unwrap_or_else(|| case.count.unwrap_or(100) as i64 * period_ns + 1_000_000_000),
        case_messages: case.count,
        loss_timeout_ns: p("loss_timeout")
            .map(parse_duration)
            .transpose()?
            .map(|n| n.0)
            .unwrap_or(500_000_000),
        deadline_ns: case.deadline_ns,
        in_process: false,
        rt: RtSpec {
            policy: ps.policy.into(),
            priority: ps.priority,
            cpus: ps.cpu.map(|c| vec![c]),
        },
        window_ns: 1_000_000_000,
        mlockall: ps.mlockall,
        thread_priorities: Vec::new(),
        spike: None,
    })
}

pub fn run(
    case: &CaseSpec,
    ps: &ProcessSettings,
    mut ev: crate::evidence::EvidenceOptions,
    stop: &Arc<AtomicBool>,
) -> CaseResult {
    let mut cfg = match pubsub_config(case, ps) {
        Ok(c) => c,
        Err(e) => return CaseResult::failed(format!("pubsub configuration: {e}")),
    };
    let env = rtlab_sys::env::detect(std::path::Path::new("/"));
    crate::cmd::pubsub::fit_evidence(&cfg, &mut ev);
    let evidence = match crate::evidence::EvidenceRun::start(super::setup::host(), &ev) {
        Ok(e) => e,
        Err(e) => return CaseResult::failed(e.to_string()),
    };
    cfg.spike = evidence.hook();
    match crate::cmd::pubsub::measure(
        &cfg,
        None,
        stop.clone(),
        env,
        std::time::SystemTime::now(),
        &mut |_, _| {},
    ) {
        Ok((mut doc, _)) => {
            doc.evidence = Some(evidence.finish(&doc.streams));
            CaseResult { document: Some(doc), ..Default::default() }
        }
        Err(e) => CaseResult::failed(format!("pubsub: {e}")),
    }
}
