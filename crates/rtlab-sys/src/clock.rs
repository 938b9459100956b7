//! CLOCK_MONOTONIC reads and sleeps in integer nanoseconds.
//!
//! Contract: no allocation; `sleep_until` is `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`
//! and resumes after a signal to the same absolute time; `sleep_for` is the relative form
//! and resumes with the remaining time. (clock_nanosleep(2))

/// Now on CLOCK_MONOTONIC, ns.
#[inline]
pub fn monotonic_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Now on CLOCK_REALTIME, ns since the epoch (for stamping results, and as ROS 1's
/// `ros::Time::now()` in the roscpp timer models).
#[inline]
pub fn realtime_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: as above.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

#[inline]
fn ts_of(ns: i64) -> libc::timespec {
    libc::timespec { tv_sec: ns.div_euclid(1_000_000_000), tv_nsec: ns.rem_euclid(1_000_000_000) }
}

/// Sleep until the absolute CLOCK_MONOTONIC time `t_ns`.
#[inline]
pub fn sleep_until(t_ns: i64) {
    let ts = ts_of(t_ns);
    loop {
        // SAFETY: ts is valid; a null remain pointer is allowed with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

/// Sleep for `d_ns` relative to now (the way a naive or ROS-style timer waits).
#[inline]
pub fn sleep_for(d_ns: i64) {
    if d_ns <= 0 {
        return;
    }
    let mut ts = ts_of(d_ns);
    loop {
        let mut rem = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: ts and rem are valid timespecs.
        let rc = unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, 0, &ts, &mut rem) };
        if rc != libc::EINTR {
            return;
        }
        ts = rem;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_moves_forward_and_sleeps_are_not_early() {
        let a = monotonic_ns();
        sleep_until(a + 200_000);
        let b = monotonic_ns();
        assert!(b >= a + 200_000);
        sleep_for(100_000);
        assert!(monotonic_ns() >= b + 100_000);
        assert!(realtime_ns() > 1_600_000_000_000_000_000);
    }
}
