//! The clock an engine reads and sleeps on: the real CLOCK_MONOTONIC, or a scripted fake
//! that lets tests drive the schedule logic (grid, overruns, relative sleeps) exactly.
//!
//! Contract: implementations never allocate in `now`/`sleep_*`.

/// What an engine needs from time.
pub trait Clock {
    /// Now, ns on a monotonic clock.
    fn now(&mut self) -> i64;
    /// Sleep until the absolute time `t_ns`.
    fn sleep_until(&mut self, t_ns: i64);
    /// Sleep for `d_ns` from now.
    fn sleep_for(&mut self, d_ns: i64);
}

/// CLOCK_MONOTONIC with clock_nanosleep.
#[derive(Clone, Copy, Debug, Default)]
pub struct MonotonicClock;

impl Clock for MonotonicClock {
    #[inline]
    fn now(&mut self) -> i64 {
        rtlab_sys::clock::monotonic_ns()
    }
    #[inline]
    fn sleep_until(&mut self, t_ns: i64) {
        rtlab_sys::clock::sleep_until(t_ns)
    }
    #[inline]
    fn sleep_for(&mut self, d_ns: i64) {
        rtlab_sys::clock::sleep_for(d_ns)
    }
}

/// ROS 1 time as roscpp's timer thread sees it: `ros::Time::now()` is CLOCK_REALTIME, and
/// its waits are timed waits on a condition variable that a notify cuts short
/// (`boost::condition_variable::timed_wait`). Here the wait is `std::thread::park_timeout`
/// (a futex with a relative timeout, as a condvar wait is) and the notify is
/// `Thread::unpark`; a wait may end early, as a condvar wait may, and the caller re-checks.
#[derive(Clone, Copy, Debug, Default)]
pub struct RosWallClock;

impl Clock for RosWallClock {
    #[inline]
    fn now(&mut self) -> i64 {
        rtlab_sys::clock::realtime_ns()
    }
    #[inline]
    fn sleep_until(&mut self, t_ns: i64) {
        let d = t_ns - self.now();
        self.sleep_for(d)
    }
    #[inline]
    fn sleep_for(&mut self, d_ns: i64) {
        if d_ns > 0 {
            std::thread::park_timeout(std::time::Duration::from_nanos(d_ns as u64));
        }
    }
}

/// A fake clock: each sleep ends at its target plus the next scripted lateness (then 0).
/// It also remembers what it was asked, so tests can check absolute vs relative sleeps.
#[derive(Clone, Debug, Default)]
pub struct FakeClock {
    pub t: i64,
    pub lateness: std::collections::VecDeque<i64>,
    /// ("abs", target) or ("rel", duration) for every sleep, in order.
    pub sleeps: Vec<(&'static str, i64)>,
}

impl FakeClock {
    pub fn new(start: i64, lateness: &[i64]) -> Self {
        FakeClock { t: start, lateness: lateness.iter().copied().collect(), sleeps: Vec::new() }
    }
    fn late(&mut self) -> i64 {
        self.lateness.pop_front().unwrap_or(0)
    }
}

impl Clock for FakeClock {
    fn now(&mut self) -> i64 {
        self.t
    }
    fn sleep_until(&mut self, t_ns: i64) {
        self.sleeps.push(("abs", t_ns));
        let late = self.late();
        self.t = self.t.max(t_ns) + late;
    }
    fn sleep_for(&mut self, d_ns: i64) {
        self.sleeps.push(("rel", d_ns));
        let late = self.late();
        self.t += d_ns.max(0) + late;
    }
}
