//! What the reports show, computed once from a run: the headline stream of a case, the
//! studies' row (Min / Avg / Max / Missed x/N / Packet loss x/N), sweeps and the
//! profile x load grid.
//!
//! Definitions (also in docs/reports.md):
//! - the headline stream of a case is its `all` stream when the probe gives one, else its
//!   first stream;
//! - the primary streams of a case are those with the headline's metric other than `all`
//!   (timer threads, subscribers): they feed the fairness plot;
//! - Missed x/N: samples above the deadline out of the samples; Packet loss x/N: lost out of
//!   samples + lost (what was sent and either answered or given up on).

use rtlab_core::run::{CaseRecord, CaseStatus, Run};
use rtlab_core::schema::Stream;
use rtlab_core::units::{parse_duration, parse_rate_hz, parse_size};

/// The headline stream of a case (None when the case measured nothing).
pub fn headline(c: &CaseRecord) -> Option<&Stream> {
    let d = c.document.as_ref()?;
    d.streams.iter().find(|s| s.name == "all").or(d.streams.first())
}

/// The per-thread / per-subscriber streams of a case (same metric as the headline, not `all`).
pub fn primary_streams(c: &CaseRecord) -> Vec<&Stream> {
    let Some(h) = headline(c) else { return Vec::new() };
    let d = c.document.as_ref().expect("a headline has a document");
    d.streams.iter().filter(|s| s.metric == h.metric && s.name != "all").collect()
}

/// `ok`, `failed`, `skipped`, `interrupted`, and the error or reason.
pub fn status(c: &CaseRecord) -> (&'static str, &str) {
    match &c.status {
        CaseStatus::Ok => ("ok", ""),
        CaseStatus::Failed { error } => ("failed", error),
        CaseStatus::Skipped { reason } => ("skipped", reason),
        CaseStatus::Interrupted => ("interrupted", ""),
    }
}

/// `missed/count` of a stream, or `-` when the probe does not count it.
pub fn missed_of(s: &Stream) -> String {
    s.stats.missed.map(|m| format!("{m}/{}", s.stats.count)).unwrap_or_else(|| "-".into())
}

/// `lost/(count+lost)` of a stream, or `-` when the probe does not count losses.
pub fn lost_of(s: &Stream) -> String {
    s.stats.lost.map(|l| format!("{l}/{}", s.stats.count + l)).unwrap_or_else(|| "-".into())
}

/// The params of a case as `k=v k=v`.
pub fn params_text(c: &CaseRecord) -> String {
    c.params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
}

/// A sweep: the cases of one (probe, load, profile, other params) along one parameter.
pub struct Sweep<'a> {
    /// `payload` (bytes) or `rate` (Hz).
    pub axis: &'static str,
    /// e.g. `timer / idle / no-rt`.
    pub label: String,
    /// (x, case), sorted by x.
    pub points: Vec<(f64, &'a CaseRecord)>,
}

/// The value of a case along a sweep axis: `payload` in bytes; `rate` in Hz (from `rate`, or
/// from `period`/`interval` as 1/period).
pub fn axis_value(c: &CaseRecord, axis: &str) -> Option<(f64, &'static str)> {
    match axis {
        "payload" => {
            c.params.get("payload").and_then(|v| parse_size(v).ok()).map(|b| (b as f64, "payload"))
        }
        "rate" => {
            if let Some(r) = c.params.get("rate").and_then(|v| parse_rate_hz(v).ok()) {
                return Some((r, "rate"));
            }
            for k in ["period", "interval"] {
                if let Some(ns) =
                    c.params.get(k).and_then(|v| parse_duration(v).ok()).filter(|n| n.0 > 0)
                {
                    return Some((1e9 / ns.0 as f64, k_static(k)));
                }
            }
            None
        }
        _ => None,
    }
}

fn k_static(k: &str) -> &'static str {
    match k {
        "period" => "period",
        _ => "interval",
    }
}

/// Sweeps along `payload` and `rate` with at least two distinct values among measured cases.
pub fn sweeps(run: &Run) -> Vec<Sweep<'_>> {
    let mut out = Vec::new();
    for axis in ["payload", "rate"] {
        let mut groups: Vec<(String, Vec<(f64, &CaseRecord)>)> = Vec::new();
        for c in &run.cases {
            let Some((x, key)) = axis_value(c, axis) else { continue };
            match headline(c) {
                Some(s) if s.stats.count > 0 => {}
                _ => continue,
            }
            let rest: Vec<String> = c
                .params
                .iter()
                .filter(|(k, _)| {
                    k.as_str() != key
                        && !(axis == "rate" && ["rate", "period", "interval"].contains(&k.as_str()))
                })
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let mut label = format!("{} / {} / {}", c.probe, c.load, c.profile);
            if !rest.is_empty() {
                label.push_str(&format!(" / {}", rest.join(" ")));
            }
            match groups.iter_mut().find(|(l, _)| *l == label) {
                Some((_, v)) => v.push((x, c)),
                None => groups.push((label, vec![(x, c)])),
            }
        }
        for (label, mut points) in groups {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut xs: Vec<f64> = points.iter().map(|p| p.0).collect();
            xs.dedup();
            if xs.len() >= 2 {
                out.push(Sweep { axis, label, points });
            }
        }
    }
    out
}

/// A grid cell: (max_ns, p99_9_ns, number of cases), None when no case measured there.
pub type Cell = Option<(i64, Option<i64>, usize)>;

/// One profile x load grid of a probe: cell = the worst (max of) headline max and p99.9
/// over the cases of that cell.
pub struct Grid {
    pub probe: String,
    pub profiles: Vec<String>,
    pub loads: Vec<String>,
    /// [profile][load]
    pub cells: Vec<Vec<Cell>>,
}

/// The grids of a run, one per probe with more than one profile or load.
pub fn grids(run: &Run) -> Vec<Grid> {
    let mut probes: Vec<&str> = Vec::new();
    for c in &run.cases {
        if !probes.contains(&c.probe.as_str()) {
            probes.push(&c.probe);
        }
    }
    let mut out = Vec::new();
    for p in probes {
        let cases: Vec<&CaseRecord> = run.cases.iter().filter(|c| c.probe == p).collect();
        let mut profiles: Vec<String> = Vec::new();
        let mut loads: Vec<String> = Vec::new();
        for c in &cases {
            if !profiles.contains(&c.profile) {
                profiles.push(c.profile.clone());
            }
            if !loads.contains(&c.load) {
                loads.push(c.load.clone());
            }
        }
        if profiles.len() < 2 && loads.len() < 2 {
            continue;
        }
        let mut cells = vec![vec![None; loads.len()]; profiles.len()];
        for c in &cases {
            let Some(s) = headline(c) else { continue };
            let Some(max) = s.stats.max_ns else { continue };
            let i = profiles.iter().position(|x| *x == c.profile).expect("listed");
            let j = loads.iter().position(|x| *x == c.load).expect("listed");
            let cell: &mut Cell = &mut cells[i][j];
            *cell = Some(match *cell {
                None => (max, s.stats.p99_9_ns, 1),
                Some((m, p, n)) => (m.max(max), p.max(s.stats.p99_9_ns), n + 1),
            });
        }
        out.push(Grid { probe: p.to_string(), profiles, loads, cells });
    }
    out
}
