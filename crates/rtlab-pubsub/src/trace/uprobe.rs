//! The lines of rtlab's uprobes on a running process's tracepoints (`rtlab trace --pid`,
//! rtlab-evidence `uprobe`), as the events the interposer would have written.
//!
//! Contract: [`parse`] reads one tracefs line (`TASK-TID [CPU] FLAGS SECS.USECS: NAME_K:
//! (ADDR) key=value...`) of the events `rcl_publish_K`, `rmw_publish_K`, `rmw_take_K`, or
//! says None; [`events`] groups hits by process and stands in for the init events a
//! process made before it was probed: one node per process (`pid N`), and each publisher and
//! subscription at its first message, named by the topic the RMW handle holds. Times are
//! the instance's `mono` clock: CLOCK_MONOTONIC to the microsecond.

use super::analysis::ProcessEvents;
use super::event::{Event, Kind};
use std::collections::{BTreeMap, HashSet};

/// One probe hit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    pub tid: i32,
    pub cpu: Option<u16>,
    pub time_ns: i64,
    pub kind: Kind,
    /// pub/sub handle, message, source timestamp.
    pub args: [u64; 3],
    pub taken: bool,
    pub topic: Option<String>,
}

fn value<'a>(rest: &'a str, key: &str) -> Option<&'a str> {
    let at = rest.find(&format!(" {key}="))? + key.len() + 2;
    let v = &rest[at..];
    if let Some(q) = v.strip_prefix('"') {
        return Some(&q[..q.find('"')?]);
    }
    Some(v.split_whitespace().next().unwrap_or(""))
}

fn hex(v: &str) -> Option<u64> {
    u64::from_str_radix(v.strip_prefix("0x")?, 16).ok()
}

/// One tracefs line, if it is a hit of rtlab's probes.
pub fn parse(line: &str) -> Option<Hit> {
    let open = line.find(" [")?;
    let task = line[..open].trim();
    let tid: i32 = task.rsplit('-').next()?.parse().ok()?;
    let close = open + line[open..].find(']')?;
    let cpu = line[open + 2..close].trim().parse::<u16>().ok();
    let mut words = line[close + 1..].split_whitespace();
    let _flags = words.next()?;
    let stamp = words.next()?.strip_suffix(':')?;
    let (secs, usecs) = stamp.split_once('.')?;
    let time_ns = secs.parse::<i64>().ok()?.checked_mul(1_000_000_000)?
        + usecs.parse::<i64>().ok()?.checked_mul(1_000)?;
    let name = words.next()?.strip_suffix(':')?;
    let base = name
        .rsplit_once('_')
        .map_or(name, |(b, k)| if k.parse::<u32>().is_ok() { b } else { name });
    let rest = &line[line.find(name)? + name.len()..];
    let (kind, handle) = match base {
        "rcl_publish" => (Kind::RclPublish, "pub"),
        "rmw_publish" => (Kind::RmwPublish, "pub"),
        "rmw_take" => (Kind::RmwTake, "sub"),
        _ => return None,
    };
    let stamp = value(rest, "stamp").and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
    Some(Hit {
        tid,
        cpu,
        time_ns,
        kind,
        args: [hex(value(rest, handle)?)?, hex(value(rest, "msg")?)?, stamp as u64],
        taken: value(rest, "taken").is_none_or(|t| t != "0"),
        topic: value(rest, "topic").map(str::to_string),
    })
}

/// The hits of the processes in `wanted` (by `tgid`, the process of a thread) as each
/// process's events, with the init events they stand in for.
pub fn events(
    hits: &[Hit],
    tgid: &mut dyn FnMut(i32) -> Option<i32>,
    wanted: &[i32],
) -> Vec<ProcessEvents> {
    let mut per: BTreeMap<i32, ProcessEvents> = BTreeMap::new();
    let mut known: HashSet<(i32, u64, bool)> = HashSet::new();
    for h in hits {
        let Some(pid) = tgid(h.tid).filter(|p| wanted.contains(p)) else { continue };
        let p = per.entry(pid).or_insert_with(|| ProcessEvents {
            pid,
            events: vec![Event {
                kind: Kind::NodeInit,
                cpu: None,
                flags: 0,
                tid: pid as u32,
                time_ns: i64::MIN,
                args: [0; 4],
                names: vec![format!("pid {pid}"), String::new()],
            }],
        });
        let ev = |kind, time_ns, args, names| Event {
            kind,
            cpu: h.cpu,
            flags: u16::from(h.taken),
            tid: h.tid as u32,
            time_ns,
            args,
            names,
        };
        let [handle, msg, stamp] = h.args;
        match h.kind {
            Kind::RmwPublish | Kind::RmwTake => {
                let publisher = h.kind == Kind::RmwPublish;
                if let Some(topic) =
                    h.topic.as_ref().filter(|_| known.insert((pid, handle, publisher)))
                {
                    let init = if publisher { Kind::PublisherInit } else { Kind::SubscriptionInit };
                    p.events.push(ev(
                        init,
                        i64::MIN + 1,
                        [handle, 0, handle, 0],
                        vec![topic.clone()],
                    ));
                }
                if publisher || h.taken {
                    p.events.push(ev(h.kind, h.time_ns, [handle, msg, stamp, 0], Vec::new()));
                }
            }
            _ => p.events.push(ev(h.kind, h.time_ns, [handle, msg, 0, 0], Vec::new())),
        }
    }
    per.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINES: [&str; 4] = [
        "          python-11668   [000] DBZff 27629.572794: rcl_publish_0: (0x7f0b59e29cc0) pub=0x309cf450 msg=0x309d1340",
        "          python-11668   [000] DBZff 27629.572800: rmw_publish_0: (0x7f0b59e29e00) pub=0x30aa0000 msg=0x309d1340 stamp=1795941969424574623 topic=\"/scan\"",
        "          python-11629   [001] DBZff 27629.572950: rmw_take_0: (0x7f61c97de470) sub=0x3c79ad10 msg=0x3c7a0f20 stamp=1795941969424574623 taken=1 topic=\"/scan\"",
        "          python-11629   [001] DBZff 27629.572990: rmw_take_0: (0x7f61c97de470) sub=0x3c79ad10 msg=0x3c7a0f20 stamp=0 taken=0 topic=\"/scan\"",
    ];

    #[test]
    fn reads_the_lines_tracefs_writes() {
        let h = parse(LINES[2]).unwrap();
        assert_eq!(h.tid, 11629);
        assert_eq!(h.cpu, Some(1));
        assert_eq!(h.time_ns, 27_629_572_950_000);
        assert_eq!(h.kind, Kind::RmwTake);
        assert_eq!(h.args, [0x3c79ad10, 0x3c7a0f20, 1795941969424574623]);
        assert!(h.taken);
        assert_eq!(h.topic.as_deref(), Some("/scan"));
        assert!(!parse(LINES[3]).unwrap().taken);
        assert_eq!(parse(LINES[0]).unwrap().kind, Kind::RclPublish);
        for bad in [
            "",
            "# tracer: nop",
            "  x-1 [0] . 1.2: sched_switch: a=1",
            "python-1 [000] D 1.5: rmw_take_0: (0x1) sub=zz",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_probed_process_joins_its_publish_to_anothers_take() {
        let hits: Vec<Hit> = LINES.iter().filter_map(|l| parse(l)).collect();
        let mut tgid = |t: i32| Some(if t == 11668 { 100 } else { 200 });
        let p = events(&hits, &mut tgid, &[100, 200]);
        assert_eq!(p.len(), 2);
        let a = super::super::analysis::analyse(&p, &[]);
        assert_eq!(a.nodes, [(100, "pid 100".to_string()), (200, "pid 200".to_string())]);
        assert_eq!(a.edges.len(), 1, "{a:?}");
        assert_eq!(a.edges[0].latencies, [(27_629_572_794_000, 156_000)]);
        assert_eq!(a.publishers[0].topic, "/scan");
        // a process not asked for is left out
        assert_eq!(events(&hits, &mut tgid, &[100]).len(), 1);
    }
}
