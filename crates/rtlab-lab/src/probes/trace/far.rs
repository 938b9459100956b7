//! `rtlab trace --far SPEC`: the far side's application traced by the agent there (the same
//! interposer, or uprobes for its running processes), its events brought back and joined
//! with this host's.
//!
//! Contract: the far clock's offset is measured over the link before the trace starts and
//! after it stops (`far::clock`); on one host (a namespace) the clocks are one and the far
//! times are taken as they are (the measurement is said beside them as a check); across
//! hosts each far time is mapped to this host's clock through the offset interpolated
//! between the two, and every figure that crosses the hosts carries their uncertainty. Far
//! processes are keyed by their pid negated (`analysis::far_key`) and named with their host.
//! The far kernel's counters per window are the document's `far` section, as for every probe
//! with a far side. However the run ends, the far side is finished (its application stopped,
//! its host restored).

use crate::error::LabError;
use crate::far::clock::{self, Offsets};
use crate::far::link::REQUEST_TIMEOUT;
use crate::far::protocol::{EventPage, FarTrace, FarTraced, Request, PAGE_EVENTS};
use crate::far::run::FarRun;
use crate::far::{Clocks, FarSpec};
use rtlab_core::schema::FarSide;
use rtlab_pubsub::trace::analysis::{far_key, ProcessEvents};
use rtlab_pubsub::trace::run::{Ended, TraceOutcome};
use serde_json::json;

/// The far side while the trace runs.
pub struct FarTracing<'a> {
    run: FarRun<'a>,
    before: clock::ClockOffset,
}

/// What the far side traced, on this host's clock.
pub struct FarOutcome {
    pub side: FarSide,
    pub traced: Result<TraceOutcome, LabError>,
    /// The clock's facts (`config.trace.clock`).
    pub clock: serde_json::Value,
    /// The uncertainty of a figure across the hosts (0: one clock).
    pub uncertainty_ns: i64,
}

/// Open the far side, measure its clock, start its trace.
pub fn start<'a>(
    ctx_link: Option<&'a crate::far::link::FarLink>,
    spec: &FarSpec,
    trace: FarTrace,
    window_ns: Option<i64>,
) -> Result<FarTracing<'a>, LabError> {
    let clocks = if spec.same_clock() { Clocks::OneHost } else { Clocks::MeasuredOffset };
    let run = FarRun::start_unaddressed(ctx_link, spec, clocks, window_ns)?;
    let before = clock::measure(run.link())?;
    if let Err(e) = run.link().request(Request::Trace { trace }, REQUEST_TIMEOUT) {
        drop(run.finish());
        return Err(e);
    }
    Ok(FarTracing { run, before })
}

impl FarTracing<'_> {
    /// Stop the far trace, bring its events here, finish the far side.
    pub fn finish(self) -> FarOutcome {
        let FarTracing { run, before } = self;
        let link = run.link();
        let traced = link.ask::<FarTraced>(Request::StopTrace, REQUEST_TIMEOUT);
        let after = clock::measure(link);
        let host = run.facts.host.clone();
        let one_host = run.clocks == Clocks::OneHost;
        let (offsets, clock) = match after {
            Ok(after) => {
                let o = Offsets { before, after };
                let clock = json!({
                    "clocks": if one_host { "one-host" } else { "measured-offset" },
                    "applied": !one_host,
                    "before": before,
                    "after": after,
                    "uncertainty_ns": if one_host { 0 } else { o.uncertainty_ns() },
                    "drift_ns": o.drift_ns(),
                });
                (Ok(o), clock)
            }
            Err(e) => (
                Err(e),
                json!({"clocks": if one_host { "one-host" } else { "measured-offset" }, "before": before}),
            ),
        };
        let uncertainty_ns = match &offsets {
            Ok(o) if !one_host => o.uncertainty_ns(),
            _ => 0,
        };
        let traced = traced.and_then(|t| {
            let offsets = offsets?;
            let map = |t: i64| if one_host { t } else { offsets.to_near(t) };
            fetch(&run, &t, &host, map)
        });
        let side = run.finish();
        FarOutcome { side, traced, clock, uncertainty_ns }
    }
}

/// Every page of every far process's events, mapped to this host's clock and keys.
fn fetch(
    run: &FarRun<'_>,
    t: &FarTraced,
    host: &str,
    map: impl Fn(i64) -> i64,
) -> Result<TraceOutcome, LabError> {
    let mut events = Vec::with_capacity(t.events.len());
    for (process, &(pid, n)) in t.events.iter().enumerate() {
        let mut p = ProcessEvents { pid: far_key(pid), events: Vec::with_capacity(n) };
        while p.events.len() < n {
            let page: EventPage = run
                .link()
                .ask(Request::TraceEvents { process, from: p.events.len() }, REQUEST_TIMEOUT)?;
            if page.events.is_empty() {
                break;
            }
            p.events.extend(page.events.into_iter().take(PAGE_EVENTS).map(|mut e| {
                e.time_ns = map(e.time_ns);
                e
            }));
        }
        events.push(p);
    }
    let mut processes = t.processes.clone();
    for p in &mut processes {
        p.host = Some(host.to_string());
    }
    let mut notes: Vec<String> = t.notes.iter().map(|n| format!("far side: {n}")).collect();
    let ended = match &t.ended {
        Ended::Exited(w) => format!("it ended by itself ({w})"),
        Ended::Duration(w) => format!("it was stopped at the duration ({w})"),
        Ended::Stopped(w) => format!("it was stopped with this run ({w})"),
    };
    notes.push(format!("far side's application ({host}): {ended}"));
    Ok(TraceOutcome {
        processes,
        events,
        ended: t.ended.clone(),
        not_kept: t.not_kept,
        start_monotonic_ns: map(t.start_monotonic_ns),
        end_monotonic_ns: map(t.end_monotonic_ns),
        notes,
    })
}

/// This host's outcome and the far side's as one (this host's end said, the far one's in a
/// note); with nothing traced here, the far side's.
pub fn merge(near: Option<TraceOutcome>, far: TraceOutcome) -> TraceOutcome {
    let Some(mut o) = near else { return far };
    o.processes.extend(far.processes);
    o.events.extend(far.events);
    o.not_kept += far.not_kept;
    o.notes.extend(far.notes);
    o.start_monotonic_ns = o.start_monotonic_ns.min(far.start_monotonic_ns);
    o.end_monotonic_ns = o.end_monotonic_ns.max(far.end_monotonic_ns);
    o
}
