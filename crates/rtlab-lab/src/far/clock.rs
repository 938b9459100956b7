//! The far clock's offset, measured over the link: the near side reads its CLOCK_MONOTONIC,
//! asks the agent for its own ([`Request::Clock`]), reads its clock again.
//!
//! Contract: the far reading was taken between the two near readings, so the far clock's
//! offset lies within half the exchange's round trip of `far - midpoint`; of
//! [`EXCHANGES`] exchanges the one with the shortest round trip gives the offset and that
//! bound, its uncertainty. [`Offsets`] between one measurement before a run and one after it
//! maps a far time to this host's clock, the drift between them interpolated.

use super::link::{FarLink, REQUEST_TIMEOUT};
use super::protocol::{FarClock, Request};
use crate::error::LabError;
use serde::{Deserialize, Serialize};

/// Exchanges per measurement.
pub const EXCHANGES: u32 = 16;

/// One measurement of the far clock's offset (far - near, ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockOffset {
    pub offset_ns: i64,
    /// The true offset is within this of `offset_ns` (half the shortest round trip).
    pub uncertainty_ns: i64,
    pub round_trip_ns: i64,
    /// The near clock at the middle of that exchange.
    pub at_ns: i64,
    pub exchanges: u32,
}

/// Measure the offset of the far clock (see the module's contract).
pub fn measure(link: &FarLink) -> Result<ClockOffset, LabError> {
    let mut best: Option<ClockOffset> = None;
    for _ in 0..EXCHANGES {
        let t0 = rtlab_sys::clock::monotonic_ns();
        let c: FarClock = link.ask(Request::Clock, REQUEST_TIMEOUT)?;
        let t1 = rtlab_sys::clock::monotonic_ns();
        let o = from_exchange(t0, c.monotonic_ns, t1);
        if best.map_or(true, |b| o.round_trip_ns < b.round_trip_ns) {
            best = Some(o);
        }
    }
    let mut b = best.expect("EXCHANGES > 0");
    b.exchanges = EXCHANGES;
    Ok(b)
}

/// One exchange: near `t0`, far `far`, near `t1`.
pub fn from_exchange(t0: i64, far: i64, t1: i64) -> ClockOffset {
    let rtt = (t1 - t0).max(0);
    let mid = t0 + rtt / 2;
    ClockOffset {
        offset_ns: far - mid,
        uncertainty_ns: rtt - rtt / 2,
        round_trip_ns: rtt,
        at_ns: mid,
        exchanges: 1,
    }
}

/// The far clock mapped to this host's between two measurements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offsets {
    pub before: ClockOffset,
    pub after: ClockOffset,
}

impl Offsets {
    /// The larger of the two measurements' uncertainties.
    pub fn uncertainty_ns(&self) -> i64 {
        self.before.uncertainty_ns.max(self.after.uncertainty_ns)
    }

    /// How far the offset moved between the two (the clocks' drift over the run, within
    /// both uncertainties).
    pub fn drift_ns(&self) -> i64 {
        self.after.offset_ns - self.before.offset_ns
    }

    /// A far time on this host's clock: the offset interpolated between the two
    /// measurements (held at either end outside them).
    pub fn to_near(&self, far_ns: i64) -> i64 {
        let (b, a) = (&self.before, &self.after);
        let near = i128::from(far_ns - b.offset_ns);
        let span = i128::from(a.at_ns - b.at_ns);
        let o = if span <= 0 {
            i128::from(b.offset_ns)
        } else {
            let x = (near - i128::from(b.at_ns)).clamp(0, span);
            i128::from(b.offset_ns) + i128::from(a.offset_ns - b.offset_ns) * x / span
        };
        (i128::from(far_ns) - o) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exchange_bounds_the_offset_by_half_its_round_trip() {
        // far clock = near + 1_000_000; the reply read 30 after the request left, 100 round trip
        let o = from_exchange(5_000, 5_030 + 1_000_000, 5_100);
        assert_eq!(o.round_trip_ns, 100);
        assert_eq!(o.uncertainty_ns, 50);
        assert_eq!(o.offset_ns, 1_000_000 - 20);
        assert!((o.offset_ns - 1_000_000).abs() <= o.uncertainty_ns);
        // an odd round trip rounds the bound up
        assert_eq!(from_exchange(0, 0, 101).uncertainty_ns, 51);
    }

    #[test]
    fn far_times_map_through_the_interpolated_offset() {
        let at = |offset_ns, at_ns| ClockOffset {
            offset_ns,
            uncertainty_ns: 10,
            round_trip_ns: 20,
            at_ns,
            exchanges: EXCHANGES,
        };
        // the far clock runs 1000 ahead at near 0 and 2000 ahead at near 1_000_000
        let o = Offsets { before: at(1000, 0), after: at(2000, 1_000_000) };
        assert_eq!(o.to_near(1000), 0);
        assert_eq!(o.to_near(502_000 - 500), 500_000);
        assert_eq!(o.to_near(1_002_000), 1_000_000);
        // held at the ends
        assert_eq!(o.to_near(-9_000), -10_000);
        assert_eq!(o.to_near(3_002_000), 3_000_000);
        assert_eq!(o.drift_ns(), 1000);
        assert_eq!(o.uncertainty_ns(), 10);
        let same = Offsets { before: at(7, 5), after: at(7, 5) };
        assert_eq!(same.to_near(100), 93);
    }
}
