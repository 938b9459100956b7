//! Spike evidence around any probe run (timer, udp, pubsub, and scenario cases), the lab's
//! side: what to collect ([`EvidenceOptions`]), rtlab-evidence's counter sampler and, with
//! `--trace-on-spike`, its tracer (every sample above the threshold, up to [`MAX_SPIKES`],
//! marked, its trace saved and explained) and rtla timerlat started around the run, a
//! tracer that cannot be armed said as the lab's error, and the result's evidence aligned
//! with the probe's streams. Reading, tracing, explaining and rendering are rtlab-evidence's.
//!
//! Contract: nothing here runs on a measuring thread (the probes only raise a
//! [`SpikeFlag`]); every tracefs change is journaled by the tracer and undone in `finish`
//! (or on drop, or by `rtlab tune restore` after a kill -9).

use crate::error::LabError;
use rtlab_core::evidence::{Evidence, ExplainedSpike, SpikeEvidence};
use rtlab_core::schema::Stream;
use rtlab_core::sink::{SpikeFlag, SpikeHook};
use rtlab_evidence::counters::CounterSampler;
use rtlab_evidence::timerlat::{TimerlatConfig, TimerlatRun};
use rtlab_evidence::tracer::{SpikeTracer, DEFAULT_TRACE_JOURNAL, MAX_SPIKES};
use rtlab_evidence::watch::SpikeCapture;
use rtlab_host::host::Host;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What to collect around one probe run.
#[derive(Clone, Debug)]
pub struct EvidenceOptions {
    /// The probe's window width (the counters are aligned with its windows).
    pub window_ns: i64,
    /// Sample the kernel counters per window.
    pub counters: bool,
    /// Arm ftrace and explain the samples above this (the first [`MAX_SPIKES`]).
    pub trace_on_spike_ns: Option<i64>,
    /// Thread-name prefix of the measuring threads whose wake-ups the tracer explains.
    pub victim: String,
    /// Where the trace around a spike is saved.
    pub trace_dir: PathBuf,
    /// Said in the result when the tracer cannot see the probe's samples (e.g. subscribers
    /// in other processes).
    pub notes: Vec<String>,
    /// CPUs the probe's threads run on (rtla timerlat watches these; empty: all).
    pub cpus: Vec<usize>,
    /// How long the probe should measure (rtla timerlat's -d; None: an hour, stopped early).
    pub planned: Option<Duration>,
    /// The stream names of the hook's sources (index = source), for the spike's `stream`.
    pub sources: Vec<String>,
    /// The flag the probe raises, when it keeps one across runs of the tracer (the monitor's
    /// canary); None: a new one.
    pub flag: Option<Arc<SpikeFlag>>,
}

impl EvidenceOptions {
    pub fn new(window_ns: i64, victim: &str) -> EvidenceOptions {
        EvidenceOptions {
            window_ns,
            counters: true,
            trace_on_spike_ns: None,
            victim: victim.into(),
            trace_dir: std::env::temp_dir(),
            notes: Vec::new(),
            cpus: Vec::new(),
            planned: None,
            sources: Vec::new(),
            flag: None,
        }
    }
}

/// The streams of `udp ping` that raise the spike flag, by source (the reflector: with
/// `--pair` and in scenarios, where it runs in this process).
pub const UDP_PING_SOURCES: [&str; 3] = ["ping", "ping.send_lateness", "reflector"];

/// The threads explained for a udp pair in this process: the pinger and the reflector.
pub const UDP_PAIR_THREADS: &str = "rtlab-udp-ping|rtlab-udp-refl";

struct Armed<'h> {
    threshold_ns: i64,
    flag: Arc<SpikeFlag>,
    tracer: SpikeTracer<'h>,
    watcher: std::thread::JoinHandle<Vec<SpikeCapture>>,
    watch_stop: Arc<AtomicBool>,
    /// rtla timerlat alongside, where the kernel has it.
    timerlat: Option<TimerlatRun>,
}

/// Collecting evidence while a probe runs; `finish` it with the probe's streams.
pub struct EvidenceRun<'h> {
    sampler: Option<CounterSampler>,
    armed: Option<Armed<'h>>,
    notes: Vec<String>,
    sources: Vec<String>,
}

/// Where the tracer journals (next to the profile journal, so `rtlab tune restore` finds it).
fn trace_journal() -> std::path::PathBuf {
    std::path::PathBuf::from(DEFAULT_TRACE_JOURNAL)
}

impl<'h> EvidenceRun<'h> {
    /// Start sampling and, with a threshold, arm the tracer. Err: the tracer could not be
    /// armed, one line naming what (a [`LabError::Missing`] when the machine lacks tracefs
    /// or the privilege: a scenario case is then skipped, with the fix).
    pub fn start(host: &'h dyn Host, o: &EvidenceOptions) -> Result<EvidenceRun<'h>, LabError> {
        let armed = match o.trace_on_spike_ns {
            None => None,
            Some(threshold_ns) => {
                let mut tracer =
                    SpikeTracer::arm(host, &trace_journal()).map_err(|e| match e.missing() {
                        Some(m) => LabError::Missing(rtlab_core::error::Missing {
                            what: format!("--trace-on-spike: {}", m.what),
                            ..m.clone()
                        }),
                        None => LabError::Failed(format!("--trace-on-spike: {e}")),
                    })?;
                tracer.avoid_cpus = o.cpus.clone();
                let flag = o.flag.clone().unwrap_or_default();
                let watch_stop = Arc::new(AtomicBool::new(false));
                let stamp = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis())
                    .unwrap_or(0);
                let file =
                    o.trace_dir.join(format!("rtlab-spike-{}-{stamp}.trace", std::process::id()));
                let watcher = tracer.watch_spikes(
                    flag.clone(),
                    watch_stop.clone(),
                    o.victim.clone(),
                    Duration::from_millis(5),
                    Some(file),
                    MAX_SPIKES,
                );
                let timerlat = start_timerlat(host, &mut tracer, o, threshold_ns);
                Some(Armed { threshold_ns, flag, tracer, watcher, watch_stop, timerlat })
            }
        };
        let sampler = o.counters.then(|| {
            let period = rtlab_evidence::counters::sample_period(o.window_ns);
            // 34 min of 1 s windows at 8 samples each (~4 MB) before neighbours merge (the
            // resolution halves, said in `resolution_ns`)
            CounterSampler::start_off(Duration::from_nanos(period as u64), 1 << 14, &o.cpus)
        });
        Ok(EvidenceRun { sampler, armed, notes: o.notes.clone(), sources: o.sources.clone() })
    }

    /// What the probe's recorders raise on a spike (None without `--trace-on-spike`).
    pub fn hook(&self) -> Option<SpikeHook> {
        self.armed.as_ref().map(|a| SpikeHook {
            threshold_ns: a.threshold_ns,
            flag: a.flag.clone(),
            source: 0,
        })
    }

    /// Stop sampling and watching, disarm (tracefs put back), align the counters with the
    /// streams' windows (the first stream that knows its start).
    pub fn finish(self, streams: &[Stream]) -> Evidence {
        let mut notes = self.notes;
        let counters = self.sampler.map(|s| {
            let sampled = s.stop();
            let base = streams.iter().find(|s| s.start_monotonic_ns.is_some()).or(streams.first());
            let width = base.map(|s| s.windows.width_ns).unwrap_or(sampled.period_ns);
            let start = base.and_then(|s| s.start_monotonic_ns);
            if start.is_none() {
                notes.push("the probe did not say when its windows start: the counters' windows start with the sampling (off by the probe's set-up time)".into());
            }
            // a sweep: streams of the headline's metric (other cases) that start elsewhere
            let sweep = base.zip(start).is_some_and(|(b, t0)| {
                streams.iter().filter(|s| s.metric == b.metric).filter_map(|s| s.start_monotonic_ns).any(|t| (t - t0).abs() > sampled.period_ns)
            });
            if sweep {
                notes.push(format!("the streams start at different times (a sweep of cases): the counters are aligned with the windows of '{}'", base.map(|s| s.name.as_str()).unwrap_or("")));
            }
            // no more windows than the stream (nor than the sampling periods without a stream)
            let max = base.map(|s| s.windows.max_ns.len()).unwrap_or(sampled.deltas.len() + 1);
            sampled.align(start, width, max)
        });
        let spike = self.armed.map(|a| {
            a.watch_stop.store(true, Ordering::Relaxed);
            let captures = a.watcher.join().unwrap_or_default();
            if captures.len() >= MAX_SPIKES {
                notes.push(format!("the tracer explains the first {MAX_SPIKES} samples above the threshold: later ones were not traced"));
            }
            let timerlat = a.timerlat.map(|t| t.stop()).and_then(|r| serde_json::to_value(r).ok());
            notes.extend(a.tracer.notes.iter().cloned());
            let restore = a.tracer.disarm();
            if !restore.is_clean() {
                notes.push(format!(
                    "tracefs NOT fully restored ({} changes): run `rtlab tune restore`",
                    restore.failed.len()
                ));
            }
            let spikes: Vec<ExplainedSpike> = captures
                .into_iter()
                .map(|c| ExplainedSpike {
                    stream: self.sources.get(c.source as usize).filter(|s| !s.is_empty()).cloned(),
                    index: c.index,
                    at_ns: c.at_ns,
                    value_ns: c.value_ns,
                    trace_file: c.trace_file,
                    attribution: c.attribution,
                })
                .collect();
            match spikes.first().cloned() {
                None => {
                    SpikeEvidence { threshold_ns: a.threshold_ns, timerlat, ..Default::default() }
                }
                Some(c) => SpikeEvidence {
                    threshold_ns: a.threshold_ns,
                    stream: c.stream,
                    index: Some(c.index),
                    at_ns: Some(c.at_ns),
                    value_ns: Some(c.value_ns),
                    trace_file: c.trace_file,
                    attribution: c.attribution,
                    timerlat,
                    spikes,
                },
            }
        });
        Evidence { counters, spike, notes }
    }
}

/// rtla timerlat alongside the probe when the kernel and the machine have it (its leftovers
/// after a crash journaled first, in the tracer's session); None otherwise (the tracer's
/// notes say what is missing).
fn start_timerlat(
    host: &dyn Host,
    tracer: &mut SpikeTracer<'_>,
    o: &EvidenceOptions,
    threshold_ns: i64,
) -> Option<TimerlatRun> {
    let cfg = TimerlatConfig {
        cpus: o.cpus.clone(),
        threshold_us: (threshold_ns / 1_000).max(1) as u64,
        // below the probe's threads (FIFO 80 in rtlab's profiles): it must not delay them
        priority: Some(70),
        period_us: 1_000,
        duration: o
            .planned
            .map(|d| d + Duration::from_secs(2))
            .unwrap_or(Duration::from_secs(3600)),
        trace_file: Some(o.trace_dir.join(format!("rtlab-timerlat-{}.trace", std::process::id()))),
    };
    tracer.start_timerlat(host, &cfg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::testing::stream;

    #[test]
    fn only_a_sweep_of_cases_is_said_to_start_elsewhere() {
        let run = |streams: &[Stream]| {
            let host = rtlab_host::host::RealHost::new();
            let mut o = EvidenceOptions::new(1_000, "x");
            o.counters = true;
            EvidenceRun::start(&host, &o).unwrap().finish(streams).notes
        };
        let mut other = stream("reflector", vec![Some(1)], Some(10 + 5_000_000_000));
        other.metric = "turnaround".into();
        let pair = [stream("ping", vec![Some(1)], Some(10)), other];
        assert!(run(&pair).is_empty(), "another metric starting elsewhere is not a sweep");
        let sweep = [
            stream("case0.sub0", vec![Some(1)], Some(10)),
            stream("case1.sub0", vec![Some(1)], Some(10 + 5_000_000_000)),
        ];
        let notes = run(&sweep);
        assert!(
            notes.iter().any(|n| n.contains("a sweep of cases") && n.contains("'case0.sub0'")),
            "{notes:?}"
        );
    }
}
