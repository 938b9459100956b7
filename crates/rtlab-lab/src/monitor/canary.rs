//! The timer canary: one thread at the application's policy and priority on its CPU, woken
//! at absolute expiries (`clock_nanosleep(TIMER_ABSTIME)`) at a low rate; each wake-up's
//! latency (the time it woke minus the expiry it asked for) goes into [`CanaryStats`].
//!
//! Contract: its loop only sleeps, reads the clock and adds to atomics. An expiry already
//! past when it wakes is skipped and counted (`overruns`), so one long stall is one miss, not
//! a burst of catch-up wake-ups. It ends within one period of `stop`.

use super::config::CanaryConfig;
use super::stats::CanaryStats;
use rtlab_core::sink::SpikeHook;
use rtlab_sys::clock::{monotonic_ns, sleep_until};
use rtlab_sys::sched::{spawn_rt, RtThread, ThreadSpec};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Start the canary; one line why when its policy, priority or CPU is refused. `spike`: a
/// wake-up later than its threshold raises its flag (the kernel tracer's), as a recorder's
/// hook does.
pub fn start(
    cfg: &CanaryConfig,
    stats: Arc<CanaryStats>,
    stop: Arc<AtomicBool>,
    spike: Option<SpikeHook>,
) -> Result<RtThread<()>, String> {
    let spec = ThreadSpec {
        name: "rtlab-canary".into(),
        policy: cfg.policy,
        priority: cfg.priority,
        cpus: cfg.cpu.map(|c| vec![c]),
        stack_bytes: 256 * 1024,
    };
    let period = cfg.rate.period_ns;
    let deadline = cfg.deadline_ns();
    spawn_rt(&spec, move || {
        stats.tid.store(rtlab_sys::tasks::gettid(), Ordering::Relaxed);
        let mut next = monotonic_ns() + period;
        let mut index = 0u64;
        while !stop.load(Ordering::Relaxed) {
            sleep_until(next);
            let now = monotonic_ns();
            let late = now - next;
            stats.latency.record(late);
            stats.max.record(late);
            if late > deadline {
                stats.misses.fetch_add(1, Ordering::Relaxed);
            }
            if let Some(h) = spike.as_ref().filter(|h| late > h.threshold_ns) {
                let f = &h.flag;
                if !f.hit.load(Ordering::Relaxed)
                    && f.claimed
                        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                {
                    f.source.store(0, Ordering::Release);
                    f.index.store(index, Ordering::Release);
                    f.at_ns.store(now, Ordering::Release);
                    f.value_ns.store(late, Ordering::Release);
                    f.hit.store(true, Ordering::Release);
                    stats.spikes.fetch_add(1, Ordering::Relaxed);
                }
            }
            index += 1;
            next += period;
            if now >= next {
                let skipped = (now - next) / period + 1;
                stats.overruns.fetch_add(skipped as u64, Ordering::Relaxed);
                next += skipped * period;
            }
        }
    })
    .map_err(|e| {
        format!(
            "canary: {} priority {}{}: {e}",
            cfg.policy.name(),
            cfg.priority,
            cfg.cpu.map(|c| format!(" on CPU {c}")).unwrap_or_default()
        )
    })
}
