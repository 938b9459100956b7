//! What the arrivals of a live topic say against its nominal rate: arrival periods
//! `P_k = t_k - t_(k-1)`, their deviation `d_k = P_k - P` from the nominal period `P`, gaps
//! (a period above 1.5 P) with the periods they missed, and bursts (a period below P / 2).
//!
//! Contract: pure (times are given), allocation-free after [`Arrivals::new`]. Without a given
//! nominal period, the first [`ESTIMATE_FROM`] periods are held, their median becomes `P`
//! (said by [`Arrivals::estimated`]), and they are then recorded like every later one.

use rtlab_core::sink::Sink;

/// Periods held to estimate the nominal one.
pub const ESTIMATE_FROM: usize = 32;

/// The arrivals of one topic.
pub struct Arrivals {
    nominal_ns: Option<i64>,
    estimated: bool,
    held: [i64; ESTIMATE_FROM],
    held_at: [i64; ESTIMATE_FROM],
    held_n: usize,
    first: Option<i64>,
    last: Option<i64>,
    k: u64,
    pub received: u64,
    /// Periods above 1.5 P.
    pub gaps: u64,
    /// Periods those gaps missed: round(P_k / P) - 1 each.
    pub missed_periods: u64,
    /// Periods below P / 2.
    pub bursts: u64,
    pub size_min: usize,
    pub size_max: usize,
    pub size_sum: u64,
}

impl Arrivals {
    /// `nominal_ns`: the topic's period (None: estimated from the first periods).
    pub fn new(nominal_ns: Option<i64>) -> Arrivals {
        Arrivals {
            nominal_ns: nominal_ns.filter(|p| *p > 0),
            estimated: false,
            held: [0; ESTIMATE_FROM],
            held_at: [0; ESTIMATE_FROM],
            held_n: 0,
            first: None,
            last: None,
            k: 0,
            received: 0,
            gaps: 0,
            missed_periods: 0,
            bursts: 0,
            size_min: usize::MAX,
            size_max: 0,
            size_sum: 0,
        }
    }

    /// The nominal period in use (None while it is being estimated).
    pub fn nominal_ns(&self) -> Option<i64> {
        self.nominal_ns
    }

    /// Whether the nominal period was estimated from the arrivals (not given).
    pub fn estimated(&self) -> bool {
        self.estimated
    }

    /// One message of `size` bytes arrived at `t` (ns): its period goes to `period`, its
    /// deviation from the nominal period to `deviation` (both indexed by arrival, at the
    /// time since the first arrival).
    pub fn arrive(
        &mut self,
        t: i64,
        size: usize,
        period: &mut impl Sink,
        deviation: &mut impl Sink,
    ) {
        self.received += 1;
        self.size_min = self.size_min.min(size);
        self.size_max = self.size_max.max(size);
        self.size_sum += size as u64;
        let first = *self.first.get_or_insert(t);
        let Some(last) = self.last.replace(t) else { return };
        let p = t - last;
        self.k += 1;
        match self.nominal_ns {
            Some(nominal) => self.judge(self.k, t - first, p, nominal, period, deviation),
            None => {
                self.held[self.held_n] = p;
                self.held_at[self.held_n] = t - first;
                self.held_n += 1;
                if self.held_n == ESTIMATE_FROM {
                    self.settle(period, deviation);
                }
            }
        }
    }

    /// End of the run: periods still held are judged against their own median.
    pub fn finish(&mut self, period: &mut impl Sink, deviation: &mut impl Sink) {
        if self.nominal_ns.is_none() && self.held_n > 0 {
            self.settle(period, deviation);
        }
    }

    fn settle(&mut self, period: &mut impl Sink, deviation: &mut impl Sink) {
        let n = self.held_n;
        let mut sorted = self.held;
        sorted[..n].sort_unstable();
        let nominal = sorted[n / 2].max(1);
        self.nominal_ns = Some(nominal);
        self.estimated = true;
        let first_k = self.k + 1 - n as u64;
        for i in 0..n {
            let (p, at) = (self.held[i], self.held_at[i]);
            self.judge(first_k + i as u64, at, p, nominal, period, deviation);
        }
        self.held_n = 0;
    }

    fn judge(
        &mut self,
        k: u64,
        at: i64,
        p: i64,
        nominal: i64,
        period: &mut impl Sink,
        deviation: &mut impl Sink,
    ) {
        period.record(k, at, p);
        deviation.record(k, at, p - nominal);
        if 2 * p > 3 * nominal {
            self.gaps += 1;
            self.missed_periods += ((p + nominal / 2) / nominal - 1).max(0) as u64;
        } else if 2 * p < nominal {
            self.bursts += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Keep(Vec<(u64, i64, i64)>);
    impl Sink for Keep {
        fn record(&mut self, i: u64, at: i64, v: i64) -> rtlab_core::Flow {
            self.0.push((i, at, v));
            rtlab_core::Flow::Continue
        }
        fn overrun(&mut self, _: u64) {}
    }

    const MS: i64 = 1_000_000;

    #[test]
    fn gaps_bursts_and_deviation_against_a_given_rate() {
        let mut a = Arrivals::new(Some(10 * MS));
        let (mut p, mut d) = (Keep::default(), Keep::default());
        // 0, 10, 20, then 50 (a gap of 30 ms: 2 periods missed), 52 (a burst), 60
        for (t, s) in [(0, 100), (10, 100), (20, 120), (50, 100), (52, 80), (60, 100)] {
            a.arrive(t * MS, s, &mut p, &mut d);
        }
        a.finish(&mut p, &mut d);
        assert_eq!(a.received, 6);
        assert_eq!(p.0.iter().map(|x| x.2 / MS).collect::<Vec<_>>(), vec![10, 10, 30, 2, 8]);
        assert_eq!(d.0.iter().map(|x| x.2 / MS).collect::<Vec<_>>(), vec![0, 0, 20, -8, -2]);
        assert_eq!((a.gaps, a.missed_periods, a.bursts), (1, 2, 1));
        assert_eq!((a.size_min, a.size_max, a.size_sum), (80, 120, 600));
        assert!(!a.estimated());
        assert_eq!(p.0[2].1, 50 * MS, "at: time since the first arrival");
    }

    #[test]
    fn the_rate_is_estimated_from_the_first_periods_when_not_given() {
        let mut a = Arrivals::new(None);
        let (mut p, mut d) = (Keep::default(), Keep::default());
        let mut t = 0;
        for k in 0..100 {
            // 1 kHz with every 10th period 1.5x (no gap) and one 3 ms hole at k = 50
            t += if k == 50 {
                3 * MS
            } else if k % 10 == 0 {
                3 * MS / 2
            } else {
                MS
            };
            a.arrive(t, 64, &mut p, &mut d);
        }
        a.finish(&mut p, &mut d);
        assert!(a.estimated());
        assert_eq!(a.nominal_ns(), Some(MS));
        assert_eq!(p.0.len(), 99, "every period recorded once, the held ones too");
        assert_eq!(p.0.iter().map(|x| x.0).collect::<Vec<_>>(), (1..100).collect::<Vec<_>>());
        assert_eq!((a.gaps, a.missed_periods), (1, 2));
    }

    #[test]
    fn a_short_run_is_judged_against_its_own_median() {
        let mut a = Arrivals::new(None);
        let (mut p, mut d) = (Keep::default(), Keep::default());
        for t in [0, 5, 10, 15] {
            a.arrive(t * MS, 10, &mut p, &mut d);
        }
        a.finish(&mut p, &mut d);
        assert_eq!(a.nominal_ns(), Some(5 * MS));
        assert_eq!(d.0.iter().map(|x| x.2).collect::<Vec<_>>(), vec![0, 0, 0]);
    }
}
