//! The OpenMetrics text exposition (openmetrics.io, the format Prometheus scrapes with
//! `Accept: application/openmetrics-text`).
//!
//! Contract: each family is announced once (`# TYPE`, `# UNIT` when it has one, `# HELP`),
//! then its samples; a counter's sample is `NAME_total`, a histogram's `_bucket` (cumulative,
//! `le` ending at `+Inf`), `_count` and `_sum`; a stateset's label is named as the family.
//! Label values are escaped (`\\`, `\"`, `\n`); names follow Prometheus' conventions (units
//! in the name, base units: seconds, bytes, hertz). The text ends with `# EOF`.

use std::fmt::Write as _;

/// The content type of the exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A label value as the format writes it.
pub fn escape(v: &str) -> String {
    let mut o = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o
}

/// A number as the format writes it (`+Inf`, `-Inf`, `NaN` spelled out).
pub fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    Counter,
    Gauge,
    Histogram,
    StateSet,
    Info,
}

impl Type {
    fn name(self) -> &'static str {
        match self {
            Type::Counter => "counter",
            Type::Gauge => "gauge",
            Type::Histogram => "histogram",
            Type::StateSet => "stateset",
            Type::Info => "info",
        }
    }
}

/// An exposition being written.
#[derive(Default)]
pub struct Exposition {
    out: String,
}

fn labels(l: &[(&str, &str)]) -> String {
    if l.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = l.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
    format!("{{{}}}", inner.join(","))
}

impl Exposition {
    /// Announce a family; `unit` must end its name (`_seconds`).
    pub fn family(&mut self, name: &str, t: Type, unit: Option<&str>, help: &str) {
        let _ = writeln!(self.out, "# TYPE {name} {}", t.name());
        if let Some(u) = unit {
            debug_assert!(name.ends_with(&format!("_{u}")), "{name}: the unit ends the name");
            let _ = writeln!(self.out, "# UNIT {name} {u}");
        }
        let _ =
            writeln!(self.out, "# HELP {name} {}", help.replace('\\', "\\\\").replace('\n', "\\n"));
    }

    /// One sample: the family's name with its suffix (`_total`, `_bucket` ...).
    pub fn sample(&mut self, name: &str, l: &[(&str, &str)], value: f64) {
        let _ = writeln!(self.out, "{name}{} {}", labels(l), number(value));
    }

    /// A histogram family's samples from ns buckets ((bound ns or None for +Inf, cumulative)).
    pub fn histogram_ns(
        &mut self,
        name: &str,
        l: &[(&str, &str)],
        (buckets, count, sum_ns): &(Vec<(Option<i64>, u64)>, u64, i64),
    ) {
        for (bound, n) in buckets {
            let le = bound.map_or_else(|| "+Inf".to_string(), |b| number(b as f64 / 1e9));
            let mut with = l.to_vec();
            with.push(("le", &le));
            self.sample(&format!("{name}_bucket"), &with, *n as f64);
        }
        self.sample(&format!("{name}_count"), l, *count as f64);
        self.sample(&format!("{name}_sum"), l, *sum_ns as f64 / 1e9);
    }

    /// The text, ended.
    pub fn finish(mut self) -> String {
        self.out.push_str("# EOF\n");
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_samples_and_escapes_as_the_format_writes_them() {
        assert_eq!(escape("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(0.000_01), "0.00001");
        let mut e = Exposition::default();
        e.family("rtlab_canary_misses", Type::Counter, None, "wake-ups past the deadline");
        e.sample("rtlab_canary_misses_total", &[("cpu", "1")], 3.0);
        e.family("rtlab_canary_latency_seconds", Type::Histogram, Some("seconds"), "latency");
        e.histogram_ns(
            "rtlab_canary_latency_seconds",
            &[],
            &(vec![(Some(10_000), 2), (None, 3)], 3, 1_500_000),
        );
        e.family("rtlab_topic_state", Type::StateSet, None, "verdict");
        e.sample("rtlab_topic_state", &[("topic", "/a\"b"), ("rtlab_topic_state", "ok")], 1.0);
        let t = e.finish();
        assert_eq!(
            t,
            "# TYPE rtlab_canary_misses counter\n# HELP rtlab_canary_misses wake-ups past the deadline\n\
             rtlab_canary_misses_total{cpu=\"1\"} 3\n\
             # TYPE rtlab_canary_latency_seconds histogram\n# UNIT rtlab_canary_latency_seconds seconds\n\
             # HELP rtlab_canary_latency_seconds latency\n\
             rtlab_canary_latency_seconds_bucket{le=\"0.00001\"} 2\n\
             rtlab_canary_latency_seconds_bucket{le=\"+Inf\"} 3\n\
             rtlab_canary_latency_seconds_count 3\nrtlab_canary_latency_seconds_sum 0.0015\n\
             # TYPE rtlab_topic_state stateset\n# HELP rtlab_topic_state verdict\n\
             rtlab_topic_state{topic=\"/a\\\"b\",rtlab_topic_state=\"ok\"} 1\n# EOF\n"
        );
    }
}
