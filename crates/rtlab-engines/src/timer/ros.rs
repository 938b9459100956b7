//! The ROS timer models: the timers S4 measured and the ROS 2 timer of today, as real threads
//! doing what those stacks do (`rtlab timer --mode oneshot|roscpp|rclcpp`).
//!
//! Sources (read, not copied; the rules below are restated in Rust):
//! - S4's one-shot test: bmwcarit/ros_realtime_tests, `src/OneShotLatencyMeasurer.cpp`
//!   (`measureOneshotTimerLatencies`, `spinUntilCallbackCalled`, `timerCallback`) and
//!   `src/TestParams.h` (`CLOCK_ID` = CLOCK_MONOTONIC), commit 04e9b2f5837f. Each loop:
//!   `rosTimer.setPeriod(P)`, then `clock_gettime(CLOCK_ID, &startTs)`, then `start()` (a no-op
//!   on a started timer), then `ros::spinOnce()` in a busy loop on the same thread until the
//!   callback (which reads `CLOCK_ID`) ran; the sample is `callback - startTs - P`.
//! - roscpp of 2012-2015 (the one S4 ran): ros/ros_comm
//!   `clients/roscpp/include/ros/timer_manager.h` at commit a2ca01ecf (unchanged until
//!   d9f09fc3d, 2015) and `clients/roscpp/src/libros/timer.cpp`. `setPeriod` sets
//!   `next_expected = Time::now() + period` (Time::now() is CLOCK_REALTIME) and notifies the
//!   timer thread; the timer thread (`threadFunc`) queues a callback for a timer once
//!   `next_expected <= now`, then waits on a condition variable in whole milliseconds
//!   (`max(int32(ms(sleep_end - now)), 1)`) until `sleep_end` or a notify; a queued timer is
//!   out of the waiting list until the callback thread has run it and `schedule`d it back
//!   (`updateNext`: a one-shot goes to "never"; a periodic timer advances `next_expected` by
//!   one period when it is due, and restarts from now when it is more than a period behind).
//!   The callback event's `current_real` is `Time::now()` read just before the callback.
//! - ROS 2: ros2/rcl `rcl/src/rcl/timer.c` (commit 00f4f97e4481): `rcl_timer_init` sets
//!   `next_call_time = now + period`; `rcl_timer_call` advances it by one period and, when
//!   that is still before now, by as many whole periods as put it after now (phase kept, no
//!   catch-up); `rcl_timer_is_ready` is `next_call_time - now <= 0`. An rclcpp executor thread
//!   blocks in `rcl_wait` with the timer's time until the next call as timeout and runs
//!   only ready timers, so a ROS 2 callback never starts before its expected time on its
//!   clock (a wall timer: the steady clock, CLOCK_MONOTONIC).
//!
//! Contract:
//! - The update rules are pure functions ([`roscpp_update_next`], [`roscpp_wait_ms`],
//!   [`roscpp_check`], [`rcl_next_call_time`]), tested with fake times; the waits
//!   ([`roscpp_wait`], [`rclcpp_loop`]) run on any [`Clock`], tested with [`crate::clock::FakeClock`].
//! - `oneshot` and `roscpp` run two threads per measuring thread: roscpp's timer thread and
//!   the thread that runs callbacks (S4's test thread, busy-spinning `spinOnce`, or a
//!   `ros::spin` thread). They share one [`RosTimerShared`]: atomics and one single-slot
//!   callback queue. roscpp guards these with mutexes and notifies a condition variable;
//!   here the notify is `Thread::unpark` (a futex wake, the system call a notify makes) and
//!   no mutex is taken. Both threads are created with the same policy, priority and CPU (S4
//!   set the priority before `ros::init`, so every roscpp thread inherited it).
//! - Between the anchor (roscpp's `Time::now()` in `setPeriod`) and the test's reference, the
//!   one-shot model does what roscpp did there: store the new expected time and wake the
//!   timer thread. No delay is added: a negative sample is a preemption in that gap.
//! - The hot loops never allocate, lock, log or print: they push into preallocated sinks,
//!   read the stop flag and write the progress counter.

use crate::clock::Clock;
use crate::timer::{stopped_or_counted, Cycles, LoopEnd, Schedule};
use rtlab_core::sink::{Flow, Sink};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::SeqCst};
use std::sync::OnceLock;
use std::thread::Thread;

/// roscpp's "never" for a one-shot timer that has fired (it sets `T(INT_MAX, 999999999)`).
pub const NEVER: i64 = i64::MAX;
/// roscpp's timer thread sleeps 100 ms when no timer is in its waiting list.
pub const ROSCPP_IDLE_WAIT_NS: i64 = 100_000_000;
const EMPTY: i64 = i64::MIN;

/// roscpp `TimerManager::updateNext` for a periodic timer, after its callback ran at `now`:
/// the new `next_expected` and how many whole periods a restart dropped (0: none). When the
/// timer is due (`next_expected <= now`) it advances by one period (so a timer a little
/// behind catches up with back-to-back callbacks); when it is then still more than a period
/// behind (`next + period < now`, "time jumped forward, or callbacks too slow") it restarts
/// from now: `next_expected = now`.
pub fn roscpp_update_next(next_expected: i64, period: i64, now: i64) -> (i64, u64) {
    let mut next = next_expected;
    if next <= now {
        next += period;
    }
    if next.saturating_add(period) < now {
        return (now, ((now - next) / period) as u64);
    }
    (next, 0)
}

/// The wait of roscpp's timer thread on system time: whole milliseconds, truncated, at least
/// one: `max(int32_t(ms(sleep_end - now)), 1)`. (roscpp's cast of an out-of-range value is
/// undefined; here it is clamped to `i32::MAX` ms.)
pub fn roscpp_wait_ms(sleep_end: i64, now: i64) -> i64 {
    let d = sleep_end.saturating_sub(now);
    (d / 1_000_000).clamp(1, i32::MAX as i64)
}

/// One pass of roscpp's timer thread over its one timer at `now`: whether it queues the
/// callback (the timer is in the waiting list and `next_expected <= now`) and when it next
/// needs to look (`sleep_end`). A timer out of the list (its callback queued, not yet run)
/// leaves the list empty: roscpp then sleeps 100 ms or until notified.
pub fn roscpp_check(now: i64, in_list: bool, next_expected: i64) -> (bool, i64) {
    if !in_list {
        return (false, now + ROSCPP_IDLE_WAIT_NS);
    }
    if next_expected <= now {
        return (true, now + ROSCPP_IDLE_WAIT_NS);
    }
    (false, next_expected)
}

/// The wait loop of roscpp's timer thread: until `sleep_end` on `clock`, in whole-ms waits
/// ([`roscpp_wait_ms`]), or until `notified()` (a new or changed timer, or quit).
pub fn roscpp_wait<C: Clock>(clock: &mut C, sleep_end: i64, mut notified: impl FnMut() -> bool) {
    loop {
        if notified() {
            return;
        }
        let current = clock.now();
        if current >= sleep_end {
            return;
        }
        clock.sleep_for(roscpp_wait_ms(sleep_end, current) * 1_000_000);
    }
}

/// `rcl_timer_call`'s next call time, called at `now`: one period on, or, when that is still
/// before now, as many whole periods on as put it at or after now. Returns it and the
/// periods skipped (never called: no catch-up, phase kept).
pub fn rcl_next_call_time(next_call_time: i64, period: i64, now: i64) -> (i64, u64) {
    let next = next_call_time + period;
    if next < now {
        let ahead = now - next;
        let periods = 1 + (ahead - 1) / period;
        return (next + periods * period, periods as u64);
    }
    (next, 0)
}

/// An rclcpp single-threaded executor with one wall timer, on `clock` from `start`
/// (`rcl_timer_init` at `start`: the first call is due at `start + period`). The executor
/// waits with the time until the next call as timeout (`rcl_wait`), runs the timer only
/// when it is ready (`next_call_time - now <= 0`; a wait that ends early waits again), and
/// `rcl_timer_call` advances the next call time ([`rcl_next_call_time`]) before the
/// callback runs. `latency` gets `callback start - expected call time` (never negative on
/// its clock), `jitter` the P_k of consecutive callbacks; skipped periods are overruns and
/// count as slots (a count ends on time).
pub fn rclcpp_loop<C: Clock, L: Sink, J: Sink>(
    clock: &mut C,
    sched: Schedule,
    start: i64,
    latency: &mut L,
    jitter: &mut J,
    stop: &AtomicBool,
    progress: &AtomicU64,
) -> LoopEnd {
    let period = sched.interval_ns;
    let end = sched.duration_ns.map(|d| start + d);
    let mut next = start + period;
    let mut slots: u64 = 0;
    let mut cycles = Cycles::new(latency, jitter, progress);
    loop {
        if let Some(e) = stopped_or_counted(stop, sched.slots, slots) {
            return e;
        }
        if matches!(end, Some(e) if next > e) {
            return LoopEnd::Duration;
        }
        // rcl_wait: block with the time until the next call as timeout
        let until = next - clock.now();
        if until > 0 {
            clock.sleep_for(until);
            continue;
        }
        // rcl_timer_call: now, the next call time, then the callback
        let now = clock.now();
        let expected = next;
        let (n, skipped) = rcl_next_call_time(next, period, now);
        next = n;
        let cb = clock.now();
        let flow = cycles.record(cb - start, cb - expected);
        // skipped periods after the last slot of a count were never asked for
        let skipped = within(sched.slots, slots, skipped);
        slots += 1 + skipped;
        if skipped > 0 {
            cycles.latency.overrun(skipped);
        }
        if flow == Flow::Stop {
            return LoopEnd::Count;
        }
    }
}

/// Of `skipped` slots after the one just taken (`taken` before it), those within a count of
/// `slots`: skipped slots after the last were never asked for.
fn within(slots: Option<u64>, taken: u64, skipped: u64) -> u64 {
    match slots {
        Some(n) => skipped.min(n.saturating_sub(taken + 1)),
        None => skipped,
    }
}

/// What roscpp's timer thread and the thread that runs callbacks share for one timer.
pub struct RosTimerShared {
    /// `TimerInfo::next_expected`, on ROS time (CLOCK_REALTIME).
    next_expected: AtomicI64,
    /// The timer is in the timer thread's waiting list (false while its callback is queued).
    in_list: AtomicBool,
    /// `new_timer_`: a timer was added, re-armed or scheduled back: look again.
    new_timer: AtomicBool,
    /// The callback queue, one slot: the `current_expected` of the queued callback.
    queued: AtomicI64,
    quit: AtomicBool,
    timer_thread: OnceLock<Thread>,
    callback_thread: OnceLock<Thread>,
}

impl RosTimerShared {
    /// A timer created at ROS time `now` with `period` (`TimerManager::add`), or not yet
    /// armed (`next_expected` = never) when `period` is None (the models arm it on their
    /// callback thread when it starts).
    pub fn new(now: i64, period: Option<i64>) -> Self {
        RosTimerShared {
            next_expected: AtomicI64::new(period.map(|p| now + p).unwrap_or(NEVER)),
            in_list: AtomicBool::new(true),
            new_timer: AtomicBool::new(false),
            queued: AtomicI64::new(EMPTY),
            quit: AtomicBool::new(false),
            timer_thread: OnceLock::new(),
            callback_thread: OnceLock::new(),
        }
    }

    /// The calling thread is roscpp's timer thread (call before its loop).
    pub fn register_timer_thread(&self) {
        let _ = self.timer_thread.set(std::thread::current());
    }
    /// The calling thread runs the callbacks (call before its loop).
    pub fn register_callback_thread(&self) {
        let _ = self.callback_thread.set(std::thread::current());
    }

    /// The timer thread is registered (the callback side waits for this before it starts).
    pub fn timer_thread_ready(&self) -> bool {
        self.timer_thread.get().is_some()
    }

    fn notify_timer_thread(&self) {
        self.new_timer.store(true, SeqCst);
        if let Some(t) = self.timer_thread.get() {
            t.unpark();
        }
    }

    /// `TimerManager::setPeriod`: `next_expected = anchor + period`, notify.
    fn set_period(&self, anchor: i64, period: i64) {
        self.next_expected.store(anchor + period, SeqCst);
        self.notify_timer_thread();
    }

    /// `TimerManager::schedule` after a callback: the new `next_expected`, back in the list,
    /// notify.
    fn schedule(&self, next_expected: i64) {
        self.next_expected.store(next_expected, SeqCst);
        self.in_list.store(true, SeqCst);
        self.notify_timer_thread();
    }

    /// Take the queued callback's `current_expected`, if one is queued.
    fn take(&self) -> Option<i64> {
        match self.queued.swap(EMPTY, SeqCst) {
            EMPTY => None,
            e => Some(e),
        }
    }

    /// End the timer thread.
    pub fn quit(&self) {
        self.quit.store(true, SeqCst);
        if let Some(t) = self.timer_thread.get() {
            t.unpark();
        }
    }
}

/// roscpp's timer thread (`TimerManager::threadFunc`) for one timer, on `clock` (ROS time)
/// until [`RosTimerShared::quit`]. It queues the callback into the one-slot queue and wakes
/// the callback thread, as `CallbackQueue::addCallback` notifies.
pub fn roscpp_timer_thread<C: Clock>(clock: &mut C, s: &RosTimerShared) {
    s.register_timer_thread();
    while !s.quit.load(SeqCst) {
        s.new_timer.store(false, SeqCst);
        let current = clock.now();
        let in_list = s.in_list.load(SeqCst);
        let (queue, sleep_end) = roscpp_check(current, in_list, s.next_expected.load(SeqCst));
        if queue {
            s.in_list.store(false, SeqCst);
            s.queued.store(s.next_expected.load(SeqCst), SeqCst);
            if let Some(t) = s.callback_thread.get() {
                t.unpark();
            }
        }
        roscpp_wait(clock, sleep_end, || s.new_timer.load(SeqCst) || s.quit.load(SeqCst));
    }
}

/// The samples of one iteration of S4's one-shot test: `(external, anchor)`.
/// `external = callback - reference - period` on the test's clock (CLOCK_MONOTONIC), what S4
/// published; `anchor = callback_ros - anchor - period` on ROS time, the timer's own error.
pub fn oneshot_values(
    anchor: i64,
    reference: i64,
    callback_ros: i64,
    callback: i64,
    period: i64,
) -> (i64, i64) {
    (callback - reference - period, callback_ros - anchor - period)
}

/// S4's test thread (`measureOneshotTimerLatencies`) against roscpp's timer thread on `s`:
/// each iteration re-arms the one-shot timer on ROS time (`ros_clock`: the anchor), reads
/// the test's reference on `test_clock`, busy-spins until the callback is queued, runs it
/// (stamps on both clocks) and schedules the timer back (a one-shot: never). `external`
/// gets S4's value, `anchor` the value against roscpp's anchor ([`oneshot_values`]); `at_ns`
/// is the callback's time since `start` on `test_clock`. Ends the timer thread on return.
#[allow(clippy::too_many_arguments)]
pub fn oneshot_test_thread<R: Clock, C: Clock, L: Sink, A: Sink>(
    ros_clock: &mut R,
    test_clock: &mut C,
    s: &RosTimerShared,
    sched: Schedule,
    start: i64,
    external: &mut L,
    anchor_sink: &mut A,
    stop: &AtomicBool,
    progress: &AtomicU64,
) -> LoopEnd {
    let end =
        oneshot_body(ros_clock, test_clock, s, sched, start, external, anchor_sink, stop, progress);
    s.quit();
    end
}

#[allow(clippy::too_many_arguments)]
fn oneshot_body<R: Clock, C: Clock, L: Sink, A: Sink>(
    ros_clock: &mut R,
    test_clock: &mut C,
    s: &RosTimerShared,
    sched: Schedule,
    start: i64,
    external: &mut L,
    anchor_sink: &mut A,
    stop: &AtomicBool,
    progress: &AtomicU64,
) -> LoopEnd {
    let period = sched.interval_ns;
    let mut index: u64 = 0;
    loop {
        if let Some(e) = stopped_or_counted(stop, sched.slots, index) {
            return e;
        }
        if matches!(sched.duration_ns, Some(d) if test_clock.now() - start + period > d) {
            return LoopEnd::Duration;
        }
        // rosTimer.setPeriod(P): roscpp anchors at its own now and notifies its timer thread
        let anchor = ros_clock.now();
        s.set_period(anchor, period);
        // clock_gettime(CLOCK_MONOTONIC, &startTs): the test's reference
        let reference = test_clock.now();
        // spinUntilCallbackCalled: ros::spinOnce() in a loop on this thread
        let _expected = loop {
            if let Some(e) = s.take() {
                break e;
            }
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                return LoopEnd::Interrupted;
            }
            std::hint::spin_loop();
        };
        // TimerQueueCallback::call: current_real = Time::now(), then the callback's own stamp
        let callback_ros = ros_clock.now();
        let callback = test_clock.now();
        // schedule -> updateNext: a one-shot timer is next expected never
        s.schedule(NEVER);
        let (ext, own) = oneshot_values(anchor, reference, callback_ros, callback, period);
        let at = callback - start;
        let flow = external.record(index, at, ext);
        anchor_sink.record(index, at, own);
        index += 1;
        progress.store(index, std::sync::atomic::Ordering::Relaxed);
        if flow == Flow::Stop {
            return LoopEnd::Count;
        }
    }
}

/// A `ros::spin()` thread running a periodic roscpp timer's callbacks, against roscpp's timer
/// thread on `s`: it waits for a queued callback (a condition-variable wait in roscpp, a
/// park here), stamps `current_real` on ROS time, records `current_real - current_expected`
/// (the timer error the TimerEvent carries) and schedules the timer back
/// ([`roscpp_update_next`]; whole periods dropped by a restart are overruns and count as
/// slots). `jitter` gets the P_k of consecutive callbacks; `at_ns` is on `test_clock` from
/// `start`. Ends the timer thread on return.
#[allow(clippy::too_many_arguments)]
pub fn roscpp_spin_thread<R: Clock, C: Clock, L: Sink, J: Sink>(
    ros_clock: &mut R,
    test_clock: &mut C,
    s: &RosTimerShared,
    sched: Schedule,
    start: i64,
    latency: &mut L,
    jitter: &mut J,
    stop: &AtomicBool,
    progress: &AtomicU64,
) -> LoopEnd {
    let end = spin_body(ros_clock, test_clock, s, sched, start, latency, jitter, stop, progress);
    s.quit();
    end
}

#[allow(clippy::too_many_arguments)]
fn spin_body<R: Clock, C: Clock, L: Sink, J: Sink>(
    ros_clock: &mut R,
    test_clock: &mut C,
    s: &RosTimerShared,
    sched: Schedule,
    start: i64,
    latency: &mut L,
    jitter: &mut J,
    stop: &AtomicBool,
    progress: &AtomicU64,
) -> LoopEnd {
    let period = sched.interval_ns;
    let mut slots: u64 = 0;
    let mut cycles = Cycles::new(latency, jitter, progress);
    // createTimer -> TimerManager::add: next_expected = now + period
    s.set_period(ros_clock.now(), period);
    loop {
        if matches!(sched.slots, Some(n) if slots >= n) {
            return LoopEnd::Count;
        }
        // callOne: wait for the queued callback (ros::spin waits 100 ms at a time)
        let expected = loop {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                return LoopEnd::Interrupted;
            }
            if let Some(e) = s.take() {
                break e;
            }
            std::thread::park_timeout(std::time::Duration::from_millis(100));
        };
        let current_real = ros_clock.now();
        let at = test_clock.now() - start;
        if matches!(sched.duration_ns, Some(d) if at > d) {
            return LoopEnd::Duration;
        }
        let flow = cycles.record(at, current_real - expected);
        // schedule -> updateNext at Time::now()
        let (next, dropped) = roscpp_update_next(expected, period, ros_clock.now());
        s.schedule(next);
        let dropped = within(sched.slots, slots, dropped);
        slots += 1 + dropped;
        if dropped > 0 {
            cycles.latency.overrun(dropped);
        }
        if flow == Flow::Stop {
            return LoopEnd::Count;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;
    use crate::timer::TimerMode;

    const MS: i64 = 1_000_000;

    use crate::test_sink::Keep;

    #[test]
    fn roscpp_advances_one_period_when_due_and_catches_up_back_to_back() {
        // due: one period on
        assert_eq!(roscpp_update_next(10 * MS, MS, 10 * MS), (11 * MS, 0));
        assert_eq!(roscpp_update_next(10 * MS, MS, 10 * MS + 300_000), (11 * MS, 0));
        // not yet due (re-armed by setPeriod meanwhile): unchanged
        assert_eq!(roscpp_update_next(12 * MS, MS, 11 * MS), (12 * MS, 0));
        // 1.5 periods behind: one period on, still in the past -> the next callback comes
        // at once (catch-up), phase kept
        assert_eq!(roscpp_update_next(10 * MS, MS, 11 * MS + 500_000), (11 * MS, 0));
        // exactly a period behind after the step: next + P == now, not a restart
        assert_eq!(roscpp_update_next(10 * MS, MS, 12 * MS), (11 * MS, 0));
    }

    #[test]
    fn roscpp_restarts_from_now_when_more_than_a_period_behind() {
        // next 10 -> 11; 11 + 1 < 12.5: restart at 12.5, 1 whole period dropped
        assert_eq!(roscpp_update_next(10 * MS, MS, 12 * MS + 500_000), (12 * MS + 500_000, 1));
        // 5.2 periods late: next 11, dropped (15.2 - 11) / 1 = 4
        assert_eq!(roscpp_update_next(10 * MS, MS, 15 * MS + 200_000), (15 * MS + 200_000, 4));
    }

    #[test]
    fn roscpp_waits_whole_milliseconds_and_at_least_one() {
        assert_eq!(roscpp_wait_ms(10 * MS, 1), 9);
        assert_eq!(roscpp_wait_ms(10 * MS, 0), 10);
        assert_eq!(roscpp_wait_ms(MS, 999_999), 1);
        assert_eq!(roscpp_wait_ms(MS, 1), 1, "0.999999 ms truncates to 0, then max(.., 1)");
        assert_eq!(roscpp_wait_ms(NEVER, 0), i32::MAX as i64);
    }

    #[test]
    fn roscpp_timer_thread_queues_due_timers_only_from_the_list() {
        assert_eq!(roscpp_check(100, true, 100), (true, 100 + ROSCPP_IDLE_WAIT_NS));
        assert_eq!(roscpp_check(99, true, 100), (false, 100));
        assert_eq!(roscpp_check(200, false, 100), (false, 200 + ROSCPP_IDLE_WAIT_NS));
        assert_eq!(roscpp_check(200, true, NEVER), (false, NEVER));
    }

    #[test]
    fn roscpp_wait_sleeps_9_then_1_ms_for_10ms_and_stops_when_notified() {
        // armed at 0 for 10 ms, the timer thread looks at 20 us: waits 9 ms, then 1 ms
        let mut c = FakeClock::new(20_000, &[30_000, 5_000]);
        roscpp_wait(&mut c, 10 * MS, || false);
        let waits: Vec<_> = c.sleeps.iter().map(|s| s.1).collect();
        assert_eq!(waits, vec![9 * MS, MS]);
        assert!(c.sleeps.iter().all(|s| s.0 == "rel"));
        assert_eq!(c.t, 20_000 + 10 * MS + 35_000);
        // a 1 ms timer: one wait of 1 ms
        let mut c = FakeClock::new(20_000, &[]);
        roscpp_wait(&mut c, MS, || false);
        assert_eq!(c.sleeps, vec![("rel", MS)]);
        // notified: no wait at all
        let mut c = FakeClock::new(0, &[]);
        roscpp_wait(&mut c, 10 * MS, || true);
        assert!(c.sleeps.is_empty());
    }

    #[test]
    fn rcl_advances_one_period_and_skips_whole_missed_periods() {
        assert_eq!(rcl_next_call_time(10 * MS, MS, 10 * MS + 100), (11 * MS, 0));
        // exactly on the next call: not skipped (ready at once)
        assert_eq!(rcl_next_call_time(10 * MS, MS, 11 * MS), (11 * MS, 0));
        // 2.5 periods late: 11 and 12 are skipped, 13 kept (phase kept)
        assert_eq!(rcl_next_call_time(10 * MS, MS, 12 * MS + 500_000), (13 * MS, 2));
        // just past 11: one skipped
        assert_eq!(rcl_next_call_time(10 * MS, MS, 11 * MS + 1), (12 * MS, 1));
    }

    fn sched(period: i64, slots: Option<u64>) -> Schedule {
        Schedule { mode: TimerMode::RclcppModel, interval_ns: period, duration_ns: None, slots }
    }

    #[test]
    fn rclcpp_never_runs_a_callback_before_its_time_and_skips_without_catch_up() {
        // wake-ups: 40 ns late, 300 ns early (waits again), 2.5 periods late, on time
        let mut c = FakeClock::new(0, &[40, -300, 0, 2_500, 0]);
        let (mut lat, mut jit) = (Keep::default(), Keep::default());
        let stop = AtomicBool::new(false);
        let p = AtomicU64::new(0);
        let end = rclcpp_loop(&mut c, sched(1_000, Some(6)), 0, &mut lat, &mut jit, &stop, &p);
        assert_eq!(end, LoopEnd::Count);
        // expected 1000 (woke 1040), 2000 (woke 1700: early, waits 300 more), 3000 (woke
        // 5500: 4000 and 5000 skipped), 6000
        let durations: Vec<_> = c.sleeps.iter().map(|s| s.1).collect();
        assert_eq!(durations, vec![1_000, 960, 300, 1_000, 500]);
        assert_eq!(lat.values(), vec![40, 0, 2_500, 0]);
        assert!(lat.values().iter().all(|v| *v >= 0));
        assert_eq!(lat.overruns, 2);
        assert_eq!(jit.values(), vec![-40, 2_500, -2_500]);
        assert_eq!(p.load(std::sync::atomic::Ordering::Relaxed), 4);
    }

    #[test]
    fn rclcpp_ends_on_duration_and_stop() {
        let mut c = FakeClock::new(0, &[]);
        let (mut lat, mut jit) = (Keep::default(), Keep::default());
        let stop = AtomicBool::new(false);
        let p = AtomicU64::new(0);
        let s = Schedule { duration_ns: Some(10_000), ..sched(1_000, None) };
        assert_eq!(rclcpp_loop(&mut c, s, 0, &mut lat, &mut jit, &stop, &p), LoopEnd::Duration);
        assert_eq!(lat.samples.len(), 10);
        stop.store(true, SeqCst);
        let mut lat2 = Keep::default();
        assert_eq!(rclcpp_loop(&mut c, s, 0, &mut lat2, &mut jit, &stop, &p), LoopEnd::Interrupted);
        assert!(lat2.samples.is_empty());
    }

    #[test]
    fn oneshot_values_are_against_the_reference_and_against_the_anchor() {
        // anchored at 1000 (ROS time), reference 300 ns later (test clock, offset 5000),
        // callback 1 ms + 40 ns after the anchor
        let (ext, own) = oneshot_values(1_000, 6_300, 1_000 + MS + 40, 6_000 + MS + 40, MS);
        assert_eq!((ext, own), (-260, 40));
        // preempted for 0.8 ms between the anchor and the reference: S4's value is -0.8 ms
        // plus the timer's own lateness; the timer did not fire early
        let (ext, own) = oneshot_values(0, 800_000, MS + 50, MS + 50, MS);
        assert_eq!((ext, own), (-799_950, 50));
    }

    #[test]
    fn shared_timer_state_follows_roscpp() {
        let s = RosTimerShared::new(0, None);
        assert_eq!(s.next_expected.load(SeqCst), NEVER);
        s.set_period(1_000, MS);
        assert_eq!(s.next_expected.load(SeqCst), MS + 1_000);
        assert!(s.new_timer.load(SeqCst));
        assert_eq!(s.take(), None);
        s.queued.store(5, SeqCst);
        assert_eq!(s.take(), Some(5));
        assert_eq!(s.take(), None);
        s.in_list.store(false, SeqCst);
        s.schedule(NEVER);
        assert!(s.in_list.load(SeqCst));
        let p = RosTimerShared::new(7, Some(MS));
        assert_eq!(p.next_expected.load(SeqCst), 7 + MS);
    }

    /// The two threads of each roscpp model run and hand callbacks over (real clocks; counts
    /// only, no bound on a time).
    #[test]
    fn oneshot_and_roscpp_threads_hand_callbacks_over() {
        use crate::clock::{MonotonicClock, RosWallClock};
        use std::sync::Arc;
        for mode in [TimerMode::OneshotModel, TimerMode::RoscppModel] {
            let s = Arc::new(RosTimerShared::new(0, None));
            let s2 = s.clone();
            let timer = std::thread::spawn(move || roscpp_timer_thread(&mut RosWallClock, &s2));
            while !s.timer_thread_ready() {
                std::thread::yield_now();
            }
            s.register_callback_thread();
            let (mut a, mut b) = (Keep::default(), Keep::default());
            let stop = AtomicBool::new(false);
            let p = AtomicU64::new(0);
            let sc = Schedule { mode, interval_ns: 200_000, duration_ns: None, slots: Some(20) };
            let start = rtlab_sys::clock::monotonic_ns();
            let (mut r, mut m) = (RosWallClock, MonotonicClock);
            let end = match mode {
                TimerMode::OneshotModel => {
                    oneshot_test_thread(&mut r, &mut m, &s, sc, start, &mut a, &mut b, &stop, &p)
                }
                _ => roscpp_spin_thread(&mut r, &mut m, &s, sc, start, &mut a, &mut b, &stop, &p),
            };
            timer.join().unwrap();
            assert_eq!(end, LoopEnd::Count, "{mode:?}");
            assert_eq!(a.samples.len() as u64 + a.overruns, 20, "{mode:?}");
            if mode == TimerMode::OneshotModel {
                assert_eq!(b.samples.len(), 20, "one anchor value per callback");
            }
        }
    }
}
