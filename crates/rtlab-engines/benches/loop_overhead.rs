//! What the timer loop itself costs per cycle, sleeping excluded: two CLOCK_MONOTONIC reads,
//! recording latency and cycle jitter, the overrun arithmetic. The clock reads real time
//! but its sleeps return at once, so the loop runs back to back.
//! `cargo bench -p rtlab-engines --bench loop_overhead`

use rtlab_core::sink::{Recorder, RecorderConfig};
use rtlab_engines::clock::Clock;
use rtlab_engines::timer::{run_loop, Schedule, TimerMode};
use std::sync::atomic::{AtomicBool, AtomicU64};

struct NoSleep;
impl Clock for NoSleep {
    fn now(&mut self) -> i64 {
        rtlab_sys::clock::monotonic_ns()
    }
    fn sleep_until(&mut self, _: i64) {}
    fn sleep_for(&mut self, _: i64) {}
}

fn main() {
    let n = 5_000_000u64;
    let cfg = RecorderConfig {
        deadline_ns: 1_000_000,
        window_ns: 1_000_000_000,
        window_capacity: 1 << 16,
        max_samples: Some(n),
        us_histogram_buckets: None,
        spike_threshold_ns: None,
    };
    let mut lat = Recorder::new(&cfg, None);
    let mut jit = Recorder::new(&RecorderConfig { max_samples: None, ..cfg.clone() }, None);
    let (stop, progress) = (AtomicBool::new(false), AtomicU64::new(0));
    let start = rtlab_sys::clock::monotonic_ns();
    let t0 = rtlab_sys::clock::monotonic_ns();
    run_loop(
        &mut NoSleep,
        Schedule { mode: TimerMode::Abs, interval_ns: 1, duration_ns: None, slots: None },
        start,
        &mut lat,
        &mut jit,
        &stop,
        &progress,
    );
    let el = rtlab_sys::clock::monotonic_ns() - t0;
    let t1 = rtlab_sys::clock::monotonic_ns();
    for _ in 0..n {
        std::hint::black_box(rtlab_sys::clock::monotonic_ns());
    }
    let clock_cost = (rtlab_sys::clock::monotonic_ns() - t1) as f64 / n as f64;
    println!("timer loop: {:.1} ns per cycle without sleeping ({} cycles), of which clock_gettime {:.1} ns x 2", el as f64 / n as f64, n, clock_cost);
}
