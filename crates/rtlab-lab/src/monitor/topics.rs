//! A watched topic: one thread that finds the topic's writers, reads it without its type
//! (observe's reader), and adds each arrival to [`TopicStats`].
//!
//! Contract: a topic with no publisher yet is looked for again every second (its verdict is
//! `lost` meanwhile; why is kept in `note`); once read, the reader stays, and a publisher that
//! stops and comes back is matched again by DDS itself. The reading loop only takes, reads
//! the clocks and adds to atomics; every half second it reads how many writers are matched.
//! The thread ends within 50 ms of `stop` (or within one discovery, 2 s, while it looks).

use super::config::TopicConfig;
use super::stats::TopicStats;
use rtlab_pubsub::observe::{header_stamp_ns, open_reader, ObserveConfig};
use rtlab_pubsub::transport::cyclonedds::DdsNetwork;
use rtlab_sys::clock::{monotonic_ns, realtime_ns};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A topic being watched.
pub struct Watch {
    pub cfg: TopicConfig,
    pub stats: Arc<TopicStats>,
    /// The reader's QoS, or why the topic is not read yet.
    pub note: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watch {
    pub fn start(cfg: &TopicConfig, domain: u32, net: &DdsNetwork) -> Watch {
        let stats = Arc::new(TopicStats::default());
        let note = Arc::new(Mutex::new("looking for its publisher".to_string()));
        let stop = Arc::new(AtomicBool::new(false));
        let oc = ObserveConfig {
            domain,
            net: net.clone(),
            topic: cfg.dds_topic(),
            nominal_ns: cfg.rate.as_ref().map(|r| r.period_ns),
            duration_ns: 0,
            window_ns: 1_000_000_000,
            reliability: None,
            header_latency: cfg.header_delay.is_some(),
            discover_ns: 2_000_000_000,
            rt: rtlab_core::rt::RtSettings::normal(),
        };
        let (s, n, st) = (stats.clone(), note.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("rtlab-topic".into())
            .spawn(move || watch(&oc, &s, &n, &st))
            .ok();
        Watch { cfg: cfg.clone(), stats, note, stop, thread }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn set(note: &Mutex<String>, s: String) {
    *note.lock().unwrap_or_else(|e| e.into_inner()) = s;
}

fn watch(oc: &ObserveConfig, s: &TopicStats, note: &Mutex<String>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let live = match open_reader(oc) {
            Ok(l) => l,
            Err(e) => {
                set(note, e.to_string());
                for _ in 0..20 {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                continue;
            }
        };
        set(note, live.note.clone());
        let deadline = live.writers.iter().filter_map(|w| w.qos.deadline_ns).min();
        s.writers_deadline_ns.store(deadline.unwrap_or(0), Ordering::Relaxed);
        let mut reader = live.reader;
        let mut checked = 0i64;
        while !stop.load(Ordering::Relaxed) {
            match reader.wait_take(50_000_000) {
                Ok(Some(m)) => {
                    let now = monotonic_ns();
                    let prev = s.last_ns.swap(now, Ordering::Relaxed);
                    if prev > 0 {
                        s.period.record(now - prev);
                        s.max_period.record(now - prev);
                    }
                    s.messages.fetch_add(1, Ordering::Relaxed);
                    s.interval_messages.fetch_add(1, Ordering::Relaxed);
                    if let Some(stamp) = oc.header_latency.then(|| header_stamp_ns(&m)).flatten() {
                        let d = realtime_ns() - stamp;
                        s.delay.record(d);
                        s.max_delay.record(d);
                    }
                }
                Ok(None) => {}
                Err(_) => {
                    s.errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            let now = monotonic_ns();
            if now - checked > 500_000_000 {
                s.writers.store(u64::from(reader.matched()), Ordering::Relaxed);
                checked = now;
            }
        }
        drop(reader);
        drop(live.transport);
        return;
    }
}
