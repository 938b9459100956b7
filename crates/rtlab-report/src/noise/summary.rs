//! `rtlab noise`'s tables: per CPU what the machine stole from the busy thread (gaps, their
//! rate, the total stolen and its share of the CPU, the worst window's share, the longest
//! gap), then the distribution of the noise gaps. [`rows`] is what the HTML report's noise
//! section shows too.

use crate::render::{stats_table, Row};
use rtlab_core::schema::{ResultDocument, Stream};
use rtlab_core::units::us_1;
use std::fmt::Write as _;

/// The metric of a noise probe's gap stream (rtlab-engines `noise::GAP_METRIC`).
pub const GAP_METRIC: &str = "noise_gap";

/// One CPU of a noise run, from its streams.
#[derive(Clone, Debug, PartialEq)]
pub struct NoiseRow {
    /// The gap stream's name (`cpu1`).
    pub cpu: String,
    /// Gaps above the threshold.
    pub gaps: u64,
    /// How long the thread measured, ns.
    pub measured_ns: i64,
    /// The sum of the gaps, ns.
    pub stolen_ns: i64,
    /// The longest gap, ns.
    pub max_gap_ns: Option<i64>,
    /// p99 of the gaps, ns.
    pub p99_gap_ns: Option<i64>,
    /// The largest share of one window stolen, % (each window's stolen time over its own
    /// length: the last window may be shorter).
    pub worst_window_pct: Option<f64>,
    /// The windows' width, ns.
    pub window_ns: i64,
    pub threshold_ns: i64,
}

impl NoiseRow {
    /// Stolen / measured, in %.
    pub fn stolen_pct(&self) -> f64 {
        pct(self.stolen_ns, self.measured_ns)
    }
    /// Gaps per second measured.
    pub fn rate_per_s(&self) -> f64 {
        if self.measured_ns <= 0 {
            return 0.0;
        }
        self.gaps as f64 * 1e9 / self.measured_ns as f64
    }
}

fn pct(part: i64, whole: i64) -> f64 {
    if whole <= 0 {
        return 0.0;
    }
    part as f64 * 100.0 / whole as f64
}

fn label(s: &Stream, k: &str) -> i64 {
    s.labels.get(k).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// The noise rows of a document: one per gap stream (none when it is not a noise run).
pub fn rows(doc: &ResultDocument) -> Vec<NoiseRow> {
    doc.streams
        .iter()
        .filter(|s| s.metric == GAP_METRIC)
        .map(|s| {
            let stolen = doc.streams.iter().find(|t| t.name == format!("{}.stolen", s.name));
            let measured_ns = label(s, "measured_ns");
            let worst_window_pct = stolen.and_then(|t| {
                let w = t.windows.width_ns.max(1);
                let shares = t.windows.max_ns.iter().enumerate().filter_map(|(k, m)| {
                    let len = w.min(measured_ns - k as i64 * w);
                    m.filter(|_| len > 0).map(|m| pct(m, len))
                });
                shares.fold(None, |a: Option<f64>, p| Some(a.map_or(p, |a| a.max(p))))
            });
            NoiseRow {
                cpu: s.name.clone(),
                gaps: s.stats.count,
                measured_ns,
                stolen_ns: label(s, "stolen_ns"),
                max_gap_ns: s.stats.max_ns,
                p99_gap_ns: s.stats.p99_ns,
                worst_window_pct,
                window_ns: stolen.map(|t| t.windows.width_ns).unwrap_or(s.windows.width_ns),
                threshold_ns: label(s, "threshold_ns"),
            }
        })
        .collect()
}

/// The column headers of the noise table.
pub const COLUMNS: [&str; 8] = [
    "cpu",
    "gaps",
    "rate (/s)",
    "stolen (us)",
    "stolen (%)",
    "worst window (%)",
    "max gap (us)",
    "p99 gap (us)",
];

/// A row's cells, in [`COLUMNS`] order.
pub fn cells(r: &NoiseRow) -> [String; 8] {
    let us = |v: Option<i64>| v.map(us_1).unwrap_or_else(|| "-".into());
    [
        r.cpu.clone(),
        r.gaps.to_string(),
        format!("{:.1}", r.rate_per_s()),
        us_1(r.stolen_ns),
        format!("{:.3}", r.stolen_pct()),
        r.worst_window_pct.map(|p| format!("{p:.3}")).unwrap_or_else(|| "-".into()),
        us(r.max_gap_ns),
        us(r.p99_gap_ns),
    ]
}

/// The per-CPU table of `rows` (aligned columns, a header line), then what its columns mean.
pub fn table(rows: &[NoiseRow]) -> String {
    let mut text = String::new();
    let mut table: Vec<[String; 8]> = vec![COLUMNS.map(str::to_string)];
    table.extend(rows.iter().map(cells));
    let widths: Vec<usize> =
        (0..COLUMNS.len()).map(|c| table.iter().map(|r| r[c].len()).max().unwrap_or(0)).collect();
    for r in &table {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, v)| {
                if c == 0 {
                    format!("{v:<w$}", w = widths[c])
                } else {
                    format!("{v:>w$}", w = widths[c])
                }
            })
            .collect();
        let _ = writeln!(text, "{}", line.join("  "));
    }
    let window = rows.first().map(|r| r.window_ns).unwrap_or(0);
    let _ = writeln!(
        text,
        "(stolen % = the gaps' sum / the time measured; worst window = the largest share stolen in one window of {}, the last one over its own length)",
        rtlab_core::units::format_duration_exact(rtlab_core::units::Nanos(window))
    );
    text
}

/// The tables of a noise run: what was stolen per CPU, then the gaps' distribution.
pub fn render(doc: &ResultDocument, color: bool) -> String {
    let rows = rows(doc);
    let mut text = String::new();
    let threshold = rows.first().map(|r| us_1(r.threshold_ns)).unwrap_or_default();
    let tracer =
        |name: &str| doc.streams.iter().any(|s| s.labels.get("tracer").is_some_and(|t| t == name));
    if tracer("hwlat") {
        let _ = writeln!(text, "noise: samples above {threshold} us of the kernel's hwlat detector (each the largest gap of a window its thread spun in with interrupts off: time the kernel did not take; stolen = a sample's inner and outer gaps added, a lower bound; measured = its spinning time on the CPU)");
    } else if tracer("osnoise") {
        let _ = writeln!(text, "noise: interferences above {threshold} us the kernel's osnoise tracer attributed (time stolen from its workload thread; stolen = its periods' NOISE)");
    } else {
        let _ = writeln!(text, "noise: gaps above {threshold} us between two clock reads of a thread that never sleeps (time the machine stole from it)");
    }
    text.push_str(&table(&rows));
    let _ = writeln!(text);
    let _ = writeln!(text, "noise gap (each gap's duration)");
    let stats: Vec<Row> = doc
        .streams
        .iter()
        .filter(|s| s.metric == GAP_METRIC)
        .map(|s| Row { label: s.name.clone(), summary: &s.stats })
        .collect();
    text.push_str(&stats_table(&stats, color));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::histogram::Histogram;
    use rtlab_core::stats::{Running, Summary};
    use rtlab_core::windows::WindowMaxima;

    fn stream(name: &str, metric: &str, values: &[i64], labels: &[(&str, &str)]) -> Stream {
        let (mut r, mut h, mut w) =
            (Running::default(), Histogram::new(), WindowMaxima::new(1_000_000_000, 16));
        for (i, v) in values.iter().enumerate() {
            r.record(i as u64, i as i64 * 1_000_000_000, *v);
            h.record(*v);
            w.record(i as i64 * 1_000_000_000, *v);
        }
        Stream {
            name: name.into(),
            metric: metric.into(),
            definition: String::new(),
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            deadline_ns: 1_000,
            stats: Summary::from_parts(&r, &h),
            histogram: h.to_data(),
            windows: w.to_data(),
            raw_file: None,
            raw_dropped: None,
            start_monotonic_ns: None,
        }
    }

    fn doc() -> ResultDocument {
        let labels =
            [("measured_ns", "2000000000"), ("stolen_ns", "6000000"), ("threshold_ns", "1000")];
        ResultDocument {
            schema_version: rtlab_core::schema::SCHEMA_VERSION,
            tool: rtlab_core::schema::ToolInfo { name: "rtlab".into(), version: "0".into() },
            command_line: Vec::new(),
            started_at: String::new(),
            duration_ns: 2_000_000_000,
            interrupted: false,
            probe: "noise".into(),
            environment: Default::default(),
            config: serde_json::Value::Null,
            streams: vec![
                stream("cpu1", GAP_METRIC, &[2_000_000, 2_000_000, 2_000_000], &labels),
                stream("cpu1.stolen", "stolen_time", &[4_000_000, 2_000_000], &labels),
            ],
            warnings: Vec::new(),
            evidence: None,
            far: None,
            cost: None,
        }
    }

    #[test]
    fn a_row_per_cpu_with_its_share_rate_and_worst_window() {
        let rows = rows(&doc());
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!((r.cpu.as_str(), r.gaps, r.max_gap_ns), ("cpu1", 3, Some(2_000_000)));
        assert!((r.stolen_pct() - 0.3).abs() < 1e-9);
        assert!((r.rate_per_s() - 1.5).abs() < 1e-9);
        assert!((r.worst_window_pct.unwrap() - 0.4).abs() < 1e-9);
        assert_eq!(cells(r)[4], "0.300");
    }

    #[test]
    fn the_last_shorter_window_is_shared_over_its_own_length() {
        let labels = [("measured_ns", "1500000000"), ("stolen_ns", "3000000")];
        let mut d = doc();
        d.streams[1] = stream("cpu1.stolen", "stolen_time", &[1_000_000, 2_000_000], &labels);
        d.streams[0].labels.insert("measured_ns".into(), "1500000000".into());
        // window 1 lasted 0.5 s: 2 ms of it is 0.4 %, more than window 0's 0.1 %
        assert!((rows(&d)[0].worst_window_pct.unwrap() - 0.4).abs() < 1e-9);
    }

    #[test]
    fn the_terminal_tables_name_every_cpu_and_the_threshold() {
        let text = render(&doc(), false);
        assert!(text.starts_with("noise: gaps above 1.0 us"), "{text}");
        let row = text.lines().find(|l| l.starts_with("cpu1 ")).unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols, ["cpu1", "3", "1.5", "6000.0", "0.300", "0.400", "2000.0", "2000.0"]);
        assert!(text.contains("noise gap (each gap's duration)"));
        let mut d = doc();
        d.streams[0].labels.insert("tracer".into(), "osnoise".into());
        assert!(
            render(&d, false).starts_with("noise: interferences above 1.0 us the kernel's osnoise")
        );
        d.streams[0].labels.insert("tracer".into(), "hwlat".into());
        assert!(render(&d, false).starts_with("noise: samples above 1.0 us of the kernel's hwlat"));
        assert_eq!(text.lines().filter(|l| l.starts_with("cpu1")).count(), 2, "{text}");
    }
}
