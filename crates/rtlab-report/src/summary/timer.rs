//! `rtlab timer`'s tables: the machine's line, the latency per thread, the cycle jitter, the
//! ROS timer model's anchor error, where each maximum fell, and (asked) a histogram each.

use crate::render::{stats_table, terminal_histogram, Row};
use rtlab_core::schema::ResultDocument;
use rtlab_core::units::{us_1, Nanos};
use std::fmt::Write as _;

/// The tables of a timer run: `metric` and `definition` say what its main streams measure;
/// `histograms` adds a terminal histogram of each.
pub fn render(
    doc: &ResultDocument,
    metric: &str,
    definition: &str,
    histograms: bool,
    color: bool,
) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "{}", environment_line(doc));
    let _ = writeln!(text);
    let mains: Vec<_> = doc.streams.iter().filter(|s| !s.name.ends_with(".jitter")).collect();
    let _ = writeln!(text, "{metric} ({definition})");
    let rows: Vec<Row> =
        mains.iter().map(|s| Row { label: s.name.clone(), summary: &s.stats }).collect();
    text.push_str(&stats_table(&rows, color));
    let jit: Vec<_> = doc.streams.iter().filter(|s| s.name.ends_with(".jitter")).collect();
    if !jit.is_empty() {
        let _ = writeln!(text);
        let _ = writeln!(text, "cycle jitter (P_k = t_(k+1) - t_k - T)");
        let rows: Vec<Row> =
            jit.iter().map(|s| Row { label: s.name.clone(), summary: &s.stats }).collect();
        text.push_str(&stats_table(&rows, color));
    }
    if let Some(a) = doc.streams.iter().find(|s| s.name.ends_with(".anchor")) {
        let _ = writeln!(text);
        let _ = writeln!(text, "{}: anchor error ({})", a.name, a.definition);
    }
    if let Some(e) = doc.streams.iter().find(|s| s.name.ends_with(".expiry")) {
        let _ = writeln!(text);
        let _ = writeln!(text, "{}: expiry error ({})", e.name, e.definition);
    }
    for s in &mains {
        if let (Some(max), Some(idx), Some(at)) =
            (s.stats.max_ns, s.stats.max_index, s.stats.max_at_ns)
        {
            let _ = writeln!(
                text,
                "{}: max {} us at sample {} ({} after start)",
                s.name,
                us_1(max),
                idx,
                Nanos(at)
            );
        }
    }
    if histograms {
        for s in &mains {
            let _ = writeln!(text, "\n{} histogram", s.name);
            text.push_str(&terminal_histogram(&s.histogram, 20, 40));
        }
    }
    // roscpp modes: where roscpp's threads ran (rtlab-lab's timer probe writes these)
    let notes = doc.config.get("notes").and_then(|n| n.as_array());
    for n in notes.into_iter().flatten().filter_map(|n| n.as_str()) {
        let _ = writeln!(text, "note: {n}");
    }
    text
}

/// The machine a timer ran on, in one line: kernel and preemption, HZ, timers,
/// virtualization, idle states, and what rtlab held.
pub fn environment_line(doc: &ResultDocument) -> String {
    let e = &doc.environment;
    format!(
        "kernel {} (preempt {}{}), HZ {}, high-res timers {}, {}, cpuidle {}, cpu_dma_latency {}, memory {}",
        e.kernel_release,
        e.preemption_model,
        if e.preempt_dynamic { ", dynamic" } else { "" },
        e.hz.map(|h| h.to_string()).unwrap_or_else(|| "?".into()),
        match e.high_res_timers {
            Some(true) => "on",
            Some(false) => "off",
            None => "?",
        },
        e.virtualization.as_deref().map(|v| format!("virtualized ({v})")).unwrap_or_else(|| "bare metal".into()),
        e.cpuidle_driver.as_deref().unwrap_or("none"),
        e.cpu_dma_latency_us.map(|v| format!("held at {v}us")).unwrap_or_else(|| "not held".into()),
        if e.memory_locked { "locked" } else { "not locked" },
    )
}
