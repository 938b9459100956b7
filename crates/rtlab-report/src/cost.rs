//! What cases cost, as the reports show it: the "cost" column group (the near side's CPU
//! user and system time over the measured windows, that CPU in CPUs, CPU per message, the
//! measuring threads' page faults and involuntary context switches, max RSS), a case's cost
//! in detail (each window's measuring threads and busiest thread groups), and the cost of
//! two runs' cases side by side for `compare`.
//!
//! Definitions in docs/reports.md ("cost"); the figures are the document's `cost`.

use crate::table::align_left;
use rtlab_core::cost::{rss_growth, Cost, CostWindow, RssSample};
use rtlab_core::run::{CaseRecord, Run};

/// The column group's headers (a row per measured window of a case).
pub const COST_HEADERS: [&str; 9] = [
    "window",
    "messages",
    "cpu user ms",
    "cpu sys ms",
    "cpus",
    "cpu/msg us",
    "faults",
    "preempted",
    "rss MiB",
];

/// What the columns hold, in one line.
pub const COST_LEGEND: &str = "(cost, per measured window (a pub/sub case is a window): CPU of every thread of rtlab's process and its role processes, user and system, in ms and in CPUs (CPU time / window); cpu/msg = that CPU / messages; faults = minor + major page faults and preempted = involuntary context switches of the measuring threads in their windows; rss = rtlab's largest resident memory while the case measured (VmRSS samples; the process's high-water mark since it started is in the case's section); - : not measured)";

fn ms(ns: i64) -> String {
    format!("{:.1}", ns as f64 / 1e6)
}

/// `12.3` us from ns.
pub fn us_of(ns: i64) -> String {
    format!("{:.1}", ns as f64 / 1e3)
}

/// The CPU per message of a window or a case, in us (`-` when it has no messages).
pub fn per_message(ns: Option<i64>) -> String {
    ns.map(us_of).unwrap_or_else(|| "-".into())
}

fn rss(kib: Option<u64>) -> String {
    kib.map(|k| format!("{:.1}", k as f64 / 1024.0)).unwrap_or_else(|| "-".into())
}

/// The cost column group of one window (headers: [`COST_HEADERS`]).
pub fn window_cells(w: &CostWindow, max_rss_kib: Option<u64>) -> Vec<String> {
    let (u, s) = w.cpu_ns();
    let m = w.measuring_total();
    vec![
        w.name.clone(),
        w.messages.map(|m| m.to_string()).unwrap_or_else(|| "-".into()),
        ms(u),
        ms(s),
        w.cpus().map(|x| format!("{x:.2}")).unwrap_or_else(|| "-".into()),
        per_message(w.cpu_per_message_ns()),
        (m.minor_faults + m.major_faults).to_string(),
        m.involuntary_switches.to_string(),
        rss(max_rss_kib),
    ]
}

/// The cost rows of a case: one per measured window; one row of `-` when it has none.
pub fn cost_rows(cost: Option<&Cost>) -> Vec<Vec<String>> {
    match cost {
        Some(c) if !c.windows.is_empty() => {
            c.windows.iter().map(|w| window_cells(w, c.case_rss_kib("rtlab"))).collect()
        }
        _ => vec![vec!["-".to_string(); COST_HEADERS.len()]],
    }
}

/// A case's cost, if it has one.
pub fn case_cost(c: &CaseRecord) -> Option<&Cost> {
    c.document.as_ref().and_then(|d| d.cost.as_ref())
}

/// A run's cost table: a row per case and measured window (every case; `-` where none was
/// measured), or "" when no case of the run has a cost (runs of an rtlab before it).
pub fn cost_table(run: &Run) -> String {
    if !run.cases.iter().any(|c| case_cost(c).is_some()) {
        return String::new();
    }
    let mut head = vec!["#".to_string(), "case".to_string()];
    head.extend(COST_HEADERS.iter().map(|s| s.to_string()));
    let mut rows = vec![head];
    for c in &run.cases {
        for (i, cells) in cost_rows(case_cost(c)).into_iter().enumerate() {
            let mut r = if i == 0 {
                vec![c.index.to_string(), c.name.clone()]
            } else {
                vec![String::new(), String::new()]
            };
            r.extend(cells);
            rows.push(r);
        }
    }
    let mut out = align_left(&rows, &[0, 1, 2]);
    out.push_str(COST_LEGEND);
    out.push('\n');
    out
}

/// The busiest groups of a window (by CPU), as `recv [fifo 80] 12.0+3.1ms, dds.udp.* (2)
/// [fifo 75 x1; other x1] 4.0+0.0ms`: each group's policies and priorities at the window's end.
pub fn busiest_groups(w: &CostWindow, n: usize) -> String {
    let mut g: Vec<_> = w.groups.iter().collect();
    g.sort_by_key(|g| std::cmp::Reverse(g.cpu_ns()));
    g.iter()
        .take(n)
        .map(|g| {
            let who = if g.process == "rtlab" {
                g.group.clone()
            } else {
                format!("{}:{}", g.process, g.group)
            };
            let count = if g.threads > 1 { format!(" ({})", g.threads) } else { String::new() };
            let sched = g.sched_text();
            let sched = if sched.is_empty() { sched } else { format!(" [{sched}]") };
            format!("{who}{count}{sched} {}+{}ms", ms(g.user_ns), ms(g.system_ns))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A case's cost in a few lines: per window its CPU, CPU per message, each measuring
/// thread's usage, the busiest thread groups; the max RSS; the notes.
pub fn cost_lines(c: &Cost) -> Vec<String> {
    let mut v = Vec::new();
    for w in &c.windows {
        let (u, s) = w.cpu_ns();
        v.push(format!(
            "cost {}: {} ms window, cpu {}+{} ms user+sys ({} cpus){}",
            w.name,
            ms(w.window_ns),
            ms(u),
            ms(s),
            w.cpus().map(|x| format!("{x:.2}")).unwrap_or_else(|| "-".into()),
            w.cpu_per_message_ns()
                .map(|n| format!(
                    ", {} us cpu/msg over {} messages",
                    us_of(n),
                    w.messages.unwrap_or(0)
                ))
                .unwrap_or_default()
        ));
        for t in &w.measuring {
            let x = &t.usage;
            let who = if t.process == "rtlab" || t.process.is_empty() {
                t.thread.clone()
            } else {
                format!("{}:{}", t.process, t.thread)
            };
            v.push(format!(
                "  {} ({}): {}+{} ms user+sys, faults {} minor {} major, switches {} voluntary {} involuntary",
                who,
                t.sched(),
                ms(x.user_ns),
                ms(x.system_ns),
                x.minor_faults,
                x.major_faults,
                x.voluntary_switches,
                x.involuntary_switches
            ));
        }
        if !w.groups.is_empty() {
            v.push(format!("  threads by group: {}", busiest_groups(w, 6)));
        }
        for p in &w.processes {
            v.push(format!("  {}: max RSS {:.1} MiB", p.process, p.max_rss_kib as f64 / 1024.0));
        }
    }
    if let Some(k) = c.max_rss_kib {
        v.push(format!(
            "cost: rtlab's high-water RSS since it started (VmHWM, earlier cases included) {:.1} MiB",
            k as f64 / 1024.0
        ));
    }
    for p in ["rtlab", "agent"] {
        let mine: Vec<&RssSample> = c.rss.iter().filter(|s| s.process == p).collect();
        let Some((base, max)) = rss_growth(&c.rss, p) else { continue };
        let from = mine.iter().find(|s| s.at_ms >= 60_000).unwrap_or(&mine[0]).at_ms;
        v.push(format!(
            "cost: {p} memory over the case: {:.1} MiB at {:.0} s, at most {:.1} MiB after ({:+.1} %), {} samples",
            base as f64 / 1024.0,
            from as f64 / 1000.0,
            max as f64 / 1024.0,
            if base > 0 { (max as f64 - base as f64) * 100.0 / base as f64 } else { 0.0 },
            mine.len()
        ));
    }
    v.extend(c.notes.iter().map(|n| format!("cost note: {n}")));
    v
}

/// One case's cost in two runs.
#[derive(Clone, Debug, PartialEq)]
pub struct CostDiff {
    pub case: String,
    /// CPU (user + system) / window, in CPUs.
    pub cpus: (Option<f64>, Option<f64>),
    /// CPU per message, ns.
    pub per_message_ns: (Option<i64>, Option<i64>),
    /// Measuring threads' page faults (minor + major).
    pub faults: (u64, u64),
    /// Measuring threads' involuntary context switches.
    pub preempted: (u64, u64),
    pub max_rss_kib: (Option<u64>, Option<u64>),
}

fn cpus(c: &Cost) -> Option<f64> {
    let w = c.window_ns();
    let (u, s) = c.cpu_ns();
    (w > 0).then(|| (u + s) as f64 / w as f64)
}

/// The cost of every case matched by name that has a cost in both runs.
pub fn cost_diffs(a: &Run, b: &Run) -> Vec<CostDiff> {
    let mut v = Vec::new();
    for ca in &a.cases {
        let Some(cb) = b.cases.iter().find(|c| c.name == ca.name) else { continue };
        let (Some(x), Some(y)) = (case_cost(ca), case_cost(cb)) else { continue };
        let (mx, my) = (x.measuring_total(), y.measuring_total());
        v.push(CostDiff {
            case: ca.name.clone(),
            cpus: (cpus(x), cpus(y)),
            per_message_ns: (x.cpu_per_message_ns(), y.cpu_per_message_ns()),
            faults: (mx.minor_faults + mx.major_faults, my.minor_faults + my.major_faults),
            preempted: (mx.involuntary_switches, my.involuntary_switches),
            max_rss_kib: (x.case_rss_kib("rtlab"), y.case_rss_kib("rtlab")),
        });
    }
    v
}

fn change(a: Option<f64>, b: Option<f64>, digits: usize) -> String {
    let f = |v: Option<f64>| v.map(|v| format!("{v:.digits$}")).unwrap_or_else(|| "-".into());
    match (a, b) {
        (Some(x), Some(y)) if x > 0.0 => {
            format!("{} -> {} ({:+.0}%)", f(a), f(b), (y - x) / x * 100.0)
        }
        _ => format!("{} -> {}", f(a), f(b)),
    }
}

/// The cost table of `compare`: A -> B with the change in percent; "" when no case has a
/// cost in both runs.
pub fn render_cost_diffs(d: &[CostDiff]) -> String {
    if d.is_empty() {
        return String::new();
    }
    let mut rows = vec![["case", "cpus", "cpu/msg (us)", "faults", "preempted", "rss (MiB)"]
        .map(String::from)
        .to_vec()];
    for c in d {
        rows.push(vec![
            c.case.clone(),
            change(c.cpus.0, c.cpus.1, 2),
            change(
                c.per_message_ns.0.map(|n| n as f64 / 1e3),
                c.per_message_ns.1.map(|n| n as f64 / 1e3),
                1,
            ),
            format!("{} -> {}", c.faults.0, c.faults.1),
            format!("{} -> {}", c.preempted.0, c.preempted.1),
            change(
                c.max_rss_kib.0.map(|k| k as f64 / 1024.0),
                c.max_rss_kib.1.map(|k| k as f64 / 1024.0),
                1,
            ),
        ]);
    }
    let mut out = String::from("Cost (A -> B; figures of one run each, shown, not judged: they do not decide the exit code)\n");
    out.push_str(&align_left(&rows, &[0]));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::cost::{MeasuringThread, ThreadGroup, Usage};

    fn cost(cpu_ms: i64, faults: u64) -> Cost {
        Cost {
            windows: vec![CostWindow {
                name: "timer".into(),
                window_ns: 1_000_000_000,
                messages: Some(1000),
                measuring: vec![MeasuringThread {
                    process: "rtlab".into(),
                    thread: "rtlab-timer0".into(),
                    policy: "fifo".into(),
                    priority: 80,
                    window_ns: 1_000_000_000,
                    usage: Usage {
                        user_ns: cpu_ms * 1_000_000,
                        minor_faults: faults,
                        ..Default::default()
                    },
                }],
                groups: vec![ThreadGroup {
                    process: "rtlab".into(),
                    group: "rtlab-timer*".into(),
                    threads: 1,
                    user_ns: cpu_ms * 1_000_000,
                    sched: vec![rtlab_core::cost::SchedShare {
                        policy: "fifo".into(),
                        priority: 80,
                        threads: 1,
                    }],
                    ..Default::default()
                }],
                processes: Vec::new(),
            }],
            max_rss_kib: Some(2048),
            notes: vec![],
            far: vec![],
            rss: vec![],
        }
    }

    #[test]
    fn the_column_group_shows_cpu_per_message_faults_and_rss() {
        // the rss column is the case's own: its largest sample while it measured, never the
        // process's high-water mark (2 MiB here, from earlier cases), "-" without samples
        let mut c = cost(500, 3);
        assert_eq!(cost_rows(Some(&c))[0][8], "-");
        c.rss = [(0, 1024), (500, 1536), (900, 1280)]
            .map(|(at_ms, rss_kib)| RssSample { process: "rtlab".into(), at_ms, rss_kib })
            .to_vec();
        c.rss.push(RssSample { process: "agent".into(), at_ms: 0, rss_kib: 9999 });
        let rows = cost_rows(Some(&c));
        assert_eq!(
            rows,
            vec![vec!["timer", "1000", "500.0", "0.0", "0.50", "500.0", "3", "0", "1.5"]]
        );
        assert!(cost_lines(&c)
            .join("\n")
            .contains("high-water RSS since it started (VmHWM, earlier cases included) 2.0 MiB"));
        assert!(cost_rows(None)[0].iter().all(|c| c == "-"));
        let lines = cost_lines(&cost(500, 3)).join("\n");
        assert!(lines.contains("rtlab-timer0 (fifo 80): 500.0+0.0 ms"), "{lines}");
        assert!(lines.contains("threads by group: rtlab-timer* [fifo 80] 500.0+0.0ms"), "{lines}");
        assert!(lines.contains("500.0 us cpu/msg over 1000 messages"), "{lines}");
    }

    #[test]
    fn memory_over_the_case_is_a_line_per_process_from_its_first_minute() {
        let mut c = cost(500, 3);
        let at = |process: &str, at_ms: i64, rss_kib: u64| RssSample {
            process: process.into(),
            at_ms,
            rss_kib,
        };
        c.rss = vec![
            at("rtlab", 0, 9 * 1024),
            at("agent", 0, 2048),
            at("rtlab", 60_000, 10 * 1024),
            at("rtlab", 120_000, 11 * 1024),
        ];
        let lines = cost_lines(&c).join("\n");
        assert!(
            lines.contains("cost: rtlab memory over the case: 10.0 MiB at 60 s, at most 11.0 MiB after (+10.0 %), 3 samples"),
            "{lines}"
        );
        // no sample after the first minute: from its first one
        assert!(
            lines.contains("cost: agent memory over the case: 2.0 MiB at 0 s, at most 2.0 MiB after (+0.0 %), 1 samples"),
            "{lines}"
        );
    }

    #[test]
    fn compare_shows_the_change_of_each_figure() {
        let d = vec![CostDiff {
            case: "timer/idle".into(),
            cpus: (Some(0.5), Some(1.0)),
            per_message_ns: (Some(2000), Some(1000)),
            faults: (0, 4),
            preempted: (1, 1),
            max_rss_kib: (Some(1024), None),
        }];
        let t = render_cost_diffs(&d);
        assert!(t.contains("0.50 -> 1.00 (+100%)"), "{t}");
        assert!(t.contains("2.0 -> 1.0 (-50%)"), "{t}");
        assert!(t.contains("0 -> 4"), "{t}");
        assert!(t.contains("1.0 -> -"), "{t}");
        assert_eq!(render_cost_diffs(&[]), "");
    }
}
