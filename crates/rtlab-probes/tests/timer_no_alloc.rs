//! The timer hot loop allocates nothing: a counting global allocator watches a real run
//! (real clock, real sleeps) with every recorder feature on — histogram, windows, missed
//! deadlines, the cyclictest histogram with overflows, the raw-sample ring, the spike flag.
//! This file holds a single test so that no other test thread allocates meanwhile.

use rtlab_core::raw::raw_ring;
use rtlab_core::sink::{Recorder, RecorderConfig, SpikeFlag};
use rtlab_probes::clock::MonotonicClock;
use rtlab_probes::timer::{run_loop, Schedule, TimerMode};
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

        ALLOCS.store(0, Ordering::SeqCst);
        COUNTING.store(true, Ordering::SeqCst);
        run_loop(&mut clock, sched, start, &mut latency, &mut jitter, &stop, &progress);
        COUNTING.store(false, Ordering::SeqCst);

        assert_eq!(ALLOCS.load(Ordering::SeqCst), 0, "{mode:?}: the hot loop allocated");
        assert_eq!(latency.count(), 300);
        assert_eq!(jitter.count(), 299);
        assert!(flag.get().is_some());
        assert!(consumer.dropped() > 0);
        assert!(latency.windows.width_ns() > 1_000_000, "windows widened in place");
    }
}
