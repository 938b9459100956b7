//! Terminal rendering of summaries: the statistics table and a log-count histogram.
//!
//! Contract: pure functions from results to text; colour is an argument, never detected
//! here. Max and p99.9 are the emphasised columns (the tail is what a real-time engineer
//! reads first).

use rtlab_core::histogram::HistogramData;
use rtlab_core::stats::Summary;
use rtlab_core::units::us_1;
use std::fmt::Write as _;

/// One table row: a label and its summary.
pub struct Row<'a> {
    pub label: String,
    pub summary: &'a Summary,
}

const BOLD: &str = "\x1b[1m";
const YELLOW: &str = "\x1b[1;33m";
const RESET: &str = "\x1b[0m";

fn cell(v: Option<i64>) -> String {
    v.map(us_1).unwrap_or_else(|| "-".into())
}

/// The statistics table, in microseconds with one decimal. `color` adds ANSI emphasis.
pub fn stats_table(rows: &[Row<'_>], color: bool) -> String {
    let head = [
        "", "count", "min", "mean", "stddev", "p50", "p90", "p99", "p99.9", "p99.99", "max",
        "missed", "overruns",
    ];
    let mut table: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
    for r in rows {
        let s = r.summary;
        table.push(vec![
            r.label.clone(),
            s.count.to_string(),
            cell(s.min_ns),
            cell(s.mean_ns),
            cell(s.stddev_ns),
            cell(s.p50_ns),
            cell(s.p90_ns),
            cell(s.p99_ns),
            cell(s.p99_9_ns),
            cell(s.p99_99_ns),
            cell(s.max_ns),
            s.missed.map(|m| format!("{m}/{}", s.count)).unwrap_or_else(|| "-".into()),
            s.overruns.map(|m| m.to_string()).unwrap_or_else(|| "-".into()),
        ]);
    }
    let widths: Vec<usize> = (0..head.len())
        .map(|c| table.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (ri, r) in table.iter().enumerate() {
        for (c, v) in r.iter().enumerate() {
            let pad = widths[c] - v.chars().count();
            let text = if c == 0 {
                format!("{v}{}", " ".repeat(pad))
            } else {
                format!("{}{v}", " ".repeat(pad))
            };
            let emph = color && (head[c] == "max" || head[c] == "p99.9");
            if c > 0 {
                out.push_str("  ");
            }
            if color && ri == 0 {
                let _ = write!(out, "{BOLD}{text}{RESET}");
            } else if emph {
                let _ = write!(out, "{YELLOW}{text}{RESET}");
            } else {
                out.push_str(&text);
            }
        }
        out.truncate(out.trim_end_matches(' ').len());
        out.push('\n');
    }
    out.push_str("(us; missed = samples above the deadline)\n");
    out
}

/// A terminal histogram: `bins` rows over [min, max], bar length ~ log10(count).
pub fn terminal_histogram(h: &HistogramData, bins: usize, width: usize) -> String {
    let buckets = &h.buckets;
    if buckets.is_empty() {
        return "(no samples)\n".into();
    }
    let lo = buckets[0].low_ns;
    let hi = buckets[buckets.len() - 1].high_ns;
    let bins = bins.max(1);
    let span = ((hi - lo) as u128 + 1).div_ceil(bins as u128).max(1) as i64;
    let mut counts = vec![0u64; bins];
    for b in buckets {
        // a bucket goes where its midpoint falls
        let mid = b.low_ns + (b.high_ns - b.low_ns) / 2;
        let i = (((mid - lo) / span) as usize).min(bins - 1);
        counts[i] += b.count;
    }
    let top = counts.iter().copied().max().unwrap_or(1).max(1);
    let scale = (top as f64 + 1.0).log10();
    let mut out = String::new();
    for (i, &c) in counts.iter().enumerate() {
        let from = lo + i as i64 * span;
        let to = (from + span - 1).min(hi);
        let len = if c == 0 {
            0
        } else {
            (((c as f64 + 1.0).log10() / scale) * width as f64).ceil() as usize
        };
        let _ = writeln!(
            out,
            "{:>9} .. {:>9} us |{:<width$}| {}",
            us_1(from),
            us_1(to),
            "#".repeat(len),
            c,
            width = width
        );
    }
    if h.overflow_high + h.overflow_low > 0 {
        let _ = writeln!(
            out,
            "overflow: {} above {} us, {} below -{} us",
            h.overflow_high,
            us_1(h.limit_ns),
            h.overflow_low,
            us_1(h.limit_ns)
        );
    }
    out.push_str("(bar length: log10 of the count)\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::histogram::Histogram;
    use rtlab_core::stats::Running;

    fn summary_of(xs: &[i64]) -> (Summary, Histogram) {
        let mut r = Running::default();
        let mut h = Histogram::new();
        for (i, &x) in xs.iter().enumerate() {
            r.record(i as u64, 0, x);
            h.record(x);
        }
        let mut s = Summary::from_parts(&r, &h);
        s.missed = Some(xs.iter().filter(|&&x| x > 1_000_000).count() as u64);
        s.overruns = Some(0);
        (s, h)
    }

    #[test]
    fn table_snapshot() {
        let (s, _) = summary_of(&[1_000, 2_000, 3_000, 2_000_000]);
        let t = stats_table(&[Row { label: "thread0".into(), summary: &s }], false);
        let expect = concat!(
            "         count  min   mean  stddev  p50     p90     p99   p99.9  p99.99     max  missed  overruns\n",
            "thread0      4  1.0  501.5   865.2  2.0  2000.0  2000.0  2000.0  2000.0  2000.0     1/4         0\n",
            "(us; missed = samples above the deadline)\n",
        );
        assert_eq!(t, expect);
    }

    #[test]
    fn histogram_rows_cover_every_sample() {
        let (_, h) = summary_of(&[1_000, 1_100, 5_000, 9_000, 9_000]);
        let out = terminal_histogram(&h.to_data(), 4, 20);
        let total: u64 =
            out.lines().filter_map(|l| l.rsplit("| ").next()?.trim().parse::<u64>().ok()).sum();
        assert_eq!(total, 5, "{out}");
    }
}
