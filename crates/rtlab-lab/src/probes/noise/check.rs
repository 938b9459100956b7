//! The `noise` row of `rtlab tune check`: the noise engine on each real-time CPU in turn,
//! judged against what a real-time CPU should show.
//!
//! Contract: holds the machine lock while it measures (another rtlab measuring: the row says
//! so, nothing measured); nothing here prints.

use crate::error::LabError;
use rtlab_engines::noise;
use rtlab_sys::sched::may_use_realtime;
use rtlab_sys::{cpus, env, SysError};
use rtlab_tune::check::{Check, Status};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The `noise` row: `rtlab noise` for `duration_ns` on each real-time CPU in turn (the
/// isolated ones, else every online CPU), at FIFO 80 where this process may (else SCHED_OTHER,
/// said), threshold 1 us. Pass below 50 us of longest gap and 0.1 % stolen; fail from 1 ms.
pub fn row(duration_ns: i64, stop: &Arc<AtomicBool>) -> Result<Check, LabError> {
    let row = |status, found: String, remedy: &str| Check {
        id: "noise",
        title: "noise (measured)",
        status,
        found,
        remedy: if status == Status::Pass { String::new() } else { remedy.to_string() },
    };
    let Some(_lock) = crate::guard::lock("rtlab tune check", false, |_| {})? else {
        return Ok(row(
            Status::Info,
            "not measured: another rtlab is measuring on this machine".into(),
            "",
        ));
    };
    let env = env::detect(Path::new("/"));
    let (online, _) = crate::host::online_cpus();
    let mut cpus = cpus::parse_cpu_list(&env.isolcpus).unwrap_or_default();
    cpus.retain(|c| online.contains(c));
    let which = if cpus.is_empty() {
        cpus = online.clone();
        "every online CPU"
    } else {
        "the isolated CPUs"
    };
    let mut fifo = may_use_realtime();
    let rt_of = |fifo: bool| rtlab_core::rt::RtSettings {
        policy: if fifo { rtlab_core::rt::Policy::Fifo } else { rtlab_core::rt::Policy::Other },
        priority: if fifo { 80 } else { 0 },
        cpus: None,
        mlockall: fifo,
    };
    // FIFO refused although the process may use it (a cgroup without real-time runtime):
    // measured at SCHED_OTHER, and said with the kernel's reason and its fix
    let mut refused: Option<(String, String)> = None;
    let mut parts = Vec::new();
    let (mut worst_max, mut worst_pct) = (0i64, 0f64);
    for &cpu in &cpus {
        let cfg = |fifo: bool| noise::NoiseConfig {
            cpus: vec![cpu],
            rt: rt_of(fifo),
            threshold_ns: 1_000,
            duration_ns,
            window_ns: duration_ns.min(1_000_000_000),
            stack_prefault_bytes: 64 << 10,
            cpu_dma_latency_us: None,
        };
        let mut ran = noise::run(&cfg(fifo), Arc::clone(stop), |_, _| {});
        if let Err(noise::NoiseError::Sys(SysError::RtRefused { policy, priority, cause, fix })) =
            &ran
        {
            refused = Some((
                format!("the kernel refused {policy} {priority} (EPERM){cause}"),
                fix.clone(),
            ));
            fifo = false;
            ran = noise::run(&cfg(false), Arc::clone(stop), |_, _| {});
        }
        let out = match ran {
            Ok(o) => o,
            Err(e) => {
                return Ok(row(
                    Status::Fail,
                    format!("not measured: on CPU {cpu}: {e}"),
                    "see the error; `rtlab noise --cpus N` measures one CPU with its own flags",
                ))
            }
        };
        for t in &out.threads {
            let max = t.gaps.summary().max_ns.unwrap_or(0);
            let pct = 100.0 * t.stolen_ns as f64 / t.measured_ns.max(1) as f64;
            worst_max = worst_max.max(max);
            worst_pct = worst_pct.max(pct);
            parts.push(format!(
                "cpu{}: max {}, {pct:.2}% stolen, {} gaps",
                t.cpu,
                rtlab_core::units::Nanos(max),
                t.gaps.count()
            ));
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    let status = if worst_max >= 1_000_000 {
        Status::Fail
    } else if worst_max >= 50_000 || worst_pct >= 0.1 || refused.is_some() {
        Status::Warn
    } else {
        Status::Pass
    };
    let policy = match &refused {
        Some((why, _)) => format!("other: {why}"),
        None if fifo => "fifo 80".into(),
        None => "other: no real-time privilege".into(),
    };
    let found = format!(
        "{} ({which}, {} each, {policy}, gaps above 1 us)",
        parts.join("; "),
        rtlab_core::units::format_duration_exact(rtlab_core::units::Nanos(duration_ns)),
    );
    if let Some((_, fix)) = refused {
        return Ok(row(status, found, &fix));
    }
    Ok(row(
        status,
        found,
        "isolate the real-time CPU (profile rt-isolation: isolcpus, nohz_full, rcu_nocbs, IRQs moved off), turn RT throttling off for long bursts (sched_rt_runtime_us = -1), and see what takes the CPU with `rtlab noise --cpus N --trace-on-spike 50us`",
    ))
}
