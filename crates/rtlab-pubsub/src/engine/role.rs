//! The role-process protocol: what a role is ([`RoleConfig`], passed as JSON), what it
//! says to its parent ([`RoleEvent`] lines, `rtlab-role {json}`, on its stdout:
//! [`event_line`], [`parse_event`]) and what a receiver reports ([`ReceiverReport`]).
//! Running a role is [`super::placement`]'s.
//!
//! Plain data and its lines: nothing here starts, prints or reads.

use super::config::{RtSpec, StampClock, ThreadPriority};
use super::spec::TransportSpec;
use crate::transport::{EchoStyle, Qos, WaitStyle};
use rtlab_core::schema::Stream;
use serde::{Deserialize, Serialize};

/// What a role (a subscriber process or thread) does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoleKind {
    /// oneway: receive, stamp, record; report at the end.
    Subscriber,
    /// roundtrip: republish every message unchanged on `topic_out`.
    Echo,
}

/// Everything a role needs (passed as JSON to role processes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoleConfig {
    pub transport: TransportSpec,
    pub kind: RoleKind,
    pub index: usize,
    pub topic_in: String,
    pub topic_out: Option<String>,
    pub qos: Qos,
    pub wait: WaitStyle,
    /// An echo: from a thread of its own, or from the middleware's callback.
    #[serde(default)]
    pub echo: EchoStyle,
    pub max_len: usize,
    pub deadline_ns: i64,
    pub loss_timeout_ns: i64,
    pub window_ns: i64,
    pub window_capacity: usize,
    /// The role gives up after this long (ns from its start).
    pub run_timeout_ns: i64,
    pub rt: RtSpec,
    /// Lock the role process's memory (mlockall).
    #[serde(default)]
    pub mlockall: bool,
    #[serde(default)]
    pub thread_priorities: Vec<ThreadPriority>,
    /// The middleware's threads under the measuring threads (see PubsubConfig).
    #[serde(default)]
    pub middleware_priority: Option<i32>,
    /// The clock of the stamps a subscriber compares (one-way); round trips: monotonic.
    #[serde(default)]
    pub stamp_clock: StampClock,
    /// The cost window the role's loop counts in (its case's streams' prefix); "" for none.
    #[serde(default)]
    pub cost_window: String,
    /// Raise this flag on the first sample above its threshold; in this process only (a
    /// role process gets none).
    #[serde(skip)]
    pub spike: Option<rtlab_core::sink::SpikeHook>,
}

/// What a receiver measured and counted (sent from role processes as JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReceiverReport {
    /// Statistics, histogram and windows of the samples (names/labels filled by the parent).
    pub stream: Stream,
    /// Distinct measured messages received (samples + late).
    pub received: u64,
    pub late: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
    /// Messages with a sequence number outside the measured range.
    pub malformed: u64,
    /// The lowest and highest measured sequence numbers received (a subscriber by hand
    /// joins a publisher's stream wherever it is: its losses are counted between the two).
    #[serde(default)]
    pub first_seq: Option<u64>,
    #[serde(default)]
    pub last_seq: Option<u64>,
}

impl ReceiverReport {
    /// Its stream, with what it counted besides the samples (late, duplicates, out of
    /// order, malformed) in the statistics; what was lost is the caller's to say.
    pub fn stream_with_counts(self) -> Stream {
        let mut s = self.stream;
        s.stats.late = Some(self.late);
        s.stats.duplicates = Some(self.duplicates);
        s.stats.out_of_order = Some(self.out_of_order);
        s.stats.malformed = Some(self.malformed);
        s
    }

    /// Messages missing between the first and the last one received.
    pub fn lost_between(&self) -> u64 {
        match (self.first_seq, self.last_seq) {
            (Some(f), Some(l)) => (l - f + 1).saturating_sub(self.received),
            _ => 0,
        }
    }
}

/// Lines a role writes to its parent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoleEvent {
    /// Ports created.
    Ready,
    /// A warm-up message arrived: its number (the warm-up bit cleared). Receivers report
    /// every one until their first measured message; set-up ends on the second stage
    /// (see `loops::Warmup`).
    Warm(u64),
    /// Finished; a subscriber role carries its report.
    Done(Option<Box<ReceiverReport>>),
    Failed(String),
    /// What the role process's window cost (sent right before `Done`; an older role sends
    /// none).
    Cost(Box<rtlab_core::cost::CostWindow>),
}

impl RoleEvent {
    /// The role's last event (it reported or failed).
    pub fn is_last(&self) -> bool {
        matches!(self, RoleEvent::Done(_) | RoleEvent::Failed(_))
    }
}

/// The event of a role's output line (`rtlab-role {json}`); None for any other line.
pub fn parse_event(line: &str) -> Option<RoleEvent> {
    // the marker may follow other output on the same line (a test harness, a library)
    let at = line.find("rtlab-role ")?;
    serde_json::from_str(&line[at + "rtlab-role ".len()..]).ok()
}

/// A role's event as its output line (without the newline).
pub fn event_line(e: &RoleEvent) -> String {
    format!("rtlab-role {}", serde_json::to_string(e).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_through_lines() {
        for e in [
            RoleEvent::Ready,
            RoleEvent::Warm(3),
            RoleEvent::Failed("x y".into()),
            RoleEvent::Done(None),
        ] {
            let line = format!("rtlab-role {}", serde_json::to_string(&e).unwrap());
            assert_eq!(parse_event(&line), Some(e));
        }
        assert_eq!(parse_event("zenoh says hello"), None);
    }
}
