//! What the probe gives back: a [`CaseResult`] per case inside a [`PubsubOutcome`], or the
//! [`ProbeError`] that stopped it (bad input, set-up, real-time settings).

use crate::transport::{QosMapping, TransportError};
use rtlab_core::schema::Stream;
use serde::{Deserialize, Serialize};

/// Errors that stop the probe.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Setup(String),
    #[error("real-time settings: {0}")]
    Rt(String),
}

impl ProbeError {
    /// Bad input (exit 2 with one line).
    pub fn is_bad_input(&self) -> bool {
        match self {
            ProbeError::Transport(t) => t.is_bad_input(),
            ProbeError::Invalid(_) => true,
            _ => false,
        }
    }
}

/// One case measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    pub payload: usize,
    pub period_ns: i64,
    pub subscribers: usize,
    pub published: u64,
    pub overruns: u64,
    /// One per subscriber, in subscriber order.
    pub streams: Vec<Stream>,
    /// p50 of the slowest subscriber - p50 of the fastest (None with fewer than 2).
    pub p50_spread_ns: Option<i64>,
    pub fastest: Option<usize>,
    pub slowest: Option<usize>,
    /// Why this case measured nothing (it could not run here); None when it ran.
    #[serde(default)]
    pub error: Option<String>,
    /// What `--thread-priority` did in the publisher's process.
    #[serde(default)]
    pub thread_priorities_set: Vec<String>,
    /// The publisher's own lateness: each message's send time - its slot on the grid
    /// (`<case>.pub.send_lateness`); None when the case did not run.
    #[serde(default)]
    pub publisher: Option<Stream>,
    /// A publisher by hand: the subscribers it had when its first message went.
    #[serde(default)]
    pub matched_subscribers: Option<MatchedSubscribers>,
}

/// What a publisher by hand knew of its subscribers (elsewhere, started by hand) before its
/// first measured message: it waits for one, as a ping waits for its pong.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchedSubscribers {
    /// Subscribers matched with the publisher when its first message went (the middleware's
    /// count, [`Publisher::matched`](crate::transport::Publisher::matched)); None: the
    /// transport cannot tell, it published at once.
    pub count: Option<usize>,
    /// How long it waited for the first subscriber.
    pub waited_ns: i64,
    /// Then how long it let a reliable match settle.
    pub settle_ns: i64,
    /// Reliable, after the last message and the loss timeout: whether every matched
    /// subscriber acknowledged everything within [`TAIL_ACK_NS`] (None: not waited for:
    /// best effort, or a transport without acknowledgements) ...
    #[serde(default)]
    pub tail_acknowledged: Option<bool>,
    /// ... and how long that wait took.
    #[serde(default)]
    pub tail_waited_ns: i64,
}

/// How long a reliable publisher by hand waits, after its last message, for its subscribers
/// to acknowledge everything before it closes (a slow subscriber's tail would otherwise be
/// dropped with the writer).
pub const TAIL_ACK_NS: i64 = 10_000_000_000;

impl MatchedSubscribers {
    /// The run's note.
    pub fn note(&self, transport: &str) -> String {
        match self.count {
            Some(n) => format!(
                "pub by hand: {n} subscriber{} matched when the first message went (label matched_subscribers): waited {} for the first{}{}",
                if n == 1 { "" } else { "s" },
                rtlab_core::units::Nanos(self.waited_ns),
                if self.settle_ns > 0 {
                    format!(", then {} until the subscribers acknowledged a warm-up message (reliable: the path was current both ways)", rtlab_core::units::Nanos(self.settle_ns))
                } else {
                    String::new()
                },
                match self.tail_acknowledged {
                    Some(true) => format!("; after the last message every matched subscriber acknowledged everything ({} after the loss timeout)", rtlab_core::units::Nanos(self.tail_waited_ns)),
                    Some(false) => format!("; NOT every message was acknowledged by every matched subscriber within {} after the last (a subscriber that stalled or went away may have missed the tail)", rtlab_core::units::Nanos(self.tail_waited_ns)),
                    None => String::new(),
                }
            ),
            None => format!(
                "pub by hand: {transport} cannot tell whether a subscriber matched: published at once (its first messages may have reached no one)"
            ),
        }
    }
}

impl CaseResult {
    pub(super) fn failed(
        payload: usize,
        period_ns: i64,
        subscribers: usize,
        why: String,
    ) -> CaseResult {
        CaseResult {
            payload,
            period_ns,
            subscribers,
            published: 0,
            overruns: 0,
            streams: Vec::new(),
            p50_spread_ns: None,
            fastest: None,
            slowest: None,
            error: Some(why),
            thread_priorities_set: Vec::new(),
            publisher: None,
            matched_subscribers: None,
        }
    }
}

/// The probe's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PubsubOutcome {
    pub cases: Vec<CaseResult>,
    pub qos_mapping: QosMapping,
    pub notes: Vec<String>,
    pub interrupted: bool,
    pub duration_ns: i64,
    /// What `ros2` ran on (this host's side; `config.ros2` in results), when it was used here.
    #[serde(default)]
    pub ros2: Option<crate::transport::ros2::Ros2Facts>,
    /// A case run in a process of its own (`apart`): the cost windows it measured there.
    #[serde(default)]
    pub cost_windows: Vec<rtlab_core::cost::CostWindow>,
}
