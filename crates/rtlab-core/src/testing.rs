//! Building streams and kernel counters for tests (no root, no probe): what the evidence
//! is aligned with and rendered beside.

use crate::schema::Stream;

/// A stream `name` of 1 us windows whose maxima are `max` (None: an empty window), starting
/// at `start` (CLOCK_MONOTONIC ns).
pub fn stream(name: &str, max: Vec<Option<i64>>, start: Option<i64>) -> Stream {
    let mut r = crate::sink::Recorder::new(
        &crate::sink::RecorderConfig {
            deadline_ns: 1,
            window_ns: 1_000,
            window_capacity: 16,
            max_samples: None,
            us_histogram_buckets: None,
            spike_threshold_ns: None,
        },
        None,
    );
    for (i, m) in max.iter().enumerate() {
        if let Some(m) = m {
            crate::sink::Sink::record(&mut r, i as u64, i as i64 * 1_000, *m);
        }
    }
    r.origin_monotonic_ns = start;
    Stream::from_recorder(name, "rtt", "", Default::default(), &r)
}

/// Two CPUs' kernel counters made from `n` (a window's counters in tests).
pub fn counters(n: u64) -> crate::evidence::KernelCounters {
    crate::evidence::KernelCounters {
        net_rx: vec![n, 2 * n],
        timer: vec![1, 1],
        interrupts: vec![n, 0],
        ksoftirqd_ns: vec![0, n * 1000],
        context_switches: n,
        steal_ticks: vec![0, 0],
    }
}
