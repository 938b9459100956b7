//! The work a cyclic job does each cycle, and the calibration that turns "compute for N ns"
//! into a fixed number of loop iterations.
//!
//! Contract:
//! - [`spin`] is a dependent chain of multiply-adds with `std::hint::black_box` on every
//!   step: the optimizer can neither remove, fold nor vectorise it, so its cost is linear in
//!   the iteration count and touches no memory beyond one stack slot.
//! - [`walk`] reads and writes one byte every `stride` bytes over the whole buffer, in
//!   address order: `ceil(bytes / stride)` touches per cycle. With a stride of a cache line
//!   (64) or more every touch is a different line; with a buffer larger than the caches the
//!   walk misses them; with a stride of a page (4096) or more every touch is also a different
//!   page (TLB misses, and the hardware prefetcher stops at page boundaries).
//! - [`calibrate`] runs in the measuring thread (same CPU, same policy and priority) before
//!   the measurement, once: the iteration count is then fixed for the whole run, so a job
//!   that takes longer than asked on a loaded machine shows up in `job_duration` instead of
//!   being calibrated away.
//! - [`Job::run`] never allocates, locks or prints: the buffer of a memory walk is
//!   allocated before the measuring thread starts.

use serde::{Deserialize, Serialize};
use std::hint::black_box;

/// What a cyclic job does between its wake-up and its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Work {
    /// Compute for about `ns` nanoseconds of this CPU's undisturbed speed: a calibrated,
    /// fixed number of [`spin`] iterations (0: no work, the job is only its two clock reads).
    Compute { ns: i64 },
    /// Walk a preallocated buffer of `bytes` bytes once per cycle, reading and writing one
    /// byte every `stride` bytes: `ceil(bytes / stride)` touches per cycle.
    MemoryWalk { bytes: usize, stride: usize },
}

/// The largest buffer a memory walk may ask for (1 GiB).
pub const MAX_WALK_BYTES: usize = 1 << 30;

impl Work {
    /// `compute` or `memory_walk`, as in configurations and stream labels.
    pub fn kind(&self) -> &'static str {
        match self {
            Work::Compute { .. } => "compute",
            Work::MemoryWalk { .. } => "memory_walk",
        }
    }

    /// Bytes touched per cycle by a memory walk (`ceil(bytes / stride)`; None for compute).
    pub fn touches_per_cycle(&self) -> Option<usize> {
        match *self {
            Work::Compute { .. } => None,
            Work::MemoryWalk { bytes, stride } => Some(bytes.div_ceil(stride.max(1))),
        }
    }

    /// A one-line description, e.g. `compute 100000 ns` or `memory walk 8388608 B stride 4096`.
    pub fn describe(&self) -> String {
        match *self {
            Work::Compute { ns } => format!("compute {ns} ns"),
            Work::MemoryWalk { bytes, stride } => format!(
                "memory walk {bytes} B stride {stride} ({} touches per cycle)",
                bytes.div_ceil(stride.max(1))
            ),
        }
    }

    /// Check the values; the message names the field and what would be accepted.
    pub fn check(&self) -> Result<(), String> {
        match *self {
            Work::Compute { ns } if ns < 0 => {
                Err(format!("work: compute ns is {ns}; must be 0 or more"))
            }
            Work::MemoryWalk { bytes, .. } if bytes == 0 || bytes > MAX_WALK_BYTES => Err(format!(
                "work: memory walk bytes is {bytes}; must be 1..={MAX_WALK_BYTES} (1 GiB)"
            )),
            Work::MemoryWalk { stride: 0, .. } => {
                Err("work: memory walk stride is 0; must be at least 1 byte".into())
            }
            _ => Ok(()),
        }
    }
}

/// `iterations` steps of a dependent multiply-add chain; returns the chain's value.
#[inline(never)]
pub fn spin(iterations: u64) -> u64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..iterations {
        // Knuth's MMIX LCG constants; black_box makes every step opaque to the optimizer
        x = black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i | 1));
    }
    x
}

/// Read and write one byte every `stride` bytes of `buf`, in address order.
#[inline(never)]
pub fn walk(buf: &mut [u8], stride: usize) -> u8 {
    let stride = stride.max(1);
    let mut acc = 0u8;
    let mut i = 0;
    while i < buf.len() {
        let v = buf[i].wrapping_add(1);
        buf[i] = v;
        acc ^= v;
        i += stride;
    }
    // the buffer escapes: its writes must happen
    black_box(buf.as_mut_ptr());
    black_box(acc)
}

/// A job ready to run: its iteration count fixed, or its buffer allocated.
#[derive(Debug)]
pub enum Job {
    Compute { iterations: u64 },
    MemoryWalk { buf: Vec<u8>, stride: usize },
}

impl Job {
    /// The job of a [`Work`]; a memory walk's buffer is allocated here (not yet touched:
    /// see [`Job::prefault`]); a computation gets its iterations from [`calibrate`] later.
    pub fn new(work: &Work) -> Job {
        match *work {
            Work::Compute { .. } => Job::Compute { iterations: 0 },
            Work::MemoryWalk { bytes, stride } => {
                Job::MemoryWalk { buf: vec![0u8; bytes], stride: stride.max(1) }
            }
        }
    }

    /// Write every byte of a memory walk's buffer, so that every page is present (and
    /// locked, under mlockall) before the loop; call it in the measuring thread.
    pub fn prefault(&mut self) {
        if let Job::MemoryWalk { buf, .. } = self {
            for (i, b) in buf.iter_mut().enumerate() {
                *b = i as u8;
            }
            black_box(buf.as_mut_ptr());
        }
    }

    /// One cycle's work. Never allocates.
    #[inline]
    pub fn run(&mut self) {
        match self {
            Job::Compute { iterations } => {
                black_box(spin(*iterations));
            }
            Job::MemoryWalk { buf, stride } => {
                walk(buf, *stride);
            }
        }
    }
}

/// How a computation was calibrated, reported with the outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The work asked for, ns.
    pub asked_ns: i64,
    /// Iterations of [`spin`] each cycle runs (fixed for the whole run).
    pub iterations: u64,
    /// Iterations per microsecond, from the fastest round (the least disturbed one).
    pub iterations_per_us: f64,
    /// How it was measured, in words.
    pub method: String,
    /// Timed rounds (after the warm-up).
    pub rounds: u32,
    /// Iterations in each timed round.
    pub round_iterations: u64,
    /// Fastest, median and slowest round, ns.
    pub round_min_ns: i64,
    pub round_median_ns: i64,
    pub round_max_ns: i64,
    /// `(slowest - fastest) / fastest` over the rounds: 0.02 is a quiet CPU; a large spread
    /// says the calibration itself was disturbed (the iteration count is still from the
    /// fastest round).
    pub spread: f64,
    /// One run of `iterations`, timed right after the calibration, ns.
    pub check_ns: i64,
    /// The CPU the calibration ran on (None: unknown).
    pub cpu: Option<usize>,
}

/// Warm-up spinning before the timed rounds (lets a frequency governor settle), ns.
pub const WARMUP_NS: i64 = 20_000_000;
/// Timed rounds.
pub const ROUNDS: u32 = 15;
/// A timed round lasts the asked work, clamped to this range (ns): long enough to dwarf the
/// two clock reads, short enough to fit between two interruptions of a noisy machine.
pub const ROUND_NS: (i64, i64) = (100_000, 2_000_000);

/// Find how many [`spin`] iterations take `ns` on this CPU, reading time with `now`.
///
/// Method: double an iteration count until one run takes 200 us (a rough rate), spin
/// [`WARMUP_NS`], then time [`ROUNDS`] rounds of the asked duration (clamped to
/// [`ROUND_NS`]) and take the rate of the fastest round. `cpu` is only reported.
pub fn calibrate(ns: i64, cpu: Option<usize>, mut now: impl FnMut() -> i64) -> Calibration {
    let mut time = |n: u64| {
        let t0 = now();
        black_box(spin(black_box(n)));
        (now() - t0).max(1)
    };
    // a rough rate
    let mut n: u64 = 1_024;
    let mut took = time(n);
    while took < 200_000 && n < 1 << 40 {
        n *= 2;
        took = time(n);
    }
    let rough_per_ns = n as f64 / took as f64;
    // warm-up
    let chunk = ((rough_per_ns * 1_000_000.0) as u64).max(1);
    let mut warm = 0;
    while warm < WARMUP_NS {
        warm += time(chunk);
    }
    // timed rounds
    let round_ns = ns.clamp(ROUND_NS.0, ROUND_NS.1);
    let round_iterations = ((rough_per_ns * round_ns as f64) as u64).max(1);
    let mut rounds = [0i64; ROUNDS as usize];
    for r in rounds.iter_mut() {
        *r = time(round_iterations);
    }
    rounds.sort_unstable();
    let (min, median, max) = (rounds[0], rounds[rounds.len() / 2], rounds[rounds.len() - 1]);
    let per_ns = round_iterations as f64 / min as f64;
    let iterations = (per_ns * ns.max(0) as f64).round() as u64;
    let check_ns = if iterations > 0 { time(iterations) } else { 0 };
    Calibration {
        asked_ns: ns,
        iterations,
        iterations_per_us: per_ns * 1_000.0,
        method: format!(
            "in the measuring thread (its CPU, policy and priority): {} ms warm-up, then {ROUNDS} \
             rounds of {round_iterations} iterations timed with CLOCK_MONOTONIC; the rate is \
             the fastest round's",
            WARMUP_NS / 1_000_000
        ),
        rounds: ROUNDS,
        round_iterations,
        round_min_ns: min,
        round_median_ns: median,
        round_max_ns: max,
        spread: (max - min) as f64 / min as f64,
        check_ns,
        cpu,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk_touches_every_stride_and_counts_them() {
        let mut buf = vec![0u8; 10];
        walk(&mut buf, 4);
        assert_eq!(buf, vec![1, 0, 0, 0, 1, 0, 0, 0, 1, 0]);
        assert_eq!(Work::MemoryWalk { bytes: 10, stride: 4 }.touches_per_cycle(), Some(3));
        assert_eq!(Work::MemoryWalk { bytes: 8, stride: 4 }.touches_per_cycle(), Some(2));
        assert_eq!(Work::Compute { ns: 5 }.touches_per_cycle(), None);
    }

    #[test]
    fn spin_depends_on_its_count() {
        assert_ne!(spin(10), spin(11));
        assert_eq!(spin(0), 0x9E37_79B9_7F4A_7C15);
    }

    #[test]
    fn work_checks_and_serde_shape() {
        assert!(Work::Compute { ns: -1 }.check().is_err());
        assert!(Work::Compute { ns: 0 }.check().is_ok());
        assert!(Work::MemoryWalk { bytes: 0, stride: 64 }.check().is_err());
        assert!(Work::MemoryWalk { bytes: 64, stride: 0 }.check().is_err());
        assert!(Work::MemoryWalk { bytes: MAX_WALK_BYTES + 1, stride: 64 }.check().is_err());
        let j = serde_json::to_string(&Work::MemoryWalk { bytes: 4096, stride: 64 }).unwrap();
        assert_eq!(j, r#"{"kind":"memory_walk","bytes":4096,"stride":64}"#);
        let w: Work = serde_json::from_str(r#"{"kind":"compute","ns":100000}"#).unwrap();
        assert_eq!(w, Work::Compute { ns: 100_000 });
    }

    #[test]
    fn calibration_on_the_real_clock_finds_iterations() {
        let c = calibrate(100_000, None, rtlab_sys::clock::monotonic_ns);
        assert!(c.iterations > 0, "{c:?}");
        assert!(c.iterations_per_us > 0.0);
        assert!(c.round_min_ns > 0 && c.round_min_ns <= c.round_median_ns);
        assert!(c.round_median_ns <= c.round_max_ns);
        assert!(c.check_ns > 0);
        assert!(c.spread >= 0.0);
    }
}
