//! The kernel's counters per window: NET_RX and TIMER softirqs, interrupts, ksoftirqd's CPU
//! time, context switches and steal time, read from /proc and sampled on a helper thread
//! ([`CounterSampler`]) so they can be aligned with any stream's windows afterwards.
//!
//! Contract: the sampler never runs on a measuring thread (it keeps off the probe's CPUs, as
//! SCHED_OTHER) and what it keeps does not grow past the capacity given at start
//! ([`SampledCounters`]). The windows kept with a result are rtlab-core's
//! (`rtlab_core::evidence`). Source: Documentation/filesystems/proc.rst (softirqs,
//! interrupts, stat, schedstat).

use rtlab_host::host::Host;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::sampled::SampledCounters;
/// Kernel counters at one instant (per CPU where the kernel keeps them per CPU).
pub use rtlab_core::evidence::KernelCounters as Counters;

/// Steal ticks per CPU in /proc/stat's text (the 8th value of each `cpuN` line).
pub(crate) fn steal_ticks(stat: &str) -> Vec<u64> {
    stat.lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .map(|l| l.split_whitespace().nth(8).and_then(|v| v.parse().ok()).unwrap_or(0))
        .collect()
}

/// One `LABEL:` row of /proc/softirqs, per CPU.
fn per_cpu_row(text: &str, label: &str) -> Vec<u64> {
    text.lines()
        .find(|l| l.trim_start().starts_with(label))
        .map(|l| {
            l.trim_start()[label.len()..].split_whitespace().map_while(|w| w.parse().ok()).collect()
        })
        .unwrap_or_default()
}

/// The ksoftirqd/N threads, by CPU (found once: they live as long as their CPU is online).
pub fn ksoftirqd_pids(host: &dyn Host) -> Vec<(usize, i32)> {
    let mut k: Vec<(usize, i32)> = rtlab_host::host::tasks(host)
        .into_iter()
        .filter_map(|(pid, c)| Some((c.strip_prefix("ksoftirqd/")?.parse().ok()?, pid)))
        .collect();
    k.sort();
    k
}

/// Read the counters under `root`.
pub fn read_counters(host: &dyn Host) -> Counters {
    read_counters_of(host, &ksoftirqd_pids(host))
}

/// Read the counters, with the ksoftirqd threads found once by [`ksoftirqd_pids`] (what the
/// sampler does at every period).
pub fn read_counters_of(host: &dyn Host, ksoftirqd: &[(usize, i32)]) -> Counters {
    let soft = host.read("/proc/softirqs").unwrap_or_default();
    let ints = host.read("/proc/interrupts").unwrap_or_default();
    let ncpu = ints.lines().next().map(|l| l.split_whitespace().count()).unwrap_or(0);
    let mut interrupts = vec![0u64; ncpu];
    for l in ints.lines().skip(1) {
        for (i, w) in l.split_whitespace().skip(1).take(ncpu).enumerate() {
            match w.parse::<u64>() {
                Ok(v) => interrupts[i] += v,
                Err(_) => break,
            }
        }
    }
    let stat = host.read("/proc/stat").unwrap_or_default();
    let context_switches = stat
        .lines()
        .find_map(|l| l.strip_prefix("ctxt "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let ksoftirqd_ns = ksoftirqd
        .iter()
        .map(|(_, pid)| {
            host.read(&format!("/proc/{pid}/schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse().ok())
                .unwrap_or(0)
        })
        .collect();
    Counters {
        net_rx: per_cpu_row(&soft, "NET_RX:"),
        timer: per_cpu_row(&soft, "TIMER:"),
        interrupts,
        ksoftirqd_ns,
        context_switches,
        steal_ticks: steal_ticks(&stat),
    }
}

/// The shortest sampling period: reading the counters costs ~100 us of one CPU; at most
/// 100 times a second.
pub const MIN_SAMPLE_PERIOD_NS: i64 = 10_000_000;

/// The sampling period for probe windows of `window_ns`: an eighth of the window (so a
/// window's counters are off by at most 1/16 of a window at each end), never below
/// [`MIN_SAMPLE_PERIOD_NS`].
pub fn sample_period(window_ns: i64) -> i64 {
    (window_ns / 8).max(MIN_SAMPLE_PERIOD_NS)
}

/// Samples the counters once per period on its own thread (never a measuring one), with
/// CLOCK_MONOTONIC times, so they can be aligned with any stream's windows afterwards
/// ([`SampledCounters::align`]). The thread is not a measuring loop, but what it keeps does
/// not grow: at most `max_periods` entries in memory taken at the first one (merging
/// neighbours beyond).
pub struct CounterSampler {
    handle: Option<std::thread::JoinHandle<SampledCounters>>,
    stop: Arc<AtomicBool>,
}

impl CounterSampler {
    pub fn start(period: Duration, max_periods: usize) -> CounterSampler {
        CounterSampler::start_off(period, max_periods, &[])
    }

    /// [`CounterSampler::start`], the sampling thread kept off `cpus` (the probe's).
    pub fn start_off(period: Duration, max_periods: usize, cpus: &[usize]) -> CounterSampler {
        let avoid = cpus.to_vec();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let period_ns = period.as_nanos() as i64;
        let handle = std::thread::Builder::new()
            .name("rtlab-counters".into())
            .spawn(move || {
                // never compete with the probe: a profile may have made the process FIFO
                crate::helper::stay_off(&avoid);
                let host = rtlab_host::host::RealHost::new();
                let pids = ksoftirqd_pids(&host);
                let mut prev = read_counters_of(&host, &pids);
                let t0 = rtlab_sys::clock::monotonic_ns();
                let mut out = SampledCounters::new(period_ns, t0);
                // the grid stays at the first period even when the list merges neighbours
                let mut k = 1i64;
                loop {
                    let due = t0 + k * period_ns;
                    let mut now = rtlab_sys::clock::monotonic_ns();
                    while now < due && !s.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_nanos((due - now).min(5_000_000) as u64));
                        now = rtlab_sys::clock::monotonic_ns();
                    }
                    let cut_short = now < due;
                    let c = read_counters_of(&host, &pids);
                    out.push(prev.delta(&c), max_periods);
                    prev = c;
                    k += 1;
                    if s.load(Ordering::Relaxed) {
                        out.finish(cut_short);
                        return out;
                    }
                }
            })
            .expect("spawn the counter sampler");
        CounterSampler { handle: Some(handle), stop }
    }

    /// Stop and return the counters per period (the last one cut short by the stop).
    pub fn stop(mut self) -> SampledCounters {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().and_then(|h| h.join().ok()).unwrap_or_default()
    }
}

impl Drop for CounterSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

// ------------------------------------------------------------------ the tracer

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_and_subtracted() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        rtlab_host::testing::machine(r);
        rtlab_host::testing::put(r, "proc/softirqs", "                    CPU0       CPU1\n          HI:          0          0\n       TIMER:      10          20\n      NET_RX:       5          7\n");
        rtlab_host::testing::put(r, "proc/stat", "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 1 1 1 1 1 1 1 3 0 0\ncpu1 1 1 1 1 1 1 1 5 0 0\nctxt 1000\n");
        rtlab_host::testing::put(r, "proc/22/schedstat", "5000 10 2\n");
        rtlab_host::testing::put(r, "proc/14/schedstat", "3000 10 2\n");
        let host = rtlab_host::host::FakeHost::new(r);
        let a = read_counters(&host);
        assert_eq!(a.net_rx, vec![5, 7]);
        assert_eq!(a.timer, vec![10, 20]);
        assert_eq!(a.interrupts[1], 41999 + 3962 + 24292);
        assert_eq!(a.ksoftirqd_ns, vec![3000, 5000]);
        assert_eq!(a.context_switches, 1000);
        assert_eq!(a.steal_ticks, vec![3, 5]);
        rtlab_host::testing::put(r, "proc/softirqs", "                    CPU0       CPU1\n       TIMER:      15          20\n      NET_RX:       5          9\n");
        let b = read_counters(&host);
        let dd = a.delta(&b);
        assert_eq!((dd.net_rx, dd.timer), (vec![0, 2], vec![5, 0]));
    }
}
