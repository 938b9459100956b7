//! Per-window maxima ("max over time", OSADL style) in a fixed, preallocated array.
//!
//! Contract: `record` never allocates. When the run outlasts the array, neighbouring
//! windows are merged in pairs and the window width doubles, so memory stays fixed and
//! no sample is left out; the width in force is part of the result.

use serde::{Deserialize, Serialize};

/// Per-window maxima and counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowMaxima {
    width_ns: i64,
    max: Box<[i64]>,
    count: Box<[u64]>,
    used: usize,
}

/// What result files hold: the window width and, per window, the max (None when empty) and count.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowData {
    pub width_ns: i64,
    pub max_ns: Vec<Option<i64>>,
    pub count: Vec<u64>,
}

impl WindowMaxima {
    /// `width_ns` > 0; `capacity` >= 2 windows (preallocated now).
    pub fn new(width_ns: i64, capacity: usize) -> Self {
        let capacity = capacity.max(2);
        WindowMaxima {
            width_ns: width_ns.max(1),
            max: vec![i64::MIN; capacity].into_boxed_slice(),
            count: vec![0; capacity].into_boxed_slice(),
            used: 0,
        }
    }

    pub fn width_ns(&self) -> i64 {
        self.width_ns
    }

    /// Record `v` that happened `at_ns` after the start (negative times count in window 0).
    #[inline]
    pub fn record(&mut self, at_ns: i64, v: i64) {
        let mut w = (at_ns.max(0) / self.width_ns) as usize;
        while w >= self.max.len() {
            self.halve();
            w = (at_ns.max(0) / self.width_ns) as usize;
        }
        if v > self.max[w] {
            self.max[w] = v;
        }
        self.count[w] += 1;
        if w + 1 > self.used {
            self.used = w + 1;
        }
    }

    /// Merge windows pairwise and double the width (no allocation).
    fn halve(&mut self) {
        let n = self.max.len();
        for i in 0..n / 2 {
            let (a, b) = (2 * i, 2 * i + 1);
            self.max[i] = self.max[a].max(self.max[b]);
            self.count[i] = self.count[a] + self.count[b];
        }
        if n % 2 == 1 {
            self.max[n / 2] = self.max[n - 1];
            self.count[n / 2] = self.count[n - 1];
        }
        let start = n.div_ceil(2);
        for i in start..n {
            self.max[i] = i64::MIN;
            self.count[i] = 0;
        }
        self.used = self.used.div_ceil(2);
        self.width_ns *= 2;
    }

    pub fn to_data(&self) -> WindowData {
        WindowData {
            width_ns: self.width_ns,
            max_ns: self.max[..self.used].iter().map(|&m| (m != i64::MIN).then_some(m)).collect(),
            count: self.count[..self.used].to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_hold_their_maxima() {
        let mut w = WindowMaxima::new(1_000, 8);
        w.record(10, 5);
        w.record(900, 7);
        w.record(2_500, 3);
        let d = w.to_data();
        assert_eq!(d.width_ns, 1_000);
        assert_eq!(d.max_ns, vec![Some(7), None, Some(3)]);
        assert_eq!(d.count, vec![2, 0, 1]);
    }

    #[test]
    fn a_long_run_widens_windows_instead_of_dropping() {
        let mut w = WindowMaxima::new(10, 4);
        for t in 0..100 {
            w.record(t * 10, t);
        }
        let d = w.to_data();
        assert!(d.width_ns >= 250, "{d:?}");
        assert_eq!(d.count.iter().sum::<u64>(), 100);
        assert_eq!(d.max_ns.iter().flatten().max(), Some(&99));
        // every window's max is the largest t that falls in it
        for (i, m) in d.max_ns.iter().enumerate() {
            let last_t = ((i as i64 + 1) * d.width_ns / 10 - 1).min(99);
            assert_eq!(*m, Some(last_t));
        }
    }
}
