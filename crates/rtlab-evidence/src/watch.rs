//! The spike watcher: each time the probe raises its [`SpikeFlag`] the watcher marks the
//! trace, re-arms the flag, and hands the spike to a reader thread that reads the trace
//! (tracing goes on), saves the part around the spike and explains it
//! ([`crate::explain::attribute_spike`]), up to a bound per run: on a guest whose host
//! stalls it for milliseconds, the first spike is often not the one under study.
//!
//! Contract: the watcher and its reader run on helper threads off the probe's CPUs; they only
//! poll atomics and touch tracefs files (trace_marker, tracing_on, trace). The hot loop only
//! raises the flag.

use crate::counters::steal_ticks;
use crate::explain::{attribute_spike, Wakeup};
use crate::trace::{parse_trace, Event};
use rtlab_core::sink::SpikeFlag;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SpikeCapture {
    /// Which stream crossed the threshold (the probe's hook source).
    #[serde(default)]
    pub source: u32,
    pub index: u64,
    pub at_ns: i64,
    pub value_ns: i64,
    /// Where the trace was saved.
    pub trace_file: Option<String>,
    /// The explanation, most important first.
    pub attribution: Vec<String>,
}

/// How much of the trace before a spike's window is saved with it (the tasks and priorities
/// on the CPU before the wake-up).
const SAVED_CONTEXT_NS: u64 = 100_000_000;

/// The spike watcher's state (it runs on its own thread, off the probe's CPUs).
pub(crate) struct Watcher {
    pub(crate) dir: PathBuf,
    pub(crate) proc_stat: PathBuf,
    pub(crate) avoid: Vec<usize>,
    pub(crate) flag: Arc<SpikeFlag>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) victim: String,
    pub(crate) after: Duration,
    pub(crate) save_to: Option<PathBuf>,
    pub(crate) max_spikes: usize,
}

/// Where the `n`-th spike's trace goes (1-based): `save_to` itself for the first,
/// `name-n.ext` for the others.
pub fn nth_trace_file(save_to: &Path, n: usize) -> PathBuf {
    if n <= 1 {
        return save_to.to_path_buf();
    }
    let stem = save_to.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match save_to.extension() {
        Some(e) => format!("{stem}-{n}.{}", e.to_string_lossy()),
        None => format!("{stem}-{n}"),
    };
    save_to.with_file_name(name)
}

/// The trace's header lines and its event lines from `from_ns` on (lines that are not events,
/// such as lost-event notes, are kept).
fn trace_from(text: &str, from_ns: u64) -> String {
    let mut out = String::with_capacity(text.len().min(1 << 20));
    for l in text.lines() {
        let keep = match parse_trace(l).first() {
            Some(e) => e.ts_ns >= from_ns,
            None => true,
        };
        if keep {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// The trace timestamp of the first `tracing_mark_write` whose text starts with `prefix`.
fn mark_ts(events: &[Event], prefix: &str) -> Option<u64> {
    events
        .iter()
        .find(|e| e.name == "tracing_mark_write" && e.fields.starts_with(prefix))
        .map(|e| e.ts_ns)
}

/// What the reader carries from one spike to the next.
#[derive(Default)]
struct Explained {
    /// The wake-ups explained so far (a later spike does not explain them again).
    wakeups: Vec<Wakeup>,
    /// Trace time of the last re-arm seen: the next spike's wake-up ran after it, less its value.
    armed_ts: u64,
    /// Steal ticks per CPU at the previous read (or when watching started).
    steal: Vec<u64>,
}

/// A spike marked in the trace, waiting to be explained.
struct Marked {
    n: usize,
    source: u32,
    index: u64,
    at_ns: i64,
    value_ns: i64,
}

impl Watcher {
    /// Mark each spike at once and hand it to a reader thread: reading the whole trace takes
    /// up to a second on a loaded guest, and a spike that rises meanwhile must still be marked
    /// when it happens (its mark bounds the wake-ups that can explain it).
    pub(crate) fn run(self) -> Vec<SpikeCapture> {
        // never compete with the probe: a profile may have made the process FIFO
        crate::helper::stay_off(&self.avoid);
        let (tx, rx) = std::sync::mpsc::channel::<Marked>();
        std::thread::scope(|scope| {
            let reader = std::thread::Builder::new()
                .name("rtlab-spikeread".into())
                .spawn_scoped(scope, || {
                    crate::helper::stay_off(&self.avoid);
                    self.read(rx)
                })
                .expect("spawn the spike reader");
            let mut n = 0;
            loop {
                if let Some((index, at_ns, value_ns)) = self.flag.get() {
                    let source = self.flag.source.load(Ordering::Acquire);
                    n += 1;
                    let last = n >= self.max_spikes;
                    let _ = std::fs::write(
                        self.dir.join("trace_marker"),
                        format!("rtlab spike {n}: sample {index} late by {value_ns} ns"),
                    );
                    std::thread::sleep(self.after);
                    if last {
                        let _ = std::fs::write(self.dir.join("tracing_on"), "0");
                    } else {
                        // re-arm: a sample from now on raises the flag again (the tail of
                        // this spike, within `after`, does not)
                        use std::sync::atomic::Ordering::Release;
                        self.flag.hit.store(false, Release);
                        self.flag.claimed.store(false, Release);
                        let _ = std::fs::write(
                            self.dir.join("trace_marker"),
                            format!("rtlab spike {n}: re-armed"),
                        );
                    }
                    let _ = tx.send(Marked { n, source, index, at_ns, value_ns });
                    if last {
                        break;
                    }
                    continue;
                }
                if self.stop.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            drop(tx);
            reader.join().unwrap_or_default()
        })
    }

    /// Steal ticks per CPU now (/proc/stat), empty when unreadable.
    fn steal_ticks(&self) -> Vec<u64> {
        steal_ticks(&std::fs::read_to_string(&self.proc_stat).unwrap_or_default())
    }

    /// Explain the marked spikes in order: one read of the trace (tracing goes on) for all
    /// those waiting.
    fn read(&self, rx: std::sync::mpsc::Receiver<Marked>) -> Vec<SpikeCapture> {
        let mut state = Explained { steal: self.steal_ticks(), ..Default::default() };
        let mut captures = Vec::new();
        while let Ok(first) = rx.recv() {
            let batch: Vec<Marked> = std::iter::once(first).chain(rx.try_iter()).collect();
            let text = std::fs::read_to_string(self.dir.join("trace")).unwrap_or_default();
            let events = parse_trace(&text);
            let steal = self.steal_ticks();
            for m in batch {
                let (trace_file, attribution) =
                    self.explain(&m, &text, &events, &steal, &mut state);
                captures.push(SpikeCapture {
                    source: m.source,
                    index: m.index,
                    at_ns: m.at_ns,
                    value_ns: m.value_ns,
                    trace_file,
                    attribution,
                });
            }
            state.steal = steal;
        }
        captures
    }

    /// Explain one marked spike from the trace read, save the trace around it: (where it was
    /// saved, the explanation).
    fn explain(
        &self,
        m: &Marked,
        text: &str,
        events: &[Event],
        steal: &[u64],
        state: &mut Explained,
    ) -> (Option<String>, Vec<String>) {
        let n = m.n;
        if n > 1 {
            if let Some(t) = mark_ts(events, &format!("rtlab spike {}: re-armed", n - 1)) {
                state.armed_ts = t;
            }
        }
        let marked = mark_ts(events, &format!("rtlab spike {n}: sample "));
        // a wake-up that made this sample late ran after the flag could be raised again,
        // less the sample's value (it was woken that long before), and before the mark
        let from = state.armed_ts.saturating_sub(m.value_ns.max(0) as u64 + 1_000_000);
        let until = marked.map(|t| t + 100_000).unwrap_or(u64::MAX);
        let (mut attribution, wake) =
            attribute_spike(events, &self.victim, m.value_ns, (from, until), &state.wakeups);
        if let Some(w) = wake {
            let grew =
                steal.get(w.cpu).zip(state.steal.get(w.cpu)).map(|(a, b)| a.saturating_sub(*b));
            if let Some(d) = grew.filter(|d| *d > 0) {
                let since = if n == 1 { "tracing started" } else { "the previous spike" };
                attribution.push(format!(
                    "steal time on CPU {} since {since}: {d} ticks of 10 ms (/proc/stat): {}",
                    w.cpu, "the hypervisor ran something else"
                ));
            }
            state.wakeups.push(w);
        }
        let mut saved = None;
        if let Some(p) = &self.save_to {
            let p = nth_trace_file(p, n);
            // the first spike keeps the whole buffer; a later one the part around it
            let ok = if n == 1 {
                std::fs::write(&p, text)
            } else {
                std::fs::write(&p, trace_from(text, from.saturating_sub(SAVED_CONTEXT_NS)))
            };
            saved = ok.is_ok().then(|| p.display().to_string());
        }
        (saved, attribution)
    }
}

// ------------------------------------------------------------------ parsing and attribution

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::TWO_SPIKES;

    #[test]
    fn each_spike_explains_its_own_wake_up() {
        let ev = parse_trace(TWO_SPIKES);
        let m1 = mark_ts(&ev, "rtlab spike 1: sample ").unwrap();
        let (_, first) = attribute_spike(&ev, "rtlab-timer", 9_410_000, (0, m1), &[]);
        let first = first.unwrap();
        // spike 2: wake-ups that ran since the re-arm, less its value; the hog is named
        let armed = mark_ts(&ev, "rtlab spike 1: re-armed").unwrap();
        let m2 = mark_ts(&ev, "rtlab spike 2: sample ").unwrap();
        let from = armed - 19_000_000 - 1_000_000;
        let (a, w) = attribute_spike(
            &ev,
            "rtlab-timer",
            19_000_000,
            (from, m2),
            std::slice::from_ref(&first),
        );
        assert_eq!(w.unwrap().woken_ns, 400_101_000_000);
        assert!(
            a.iter().any(|l| l == "preempted by pid 950 (rtlab-hog, kernel prio 9) for 19.0 ms"),
            "{a:?}"
        );
        // a window holding both: the first spike's wake-up is not explained twice
        let (_, again) =
            attribute_spike(&ev, "rtlab-timer", 19_000_000, (0, m2), std::slice::from_ref(&first));
        assert_ne!(again.unwrap(), first);
        // nothing else left to explain
        let (a, none) = attribute_spike(&ev, "rtlab-timer", 1, (0, m1), &[first]);
        assert!(none.is_none() && a[0].starts_with("no wake-up of 'rtlab-timer*'"), "{a:?}");
    }

    #[test]
    fn later_spikes_get_numbered_files_and_the_trace_around_them() {
        let p = Path::new("/tmp/rtlab-spike-1-2.trace");
        assert_eq!(nth_trace_file(p, 1), p);
        assert_eq!(nth_trace_file(p, 3), Path::new("/tmp/rtlab-spike-1-2-3.trace"));
        assert_eq!(nth_trace_file(Path::new("/tmp/x"), 2), Path::new("/tmp/x-2"));
        let t = format!("# tracer: nop\n{TWO_SPIKES}");
        let part = trace_from(&t, 400_100_000_000);
        assert!(part.starts_with("# tracer: nop\n"));
        assert_eq!(parse_trace(&part).len(), 4, "{part}");
    }
}
