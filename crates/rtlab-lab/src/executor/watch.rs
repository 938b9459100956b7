//! A case watched from outside while it measures: what happens to it that its probe cannot
//! see, noted with the time, so the result can say in which window it happened.
//!
//! - a load's process ending before the case does (killed from outside, crashed, out of
//!   memory): the windows from there on measured without it ([`ended_warnings`]);
//! - CLOCK_REALTIME stepped (an NTP/chrony step, `date -s`): one-way figures stamped on the
//!   wall clock are invalid in that window;
//! - the far side's agent stopped (SIGSTOP: the far computer stalling), when it runs on this
//!   machine;
//! - the link across which the case measures losing its carrier (a cable unplugged, a veth
//!   set down);
//! - the resident memory of rtlab and of a local far agent, once a second (a long case's
//!   memory must stay flat);
//! - the far side ending (its agent killed, its computer gone): the case stops there, its
//!   figures those of what was sent before, instead of counting the rest of its time lost.
//!
//! The case's stop flag is the watch's: set when the run's is (Ctrl-C, within one poll)
//! or when the far side ended.
//! Contract: one thread polls every [`POLL`]: `/proc/PID/stat` of each load's processes (a
//! dead child stays a zombie until the load is stopped, so its state `Z` or a missing entry
//! is its end) and of the agent (state `T`: stopped), the offset CLOCK_REALTIME -
//! CLOCK_MONOTONIC (a change above [`STEP_NS`] between two polls is a step; a pair of reads
//! with more than 200 us between them is not used), SIOCGIFFLAGS of the link's interface
//! through a socket made in its namespace (IFF_RUNNING). Reads only; stopped and joined by
//! [`CaseWatch::stop`]. Memory: at most [`MAX_RSS_SAMPLES`] samples a process, then every
//! other one is dropped and the interval doubles.

use rtlab_core::cost::{RssSample, MAX_RSS_SAMPLES};
use rtlab_core::schema::ResultDocument;
use rtlab_core::warnings::Warn;
use rtlab_sys::clock::{monotonic_ns, realtime_ns};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the watch looks.
pub const POLL: Duration = Duration::from_millis(50);
/// A change of CLOCK_REALTIME - CLOCK_MONOTONIC above this between two polls is a step
/// (slewing moves it at most 500 ppm: 25 us in a poll).
pub const STEP_NS: i64 = 1_000_000;

/// A load's end seen while the case measured: its name and CLOCK_MONOTONIC time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadEnded {
    pub load: String,
    pub at_ns: i64,
}

/// From when to when something lasted (CLOCK_MONOTONIC; `to_ns` None: still so at the stop).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub from_ns: i64,
    pub to_ns: Option<i64>,
}

/// What to watch.
#[derive(Clone, Default)]
pub struct WatchSpec {
    /// Each load's name and process ids.
    pub loads: Vec<(String, Vec<u32>)>,
    /// The far side's agent, when it runs on this machine.
    pub agent: Option<u32>,
    /// The link the case measures across: a network namespace's path and the interface
    /// there (a scenario case's pair: side a's end).
    pub link: Option<(String, String)>,
    /// The far side: its end stops the case.
    pub far: Option<crate::far::link::FarHandle>,
    /// The run's stop flag (Ctrl-C), passed on to the case's.
    pub run_stop: Option<Arc<AtomicBool>>,
}

/// What the watch saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    pub loads: Vec<LoadEnded>,
    /// When (CLOCK_MONOTONIC) and by how much CLOCK_REALTIME stepped, ns.
    pub clock_steps: Vec<(i64, i64)>,
    pub far_stopped: Vec<Span>,
    /// The link's interface and when it had no carrier.
    pub link: Option<String>,
    pub link_down: Vec<Span>,
    /// process, CLOCK_MONOTONIC time, VmRSS KiB.
    pub rss: Vec<(String, i64, u64)>,
    /// When the far side ended, and why.
    pub far_ended: Option<(i64, String)>,
}

pub struct CaseWatch {
    /// The case's stop flag: the probe's `Context::stop`.
    pub case_stop: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn stat_state(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // the state follows the command name, which is in parentheses and may hold spaces
    s.rsplit_once(')')?.1.split_whitespace().next()?.chars().next()
}

fn gone(pid: u32) -> bool {
    matches!(stat_state(pid), None | Some('Z') | Some('X'))
}

/// CLOCK_REALTIME - CLOCK_MONOTONIC, when both were read within 200 us.
fn clock_offset() -> Option<i64> {
    let m0 = monotonic_ns();
    let r = realtime_ns();
    let m1 = monotonic_ns();
    (m1 - m0 <= 200_000).then(|| r - (m0 + m1) / 2)
}

/// Opens and closes spans of a condition polled.
#[derive(Default)]
struct Spans {
    open: Option<i64>,
}

impl Spans {
    fn poll(&mut self, on: bool, now: i64, out: &mut Vec<Span>) {
        match (on, self.open) {
            (true, None) => {
                self.open = Some(now);
                out.push(Span { from_ns: now, to_ns: None });
            }
            (false, Some(_)) => {
                self.open = None;
                if let Some(s) = out.last_mut() {
                    s.to_ns = Some(now);
                }
            }
            _ => {}
        }
    }
}

/// Keep at most [`MAX_RSS_SAMPLES`] of `process`: every other one dropped; true when it did.
fn thin(rss: &mut Vec<(String, i64, u64)>, process: &str) -> bool {
    if rss.iter().filter(|s| s.0 == process).count() < MAX_RSS_SAMPLES {
        return false;
    }
    let mut i = 0usize;
    rss.retain(|s| {
        if s.0 != process {
            return true;
        }
        i += 1;
        i % 2 == 1
    });
    true
}

impl CaseWatch {
    /// Start watching (one thread; a link whose namespace cannot be entered is not watched).
    pub fn start(spec: WatchSpec) -> CaseWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let seen: Arc<Mutex<Seen>> = Arc::default();
        let link = spec.link.as_ref().and_then(|(ns, dev)| {
            let sock =
                rtlab_sys::net::socket_in_netns(ns, || std::net::UdpSocket::bind("0.0.0.0:0"))
                    .ok()?
                    .ok()?;
            rtlab_sys::net::link_running(&sock, dev).ok()?;
            Some((sock, dev.clone()))
        });
        seen.lock().unwrap_or_else(|e| e.into_inner()).link = link.as_ref().map(|l| l.1.clone());
        let case_stop = Arc::new(AtomicBool::new(false));
        let (stop2, seen2, case2) = (stop.clone(), seen.clone(), case_stop.clone());
        let thread = std::thread::Builder::new()
            .name("rtlab-watch".into())
            .spawn(move || watch(spec, link, stop2, seen2, case2))
            .ok();
        CaseWatch { case_stop, stop, seen, thread }
    }

    /// Stop watching; what was seen meanwhile.
    pub fn stop(mut self) -> Seen {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

fn watch(
    spec: WatchSpec,
    mut link: Option<(std::net::UdpSocket, String)>,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
    case_stop: Arc<AtomicBool>,
) {
    let me = std::process::id();
    let mut loads = spec.loads.clone();
    let mut agent = spec.agent;
    let (mut stopped, mut down) = (Spans::default(), Spans::default());
    let mut offset = clock_offset();
    let mut rss_every_ns = 1_000_000_000i64;
    let mut next_rss = monotonic_ns();
    while !stop.load(Ordering::Relaxed) {
        let now = monotonic_ns();
        if spec.run_stop.as_ref().is_some_and(|r| r.load(Ordering::Relaxed)) {
            case_stop.store(true, Ordering::Relaxed);
        }
        let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
        if s.far_ended.is_none() {
            if let Some(why) = spec.far.as_ref().and_then(|f| f.ended()) {
                s.far_ended = Some((now, why));
                case_stop.store(true, Ordering::Relaxed);
            }
        }
        loads.retain(|(name, pids)| {
            if pids.iter().any(|&p| gone(p)) {
                s.loads.push(LoadEnded { load: name.clone(), at_ns: now });
                return false;
            }
            true
        });
        if let Some(o) = clock_offset() {
            if let Some(prev) = offset {
                if (o - prev).abs() > STEP_NS {
                    s.clock_steps.push((now, o - prev));
                }
            }
            offset = Some(o);
        }
        if let Some(pid) = agent {
            match stat_state(pid) {
                Some('T' | 't') => stopped.poll(true, now, &mut s.far_stopped),
                None | Some('Z') | Some('X') => {
                    stopped.poll(false, now, &mut s.far_stopped);
                    agent = None;
                }
                Some(_) => stopped.poll(false, now, &mut s.far_stopped),
            }
        }
        if let Some((sock, dev)) = &link {
            match rtlab_sys::net::link_running(sock, dev) {
                Ok(up) => down.poll(!up, now, &mut s.link_down),
                // the interface is gone: the pair was torn down
                Err(_) => link = None,
            }
        }
        if now >= next_rss {
            for (process, pid) in [("rtlab", Some(me)), ("agent", agent)] {
                if let Some(kib) = pid.and_then(rtlab_sys::usage::rss_kib) {
                    s.rss.push((process.to_string(), now, kib));
                    if thin(&mut s.rss, process) && process == "rtlab" {
                        rss_every_ns *= 2;
                    }
                }
            }
            next_rss = now + rss_every_ns;
        }
        drop(s);
        std::thread::sleep(POLL);
    }
}

/// The measurement's start (its first stream's), its window width and its end, CLOCK_MONOTONIC.
fn frame(doc: &ResultDocument) -> (Option<i64>, Option<i64>, Option<i64>) {
    let first = doc.streams.iter().find(|s| s.start_monotonic_ns.is_some());
    let start = first.and_then(|s| s.start_monotonic_ns);
    let width = first.map(|s| s.windows.width_ns).filter(|w| *w > 0);
    (start, width, start.map(|s| s + doc.duration_ns))
}

/// The warnings of what `seen` saw while `doc` measured (events outside the measurement, in
/// the case's set-up or teardown, are no news), and its RSS samples into the document's cost.
pub fn seen_into(seen: &Seen, doc: &mut ResultDocument, load_report: Option<&serde_json::Value>) {
    let (start, width, end) = frame(doc);
    let inside = |at: i64| start.map_or(true, |s| at >= s) && end.map_or(true, |e| at < e);
    let after = |at: i64| start.map(|s| (at - s).max(0));
    let window = |at: i64| after(at).zip(width).map(|(n, w)| (n / w) as u64);
    let mut w = ended_warnings(&seen.loads, doc, load_report);
    for &(at, step) in seen.clock_steps.iter().filter(|(at, _)| inside(*at)) {
        w.push(Warn::WallClockStepped {
            step_ns: step,
            after_ms: after(at).map(|n| n / 1_000_000),
            window: window(at),
        });
    }
    let lasted = |s: &Span| {
        let to = match (s.to_ns, end) {
            (Some(t), Some(e)) if t >= e => None,
            (t, _) => t,
        };
        to.map(|t| (t - s.from_ns) / 1_000_000)
    };
    // a span that began before the measurement is placed at its start
    let spans = |v: &[Span]| -> Vec<Span> {
        v.iter()
            .filter(|s| end.map_or(true, |e| s.from_ns < e))
            .filter(|s| s.to_ns.map_or(true, |t| start.map_or(true, |st| t > st)))
            .map(|s| Span { from_ns: start.map_or(s.from_ns, |st| s.from_ns.max(st)), ..*s })
            .collect()
    };
    for s in spans(&seen.far_stopped) {
        w.push(Warn::FarSideStopped {
            for_ms: lasted(&s),
            after_ms: after(s.from_ns).map(|n| n / 1_000_000),
            window: window(s.from_ns),
        });
    }
    for s in spans(&seen.link_down) {
        w.push(Warn::LinkDown {
            link: seen.link.clone().unwrap_or_default(),
            for_ms: lasted(&s),
            after_ms: after(s.from_ns).map(|n| n / 1_000_000),
            window: window(s.from_ns),
        });
    }
    if let Some((at, why)) = seen.far_ended.as_ref().filter(|(at, _)| inside(*at)) {
        // the case stopped because its far side ended, not because the run was stopped
        doc.interrupted = false;
        doc.warnings.retain(|w| w.code != Warn::Interrupted.code());
        w.push(Warn::FarSideEnded {
            why: why.clone(),
            after_ms: after(*at).map(|n| n / 1_000_000),
            window: window(*at),
        });
    }
    doc.warnings.extend(w.iter().map(|w| w.to_warning()));
    let rss: Vec<RssSample> = seen
        .rss
        .iter()
        .filter(|(_, at, _)| inside(*at))
        .map(|(p, at, kib)| RssSample {
            process: p.clone(),
            at_ms: after(*at).unwrap_or(0) / 1_000_000,
            rss_kib: *kib,
        })
        .collect();
    if !rss.is_empty() {
        doc.cost.get_or_insert_with(Default::default).rss = rss;
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
    let (start, width, end_ns) = frame(doc);
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

    /// A real timer document whose first stream started at 10 us, 1 s windows, 10 s long.
    fn doc_10s() -> ResultDocument {
        let mut doc: ResultDocument = serde_json::from_str(include_str!(
            "../../../rtlab-report/tests/data/timer-idle-fifo-1ms.json"
        ))
        .unwrap();
        doc.duration_ns = 10_000_000_000;
        for s in &mut doc.streams {
            s.start_monotonic_ns = Some(10_000);
            s.windows.width_ns = 1_000_000_000;
        }
        doc
    }

    #[test]
    fn what_was_seen_is_said_in_its_window_and_what_was_outside_is_not() {
        let mut doc = doc_10s();
        let at = |s: f64| 10_000 + (s * 1e9) as i64;
        let seen = Seen {
            // a step inside, one in the teardown
            clock_steps: vec![(at(4.5), 50_000_000), (at(10.5), -50_000_000)],
            // stopped 3 s from 2.2 s; then again from 9.5 s to past the end
            far_stopped: vec![
                Span { from_ns: at(2.2), to_ns: Some(at(5.2)) },
                Span { from_ns: at(9.5), to_ns: Some(at(11.0)) },
            ],
            link: Some("rtlab1-a".into()),
            // down from before the start to 1.5 s: placed at the start
            link_down: vec![Span { from_ns: 0, to_ns: Some(at(1.5)) }],
            rss: vec![
                ("rtlab".into(), 5, 100),
                ("rtlab".into(), at(1.0), 120),
                ("agent".into(), at(1.0), 30),
                ("rtlab".into(), at(12.0), 999),
            ],
            ..Default::default()
        };
        seen_into(&seen, &mut doc, None);
        let codes: Vec<(&str, &str)> =
            doc.warnings.iter().map(|w| (w.code.as_str(), w.message.as_str())).collect();
        let of =
            |c: &str| codes.iter().filter(|(k, _)| *k == c).map(|(_, m)| *m).collect::<Vec<_>>();
        let step = of("wall-clock-stepped");
        assert_eq!(step.len(), 1, "{codes:?}");
        assert!(step[0].contains("+50.000 ms 4.5 s into the measurement (window 4)"), "{step:?}");
        let stopped = of("far-side-stopped");
        assert_eq!(stopped.len(), 2, "{codes:?}");
        assert!(stopped[0].contains("for 3.0 s from 2.2 s into the measurement (window 2)"));
        assert!(stopped[1].contains("until the end from 9.5 s"), "{stopped:?}");
        let down = of("link-down");
        assert_eq!(down.len(), 1, "{codes:?}");
        assert!(down[0].contains("the link rtlab1-a had no carrier for 1.5 s from 0.0 s"));
        assert!(down[0].contains("(window 0)"), "{down:?}");
        // memory: the samples inside the measurement, from its start
        let rss = &doc.cost.as_ref().unwrap().rss;
        assert_eq!(
            rss.iter().map(|r| (r.process.as_str(), r.at_ms, r.rss_kib)).collect::<Vec<_>>(),
            [("rtlab", 1000, 120), ("agent", 1000, 30)]
        );
        assert!(of("far-side-ended").is_empty());
    }

    #[test]
    fn a_far_side_that_ended_stops_the_case_without_calling_the_run_interrupted() {
        let mut doc = doc_10s();
        doc.interrupted = true;
        doc.warnings.push(Warn::Interrupted.to_warning());
        let seen = Seen {
            far_ended: Some((10_000 + 3_300_000_000, "the agent ended".into())),
            ..Default::default()
        };
        seen_into(&seen, &mut doc, None);
        assert!(!doc.interrupted);
        assert!(doc.warnings.iter().all(|w| w.code != "interrupted"), "{:?}", doc.warnings);
        let w = doc.warnings.iter().find(|w| w.code == "far-side-ended").expect("said");
        assert!(
            w.message.contains("3.3 s into the measurement (window 3) (the agent ended)"),
            "{}",
            w.message
        );
    }

    #[test]
    fn the_run_stop_reaches_the_case_and_memory_samples_are_thinned() {
        let run_stop = Arc::new(AtomicBool::new(true));
        let watch = CaseWatch::start(WatchSpec { run_stop: Some(run_stop), ..Default::default() });
        let t = std::time::Instant::now();
        while !watch.case_stop.load(Ordering::Relaxed) && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(watch.case_stop.load(Ordering::Relaxed));
        watch.stop();
        let mut rss: Vec<(String, i64, u64)> =
            (0..MAX_RSS_SAMPLES as i64).map(|i| ("rtlab".to_string(), i, 1)).collect();
        rss.push(("agent".into(), 0, 1));
        assert!(thin(&mut rss, "rtlab"));
        assert_eq!(rss.iter().filter(|r| r.0 == "rtlab").count(), MAX_RSS_SAMPLES / 2);
        assert_eq!(rss.iter().filter(|r| r.0 == "agent").count(), 1);
        assert!(!thin(&mut rss, "rtlab"));
    }

    #[test]
    fn a_dead_process_is_seen_and_a_live_one_is_not() {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let me = std::process::id();
        // `true` ends at once and stays a zombie until waited for
        let watch = CaseWatch::start(WatchSpec {
            loads: vec![("gone".into(), vec![c.id()]), ("me".into(), vec![me])],
            ..Default::default()
        });
        std::thread::sleep(Duration::from_millis(300));
        let seen = watch.stop();
        let _ = c.wait();
        assert_eq!(seen.loads.iter().map(|e| e.load.as_str()).collect::<Vec<_>>(), ["gone"]);
        // rtlab's own memory, sampled at the start
        assert!(seen.rss.iter().any(|(p, _, kib)| p == "rtlab" && *kib > 0), "{:?}", seen.rss);
    }
}
