//! A spike explained from the trace: the wake-ups of the probe's threads (the victims), the
//! one that made a sample late, and who held its CPU, which softirqs and IRQs ran there, or
//! that nothing ran at all (a host stall) ("preempted by pid 812 (rustc) for 4.7 ms"; "no
//! task ran on CPU 1 then: the vCPU was not running (host stall?)").
//!
//! Contract: pure functions of parsed [`Event`]s; the explanation's lines come most important
//! first. Sources: Documentation/trace/events.rst (sched_switch, sched_wakeup, irq and
//! softirq events).

use crate::trace::{field, is_victim, ms, Event};
use std::collections::BTreeMap;

/// One wake-up of a probe thread in a trace: when it was woken and when it ran (trace clock,
/// ns), on which CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wakeup {
    pub woken_ns: u64,
    pub ran_ns: u64,
    pub cpu: usize,
    pub pid: i32,
    pub comm: String,
}

impl Wakeup {
    /// How long the thread waited for its CPU.
    pub fn gap_ns(&self) -> u64 {
        self.ran_ns.saturating_sub(self.woken_ns)
    }
}

/// Every wake-up of the threads whose comm starts with `victim`, paired with the moment the
/// thread ran (its switch-in, or its first event when the trace lacks that switch), in the
/// order they ran.
pub fn wakeups(events: &[Event], victim: &str) -> Vec<Wakeup> {
    let mut woken: BTreeMap<i32, (u64, usize)> = BTreeMap::new();
    let mut out = Vec::new();
    for e in events {
        match e.name.as_str() {
            "sched_wakeup" if field(&e.fields, "comm").is_some_and(|c| is_victim(c, victim)) => {
                let pid = field(&e.fields, "pid").and_then(|p| p.parse().ok()).unwrap_or(-1);
                let cpu =
                    field(&e.fields, "target_cpu").and_then(|c| c.parse().ok()).unwrap_or(e.cpu);
                woken.insert(pid, (e.ts_ns, cpu));
            }
            // the woken thread ran: its switch-in, or (when the trace lacks that switch, as
            // seen after an idle wake-up here) the first event in its own context
            name if (name == "sched_switch"
                && field(&e.fields, "next_comm").is_some_and(|c| is_victim(c, victim)))
                || (name != "sched_wakeup" && woken.contains_key(&e.pid)) =>
            {
                let switched_in = name == "sched_switch"
                    && field(&e.fields, "next_comm").is_some_and(|c| is_victim(c, victim));
                let (pid, comm) = if switched_in {
                    (
                        field(&e.fields, "next_pid").and_then(|p| p.parse().ok()).unwrap_or(-1),
                        field(&e.fields, "next_comm").unwrap_or("").to_string(),
                    )
                } else {
                    (e.pid, e.comm.clone())
                };
                if let Some((w, _)) = woken.remove(&pid) {
                    out.push(Wakeup { woken_ns: w, ran_ns: e.ts_ns, cpu: e.cpu, pid, comm });
                }
            }
            _ => {}
        }
    }
    out
}

/// "No wake-up of the victims `whence`" and why that can be.
fn no_wakeup(victim: &str, whence: &str) -> Vec<String> {
    let names = victim.split('|').map(|v| format!("{v}*")).collect::<Vec<_>>().join("', '");
    let why = "the buffer may have wrapped, or the spike happened before the trace started";
    vec![format!("no wake-up of '{names}' threads {whence} ({why})")]
}

/// The wake-up that waited longest (the first of equals).
fn worst(w: impl Iterator<Item = Wakeup>) -> Option<Wakeup> {
    w.max_by_key(|w| (w.gap_ns(), std::cmp::Reverse(w.ran_ns)))
}

/// Explain the worst wake-up of the threads whose comm starts with `victim`: who ran on its
/// CPU between its wake-up and the moment it ran, which softirqs and IRQs ran there.
pub fn attribute(events: &[Event], victim: &str, spike_ns: i64) -> Vec<String> {
    match worst(wakeups(events, victim).into_iter()) {
        Some(w) => explain(events, &w, victim, spike_ns),
        None => no_wakeup(victim, "in the trace"),
    }
}

/// Explain one spike of a run that may have several: the worst wake-up (or, when no wait
/// makes up half of the spike, the last wake-up) of the `victim` threads that ran within `ran` (trace clock, ns: from the moment the flag could be raised
/// again, less the spike's value, to the spike's trace marker) and is not one of `explained`
/// (earlier spikes' wake-ups). Returns the explanation and the wake-up it is about (None:
/// no such wake-up, the explanation says so).
pub fn attribute_spike(
    events: &[Event],
    victim: &str,
    spike_ns: i64,
    ran: (u64, u64),
    explained: &[Wakeup],
) -> (Vec<String>, Option<Wakeup>) {
    // a thread that did not sleep before the spike (the noise probe's busy loop) has no
    // wake-up of its own to explain (an older one, its start, is not this gap's): the gap is
    // what ran on its CPU
    if let Some(lines) = crate::busy::attribute_busy(events, victim, spike_ns, ran) {
        return (lines, None);
    }
    let candidates: Vec<Wakeup> = wakeups(events, victim)
        .into_iter()
        .filter(|w| w.ran_ns >= ran.0 && w.ran_ns <= ran.1)
        .filter(|w| !explained.iter().any(|x| x.pid == w.pid && x.woken_ns == w.woken_ns))
        .collect();
    // the wake-up that waited longest, when that wait is most of the spike; otherwise the
    // lateness came before a wake-up (a late timer interrupt, a host stall): the last one
    // before the mark is the sample's own
    let worst = match worst(candidates.iter().cloned()) {
        Some(w) if w.gap_ns().saturating_mul(2) >= spike_ns.max(0) as u64 => Some(w),
        _ => candidates.last().cloned(),
    };
    match worst {
        Some(w) => (explain(events, &w, victim, spike_ns), Some(w)),
        None => {
            let whence = "before this spike's mark in the trace, other than earlier spikes' ones";
            (no_wakeup(victim, whence), None)
        }
    }
}

/// Explain one wake-up of a probe thread that came `spike_ns` late: the wake-up, who held
/// its CPU until it ran, the softirqs and IRQs there, and the lateness before the wake-up.
pub fn explain(events: &[Event], wake: &Wakeup, victim: &str, spike_ns: i64) -> Vec<String> {
    let (w, r, cpu, pid, comm) = (wake.woken_ns, wake.ran_ns, wake.cpu, wake.pid, &wake.comm);
    let gap = r - w;
    let mut lines = vec![format!(
        "{comm} (pid {pid}) on CPU {cpu}: woken at {:.6} s, ran {} later",
        w as f64 / 1e9,
        ms(gap)
    )];
    // who held the CPU: the task running at the wake-up, then every switch until the victim ran
    let on_cpu: Vec<&Event> = events.iter().filter(|e| e.cpu == cpu).collect();
    let prios = kernel_prios(events);
    let held = held_the_cpu(&on_cpu, &prios, w, r);
    lines.extend(preemptors(events, held, pid, victim));
    lines.extend(interrupts(&on_cpu, w, r));
    let gap_i = gap as i64;
    if spike_ns > gap_i + 1_000_000 {
        lines.push(before_the_wakeup(events, cpu, w, spike_ns, (spike_ns - gap_i) as u64));
    }
    lines
}

/// A task on a CPU: comm, pid, kernel priority, since (trace clock, ns).
type OnCpu = (String, i32, String, u64);

/// Kernel priorities seen for each pid (in sched_switch events).
fn kernel_prios(events: &[Event]) -> BTreeMap<i32, String> {
    let mut prios: BTreeMap<i32, String> = BTreeMap::new();
    for e in events.iter().filter(|e| e.name == "sched_switch") {
        for (pk, rk) in [("prev_pid", "prev_prio"), ("next_pid", "next_prio")] {
            if let (Some(p), Some(r)) =
                (field(&e.fields, pk).and_then(|p| p.parse::<i32>().ok()), field(&e.fields, rk))
            {
                prios.insert(p, r.to_string());
            }
        }
    }
    prios
}

/// The task on the CPU after `e`: the one a switch put there, or the context of the event
/// (an IRQ runs in the interrupted task's context).
fn on_cpu_after(e: &Event, prios: &BTreeMap<i32, String>) -> OnCpu {
    if e.name == "sched_switch" {
        (
            field(&e.fields, "next_comm").unwrap_or("?").into(),
            field(&e.fields, "next_pid").and_then(|p| p.parse().ok()).unwrap_or(-1),
            field(&e.fields, "next_prio").unwrap_or("?").into(),
            e.ts_ns,
        )
    } else {
        (e.comm.clone(), e.pid, prios.get(&e.pid).cloned().unwrap_or_else(|| "?".into()), e.ts_ns)
    }
}

/// How long each task (pid, comm, prio) held the CPU between the wake-up `w` and the moment
/// `r` the woken thread ran.
fn held_the_cpu(
    on_cpu: &[&Event],
    prios: &BTreeMap<i32, String>,
    w: u64,
    r: u64,
) -> BTreeMap<(i32, String, String), u64> {
    // the task on the CPU at the wake-up: the context of the last event there, or the task a
    // switch put there; a switch-in can be missing from the trace (a new task's first run),
    // an event's context cannot
    let mut running: Option<OnCpu> =
        on_cpu.iter().rfind(|e| e.ts_ns <= w).map(|e| on_cpu_after(e, prios));
    let mut held: BTreeMap<(i32, String, String), u64> = BTreeMap::new();
    let mut cursor = w;
    for e in on_cpu.iter().filter(|e| e.ts_ns > w && e.ts_ns <= r) {
        let switched = e.name == "sched_switch";
        // an event in another task's context means a switch the trace did not show
        let unseen = !switched && running.as_ref().is_some_and(|x| x.1 != e.pid);
        if !switched && !unseen {
            continue;
        }
        if let Some((c, p, pr, _)) = &running {
            *held.entry((*p, c.clone(), pr.clone())).or_default() += e.ts_ns - cursor;
        }
        cursor = e.ts_ns;
        running = Some(on_cpu_after(e, prios));
    }
    held
}

/// The last name the trace shows for each pid (a thread's comm at its first switch can be
/// its parent's, renamed just after).
fn last_names(events: &[Event]) -> BTreeMap<i32, String> {
    let mut names: BTreeMap<i32, String> = BTreeMap::new();
    for e in events {
        names.insert(e.pid, e.comm.clone());
        if e.name == "sched_switch" {
            if let (Some(p), Some(c)) = (
                field(&e.fields, "prev_pid").and_then(|p| p.parse().ok()),
                field(&e.fields, "prev_comm"),
            ) {
                names.insert(p, c.to_string());
            }
        }
    }
    names
}

/// The (at most three) tasks other than the victims that held the CPU longest, one line
/// each (one per pid: an exec changes the comm of the same pid).
fn preemptors(
    events: &[Event],
    held: BTreeMap<(i32, String, String), u64>,
    pid: i32,
    victim: &str,
) -> Vec<String> {
    let names = last_names(events);
    let mut merged: BTreeMap<i32, ((i32, String, String), u64)> = BTreeMap::new();
    for ((p, c, pr), ns) in held {
        let e = merged.entry(p).or_insert(((p, names.get(&p).cloned().unwrap_or(c), pr), 0));
        e.1 += ns;
    }
    let mut held: Vec<_> =
        merged.into_values().filter(|((p, c, _), _)| *p != pid && !is_victim(c, victim)).collect();
    held.sort_by_key(|b| std::cmp::Reverse(b.1));
    held.iter()
        .take(3)
        .map(|((p, c, prio), ns)| {
            if *p == 0 {
                "the idle task held the CPU (a wake-up to a sleeping CPU: C-state exit or a host delay)"
                    .to_string()
            } else {
                format!("preempted by pid {p} ({c}, kernel prio {prio}) for {}", ms(*ns))
            }
        })
        .collect()
}

/// The softirqs (at most three) and IRQs (at most two) that ran 10 us or more on the CPU from
/// 1 ms before the wake-up `w` to the moment `r` the woken thread ran.
fn interrupts(on_cpu: &[&Event], w: u64, r: u64) -> Vec<String> {
    let mut soft: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut hard: BTreeMap<String, u64> = BTreeMap::new();
    let mut open_soft: Option<(String, String, u64)> = None;
    let mut open_irq: Option<(String, u64)> = None;
    for e in on_cpu.iter().filter(|e| e.ts_ns >= w.saturating_sub(1_000_000) && e.ts_ns <= r) {
        match e.name.as_str() {
            "softirq_entry" => {
                let action = e
                    .fields
                    .split("action=")
                    .nth(1)
                    .unwrap_or("?")
                    .trim_end_matches(']')
                    .to_string();
                open_soft = Some((action, e.comm.clone(), e.ts_ns));
            }
            "softirq_exit" => {
                if let Some((a, c, t)) = open_soft.take() {
                    *soft.entry((a, c)).or_default() +=
                        e.ts_ns - t.max(w.saturating_sub(1_000_000));
                }
            }
            "irq_handler_entry" => {
                open_irq = Some((
                    format!(
                        "IRQ {} ({})",
                        field(&e.fields, "irq").unwrap_or("?"),
                        field(&e.fields, "name").unwrap_or("?")
                    ),
                    e.ts_ns,
                ))
            }
            "irq_handler_exit" => {
                if let Some((n, t)) = open_irq.take() {
                    *hard.entry(n).or_default() += e.ts_ns - t;
                }
            }
            _ => {}
        }
    }
    let mut lines = Vec::new();
    let mut soft: Vec<_> = soft.into_iter().collect();
    soft.sort_by_key(|b| std::cmp::Reverse(b.1));
    for ((action, ctx), ns) in soft.iter().take(3).filter(|(_, ns)| *ns >= 10_000) {
        lines.push(format!("{action} ran in {ctx} for {} before the spike", ms(*ns)));
    }
    let mut hard: Vec<_> = hard.into_iter().collect();
    hard.sort_by_key(|b| std::cmp::Reverse(b.1));
    for (n, ns) in hard.iter().take(2).filter(|(_, ns)| *ns >= 10_000) {
        lines.push(format!("{n} handled for {}", ms(*ns)));
    }
    lines
}

/// The part of a `spike_ns` lateness that passed before the wake-up `w` (`before` ns): a host
/// stall on an idle CPU, a quiet CPU with a task on it, or a late timer interrupt.
fn before_the_wakeup(events: &[Event], cpu: usize, w: u64, spike_ns: i64, before: u64) -> String {
    match quiet_before(events, cpu, w, before) {
        Some(None) => format!(
            "of the {} lateness, {} passed before the wake-up itself, and no task ran on CPU {cpu} then (the trace shows the CPU idle and nothing there, not even an interrupt): the vCPU was not running (host stall?)",
            ms(spike_ns as u64),
            ms(before)
        ),
        Some(Some((c, p))) => format!(
            "of the {} lateness, {} passed before the wake-up itself, and nothing happened on CPU {cpu} then (no event, not even an interrupt, while {c} (pid {p}) was on it): interrupts were off, or the vCPU was not running (host stall?)",
            ms(spike_ns as u64),
            ms(before)
        ),
        None => format!(
            "of the {} lateness, {} passed before the wake-up itself: the timer interrupt came late (interrupts off, or the hypervisor held the CPU: see steal time)",
            ms(spike_ns as u64),
            ms(before)
        ),
    }
}

/// Whether the trace shows nothing at all on `cpu` in the `len_ns` before `until`: no event,
/// not even an interrupt (a CPU that runs emits a timer tick or an IRQ within milliseconds).
/// Some(None): the CPU was idle; Some(Some((comm, pid))): that task was on it. None: something
/// ran there, or the trace does not reach back that far.
fn quiet_before(
    events: &[Event],
    cpu: usize,
    until: u64,
    len_ns: u64,
) -> Option<Option<(String, i32)>> {
    let from = until.checked_sub(len_ns)?;
    let on_cpu = || events.iter().filter(|e| e.cpu == cpu);
    // the trace must show this CPU before the quiet time, or it says nothing about it
    let last_before = on_cpu().rfind(|e| e.ts_ns <= from)?;
    if on_cpu().any(|e| e.ts_ns > from && e.ts_ns < until) {
        return None;
    }
    let (comm, pid) = if last_before.name == "sched_switch" {
        (
            field(&last_before.fields, "next_comm").unwrap_or("?").to_string(),
            field(&last_before.fields, "next_pid").and_then(|p| p.parse().ok()).unwrap_or(-1),
        )
    } else {
        (last_before.comm.clone(), last_before.pid)
    };
    Some((pid != 0).then_some((comm, pid)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{TRACE, TWO_SPIKES};
    use crate::trace::parse_trace;

    #[test]
    fn the_attribution_names_the_preemptor_and_the_softirq() {
        let a = attribute(&parse_trace(TRACE), "rtlab-timer", 8_100_000);
        assert!(
            a[0].contains("rtlab-timer0 (pid 900) on CPU 1") && a[0].contains("ran 8.0 ms later"),
            "{a:?}"
        );
        assert!(
            a.iter().any(|l| l == "preempted by pid 812 (rustc, kernel prio 120) for 4.7 ms"),
            "{a:?}"
        );
        assert!(
            a.iter().any(|l| l == "NET_RX ran in ksoftirqd/1 for 3.2 ms before the spike"),
            "{a:?}"
        );
        // events from 1 ms before the wake-up count (they can delay the wake-up itself)
        assert!(a.iter().any(|l| l == "IRQ 38 (virtio2-input.0) handled for 100 us"), "{a:?}");
        assert!(
            !a.iter().any(|l| l.contains("lateness")),
            "the whole lateness is after the wake-up: {a:?}"
        );
    }

    #[test]
    fn a_new_task_whose_switch_in_is_not_in_the_trace_is_still_named() {
        // the hog's first run shows no sched_switch: only events in its context
        let t = "          <idle>-0       [001] dNh4.   200.000000: sched_wakeup: comm=rtlab-timer0 pid=900 prio=19 target_cpu=001
       rtlab-hog-950     [001] ..s..   200.001000: softirq_entry: vec=9 [action=RCU]
       rtlab-hog-950     [001] ..s..   200.001005: softirq_exit: vec=9 [action=RCU]
       rtlab-hog-950     [001] d..2.   200.020000: sched_switch: prev_comm=rtlab-hog prev_pid=950 prev_prio=9 prev_state=X ==> next_comm=rtlab-timer0 next_pid=900 next_prio=19
";
        let a = attribute(&parse_trace(t), "rtlab-timer", 20_000_000);
        assert!(
            a.iter().any(|l| l == "preempted by pid 950 (rtlab-hog, kernel prio 9) for 19.0 ms"),
            "{a:?}"
        );
    }

    #[test]
    fn a_missing_switch_in_is_taken_from_the_victims_next_event() {
        // seen here: after an idle wake-up the trace has no sched_switch into the victim
        let t = "          <idle>-0       [001] dNh4.   300.000000: sched_wakeup: comm=rtlab-timer0 pid=900 prio=19 target_cpu=001
    rtlab-timer0-900     [001] d..2.   300.000015: sched_switch: prev_comm=rtlab-timer0 prev_pid=900 prev_prio=19 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
";
        let a = attribute(&parse_trace(t), "rtlab-timer", 20_000);
        assert!(
            a[0].starts_with("rtlab-timer0 (pid 900) on CPU 1") && a[0].contains("ran 15 us later"),
            "{a:?}"
        );
    }

    #[test]
    fn several_thread_names_can_be_explained() {
        let a = attribute(&parse_trace(TRACE), "rtlab-pong|rtlab-timer", 8_100_000);
        assert!(a[0].starts_with("rtlab-timer0 (pid 900)"), "{a:?}");
        assert!(
            is_victim("rtlab-sub3", "rtlab-pong|rtlab-sub")
                && !is_victim("rtlab-spikewatch", "rtlab-pong|rtlab-sub")
                && !is_victim("x", "")
        );
    }

    #[test]
    fn a_host_stall_on_an_idle_cpu_is_said_to_be_one() {
        let ev = parse_trace(TWO_SPIKES);
        let (a, w) = attribute_spike(&ev, "rtlab-timer", 9_410_000, (0, 400_010_100_000), &[]);
        assert_eq!(w.unwrap().woken_ns, 400_009_400_000, "{a:?}");
        assert!(
            a.iter().any(|l| l.contains(
                "9.4 ms passed before the wake-up itself, and no task ran on CPU 1 then"
            ) && l.ends_with("the vCPU was not running (host stall?)")),
            "{a:?}"
        );
    }

    #[test]
    fn a_quiet_cpu_with_a_task_on_it_is_not_called_idle() {
        let t = "          <idle>-0       [001] d..2.   500.000000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=busy next_pid=77 next_prio=120
            busy-77      [001] dNh4.   500.009000: sched_wakeup: comm=rtlab-timer0 pid=900 prio=19 target_cpu=001
            busy-77      [001] d..2.   500.009010: sched_switch: prev_comm=busy prev_pid=77 prev_prio=120 prev_state=R ==> next_comm=rtlab-timer0 next_pid=900 next_prio=19
";
        let a = attribute(&parse_trace(t), "rtlab-timer", 9_010_000);
        assert!(
            a.iter().any(|l| l.contains("while busy (pid 77) was on it): interrupts were off")),
            "{a:?}"
        );
        // a trace that starts after the quiet time began says nothing about it
        let late = t.lines().skip(1).collect::<Vec<_>>().join("\n");
        let a = attribute(&parse_trace(&late), "rtlab-timer", 9_010_000);
        assert!(a.iter().any(|l| l.contains("the timer interrupt came late")), "{a:?}");
    }

    #[test]
    fn no_victim_says_so() {
        let a = attribute(&parse_trace(TRACE), "nobody", 1);
        assert_eq!(a.len(), 1);
        assert!(a[0].contains("no wake-up"));
    }
}
