//! Spike evidence kept with a result: the kernel's counters per window, aligned with the
//! streams' per-window maxima, and what the tracer found around each spike it explained.
//!
//! Contract: pure data, what a result keeps (the store and the reports read it). Reading the
//! counters (/proc), sampling them, aligning them with the windows and tracing live in
//! rtlab-evidence; this module only holds, adds and describes them.

use crate::windows::WindowData;
use serde::{Deserialize, Serialize};

/// What the kernel counted, per CPU where the kernel counts per CPU (index = CPU number).
/// As a window's entry it holds the increase over that window.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelCounters {
    /// NET_RX softirqs raised (/proc/softirqs).
    pub net_rx: Vec<u64>,
    /// TIMER softirqs raised (/proc/softirqs).
    pub timer: Vec<u64>,
    /// Every device and system interrupt (/proc/interrupts, all rows summed).
    pub interrupts: Vec<u64>,
    /// CPU time of ksoftirqd/N, ns (/proc/PID/schedstat).
    pub ksoftirqd_ns: Vec<u64>,
    /// Context switches of the whole machine (/proc/stat `ctxt`).
    pub context_switches: u64,
    /// Steal time in USER_HZ ticks (/proc/stat): the hypervisor ran something else.
    pub steal_ticks: Vec<u64>,
}

fn add_into(a: &mut Vec<u64>, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

impl KernelCounters {
    /// What happened between `self` (earlier) and `later`.
    pub fn delta(&self, later: &KernelCounters) -> KernelCounters {
        let d = |a: &[u64], b: &[u64]| a.iter().zip(b).map(|(x, y)| y.saturating_sub(*x)).collect();
        KernelCounters {
            net_rx: d(&self.net_rx, &later.net_rx),
            timer: d(&self.timer, &later.timer),
            interrupts: d(&self.interrupts, &later.interrupts),
            ksoftirqd_ns: d(&self.ksoftirqd_ns, &later.ksoftirqd_ns),
            context_switches: later.context_switches.saturating_sub(self.context_switches),
            steal_ticks: d(&self.steal_ticks, &later.steal_ticks),
        }
    }

    /// Add another window's increase to this one.
    pub fn add(&mut self, o: &KernelCounters) {
        add_into(&mut self.net_rx, &o.net_rx);
        add_into(&mut self.timer, &o.timer);
        add_into(&mut self.interrupts, &o.interrupts);
        add_into(&mut self.ksoftirqd_ns, &o.ksoftirqd_ns);
        self.context_switches += o.context_switches;
        add_into(&mut self.steal_ticks, &o.steal_ticks);
    }

    /// One line: the totals over CPUs, and the CPU that took the most of each.
    pub fn describe(&self) -> String {
        let part = |name: &str, v: &[u64], ns: bool| {
            let show = |x: u64| if ns { format!("{} us", x / 1_000) } else { x.to_string() };
            let total: u64 = v.iter().sum();
            // the first CPU with the largest count
            let top =
                v.iter().enumerate().fold(None, |best: Option<(usize, u64)>, (i, &x)| match best {
                    Some((_, b)) if b >= x => best,
                    _ => Some((i, x)),
                });
            match top {
                Some((cpu, t)) if v.len() > 1 && t > 0 => {
                    format!("{name} {} (CPU {cpu}: {})", show(total), show(t))
                }
                _ => format!("{name} {}", show(total)),
            }
        };
        format!(
            "{}, {}, {}, {}, context switches {}, {}",
            part("NET_RX", &self.net_rx, false),
            part("TIMER", &self.timer, false),
            part("IRQs", &self.interrupts, false),
            part("ksoftirqd ran", &self.ksoftirqd_ns, true),
            self.context_switches,
            part("steal ticks", &self.steal_ticks, false),
        )
    }
}

/// Counters per window, on the same grid as a stream's per-window maxima: window k covers
/// [start + k*width_ns, start + (k+1)*width_ns) where start is `start_monotonic_ns`, the
/// instant of the stream's `at_ns` = 0 (CLOCK_MONOTONIC).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowCounters {
    pub width_ns: i64,
    /// The grid's origin (CLOCK_MONOTONIC ns); None: the sampling's own start (the probe did
    /// not say when it started; off by the probe's set-up time).
    pub start_monotonic_ns: Option<i64>,
    /// How finely the counters were sampled: a window's counters may include up to half of
    /// this from each neighbour.
    pub resolution_ns: i64,
    pub windows: Vec<KernelCounters>,
    /// Whether the last window was cut short by the end of the run.
    pub last_partial: bool,
}

impl WindowCounters {
    /// The `n` windows of `stream` with the largest maxima, with the counters of the same
    /// window when the widths agree: (window index, max ns, counters).
    pub fn worst<'a>(
        &'a self,
        stream: &WindowData,
        n: usize,
    ) -> Vec<(usize, i64, Option<&'a KernelCounters>)> {
        let mut w: Vec<(usize, i64)> =
            stream.max_ns.iter().enumerate().filter_map(|(i, m)| m.map(|m| (i, m))).collect();
        w.sort_by_key(|&(i, m)| (std::cmp::Reverse(m), i));
        w.truncate(n);
        let aligned = stream.width_ns == self.width_ns;
        w.into_iter()
            .map(|(i, m)| (i, m, if aligned { self.windows.get(i) } else { None }))
            .collect()
    }
}

/// One sample above the threshold and what the tracer found around it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExplainedSpike {
    /// The sample's stream (None: the probe did not say).
    #[serde(default)]
    pub stream: Option<String>,
    /// Its index in its stream, when (ns after the stream's start) and its value.
    pub index: u64,
    pub at_ns: i64,
    pub value_ns: i64,
    /// Where the kernel trace around it was saved.
    pub trace_file: Option<String>,
    /// The explanation, most important first.
    pub attribution: Vec<String>,
}

/// What the tracer found around the samples above the threshold: the first one in the flat
/// fields (as before `spikes` existed), and every one it explained (at most a bound, the
/// first included) in `spikes`, in the order they crossed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpikeEvidence {
    pub threshold_ns: i64,
    /// The stream of the sample that crossed it (None: none crossed, or the probe did not say).
    #[serde(default)]
    pub stream: Option<String>,
    /// The sample that crossed it: its index in its stream, when (ns after the stream's
    /// start) and its value. None: no sample crossed it.
    pub index: Option<u64>,
    pub at_ns: Option<i64>,
    pub value_ns: Option<i64>,
    /// Where the kernel trace around the spike was saved.
    pub trace_file: Option<String>,
    /// The explanation, most important first ("preempted by pid 812 (rustc) for 4.7 ms").
    pub attribution: Vec<String>,
    /// The kernel's own view (rtla timerlat) when it ran alongside.
    pub timerlat: Option<serde_json::Value>,
    /// Every sample above the threshold the tracer explained, in order (the first is the one
    /// above). Empty when none crossed it, and in a document written before it existed.
    #[serde(default)]
    pub spikes: Vec<ExplainedSpike>,
}

/// Everything kept to explain a result's spikes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub counters: Option<WindowCounters>,
    pub spike: Option<SpikeEvidence>,
    /// What could not be collected on this machine, and why.
    pub notes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::counters as k;

    #[test]
    fn delta_and_add_are_inverse() {
        let a = k(1);
        let mut b = k(5);
        b.net_rx.push(9); // a CPU came online: no earlier value, no delta
        let d = a.delta(&b);
        assert_eq!(d.net_rx, vec![4, 8]);
        assert_eq!(d.context_switches, 4);
        let mut s = a.clone();
        s.add(&d);
        assert_eq!(s.net_rx, vec![5, 10]);
        assert_eq!(s.context_switches, 5);
    }

    #[test]
    fn the_worst_windows_carry_their_counters() {
        let w = WindowCounters {
            width_ns: 1_000,
            start_monotonic_ns: None,
            resolution_ns: 1_000,
            windows: (0..3).map(k).collect(),
            last_partial: false,
        };
        let s = WindowData {
            width_ns: 1_000,
            max_ns: vec![Some(5), None, Some(9)],
            count: vec![1, 0, 1],
        };
        let worst = w.worst(&s, 2);
        assert_eq!(worst.iter().map(|x| (x.0, x.1)).collect::<Vec<_>>(), vec![(2, 9), (0, 5)]);
        assert_eq!(worst[0].2.unwrap().context_switches, 2);
        let wide = WindowData { width_ns: 2_000, ..s };
        assert!(w.worst(&wide, 1)[0].2.is_none(), "different widths are not paired");
    }

    #[test]
    fn describe_names_the_busiest_cpu() {
        let d = k(3).describe();
        assert_eq!(d, "NET_RX 9 (CPU 1: 6), TIMER 2 (CPU 0: 1), IRQs 3 (CPU 0: 3), ksoftirqd ran 3 us (CPU 1: 3 us), context switches 3, steal ticks 0");
    }
}
