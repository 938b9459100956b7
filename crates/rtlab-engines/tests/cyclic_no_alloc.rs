//! The cyclic hot loop allocates nothing: a counting global allocator watches real runs
//! (real clock, real sleeps, real work: a calibrated computation and a memory walk) with the
//! recorder features the probe uses on — histogram, windows (widened in place), missed
//! deadlines, the spike flag. Calibration and buffer allocation happen before counting.
//! This file holds a single test so that no other test thread allocates meanwhile.

use rtlab_core::sink::{Recorder, RecorderConfig, SpikeFlag};
use rtlab_engines::clock::MonotonicClock;
use rtlab_engines::cyclic::work::calibrate;
use rtlab_engines::cyclic::{run_cycles, CycleSinks, CyclicSchedule, Job, Work};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

mod common;

#[global_allocator]
static A: common::Counting = common::Counting;

#[test]
fn the_cyclic_loop_allocates_nothing() {
    for work in [Work::Compute { ns: 20_000 }, Work::MemoryWalk { bytes: 1 << 20, stride: 4096 }] {
        let cfg = RecorderConfig {
            deadline_ns: 1_000,   // most responses miss it: that path is exercised too
            window_ns: 1_000_000, // 1 ms windows: 300 slots of 100 us outlast 4 windows
            window_capacity: 4,
            max_samples: None,
            us_histogram_buckets: None,
            spike_threshold_ns: Some(0),
        };
        let flag = Arc::new(SpikeFlag::default());
        let mut sinks = CycleSinks {
            wakeup: Recorder::new(&cfg, None),
            job: Recorder::new(&cfg, None),
            response: Recorder::new(&cfg, None).with_spike(&cfg, flag.clone()),
        };
        let mut job = Job::new(&work);
        job.prefault();
        if let (Work::Compute { ns }, Job::Compute { iterations }) = (work, &mut job) {
            *iterations = calibrate(ns, None, rtlab_sys::clock::monotonic_ns).iterations;
        }
        let stop = AtomicBool::new(false);
        let progress = AtomicU64::new(0);
        let mut clock = MonotonicClock;
        let sched = CyclicSchedule {
            interval_ns: 100_000,
            duration_ns: Some(5_000_000_000),
            slots: Some(300),
        };
        let start = rtlab_sys::clock::monotonic_ns();

        let (_, allocs) = common::allocations_of(|| {
            run_cycles(
                &mut clock,
                sched,
                start,
                |_: &mut MonotonicClock| job.run(),
                &mut sinks,
                &stop,
                &progress,
            )
        });
        assert_eq!(allocs, 0, "{work:?}: the hot loop allocated");
        let cycles = sinks.response.count();
        assert_eq!(cycles + sinks.response.overruns, 300, "300 slots: cycles + skipped");
        assert_eq!(sinks.job.count(), cycles);
        assert_eq!(sinks.wakeup.count(), cycles);
        assert!(flag.get().is_some());
        assert!(sinks.response.windows.width_ns() > 1_000_000, "windows widened in place");
    }
}
