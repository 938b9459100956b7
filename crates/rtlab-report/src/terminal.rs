//! The terminal report: per run, the studies' table (Min / Avg / Max / Missed / Packet loss
//! per case, the published figures beside), then per case its percentile table, its
//! warnings, what differed in its environment, and the error or reason of a failed or
//! skipped case.
//!
//! Where a run has noise cases measured under several profiles, its part has them side by
//! side after the profiles compared ([`crate::noise::pivots_text`]).
//!
//! Where the runs hold the same pub/sub case through `ros2` and through the DDS its RMW runs
//! on, each run's part has the "ROS 2 layer" rows after the profiles compared
//! ([`ros2_layer_text`]).
//!
//! Contract: plain text (ANSI emphasis only when `color`), deterministic for a given run
//! (snapshot-tested); every case of the run appears.

use crate::model::{
    headline, lost_of, measured_cases, missed_of, params_text, profile_comparisons, run_warnings,
    status, RunWarning,
};
use crate::render::{stats_table, Row};
use crate::ros2_layer::{ros2_layer, Ros2Layer, DEFINITION};
use crate::table::align_left;
use crate::verdict::run_verdict;
use rtlab_core::run::{CaseRecord, Published, Run};
use rtlab_core::schema::Environment;
use rtlab_core::units::us_1;
use std::fmt::Write as _;

fn us(v: Option<i64>) -> String {
    v.map(us_1).unwrap_or_else(|| "-".into())
}

fn usf(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into())
}

/// The published figures as a table row (same columns as a measured row).
pub fn published_row(p: &Published) -> Vec<String> {
    let of = |x: Option<u64>| {
        x.map(|v| match p.of {
            Some(n) => format!("{v}/{n}"),
            None => v.to_string(),
        })
        .unwrap_or_else(|| "-".into())
    };
    vec![
        String::new(),
        format!("  published: {}", p.label),
        "published".into(),
        usf(p.min_us),
        usf(p.avg_us),
        usf(p.max_us),
        of(p.missed),
        of(p.lost),
    ]
}

/// One studies-table row of a case: index, name, verdict, min, avg, max, missed x/N, lost x/N.
pub fn case_row(c: &CaseRecord, st: &str) -> Vec<String> {
    match headline(c) {
        Some(s) => vec![
            c.index.to_string(),
            c.name.clone(),
            st.into(),
            us(s.stats.min_ns),
            us(s.stats.mean_ns),
            us(s.stats.max_ns),
            missed_of(s),
            lost_of(s),
        ],
        None => vec![
            c.index.to_string(),
            c.name.clone(),
            st.into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
        ],
    }
}

/// The studies' table of a run.
pub fn studies_table(run: &Run) -> String {
    let mut rows = vec![["#", "case", "verdict", "min", "avg", "max", "missed", "lost"]
        .map(String::from)
        .to_vec()];
    let verdict = run_verdict(run);
    for (c, v) in run.cases.iter().zip(&verdict.cases) {
        rows.push(case_row(c, &v.word()));
        if let Some(p) = &c.published {
            rows.push(published_row(p));
        }
    }
    let mut out = align_left(&rows, &[0, 1, 2]);
    let mut sources: Vec<&str> = Vec::new();
    for p in run.cases.iter().filter_map(|c| c.published.as_ref()) {
        if !sources.contains(&p.source.as_str()) {
            sources.push(&p.source);
        }
    }
    for s in sources {
        let _ = writeln!(out, "published figures: {s}");
    }
    out.push_str("(us; the case's `all` stream, else its first stream; missed = samples above the deadline / samples; lost = lost / (samples + lost); the verdict counts every judged stream, skipped periods as missed: docs/reports.md)\n");
    out
}

/// Per probe x load (x parameters) measured under several profiles: p50 / p99 / p99.9 /
/// max of each profile's headline stream side by side (the terminal's form of the HTML
/// report's CDF plots). Empty when no comparison applies.
pub fn profiles_compared(run: &Run) -> String {
    let mut out = String::new();
    for c in profile_comparisons(run) {
        let _ = writeln!(out, "\nProfiles compared: {} ({} {}, us)", c.label(), c.stream, c.metric);
        let mut rows = vec![["profile", "cases", "count", "p50", "p99", "p99.9", "max"]
            .map(String::from)
            .to_vec()];
        for p in &c.profiles {
            rows.push(vec![
                p.profile.clone(),
                p.cases.len().to_string(),
                p.count.to_string(),
                us(p.p50_ns),
                us(p.p99_ns),
                us(p.p99_9_ns),
                us(p.max_ns),
            ]);
        }
        out.push_str(&align_left(&rows, &[0]));
    }
    out
}

/// A signed difference in us: `+12.3`, `-4.0`, `0.0`; `-` when a side lacks the figure.
pub fn signed_us(v: Option<i64>) -> String {
    match v {
        Some(v) if v > 0 => format!("+{}", us_1(v)),
        Some(v) => us_1(v),
        None => "-".into(),
    }
}

/// `text` broken into lines of at most `width` characters (at spaces).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for w in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + w.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(w);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The "ROS 2 layer" rows of a run (its part of [`ros2_layer`]): per pair the case, the
/// `ros2` row, the direct DDS row and ros2 minus the direct DDS (count, lost, p50, p99,
/// p99.9, max), then what the difference contains; `ros2` streams left without a
/// counterpart after them. One line when no stream could be paired; empty when the run has
/// no `ros2` stream on a DDS rtlab drives.
pub fn ros2_layer_text(layer: &Ros2Layer<'_>) -> String {
    let mut out = String::new();
    if layer.pairs.is_empty() {
        if let Some(line) = layer.nothing_paired() {
            let _ = writeln!(out, "\nROS 2 layer: {line}");
        }
        return out;
    }
    let _ = writeln!(
        out,
        "\nROS 2 layer: what rcl + the RMW + the type support add to the DDS underneath (us)"
    );
    for l in wrap(DEFINITION, 100) {
        let _ = writeln!(out, "{l}");
    }
    let mut rows =
        vec![["side", "count", "lost", "p50", "p99", "p99.9", "max"].map(String::from).to_vec()];
    for p in &layer.pairs {
        for side in [&p.ros2, &p.direct] {
            let s = side.stream;
            rows.push(vec![
                format!("  {} ({})", side.name(), side.place()),
                s.stats.count.to_string(),
                lost_of(s),
                us(s.stats.p50_ns),
                us(s.stats.p99_ns),
                us(s.stats.p99_9_ns),
                us(s.stats.max_ns),
            ]);
        }
        rows.push(vec![
            format!("  ros2 - {}", p.direct.transport()),
            String::new(),
            String::new(),
            signed_us(p.diff(|s| s.p50_ns)),
            signed_us(p.diff(|s| s.p99_ns)),
            signed_us(p.diff(|s| s.p99_9_ns)),
            signed_us(p.diff(|s| s.max_ns)),
        ]);
    }
    let table = align_left(&rows, &[0]);
    let lines: Vec<&str> = table.lines().collect();
    let _ = writeln!(out, "{}", lines[0]);
    for (i, p) in layer.pairs.iter().enumerate() {
        let _ = writeln!(out, "{}", p.label);
        for l in &lines[1 + 3 * i..4 + 3 * i] {
            let _ = writeln!(out, "{l}");
        }
        for n in &p.notes {
            let _ = writeln!(out, "  note: {n}");
        }
    }
    for u in &layer.unpaired {
        let _ = writeln!(out, "{}", u.line());
    }
    out
}

/// Environment fields whose value differs between `a` (the run's) and `b` (the case's).
pub fn env_diff(a: &Environment, b: &Environment) -> Vec<(String, String, String)> {
    let (Ok(serde_json::Value::Object(va)), Ok(serde_json::Value::Object(vb))) =
        (serde_json::to_value(a), serde_json::to_value(b))
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (k, x) in &vb {
        let y = va.get(k).cloned().unwrap_or(serde_json::Value::Null);
        if &y != x {
            out.push((k.clone(), y.to_string(), x.to_string()));
        }
    }
    out
}

/// One line describing the machine.
pub fn machine_line(e: &Environment) -> String {
    format!(
        "{}{} · kernel {} · preemption {}{} · PREEMPT_RT {} · HZ {} · {} · CPUs {} · {}",
        e.hostname,
        match e.arch_said() {
            a if a.is_empty() => a,
            a => format!(" · {a}"),
        },
        e.kernel_release,
        e.preemption_model,
        if e.preempt_dynamic { " (dynamic)" } else { "" },
        if e.preempt_rt { "yes" } else { "no" },
        e.hz.map(|h| h.to_string()).unwrap_or_else(|| "?".into()),
        e.virtualization.as_deref().unwrap_or("bare metal"),
        e.cpus_online,
        e.cpu_model
    )
}

/// The run's verdict, what helps (per probe x load, each profile's verdict) and the one
/// sentence to act on: the first thing a run's report says.
pub fn verdict_text(run: &Run) -> String {
    let v = run_verdict(run);
    let mut out = format!("\nVerdict: {}\n", v.headline());
    let helps = v.helps_lines();
    if !helps.is_empty() {
        out.push_str("What helps (each profile, per probe and load):\n");
        for l in helps {
            for (i, w) in wrap(&l, 98).into_iter().enumerate() {
                let _ = writeln!(out, "{}{w}", if i == 0 { "  " } else { "      " });
            }
        }
    }
    for (i, w) in wrap(&format!("So: {}", v.remedy()), 100).into_iter().enumerate() {
        let _ = writeln!(out, "{}{w}", if i == 0 { "" } else { "    " });
    }
    out
}

/// The run's warnings, each code once with the cases it applies to and the first case's
/// message; empty when no case warned.
pub fn warnings_text(run: &Run, warned: &[RunWarning]) -> String {
    if warned.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\nWarnings (each once; a case's own message in its section where it differs)\n",
    );
    let measured = measured_cases(run);
    for w in warned {
        let _ = writeln!(out, "  - {} ({}): {}", w.code, w.cases_text(measured), w.message);
    }
    out
}

/// A case's warnings: the codes the run's list says in the same words, then each one whose
/// message is the case's own.
fn case_warnings_text(warned: &[RunWarning], ws: &[rtlab_core::schema::Warning]) -> String {
    if ws.is_empty() {
        return "warnings: none\n".into();
    }
    let (codes, own) = crate::model::split_warnings(warned, ws);
    let mut out = String::new();
    if !codes.is_empty() {
        let _ = writeln!(out, "warnings: {} (the run's Warnings say them)", codes.join(", "));
    }
    if !own.is_empty() {
        let _ = writeln!(out, "{}", if codes.is_empty() { "warnings:" } else { "and:" });
        for w in own {
            let _ = writeln!(out, "  - {}: {}", w.code, w.message);
        }
    }
    out
}

/// The terminal report of the runs.
pub fn render_terminal(runs: &[Run], color: bool) -> String {
    let mut out = String::new();
    let layer = ros2_layer(runs);
    for run in runs {
        let i = &run.info;
        let _ = writeln!(
            out,
            "Run {} · {} ({}) · {} · started {}{}",
            run.id,
            i.scenario,
            i.source,
            run.status.name(),
            i.started_at,
            run.finished_at.as_deref().map(|f| format!(" · finished {f}")).unwrap_or_default()
        );
        let _ = writeln!(out, "Machine: {}", machine_line(&i.environment));
        let _ = writeln!(
            out,
            "rtlab {} · scale {} · {}",
            i.tool_version,
            i.scale,
            i.command_line.join(" ")
        );
        out.push_str(&verdict_text(run));
        let _ = writeln!(out, "\nCases ({})", run.cases.len());
        out.push_str(&studies_table(run));
        out.push_str(&crate::gates::gates_text(run));
        let warned = run_warnings(run);
        out.push_str(&warnings_text(run, &warned));
        let cost = crate::cost::cost_table(run);
        if !cost.is_empty() {
            let _ = writeln!(out, "\nCost");
            out.push_str(&cost);
        }
        out.push_str(&profiles_compared(run));
        out.push_str(&crate::noise::pivots_text(run));
        out.push_str(&ros2_layer_text(&layer.of_run(run.id)));
        let verdict = run_verdict(run);
        for (c, v) in run.cases.iter().zip(&verdict.cases) {
            let (st, why) = status(c);
            let _ = writeln!(out, "\n== Case {}: {} [{}]", c.index, c.name, v.word());
            let _ = writeln!(
                out,
                "probe {} · load {} · profile {} · {} · repetition {}",
                c.probe,
                c.load,
                c.profile,
                if c.params.is_empty() { "no params".into() } else { params_text(c) },
                c.repetition
            );
            if !why.is_empty() {
                let _ =
                    writeln!(out, "{}: {why}", if st == "skipped" { "reason" } else { "error" });
            }
            let Some(d) = &c.document else {
                let _ = writeln!(out, "(nothing measured)");
                continue;
            };
            let rows: Vec<Row<'_>> = d
                .streams
                .iter()
                .map(|s| Row { label: format!("{} ({})", s.name, s.metric), summary: &s.stats })
                .collect();
            out.push_str(&stats_table(&rows, color));
            let noise = crate::summary::noise::rows(d);
            if !noise.is_empty() {
                let _ = writeln!(out, "noise per CPU:");
                out.push_str(&crate::summary::noise::table(&noise));
            }
            out.push_str(&crate::trace::sections(d));
            let diff = env_diff(&i.environment, &d.environment);
            if diff.is_empty() {
                let _ = writeln!(out, "environment: as the run's");
            } else {
                let _ = writeln!(
                    out,
                    "environment: as the run's except {}",
                    diff.iter()
                        .map(|(k, a, b)| format!("{k} {a} -> {b}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            out.push_str(&case_warnings_text(&warned, &d.warnings));
            if let Some(ev) = &d.evidence {
                out.push_str(&evidence_text(ev, headline(c)));
            }
            if let Some(f) = &d.far {
                for l in f.summary() {
                    let _ = writeln!(out, "{l}");
                }
            }
            if let Some(cost) = &d.cost {
                for l in crate::cost::cost_lines(cost) {
                    let _ = writeln!(out, "{l}");
                }
            }
        }
        out.push('\n');
    }
    out
}

/// The spike's explanation and the worst window of the headline stream with its counters.
fn evidence_text(
    ev: &rtlab_core::evidence::Evidence,
    h: Option<&rtlab_core::schema::Stream>,
) -> String {
    let mut out = String::new();
    if let Some(sp) = &ev.spike {
        match (sp.index, sp.value_ns) {
            (Some(i), Some(v)) => {
                let of = sp.stream.as_deref().map(|s| format!("{s} ")).unwrap_or_default();
                let _ = writeln!(
                    out,
                    "spike (first above {} us): {of}sample {i}, {} us",
                    us_1(sp.threshold_ns),
                    us_1(v)
                );
                for l in &sp.attribution {
                    let _ = writeln!(out, "  - {l}");
                }
            }
            _ => {
                let _ = writeln!(out, "spike: none above {} us", us_1(sp.threshold_ns));
            }
        }
    }
    if let (Some(k), Some(h)) = (&ev.counters, h) {
        if let Some((i, max, Some(c))) = k.worst(&h.windows, 1).into_iter().next() {
            let _ = writeln!(
                out,
                "worst window of {}: {i}, max {} us; {}",
                h.name,
                us_1(max),
                c.describe()
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_architecture_is_said_and_an_emulator_named() {
        let e = |a: &str, k: &str| Environment {
            architecture: a.into(),
            kernel_architecture: k.into(),
            ..Default::default()
        };
        assert_eq!(e("x86_64", "x86_64").arch_said(), "x86_64");
        assert_eq!(e("aarch64", "").arch_said(), "aarch64");
        assert_eq!(e("aarch64", "x86_64").arch_said(), "aarch64 emulated on x86_64");
        // a result written before the architecture was recorded: not said
        assert_eq!(e("", "").arch_said(), "");
        assert!(machine_line(&e("", "")).starts_with(" · kernel "));
        assert!(machine_line(&e("aarch64", "aarch64")).starts_with(" · aarch64 · kernel "));
    }
}
