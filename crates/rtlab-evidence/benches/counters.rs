//! What one sample of the per-window kernel counters costs (the sampler thread reads
//! /proc/softirqs, /proc/interrupts, /proc/stat and ksoftirqd/N's schedstat every period).
//! `cargo bench -p rtlab-evidence --bench counters`

use rtlab_evidence::counters::{ksoftirqd_pids, read_counters_of};
use rtlab_host::host::RealHost;

fn main() {
    let host = RealHost::new();
    let pids = ksoftirqd_pids(&host);
    let n = 2_000u32;
    let mut checksum = 0u64;
    // warm the page cache and the allocator
    for _ in 0..100 {
        checksum += read_counters_of(&host, &pids).context_switches;
    }
    let t0 = std::time::Instant::now();
    for _ in 0..n {
        checksum += read_counters_of(&host, &pids).context_switches;
    }
    let per = t0.elapsed() / n;
    let cpus = read_counters_of(&host, &pids).interrupts.len();
    println!("one counters sample: {:.1} us ({cpus} CPUs, {} ksoftirqd threads); at 8 samples per 1 s window: {:.3} % of one CPU (checksum {})", per.as_secs_f64() * 1e6, pids.len(), per.as_secs_f64() * 8.0 * 100.0, checksum % 7);
}
