//! The timer probe: periodic wake-up latency (like cyclictest), the ROS-style relative
//! timer error, and the cycle jitter of S2.
//!
//! Contract:
//! - `abs` mode sleeps with `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)` on a grid
//!   anchored at the start: slot k is at `start + k*T`. The sample is `woke - slot` (>= 0).
//! - `rel` mode keeps the same grid of expected times but waits the way ROS timers do:
//!   it reads "now" and sleeps *relative* for `expected - now`. The sample is the signed
//!   `woke - expected` (it may be negative with a clock that fires early).
//! - In both modes a slot already past when the thread is ready for it is skipped and
//!   counted as an overrun: no drift, no catch-up burst (cyclictest keeps every slot and
//!   bursts; a naive `sleep(T)` loop drifts).
//! - Cycle jitter (S2): `d_k = t_k - k*T` (measured from the start) and
//!   `P_k = t_(k+1) - t_k - T = d_(k+1) - d_k` between consecutive measured cycles; when slots were
//!   skipped, `P = d_next - d_prev` still holds on the grid.
//! - The loop never allocates, locks, logs or prints: it pushes into two preallocated sinks
//!   and reads one atomic stop flag and writes one atomic progress counter.

use crate::clock::Clock;
use rtlab_core::sink::{Flow, Sink};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub mod ros;
pub mod roscpp;
pub mod run;

/// How the timer waits: rtlab's own loops (`abs`, `rel`), roscpp itself (`roscpp*`: a node of
/// Debian's ROS 1 in a process of its own, the [`roscpp`] module), or a model of a ROS timer
/// (the [`ros`] module: `oneshot-model`, `roscpp-model`, `rclcpp-model`; before roscpp could
/// run here, `oneshot` and `rclcpp` named the models, and old documents still read so).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimerMode {
    /// Absolute wake-ups on the grid (clock_nanosleep TIMER_ABSTIME).
    Abs,
    /// Relative sleeps to the expected time, like ROS timers.
    Rel,
    /// roscpp's `ros::Timer` (ROS time), its callbacks spun on the measuring thread.
    Roscpp,
    /// roscpp's `ros::WallTimer`.
    RoscppWall,
    /// roscpp's `ros::SteadyTimer` (CLOCK_MONOTONIC).
    RoscppSteady,
    /// S4's one-shot test on roscpp itself (bmwcarit/ros_realtime_tests' loop).
    RoscppOneshot,
    /// A model of S4's one-shot test as the suite ran it: a roscpp one-shot timer re-armed
    /// each loop, the test's reference read after roscpp's anchor, callbacks spun on the test
    /// thread.
    #[serde(alias = "oneshot")]
    OneshotModel,
    /// A model of roscpp's (2014) periodic timer: a timer thread in whole-ms waits queues
    /// callbacks to a `ros::spin` thread; one period on when due, restart from now when a
    /// period behind.
    RoscppModel,
    /// A model of the ROS 2 (rcl/rclcpp) wall timer in a single-threaded executor: runs when
    /// due, skips whole missed periods.
    #[serde(alias = "rclcpp")]
    RclcppModel,
}

/// Every mode's name, as the CLI and scenarios take it.
pub const MODE_NAMES: [&str; 9] = [
    "abs",
    "rel",
    "roscpp",
    "roscpp-wall",
    "roscpp-steady",
    "roscpp-oneshot",
    "oneshot-model",
    "roscpp-model",
    "rclcpp-model",
];

impl TimerMode {
    pub fn name(self) -> &'static str {
        match self {
            TimerMode::Abs => "abs",
            TimerMode::Rel => "rel",
            TimerMode::Roscpp => "roscpp",
            TimerMode::RoscppWall => "roscpp-wall",
            TimerMode::RoscppSteady => "roscpp-steady",
            TimerMode::RoscppOneshot => "roscpp-oneshot",
            TimerMode::OneshotModel => "oneshot-model",
            TimerMode::RoscppModel => "roscpp-model",
            TimerMode::RclcppModel => "rclcpp-model",
        }
    }
    /// roscpp itself (a node of its own), not a model.
    pub fn is_roscpp(self) -> bool {
        matches!(
            self,
            TimerMode::Roscpp
                | TimerMode::RoscppWall
                | TimerMode::RoscppSteady
                | TimerMode::RoscppOneshot
        )
    }
    /// A one-shot test (S4's), on roscpp or on the model: its second stream is `.anchor`.
    pub fn is_oneshot(self) -> bool {
        matches!(self, TimerMode::RoscppOneshot | TimerMode::OneshotModel)
    }
    /// The metric name of the primary sample in this mode.
    pub fn metric(self) -> &'static str {
        match self {
            TimerMode::Abs => "wakeup_latency",
            _ => "timer_error",
        }
    }
    pub fn definition(self) -> &'static str {
        match self {
            TimerMode::Abs => "actual wake time - scheduled absolute time (CLOCK_MONOTONIC, clock_nanosleep TIMER_ABSTIME)",
            TimerMode::Rel => "actual wake time - expected time, signed; each wait is a relative sleep to the expected time (ROS-style timer)",
            TimerMode::Roscpp => "current_real - current_expected of roscpp's ros::Timer (ROS time: CLOCK_REALTIME), signed; its callbacks spun on the measuring thread of a node of its own",
            TimerMode::RoscppWall => "current_real - current_expected of roscpp's ros::WallTimer (CLOCK_REALTIME), signed; its callbacks spun on the measuring thread of a node of its own",
            TimerMode::RoscppSteady => "current_real - current_expected of roscpp's ros::SteadyTimer (CLOCK_MONOTONIC), signed; its callbacks spun on the measuring thread of a node of its own",
            TimerMode::RoscppOneshot => "callback time - reference - period, signed, S4's one-shot test on roscpp itself: a ros::Timer one-shot re-armed by setPeriod, the reference (CLOCK_MONOTONIC) read after it, spinOnce busy on the same thread; the timer's own error is the .anchor stream",
            TimerMode::OneshotModel => "callback time - reference - period, signed, as S4 published it, on a model of roscpp: the reference (CLOCK_MONOTONIC) is read after roscpp anchored the re-armed one-shot timer at its own now, so a preemption between the two makes it smaller (down to -period); the timer's own error is the .anchor stream",
            TimerMode::RoscppModel => "current_real - current_expected of a model of roscpp's (2014) periodic timer on ROS time (CLOCK_REALTIME): timer thread in whole-ms waits, callbacks on a ros::spin thread; signed",
            TimerMode::RclcppModel => "callback start - expected call time of a model of a ROS 2 wall timer (CLOCK_MONOTONIC) in a single-threaded executor: runs only when due, skips whole missed periods",
        }
    }
}

/// Why a loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopEnd {
    /// The sink said stop (the planned number of loops).
    Count,
    /// The planned duration was reached.
    Duration,
    /// The stop flag was raised (Ctrl-C).
    Interrupted,
}

/// The schedule of one timer loop.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    pub mode: TimerMode,
    pub interval_ns: i64,
    /// Slots at or after `start + duration` are not taken (None: no limit).
    pub duration_ns: Option<i64>,
    /// Slots after the `slots`-th are not taken (None: no limit). Slots are counted, not
    /// samples: a skipped slot (an overrun) counts, so the run ends on time.
    pub slots: Option<u64>,
}

/// The slot to take after slot `k` when the thread is ready at `ready` (grid `start + j *
/// interval`), and how many slots that skips (overruns: no catch-up burst, no drift). Skipped
/// slots after `last` (the last slot of a count) are not counted: they were never asked for.
pub fn next_slot(k: i64, ready: i64, start: i64, interval: i64, last: Option<i64>) -> (i64, u64) {
    let next = k + 1;
    let first_future = (ready - start).div_euclid(interval) + 1;
    if first_future <= next {
        return (next, 0);
    }
    let skipped_to = (first_future - 1).min(last.unwrap_or(i64::MAX));
    (first_future, (skipped_to - next + 1).max(0) as u64)
}

/// The samples of a timer loop's cycles, every model's: `d_k` into `latency`, `P_k = d_k -
/// d_(k-1)` into `jitter` from the second cycle on, and the progress counter. Never
/// allocates, locks or blocks (the hot path of every timer model records through it).
pub struct Cycles<'a, L: Sink, J: Sink> {
    pub latency: &'a mut L,
    jitter: &'a mut J,
    progress: &'a AtomicU64,
    index: u64,
    prev: Option<i64>,
}

impl<'a, L: Sink, J: Sink> Cycles<'a, L, J> {
    pub fn new(latency: &'a mut L, jitter: &'a mut J, progress: &'a AtomicU64) -> Self {
        Cycles { latency, jitter, progress, index: 0, prev: None }
    }

    /// Record cycle `d` at `at` (ns from the loop's start); the latency sink's flow.
    #[inline]
    pub fn record(&mut self, at: i64, d: i64) -> Flow {
        let flow = self.latency.record(self.index, at, d);
        if let Some(p) = self.prev {
            self.jitter.record(self.index - 1, at, d - p);
        }
        self.prev = Some(d);
        self.index += 1;
        self.progress.store(self.index, Ordering::Relaxed);
        flow
    }
}

/// Why a loop ends before its next cycle, if it does: the stop flag, or `taken` slots of a
/// count of `slots` already taken.
#[inline]
pub fn stopped_or_counted(stop: &AtomicBool, slots: Option<u64>, taken: u64) -> Option<LoopEnd> {
    if stop.load(Ordering::Relaxed) {
        return Some(LoopEnd::Interrupted);
    }
    matches!(slots, Some(n) if taken >= n).then_some(LoopEnd::Count)
}

/// Run one timer loop from `start` (slot 0 is `start`; the first wake-up is slot 1).
/// `latency` receives `d_k` (the wake-up latency or timer error) for every measured
/// cycle, `jitter` receives `P_k` from the second cycle on. Returns why it ended.
pub fn run_loop<C: Clock, L: Sink, J: Sink>(
    clock: &mut C,
    sched: Schedule,
    start: i64,
    latency: &mut L,
    jitter: &mut J,
    stop: &AtomicBool,
    progress: &AtomicU64,
) -> LoopEnd {
    let t = sched.interval_ns;
    let end = sched.duration_ns.map(|d| start + d);
    let mut k: i64 = 1;
    let mut cycles = Cycles::new(latency, jitter, progress);
    loop {
        // slots 1..k-1 are taken (or skipped)
        if let Some(e) = stopped_or_counted(stop, sched.slots, (k - 1) as u64) {
            return e;
        }
        let slot = start + k * t;
        if let Some(end) = end {
            if slot > end {
                return LoopEnd::Duration;
            }
        }
        match sched.mode {
            TimerMode::Abs => clock.sleep_until(slot),
            // the ROS models have their own loops (the `ros` module); here they wait as `rel`
            _ => {
                let now = clock.now();
                clock.sleep_for(slot - now);
            }
        }
        let woke = clock.now();
        if cycles.record(woke - start, woke - slot) == Flow::Stop {
            return LoopEnd::Count;
        }
        // the next slot; those already past are skipped and counted
        let last = sched.slots.map(|n| n as i64);
        let (next, skipped) = next_slot(k, clock.now(), start, t, last);
        if skipped > 0 {
            cycles.latency.overrun(skipped);
        }
        k = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;

    use crate::test_sink::Keep;

    fn run(mode: TimerMode, lateness: &[i64], loops: usize) -> (FakeClock, Keep, Keep, LoopEnd) {
        let mut c = FakeClock::new(1_000_000, lateness);
        let mut lat = Keep { stop_after: Some(loops), ..Default::default() };
        let mut jit = Keep::default();
        let stop = AtomicBool::new(false);
        let progress = AtomicU64::new(0);
        let sched = Schedule { mode, interval_ns: 1_000, duration_ns: None, slots: None };
        let end = run_loop(&mut c, sched, 1_000_000, &mut lat, &mut jit, &stop, &progress);
        assert_eq!(progress.load(Ordering::Relaxed), lat.samples.len() as u64);
        (c, lat, jit, end)
    }

    #[test]
    fn abs_mode_sleeps_on_the_grid_and_measures_lateness() {
        let (c, lat, jit, end) = run(TimerMode::Abs, &[10, 30, 5], 4);
        assert_eq!(end, LoopEnd::Count);
        let targets: Vec<_> = c.sleeps.iter().map(|s| s.1 - 1_000_000).collect();
        assert_eq!(targets, vec![1_000, 2_000, 3_000, 4_000]);
        assert!(c.sleeps.iter().all(|s| s.0 == "abs"));
        let vals: Vec<_> = lat.samples.iter().map(|s| s.2).collect();
        assert_eq!(vals, vec![10, 30, 5, 0]);
        // P_k = d_(k+1) - d_k
        let p: Vec<_> = jit.samples.iter().map(|s| s.2).collect();
        assert_eq!(p, vec![20, -25, -5]);
        assert_eq!(lat.overruns, 0);
        // at_ns is the wake time since the start
        assert_eq!(lat.samples[1].1, 2_030);
    }

    #[test]
    fn a_slot_already_past_is_skipped_and_counted_no_burst_no_drift() {
        // the 2nd wake-up is 2.5 periods late: slots 3 and 4 have passed when it is ready
        let (c, lat, jit, _) = run(TimerMode::Abs, &[0, 2_500, 0, 0], 4);
        let targets: Vec<_> = c.sleeps.iter().map(|s| s.1 - 1_000_000).collect();
        assert_eq!(targets, vec![1_000, 2_000, 5_000, 6_000]);
        assert_eq!(lat.overruns, 2);
        let vals: Vec<_> = lat.samples.iter().map(|s| s.2).collect();
        assert_eq!(vals, vec![0, 2_500, 0, 0]);
        let p: Vec<_> = jit.samples.iter().map(|s| s.2).collect();
        assert_eq!(p, vec![2_500, -2_500, 0]);
    }

    #[test]
    fn a_wake_exactly_on_the_next_slot_skips_it() {
        let (c, lat, _, _) = run(TimerMode::Abs, &[1_000, 0], 2);
        let targets: Vec<_> = c.sleeps.iter().map(|s| s.1 - 1_000_000).collect();
        assert_eq!(targets, vec![1_000, 3_000]);
        assert_eq!(lat.overruns, 1);
    }

    #[test]
    fn rel_mode_sleeps_relative_to_the_expected_time_and_signs_the_error() {
        // a negative lateness stands for a clock that fires early
        let (c, lat, _, _) = run(TimerMode::Rel, &[40, -15, 0], 3);
        assert!(c.sleeps.iter().all(|s| s.0 == "rel"));
        // first sleep is the whole period, the second is shortened by the first's lateness
        let durations: Vec<_> = c.sleeps.iter().map(|s| s.1).collect();
        assert_eq!(durations, vec![1_000, 960, 1_015]);
        let vals: Vec<_> = lat.samples.iter().map(|s| s.2).collect();
        assert_eq!(vals, vec![40, -15, 0]);
    }

    #[test]
    fn a_count_of_slots_ends_on_time_whatever_the_overruns() {
        // every wake-up 2.5 intervals late: each cycle skips two slots, the last skip runs
        // past slot 9 (samples at 1, 4, 7; slots 2-3, 5-6, 8-9 skipped; 10-11 are not slots)
        let mut c = FakeClock::new(0, &[2_500; 100]);
        let mut lat = Keep::default();
        let mut jit = Keep::default();
        let stop = AtomicBool::new(false);
        let p = AtomicU64::new(0);
        let sched = Schedule {
            mode: TimerMode::Abs,
            interval_ns: 1_000,
            duration_ns: None,
            slots: Some(9),
        };
        assert_eq!(run_loop(&mut c, sched, 0, &mut lat, &mut jit, &stop, &p), LoopEnd::Count);
        assert_eq!(lat.samples.len() as u64 + lat.overruns, 9, "9 slots: samples + skipped");
        // 8 slots: the last skip (slots 8 and 9) counts slot 8 only
        let mut c = FakeClock::new(0, &[2_500; 100]);
        let (mut lat, mut jit) = (Keep::default(), Keep::default());
        let sched = Schedule { slots: Some(8), ..sched };
        assert_eq!(run_loop(&mut c, sched, 0, &mut lat, &mut jit, &stop, &p), LoopEnd::Count);
        assert_eq!((lat.samples.len() as u64, lat.overruns), (3, 5));
    }

    #[test]
    fn duration_and_stop_flag_end_the_loop() {
        let mut c = FakeClock::new(0, &[]);
        let mut lat = Keep::default();
        let mut jit = Keep::default();
        let stop = AtomicBool::new(false);
        let p = AtomicU64::new(0);
        let sched = Schedule {
            mode: TimerMode::Abs,
            interval_ns: 100,
            duration_ns: Some(1_000),
            slots: None,
        };
        assert_eq!(run_loop(&mut c, sched, 0, &mut lat, &mut jit, &stop, &p), LoopEnd::Duration);
        assert_eq!(lat.samples.len(), 10);
        stop.store(true, Ordering::Relaxed);
        let mut lat2 = Keep::default();
        assert_eq!(
            run_loop(&mut c, sched, 0, &mut lat2, &mut jit, &stop, &p),
            LoopEnd::Interrupted
        );
        assert!(lat2.samples.is_empty());
    }
}
