//! Gates: limits a case must keep, for CI. A gate names cases and streams (a name, or a
//! glob with `*` matching the whole name), a metric (`p99_9`, `max`, `missed`, `lost`) and
//! a limit the value must not exceed (`<=`); written as `[[gate]]` tables in a scenario or
//! as `--gate CASE:STREAM:METRIC<=VALUE`.
//!
//! Contract: [`evaluate`] gives every gate a verdict for every case it matches, one per
//! stream that has the metric; a gate that matches no stream of its measured cases gets one
//! [`Outcome::Unmatched`] verdict (a typo never passes silently), and a gate that matches no
//! case of the run one [`Outcome::NoCase`] verdict. Pure: no printing, no I/O.

use crate::schema::Stream;
use crate::units::{format_duration_exact, parse_duration, Nanos};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What a gate limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateMetric {
    /// The 99.9th percentile of the stream's samples (a duration).
    P99_9,
    /// The largest sample (a duration).
    Max,
    /// Samples above the deadline (a count, or a ratio of the samples).
    Missed,
    /// Samples lost (a count, or a ratio of the samples sent: count + lost).
    Lost,
}

/// The metric names a gate accepts, as said in errors.
pub const METRIC_NAMES: &str = "p99_9, max, missed, lost";

impl GateMetric {
    /// The name as written in `[[gate]]` and `--gate`.
    pub fn name(self) -> &'static str {
        match self {
            GateMetric::P99_9 => "p99_9",
            GateMetric::Max => "max",
            GateMetric::Missed => "missed",
            GateMetric::Lost => "lost",
        }
    }

    /// `p99_9` (or `p99.9`, as `compare --metric` writes it), `max`, `missed`, `lost`.
    pub fn parse(s: &str) -> Option<GateMetric> {
        Some(match s {
            "p99_9" | "p99.9" => GateMetric::P99_9,
            "max" => GateMetric::Max,
            "missed" => GateMetric::Missed,
            "lost" => GateMetric::Lost,
            _ => return None,
        })
    }

    fn is_duration(self) -> bool {
        matches!(self, GateMetric::P99_9 | GateMetric::Max)
    }
}

/// The most a value may be.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateLimit {
    /// A duration, in nanoseconds.
    Nanos(i64),
    /// A number of samples.
    Count(u64),
    /// A percentage of the samples (0..=100).
    Percent(f64),
}

impl fmt::Display for GateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GateLimit::Nanos(n) => f.write_str(&format_duration_exact(Nanos(*n))),
            GateLimit::Count(c) => write!(f, "{c}"),
            GateLimit::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl GateLimit {
    /// The limit of `metric` as written: a duration (`500us`) for `p99_9` and `max`; a
    /// whole number (`0`) or a percentage (`0.1%`) for `missed` and `lost`.
    pub fn parse(metric: GateMetric, text: &str) -> Result<GateLimit, String> {
        let text = text.trim();
        if metric.is_duration() {
            return parse_duration(text).map(|n| GateLimit::Nanos(n.0)).map_err(|e| e.to_string());
        }
        let what = || {
            format!(
                "'{text}' is not a count or a percentage (accepted: a whole number such as 0, or a percentage such as 0.1%)"
            )
        };
        if let Some(p) = text.strip_suffix('%') {
            let v: f64 = p.trim().parse().map_err(|_| what())?;
            if !(0.0..=100.0).contains(&v) {
                return Err(format!("'{text}' is not a percentage in 0%..=100%"));
            }
            return Ok(GateLimit::Percent(v));
        }
        text.parse::<u64>().map(GateLimit::Count).map_err(|_| what())
    }
}

/// One limit on the streams of some cases.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    /// A case name, or a glob with `*` (matching the whole name).
    pub case: String,
    /// A stream name, or a glob with `*`.
    pub stream: String,
    pub metric: GateMetric,
    pub limit: GateLimit,
    /// Where it was written: `gate[N]` (the scenario's N-th `[[gate]]`) or `--gate`.
    pub origin: String,
}

impl fmt::Display for Gate {
    /// The gate as `--gate` takes it: `CASE:STREAM:METRIC<=VALUE`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}<={}", self.case, self.stream, self.metric.name(), self.limit)
    }
}

impl Gate {
    /// `--gate CASE:STREAM:METRIC<=VALUE`. The text is split at its last two colons, so a
    /// case name may hold colons (`history=keep-last:10`); a stream name never does.
    pub fn parse_flag(text: &str) -> Result<Gate, String> {
        let form = "expected CASE:STREAM:METRIC<=VALUE, e.g. 'timer/*:*:max<=1ms'";
        let mut parts = text.rsplitn(3, ':');
        let (Some(cond), Some(stream), Some(case)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("--gate {text}: {form}"));
        };
        Gate::parse_parts(text, case, stream, cond, form)
    }

    /// A measuring command's `--gate STREAM:METRIC<=VALUE` (it measures one case: every
    /// case, `*`); a text with a case too (`CASE:STREAM:METRIC<=VALUE`) is read as `run`'s.
    pub fn parse_probe_flag(text: &str) -> Result<Gate, String> {
        let form = "expected STREAM:METRIC<=VALUE, e.g. '*:max<=1ms'";
        match text.split_once(':') {
            Some((stream, cond)) if !cond.contains(':') => {
                Gate::parse_parts(text, "*", stream, cond, form)
            }
            Some(_) => Gate::parse_flag(text),
            None => Err(format!("--gate {text}: {form}")),
        }
    }

    /// The gate of `--gate TEXT` from its parts; `form` is what errors say it should be.
    fn parse_parts(
        text: &str,
        case: &str,
        stream: &str,
        cond: &str,
        form: &str,
    ) -> Result<Gate, String> {
        let Some((metric, value)) = cond.split_once("<=") else {
            return Err(format!("--gate {text}: '{cond}' has no '<=' ({form})"));
        };
        let metric = GateMetric::parse(metric.trim()).ok_or_else(|| {
            format!("--gate {text}: unknown metric '{}' (accepted: {METRIC_NAMES})", metric.trim())
        })?;
        let limit = GateLimit::parse(metric, value).map_err(|e| format!("--gate {text}: {e}"))?;
        for (what, p) in [("case", case), ("stream", stream)] {
            if p.trim().is_empty() {
                return Err(format!(
                    "--gate {text}: empty {what} (use * for every {what}) ({form})"
                ));
            }
        }
        Ok(Gate {
            case: case.trim().into(),
            stream: stream.trim().into(),
            metric,
            limit,
            origin: "--gate".into(),
        })
    }

    pub fn matches_case(&self, name: &str) -> bool {
        pattern_match(&self.case, name)
    }

    pub fn matches_stream(&self, name: &str) -> bool {
        pattern_match(&self.stream, name)
    }

    /// The stream's value of the metric and whether it keeps the limit; None when the
    /// stream does not have it (no samples, or a counter its probe does not count).
    pub fn check(&self, s: &Stream) -> Option<(String, bool)> {
        let st = &s.stats;
        let (value, of) = match self.metric {
            GateMetric::P99_9 => (st.p99_9_ns?, 0),
            GateMetric::Max => (st.max_ns?, 0),
            GateMetric::Missed => (st.missed? as i64, st.count),
            GateMetric::Lost => {
                let l = st.lost?;
                (l as i64, st.count + l)
            }
        };
        Some(match self.limit {
            GateLimit::Nanos(n) => (Nanos(value).to_string(), value <= n),
            GateLimit::Count(c) => (value.to_string(), value as u64 <= c),
            GateLimit::Percent(p) => {
                let pct = if of == 0 { 0.0 } else { value as f64 * 100.0 / of as f64 };
                (format!("{value}/{of} = {}%", round3(pct)), pct <= p)
            }
        })
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// A pattern without `*` is the whole name; with `*`, each `*` matches any run of
/// characters and the rest must match from the first character to the last.
pub fn pattern_match(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    let Some(mut rest) = name.strip_prefix(first) else { return false };
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(at) => rest = &rest[at + p.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// How a gate came out on one case and stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The value is at most the limit.
    Kept,
    /// The value is above the limit.
    Broken,
    /// The case failed: nothing was measured, so the limit is not shown kept.
    Failed,
    /// The case was skipped, interrupted or not run.
    Skipped,
    /// No stream of the gate's measured cases matches it with its metric (a typo?).
    Unmatched,
    /// No case of the run matches the gate (`rtlab run --only` left them out).
    NoCase,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Kept => "kept",
            Outcome::Broken => "broken",
            Outcome::Failed => "failed",
            Outcome::Skipped => "skipped",
            Outcome::Unmatched => "unmatched",
            Outcome::NoCase => "no_case",
        }
    }

    pub fn parse(s: &str) -> Option<Outcome> {
        [
            Outcome::Kept,
            Outcome::Broken,
            Outcome::Failed,
            Outcome::Skipped,
            Outcome::Unmatched,
            Outcome::NoCase,
        ]
        .into_iter()
        .find(|o| o.name() == s)
    }

    /// A run with this verdict exits 1 and is not a good run (`compare --baseline`).
    pub fn fails(self) -> bool {
        matches!(self, Outcome::Broken | Outcome::Failed | Outcome::Unmatched)
    }
}

/// One gate's verdict on one case and stream (case and stream are None where the outcome
/// says there is none).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateVerdict {
    /// The gate as `--gate` writes it.
    pub gate: String,
    /// `gate[N]` or `--gate`.
    pub origin: String,
    pub case: Option<String>,
    pub stream: Option<String>,
    pub metric: GateMetric,
    /// The limit as written (`1ms`, `0`, `0.1%`).
    pub limit: String,
    /// The measured value (`12.3us`, `4`, `4/1000 = 0.4%`).
    pub value: Option<String>,
    pub outcome: Outcome,
    /// Why, where the outcome needs a reason (the case's error, what was matched).
    pub message: String,
}

impl GateVerdict {
    /// One line: `gate broken: CASE STREAM: max 12.3us > 1ns (gate[0])`.
    pub fn line(&self) -> String {
        let at = match (&self.case, &self.stream) {
            (Some(c), Some(s)) => format!("{c} {s}: "),
            (Some(c), None) => format!("{c}: "),
            _ => String::new(),
        };
        let what = match (self.outcome, &self.value) {
            (Outcome::Kept, Some(v)) => format!("{} {v} <= {}", self.metric.name(), self.limit),
            (Outcome::Broken, Some(v)) => format!("{} {v} > {}", self.metric.name(), self.limit),
            _ => self.message.clone(),
        };
        format!("gate {}: {at}{what} ({} {})", self.outcome.name(), self.origin, self.gate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_gate_names_a_stream_and_a_metric_and_takes_run_s_form_too() {
        let g = Gate::parse_probe_flag("thread0:max<=1ms").unwrap();
        assert_eq!((g.case.as_str(), g.stream.as_str()), ("*", "thread0"));
        let g = Gate::parse_probe_flag("timer:*:missed<=0").unwrap();
        assert_eq!((g.case.as_str(), g.stream.as_str()), ("timer", "*"));
        let e = Gate::parse_probe_flag("max<=1ms").unwrap_err();
        assert_eq!(e, "--gate max<=1ms: expected STREAM:METRIC<=VALUE, e.g. '*:max<=1ms'");
        let e = Gate::parse_probe_flag(":max<=1ms").unwrap_err();
        assert!(e.contains("empty stream") && e.contains("STREAM:METRIC<=VALUE"), "{e}");
    }

    #[test]
    fn a_pattern_is_the_whole_name_or_a_glob() {
        assert!(pattern_match("thread0", "thread0"));
        assert!(!pattern_match("thread0", "thread0.jitter"), "no substring match");
        assert!(pattern_match("*", "anything"));
        assert!(pattern_match("timer/*", "timer/idle/no-rt"));
        assert!(!pattern_match("timer/*", "udp/timer/x"));
        assert!(pattern_match("*/no-rt/*", "timer/idle/no-rt/interval=1ms"));
        assert!(pattern_match("a*a", "aa"));
        assert!(!pattern_match("a*a", "a"), "the prefix and suffix do not overlap");
        assert!(pattern_match("sub*", "sub0") && !pattern_match("sub*", "pub.send"));
    }

    #[test]
    fn flag_syntax_and_its_errors() {
        let g = Gate::parse_flag("pubsub/idle/no-rt/history=keep-last:10:sub*:max<=1ms").unwrap();
        assert_eq!(g.case, "pubsub/idle/no-rt/history=keep-last:10");
        assert_eq!(
            (g.stream.as_str(), g.metric, g.limit),
            ("sub*", GateMetric::Max, GateLimit::Nanos(1_000_000))
        );
        assert_eq!(g.to_string(), "pubsub/idle/no-rt/history=keep-last:10:sub*:max<=1ms");
        let g = Gate::parse_flag("*:*:p99.9<=250us").unwrap();
        assert_eq!(g.to_string(), "*:*:p99_9<=250us");
        assert_eq!(Gate::parse_flag("*:*:lost<=0.5%").unwrap().limit, GateLimit::Percent(0.5));
        assert_eq!(Gate::parse_flag("*:*:missed<=3").unwrap().limit, GateLimit::Count(3));
        for (bad, says) in [
            ("max<=1ms", "expected CASE:STREAM:METRIC<=VALUE"),
            ("a:b:max<1ms", "has no '<='"),
            ("a:b:p99<=1ms", "unknown metric 'p99' (accepted: p99_9, max, missed, lost)"),
            ("a:b:max<=fast", "invalid duration 'fast'"),
            ("a:b:missed<=1ms", "'1ms' is not a count or a percentage"),
            ("a:b:lost<=120%", "not a percentage in 0%..=100%"),
            ("a::max<=1ms", "empty stream"),
        ] {
            let e = Gate::parse_flag(bad).unwrap_err();
            assert!(e.starts_with(&format!("--gate {bad}: ")) && e.contains(says), "{bad}: {e}");
            assert_eq!(e.lines().count(), 1);
        }
    }

    #[test]
    fn a_ratio_is_of_the_samples_and_a_missing_counter_is_no_value() {
        let cfg = crate::RecorderConfig {
            deadline_ns: 1_000,
            window_ns: 1_000_000_000,
            window_capacity: 4,
            max_samples: None,
            us_histogram_buckets: None,
            spike_threshold_ns: None,
        };
        let mut r = crate::Recorder::new(&cfg, None);
        for i in 0..990 {
            crate::Sink::record(&mut r, i, i as i64, 500);
        }
        let mut s = Stream::from_recorder("sub0", "one_way_latency", "", Default::default(), &r);
        assert_eq!(s.stats.count, 990);
        s.stats.count = 990;
        s.stats.lost = Some(10);
        s.stats.missed = None;
        let lost = |l: &str| Gate::parse_flag(&format!("*:*:lost<={l}")).unwrap().check(&s);
        assert_eq!(lost("1%"), Some(("10/1000 = 1%".into(), true)));
        assert_eq!(lost("0.9%"), Some(("10/1000 = 1%".into(), false)));
        assert_eq!(lost("10"), Some(("10".into(), true)));
        assert_eq!(lost("9"), Some(("10".into(), false)));
        assert_eq!(Gate::parse_flag("*:*:missed<=0").unwrap().check(&s), None);
    }
}
