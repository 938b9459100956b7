//! A udp case of a scenario (S1): two hosts on this machine (a netns pair joined by veth),
//! the reflector in side b, the ping from side a every `period` (default 1 ms) with the
//! case's payload and SO_PRIORITY, under the case's process settings; a traffic load runs
//! through the same pair. The pair is removed when the case ends, however it ends.

use super::ProcessSettings;
use crate::runner::CaseResult;
use rtlab_core::scenario::CaseSpec;
use rtlab_core::units::{parse_duration, parse_size};
use rtlab_probes::netns::NetnsPair;
use rtlab_probes::udp::ping::PingMode;
use rtlab_probes::udp::run::{RtConfig, SocketConfig, UdpPingConfig};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The ping of a case.
pub fn ping_config(case: &CaseSpec, ps: &ProcessSettings) -> anyhow::Result<UdpPingConfig> {
    let mode = match case.params.get("mode").map(String::as_str) {
        Some("pingpong") => PingMode::Pingpong,
        _ => PingMode::Periodic,
    };
    let period_ns =
        parse_duration(case.params.get("period").map(String::as_str).unwrap_or("1ms"))?.0;
    let payload =
        parse_size(case.params.get("payload").map(String::as_str).unwrap_or("500"))? as usize;
    let loss_timeout_ns =
        parse_duration(case.params.get("loss_timeout").map(String::as_str).unwrap_or("500ms"))?.0;
    let so_priority = case.params.get("so_priority").map(|p| p.parse::<u32>()).transpose()?;
    Ok(UdpPingConfig {
        to: String::new(), // the pair decides
        bind: None,
        netns: None,
        mode,
        period_ns,
        payload,
        deadline_ns: case.deadline_ns.unwrap_or(if mode == PingMode::Periodic {
            period_ns
        } else {
            1_000_000
        }),
        loss_timeout_ns,
        duration_ns: case.duration_ns,
        count: case.count,
        window_ns: 1_000_000_000,
        rt: RtConfig {
            policy: ps.policy.into(),
            priority: ps.priority,
            cpu: ps.cpu,
            mlockall: ps.mlockall,
        },
        socket: SocketConfig { so_priority, ..SocketConfig::default() },
        preflight_ns: 2_000_000_000,
        spike: None,
    })
}

pub fn run(
    case: &CaseSpec,
    ps: &ProcessSettings,
    pair: &NetnsPair,
    ev: &crate::evidence::EvidenceOptions,
    stop: &Arc<AtomicBool>,
) -> CaseResult {
    let mut cfg = match ping_config(case, ps) {
        Ok(c) => c,
        Err(e) => return CaseResult::failed(format!("udp configuration: {e}")),
    };
    let env = rtlab_sys::env::detect(std::path::Path::new("/"));
    let pair_json = pair.config.clone();
    let evidence = match crate::evidence::EvidenceRun::start(super::setup::host(), ev) {
        Ok(e) => e,
        Err(e) => return CaseResult::failed(e.to_string()),
    };
    cfg.spike = evidence.hook();
    match crate::cmd::udp::measure(
        cfg,
        Some(pair),
        stop.clone(),
        env,
        |c| serde_json::json!({ "role": "ping", "ping": c, "pair": pair_json }),
        |_, _| {},
    ) {
        Ok(mut run) => {
            run.doc.evidence = Some(evidence.finish(&run.doc.streams));
            CaseResult { document: Some(run.doc), ..Default::default() }
        }
        Err(e) => CaseResult::failed(format!("udp: {e}")),
    }
}
