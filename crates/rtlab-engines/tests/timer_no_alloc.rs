//! The timer hot loop allocates nothing: a counting global allocator watches a real run
//! (real clock, real sleeps) with every recorder feature on — histogram, windows, missed
//! deadlines, the cyclictest histogram with overflows, the raw-sample ring, the spike flag.
//! Only the measuring thread's allocations count (tests/common).

use rtlab_core::raw::raw_ring;
use rtlab_core::sink::{Recorder, RecorderConfig, SpikeFlag};
use rtlab_engines::clock::MonotonicClock;
use rtlab_engines::timer::{run_loop, Schedule, TimerMode};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

mod common;

#[global_allocator]
static A: common::Counting = common::Counting;

#[test]
fn the_timer_loop_allocates_nothing() {
    for mode in [TimerMode::Abs, TimerMode::Rel] {
        let cfg = RecorderConfig {
            deadline_ns: 1_000,   // most samples miss it: that path is exercised too
            window_ns: 1_000_000, // 1 ms windows: 300 loops of 100 us outlast 4 windows
            window_capacity: 4,
            max_samples: Some(300),
            us_histogram_buckets: Some(2), // 2 us: overflows exercised
            spike_threshold_ns: Some(0),
        };
        let (producer, consumer) = raw_ring(64); // smaller than the run: drops exercised
        let flag = Arc::new(SpikeFlag::default());
        let mut latency = Recorder::new(&cfg, Some(producer)).with_spike(&cfg, flag.clone());
        let mut jitter = Recorder::new(&RecorderConfig { max_samples: None, ..cfg.clone() }, None);
        let stop = AtomicBool::new(false);
        let progress = AtomicU64::new(0);
        let mut clock = MonotonicClock;
        let sched =
            Schedule { mode, interval_ns: 100_000, duration_ns: Some(5_000_000_000), slots: None };
        let start = rtlab_sys::clock::monotonic_ns();

        let (_, allocs) = common::allocations_of(|| {
            run_loop(&mut clock, sched, start, &mut latency, &mut jitter, &stop, &progress)
        });
        assert_eq!(allocs, 0, "{mode:?}: the hot loop allocated");
        assert_eq!(latency.count(), 300);
        assert_eq!(jitter.count(), 299);
        assert!(flag.get().is_some());
        assert!(consumer.dropped() > 0);
        assert!(latency.windows.width_ns() > 1_000_000, "windows widened in place");
    }
}

#[test]
fn the_counter_sees_an_allocation_of_this_thread_only() {
    let (v, n) = common::allocations_of(|| std::hint::black_box(vec![0u8; 16]));
    assert_eq!((v.len(), n), (16, 1));
    let (_, n) = common::allocations_of(|| {
        std::thread::spawn(|| std::hint::black_box(vec![0u8; 16]).len()).join().unwrap()
    });
    assert!(n >= 1, "spawning allocates here; the other thread's vec does not count");
}
