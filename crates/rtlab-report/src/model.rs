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

/// One window of a max-over-time plot.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowPoint {
    /// Window index (its start is `index * width_ns` after the stream's start).
    pub index: usize,
    pub max_ns: i64,
    pub count: u64,
    /// The last window, holding clearly fewer samples than a full one: the run ended inside
    /// it, so its maximum is over a fraction of a window. Drawn apart, never as a drop.
    pub partial: bool,
}

/// The windows worth drawing: a window without samples is left out (a gap, not a zero);
/// the last window is `partial` when it holds less than 90 % of the median count of the
/// other non-empty windows (a probe sampling at a steady rate fills every full window
/// alike; needs at least two other windows to tell).
pub fn window_points(w: &rtlab_core::windows::WindowData) -> Vec<WindowPoint> {
    let mut pts: Vec<WindowPoint> = w
        .max_ns
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let count = w.count.get(i).copied().unwrap_or(0);
            match m {
                Some(m) if count > 0 => {
                    Some(WindowPoint { index: i, max_ns: *m, count, partial: false })
                }
                _ => None,
            }
        })
        .collect();
    let last_index = w.max_ns.len().checked_sub(1);
    if pts.len() >= 3 && pts.last().map(|p| Some(p.index)) == Some(last_index) {
        let mut others: Vec<u64> = pts[..pts.len() - 1].iter().map(|p| p.count).collect();
        others.sort_unstable();
        let median = others[others.len() / 2];
        let last = pts.last_mut().expect("three or more");
        last.partial = last.count * 10 < median * 9;
    }
    pts
}

/// One profile's distribution of the headline stream in a [`ProfileComparison`]: the
/// histograms of its cases (repetitions) summed.
pub struct ProfileDist<'a> {
    pub profile: String,
    pub cases: Vec<&'a CaseRecord>,
    /// Samples (including the histogram's overflow counts).
    pub count: u64,
    pub deadline_ns: i64,
    /// Percentiles and max: the stored (exact) figures for one case; for several, the
    /// nearest rank over the summed histograms (bucket upper bound, clamped to the max).
    pub p50_ns: Option<i64>,
    pub p99_ns: Option<i64>,
    pub p99_9_ns: Option<i64>,
    pub max_ns: Option<i64>,
    /// Non-empty buckets of the summed histograms, ascending: (low_ns, high_ns, count).
    pub buckets: Vec<(i64, i64, u64)>,
    /// Samples below / above the histogram's range.
    pub overflow_low: u64,
    pub overflow_high: u64,
}

impl ProfileDist<'_> {
    /// The complementary CDF as steps: (x_ns, P(X >= x)) at the low edge of every bucket,
    /// then (high edge of the last bucket, P(X >= that bucket)). Never 0, so it plots on a
    /// log axis; the last step is at least 1/count.
    pub fn ccdf(&self) -> Vec<(i64, f64)> {
        let n = self.count.max(1) as f64;
        let mut above = self.count - self.overflow_low;
        let mut out = Vec::with_capacity(self.buckets.len() + 1);
        for &(low, _, c) in &self.buckets {
            out.push((low, above as f64 / n));
            above -= c;
        }
        if let Some(&(_, high, c)) = self.buckets.last() {
            out.push((high, (above + c) as f64 / n));
        }
        out
    }
}

/// The cases of one probe x load x parameters measured under several profiles: "did the
/// profile help?" answered on the headline stream's distribution.
pub struct ProfileComparison<'a> {
    pub probe: String,
    pub load: String,
    /// The parameters shared by the cases (`k=v k=v`, empty when none).
    pub params: String,
    /// Headline stream name and metric (the same for every case of the comparison).
    pub stream: String,
    pub metric: String,
    /// One per profile, in the run's order.
    pub profiles: Vec<ProfileDist<'a>>,
}

impl ProfileComparison<'_> {
    /// `probe / load` and the parameters when there are any.
    pub fn label(&self) -> String {
        if self.params.is_empty() {
            format!("{} / {}", self.probe, self.load)
        } else {
            format!("{} / {} / {}", self.probe, self.load, self.params)
        }
    }
}

/// Every probe x load (x identical parameters) measured under at least two profiles, with
/// each profile's distribution of the headline stream (repetitions summed).
pub fn profile_comparisons(run: &Run) -> Vec<ProfileComparison<'_>> {
    // (probe, load, params, headline stream, metric) -> its cases
    type Key = (String, String, String, String, String);
    let mut groups: Vec<(Key, Vec<&CaseRecord>)> = Vec::new();
    for c in &run.cases {
        let Some(h) = headline(c) else { continue };
        if h.stats.count == 0 {
            continue;
        }
        let key =
            (c.probe.clone(), c.load.clone(), params_text(c), h.name.clone(), h.metric.clone());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(c),
            None => groups.push((key, vec![c])),
        }
    }
    let mut out = Vec::new();
    for ((probe, load, params, stream, metric), cases) in groups {
        let mut profiles: Vec<ProfileDist<'_>> = Vec::new();
        for c in cases {
            let h = headline(c).expect("grouped by headline");
            let i = match profiles.iter().position(|p| p.profile == c.profile) {
                Some(i) => i,
                None => {
                    profiles.push(ProfileDist {
                        profile: c.profile.clone(),
                        cases: Vec::new(),
                        count: 0,
                        deadline_ns: h.deadline_ns,
                        p50_ns: None,
                        p99_ns: None,
                        p99_9_ns: None,
                        max_ns: None,
                        buckets: Vec::new(),
                        overflow_low: 0,
                        overflow_high: 0,
                    });
                    profiles.len() - 1
                }
            };
            let p = &mut profiles[i];
            p.cases.push(c);
            p.overflow_low += h.histogram.overflow_low;
            p.overflow_high += h.histogram.overflow_high;
            p.max_ns = p.max_ns.max(h.stats.max_ns);
            for b in &h.histogram.buckets {
                match p.buckets.iter_mut().find(|x| x.0 == b.low_ns) {
                    Some(x) => x.2 += b.count,
                    None => p.buckets.push((b.low_ns, b.high_ns, b.count)),
                }
            }
        }
        if profiles.len() < 2 {
            continue;
        }
        for p in &mut profiles {
            p.buckets.sort_unstable();
            p.count = p.buckets.iter().map(|b| b.2).sum::<u64>() + p.overflow_low + p.overflow_high;
            if let [c] = p.cases[..] {
                let s = &headline(c).expect("grouped by headline").stats;
                (p.p50_ns, p.p99_ns, p.p99_9_ns) = (s.p50_ns, s.p99_ns, s.p99_9_ns);
            } else {
                let q = |q: f64| merged_quantile(p, q);
                (p.p50_ns, p.p99_ns, p.p99_9_ns) = (q(0.5), q(0.99), q(0.999));
            }
        }
        out.push(ProfileComparison { probe, load, params, stream, metric, profiles });
    }
    out
}

/// Nearest-rank quantile over summed buckets (as `Histogram::quantile` in rtlab-core:
/// the holding bucket's upper bound, clamped to the max seen).
fn merged_quantile(p: &ProfileDist<'_>, q: f64) -> Option<i64> {
    if p.count == 0 {
        return None;
    }
    let rank = rtlab_core::histogram::nearest_rank(q, p.count);
    let mut seen = p.overflow_low;
    if rank <= seen {
        return p.buckets.first().map(|b| b.0);
    }
    for &(_, high, c) in &p.buckets {
        seen += c;
        if rank <= seen {
            return Some(p.max_ns.map_or(high, |m| high.min(m)));
        }
    }
    p.max_ns
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::windows::WindowData;

    fn wd(max: &[Option<i64>], count: &[u64]) -> WindowData {
        WindowData { width_ns: 100, max_ns: max.to_vec(), count: count.to_vec() }
    }

    #[test]
    fn empty_windows_are_gaps_and_a_short_last_window_is_partial() {
        let w = wd(&[Some(5), None, Some(7), Some(6), Some(1)], &[100, 0, 100, 99, 7]);
        let p = window_points(&w);
        assert_eq!(p.iter().map(|p| p.index).collect::<Vec<_>>(), [0, 2, 3, 4], "no zero");
        assert_eq!(p.iter().map(|p| p.partial).collect::<Vec<_>>(), [false, false, false, true]);
        assert_eq!((p[3].max_ns, p[3].count), (1, 7));
    }

    #[test]
    fn a_full_last_window_or_too_few_windows_are_not_partial() {
        let full = window_points(&wd(&[Some(5), Some(7), Some(6)], &[100, 100, 95]));
        assert!(full.iter().all(|p| !p.partial));
        let two = window_points(&wd(&[Some(5), Some(1)], &[100, 3]));
        assert!(two.iter().all(|p| !p.partial), "two windows cannot tell");
        // an empty last window is left out, and the one before it is not called partial
        let gap = window_points(&wd(&[Some(5), Some(7), Some(6), None], &[100, 100, 10, 0]));
        assert_eq!(gap.len(), 3);
        assert!(gap.iter().all(|p| !p.partial));
    }
}
