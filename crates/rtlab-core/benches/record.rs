//! The cost of recording one sample in a Recorder (histogram + exact moments + windows +
//! deadline), i.e. the measurement overhead rtlab adds to every wake-up. Plain harness:
//! `cargo bench -p rtlab-core --bench record` prints ns per sample.

use rtlab_core::sink::{Recorder, RecorderConfig, Sink};
use std::time::Instant;

fn main() {
    let cfg = RecorderConfig {
        deadline_ns: 1_000_000,
        window_ns: 1_000_000_000,
        window_capacity: 1 << 16,
        max_samples: None,
        us_histogram_buckets: None,
        spike_threshold_ns: None,
    };
    let mut r = Recorder::new(&cfg, None);
    let n: u64 = 20_000_000;
    // latencies spread like a real run: mostly tens of us, a tail to ms (xorshift, no allocation)
    let mut x: u64 = 0x9E3779B97F4A7C15;
    let t = Instant::now();
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let v = if x.is_multiple_of(1000) {
            (x % 5_000_000) as i64
        } else {
            10_000 + (x % 50_000) as i64
        };
        r.record(i, (i * 1_000_000) as i64, v);
    }
    let el = t.elapsed();
    std::hint::black_box(&r);
    println!(
        "Recorder::record: {:.1} ns per sample over {} samples ({} missed)",
        el.as_nanos() as f64 / n as f64,
        n,
        r.missed
    );
}
