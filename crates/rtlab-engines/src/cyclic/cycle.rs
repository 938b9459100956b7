//! The cyclic job's loop: wake on an absolute grid, do the work, record three values, and
//! go to the next slot that has not passed yet.
//!
//! Contract:
//! - Slot k is at `start + k*T`; the first cycle is slot 1. The thread sleeps with
//!   [`Clock::sleep_until`] (clock_nanosleep TIMER_ABSTIME on the real clock), reads `woke`,
//!   runs the work, reads `job_end`, and records into its three sinks, with the same index
//!   (the 0-based count of measured cycles) and the same `at_ns` (`woke - start`):
//!   `wakeup` gets `woke - slot`, `job` gets `job_end - woke`, `response` gets
//!   `job_end - slot`.
//! - When the thread is ready for the next slot (after recording) and that slot has already
//!   passed (ready >= slot), it and every other passed slot are skipped and counted as
//!   overruns on the `response` sink: no catch-up burst, no drift. Skipped slots past the
//!   planned end (duration or slot count) are not counted.
//! - The loop ends before slot `slots + 1` (slots are counted, not cycles: a skipped slot
//!   counts, so measured cycles + overruns = `slots` and the run ends on time, as the
//!   timer's), before a slot past `start + duration`, when any sink answers [`Flow::Stop`],
//!   or when the stop flag is raised (checked once per cycle).
//! - It never allocates, locks, logs or prints: the work closure must not either.

use crate::clock::Clock;
use crate::timer::LoopEnd;
use rtlab_core::sink::{Flow, Sink};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The schedule of one cyclic thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CyclicSchedule {
    pub interval_ns: i64,
    /// Slots after `start + duration` are not taken (None: no limit).
    pub duration_ns: Option<i64>,
    /// Slots after the `slots`-th are not taken (None: no limit); a skipped slot counts.
    pub slots: Option<u64>,
}

/// The three sinks of one cyclic thread.
#[derive(Debug, Default)]
pub struct CycleSinks<W, J, R> {
    /// `woke - slot`: the wake-up latency.
    pub wakeup: W,
    /// `job_end - woke`: the execution time of the work.
    pub job: J,
    /// `job_end - slot`: the response time; overruns are counted here.
    pub response: R,
}

/// Run one cyclic thread from `start` (slot 0 is `start`; the first wake-up is slot 1).
/// `work` is called once per cycle with the clock (a fake clock advances in it; the real
/// work ignores it). Returns why it ended.
pub fn run_cycles<C, W, J, R, F>(
    clock: &mut C,
    sched: CyclicSchedule,
    start: i64,
    mut work: F,
    sinks: &mut CycleSinks<W, J, R>,
    stop: &AtomicBool,
    progress: &AtomicU64,
) -> LoopEnd
where
    C: Clock,
    W: Sink,
    J: Sink,
    R: Sink,
    F: FnMut(&mut C),
{
    let t = sched.interval_ns;
    // the last slot index that may be taken, by duration and by count
    let last_by_duration = sched.duration_ns.map(|d| d.div_euclid(t));
    let last_by_count = sched.slots.map(|n| n.min(i64::MAX as u64) as i64);
    let last_k = match (last_by_duration, last_by_count) {
        (Some(d), Some(c)) => Some(d.min(c)),
        (d, c) => d.or(c),
    };
    let mut k: i64 = 1;
    let mut index: u64 = 0;
    loop {
        if matches!(last_by_count, Some(c) if k > c) {
            return LoopEnd::Count;
        }
        if matches!(last_by_duration, Some(d) if k > d) {
            return LoopEnd::Duration;
        }
        if stop.load(Ordering::Relaxed) {
            return LoopEnd::Interrupted;
        }
        let slot = start + k * t;
        clock.sleep_until(slot);
        let woke = clock.now();
        work(clock);
        let job_end = clock.now();
        let at = woke - start;
        let f_wakeup = sinks.wakeup.record(index, at, woke - slot);
        let f_job = sinks.job.record(index, at, job_end - woke);
        let f_response = sinks.response.record(index, at, job_end - slot);
        index += 1;
        progress.store(index, Ordering::Relaxed);
        if f_wakeup == Flow::Stop || f_job == Flow::Stop || f_response == Flow::Stop {
            return LoopEnd::Count;
        }
        // the next slot; those already past are skipped and counted
        let (next, skipped) = crate::timer::next_slot(k, clock.now(), start, t, last_k);
        if skipped > 0 {
            sinks.response.overrun(skipped);
        }
        k = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;
    use rtlab_core::sink::{Recorder, RecorderConfig};

    use crate::test_sink::Keep;

    const START: i64 = 1_000_000;
    const T: i64 = 1_000;

    /// Run with scripted wake-up lateness and work durations (then 0).
    fn run(
        lateness: &[i64],
        work: &[i64],
        slots: Option<u64>,
        duration_ns: Option<i64>,
    ) -> (FakeClock, CycleSinks<Keep, Keep, Keep>, LoopEnd) {
        let mut c = FakeClock::new(START, lateness);
        let mut sinks = CycleSinks::<Keep, Keep, Keep>::default();
        let stop = AtomicBool::new(false);
        let progress = AtomicU64::new(0);
        let mut w = work.iter().copied();
        let sched = CyclicSchedule { interval_ns: T, duration_ns, slots };
        let end = run_cycles(
            &mut c,
            sched,
            START,
            |c: &mut FakeClock| c.t += w.next().unwrap_or(0),
            &mut sinks,
            &stop,
            &progress,
        );
        assert_eq!(progress.load(Ordering::Relaxed), sinks.response.samples.len() as u64);
        (c, sinks, end)
    }

    fn targets(c: &FakeClock) -> Vec<i64> {
        c.sleeps.iter().map(|s| s.1 - START).collect()
    }

    #[test]
    fn each_cycle_records_wakeup_job_and_response_on_the_grid() {
        let (c, s, end) = run(&[10, 30, 5], &[200, 100, 400], Some(4), None);
        assert_eq!(end, LoopEnd::Count);
        assert!(c.sleeps.iter().all(|s| s.0 == "abs"), "absolute sleeps only");
        assert_eq!(targets(&c), vec![1_000, 2_000, 3_000, 4_000]);
        assert_eq!(s.wakeup.values(), vec![10, 30, 5, 0]);
        assert_eq!(s.job.values(), vec![200, 100, 400, 0]);
        assert_eq!(s.response.values(), vec![210, 130, 405, 0]);
        // the same index and at_ns (woke - start) in all three streams
        for i in 0..4 {
            assert_eq!(s.wakeup.samples[i].0, i as u64);
            assert_eq!(s.wakeup.samples[i].1, s.job.samples[i].1);
            assert_eq!(s.job.samples[i].1, s.response.samples[i].1);
        }
        assert_eq!(s.response.samples[1].1, 2_030);
        assert_eq!(s.response.overruns, 0);
        assert_eq!(s.wakeup.overruns + s.job.overruns, 0);
    }

    #[test]
    fn a_job_that_outlasts_its_slots_skips_them_and_counts_overruns() {
        // cycle 2 wakes on time but its work runs 2.5 periods: slots 3 and 4 have passed
        let (c, s, end) = run(&[0, 0, 0, 0], &[100, 2_500, 100, 100], Some(6), None);
        assert_eq!(end, LoopEnd::Count);
        assert_eq!(targets(&c), vec![1_000, 2_000, 5_000, 6_000]);
        assert_eq!(s.response.overruns, 2);
        assert_eq!(s.response.values(), vec![100, 2_500, 100, 100]);
        assert_eq!(s.response.samples.len(), 4, "6 slots: 4 cycles + 2 skipped");
    }

    #[test]
    fn a_job_ending_exactly_on_the_next_slot_skips_it() {
        let (c, s, _) = run(&[0], &[1_000], Some(3), None);
        assert_eq!(targets(&c), vec![1_000, 3_000]);
        assert_eq!(s.response.overruns, 1);
    }

    #[test]
    fn late_wakeup_plus_work_decides_the_overrun() {
        // wakes 600 late, works 500: ends at 2_100 > slot 2 (2_000) -> slot 2 skipped
        let (c, s, _) = run(&[600], &[500], Some(3), None);
        assert_eq!(targets(&c), vec![1_000, 3_000]);
        assert_eq!(s.response.values(), vec![1_100, 0]);
        assert_eq!(s.wakeup.values(), vec![600, 0]);
        assert_eq!(s.response.overruns, 1);
    }

    #[test]
    fn deadline_misses_are_response_times_above_the_deadline() {
        let mut c = FakeClock::new(0, &[0, 50, 0, 300]);
        let rc = |deadline_ns| RecorderConfig {
            deadline_ns,
            window_ns: 1_000_000,
            window_capacity: 16,
            max_samples: None,
            us_histogram_buckets: None,
            spike_threshold_ns: None,
        };
        let mut sinks = CycleSinks {
            wakeup: Recorder::new(&rc(400), None),
            job: Recorder::new(&rc(400), None),
            response: Recorder::new(&rc(400), None),
        };
        let mut w = [400i64, 350, 401, 100].into_iter();
        let sched = CyclicSchedule { interval_ns: T, duration_ns: None, slots: Some(4) };
        let end = run_cycles(
            &mut c,
            sched,
            0,
            |c: &mut FakeClock| c.t += w.next().unwrap_or(0),
            &mut sinks,
            &AtomicBool::new(false),
            &AtomicU64::new(0),
        );
        assert_eq!(end, LoopEnd::Count);
        // responses: 400 (on the deadline, not a miss), 400, 401, 400
        assert_eq!(sinks.response.missed, 1);
        assert_eq!(sinks.response.running.max, 401);
        assert_eq!(sinks.job.running.min, 100);
        assert_eq!(sinks.wakeup.running.max, 300);
        assert_eq!(sinks.response.count(), 4);
    }

    #[test]
    fn duration_ends_the_loop_and_skipped_slots_past_it_are_not_counted() {
        let (_, s, end) = run(&[], &[], None, Some(10_000));
        assert_eq!(end, LoopEnd::Duration);
        assert_eq!(s.response.samples.len(), 10);
        // the last taken slot (10) overruns 3 slots, of which none is inside the duration
        let (_, s, end) = run(&[0; 10], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 3_500], None, Some(10_000));
        assert_eq!(end, LoopEnd::Duration);
        assert_eq!(s.response.samples.len(), 10);
        assert_eq!(s.response.overruns, 0);
        // slot 8 overruns slots 9 and 10 (inside) and 11 (outside): 2 counted
        let (_, s, _) = run(&[0; 10], &[0, 0, 0, 0, 0, 0, 0, 2_500], None, Some(10_000));
        assert_eq!(s.response.samples.len(), 8);
        assert_eq!(s.response.overruns, 2);
    }

    #[test]
    fn a_count_of_slots_ends_on_time_whatever_the_overruns() {
        // every job runs 2.5 intervals: each cycle skips two slots
        let (c, s, end) = run(&[], &[2_500; 10], Some(9), None);
        assert_eq!(end, LoopEnd::Count);
        assert_eq!(targets(&c), vec![1_000, 4_000, 7_000]);
        assert_eq!(s.response.samples.len() as u64 + s.response.overruns, 9);
        // the last cycle (slot 7) ends at 9_500: slots 8 and 9 are skipped, 10 is past the count
        assert_eq!(s.response.overruns, 6);
        // with a duration too, the nearer end wins
        let (_, s, end) = run(&[], &[], Some(20), Some(5_000));
        assert_eq!((end, s.response.samples.len()), (LoopEnd::Duration, 5));
        let (_, s, end) = run(&[], &[], Some(5), Some(20_000));
        assert_eq!((end, s.response.samples.len()), (LoopEnd::Count, 5));
    }

    #[test]
    fn stop_flag_and_count_zero_end_the_loop_before_any_sleep() {
        let mut c = FakeClock::new(0, &[]);
        let mut sinks = CycleSinks::<Keep, Keep, Keep>::default();
        let stop = AtomicBool::new(true);
        let p = AtomicU64::new(0);
        let sched = CyclicSchedule { interval_ns: T, duration_ns: None, slots: None };
        let end = run_cycles(&mut c, sched, 0, |_: &mut FakeClock| {}, &mut sinks, &stop, &p);
        assert_eq!(end, LoopEnd::Interrupted);
        let (c, s, end) = run(&[], &[], Some(0), None);
        assert_eq!(end, LoopEnd::Count);
        assert!(c.sleeps.is_empty() && s.response.samples.is_empty());
    }

    #[test]
    fn a_sink_saying_stop_ends_the_loop() {
        struct StopAt(u64);
        impl Sink for StopAt {
            fn record(&mut self, index: u64, _: i64, _: i64) -> Flow {
                if index + 1 >= self.0 {
                    Flow::Stop
                } else {
                    Flow::Continue
                }
            }
            fn overrun(&mut self, _: u64) {}
        }
        let mut c = FakeClock::new(0, &[]);
        let mut sinks =
            CycleSinks { wakeup: Keep::default(), job: StopAt(3), response: Keep::default() };
        let sched = CyclicSchedule { interval_ns: T, duration_ns: None, slots: None };
        let end = run_cycles(
            &mut c,
            sched,
            0,
            |_: &mut FakeClock| {},
            &mut sinks,
            &AtomicBool::new(false),
            &AtomicU64::new(0),
        );
        assert_eq!(end, LoopEnd::Count);
        assert_eq!(sinks.response.samples.len(), 3);
    }
}
