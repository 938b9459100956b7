//! `rtlab monitor`: a long-running service that watches a robot while it works: a timer
//! canary at the application's priority on its CPU, the chosen ROS 2 / DDS topics with a
//! verdict each (ok / late / stale / lost), and the kernel's evidence of every interval,
//! kept for each new worst case; all of it as OpenMetrics for Prometheus.
//!
//! Contract: [`Monitor::start`] reads the configuration ([`config`]) and starts the canary
//! and one watcher per topic; [`Monitor::interval`] closes an interval (verdicts, maxima,
//! the worst case when the canary's maximum is the day's highest or above `limit`, written
//! to `STATE/worst.jsonl`, the newest [`KEEP_WORST`] kept) and is called by the service's
//! loop; [`Monitor::reload`] reads the file again and, when it is good, restarts the
//! watching with it (else the running configuration stays, and the line why is returned).
//! [`render`] writes the exposition from the view the HTTP thread shares ([`View`]). The
//! monitor changes nothing on the machine (its threads' own policy aside): SIGTERM has
//! nothing to restore.

pub mod canary;
pub mod chains;
pub mod config;
pub mod keep;
pub mod metrics;
pub mod openmetrics;
pub mod stats;
pub mod topics;
pub mod verdict;
pub mod view;
pub mod worst;

use config::MonitorConfig;
pub use metrics::render;
use stats::CanaryStats;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use verdict::{Expect, Seen};
use view::expected_period_ns;
pub use view::{TopicRow, TopicView, View};

/// Worst cases kept in `worst.jsonl`.
pub const KEEP_WORST: usize = 1000;

/// The service's state.
pub struct Monitor {
    pub path: PathBuf,
    pub cfg: MonitorConfig,
    pub view: Arc<Mutex<View>>,
    canary: Option<(Arc<AtomicBool>, rtlab_sys::sched::RtThread<()>)>,
    watches: Vec<topics::Watch>,
    chain_watch: Option<chains::ChainWatch>,
    chain_note: String,
    evidence: worst::Evidence,
    day: String,
    last_misses: u64,
    last_interval_ns: i64,
    next_ns: i64,
    keeper: Option<keep::Keeper>,
    /// The kernel tracer armed for the canary's spikes (`trace_on_spike`).
    spike: Option<crate::evidence::EvidenceRun<'static>>,
    spike_flag: Arc<rtlab_core::sink::SpikeFlag>,
    spikes_seen: u64,
    spike_pending: bool,
}

fn lock(v: &Mutex<View>) -> std::sync::MutexGuard<'_, View> {
    v.lock().unwrap_or_else(|e| e.into_inner())
}

fn today() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()[..10].to_string()
}

/// This process's CPU time (s) and resident memory (bytes).
fn own_cost() -> (f64, u64) {
    use rtlab_sys::usage::{parse_stat, rss_kib, ticks_ns};
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let cpu_ns = parse_stat(&stat, ticks_ns()).map_or(0, |(_, u)| u.user_ns + u.system_ns);
    let rss = rss_kib(std::process::id()).unwrap_or(0) * 1024;
    (cpu_ns as f64 / 1e9, rss)
}

fn thread_cpu_seconds(tid: i32) -> f64 {
    let p = format!("/proc/self/task/{tid}/schedstat");
    let s = std::fs::read_to_string(p).unwrap_or_default();
    s.split_whitespace().next().and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0) / 1e9
}

impl Monitor {
    /// Read the configuration and start watching; one line why not.
    pub fn start(path: &Path) -> Result<Monitor, String> {
        let cfg = MonitorConfig::load(path)?;
        let mut m = Monitor {
            path: path.to_path_buf(),
            cfg,
            view: Arc::new(Mutex::new(View::default())),
            canary: None,
            watches: Vec::new(),
            chain_watch: None,
            chain_note: String::new(),
            evidence: worst::Evidence::default(),
            day: today(),
            last_misses: 0,
            last_interval_ns: rtlab_sys::clock::monotonic_ns(),
            next_ns: 0,
            keeper: None,
            spike: None,
            spike_flag: Arc::default(),
            spikes_seen: 0,
            spike_pending: false,
        };
        m.next_ns = m.last_interval_ns + m.cfg.interval.0;
        std::fs::create_dir_all(&m.cfg.state)
            .map_err(|e| format!("{}: state {}: {e}", path.display(), m.cfg.state))?;
        m.keeper =
            Some(keep::Keeper::open(&m.cfg).map_err(|e| format!("{}: {e}", path.display()))?);
        m.watch()?;
        // the first interval's evidence starts now
        let _ = m.evidence.interval(m.cfg.canary.cpu, None, &[], 0);
        Ok(m)
    }

    fn watch(&mut self) -> Result<(), String> {
        let net = rtlab_pubsub::transport::cyclonedds::DdsNetwork {
            interface: self.cfg.interface.clone(),
            peers: self.cfg.peer.clone(),
        };
        let mut v = View::default();
        if self.cfg.canary.enabled {
            let stats = Arc::new(CanaryStats::default());
            let stop = Arc::new(AtomicBool::new(false));
            let hook = self.arm()?;
            let t = canary::start(&self.cfg.canary, stats.clone(), stop.clone(), hook)?;
            self.canary = Some((stop, t));
            v.canary = Some((self.cfg.canary.clone(), stats));
        }
        if !self.cfg.chains.is_empty() {
            let w = chains::ChainWatch::start(&self.cfg.chains);
            v.chains = self
                .cfg
                .chains
                .iter()
                .cloned()
                .zip(w.stats.iter().cloned())
                .map(|(c, s)| (c, s, None))
                .collect();
            self.chain_watch = Some(w);
        }
        for t in &self.cfg.topics {
            let w = topics::Watch::start(t, self.cfg.domain, &net);
            v.topics.push((t.clone(), w.stats.clone(), None));
            self.watches.push(w);
        }
        let mut view = lock(&self.view);
        v.intervals = view.intervals;
        v.worst_cases = view.worst_cases;
        v.reloads = view.reloads;
        v.reload_failures = view.reload_failures;
        v.day_max_ns = view.day_max_ns;
        *view = v;
        Ok(())
    }

    fn unwatch(&mut self) {
        if let Some((stop, t)) = self.canary.take() {
            stop.store(true, Ordering::Relaxed);
            let _ = t.join();
        }
        self.watches.clear();
        // the chains' uprobes removed
        self.chain_watch = None;
        self.chain_note.clear();
        // the tracer disarmed (tracefs put back); a spike not yet explained is dropped
        if let Some(r) = self.spike.take() {
            drop(r.finish(&[]));
        }
        self.spike_pending = false;
    }

    /// Arm the kernel tracer for the canary's spikes when the file asks (its flag cleared);
    /// the canary's hook.
    fn arm(&mut self) -> Result<Option<rtlab_core::sink::SpikeHook>, String> {
        let Some(t) = self.cfg.trace_on_spike else { return Ok(None) };
        let f = &self.spike_flag;
        f.hit.store(false, Ordering::Release);
        f.claimed.store(false, Ordering::Release);
        let mut o = crate::evidence::EvidenceOptions::new(self.cfg.interval.0, "rtlab-canary");
        o.counters = false;
        o.trace_on_spike_ns = Some(t.0);
        o.trace_dir = PathBuf::from(&self.cfg.state);
        o.cpus = self.cfg.canary.cpu.into_iter().collect();
        o.sources = vec!["canary".into()];
        o.flag = Some(self.spike_flag.clone());
        let run = crate::evidence::EvidenceRun::start(crate::host::host(), &o)
            .map_err(|e| format!("{}: trace_on_spike: {e}", self.path.display()))?;
        let hook = run.hook();
        self.spike = Some(run);
        Ok(hook)
    }

    /// A spike the canary raised in an earlier interval (its trace captured by now):
    /// explained, kept as a worst case of its own, and the tracer armed again.
    fn spike_interval(&mut self, now: i64, said: &mut Vec<String>) -> Option<serde_json::Value> {
        let stats = lock(&self.view).canary.as_ref().map(|c| c.1.clone())?;
        let record = if self.spike_pending {
            self.spike_pending = false;
            let run = self.spike.take()?;
            let spike = run.finish(&[]).spike;
            let record = serde_json::json!({
                "at": humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
                "monotonic_ns": now,
                "why": "a traced spike",
                "canary_cpu": self.cfg.canary.cpu,
                "canary_priority": self.cfg.canary.priority,
                "spike": spike,
            });
            let first = record["spike"]["attribution"][0].as_str().unwrap_or("no explanation");
            said.push(format!("traced spike: {first}"));
            if let Err(e) = keep_worst(Path::new(&self.cfg.state), &record) {
                said.push(format!("worst case not kept: {e}"));
            }
            if let Err(e) = self.arm() {
                said.push(format!("the tracer could not be armed again: {e}"));
            }
            Some(record)
        } else {
            None
        };
        let n = stats.spikes.load(Ordering::Relaxed);
        if n != self.spikes_seen {
            self.spikes_seen = n;
            self.spike_pending = self.spike.is_some();
        }
        record
    }

    /// Read the file again: the new configuration in force, or the line why not (the running
    /// one stays).
    pub fn reload(&mut self) -> Result<Vec<String>, String> {
        let cfg = match MonitorConfig::load(&self.path) {
            Ok(c) => c,
            Err(e) => {
                lock(&self.view).reload_failures += 1;
                return Err(e);
            }
        };
        let mut said = Vec::new();
        if cfg.listen != self.cfg.listen || cfg.token != self.cfg.token || cfg.db != self.cfg.db {
            said.push("listen, token and db take effect at the next start".to_string());
        }
        // the period so far is stored under the configuration it was measured with
        let now = rtlab_sys::clock::monotonic_ns();
        if let Some(k) = self.keeper.as_mut() {
            said.extend(k.maybe_store(&self.cfg, now, true));
        }
        let old = std::mem::replace(&mut self.cfg, cfg);
        self.unwatch();
        if let Err(e) = self.watch() {
            // the new file cannot run here (its canary's priority is refused): back to the old
            self.unwatch();
            self.cfg = old;
            self.watch()?;
            lock(&self.view).reload_failures += 1;
            return Err(e);
        }
        lock(&self.view).reloads += 1;
        Ok(said)
    }

    /// Close the interval when it is over (the service's loop calls this often): what
    /// [`Monitor::interval`] says, or nothing.
    pub fn tick(&mut self) -> Vec<String> {
        let now = rtlab_sys::clock::monotonic_ns();
        if now < self.next_ns {
            return Vec::new();
        }
        let every = self.cfg.interval.0;
        self.next_ns += every * ((now - self.next_ns) / every + 1);
        self.interval()
    }

    /// Close an interval: verdicts, maxima, the worst case; the lines to log (a verdict that
    /// changed, a worst case kept).
    pub fn interval(&mut self) -> Vec<String> {
        let now = rtlab_sys::clock::monotonic_ns();
        let interval_ns = (now - self.last_interval_ns).max(1);
        self.last_interval_ns = now;
        let mut said = Vec::new();
        // the canary itself is not a suspect
        let canary_tid = lock(&self.view).canary.as_ref().map(|c| c.1.tid.load(Ordering::Relaxed));
        let c = &self.cfg.canary;
        let preempt_at = c.policy.is_realtime().then_some(i64::from(c.priority));
        let exclude: Vec<i32> = canary_tid.into_iter().collect();
        let evidence = self.evidence.interval(c.cpu, preempt_at, &exclude, 8);
        let (cpu_seconds, rss_bytes) = own_cost();
        let mut v = lock(&self.view);
        v.intervals += 1;
        v.cpu_seconds = cpu_seconds;
        v.rss_bytes = rss_bytes;
        let topics = topics_interval(&mut v, now, interval_ns, &mut said);
        for (_, s, last) in v.chains.iter_mut() {
            *last = s.max.take();
        }
        let chain_max: Vec<Option<i64>> = v.chains.iter().map(|c| c.2).collect();
        drop(v);
        if let Some(w) = &self.chain_watch {
            // the watch closes its interval too: what it records shows at the next one
            w.close.store(true, Ordering::Relaxed);
            let note = w.note.lock().unwrap_or_else(|e| e.into_inner()).clone();
            if note != self.chain_note {
                said.push(format!("chains: {note}"));
                self.chain_note = note;
            }
        }
        let (max, misses, worst) = self.canary_interval(now, interval_ns, evidence, &mut said);
        let spike = self.spike_interval(now, &mut said);
        if let Some(k) = self.keeper.as_mut() {
            k.interval(&self.cfg, now, (max, misses), &topics, &chain_max);
            for w in worst.into_iter().chain(spike) {
                k.worst(&self.cfg, now, w);
            }
            said.extend(k.maybe_store(&self.cfg, now, false));
        }
        said
    }

    /// The canary's part of an interval: its maximum, its new misses, the worst case's record
    /// when it is one (kept in `STATE/worst.jsonl` and said).
    fn canary_interval(
        &mut self,
        now: i64,
        interval_ns: i64,
        evidence: worst::IntervalEvidence,
        said: &mut Vec<String>,
    ) -> (Option<i64>, u64, Option<serde_json::Value>) {
        let mut v = lock(&self.view);
        let Some((c, stats)) = v.canary.clone() else { return (None, 0, None) };
        v.canary_cpu_seconds = thread_cpu_seconds(stats.tid.load(Ordering::Relaxed));
        let max = stats.max.take();
        v.canary_max_ns = max;
        let misses = stats.misses.load(Ordering::Relaxed);
        let new_misses = misses - self.last_misses.min(misses);
        self.last_misses = misses;
        let day = today();
        if day != self.day {
            self.day = day;
            v.day_max_ns = None;
        }
        let Some(m) = max else { return (None, new_misses, None) };
        let highest = v.day_max_ns.map_or(true, |d| m > d);
        let above = self.cfg.limit.is_some_and(|l| m > l.0);
        if highest {
            v.day_max_ns = Some(m);
        }
        if !(highest || above) {
            return (max, new_misses, None);
        }
        v.worst_cases += 1;
        drop(v);
        let why = if highest { "the day's highest" } else { "above the limit" };
        let record = serde_json::json!({
            "at": humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            "monotonic_ns": now,
            "interval_ns": interval_ns,
            "why": why,
            "canary_max_ns": m,
            "canary_cpu": c.cpu,
            "canary_priority": c.priority,
            "misses": new_misses,
            "counters": evidence.counters,
            "threads": evidence.threads,
            "note": "threads on the canary's CPU in the interval (every CPU when the canary has none): those that preempt it (real-time, its priority or above) first, then by the CPU time they took; a thread that ended within the interval is not seen",
        });
        let top = evidence.threads.first().map(|r| {
            format!(
                " (busiest there: {} pid {} tid {}, {} us)",
                r.comm,
                r.pid,
                r.tid,
                r.ran_ns / 1000
            )
        });
        said.push(format!(
            "worst case ({why}): canary {} us late{}",
            m / 1000,
            top.unwrap_or_default()
        ));
        if let Err(e) = keep_worst(Path::new(&self.cfg.state), &record) {
            said.push(format!("worst case not kept: {e}"));
        }
        (max, new_misses, Some(record))
    }

    /// Stop watching; the last period stored (what to say).
    pub fn stop(mut self) -> Vec<String> {
        self.unwatch();
        let now = rtlab_sys::clock::monotonic_ns();
        let cfg = &self.cfg;
        self.keeper.as_mut().and_then(|k| k.finish(cfg, now)).into_iter().collect()
    }
}

/// Each topic's verdict for the interval (a change said): (topic, its longest period, its
/// verdict) for the store.
fn topics_interval(
    v: &mut View,
    now: i64,
    interval_ns: i64,
    said: &mut Vec<String>,
) -> Vec<(String, Option<i64>, &'static str)> {
    let mut out = Vec::new();
    for (t, s, last) in v.topics.iter_mut() {
        let period = expected_period_ns(t, s);
        let e = Expect {
            rate_hz: period.map(|p| 1e9 / p as f64),
            tolerance: t.tolerance,
            stale_ns: t.stale_ns_with(period),
            max_delay_ns: t.header_delay.map(|d| d.0),
        };
        let last_ns = s.last_ns.load(Ordering::Relaxed);
        let seen = Seen {
            interval_ns,
            messages: s.interval_messages.swap(0, Ordering::Relaxed),
            last_ns: (last_ns > 0).then_some(last_ns),
            now_ns: now,
            writers: s.writers.load(Ordering::Relaxed),
            max_delay_ns: s.max_delay.take(),
        };
        let tv = TopicView {
            verdict: verdict::verdict(&e, &seen),
            rate_hz: verdict::rate_hz(&seen),
            max_period_ns: s.max_period.take(),
            max_delay_ns: seen.max_delay_ns,
            writers: seen.writers,
        };
        if last.as_ref().map(|l| l.verdict) != Some(tv.verdict) {
            said.push(format!(
                "topic {}: {} ({:.1} Hz, expected {})",
                t.name,
                tv.verdict.name(),
                tv.rate_hz,
                match (&t.rate, period) {
                    (Some(r), _) => r.text.clone(),
                    (None, Some(p)) => format!("{:.1} Hz (its Deadline QoS)", 1e9 / p as f64),
                    (None, None) => "no rate".into(),
                }
            ));
        }
        out.push((t.name.clone(), tv.max_period_ns, tv.verdict.name()));
        *last = Some(tv);
    }
    out
}

/// Append a worst case to `STATE/worst.jsonl`, keeping the newest [`KEEP_WORST`].
pub fn keep_worst(state: &Path, record: &serde_json::Value) -> std::io::Result<()> {
    let p = state.join("worst.jsonl");
    let text = std::fs::read_to_string(&p).unwrap_or_default();
    let mut lines: Vec<&str> = text.lines().collect();
    let line = record.to_string();
    lines.push(&line);
    let from = lines.len().saturating_sub(KEEP_WORST);
    let tmp = state.join("worst.jsonl.tmp");
    std::fs::write(&tmp, lines[from..].join("\n") + "\n")?;
    std::fs::rename(&tmp, &p)
}
