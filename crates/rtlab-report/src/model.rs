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

/// `ok`, `failed`, `skipped`, `interrupted`, `hung`, and the error or reason.
pub fn status(c: &CaseRecord) -> (&'static str, &str) {
    match &c.status {
        CaseStatus::Ok => ("ok", ""),
        CaseStatus::Failed { error } => ("failed", error),
        CaseStatus::Skipped { reason } => ("skipped", reason),
        CaseStatus::Interrupted => ("interrupted", ""),
        CaseStatus::Hung { error } => ("hung", error),
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

/// A warning of a run said once: its code, the message of the first case that gave it, and
/// the indices of the cases that carry the code.
pub struct RunWarning {
    pub code: String,
    pub message: String,
    pub cases: Vec<u32>,
}

impl RunWarning {
    /// `all 14 cases`, `case 4`, `cases 4, 6`.
    pub fn cases_text(&self, measured: usize) -> String {
        match self.cases.as_slice() {
            [one] if measured > 1 => format!("case {one}"),
            all if all.len() == measured && measured > 1 => format!("all {measured} cases"),
            [one] => format!("case {one}"),
            some => {
                format!("cases {}", some.iter().map(u32::to_string).collect::<Vec<_>>().join(", "))
            }
        }
    }
}

/// Every warning code of the run's cases once, in the order first met.
pub fn run_warnings(run: &Run) -> Vec<RunWarning> {
    let mut out: Vec<RunWarning> = Vec::new();
    for c in &run.cases {
        for w in c.document.iter().flat_map(|d| &d.warnings) {
            match out.iter_mut().find(|r| r.code == w.code) {
                Some(r) if !r.cases.contains(&c.index) => r.cases.push(c.index),
                Some(_) => {}
                None => out.push(RunWarning {
                    code: w.code.clone(),
                    message: w.message.clone(),
                    cases: vec![c.index],
                }),
            }
        }
    }
    out
}

/// A case's warnings against the run's list: the codes it says in the same words (named
/// only), and the case's own (said in full).
pub fn split_warnings<'a>(
    warned: &[RunWarning],
    ws: &'a [rtlab_core::schema::Warning],
) -> (Vec<&'a str>, Vec<&'a rtlab_core::schema::Warning>) {
    let in_list = |w: &rtlab_core::schema::Warning| {
        warned.iter().any(|r| r.code == w.code && r.message == w.message)
    };
    let (said, own): (Vec<_>, Vec<_>) = ws.iter().partition(|w| in_list(w));
    (said.into_iter().map(|w| w.code.as_str()).collect(), own)
}

/// The cases of a run that measured something.
pub fn measured_cases(run: &Run) -> usize {
    run.cases.iter().filter(|c| c.document.is_some()).count()
}

/// A sweep: the measurements of one (probe, load, profile, other parameters) along one
/// parameter. A point is a stream: a case's headline when the scenario swept the parameter
/// across cases, or each of a case's own streams when the probe swept it inside one case
/// (pubsub's `--payload 64,4kib` lists): both read from what was stored, the streams' labels
/// (`payload_bytes`, `period_ns`, `interval_ns`) first, the case's parameters else.
/// A point of a sweep: x, the case and the stream measured there.
pub type SweepPoint<'a> = (f64, &'a CaseRecord, &'a Stream);

pub struct Sweep<'a> {
    /// `payload` (bytes) or `rate` (Hz).
    pub axis: &'static str,
    /// e.g. `timer / idle / no-rt`.
    pub label: String,
    /// (x, case, stream), sorted by x.
    pub points: Vec<SweepPoint<'a>>,
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

/// Stream labels that name the axis (`payload_bytes`; `period_ns`, `interval_ns` and the
/// `rate` they give) or were measured (not a parameter of the measurement).
const AXIS_OR_MEASURED_LABELS: [&str; 9] = [
    "payload_bytes",
    "period_ns",
    "interval_ns",
    "rate",
    "published",
    "first_seq",
    "last_seq",
    "case_p50_spread_ns",
    "matched_subscribers",
];

/// The value of a stream along a sweep axis, from its labels.
pub fn stream_axis_value(s: &Stream, axis: &str) -> Option<f64> {
    let label = |k: &str| s.labels.get(k).and_then(|v| v.parse::<i64>().ok()).filter(|v| *v > 0);
    match axis {
        "payload" => label("payload_bytes").map(|b| b as f64),
        "rate" => label("period_ns").or_else(|| label("interval_ns")).map(|ns| 1e9 / ns as f64),
        _ => None,
    }
}

/// The points case `c` gives along `axis`, each with the words that tell its line apart: its
/// own streams when their labels differ along the axis (a sweep inside the case; the labels
/// that differ besides the axis name the line), else its headline at the case's value.
fn case_points<'a>(
    c: &'a CaseRecord,
    axis: &'static str,
) -> Vec<(f64, &'a Stream, String, &'static str)> {
    let inner: Vec<(f64, &Stream)> = primary_streams(c)
        .into_iter()
        .filter_map(|s| stream_axis_value(s, axis).map(|x| (x, s)))
        .collect();
    let mut xs: Vec<f64> = inner.iter().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    if xs.len() >= 2 {
        let varies = |k: &String| {
            !AXIS_OR_MEASURED_LABELS.contains(&k.as_str())
                && inner.iter().any(|(_, s)| s.labels.get(k) != inner[0].1.labels.get(k))
        };
        let keys: Vec<&String> = inner[0].1.labels.keys().filter(|k| varies(k)).collect();
        return inner
            .into_iter()
            .map(|(x, s)| {
                let words: Vec<String> = keys
                    .iter()
                    .map(|k| format!("{k}={}", s.labels.get(*k).map(String::as_str).unwrap_or("-")))
                    .collect();
                (x, s, words.join(" "), axis)
            })
            .collect();
    }
    // the headline: where the stored labels say, else where the case's parameters say
    let Some(h) = headline(c) else { return Vec::new() };
    let from_params = axis_value(c, axis);
    let key = from_params.map(|p| p.1).unwrap_or(axis);
    match stream_axis_value(h, axis).or(from_params.map(|p| p.0)) {
        Some(x) => vec![(x, h, String::new(), key)],
        None => Vec::new(),
    }
}

/// Sweeps along `payload` and `rate` with at least two distinct values among measured cases.
pub fn sweeps(run: &Run) -> Vec<Sweep<'_>> {
    let mut out = Vec::new();
    for axis in ["payload", "rate"] {
        let mut groups: Vec<(String, Vec<SweepPoint>)> = Vec::new();
        for c in &run.cases {
            match headline(c) {
                Some(s) if s.stats.count > 0 => {}
                _ => continue,
            }
            for (x, stream, words, key) in case_points(c, axis) {
                let rest: Vec<String> = c
                    .params
                    .iter()
                    .filter(|(k, _)| {
                        k.as_str() != key
                            && !(axis == "rate"
                                && ["rate", "period", "interval"].contains(&k.as_str()))
                            && !(axis == "payload" && k.as_str() == "payload")
                    })
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                let mut label = format!("{} / {} / {}", c.probe, c.load, c.profile);
                if !rest.is_empty() {
                    label.push_str(&format!(" / {}", rest.join(" ")));
                }
                if !words.is_empty() {
                    label.push_str(&format!(" / {words}"));
                }
                match groups.iter_mut().find(|(l, _)| *l == label) {
                    Some((_, v)) => v.push((x, c, stream)),
                    None => groups.push((label, vec![(x, c, stream)])),
                }
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

/// A grid cell: (max_ns, p99_9_ns, the cell's cases), None when no case measured there.
pub type Cell<'a> = Option<(i64, Option<i64>, Vec<&'a CaseRecord>)>;

/// One profile x load grid of a probe: a column per load and parameters (`idle`,
/// `idle · transport=shm`: one cell per transport, never merged); cell = the worst (max of)
/// headline max and p99.9 over its cases (repetitions).
pub struct Grid<'a> {
    pub probe: String,
    pub profiles: Vec<String>,
    /// Column labels: the load, then the case's parameters when it has any.
    pub loads: Vec<String>,
    /// [profile][column]
    pub cells: Vec<Vec<Cell<'a>>>,
}

/// The parameters that tell case `c` apart within its probe, load and profile: its name's
/// parts after the profile (`transport=shm`), without the repetition (`#2`); "" when none.
pub fn case_axes(c: &CaseRecord) -> String {
    let base = c.name.split('#').next().unwrap_or_default();
    let parts: Vec<&str> = base.split('/').collect();
    match parts.iter().position(|p| *p == c.profile) {
        Some(i) if i >= 2 => parts[i + 1..].join("/"),
        _ => params_text(c),
    }
}

/// The column of case `c` in its probe's grid.
fn grid_column(c: &CaseRecord) -> String {
    match case_axes(c) {
        a if a.is_empty() => c.load.clone(),
        a => format!("{} · {a}", c.load),
    }
}

/// The grids of a run, one per probe with more than one profile or column.
pub fn grids(run: &Run) -> Vec<Grid<'_>> {
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
            let col = grid_column(c);
            if !loads.contains(&col) {
                loads.push(col);
            }
        }
        if profiles.len() < 2 && loads.len() < 2 {
            continue;
        }
        let mut cells: Vec<Vec<Cell<'_>>> = vec![vec![None; loads.len()]; profiles.len()];
        for c in cases {
            let Some(s) = headline(c) else { continue };
            let Some(max) = s.stats.max_ns else { continue };
            let i = profiles.iter().position(|x| *x == c.profile).expect("listed");
            let col = grid_column(c);
            let j = loads.iter().position(|x| *x == col).expect("listed");
            let cell: &mut Cell<'_> = &mut cells[i][j];
            match cell {
                None => *cell = Some((max, s.stats.p99_9_ns, vec![c])),
                Some((m, p, v)) => {
                    (*m, *p) = ((*m).max(max), (*p).max(s.stats.p99_9_ns));
                    v.push(c);
                }
            }
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
    /// The settings that tell the cases apart beside probe, load and profile (their names'
    /// parts after the profile: `transport=shm`), empty when none.
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
        let key = (c.probe.clone(), c.load.clone(), case_axes(c), h.name.clone(), h.metric.clone());
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
    use crate::ros2_layer::tests::{case, labels, run, stream};
    use rtlab_core::windows::WindowData;

    /// A fastdds stream of `payload` bytes for subscriber `sub` of `n`.
    fn at(payload: i64, sub: usize, n: usize, p50: i64) -> Stream {
        let mut l = labels("fastdds");
        l.insert("payload_bytes".into(), payload.to_string());
        l.insert("subscriber".into(), sub.to_string());
        l.insert("subscribers".into(), n.to_string());
        stream(&format!("fastdds.oneway.{payload}B.100hz.n{n}.sub{sub}"), l, p50, 100, 0)
    }

    #[test]
    fn a_sweep_inside_one_case_is_read_from_its_streams_labels() {
        // pubsub's own --payload list: one case, its streams at 64 and 4096 bytes, two
        // subscribers each: a line per subscriber, each with both sizes
        let c = case(
            0,
            "idle",
            "no-rt",
            &[("transport", "fastdds")],
            vec![
                at(64, 0, 2, 100_000),
                at(64, 1, 2, 110_000),
                at(4096, 0, 2, 150_000),
                at(4096, 1, 2, 160_000),
            ],
        );
        let r = run(1, vec![c]);
        let all = sweeps(&r);
        let payload: Vec<&Sweep> = all.iter().filter(|s| s.axis == "payload").collect();
        assert_eq!(payload.len(), 2, "{:?}", payload.iter().map(|s| &s.label).collect::<Vec<_>>());
        for (i, s) in payload.iter().enumerate() {
            assert!(s.label.ends_with(&format!("subscriber={i}")), "{}", s.label);
            let xs: Vec<f64> = s.points.iter().map(|p| p.0).collect();
            assert_eq!(xs, [64.0, 4096.0]);
            assert!(s.points.iter().all(|p| p.2.labels["subscriber"] == i.to_string()));
        }
        // the rate did not vary: no rate sweep
        assert!(all.iter().all(|s| s.axis != "rate"));
    }

    #[test]
    fn a_sweep_across_cases_reads_each_headlines_labels_before_the_parameters() {
        // two cases, payload an axis of the scenario, written with units ("4kib")
        let a = case(0, "idle", "no-rt", &[("payload", "64")], vec![at(64, 0, 1, 100_000)]);
        let b = case(1, "idle", "no-rt", &[("payload", "4kib")], vec![at(4096, 0, 1, 150_000)]);
        let r = run(1, vec![a, b]);
        let all = sweeps(&r);
        let s = all.iter().find(|s| s.axis == "payload").expect("a payload sweep");
        assert_eq!(s.label, "pubsub / idle / no-rt");
        assert_eq!(s.points.iter().map(|p| p.0).collect::<Vec<_>>(), [64.0, 4096.0]);
    }

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
