//! How faithful the cyclic probe's work is: calibrate a computation of 10 us, 100 us and
//! 1 ms in this thread, then run the calibrated iteration count back to back and print the
//! distribution of what it really took (min / median / p99 / max against the asked time),
//! and what one memory walk costs per touch for a few buffer sizes and strides.
//! `cargo bench -p rtlab-engines --bench cyclic_work`

use rtlab_engines::cyclic::work::{calibrate, spin, walk};
use std::hint::black_box;

fn now() -> i64 {
    rtlab_sys::clock::monotonic_ns()
}

fn quantiles(mut v: Vec<i64>) -> (i64, i64, i64, i64) {
    v.sort_unstable();
    let q = |p: f64| v[((v.len() - 1) as f64 * p) as usize];
    (v[0], q(0.5), q(0.99), v[v.len() - 1])
}

fn main() {
    println!("compute: asked -> calibrated iterations, then 1000 runs (ns)");
    for asked in [10_000i64, 100_000, 1_000_000] {
        let c = calibrate(asked, rtlab_sys::sched::current_cpu(), now);
        let runs: Vec<i64> = (0..1000)
            .map(|_| {
                let t0 = now();
                black_box(spin(black_box(c.iterations)));
                now() - t0
            })
            .collect();
        let (min, med, p99, max) = quantiles(runs);
        println!(
            "  {asked:>8} ns: {:>9} iterations ({:.1}/us, calibration spread {:.3}); \
             min {min} median {med} p99 {p99} max {max}; median/asked {:.3}",
            c.iterations,
            c.iterations_per_us,
            c.spread,
            med as f64 / asked as f64
        );
    }
    println!("memory walk: one walk over the buffer, 200 walks (ns per touch, median)");
    for bytes in [64usize << 10, 4 << 20, 64 << 20] {
        for stride in [64usize, 4096] {
            let mut buf: Vec<u8> = (0..bytes).map(|i| i as u8).collect();
            let touches = bytes.div_ceil(stride);
            let runs: Vec<i64> = (0..200)
                .map(|_| {
                    let t0 = now();
                    walk(&mut buf, stride);
                    now() - t0
                })
                .collect();
            let (min, med, _, max) = quantiles(runs);
            println!(
                "  {:>6} KiB stride {stride:>4}: {touches:>7} touches, walk min {min} median {med} \
                 max {max} ns, {:.2} ns/touch",
                bytes >> 10,
                med as f64 / touches as f64
            );
        }
    }
}
