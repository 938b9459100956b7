//! What the monitor's HTTP thread reads: the running configuration's counters and what the
//! last interval closed with.

use super::chains::ChainStats;
use super::config::{CanaryConfig, ChainConfig, TopicConfig};
use super::stats::{CanaryStats, TopicStats};
use super::verdict::Verdict;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A topic's last verdict and figures.
#[derive(Clone, Debug, PartialEq)]
pub struct TopicView {
    pub verdict: Verdict,
    pub rate_hz: f64,
    pub max_period_ns: Option<i64>,
    pub max_delay_ns: Option<i64>,
    pub writers: u64,
}

/// What /metrics reads: the running configuration's counters and the last interval's end.
#[derive(Default)]
pub struct View {
    pub canary: Option<(CanaryConfig, Arc<CanaryStats>)>,
    /// Each chain, its counts and its last interval's maximum.
    pub chains: Vec<(ChainConfig, Arc<ChainStats>, Option<i64>)>,
    pub topics: Vec<TopicRow>,
    pub intervals: u64,
    pub canary_max_ns: Option<i64>,
    pub day_max_ns: Option<i64>,
    pub worst_cases: u64,
    pub reloads: u64,
    pub reload_failures: u64,
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
    pub canary_cpu_seconds: f64,
}

/// A watched topic: its configuration, counts and last verdict.
pub type TopicRow = (TopicConfig, Arc<TopicStats>, Option<TopicView>);

/// The period a topic is expected to keep: the configured rate's, else its writers'
/// Deadline QoS (None: neither).
pub fn expected_period_ns(t: &TopicConfig, s: &TopicStats) -> Option<i64> {
    let d = s.writers_deadline_ns.load(Ordering::Relaxed);
    t.rate.as_ref().map(|r| r.period_ns).or((d > 0).then_some(d))
}
