//! A case's streams and its [`CaseResult`]: a stream per subscriber (its receiver's report,
//! named `<transport>.<mode>.<len>B.<rate>.n<subscribers>.sub<i>` and labelled with the
//! case's parameters), the spread of their medians, and the publisher's send lateness.
//!
//! After the measured phase only.

use super::case::{Budget, CaseSetup, Measured};
use super::config::{oneway_definition, HandRole, Mode, Schedule};
use super::outcome::{CaseResult, MatchedSubscribers, ProbeError};
use super::role::ReceiverReport;
use rtlab_core::schema::Stream;
use rtlab_core::sink::Recorder;
use std::collections::BTreeMap;

/// What the publisher's `send_lateness` stream measures.
pub const SEND_LATENESS_DEFINITION: &str = "message stamped and handed to the transport - its slot on the absolute grid t0 + k*T (publisher CLOCK_MONOTONIC): the publisher's own wake-up latency; skipped slots are overruns";

/// `100hz`, `5khz`, `2500hz` (whole kHz only), `33.33hz`... for names.
pub fn rate_label(period_ns: i64) -> String {
    let hz = 1e9 / period_ns as f64;
    if hz >= 1000.0 && (hz / 1000.0).fract() == 0.0 {
        format!("{}khz", hz as i64 / 1000)
    } else if hz.fract() == 0.0 {
        format!("{}hz", hz as i64)
    } else {
        format!("{hz:.2}hz")
    }
}

/// p50 of the slowest stream - p50 of the fastest, and which they are (None with fewer
/// than two); the spread is labelled on every stream (`case_p50_spread_ns`).
fn p50_spread(streams: &mut [Stream]) -> (Option<i64>, Option<usize>, Option<usize>) {
    let p50s: Vec<(usize, i64)> =
        streams.iter().enumerate().filter_map(|(i, s)| s.stats.p50_ns.map(|p| (i, p))).collect();
    if p50s.len() < 2 {
        return (None, None, None);
    }
    let f = p50s.iter().min_by_key(|x| x.1).copied().expect("non-empty");
    let sl = p50s.iter().max_by_key(|x| x.1).copied().expect("non-empty");
    let spread = sl.1 - f.1;
    for s in streams.iter_mut() {
        s.labels.insert("case_p50_spread_ns".into(), spread.to_string());
    }
    (Some(spread), Some(f.0), Some(sl.0))
}

impl CaseSetup<'_> {
    /// The case's result from its receivers' `reports` (one per subscriber, in order) and
    /// what the measured phase sent.
    pub(super) fn result(
        &self,
        reports: Vec<Option<ReceiverReport>>,
        b: &Budget,
        m: Measured,
        matched_subscribers: Option<MatchedSubscribers>,
        thread_priorities_set: Vec<String>,
    ) -> Result<CaseResult, ProbeError> {
        let cfg = self.cfg;
        // a publisher by hand has no report of its subscribers: its own lateness only
        let reports =
            if cfg.by_hand.is_some() && cfg.mode == Mode::Oneway { Vec::new() } else { reports };
        let mut streams = Vec::new();
        for (i, r) in reports.into_iter().enumerate() {
            let r = r.ok_or_else(|| ProbeError::Setup(format!("subscriber {i} sent no report")))?;
            streams.push(self.subscriber_stream(i, r, b, &m));
        }
        let (p50_spread_ns, fastest, slowest) = p50_spread(&mut streams);
        // closed loop: no grid, no send lateness
        let publisher = m
            .lateness
            .as_ref()
            .map(|lateness| self.publisher_stream(lateness, &m, matched_subscribers.as_ref()));
        Ok(CaseResult {
            payload: self.len,
            period_ns: if b.closed { 0 } else { self.period },
            subscribers: self.n,
            published: m.published,
            overruns: m.overruns,
            streams,
            p50_spread_ns,
            fastest,
            slowest,
            error: None,
            thread_priorities_set,
            publisher,
            matched_subscribers,
        })
    }

    /// Subscriber `i`'s stream: its report named, defined and labelled; lost = published -
    /// received.
    fn subscriber_stream(&self, i: usize, r: ReceiverReport, b: &Budget, m: &Measured) -> Stream {
        let cfg = self.cfg;
        let lost = m.published.saturating_sub(r.received);
        let mut s = r.stream_with_counts();
        s.name = self.stream_name(&format!("sub{i}"));
        s.metric = cfg.mode.metric().into();
        s.definition = match cfg.mode {
            Mode::Oneway => oneway_definition(cfg.oneway_clock()),
            Mode::Roundtrip => cfg.mode.definition().into(),
        };
        s.deadline_ns = b.deadline_ns;
        s.labels = self.labels(i, m.published);
        s.stats.overruns = (!b.closed).then_some(m.overruns);
        s.stats.lost = Some(lost);
        s
    }

    /// The publisher's `send_lateness` stream (with the subscribers a publisher by hand
    /// had matched).
    fn publisher_stream(
        &self,
        lateness: &Recorder,
        m: &Measured,
        matched: Option<&MatchedSubscribers>,
    ) -> Stream {
        let mut p = Stream::from_recorder(
            self.stream_name("pub.send_lateness"),
            "send_lateness",
            SEND_LATENESS_DEFINITION,
            self.labels(0, m.published),
            lateness,
        );
        p.labels.remove("subscriber");
        if let Some(n) = matched.and_then(|m| m.count) {
            p.labels.insert("matched_subscribers".into(), n.to_string());
        }
        p.stats.missed = None;
        p.stats.overruns = Some(m.overruns);
        p
    }

    /// `<transport>.<mode>.<len>B.<rate>.n<subscribers>.<what>`: a stream of this case.
    /// The case's cost window: its streams' prefix
    /// (`<transport>.<mode>.<len>B.<rate>.n<subscribers>`).
    pub(super) fn cost_window(&self) -> String {
        let mut s = self.stream_name("");
        s.pop();
        s
    }

    fn stream_name(&self, what: &str) -> String {
        format!(
            "{}.{}.{}B.{}.n{}.{what}",
            self.transport.name(),
            self.cfg.mode.name(),
            self.len,
            self.rate_name(),
            self.n
        )
    }
    /// The case's rate in names and labels: `1khz`, or `closed-loop`.
    fn rate_name(&self) -> String {
        match self.cfg.schedule {
            Schedule::Periodic => rate_label(self.period),
            Schedule::ClosedLoop => Schedule::ClosedLoop.name().into(),
        }
    }

    /// The labels of subscriber `i`'s stream, `published` messages having been sent.
    fn labels(&self, i: usize, published: u64) -> BTreeMap<String, String> {
        let cfg = self.cfg;
        let mut l = BTreeMap::new();
        l.insert("transport".into(), self.transport.name().into());
        for (k, v) in self.labels {
            l.insert(k.to_string(), v.clone());
        }
        if self.role_spec.kind != self.cfg.transport.kind {
            l.insert("far_transport".into(), self.role_spec.kind.name().into());
        }
        if let Some(v) = self.cfg.transport.fastdds_shm.label() {
            l.insert("fastdds_shm".into(), v);
        }
        l.insert("mode".into(), cfg.mode.name().into());
        l.insert("schedule".into(), cfg.schedule.name().into());
        l.insert("wait".into(), cfg.wait.name().into());
        // a ping by hand does not know how its pong (started by hand) answers
        let ping_by_hand = cfg.by_hand.as_ref().is_some_and(|h| h.role == HandRole::Ping);
        if cfg.mode == Mode::Roundtrip && !ping_by_hand {
            l.insert("echo".into(), cfg.echo.name().into());
        }
        l.insert("payload_bytes".into(), self.len.to_string());
        if cfg.schedule == Schedule::Periodic {
            l.insert("period_ns".into(), self.period.to_string());
        }
        l.insert("rate".into(), self.rate_name());
        l.insert("subscribers".into(), self.n.to_string());
        l.insert("subscriber".into(), i.to_string());
        l.insert("placement".into(), if self.in_process { "threads" } else { "processes" }.into());
        l.insert("reliability".into(), cfg.qos.reliability.to_string());
        l.insert("history".into(), cfg.qos.history.to_string());
        l.insert("durability".into(), cfg.qos.durability.to_string());
        l.insert("published".into(), published.to_string());
        l
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_labels() {
        assert_eq!(rate_label(10_000_000), "100hz");
        assert_eq!(rate_label(200_000), "5khz");
        assert_eq!(rate_label(40_000_000), "25hz");
    }
}
