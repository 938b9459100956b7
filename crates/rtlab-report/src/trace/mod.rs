//! A trace run (`rtlab trace`, `rtlab report` of a trace case): the processes traced, the
//! graph's edges with their latency and losses, each chain with its hops, its worst
//! messages and where they ran, the callbacks, the notes; for the terminal here, for the HTML
//! report in [`html`] (with the graph drawn).
//!
//! Contract: reads the document alone (its streams and `config.trace`, as the trace probe
//! writes them); a figure the document lacks is `-`, never invented.

pub mod html;

use crate::render::{stats_table, Row};
use crate::table::align_left;
use rtlab_core::schema::ResultDocument;
use serde_json::Value;
use std::fmt::Write as _;

/// A duration as the stats tables say it: us below a millisecond, ms below a second.
pub(crate) fn ns(v: &Value) -> String {
    match v.as_i64() {
        None => "-".into(),
        Some(n) if n.abs() < 1_000_000 => format!("{:.1} us", n as f64 / 1e3),
        Some(n) if n.abs() < 1_000_000_000 => format!("{:.2} ms", n as f64 / 1e6),
        Some(n) => format!("{:.3} s", n as f64 / 1e9),
    }
}

pub(crate) fn num(v: &Value) -> String {
    v.as_u64().map(|n| n.to_string()).unwrap_or_else(|| "-".into())
}

pub(crate) fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("-")
}

fn processes(t: &Value, out: &mut String) {
    let list = t["processes"].as_array().map(Vec::as_slice).unwrap_or_default();
    let nodes = t["nodes"].as_array().map(Vec::as_slice).unwrap_or_default();
    let _ = writeln!(out, "processes traced: {}", list.len());
    let mut rows = vec![vec![
        "pid".to_string(),
        "name".into(),
        "nodes".into(),
        "events".into(),
        "dropped".into(),
        "abandoned".into(),
    ]];
    if list.is_empty() {
        return;
    }
    for p in list {
        let pid = p["pid"].as_i64().unwrap_or_default();
        // a far side's process (rtlab trace --far) is said with its host
        let host = p["host"].as_str();
        let names: Vec<&str> = nodes
            .iter()
            .filter(|n| n["pid"].as_i64() == Some(pid) && n["host"].as_str() == host)
            .map(|n| text(&n["name"]))
            .collect();
        rows.push(vec![
            host.map_or_else(|| pid.to_string(), |h| format!("{pid} on {h}")),
            text(&p["comm"]).to_string(),
            if names.is_empty() { "-".into() } else { names.join(" ") },
            num(&p["events"]),
            num(&p["dropped"]),
            num(&p["abandoned"]),
        ]);
        if let Some(why) = p["malformed"].as_str() {
            rows.push(vec![String::new(), format!("ring set aside: {why}")]);
        }
    }
    out.push_str(&align_left(&rows, &[1, 2]));
}

fn nodes(t: &Value, out: &mut String) {
    let list = t["nodes"].as_array().map(Vec::as_slice).unwrap_or_default();
    if list.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "nodes: {} (inside: from a take to the publish that followed it)",
        list.len()
    );
    let mut rows = vec![vec![
        "node".to_string(),
        "in".into(),
        "out".into(),
        "taken".into(),
        "published".into(),
        "inside p50".into(),
        "inside max".into(),
    ]];
    let topics = |v: &Value| {
        let t: Vec<&str> = v.as_array().into_iter().flatten().map(text).collect();
        if t.is_empty() {
            "-".to_string()
        } else {
            t.join(" ")
        }
    };
    for n in list {
        rows.push(vec![
            text(&n["name"]).to_string(),
            topics(&n["inputs"]),
            topics(&n["outputs"]),
            num(&n["taken"]),
            num(&n["published"]),
            ns(&n["inside"]["p50_ns"]),
            ns(&n["inside"]["max_ns"]),
        ]);
    }
    out.push_str(&align_left(&rows, &[0, 1, 2]));
}

fn edges(t: &Value, out: &mut String) {
    let list = t["edges"].as_array().map(Vec::as_slice).unwrap_or_default();
    let _ = writeln!(out, "graph: {} edges (publisher -> subscription)", list.len());
    let mut rows = vec![vec![
        "topic".to_string(),
        "publisher -> subscription".into(),
        "taken".into(),
        "lost".into(),
        "before".into(),
        "after".into(),
        "p50".into(),
        "p99".into(),
        "max".into(),
    ]];
    if list.is_empty() {
        return;
    }
    for e in list {
        // across two hosts' clocks: the measured offset's uncertainty said with it
        let u = e["clock_uncertainty_ns"].as_i64().filter(|&u| u > 0);
        rows.push(vec![
            text(&e["topic"]).to_string(),
            format!(
                "{} -> {}{}",
                text(&e["publisher"]),
                text(&e["subscription"]),
                u.map(|u| format!(" (± {})", ns(&Value::from(u)))).unwrap_or_default()
            ),
            num(&e["taken"]),
            num(&e["lost"]),
            num(&e["before_first"]),
            num(&e["after_last"]),
            ns(&e["latency"]["p50_ns"]),
            ns(&e["latency"]["p99_ns"]),
            ns(&e["latency"]["max_ns"]),
        ]);
    }
    out.push_str(&align_left(&rows, &[0, 1]));
}

fn chains(t: &Value, out: &mut String) {
    for c in t["chains"].as_array().map(Vec::as_slice).unwrap_or_default() {
        let topics: Vec<&str> = c["topics"].as_array().into_iter().flatten().map(text).collect();
        let e2e = &c["end_to_end"];
        let _ = writeln!(
            out,
            "chain {}: {} messages, {} incomplete; end to end p50 {}, p99 {}, max {}",
            topics.join(" -> "),
            num(&c["messages"]),
            num(&c["incomplete"]),
            ns(&e2e["p50_ns"]),
            ns(&e2e["p99_ns"]),
            ns(&e2e["max_ns"])
        );
        let mut rows = vec![vec![
            "  hop".to_string(),
            "mean".into(),
            "p50".into(),
            "p99".into(),
            "max".into(),
        ]];
        for h in c["hops"].as_array().map(Vec::as_slice).unwrap_or_default() {
            let s = &h["summary"];
            rows.push(vec![
                format!("  {}", text(&h["hop"])),
                ns(&s["mean_ns"]),
                ns(&s["p50_ns"]),
                ns(&s["p99_ns"]),
                ns(&s["max_ns"]),
            ]);
        }
        out.push_str(&align_left(&rows, &[0]));
        for w in c["worst"].as_array().map(Vec::as_slice).unwrap_or_default() {
            let hops: Vec<String> = w["hops_ns"].as_array().into_iter().flatten().map(ns).collect();
            let wheres: Vec<String> = w["takes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|k| {
                    let cpu =
                        k["cpu"].as_u64().map(|c| c.to_string()).unwrap_or_else(|| "?".into());
                    let host = k["host"].as_str().map(|h| format!(" of {h}")).unwrap_or_default();
                    format!(
                        "{} took {} on cpu {cpu}{host} (tid {})",
                        text(&k["node"]),
                        text(&k["topic"]),
                        num(&k["tid"])
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "  worst at {}: {} = {}; {}",
                ns(&w["at_ns"]),
                ns(&w["end_to_end_ns"]),
                hops.join(" + "),
                wheres.join(", ")
            );
        }
    }
}

/// The far side's clock (`rtlab trace --far`): one with this host's, or its offset measured
/// over the link before and after the trace.
fn clock(t: &Value, out: &mut String) {
    let c = &t["clock"];
    if c.is_null() {
        return;
    }
    let (b, a) = (&c["before"], &c["after"]);
    let measured = |m: &Value| format!("{} ± {}", ns(&m["offset_ns"]), ns(&m["uncertainty_ns"]));
    if c["clocks"] == "one-host" {
        let _ = writeln!(
            out,
            "clocks: one (the far side is a namespace of this host); as a check, its offset measured over the link: {}, then {}",
            measured(b),
            measured(a)
        );
    } else {
        let _ = writeln!(
            out,
            "clocks: two; the far one's offset measured over the link: {} before, {} after (drift {}): a latency across them is ± {}",
            measured(b),
            measured(a),
            ns(&c["drift_ns"]),
            ns(&c["uncertainty_ns"])
        );
    }
}

/// The trace document for the terminal.
pub fn render(doc: &ResultDocument, color: bool) -> String {
    let rows: Vec<Row> =
        doc.streams.iter().map(|s| Row { label: s.name.clone(), summary: &s.stats }).collect();
    let table = if rows.is_empty() { String::new() } else { stats_table(&rows, color) };
    body(doc, &table)
}

/// A trace case's own sections in `rtlab report` (its streams' table is the report's).
pub fn sections(doc: &ResultDocument) -> String {
    if doc.probe != "trace" {
        return String::new();
    }
    body(doc, "")
}

fn body(doc: &ResultDocument, table: &str) -> String {
    let t = &doc.config["trace"];
    let mut out = String::new();
    let ended = &t["ended"];
    let _ = writeln!(
        out,
        "the trace ended {} ({}); {} publishes, {} takes, {} takes without their publish",
        match text(&ended["by"]) {
            "exit" => "by itself",
            "duration" => "when the duration passed",
            "stop" => "when rtlab was stopped",
            _ => "-",
        },
        text(&ended["status"]),
        num(&t["publishes"]),
        num(&t["takes"]),
        num(&t["unjoined_takes"])
    );
    processes(t, &mut out);
    clock(t, &mut out);
    nodes(t, &mut out);
    edges(t, &mut out);
    out.push_str(table);
    chains(t, &mut out);
    let callbacks = t["callbacks"].as_array().map(Vec::as_slice).unwrap_or_default();
    for c in callbacks {
        let d = &c["duration"];
        let _ = writeln!(
            out,
            "callback {} (pid {}{}): {} runs, p50 {}, max {}; from its take: {} runs, p50 {}, max {}",
            c["symbol"].as_str().unwrap_or("(unnamed)"),
            num(&c["pid"]),
            c["host"].as_str().map(|h| format!(" on {h}")).unwrap_or_default(),
            num(&d["count"]),
            ns(&d["p50_ns"]),
            ns(&d["max_ns"]),
            num(&c["dispatch"]["count"]),
            ns(&c["dispatch"]["p50_ns"]),
            ns(&c["dispatch"]["max_ns"])
        );
    }
    for n in t["notes"].as_array().map(Vec::as_slice).unwrap_or_default() {
        let _ = writeln!(out, "note: {}", text(n));
    }
    out
}
