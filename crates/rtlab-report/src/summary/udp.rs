//! `rtlab udp ping` and `rtlab udp reflect`'s reports: the studies' table (S1: min, avg,
//! max, missed deadlines, packet loss), the percentiles, the full accounting of every
//! datagram, what the socket and thread really had, and the reflector's own counts.

use crate::render::{stats_table, terminal_histogram, Row};
use rtlab_core::schema::{ResultDocument, Stream};
use rtlab_core::units::{format_duration_exact, us_1, Nanos};
use std::fmt::Write as _;

/// One run (one ping) as a reflector saw it.
pub struct RunCounts {
    pub run_id: u64,
    pub requests: u64,
    pub answered: u64,
    pub dropped: u64,
    pub forward_lost: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
    pub highest_seq: Option<u64>,
}

/// What a reflector counted.
pub struct ReflectorCounts {
    pub local_addr: String,
    pub received: u64,
    pub answered: u64,
    pub hellos: u64,
    pub dropped: u64,
    pub malformed: u64,
    pub foreign: u64,
    pub send_errors: u64,
    pub runs: Vec<RunCounts>,
}

/// Every request of a ping, accounted for.
pub struct PingCounts {
    pub sent: u64,
    pub samples: u64,
    pub missed: u64,
    pub lost: u64,
    pub late: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
    pub malformed: u64,
    pub stale: u64,
    pub send_errors: u64,
    pub receive_errors: u64,
}

/// What the ping's socket and thread really had (None: not read back).
pub struct SocketSeen {
    pub local_addr: String,
    pub so_priority: Option<i32>,
    pub tos: Option<i32>,
    pub busy_poll_us: Option<i32>,
    pub rcvbuf: Option<i32>,
    pub sndbuf: Option<i32>,
    pub policy: Option<&'static str>,
    pub priority: i32,
    pub cpus: Vec<usize>,
}

/// A ping run as its report shows it.
pub struct PingSummary<'a> {
    pub doc: &'a ResultDocument,
    /// What the RTT is, exactly.
    pub rtt_definition: &'static str,
    pub deadline_ns: i64,
    pub loss_timeout_ns: i64,
    /// Overruns of the periodic grid (None: pingpong, which has no grid).
    pub overruns: Option<u64>,
    pub counts: PingCounts,
    pub socket: SocketSeen,
    /// The in-process reflector's counts (`--pair`, a scenario's pair).
    pub reflector: Option<ReflectorCounts>,
    /// `tc -s qdisc` of the client's veth end when there was a bottleneck.
    pub qdisc: Option<&'a str>,
}

/// The XDP path of a stream in one line (None: the socket path).
pub fn xdp_line(s: &Stream) -> Option<String> {
    let l = &s.labels;
    if l.get("path").map(String::as_str) != Some("xdp") {
        return None;
    }
    let g = |k: &str| l.get(k).map(String::as_str).unwrap_or("?");
    Some(format!(
        "xdp on {}: program attached {}, socket in {} mode on queue {}; frames dropped at the socket {}, frames that were not datagrams {}",
        g("xdp_dev"),
        g("xdp_attach"),
        g("xdp_copy"),
        g("xdp_queue"),
        g("xdp_rx_dropped"),
        g("xdp_malformed_frames")
    ))
}

/// The reflector's counts, then its turnaround table when it measured any.
pub fn reflector(c: &ReflectorCounts, s: &Stream) -> String {
    let mut out = String::new();
    if let Some(x) = xdp_line(s) {
        let _ = writeln!(out, "{x}");
    }
    let _ = writeln!(
        out,
        "reflector on {}: received {}, answered {} ({} hellos), dropped on purpose {}, malformed {}, foreign {}, send errors {}",
        c.local_addr, c.received, c.answered, c.hellos, c.dropped, c.malformed, c.foreign, c.send_errors
    );
    for r in &c.runs {
        let _ = writeln!(
            out,
            "  run {:016x}: requests {}, answered {}, dropped {}, forward lost {}, duplicates {}, out of order {}, highest seq {}",
            r.run_id,
            r.requests,
            r.answered,
            r.dropped,
            r.forward_lost,
            r.duplicates,
            r.out_of_order,
            r.highest_seq.map(|h| h.to_string()).unwrap_or_else(|| "-".into())
        );
    }
    if s.stats.count > 0 {
        let _ = writeln!(out, "turnaround (reply sent - request received, reflector clock)");
        out.push_str(&stats_table(&[Row { label: "reflector".into(), summary: &s.stats }], false));
    }
    out
}

/// The whole ping report: the studies' table and the accounting, a histogram of the RTT
/// (`histogram`), the reflector's counts, a far reflector's turnaround and far side, and the
/// bottleneck's qdisc. `far_lines`: the far side in a few lines (empty: none).
pub fn ping(s: &PingSummary<'_>, histogram: bool, far_lines: &str, color: bool) -> String {
    let doc = s.doc;
    let mut out = ping_report(s, color);
    if histogram {
        let _ = writeln!(out, "\nRTT histogram");
        out.push_str(&terminal_histogram(&doc.streams[0].histogram, 20, 40));
    }
    let reflector_stream = || doc.streams.iter().find(|st| st.name == "reflector");
    if let Some(r) = &s.reflector {
        out.push('\n');
        out.push_str(&reflector(r, reflector_stream().expect("reflector stream")));
    }
    if doc.far.is_some() {
        if let Some(r) = reflector_stream() {
            let _ = writeln!(
                out,
                "\nfar reflector turnaround (reply sent - request received, its clock)"
            );
            let row = Row { label: "reflector".into(), summary: &r.stats };
            out.push_str(&stats_table(&[row], color));
        }
        let _ = write!(out, "\n{far_lines}");
    }
    if let Some(q) = s.qdisc {
        let _ = writeln!(out, "\nqdisc on the client's veth end:\n{}", q.trim_end());
    }
    out
}

/// The studies' table (S1: Min / Avg / Max / Missed deadlines / Packet loss), then the
/// percentiles, then the full accounting and what the socket and thread really had.
fn ping_report(s: &PingSummary<'_>, color: bool) -> String {
    let mut out = String::new();
    let c = &s.counts;
    let st = &s.doc.streams[0].stats;
    let cell = |v: Option<i64>| v.map(us_1).unwrap_or_else(|| "-".into());
    let _ = writeln!(out, "RTT ({})", s.rtt_definition);
    let head = ["Min", "Avg", "Max", "Missed deadlines", "Packet loss"];
    let row = [
        cell(st.min_ns),
        cell(st.mean_ns),
        cell(st.max_ns),
        format!("{} / {}", c.missed, c.sent),
        format!("{} / {}", c.lost, c.sent),
    ];
    let widths: Vec<usize> = head.iter().zip(&row).map(|(h, r)| h.len().max(r.len())).collect();
    let line = |cells: &[String]| {
        cells.iter().zip(&widths).map(|(v, w)| format!("{v:>w$}")).collect::<Vec<_>>().join("  ")
    };
    let _ = writeln!(out, "{}", line(&head.map(String::from)));
    let _ = writeln!(out, "{}", line(&row));
    let _ = writeln!(
        out,
        "(us; missed = RTT above the deadline {}, loss = no reply within {})",
        format_duration_exact(Nanos(s.deadline_ns)),
        format_duration_exact(Nanos(s.loss_timeout_ns))
    );
    out.push('\n');
    let rows: Vec<Row> = s
        .doc
        .streams
        .iter()
        .filter(|st| st.name.starts_with("ping"))
        .map(|st| Row { label: st.name.clone(), summary: &st.stats })
        .collect();
    out.push_str(&stats_table(&rows, color));
    let _ = writeln!(
        out,
        "accounted: sent {} = replies {} + lost {}; late {}, duplicates {}, out of order {}, malformed/foreign {}{}",
        c.sent,
        c.samples,
        c.lost,
        c.late,
        c.duplicates,
        c.out_of_order,
        c.malformed,
        s.overruns.map(|o| format!(", overruns {o}")).unwrap_or_default()
    );
    if c.send_errors + c.receive_errors + c.stale > 0 {
        let _ = writeln!(
            out,
            "  of which: send errors {}, receive errors {}, stale {}",
            c.send_errors, c.receive_errors, c.stale
        );
    }
    if let (Some(max), Some(idx), Some(at)) = (st.max_ns, st.max_index, st.max_at_ns) {
        let _ =
            writeln!(out, "max {} us at request {} ({} after start)", us_1(max), idx, Nanos(at));
    }
    let k = &s.socket;
    let opt = |v: Option<i32>| v.map(|v| v.to_string()).unwrap_or_else(|| "?".into());
    let _ = writeln!(
        out,
        "socket {}: SO_PRIORITY {}, TOS {}, busy poll {} us, rcvbuf {}, sndbuf {}; thread {} {} on CPUs {:?}",
        k.local_addr,
        opt(k.so_priority),
        k.tos.map(|t| format!("{t:#04x}")).unwrap_or_else(|| "?".into()),
        opt(k.busy_poll_us),
        opt(k.rcvbuf),
        opt(k.sndbuf),
        k.policy.unwrap_or("?"),
        k.priority,
        k.cpus
    );
    if let Some(x) = xdp_line(&s.doc.streams[0]) {
        let _ = writeln!(out, "{x}");
    }
    if let Some(t) = s.doc.streams.iter().find(|st| st.name == "ping.tx_stack") {
        let g = |k: &str| t.labels.get(k).map(String::as_str).unwrap_or("?");
        let _ = writeln!(
            out,
            "stages from the kernel's software timestamps on {} (it offers: {}); samples without a tx stamp {}, without an rx stamp {}",
            g("timestamps_dev"),
            g("timestamps_offered"),
            g("no_tx_stamp"),
            g("no_rx_stamp")
        );
    }
    out
}
