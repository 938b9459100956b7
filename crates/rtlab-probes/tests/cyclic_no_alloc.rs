//! The cyclic hot loop allocates nothing: a counting global allocator watches real runs
//! (real clock, real sleeps, real work: a calibrated computation and a memory walk) with the
//! recorder features the probe uses on — histogram, windows (widened in place), missed
//! deadlines, the spike flag. Calibration and buffer allocation happen before counting.
//! This file holds a single test so that no other test thread allocates meanwhile.

use rtlab_core::sink::{Recorder, RecorderConfig, SpikeFlag};
use rtlab_probes::clock::MonotonicClock;
use rtlab_probes::cyclic::work::calibrate;
use rtlab_probes::cyclic::{run_cycles, CycleSinks, CyclicSchedule, Job, Work};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static COUNTING: AtomicBool = AtomicBool::new(false);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static A: Counting = Counting;

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

        ALLOCS.store(0, Ordering::SeqCst);
        COUNTING.store(true, Ordering::SeqCst);
        run_cycles(
            &mut clock,
            sched,
            start,
            |_: &mut MonotonicClock| job.run(),
            &mut sinks,
            &stop,
            &progress,
        );
        COUNTING.store(false, Ordering::SeqCst);

        assert_eq!(ALLOCS.load(Ordering::SeqCst), 0, "{work:?}: the hot loop allocated");
        let cycles = sinks.response.count();
        assert_eq!(cycles + sinks.response.overruns, 300, "300 slots: cycles + skipped");
        assert_eq!(sinks.job.count(), cycles);
        assert_eq!(sinks.wakeup.count(), cycles);
        assert!(flag.get().is_some());
        assert!(sinks.response.windows.width_ns() > 1_000_000, "windows widened in place");
    }
}
