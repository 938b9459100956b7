//! The ftrace `trace` file read back: one [`Event`] per line of the default format
//! (`comm-pid [cpu] flags ts: event: fields`) and the `key=value` fields of an event.
//!
//! Contract: pure text parsing; lines that are not events (headers, lost-event notes) are
//! skipped. Source: Documentation/trace/ftrace.rst ("The File System", output format). With
//! the words the explanations share: which comms are the probe's threads ([`is_victim`]) and a
//! duration as said ([`ms`]).

/// One ftrace event line.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub comm: String,
    pub pid: i32,
    pub cpu: usize,
    pub ts_ns: u64,
    pub name: String,
    pub fields: String,
}

/// Parse the `trace` file (the default format: `comm-pid [cpu] flags ts: event: fields`).
pub fn parse_trace(text: &str) -> Vec<Event> {
    let mut out = Vec::new();
    for l in text.lines() {
        if l.starts_with('#') {
            continue;
        }
        let Some(open) = find_cpu_bracket(l) else { continue };
        let task = l[..open].trim();
        let Some(dash) = task.rfind('-') else { continue };
        let (comm, pid) = (&task[..dash], task[dash + 1..].parse::<i32>().unwrap_or(-1));
        let close = open + l[open..].find(']').unwrap_or(0);
        let cpu = l[open + 1..close].trim().parse().unwrap_or(0);
        let mut rest = l[close + 1..].split_whitespace();
        // flags (optional in some formats) then the timestamp "123.456789:"
        let mut ts = None;
        let mut name = String::new();
        for w in rest.by_ref() {
            if ts.is_none() {
                if let Some(t) = w.strip_suffix(':').and_then(parse_ts) {
                    ts = Some(t);
                }
                continue;
            }
            name = w.trim_end_matches(':').to_string();
            break;
        }
        let Some(ts_ns) = ts else { continue };
        let fields = rest.collect::<Vec<_>>().join(" ");
        out.push(Event { comm: comm.to_string(), pid, cpu, ts_ns, name, fields });
    }
    out
}

/// The header's `# entries-in-buffer/entries-written: KEPT/WRITTEN`: Some((kept, written))
/// when the ring buffer overwrote entries (the oldest ones are lost), else None.
pub fn overwritten(text: &str) -> Option<(u64, u64)> {
    let l =
        text.lines().take(10).find_map(|l| l.split("entries-in-buffer/entries-written:").nth(1))?;
    let (kept, written) = l.split_whitespace().next()?.split_once('/')?;
    let (kept, written) = (kept.parse().ok()?, written.parse().ok()?);
    (kept < written).then_some((kept, written))
}

/// Where the `[NNN]` CPU column starts in an event line.
fn find_cpu_bracket(l: &str) -> Option<usize> {
    let b = l.as_bytes();
    (0..b.len()).find(|&i| {
        b[i] == b'['
            && i + 4 < b.len()
            && b[i + 1..i + 4].iter().all(u8::is_ascii_digit)
            && b[i + 4] == b']'
    })
}

/// A trace timestamp `secs.frac` in ns.
fn parse_ts(s: &str) -> Option<u64> {
    let (a, b) = s.split_once('.')?;
    let secs: u64 = a.parse().ok()?;
    let frac = format!("{b:0<9}");
    Some(secs * 1_000_000_000 + frac[..9].parse::<u64>().ok()?)
}

/// The value of `key=` among an event's fields.
pub(crate) fn field<'a>(fields: &'a str, key: &str) -> Option<&'a str> {
    fields.split_whitespace().find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// A duration as said in an explanation: `N us` below a millisecond, `N.N ms` above.
pub(crate) fn ms(ns: u64) -> String {
    if ns < 1_000_000 {
        format!("{} us", ns / 1_000)
    } else {
        format!("{:.1} ms", ns as f64 / 1e6)
    }
}

/// Whether `comm` is one of the probe's threads: `victim` is a comm prefix, or several
/// separated by `|` (`rtlab-pong|rtlab-sub`: a round trip's receivers and echoes).
pub(crate) fn is_victim(comm: &str, victim: &str) -> bool {
    victim.split('|').any(|v| !v.is_empty() && comm.starts_with(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::TRACE;

    #[test]
    fn a_trace_is_parsed() {
        let ev = parse_trace(TRACE);
        assert_eq!(ev.len(), 10);
        assert_eq!(
            (ev[0].comm.as_str(), ev[0].pid, ev[0].cpu, ev[0].ts_ns),
            ("<idle>", 0, 1, 100_000_000_000)
        );
        assert_eq!(ev[5].comm, "ksoftirqd/1");
        assert_eq!(ev[5].name, "softirq_entry");
        assert_eq!(ev[9].name, "tracing_mark_write");
    }
}
