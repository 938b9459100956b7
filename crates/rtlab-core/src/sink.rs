//! The push-model sink every probe engine records into, and [`Recorder`], the standard one.
//!
//! Contract: an engine calls [`Sink::record`] once per sample from its hot loop. A sink
//! must not allocate, lock, block, log or print there; it may answer [`Flow::Stop`].
//! [`Recorder`] allocates everything in [`Recorder::new`] and keeps: exact running moments,
//! the log-linear histogram, missed deadlines, per-window maxima, an optional 1-us
//! cyclictest histogram and an optional raw-sample ring.
//! (Model: ripgrep's `crates/searcher/src/sink.rs`.)

use crate::cyclictest::UsHistogram;
use crate::histogram::Histogram;
use crate::raw::{RawProducer, RawSample};
use crate::stats::{Running, Summary};
use crate::windows::WindowMaxima;

/// Raised by a [`Recorder`] when a sample exceeds its spike threshold, so that a watcher
/// thread off the hot path can act on it (mark and snapshot a kernel trace); raised again
/// by a later sample once the watcher has re-armed it (cleared `hit` and `claimed`).
/// Only atomics: the hot loop never blocks on it.
#[derive(Debug, Default)]
pub struct SpikeFlag {
    pub hit: std::sync::atomic::AtomicBool,
    /// Taken by the first recorder over its threshold (two streams may cross at once).
    pub claimed: std::sync::atomic::AtomicBool,
    /// Which stream raised it (the hook's `source`).
    pub source: std::sync::atomic::AtomicU32,
    pub index: std::sync::atomic::AtomicU64,
    pub at_ns: std::sync::atomic::AtomicI64,
    pub value_ns: std::sync::atomic::AtomicI64,
}

impl SpikeFlag {
    /// (index, at_ns, value_ns) of the first spike, if any.
    pub fn get(&self) -> Option<(u64, i64, i64)> {
        use std::sync::atomic::Ordering::Acquire;
        self.hit.load(Acquire).then(|| {
            (self.index.load(Acquire), self.at_ns.load(Acquire), self.value_ns.load(Acquire))
        })
    }
}

/// A spike threshold and the flag to raise, as a probe configuration carries it (not
/// serialized: it lives only in this process; a role in another process gets none).
#[derive(Clone, Debug)]
pub struct SpikeHook {
    pub threshold_ns: i64,
    pub flag: std::sync::Arc<SpikeFlag>,
    /// Which stream this recorder feeds (reported with the spike).
    pub source: u32,
}

impl SpikeHook {
    /// The same flag and threshold, for stream `source`.
    pub fn for_source(&self, source: u32) -> SpikeHook {
        SpikeHook { source, ..self.clone() }
    }
}

impl PartialEq for SpikeHook {
    fn eq(&self, o: &SpikeHook) -> bool {
        self.threshold_ns == o.threshold_ns
            && self.source == o.source
            && std::sync::Arc::ptr_eq(&self.flag, &o.flag)
    }
}

impl Eq for SpikeHook {}

/// What a sink tells the engine after a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Stop,
}

/// Where an engine pushes its samples.
pub trait Sink {
    /// One sample: its 0-based index, when it happened (ns since the stream started) and
    /// its value in ns (signed).
    fn record(&mut self, index: u64, at_ns: i64, value_ns: i64) -> Flow;
    /// `n` periods were skipped because their slot had already passed.
    fn overrun(&mut self, n: u64);
}

/// How a [`Recorder`] is set up.
#[derive(Clone, Debug)]
pub struct RecorderConfig {
    /// Samples above this count as missed deadlines.
    pub deadline_ns: i64,
    /// Width of a max-over-time window.
    pub window_ns: i64,
    /// Windows preallocated (the width doubles if the run outlasts them).
    pub window_capacity: usize,
    /// Stop after this many samples (None: never from here).
    pub max_samples: Option<u64>,
    /// 1-us bins of a cyclictest-format histogram (None: not kept).
    pub us_histogram_buckets: Option<usize>,
    /// Raise the spike flag (given to [`Recorder::with_spike`]) on a sample above this.
    pub spike_threshold_ns: Option<i64>,
}

/// The standard sink: statistics, histogram, deadlines, windows, optional extras.
pub struct Recorder {
    pub deadline_ns: i64,
    pub running: Running,
    pub histogram: Histogram,
    pub windows: WindowMaxima,
    pub missed: u64,
    pub overruns: u64,
    pub us_histogram: Option<UsHistogram>,
    /// CLOCK_MONOTONIC instant of `at_ns` = 0, set by the probe before its loop (aligns the
    /// windows with kernel counters and traces).
    pub origin_monotonic_ns: Option<i64>,
    raw: Option<RawProducer>,
    max_samples: Option<u64>,
    spike: Option<(i64, std::sync::Arc<SpikeFlag>, u32)>,
}

impl Recorder {
    pub fn new(cfg: &RecorderConfig, raw: Option<RawProducer>) -> Self {
        Recorder {
            deadline_ns: cfg.deadline_ns,
            running: Running::default(),
            histogram: Histogram::new(),
            windows: WindowMaxima::new(cfg.window_ns, cfg.window_capacity),
            missed: 0,
            overruns: 0,
            us_histogram: cfg.us_histogram_buckets.map(UsHistogram::new),
            origin_monotonic_ns: None,
            raw,
            max_samples: cfg.max_samples,
            spike: None,
        }
    }

    /// Raise `flag` on a sample above `cfg.spike_threshold_ns` (no-op without a threshold).
    pub fn with_spike(self, cfg: &RecorderConfig, flag: std::sync::Arc<SpikeFlag>) -> Self {
        let hook =
            cfg.spike_threshold_ns.map(|threshold_ns| SpikeHook { threshold_ns, flag, source: 0 });
        self.with_hook(hook.as_ref())
    }

    /// Raise the hook's flag on a sample above its threshold, each time the flag is armed
    /// (None: no-op).
    pub fn with_hook(mut self, hook: Option<&SpikeHook>) -> Self {
        if let Some(h) = hook {
            self.spike = Some((h.threshold_ns, h.flag.clone(), h.source));
        }
        self
    }

    /// The summary with `missed` and `overruns` filled in.
    pub fn summary(&self) -> Summary {
        let mut s = Summary::from_parts(&self.running, &self.histogram);
        s.missed = Some(self.missed);
        s.overruns = Some(self.overruns);
        s
    }

    pub fn count(&self) -> u64 {
        self.running.count
    }
}

impl Sink for Recorder {
    #[inline]
    fn record(&mut self, index: u64, at_ns: i64, value_ns: i64) -> Flow {
        self.running.record(index, at_ns, value_ns);
        self.histogram.record(value_ns);
        self.windows.record(at_ns, value_ns);
        if value_ns > self.deadline_ns {
            self.missed += 1;
        }
        if let Some(h) = self.us_histogram.as_mut() {
            h.record(index, value_ns);
        }
        if let Some(r) = self.raw.as_ref() {
            r.push(RawSample { index, at_ns, value_ns });
        }
        if let Some((threshold, flag, source)) = self.spike.as_ref() {
            use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
            if value_ns > *threshold
                && !flag.hit.load(Relaxed)
                && flag.claimed.compare_exchange(false, true, Acquire, Relaxed).is_ok()
            {
                flag.source.store(*source, Release);
                flag.index.store(index, Release);
                flag.at_ns.store(at_ns, Release);
                flag.value_ns.store(value_ns, Release);
                flag.hit.store(true, Release);
            }
        }
        match self.max_samples {
            Some(m) if self.running.count >= m => Flow::Stop,
            _ => Flow::Continue,
        }
    }

    #[inline]
    fn overrun(&mut self, n: u64) {
        self.overruns += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorder_counts_deadlines_and_stops() {
        let cfg = RecorderConfig {
            deadline_ns: 100,
            window_ns: 1_000,
            window_capacity: 16,
            max_samples: Some(3),
            us_histogram_buckets: Some(10),
            spike_threshold_ns: Some(100),
        };
        let flag = std::sync::Arc::new(SpikeFlag::default());
        let mut r = Recorder::new(&cfg, None).with_spike(&cfg, flag.clone());
        assert_eq!(r.record(0, 0, 50), Flow::Continue);
        assert_eq!(flag.get(), None);
        assert_eq!(r.record(1, 1_000, 101), Flow::Continue);
        r.overrun(2);
        assert_eq!(r.record(2, 2_000, 100), Flow::Stop);
        assert_eq!(flag.get(), Some((1, 1_000, 101)), "the first spike is kept");
        let s = r.summary();
        assert_eq!(s.count, 3);
        assert_eq!(s.missed, Some(1));
        assert_eq!(s.overruns, Some(2));
        assert_eq!(s.max_ns, Some(101));
        assert_eq!(s.max_index, Some(1));
        assert_eq!(r.windows.to_data().max_ns, vec![Some(50), Some(101), Some(100)]);
    }
}
