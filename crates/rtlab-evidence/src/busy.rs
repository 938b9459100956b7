//! A spike of a thread that never sleeps (the noise probe's busy loop) explained from the
//! trace: it has no wake-up to explain; its gap is a stretch during which its CPU ran
//! something else — switched out for another task, or an IRQ / softirq in its own context —
//! or nothing the events show (the local timer interrupt and NMIs are not traced; a vCPU that
//! was not running shows nothing at all).
//!
//! Contract: pure functions of parsed [`Event`]s, as [`crate::explain`]; the lines come most
//! important first. Sources: Documentation/trace/events.rst (sched_switch, irq and softirq
//! events).

use crate::trace::{field, is_victim, ms, Event};
use std::collections::BTreeMap;

/// Interruptions closer than this are one stretch (an IRQ, then the softirqs it raised).
const JOIN_NS: u64 = 3_000;

/// One piece of a stretch: from, to (trace clock, ns), what ran.
type Piece = (u64, u64, String);

/// The pid, comm and CPU of the victim thread last seen before `until`: an event in its
/// context, or its switch-out.
fn the_victim(events: &[Event], victim: &str, until: u64) -> Option<(i32, String, usize)> {
    events.iter().filter(|e| e.ts_ns <= until).rev().find_map(|e| {
        if is_victim(&e.comm, victim) && e.name != "tracing_mark_write" {
            return Some((e.pid, e.comm.clone(), e.cpu));
        }
        let prev = field(&e.fields, "prev_comm").filter(|c| is_victim(c, victim))?;
        (e.name == "sched_switch").then(|| {
            let pid = field(&e.fields, "prev_pid").and_then(|p| p.parse().ok()).unwrap_or(-1);
            (pid, prev.to_string(), e.cpu)
        })
    })
}

/// How far before the mark a thread must not have slept to be a busy one (before its loop a
/// busy thread sleeps too: starting).
const BUSY_FOR_NS: u64 = 10_000_000;

/// Whether `pid` slept within `ran`: woken, or switched out in a state other than running
/// (`R`, `R+`: preempted).
fn slept(events: &[Event], pid: i32, ran: (u64, u64)) -> bool {
    let pid_is = |k: &str, e: &Event| field(&e.fields, k).and_then(|p| p.parse().ok()) == Some(pid);
    let within = events.iter().filter(|e| e.ts_ns >= ran.0 && e.ts_ns <= ran.1);
    within.into_iter().any(|e| match e.name.as_str() {
        "sched_wakeup" => pid_is("pid", e),
        "sched_switch" => {
            pid_is("prev_pid", e)
                && !field(&e.fields, "prev_state").is_some_and(|s| s.starts_with('R'))
        }
        _ => false,
    })
}

/// What interrupted `pid` on `cpu` within `ran`: IRQs and softirqs in its context, and the
/// tasks that ran while it was switched out.
fn pieces(events: &[Event], pid: i32, cpu: usize, ran: (u64, u64)) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut soft: Option<(u64, String)> = None;
    let mut irq: Option<(u64, String)> = None;
    // while switched out: the task on the CPU and since when
    let mut other: Option<(u64, String)> = None;
    let on_cpu = events.iter().filter(|e| e.cpu == cpu && e.ts_ns >= ran.0 && e.ts_ns <= ran.1);
    for e in on_cpu {
        let f = |k: &str| field(&e.fields, k).unwrap_or("?").to_string();
        match e.name.as_str() {
            "softirq_entry" if e.pid == pid => {
                let action = e.fields.split("action=").nth(1).unwrap_or("?");
                soft = Some((e.ts_ns, format!("{} softirq", action.trim_end_matches(']'))));
            }
            "softirq_exit" if e.pid == pid => {
                if let Some((t, what)) = soft.take() {
                    out.push((t, e.ts_ns, what));
                }
            }
            "irq_handler_entry" if e.pid == pid => {
                irq = Some((e.ts_ns, format!("IRQ {} ({})", f("irq"), f("name"))));
            }
            "irq_handler_exit" if e.pid == pid => {
                if let Some((t, what)) = irq.take() {
                    out.push((t, e.ts_ns, what));
                }
            }
            "sched_switch" => {
                if let Some((t, what)) = other.take() {
                    out.push((t, e.ts_ns, what));
                }
                let next: i32 = f("next_pid").parse().unwrap_or(-1);
                if next != pid {
                    let who =
                        format!("pid {next} ({}, kernel prio {})", f("next_comm"), f("next_prio"));
                    other = Some((e.ts_ns, format!("{who} ran")));
                }
            }
            _ => {}
        }
    }
    out
}

/// Explain a `spike_ns` gap of a busy `victim` thread that ended within `ran` (trace clock,
/// ns; its mark at the end): the stretch of interruptions on its CPU whose length is nearest
/// the gap, what ran in it, and what the events cannot show. None: no victim thread in the
/// trace, or one that slept (its spikes are a wake-up's, [`crate::explain`]).
pub fn attribute_busy(
    events: &[Event],
    victim: &str,
    spike_ns: i64,
    ran: (u64, u64),
) -> Option<Vec<String>> {
    let (pid, comm, cpu) = the_victim(events, victim, ran.1)?;
    let recent = ran.1.saturating_sub(spike_ns.max(0) as u64 + BUSY_FOR_NS);
    if slept(events, pid, (recent.max(ran.0), ran.1)) {
        return None;
    }
    let spike = spike_ns.max(0) as u64;
    let mut ps = pieces(events, pid, cpu, ran);
    ps.sort_by_key(|p| p.0);
    // stretches: pieces that follow each other within JOIN_NS
    let mut stretches: Vec<Vec<Piece>> = Vec::new();
    for p in ps {
        match stretches.last_mut() {
            Some(s) if p.0 <= s.iter().map(|x| x.1).max().unwrap_or(0) + JOIN_NS => s.push(p),
            _ => stretches.push(vec![p]),
        }
    }
    let span = |s: &[Piece]| {
        s.iter().map(|p| p.1).max().unwrap_or(0) - s.iter().map(|p| p.0).min().unwrap_or(0)
    };
    let unseen =
        "the local timer interrupt or an NMI (not traced), or the vCPU not running (host stall?)";
    let best = stretches.iter().min_by_key(|s| span(s).abs_diff(spike));
    let Some(s) = best else {
        return Some(vec![format!(
            "{comm} (pid {pid}) on CPU {cpu} never sleeps: nothing in the trace interrupted it before this spike's mark: {unseen}"
        )]);
    };
    let (from, len) = (s.iter().map(|p| p.0).min().unwrap_or(0), span(s));
    let mut lines = vec![format!(
        "{comm} (pid {pid}) on CPU {cpu} never sleeps: interrupted at {:.6} s for {} of the {} gap",
        from as f64 / 1e9,
        ms(len),
        ms(spike)
    )];
    let mut by_what: BTreeMap<&str, u64> = BTreeMap::new();
    for (a, b, what) in s {
        *by_what.entry(what).or_default() += b - a;
    }
    let mut by_what: Vec<_> = by_what.into_iter().collect();
    by_what.sort_by_key(|w| std::cmp::Reverse(w.1));
    lines.extend(by_what.iter().map(|(what, ns)| format!("{what} for {}", ms(*ns))));
    if len.saturating_mul(2) < spike {
        lines.push(format!("the rest ({}) is not in these events: {unseen}", ms(spike - len)));
    }
    Some(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::parse_trace;

    /// rtlab-noise0 busy on CPU 1: a timer tick's softirqs (8 us), later a FIFO thread that
    /// takes the CPU for 2 ms, then a virtio IRQ and NET_RX in its context (40 us), the mark.
    const BUSY: &str = "    rtlab-noise0-700     [001] ..s..   500.000010: softirq_entry: vec=1 [action=TIMER]
    rtlab-noise0-700     [001] ..s..   500.000016: softirq_exit: vec=1 [action=TIMER]
    rtlab-noise0-700     [001] ..s..   500.000017: softirq_entry: vec=9 [action=RCU]
    rtlab-noise0-700     [001] ..s..   500.000018: softirq_exit: vec=9 [action=RCU]
    rtlab-noise0-700     [001] d..2.   500.100000: sched_switch: prev_comm=rtlab-noise0 prev_pid=700 prev_prio=49 prev_state=R+ ==> next_comm=disturber next_pid=800 next_prio=9
       disturber-800     [001] d..2.   500.102000: sched_switch: prev_comm=disturber prev_pid=800 prev_prio=9 prev_state=S ==> next_comm=rtlab-noise0 next_pid=700 next_prio=49
    rtlab-noise0-700     [001] d.h1.   500.200000: irq_handler_entry: irq=38 name=virtio2-input.0
    rtlab-noise0-700     [001] d.h1.   500.200010: irq_handler_exit: irq=38 ret=handled
    rtlab-noise0-700     [001] ..s..   500.200011: softirq_entry: vec=3 [action=NET_RX]
    rtlab-noise0-700     [001] ..s..   500.200040: softirq_exit: vec=3 [action=NET_RX]
 rtlab-spikewatc-990     [000] .....   500.201000: tracing_mark_write: rtlab spike 1: sample 3 late by 2000500 ns
";

    #[test]
    fn the_stretch_nearest_the_gap_names_what_ran() {
        let ev = parse_trace(BUSY);
        let a = attribute_busy(&ev, "rtlab-noise", 2_000_500, (0, u64::MAX)).unwrap();
        assert_eq!(
            a[0],
            "rtlab-noise0 (pid 700) on CPU 1 never sleeps: interrupted at 500.100000 s for 2.0 ms of the 2.0 ms gap"
        );
        assert_eq!(a[1], "pid 800 (disturber, kernel prio 9) ran for 2.0 ms");
        assert_eq!(a.len(), 2, "{a:?}");
        // the IRQ and the softirq it raised are one stretch of 40 us
        let a = attribute_busy(&ev, "rtlab-noise", 41_000, (0, u64::MAX)).unwrap();
        assert!(a[0].ends_with("for 40 us of the 41 us gap"), "{a:?}");
        assert_eq!(a[1..], ["NET_RX softirq for 29 us", "IRQ 38 (virtio2-input.0) for 10 us"]);
    }

    #[test]
    fn what_the_events_cannot_show_is_said() {
        let ev = parse_trace(BUSY);
        // a 22 us gap: the tick's softirqs (8 us) are the nearest; the rest is not traced
        let a = attribute_busy(&ev, "rtlab-noise", 22_000, (0, 500_050_000_000)).unwrap();
        assert!(a[0].contains("for 8 us of the 22 us gap"), "{a:?}");
        assert_eq!(a[1], "TIMER softirq for 6 us");
        assert!(a.last().unwrap().starts_with("the rest (14 us) is not in these events"), "{a:?}");
        // nothing on its CPU in the range
        let a =
            attribute_busy(&ev, "rtlab-noise", 22_000, (500_000_100_000, 500_000_200_000)).unwrap();
        assert!(a[0].contains("nothing in the trace interrupted it"), "{a:?}");
        assert!(attribute_busy(&ev, "rtlab-timer", 22_000, (0, u64::MAX)).is_none());
        // a thread that sleeps is not a busy one
        let ev = parse_trace(crate::fixtures::TWO_SPIKES);
        assert!(attribute_busy(&ev, "rtlab-timer", 9_410_000, (0, 400_010_000_000)).is_none());
    }
}
