//! Traced chains, always on: `rtlab trace --pid`'s uprobes on the libtracetools of the
//! processes a chain names, read every 10 ms, each chain followed message by message.
//!
//! Contract: every second the processes whose command line contains one of a chain's
//! `processes` are looked for again; the uprobes are placed on the libraries they map (and
//! placed again when that set changes), journaled as `rtlab trace --pid` journals them, and
//! removed when the watch stops. At each of the monitor's interval ends (`close`) the hits of
//! the last two intervals are joined (`trace::analysis`) and the messages whose chain began in
//! the earlier of the two are recorded: each had a whole interval to reach its last topic, so
//! the figures lag one interval and a message slower than that is not counted. Hits beyond [`MAX_HITS`] an
//! interval are counted, not kept. Why nothing is probed (no process, no libtracetools, no
//! uprobes) is kept in `note`.

use super::config::ChainConfig;
use super::stats::{Histogram, IntervalMax};
use rtlab_evidence::uprobe::{self, Uprobes, DEFAULT_UPROBE_JOURNAL};
use rtlab_pubsub::trace::analysis::analyse;
use rtlab_pubsub::trace::uprobe::{events, parse, Hit};
use rtlab_sys::clock::monotonic_ns;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Hits kept an interval (the rest counted in `dropped`).
pub const MAX_HITS: usize = 1_000_000;

/// A chain's counts.
#[derive(Default)]
pub struct ChainStats {
    /// End-to-end: the last topic's take - the first topic's publish.
    pub latency: Histogram,
    pub max: IntervalMax,
    pub messages: AtomicU64,
    /// Messages later than the chain's deadline.
    pub misses: AtomicU64,
}

/// The chains being watched.
pub struct ChainWatch {
    pub stats: Vec<Arc<ChainStats>>,
    /// Why nothing is probed, or what is.
    pub note: Arc<Mutex<String>>,
    /// Hits beyond [`MAX_HITS`] in an interval.
    pub dropped: Arc<AtomicU64>,
    /// Raised by the monitor at each interval's end: the watch closes its interval too.
    pub close: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ChainWatch {
    pub fn start(chains: &[ChainConfig]) -> ChainWatch {
        let stats: Vec<Arc<ChainStats>> = chains.iter().map(|_| Arc::default()).collect();
        let note = Arc::new(Mutex::new("looking for the chains' processes".to_string()));
        let dropped = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let close = Arc::new(AtomicBool::new(false));
        let w = Watcher {
            chains: chains.to_vec(),
            stats: stats.clone(),
            note: note.clone(),
            dropped: dropped.clone(),
            close: close.clone(),
        };
        let st = stop.clone();
        let thread =
            std::thread::Builder::new().name("rtlab-chains".into()).spawn(move || w.run(&st)).ok();
        ChainWatch { stats, note, dropped, close, stop, thread }
    }
}

impl Drop for ChainWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Watcher {
    chains: Vec<ChainConfig>,
    stats: Vec<Arc<ChainStats>>,
    note: Arc<Mutex<String>>,
    dropped: Arc<AtomicU64>,
    close: Arc<AtomicBool>,
}

/// The processes whose command line contains one of `patterns`.
fn matching(patterns: &[&str]) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if pid != me && patterns.iter().any(|p| cmd.contains(p)) {
            v.push(pid);
        }
    }
    v
}

impl Watcher {
    fn say(&self, s: String) {
        *self.note.lock().unwrap_or_else(|e| e.into_inner()) = s;
    }

    /// The processes to probe and their libraries; the probes placed again when those change.
    fn resolve(&self, pids: &mut Vec<i32>, probes: &mut Option<(Uprobes<'static>, Vec<PathBuf>)>) {
        let patterns: Vec<&str> =
            self.chains.iter().flat_map(|c| c.processes.iter().map(String::as_str)).collect();
        let host = crate::host::host();
        *pids = matching(&patterns);
        let mut libs: Vec<PathBuf> =
            pids.iter().filter_map(|&p| uprobe::find_lib(host, p).ok()).collect();
        libs.sort();
        libs.dedup();
        if probes.as_ref().map(|p| &p.1) == Some(&libs) {
            return;
        }
        if let Some((p, _)) = probes.take() {
            drop(p.detach());
        }
        if libs.is_empty() {
            self.say(format!(
                "no process runs ROS 2 whose command line contains {}",
                patterns.iter().map(|p| format!("'{p}'")).collect::<Vec<_>>().join(" or ")
            ));
            return;
        }
        match uprobe::attach(host, std::path::Path::new(DEFAULT_UPROBE_JOURNAL), &libs) {
            Ok(u) => {
                self.say(format!(
                    "probing {} processes through uprobes on {}",
                    pids.len(),
                    libs.iter().map(|l| l.display().to_string()).collect::<Vec<_>>().join(", ")
                ));
                *probes = Some((u, libs));
            }
            Err(e) => self.say(format!("uprobes: {e}")),
        }
    }

    fn run(&self, stop: &AtomicBool) {
        let mut probes: Option<(Uprobes<'static>, Vec<PathBuf>)> = None;
        let mut pids = Vec::new();
        let (mut prev, mut cur): (Vec<Hit>, Vec<Hit>) = (Vec::new(), Vec::new());
        let mut lines = Vec::new();
        let mut cur_start = monotonic_ns();
        let mut prev_start = cur_start;
        let mut resolved: Option<i64> = None;
        while !stop.load(Ordering::Relaxed) {
            let now = monotonic_ns();
            if resolved.map_or(true, |r| r < now - 1_000_000_000) {
                self.resolve(&mut pids, &mut probes);
                resolved = Some(now);
            }
            if let Some((p, _)) = probes.as_mut() {
                p.read(&mut lines);
                for l in lines.drain(..) {
                    match parse(&l) {
                        Some(h) if cur.len() < MAX_HITS => cur.push(h),
                        Some(_) => {
                            self.dropped.fetch_add(1, Ordering::Relaxed);
                        }
                        None => {}
                    }
                }
            }
            if self.close.swap(false, Ordering::Relaxed) {
                self.record(&prev, &cur, &pids, (prev_start, cur_start));
                prev = std::mem::take(&mut cur);
                prev_start = cur_start;
                cur_start = now;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if let Some((p, _)) = probes.take() {
            drop(p.detach());
        }
    }

    /// The messages of the chains that began in `[from, to)`, from the hits of both intervals.
    fn record(&self, prev: &[Hit], cur: &[Hit], pids: &[i32], (from, to): (i64, i64)) {
        if prev.is_empty() && cur.is_empty() {
            return;
        }
        let hits: Vec<Hit> = prev.iter().chain(cur).cloned().collect();
        let mut cache: HashMap<i32, Option<i32>> = HashMap::new();
        let mut tgid =
            |t: i32| *cache.entry(t).or_insert_with(|| crate::probes::trace::pids::tgid_of(t));
        let per = events(&hits, &mut tgid, pids);
        let asked: Vec<Vec<String>> = self.chains.iter().map(|c| c.topics.clone()).collect();
        let a = analyse(&per, &asked);
        for (c, s) in self.chains.iter().zip(&self.stats) {
            let Some(found) = a.chains.iter().find(|x| x.topics == c.topics) else { continue };
            for m in found.messages.iter().filter(|m| (from..to).contains(&m.start_ns)) {
                s.latency.record(m.end_to_end_ns);
                s.max.record(m.end_to_end_ns);
                s.messages.fetch_add(1, Ordering::Relaxed);
                if c.deadline.is_some_and(|d| m.end_to_end_ns > d.0) {
                    s.misses.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}
