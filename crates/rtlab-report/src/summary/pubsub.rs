//! `rtlab pubsub`'s tables: the message latency per subscriber, the publisher's send
//! lateness, the counters of every stream (published, lost, late, duplicates, out of order,
//! overruns), the fan-out's spread, and what the QoS became on the transport.

use crate::render::{stats_table, Row};
use rtlab_core::schema::Stream;
use std::fmt::Write as _;

/// One case of a pub/sub sweep.
pub struct PubsubCase<'a> {
    /// `64B 100hz n1`: its payload, rate and subscriber count.
    pub name: String,
    /// One per subscriber, in subscriber order.
    pub streams: &'a [Stream],
    /// The publisher's own send lateness (None: the case did not run).
    pub publisher: Option<&'a Stream>,
    pub published: u64,
    pub overruns: u64,
    /// The fan-out: p50 of the slowest subscriber - p50 of the fastest (ns), the fastest
    /// and the slowest (None with fewer than 2).
    pub spread: Option<(i64, usize, usize)>,
    /// What the case cost (its measured window), when it was measured.
    pub cost: Option<&'a rtlab_core::cost::CostWindow>,
}

/// One QoS policy: what was asked, what the transport made of it, and how faithful that is.
pub struct QosLine {
    pub what: &'static str,
    pub asked: String,
    pub native: String,
    pub fidelity: String,
}

/// A pub/sub run as its tables show it.
pub struct PubsubSummary<'a> {
    /// What the latency table measures (`message latency`) and its exact definition.
    pub metric: String,
    pub definition: String,
    /// The definition of the publisher's send lateness.
    pub send_lateness: &'static str,
    pub cases: Vec<PubsubCase<'a>>,
    pub qos: Vec<QosLine>,
    pub notes: &'a [String],
}

/// A stream's row label. A case's subscriber: `64B 100hz n1 sub0`; a role by hand has no case
/// (a subscriber by hand does not know the publisher's payload or how many subscribers it
/// has): its role and topic, `sub joint_cmd`. Never panics on a missing label: the labels of
/// every by-hand role, and of results from other versions, differ.
pub fn stream_label(s: &Stream) -> String {
    let l = |k: &str| s.labels.get(k).map(String::as_str);
    if let (Some(role), Some(topic)) = (l("role"), l("topic")) {
        return format!("{role} {topic}");
    }
    let parts: Vec<String> = [
        l("payload_bytes").map(|v| format!("{v}B")),
        l("rate").map(str::to_string),
        l("subscribers").map(|v| format!("n{v}")),
        l("subscriber").map(|v| format!("sub{v}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if parts.is_empty() {
        s.name.clone()
    } else {
        parts.join(" ")
    }
}

/// The tables, counters and QoS lines (`color`: ANSI emphasis in the tables).
pub fn render(s: &PubsubSummary<'_>, color: bool) -> String {
    let mut out = String::from("\n");
    let rows: Vec<Row> = s
        .cases
        .iter()
        .flat_map(|c| c.streams.iter())
        .map(|st| Row { label: stream_label(st), summary: &st.stats })
        .collect();
    // a pong or a publisher by hand measures no message latency here: no empty table
    if !rows.is_empty() {
        let _ = writeln!(out, "{} ({})", s.metric, s.definition);
        out.push_str(&stats_table(&rows, color));
        out.push('\n');
    }
    if s.cases.iter().any(|c| c.publisher.is_some()) {
        let _ = writeln!(out, "publisher send lateness ({})", s.send_lateness);
    }
    let pubs: Vec<Row> = s
        .cases
        .iter()
        .filter_map(|c| c.publisher.map(|p| Row { label: c.name.clone(), summary: &p.stats }))
        .collect();
    if !pubs.is_empty() {
        out.push_str(&stats_table(&pubs, color));
        out.push('\n');
    }
    if !rows.is_empty() {
        let _ = writeln!(
            out,
            "{:<28} {:>9} {:>7} {:>7} {:>5} {:>5} {:>9}",
            "counters", "published", "lost", "late", "dup", "ooo", "overruns"
        );
    }
    for c in &s.cases {
        counters(&mut out, c);
    }
    cost_table(&mut out, s);
    out.push('\n');
    for q in &s.qos {
        let _ = writeln!(out, "QoS {} {} -> {} ({})", q.what, q.asked, q.native, q.fidelity);
    }
    for n in s.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

/// The cost of each case (its window): CPU of this side's threads, CPU per message, the
/// measuring threads' page faults and involuntary switches.
fn cost_table(out: &mut String, s: &PubsubSummary<'_>) {
    if !s.cases.iter().any(|c| c.cost.is_some()) {
        return;
    }
    let mut rows = vec![[
        "cost",
        "messages",
        "cpu user ms",
        "cpu sys ms",
        "cpus",
        "cpu/msg us",
        "faults",
        "preempted",
    ]
    .map(String::from)
    .to_vec()];
    for c in &s.cases {
        let Some(w) = c.cost else { continue };
        let mut cells = crate::cost::window_cells(w, None);
        cells.pop(); // rss: the process's, not the case's
        cells[0] = c.name.clone();
        rows.push(cells);
    }
    out.push('\n');
    out.push_str(&crate::table::align_left(&rows, &[0]));
    out.push_str("(cost: CPU of every thread of this side (rtlab, the middleware, role processes) over the case's window, user and system; cpus = CPU time / window; cpu/msg = that CPU / messages published; faults and preempted = page faults and involuntary context switches of the measuring threads)\n");
}

/// A case's counter lines: one per subscriber, then its fan-out.
fn counters(out: &mut String, c: &PubsubCase<'_>) {
    for st in c.streams {
        let stats = &st.stats;
        // a subscriber by hand cannot know what the publisher sent or skipped: its
        // losses are counted between the first and the last message it got
        let (published, overruns) = match st.labels.get("published") {
            Some(_) => (c.published.to_string(), c.overruns.to_string()),
            None => ("-".to_string(), "-".to_string()),
        };
        let _ = writeln!(
            out,
            "{:<28} {:>9} {:>7} {:>7} {:>5} {:>5} {:>9}",
            stream_label(st),
            published,
            stats.lost.unwrap_or(0),
            stats.late.unwrap_or(0),
            stats.duplicates.unwrap_or(0),
            stats.out_of_order.unwrap_or(0),
            overruns
        );
        if let (Some(f), Some(l)) = (st.labels.get("first_seq"), st.labels.get("last_seq")) {
            let _ = writeln!(
                out,
                "  {}: messages {f} to {l} (joined the publisher's stream at {f}; lost = missing in between)",
                stream_label(st)
            );
        }
    }
    if let Some((spread, fastest, slowest)) = c.spread {
        let _ = writeln!(
            out,
            "  fan-out {}: p50 spread {} us (fastest sub{fastest}, slowest sub{slowest})",
            c.name,
            rtlab_core::units::us_1(spread)
        );
    }
}
