//! A sink for the engines' unit tests: it keeps every sample (it allocates: tests only).

use rtlab_core::sink::{Flow, Sink};

/// Keeps every `(index, at_ns, value_ns)` and the overruns; says stop after `stop_after`
/// samples when set.
#[derive(Default)]
pub(crate) struct Keep {
    pub samples: Vec<(u64, i64, i64)>,
    pub overruns: u64,
    pub stop_after: Option<usize>,
}

impl Sink for Keep {
    fn record(&mut self, index: u64, at_ns: i64, value_ns: i64) -> Flow {
        self.samples.push((index, at_ns, value_ns));
        match self.stop_after {
            Some(n) if self.samples.len() >= n => Flow::Stop,
            _ => Flow::Continue,
        }
    }
    fn overrun(&mut self, n: u64) {
        self.overruns += n;
    }
}

impl Keep {
    /// The values, in order.
    pub fn values(&self) -> Vec<i64> {
        self.samples.iter().map(|s| s.2).collect()
    }
}
