//! The noise busy loop allocates nothing: a counting global allocator watches a real run
//! (the real clock, a 1 ns threshold so that nearly every read is a gap) with every recorder
//! feature it uses on — histogram, windows widened in place, the spike flag — and windows
//! short enough that the stolen stream records often. Only the measuring thread's
//! allocations count (tests/common).

use rtlab_core::sink::{Recorder, RecorderConfig, SpikeFlag};
use rtlab_engines::clock::MonotonicClock;
use rtlab_engines::noise::{busy_loop, BusyPlan, NoiseSinks};
use rtlab_engines::timer::LoopEnd;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

mod common;

#[global_allocator]
static A: common::Counting = common::Counting;

#[test]
fn the_noise_loop_allocates_nothing() {
    let cfg = RecorderConfig {
        deadline_ns: i64::MAX,
        window_ns: 1_000_000, // 1 ms windows: 50 ms outlast 4 of them (widened in place)
        window_capacity: 4,
        max_samples: None,
        us_histogram_buckets: None,
        spike_threshold_ns: Some(0),
    };
    let flag = Arc::new(SpikeFlag::default());
    let mut sinks = NoiseSinks {
        gaps: Recorder::new(&cfg, None).with_spike(&cfg, flag.clone()),
        stolen: Recorder::new(&cfg, None),
    };
    let (stop, progress) = (AtomicBool::new(false), AtomicU64::new(0));
    let mut clock = MonotonicClock;
    let start = rtlab_sys::clock::monotonic_ns();
    let plan = BusyPlan { start, duration_ns: 50_000_000, threshold_ns: 1, window_ns: 100_000 };
    let (end, allocs) =
        common::allocations_of(|| busy_loop(&mut clock, plan, &mut sinks, &stop, &progress));
    assert_eq!(allocs, 0, "the hot loop allocated");
    assert_eq!(end.end, LoopEnd::Duration);
    assert!(sinks.gaps.count() > 1_000, "nearly every read is a gap at 1 ns");
    assert_eq!(sinks.stolen.count(), 500, "50 ms of 100 us windows");
    assert!(flag.get().is_some());
    assert!(sinks.gaps.windows.width_ns() > 1_000_000, "windows widened in place");
}
