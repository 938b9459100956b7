//! Export of stored runs: JSON (the [`Run`] as one document) and CSV in long format
//! (pandas-friendly: one header line, one observation per row, empty cell = no value).
//!
//! Contract: pure functions from a [`Run`] to text; every case appears, failed and skipped
//! ones too (with their status and error, and empty statistics).
//! - `stats`: one row per run / case / stream with the result-schema statistics columns;
//!   a case without streams gets one row with an empty `stream`.
//! - `histogram`: one row per histogram bucket (`low_ns <= v <= high_ns`, `count`).
//! - `windows`: one row per max-over-time window (`start_ns = window * width_ns`), with the
//!   kernel counters of that window summed over CPUs (`net_rx`, `timer_softirqs`,
//!   `interrupts`, `ksoftirqd_ns`, `context_switches`, `steal_ticks`; empty: none kept).
//!
//! - `cost`: what each case cost (the document's `cost`), one row per thing counted:
//!   `kind` = `case` (the near side's CPU over every window, its max RSS, CPU per message),
//!   `window` (a measured window: its length, messages, CPU, CPU per message), `measuring`
//!   (a measuring thread: CPU, faults, context switches), `group` (a process's threads of one
//!   name group: CPU, faults) or `process` (a role process's max RSS); `stream` is empty.
//!
//! The matrix parameters of the cases become `param_<key>` columns (the union over the runs).

use rtlab_core::run::{CaseRecord, CaseStatus, Run};
use rtlab_core::schema::Stream;
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// What a CSV export holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CsvWhat {
    Stats,
    Histogram,
    Windows,
    Cost,
}

/// The runs as one JSON document: a single run as an object, several as an array.
pub fn to_json(runs: &[Run]) -> String {
    let mut s = if runs.len() == 1 {
        serde_json::to_string_pretty(&runs[0])
    } else {
        serde_json::to_string_pretty(runs)
    }
    .expect("plain serde data serializes");
    s.push('\n');
    s
}

/// Quote a CSV field when it needs it (RFC 4180).
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// `ok`, `failed`, `skipped`, `interrupted`, `hung` and the error or reason.
pub fn status_of(c: &CaseRecord) -> (&'static str, &str) {
    match &c.status {
        CaseStatus::Ok => ("ok", ""),
        CaseStatus::Failed { error } => ("failed", error),
        CaseStatus::Skipped { reason } => ("skipped", reason),
        CaseStatus::Interrupted => ("interrupted", ""),
        CaseStatus::Hung { error } => ("hung", error),
    }
}

const STATS_COLS: [&str; 21] = [
    "metric",
    "deadline_ns",
    "count",
    "min_ns",
    "mean_ns",
    "stddev_ns",
    "p50_ns",
    "p90_ns",
    "p99_ns",
    "p99_9_ns",
    "p99_99_ns",
    "max_ns",
    "max_index",
    "max_at_ns",
    "missed",
    "overruns",
    "lost",
    "late",
    "duplicates",
    "out_of_order",
    "malformed",
];

/// The columns of `--what windows`: the window, then the kernel counters of the same window
/// summed over CPUs (empty when the case kept none on this stream's grid).
const WINDOW_COLS: [&str; 11] = [
    "window",
    "start_ns",
    "width_ns",
    "max_ns",
    "count",
    "net_rx",
    "timer_softirqs",
    "interrupts",
    "ksoftirqd_ns",
    "context_switches",
    "steal_ticks",
];

/// The columns of `--what cost` (see the module doc).
const COST_COLS: [&str; 17] = [
    "kind",
    "window",
    "window_ns",
    "messages",
    "process",
    "name",
    "policy",
    "threads",
    "born",
    "user_ns",
    "system_ns",
    "minor_faults",
    "major_faults",
    "voluntary_switches",
    "involuntary_switches",
    "max_rss_kib",
    "cpu_per_message_ns",
];

/// `--what cost`: a case's cost, a row per window, measuring thread, group and process.
fn cost_rows(out: &mut String, prefix: &str, c: &CaseRecord) {
    let Some(cost) = c.document.as_ref().and_then(|d| d.cost.as_ref()) else { return };
    let mut row = |cols: [String; 17]| {
        let _ = writeln!(
            out,
            "{prefix},,{}",
            cols.iter().map(|s| field(s)).collect::<Vec<_>>().join(",")
        );
    };
    let e = String::new;
    let (u, s) = cost.cpu_ns();
    let msgs: u64 = cost.windows.iter().filter_map(|w| w.messages).sum();
    row([
        "case".into(),
        e(),
        cost.window_ns().to_string(),
        if cost.windows.iter().any(|w| w.messages.is_some()) { msgs.to_string() } else { e() },
        "rtlab".into(),
        e(),
        e(),
        e(),
        e(),
        u.to_string(),
        s.to_string(),
        e(),
        e(),
        e(),
        e(),
        opt(cost.max_rss_kib),
        opt(cost.cpu_per_message_ns()),
    ]);
    for w in &cost.windows {
        let (u, s) = w.cpu_ns();
        row([
            "window".into(),
            w.name.clone(),
            w.window_ns.to_string(),
            opt(w.messages),
            e(),
            e(),
            e(),
            e(),
            e(),
            u.to_string(),
            s.to_string(),
            e(),
            e(),
            e(),
            e(),
            e(),
            opt(w.cpu_per_message_ns()),
        ]);
        for t in &w.measuring {
            let x = &t.usage;
            row([
                "measuring".into(),
                w.name.clone(),
                t.window_ns.to_string(),
                e(),
                t.process.clone(),
                t.thread.clone(),
                t.sched(),
                "1".into(),
                e(),
                x.user_ns.to_string(),
                x.system_ns.to_string(),
                x.minor_faults.to_string(),
                x.major_faults.to_string(),
                x.voluntary_switches.to_string(),
                x.involuntary_switches.to_string(),
                e(),
                e(),
            ]);
        }
        for g in &w.groups {
            row([
                "group".into(),
                w.name.clone(),
                e(),
                e(),
                g.process.clone(),
                g.group.clone(),
                g.sched_text(),
                g.threads.to_string(),
                g.born.to_string(),
                g.user_ns.to_string(),
                g.system_ns.to_string(),
                g.minor_faults.to_string(),
                g.major_faults.to_string(),
                e(),
                e(),
                e(),
                e(),
            ]);
        }
        for p in &w.processes {
            row([
                "process".into(),
                w.name.clone(),
                e(),
                e(),
                p.process.clone(),
                e(),
                e(),
                e(),
                e(),
                e(),
                e(),
                e(),
                e(),
                e(),
                e(),
                p.max_rss_kib.to_string(),
                e(),
            ]);
        }
    }
}

/// The runs as CSV (see the module doc for the columns).
pub fn to_csv(runs: &[Run], what: CsvWhat) -> String {
    let keys: BTreeSet<&str> = runs
        .iter()
        .flat_map(|r| r.cases.iter().flat_map(|c| c.params.keys().map(String::as_str)))
        .collect();
    let mut out = header(&keys, what);
    for r in runs {
        for c in &r.cases {
            let prefix = case_prefix(r, c, &keys);
            if what == CsvWhat::Cost {
                cost_rows(&mut out, &prefix, c);
                continue;
            }
            let streams = c.document.as_ref().map(|d| d.streams.as_slice()).unwrap_or(&[]);
            if streams.is_empty() && what == CsvWhat::Stats {
                let _ = writeln!(out, "{prefix},{}", ",".repeat(STATS_COLS.len()));
                continue;
            }
            for s in streams {
                match what {
                    CsvWhat::Stats => stats_row(&mut out, &prefix, s),
                    CsvWhat::Histogram => histogram_rows(&mut out, &prefix, s),
                    CsvWhat::Windows => window_rows(&mut out, &prefix, c, s),
                    CsvWhat::Cost => {}
                }
            }
        }
    }
    out
}

/// The header line: the case's columns, a column per parameter, the stream, `what`'s.
fn header(keys: &BTreeSet<&str>, what: CsvWhat) -> String {
    let mut head = [
        "run_id",
        "scenario",
        "case_index",
        "case",
        "probe",
        "load",
        "profile",
        "repetition",
        "status",
        "error",
    ]
    .into_iter()
    .map(String::from)
    .collect::<Vec<_>>();
    head.extend(keys.iter().map(|k| format!("param_{k}")));
    head.push("stream".into());
    match what {
        CsvWhat::Stats => head.extend(STATS_COLS.iter().map(|s| s.to_string())),
        CsvWhat::Histogram => head.extend(["low_ns", "high_ns", "count"].map(String::from)),
        CsvWhat::Windows => head.extend(WINDOW_COLS.map(String::from)),
        CsvWhat::Cost => head.extend(COST_COLS.map(String::from)),
    }
    let mut out = head.iter().map(|h| field(h)).collect::<Vec<_>>().join(",");
    out.push('\n');
    out
}

/// The case's columns of every line of its streams (quoted as needed).
fn case_prefix(r: &Run, c: &CaseRecord, keys: &BTreeSet<&str>) -> String {
    let (status, error) = status_of(c);
    let mut pre = vec![
        r.id.to_string(),
        r.info.scenario.clone(),
        c.index.to_string(),
        c.name.clone(),
        c.probe.clone(),
        c.load.clone(),
        c.profile.clone(),
        c.repetition.to_string(),
        status.into(),
        error.into(),
    ];
    pre.extend(keys.iter().map(|k| c.params.get(*k).cloned().unwrap_or_default()));
    pre.iter().map(|s| field(s)).collect::<Vec<_>>().join(",")
}

/// `--what stats`: a line per stream.
fn stats_row(out: &mut String, prefix: &str, s: &Stream) {
    let t = &s.stats;
    let cols = [
        field(&s.metric),
        s.deadline_ns.to_string(),
        t.count.to_string(),
        opt(t.min_ns),
        opt(t.mean_ns),
        opt(t.stddev_ns),
        opt(t.p50_ns),
        opt(t.p90_ns),
        opt(t.p99_ns),
        opt(t.p99_9_ns),
        opt(t.p99_99_ns),
        opt(t.max_ns),
        opt(t.max_index),
        opt(t.max_at_ns),
        opt(t.missed),
        opt(t.overruns),
        opt(t.lost),
        opt(t.late),
        opt(t.duplicates),
        opt(t.out_of_order),
        opt(t.malformed),
    ];
    let _ = writeln!(out, "{prefix},{},{}", field(&s.name), cols.join(","));
}

/// `--what histogram`: a line per bucket.
fn histogram_rows(out: &mut String, prefix: &str, s: &Stream) {
    let name = field(&s.name);
    for b in &s.histogram.buckets {
        let _ = writeln!(out, "{prefix},{name},{},{},{}", b.low_ns, b.high_ns, b.count);
    }
}

/// `--what windows`: a line per window, with the kernel counters of the same window when
/// they follow this stream's grid.
fn window_rows(out: &mut String, prefix: &str, c: &CaseRecord, s: &Stream) {
    let name = field(&s.name);
    let w = &s.windows;
    let counters = c
        .document
        .as_ref()
        .and_then(|d| d.evidence.as_ref())
        .and_then(|e| e.counters.as_ref())
        .filter(|k| k.width_ns == w.width_ns && k.start_monotonic_ns == s.start_monotonic_ns);
    for (i, m) in w.max_ns.iter().enumerate() {
        let k = match counters.and_then(|k| k.windows.get(i)) {
            Some(k) => {
                let sum = |v: &[u64]| v.iter().sum::<u64>().to_string();
                format!(
                    "{},{},{},{},{},{}",
                    sum(&k.net_rx),
                    sum(&k.timer),
                    sum(&k.interrupts),
                    sum(&k.ksoftirqd_ns),
                    k.context_switches,
                    sum(&k.steal_ticks)
                )
            }
            None => ",,,,,".into(),
        };
        let _ = writeln!(
            out,
            "{prefix},{name},{i},{},{},{},{},{k}",
            i as i64 * w.width_ns,
            w.width_ns,
            opt(*m),
            w.count.get(i).copied().unwrap_or(0)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_when_needed() {
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(field("plain"), "plain");
    }
}
