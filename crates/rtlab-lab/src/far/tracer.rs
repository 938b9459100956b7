//! The agent's side of `rtlab trace --far`: the far application traced in a thread of the
//! agent's own, exactly as the near side traces its own (the interposer for a command,
//! uprobes for running processes), kept until the near side has read its events.
//!
//! Contract: [`Tracer::start`] answers once the trace runs, or with one line why it could not
//! start (a command not found, a pid without libtracetools, no uprobes): a trace that
//! failed within its first second is an error, not an empty trace. [`Tracer::stop`] stops it
//! (the application's process group gets SIGINT, SIGKILL 5 s later, as near) and keeps the
//! outcome; its events are then read in pages of [`PAGE_EVENTS`]. A dropped tracer (the
//! agent finishing, the link lost) stops its trace the same way.

use super::protocol::{EventPage, FarError, FarTrace, FarTraced, PAGE_EVENTS};
use rtlab_pubsub::trace::run::{run, TraceOutcome, TraceRun};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

type Traced = Result<TraceOutcome, String>;

/// A far trace: running, or stopped with its outcome.
#[derive(Default)]
pub struct Tracer {
    running: Option<(Arc<AtomicBool>, JoinHandle<Traced>)>,
    outcome: Option<TraceOutcome>,
}

/// How long a start is watched for a failure.
const START_WATCH: Duration = Duration::from_secs(1);

fn trace(t: &FarTrace, stop: &AtomicBool) -> Traced {
    let duration = t.duration_ns.map(|d| Duration::from_nanos(d.max(0) as u64));
    if t.command.is_empty() {
        return crate::probes::trace::pids::probe(&t.pid, duration, stop)
            .map_err(|e| e.to_string());
    }
    let mut tr = TraceRun::new(t.command.clone());
    tr.duration = duration;
    tr.slots = t.slots;
    run(&tr, stop).map_err(|e| e.to_string())
}

impl Tracer {
    /// Start tracing `t` (one trace at a time).
    pub fn start(&mut self, t: FarTrace) -> Result<serde_json::Value, FarError> {
        if self.running.is_some() {
            return Err(FarError::new("a trace runs there already"));
        }
        if t.command.is_empty() == t.pid.is_empty() {
            return Err(FarError::new("trace: a command or pids, one of the two"));
        }
        self.outcome = None;
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let h = std::thread::spawn(move || trace(&t, &s2));
        let began = Instant::now();
        while began.elapsed() < START_WATCH && !h.is_finished() {
            std::thread::sleep(Duration::from_millis(10));
        }
        if h.is_finished() {
            return match h.join() {
                Ok(Ok(o)) => {
                    self.outcome = Some(o);
                    Ok(serde_json::Value::Null)
                }
                Ok(Err(e)) => Err(FarError::new(format!("trace: {e}"))),
                Err(_) => Err(FarError::new("trace: its thread panicked")),
            };
        }
        self.running = Some((stop, h));
        Ok(serde_json::Value::Null)
    }

    /// Stop the trace (or take the one that ended by itself): all but its events.
    pub fn stop(&mut self) -> Result<FarTraced, FarError> {
        if let Some((stop, h)) = self.running.take() {
            stop.store(true, Ordering::Relaxed);
            let o = h
                .join()
                .map_err(|_| FarError::new("trace: its thread panicked"))?
                .map_err(|e| FarError::new(format!("trace: {e}")))?;
            self.outcome = Some(o);
        }
        let o = self.outcome.as_ref().ok_or_else(|| FarError::new("no trace ran there"))?;
        Ok(FarTraced {
            processes: o.processes.clone(),
            ended: o.ended.clone(),
            not_kept: o.not_kept,
            start_monotonic_ns: o.start_monotonic_ns,
            end_monotonic_ns: o.end_monotonic_ns,
            notes: o.notes.clone(),
            events: o.events.iter().map(|p| (p.pid, p.events.len())).collect(),
        })
    }

    /// A page of the stopped trace's events.
    pub fn page(&self, process: usize, from: usize) -> Result<EventPage, FarError> {
        let o = self.outcome.as_ref().ok_or_else(|| FarError::new("no trace stopped there"))?;
        let p = o
            .events
            .get(process)
            .ok_or_else(|| FarError::new(format!("trace events: no process {process}")))?;
        let from = from.min(p.events.len());
        let to = (from + PAGE_EVENTS).min(p.events.len());
        Ok(EventPage { pid: p.pid, events: p.events[from..to].to_vec() })
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        if let Some((stop, h)) = self.running.take() {
            stop.store(true, Ordering::Relaxed);
            let _ = h.join();
        }
    }
}
