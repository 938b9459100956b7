//! rtlab-load: the loads a measurement runs under — stress-ng (cpu, mem, io, hdd, S3's mix,
//! a CPU load percentage), iperf3 traffic (UDP or TCP, a bit rate, tx or rx, over loopback
//! or into a network-namespace peer), or a user command. A load is started before a
//! measurement window, checked alive during it and stopped after it, with the achieved CPU
//! use (from /proc/stat) and bit rate (from iperf3 --json) recorded in a [`LoadReport`].
//!
//! Contract: a load never outlives rtlab.
//! - Stopped or dropped (also on panic), a [`RunningLoad`] kills the process group of every
//!   process it started.
//! - Killed (`kill -9`, where no `Drop` runs), rtlab takes its loads along: every child
//!   (stress-ng, the iperf3 server and client, the `ip netns exec` wrappers, a user command)
//!   gets PR_SET_PDEATHSIG(SIGKILL) before exec through
//!   [`rtlab_sys::process::die_with_parent`]. That signal fires when the *thread* that forked
//!   the child ends, so every child is forked by one spawner thread this crate starts on
//!   first use and never ends: a load may be started from any thread, also a short-lived one.
//!   `ip netns exec` execs its program in the same process, so iperf3 inside a namespace
//!   keeps the signal. stress-ng's workers end with their stress-ng parent (stress-ng sets
//!   its own parent-death alarm on them, just after their fork: a kill in the first
//!   milliseconds of a load, while stress-ng forks them, can leave one behind — seen once in
//!   ~100 kills 10 ms after start — for the time limit below to end); the grandchildren of
//!   a user command are only covered by the process-group kill of stop/drop.
//! - A second guard, for when the signal cannot come: the tools get a time limit of their
//!   own from the `max_duration` given to [`RunningLoad::start`] (see [`max_duration_for`]):
//!   stress-ng `--timeout`, the iperf3 client `-t`, the iperf3 server `--one-off` and
//!   `--idle-timeout`. A user command gets only the signal.
//!
//! A tool that is not installed is a [`LoadError::Missing`] holding a
//! [`rtlab_core::error::Missing`] (with the Debian package), the same for stress-ng, iperf3
//! and `ip`: the case is skipped, not failed. Nothing here prints.

#![forbid(unsafe_code)]

mod config;
mod cpu;
mod error;
mod iperf;
mod running;

pub use config::{command_of, tool_seconds, Direction, LoadConfig, TrafficConfig, TrafficSide};
pub use cpu::CpuTimes;
pub use error::{which, LoadError};
pub use iperf::{parse_iperf, port_listening};
pub use running::{LoadReport, RunningLoad};

use std::time::Duration;

/// The `max_duration` to give a load that should run for `planned` (the case's whole time
/// under load: warm-up, window, evidence): `planned` plus a margin of 30 s and 10 %, so a
/// case never sees its load end early, while a load left behind ends soon after.
pub fn max_duration_for(planned: Duration) -> Duration {
    planned.saturating_add(Duration::from_secs(30)).saturating_add(planned / 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_is_generous() {
        assert_eq!(max_duration_for(Duration::from_secs(10)), Duration::from_secs(41));
        assert_eq!(max_duration_for(Duration::from_secs(3600)), Duration::from_secs(3990));
        assert_eq!(max_duration_for(Duration::MAX), Duration::MAX);
    }
}
