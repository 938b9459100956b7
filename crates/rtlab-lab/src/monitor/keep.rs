//! The monitor's intervals into rtlab's store: every `store_every`, one run (scenario
//! `monitor`, its text the configuration file) of one case `monitor/intervals`, so `rtlab
//! runs`, `report`, `compare`, `push` and `serve`'s trend of that case read a monitor like any
//! run.
//!
//! Contract: a case's streams have one sample per interval, exact: the canary's highest
//! wake-up latency in it (`interval_max_latency`, its deadline the canary's) and each topic's
//! longest time between two arrivals (`interval_max_period`, its deadline the topic's stale
//! time); its `config.monitor` holds the period's verdict counts per topic, the canary's
//! misses, and the worst cases kept in it (their evidence in full). The last period is stored
//! when the monitor stops or reloads. A store that cannot take a period is one line; the
//! monitor goes on (the next period is stored on its own).

use super::config::MonitorConfig;
use crate::document::new_document;
use rtlab_core::run::{CaseRecord, CaseStatus, RunInfo, RunStatus};
use rtlab_core::schema::Stream;
use rtlab_core::sink::{Recorder, RecorderConfig, Sink};
use rtlab_store::Store;
use std::collections::BTreeMap;
use std::time::SystemTime;

/// The case's name: one trend across the days.
pub const CASE: &str = "monitor/intervals";

struct Period {
    started: SystemTime,
    start_ns: i64,
    seq: u64,
    canary: Option<Recorder>,
    topics: Vec<(String, Recorder)>,
    chains: Vec<(Vec<String>, Recorder)>,
    verdicts: BTreeMap<String, BTreeMap<&'static str, u64>>,
    misses: u64,
    worst: Vec<serde_json::Value>,
}

/// The store side of a monitor.
pub struct Keeper {
    store: Store,
    pub db: String,
    period: Option<Period>,
}

/// Windows a period's stream preallocates at most: a window an interval up to this many (an
/// hour of 1 s intervals); a longer period's windows widen (the recorder doubles their width)
/// rather than preallocating one an interval (720 h of 10 s: 44 MiB at the start).
pub const MAX_WINDOWS: usize = 4096;

fn recorder(deadline_ns: i64, cfg: &MonitorConfig) -> Recorder {
    let windows = ((cfg.store_every.0 / cfg.interval.0).max(1) as usize + 2).min(MAX_WINDOWS);
    let c = RecorderConfig {
        deadline_ns,
        window_ns: cfg.interval.0,
        window_capacity: windows,
        max_samples: None,
        us_histogram_buckets: None,
        spike_threshold_ns: None,
    };
    Recorder::new(&c, None)
}

impl Keeper {
    /// Open the store (one line why not).
    pub fn open(cfg: &MonitorConfig) -> Result<Keeper, String> {
        let store = crate::store_sink::open(&cfg.db).map_err(|e| format!("db: {e}"))?;
        Ok(Keeper { store, db: cfg.db.clone(), period: None })
    }

    fn period(&mut self, cfg: &MonitorConfig, now_ns: i64) -> &mut Period {
        self.period.get_or_insert_with(|| Period {
            started: SystemTime::now(),
            start_ns: now_ns,
            seq: 0,
            canary: cfg.canary.enabled.then(|| recorder(cfg.canary.deadline_ns(), cfg)),
            topics: cfg
                .topics
                .iter()
                .map(|t| (t.name.clone(), recorder(t.stale_ns(), cfg)))
                .collect(),
            chains: cfg
                .chains
                .iter()
                .map(|c| (c.topics.clone(), recorder(c.deadline.map_or(i64::MAX, |d| d.0), cfg)))
                .collect(),
            verdicts: BTreeMap::new(),
            misses: 0,
            worst: Vec::new(),
        })
    }

    /// One interval's figures.
    pub fn interval(
        &mut self,
        cfg: &MonitorConfig,
        now_ns: i64,
        canary: (Option<i64>, u64),
        topics: &[(String, Option<i64>, &'static str)],
        chains: &[Option<i64>],
    ) {
        let p = self.period(cfg, now_ns);
        let (t, i) = (now_ns - p.start_ns, p.seq);
        p.seq += 1;
        if let (Some(r), Some(max)) = (p.canary.as_mut(), canary.0) {
            r.record(i, t, max);
        }
        p.misses += canary.1;
        for (name, max, verdict) in topics {
            if let (Some((_, r)), Some(m)) = (p.topics.iter_mut().find(|x| &x.0 == name), max) {
                r.record(i, t, *m);
            }
            *p.verdicts.entry(name.clone()).or_default().entry(verdict).or_default() += 1;
        }
        for ((_, r), max) in p.chains.iter_mut().zip(chains) {
            if let Some(m) = max {
                r.record(i, t, *m);
            }
        }
    }

    /// A worst case kept in this period.
    pub fn worst(&mut self, cfg: &MonitorConfig, now_ns: i64, record: serde_json::Value) {
        self.period(cfg, now_ns).worst.push(record);
    }

    /// Store the period when `store_every` has passed (or `force`: the monitor stops); the
    /// line to say.
    pub fn maybe_store(&mut self, cfg: &MonitorConfig, now_ns: i64, force: bool) -> Option<String> {
        let due =
            self.period.as_ref().is_some_and(|p| force || now_ns - p.start_ns >= cfg.store_every.0);
        if !due {
            return None;
        }
        let p = self.period.take()?;
        if p.seq == 0 {
            return None;
        }
        Some(match self.store_period(cfg, p, now_ns) {
            Ok((run, n, 0)) => format!("stored {n} intervals as {CASE} of run {run} in {}", self.db),
            Ok((run, n, removed)) => format!(
                "stored {n} intervals as {CASE} of run {run} in {}; removed {removed} runs older than keep",
                self.db
            ),
            Err(e) => format!("the store did not take the intervals: {e}"),
        })
    }

    /// Store a period as a run; (its id, its intervals, the runs removed by `keep`).
    fn store_period(
        &mut self,
        cfg: &MonitorConfig,
        p: Period,
        now_ns: i64,
    ) -> Result<(i64, u64, usize), String> {
        let env = rtlab_sys::env::detect(std::path::Path::new("/"));
        let info = RunInfo {
            scenario: "monitor".into(),
            source: cfg.source.clone(),
            scenario_text: std::fs::read_to_string(&cfg.source).unwrap_or_default(),
            scale: 1.0,
            command_line: std::env::args().collect(),
            started_at: humantime::format_rfc3339_seconds(p.started).to_string(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            environment: env.clone(),
        };
        let run = self.store.begin_run(&info).map_err(|e| e.to_string())?;
        let mut streams = Vec::new();
        if let Some(r) = &p.canary {
            streams.push(Stream::from_recorder(
                "canary",
                "interval_max_latency",
                "per interval, the timer canary's highest wake-up latency (woken - expiry asked)",
                BTreeMap::from([(
                    "cpu".to_string(),
                    cfg.canary.cpu.map_or("any".into(), |c| c.to_string()),
                )]),
                r,
            ));
        }
        for (name, r) in &p.topics {
            streams.push(Stream::from_recorder(
                format!("{name} period"),
                "interval_max_period",
                "per interval, the topic's longest time between two arrivals",
                BTreeMap::from([("topic".to_string(), name.clone())]),
                r,
            ));
        }
        for (topics, r) in &p.chains {
            streams.push(Stream::from_recorder(
                crate::probes::trace::chain_stream_name(topics),
                "interval_max_chain_latency",
                "per interval, a traced chain's highest end-to-end latency (its last topic's take - its first topic's publish), one interval behind",
                BTreeMap::from([("chain".to_string(), topics.join(","))]),
                r,
            ));
        }
        let facts = serde_json::json!({"monitor": {
            "interval_ns": cfg.interval.0,
            "intervals": p.seq,
            "canary_misses": p.misses,
            "verdicts": p.verdicts,
            "worst_cases": p.worst,
        }});
        let mut doc = new_document("monitor", p.started, env, facts);
        doc.duration_ns = now_ns - p.start_ns;
        doc.streams = streams;
        let case = CaseRecord {
            index: 0,
            name: CASE.into(),
            probe: "monitor".into(),
            load: "live".into(),
            profile: "as-is".into(),
            params: BTreeMap::new(),
            repetition: 1,
            status: CaseStatus::Ok,
            document: Some(doc),
            load_report: None,
            profile_report: None,
            spike_evidence: None,
            published: None,
            started_at: humantime::format_rfc3339_seconds(p.started).to_string(),
            duration_ns: now_ns - p.start_ns,
        };
        let stored = self.store.add_case(run, &case).map_err(|e| e.to_string());
        let status = if stored.is_ok() { RunStatus::Complete } else { RunStatus::Failed };
        self.store.finish_run(run, status).map_err(|e| e.to_string())?;
        stored?;
        let cutoff = SystemTime::now() - std::time::Duration::from_nanos(cfg.keep.0 as u64);
        let cutoff = humantime::format_rfc3339_seconds(cutoff).to_string();
        let old = self.store.runs_started_before("monitor", &cfg.source, &cutoff);
        let old = old.map_err(|e| e.to_string())?;
        for id in &old {
            self.store.delete_run(*id).map_err(|e| e.to_string())?;
        }
        Ok((run, p.seq, old.len()))
    }

    /// The monitor stops: the last period stored.
    pub fn finish(&mut self, cfg: &MonitorConfig, now_ns: i64) -> Option<String> {
        self.maybe_store(cfg, now_ns, true)
    }
}
