//! A trace case in the HTML report: the application's graph drawn (nodes in columns by their
//! depth from the sources, an arrow per edge labelled with its topic and median latency),
//! the edges' table, each chain's hops and worst messages.

use super::{ns, num, text};
use crate::svg::esc;
use rtlab_core::run::Run;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The graph: nodes (by name) in columns by their longest path from a node nothing feeds.
pub fn graph_svg(t: &Value) -> String {
    let edges = t["edges"].as_array().map(Vec::as_slice).unwrap_or_default();
    let mut depth: BTreeMap<&str, usize> = BTreeMap::new();
    for e in edges {
        depth.entry(text(&e["publisher"])).or_insert(0);
        depth.entry(text(&e["subscription"])).or_insert(0);
    }
    // longest path, bounded by the node count (a cycle stops growing there)
    for _ in 0..depth.len() {
        for e in edges {
            let from = depth[text(&e["publisher"])];
            let to = depth.get_mut(text(&e["subscription"])).expect("every node has a depth");
            if *to < from + 1 && from + 1 < 16 {
                *to = from + 1;
            }
        }
    }
    let mut rows: BTreeMap<usize, usize> = BTreeMap::new();
    let mut at: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (n, d) in &depth {
        let r = rows.entry(*d).or_insert(0);
        at.insert(n, (*d, *r));
        *r += 1;
    }
    let (w, h, gx, gy) = (180usize, 36usize, 120usize, 30usize);
    let cols = depth.values().max().map_or(0, |m| m + 1);
    let tall = rows.values().max().copied().unwrap_or(0);
    let (width, height) = (cols * (w + gx) + 20, tall * (h + gy) + 20);
    let xy = |n: &str| {
        let (c, r) = at[n];
        (10 + c * (w + gx), 10 + r * (h + gy))
    };
    let mut o = format!(
        "<svg class=\"tracegraph\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\"><defs><marker id=\"arrow\" markerWidth=\"8\" markerHeight=\"8\" refX=\"8\" refY=\"4\" orient=\"auto\"><path d=\"M0,0 L8,4 L0,8 z\"/></marker></defs>"
    );
    for e in edges {
        let (x1, y1) = xy(text(&e["publisher"]));
        let (x2, y2) = xy(text(&e["subscription"]));
        let (x1, y1, x2, y2) = (x1 + w, y1 + h / 2, x2, y2 + h / 2);
        let _ = write!(
            o,
            "<line x1=\"{x1}\" y1=\"{y1}\" x2=\"{x2}\" y2=\"{y2}\" stroke=\"#555\" marker-end=\"url(#arrow)\"/><text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{} {}</text>",
            (x1 + x2) / 2,
            (y1 + y2) / 2 - 4,
            esc(text(&e["topic"])),
            esc(&ns(&e["latency"]["p50_ns"]))
        );
    }
    for n in depth.keys() {
        let (x, y) = xy(n);
        let _ = write!(
            o,
            "<rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" rx=\"4\" fill=\"#eef3fa\" stroke=\"#3b6fb6\"/><text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">{}</text>",
            x + w / 2,
            y + h / 2 + 4,
            esc(n)
        );
    }
    o.push_str("</svg>");
    o
}

fn row(cells: &[String]) -> String {
    let mut o = String::from("<tr>");
    for c in cells {
        let _ = write!(o, "<td>{}</td>", esc(c));
    }
    o.push_str("</tr>");
    o
}

fn nodes_table(t: &Value) -> String {
    let mut o = String::from("<table class=\"tracenodes\"><tr><th>node</th><th>pid</th><th>in</th><th>out</th><th>taken</th><th>published</th><th>inside p50</th><th>inside max</th></tr>");
    let topics =
        |v: &Value| v.as_array().into_iter().flatten().map(text).collect::<Vec<_>>().join(" ");
    for n in t["nodes"].as_array().map(Vec::as_slice).unwrap_or_default() {
        o.push_str(&row(&[
            text(&n["name"]).into(),
            match n["host"].as_str() {
                Some(h) => format!("{} on {h}", num(&n["pid"])),
                None => num(&n["pid"]),
            },
            topics(&n["inputs"]),
            topics(&n["outputs"]),
            num(&n["taken"]),
            num(&n["published"]),
            ns(&n["inside"]["p50_ns"]),
            ns(&n["inside"]["max_ns"]),
        ]));
    }
    o.push_str("</table>");
    o
}

fn edges_table(t: &Value) -> String {
    let mut o = String::from("<table class=\"traceedges\"><tr><th>topic</th><th>publisher</th><th>subscription</th><th>taken</th><th>lost</th><th>before first</th><th>after last</th><th>p50</th><th>p99</th><th>max</th></tr>");
    for e in t["edges"].as_array().map(Vec::as_slice).unwrap_or_default() {
        o.push_str(&row(&[
            text(&e["topic"]).into(),
            text(&e["publisher"]).into(),
            text(&e["subscription"]).into(),
            num(&e["taken"]),
            num(&e["lost"]),
            num(&e["before_first"]),
            num(&e["after_last"]),
            ns(&e["latency"]["p50_ns"]),
            ns(&e["latency"]["p99_ns"]),
            ns(&e["latency"]["max_ns"]),
        ]));
    }
    o.push_str("</table>");
    o
}

fn chains_html(t: &Value) -> String {
    let mut o = String::new();
    for c in t["chains"].as_array().map(Vec::as_slice).unwrap_or_default() {
        let topics: Vec<&str> = c["topics"].as_array().into_iter().flatten().map(text).collect();
        let e = &c["end_to_end"];
        let _ = write!(
            o,
            "<h4>chain {}</h4><p class=\"env\">{} messages, {} incomplete; end to end p50 {}, p99 {}, max {}</p><table class=\"tracechain\"><tr><th>hop</th><th>mean</th><th>p50</th><th>p99</th><th>max</th></tr>",
            esc(&topics.join(" → ")),
            num(&c["messages"]),
            num(&c["incomplete"]),
            esc(&ns(&e["p50_ns"])),
            esc(&ns(&e["p99_ns"])),
            esc(&ns(&e["max_ns"]))
        );
        for h in c["hops"].as_array().map(Vec::as_slice).unwrap_or_default() {
            let s = &h["summary"];
            o.push_str(&row(&[
                text(&h["hop"]).into(),
                ns(&s["mean_ns"]),
                ns(&s["p50_ns"]),
                ns(&s["p99_ns"]),
                ns(&s["max_ns"]),
            ]));
        }
        o.push_str("</table><ul class=\"traceworst\">");
        for w in c["worst"].as_array().map(Vec::as_slice).unwrap_or_default() {
            let hops: Vec<String> = w["hops_ns"].as_array().into_iter().flatten().map(ns).collect();
            let cpus: Vec<String> = w["takes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|k| format!("{} on cpu {}", text(&k["node"]), num(&k["cpu"])))
                .collect();
            let _ = write!(
                o,
                "<li>at {}: {} = {} ({})</li>",
                esc(&ns(&w["at_ns"])),
                esc(&ns(&w["end_to_end_ns"])),
                esc(&hops.join(" + ")),
                esc(&cpus.join(", "))
            );
        }
        o.push_str("</ul>");
    }
    o
}

/// The trace section of a run (empty without a trace case).
pub fn html(run: &Run) -> String {
    let mut o = String::new();
    for c in &run.cases {
        let Some(d) = c.document.as_ref().filter(|d| d.probe == "trace") else { continue };
        let t = &d.config["trace"];
        let _ = write!(
            o,
            "<h3><a href=\"#run{}-case{}\">{}</a></h3><p class=\"env\">{} processes traced, {} publishes, {} takes ({} without their publish)</p>",
            run.id,
            c.index,
            esc(&c.name),
            t["processes"].as_array().map_or(0, Vec::len),
            num(&t["publishes"]),
            num(&t["takes"]),
            num(&t["unjoined_takes"])
        );
        o.push_str(&graph_svg(t));
        o.push_str(&nodes_table(t));
        o.push_str(&edges_table(t));
        o.push_str(&chains_html(t));
        for n in t["notes"].as_array().map(Vec::as_slice).unwrap_or_default() {
            let _ = write!(o, "<p class=\"env\">note: {}</p>", esc(text(n)));
        }
    }
    if o.is_empty() {
        return o;
    }
    format!("<h2>Trace</h2><div class=\"tablebox\">{o}</div>\n")
}
