//! A case's loads watched while it measures: when a load's process ends before the case
//! does (killed from outside, crashed, out of memory), the time is noted, so the result can
//! say which windows measured without it ([`ended_warnings`]).
//!
//! Contract: a thread polls `/proc/PID/stat` of each load's processes every 20 ms (a dead
//! child stays a zombie until the load is stopped, so its state `Z` or a missing entry is
//! its end); the first end of each load is kept with its CLOCK_MONOTONIC time. Reads only;
//! stopped and joined by [`LoadWatch::stop`].

use rtlab_core::schema::ResultDocument;
use rtlab_core::warnings::Warn;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A load's end seen while the case measured: its name and CLOCK_MONOTONIC time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadEnded {
    pub load: String,
    pub at_ns: i64,
}

pub struct LoadWatch {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<LoadEnded>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // the state follows the command name, which is in parentheses and may hold spaces
        Ok(s) => s.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().next()) == Some("Z"),
        Err(_) => true,
    }
}

impl LoadWatch {
    /// Watch `loads` (name, process ids); nothing to watch: no thread.
    pub fn start(loads: Vec<(String, Vec<u32>)>) -> LoadWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let seen: Arc<Mutex<Vec<LoadEnded>>> = Arc::default();
        let thread = (!loads.is_empty()).then(|| {
            let (stop, seen) = (stop.clone(), seen.clone());
            std::thread::Builder::new()
                .name("rtlab-loadwatch".into())
                .spawn(move || {
                    let mut left = loads;
                    while !stop.load(Ordering::Relaxed) && !left.is_empty() {
                        left.retain(|(name, pids)| {
                            if pids.iter().any(|&p| gone(p)) {
                                let at_ns = rtlab_sys::clock::monotonic_ns();
                                seen.lock()
                                    .unwrap_or_else(|e| e.into_inner())
                                    .push(LoadEnded { load: name.clone(), at_ns });
                                return false;
                            }
                            true
                        });
                        std::thread::sleep(Duration::from_millis(20));
                    }
                })
                .expect("a thread")
        });
        LoadWatch { stop, seen, thread }
    }

    /// Stop watching; the loads that ended meanwhile.
    pub fn stop(mut self) -> Vec<LoadEnded> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The warnings of loads that ended while `doc` measured: when (seconds from the start of
/// its first stream) and from which window on (its first stream's windows), with why
/// (`load_report`'s `ended`, the load's own last words, when it has them).
pub fn ended_warnings(
    ended: &[LoadEnded],
    doc: &ResultDocument,
    load_report: Option<&serde_json::Value>,
) -> Vec<Warn> {
    let first = doc.streams.iter().find(|s| s.start_monotonic_ns.is_some());
    let start = first.and_then(|s| s.start_monotonic_ns);
    let width = first.map(|s| s.windows.width_ns).filter(|w| *w > 0);
    let end_ns = start.map(|s| s + doc.duration_ns);
    ended
        .iter()
        // a load that ended after the measurement (while the case was torn down) is no news
        .filter(|e| end_ns.map_or(true, |end| e.at_ns < end))
        .map(|e| {
            let after_ns = start.map(|s| (e.at_ns - s).max(0));
            let why = load_report
                .and_then(|r| r.as_array())
                .and_then(|a| a.iter().find(|l| l["name"] == e.load.as_str()))
                .and_then(|l| l["ended"].as_str())
                .unwrap_or("its process ended")
                .to_string();
            Warn::LoadEnded {
                load: e.load.clone(),
                after_ms: after_ns.map(|n| n / 1_000_000),
                window: after_ns.zip(width).map(|(n, w)| (n / w) as u64),
                why,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_end_inside_the_measurement_names_its_time_window_and_why() {
        // a real timer document, its first stream started at 10 us, 1 s windows, 4 s long
        let mut doc: ResultDocument = serde_json::from_str(include_str!(
            "../../../rtlab-report/tests/data/timer-idle-fifo-1ms.json"
        ))
        .unwrap();
        doc.duration_ns = 4_000_000_000;
        for s in &mut doc.streams {
            s.start_monotonic_ns = Some(10_000);
            s.windows.width_ns = 1_000_000_000;
        }
        let report = serde_json::json!([{"name": "cpu", "ended": "stress-ng died (signal: 9)"}]);
        let ended = [
            LoadEnded { load: "cpu".into(), at_ns: 10_000 + 2_500_000_000 },
            // after the measurement: the case's own teardown, not news
            LoadEnded { load: "udp-tx".into(), at_ns: 10_000 + 4_000_000_001 },
        ];
        let w = ended_warnings(&ended, &doc, Some(&report));
        assert_eq!(
            w,
            [Warn::LoadEnded {
                load: "cpu".into(),
                after_ms: Some(2500),
                window: Some(2),
                why: "stress-ng died (signal: 9)".into()
            }]
        );
        assert!(w[0].message().contains("ended 2.5 s into the measurement (window 2)"));
    }

    #[test]
    fn a_dead_process_is_seen_and_a_live_one_is_not() {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let me = std::process::id();
        // `true` ends at once and stays a zombie until waited for
        let watch = LoadWatch::start(vec![("gone".into(), vec![c.id()]), ("me".into(), vec![me])]);
        std::thread::sleep(Duration::from_millis(300));
        let seen = watch.stop();
        let _ = c.wait();
        assert_eq!(seen.iter().map(|e| e.load.as_str()).collect::<Vec<_>>(), ["gone"]);
    }
}
