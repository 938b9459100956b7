//! A watched topic's verdict for an interval.
//!
//! Contract (pure): `lost` when no message ever came and no publisher is matched (the topic is
//! not there); `stale` when the last message is older than the stale time (a publisher that
//! stopped, or that lives on and says nothing); `late` when the interval's rate is below the
//! expected rate by more than the tolerance, or a message's Header delay was above its limit;
//! else `ok`. A topic too fast is not late (its rate is in the metrics).

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Ok,
    Late,
    Stale,
    Lost,
}

impl Verdict {
    pub const ALL: [Verdict; 4] = [Verdict::Ok, Verdict::Late, Verdict::Stale, Verdict::Lost];

    pub fn name(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Late => "late",
            Verdict::Stale => "stale",
            Verdict::Lost => "lost",
        }
    }
}

/// What a topic is expected to do.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Expect {
    /// None: no rate is checked (none given, no Deadline QoS offered).
    pub rate_hz: Option<f64>,
    /// The fraction of the rate it may fall short by (0.1: 10 %).
    pub tolerance: f64,
    /// No message for this long: stale.
    pub stale_ns: i64,
    /// A Header delay above this is late (None: not checked).
    pub max_delay_ns: Option<i64>,
}

/// What an interval saw of the topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    pub interval_ns: i64,
    pub messages: u64,
    /// CLOCK_MONOTONIC of the last message ever (None: none yet).
    pub last_ns: Option<i64>,
    pub now_ns: i64,
    pub writers: u64,
    pub max_delay_ns: Option<i64>,
}

/// The interval's rate, Hz.
pub fn rate_hz(s: &Seen) -> f64 {
    if s.interval_ns <= 0 {
        return 0.0;
    }
    s.messages as f64 * 1e9 / s.interval_ns as f64
}

pub fn verdict(e: &Expect, s: &Seen) -> Verdict {
    let Some(last) = s.last_ns else {
        return if s.writers == 0 { Verdict::Lost } else { Verdict::Stale };
    };
    if s.now_ns - last > e.stale_ns {
        return Verdict::Stale;
    }
    let slow = e.rate_hz.is_some_and(|r| rate_hz(s) < r * (1.0 - e.tolerance));
    let delayed = matches!((e.max_delay_ns, s.max_delay_ns), (Some(l), Some(d)) if d > l);
    if slow || delayed {
        Verdict::Late
    } else {
        Verdict::Ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_verdict_from_what_the_interval_saw() {
        let e = Expect {
            rate_hz: Some(100.0),
            tolerance: 0.1,
            stale_ns: 300_000_000,
            max_delay_ns: None,
        };
        let s = |messages, last: Option<i64>, writers| Seen {
            interval_ns: 1_000_000_000,
            messages,
            last_ns: last,
            now_ns: 10_000_000_000,
            writers,
            max_delay_ns: None,
        };
        let recent = Some(9_990_000_000);
        assert_eq!(verdict(&e, &s(100, recent, 1)), Verdict::Ok);
        assert_eq!(verdict(&e, &s(91, recent, 1)), Verdict::Ok);
        assert_eq!(verdict(&e, &s(89, recent, 1)), Verdict::Late);
        assert_eq!(verdict(&e, &s(50, recent, 1)), Verdict::Late);
        assert_eq!(verdict(&e, &s(500, recent, 1)), Verdict::Ok, "too fast is not late");
        assert_eq!(verdict(&e, &s(0, Some(9_000_000_000), 1)), Verdict::Stale);
        assert_eq!(verdict(&e, &s(0, Some(9_000_000_000), 0)), Verdict::Stale);
        assert_eq!(verdict(&e, &s(0, None, 0)), Verdict::Lost);
        assert_eq!(verdict(&e, &s(0, None, 1)), Verdict::Stale);
        let d = Expect { max_delay_ns: Some(5_000_000), ..e };
        let mut x = s(100, recent, 1);
        x.max_delay_ns = Some(6_000_000);
        assert_eq!(verdict(&d, &x), Verdict::Late);
        x.max_delay_ns = Some(4_000_000);
        assert_eq!(verdict(&d, &x), Verdict::Ok);
        assert_eq!(rate_hz(&s(50, recent, 1)), 50.0);
        let any = Expect { rate_hz: None, ..e };
        assert_eq!(verdict(&any, &s(3, recent, 1)), Verdict::Ok, "no rate: only stale and lost");
        assert_eq!(verdict(&any, &s(0, Some(9_000_000_000), 1)), Verdict::Stale);
    }
}
