//! The noise probe's results across cases: the profiles side by side (a pivot of a run's
//! noise cases: a row per CPU, a column group per case, in the run's order, headed by its
//! profile) and `compare`'s noise per CPU (run A -> run B, judged as compare judges latency).
//!
//! Pivot: the noise cases of a run with the same load and parameters, measured under at
//! least two profiles (only the profile differs: the S1 and S2 presets' noise cases). A
//! case's cells are read from its own stored document ([`crate::summary::noise::rows`]); a
//! CPU a case did not measure (rt-isolation measures its isolated CPU only) is `-`. The
//! cells: stolen % (the gaps' sum over the time measured: what the CPU lost), the longest
//! gap (what bounds a real-time thread's extra latency) and the rate (gaps per second: how
//! often). The p99 of the gaps and the worst window stay in the per-case rows. Failed and
//! skipped cases have no column (their status is in the cases' table).
//!
//! Compare: cases matched by name, CPUs by their gap stream's name (`cpu1`). A CPU's row
//! gives stolen %, the longest gap and the rate in A and B and one verdict, by compare's
//! rule for latency (crate::compare): with a threshold set, a figure that grew by more than
//! the threshold percent and whose distribution the two-sample KS test finds different
//! (p < alpha) is a REGRESSION. The figures judged and their distributions:
//! - the longest gap, tested on the gaps' histograms (as latency's max on its samples');
//! - stolen %, tested on the stolen time per window (the `cpuN.stolen` stream: one sample
//!   per window, so the windows are the samples; a run shorter than a few windows cannot
//!   be significant, and the last window may be shorter than the others).
//!
//! The row's verdict is the worse of the two (REGRESSION, worse, better, same, in that
//! order). The rate is shown, not judged: more gaps that steal nothing measurable is no
//! real-time regression, and gaps that do steal show in stolen %. A figure that was 0 in A
//! has no growth in percent and is not judged (as latency's).

pub mod summary;

use crate::ks::{ks_histograms, verdict, CompareConfig, Ks, Verdict};
use crate::model::params_text;
use crate::summary::noise::{rows, NoiseRow, GAP_METRIC};
use crate::table::align_left;
use rtlab_core::run::{CaseRecord, Run};
use rtlab_core::schema::Stream;
use rtlab_core::units::us_1;
use std::fmt::Write as _;

/// One column group of a pivot: a noise case and its rows.
pub struct PivotColumn<'a> {
    /// The profile, with ` #N` (the repetition) when the profile has several columns.
    pub heading: String,
    pub case: &'a CaseRecord,
    pub rows: Vec<NoiseRow>,
}

/// The noise cases of one load and parameters under several profiles, side by side.
pub struct Pivot<'a> {
    pub load: String,
    /// The parameters shared by the cases (`k=v k=v`, empty when none).
    pub params: String,
    /// In the run's order.
    pub columns: Vec<PivotColumn<'a>>,
    /// Every CPU a column measured (`cpu0`, `cpu1`, ...), in CPU order.
    pub cpus: Vec<String>,
}

impl Pivot<'_> {
    /// `noise / load` and the parameters when there are any.
    pub fn label(&self) -> String {
        if self.params.is_empty() {
            format!("noise / {}", self.load)
        } else {
            format!("noise / {} / {}", self.load, self.params)
        }
    }

    /// Column `col`'s row of `cpu` (None: that case did not measure it).
    pub fn cell(&self, col: usize, cpu: &str) -> Option<&NoiseRow> {
        self.columns[col].rows.iter().find(|r| r.cpu == cpu)
    }
}

/// The figures of a pivot's cell, per column group.
pub const PIVOT_CELLS: [&str; 3] = ["stolen (%)", "max gap (us)", "rate (/s)"];

/// What the pivot's cells are, in one line.
pub const PIVOT_LEGEND: &str = "(per CPU and case: stolen % = the gaps' sum / the time measured; max gap = the longest gap; rate = gaps above the threshold per second measured; - : the case did not measure that CPU)";

/// A cell's figures in [`PIVOT_CELLS`] order (`-` when the case did not measure the CPU).
pub fn pivot_cells(r: Option<&NoiseRow>) -> [String; 3] {
    match r {
        Some(r) => [
            format!("{:.3}", r.stolen_pct()),
            r.max_gap_ns.map(us_1).unwrap_or_else(|| "-".into()),
            format!("{:.1}", r.rate_per_s()),
        ],
        None => ["-".into(), "-".into(), "-".into()],
    }
}

fn cpu_number(cpu: &str) -> u64 {
    cpu.trim_start_matches("cpu").parse().unwrap_or(u64::MAX)
}

/// The pivots of a run: one per load and parameters whose noise cases were measured under
/// at least two profiles (none otherwise).
pub fn pivots(run: &Run) -> Vec<Pivot<'_>> {
    // (load, parameters) -> its noise cases and their rows
    type Group<'a> = ((String, String), Vec<(&'a CaseRecord, Vec<NoiseRow>)>);
    let mut groups: Vec<Group<'_>> = Vec::new();
    for c in &run.cases {
        let Some(d) = &c.document else { continue };
        let r = rows(d);
        if c.probe != "noise" || r.is_empty() {
            continue;
        }
        let key = (c.load.clone(), params_text(c));
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push((c, r)),
            None => groups.push((key, vec![(c, r)])),
        }
    }
    let mut out = Vec::new();
    for ((load, params), cases) in groups {
        let mut profiles: Vec<&str> = cases.iter().map(|(c, _)| c.profile.as_str()).collect();
        profiles.sort_unstable();
        profiles.dedup();
        if profiles.len() < 2 {
            continue;
        }
        let all: Vec<&str> = cases.iter().map(|(c, _)| c.profile.as_str()).collect();
        let repeated = |p: &str| all.iter().filter(|x| **x == p).count() > 1;
        let mut cpus: Vec<String> = Vec::new();
        for (_, r) in &cases {
            for row in r {
                if !cpus.contains(&row.cpu) {
                    cpus.push(row.cpu.clone());
                }
            }
        }
        cpus.sort_by_key(|c| (cpu_number(c), c.clone()));
        let columns = cases
            .into_iter()
            .map(|(case, rows)| PivotColumn {
                heading: if repeated(&case.profile) {
                    format!("{} #{}", case.profile, case.repetition)
                } else {
                    case.profile.clone()
                },
                case,
                rows,
            })
            .collect();
        out.push(Pivot { load, params, columns, cpus });
    }
    out
}

/// Column groups in one block of the terminal's pivot: three keep a line within about 120
/// characters; S1's four profiles and more continue in a block below.
pub const GROUPS_PER_BLOCK: usize = 3;

/// The pivots of a run for the terminal: per pivot a heading line, then blocks of at most
/// [`GROUPS_PER_BLOCK`] column groups (a line of profiles over their groups, the cells'
/// names, a row per CPU), then [`PIVOT_LEGEND`]. "" when the run has no pivot.
pub fn pivots_text(run: &Run) -> String {
    let mut out = String::new();
    for p in pivots(run) {
        let _ = writeln!(out, "\nNoise, profiles side by side: {}", p.label());
        let cols: Vec<usize> = (0..p.columns.len()).collect();
        for (b, block) in cols.chunks(GROUPS_PER_BLOCK).enumerate() {
            if b > 0 {
                out.push('\n');
            }
            out.push_str(&block_text(&p, block));
        }
        let _ = writeln!(out, "{PIVOT_LEGEND}");
    }
    out
}

/// Column groups `block` of pivot `p`: the profiles over their groups, the cells' names, a
/// row per CPU.
fn block_text(p: &Pivot<'_>, block: &[usize]) -> String {
    let mut table: Vec<Vec<String>> = vec![std::iter::once("cpu".to_string())
        .chain(block.iter().flat_map(|_| PIVOT_CELLS.map(String::from)))
        .collect()];
    for cpu in &p.cpus {
        let mut r = vec![cpu.clone()];
        for &col in block {
            r.extend(pivot_cells(p.cell(col, cpu)));
        }
        table.push(r);
    }
    let aligned = align_left(&table, &[0]);
    // the profiles over their groups: each starts where its group's first cell does
    let width = |c: usize| table.iter().map(|r| r[c].chars().count()).max().unwrap_or(0);
    let n = PIVOT_CELLS.len();
    let mut line = String::new();
    let mut at = width(0) + 2;
    for (i, &col) in block.iter().enumerate() {
        let pad = at.saturating_sub(line.chars().count());
        let _ = write!(line, "{}{}", " ".repeat(pad), p.columns[col].heading);
        at += (0..n).map(|k| width(1 + n * i + k) + 2).sum::<usize>();
    }
    let mut out = String::new();
    let _ = writeln!(out, "{}", line.trim_end());
    out.push_str(&aligned);
    out
}

/// One CPU of a noise case in two runs.
#[derive(Clone, Debug)]
pub struct NoiseDiff {
    pub case: String,
    pub a: NoiseRow,
    pub b: NoiseRow,
    /// KS on the gaps' histograms (the longest gap's test).
    pub ks_gaps: Option<Ks>,
    /// KS on the stolen time per window (stolen %'s test).
    pub ks_stolen: Option<Ks>,
    pub verdict: Verdict,
}

fn stream<'a>(c: &'a CaseRecord, name: &str) -> Option<&'a Stream> {
    c.document.as_ref()?.streams.iter().find(|s| s.name == name)
}

fn pct_f(a: f64, b: f64) -> Option<f64> {
    (a > 0.0).then(|| (b - a) / a * 100.0)
}

fn severity(v: Verdict) -> u8 {
    match v {
        Verdict::Same => 0,
        Verdict::Better => 1,
        Verdict::Worse => 2,
        Verdict::Regression => 3,
    }
}

/// The noise of every case matched by name that measured noise in both runs, per CPU both
/// measured (see the module's doc for the verdict).
pub fn noise_diffs(a: &Run, b: &Run, cfg: CompareConfig) -> Vec<NoiseDiff> {
    let mut out = Vec::new();
    for ca in &a.cases {
        let Some(cb) = b.cases.iter().find(|c| c.name == ca.name) else { continue };
        let (Some(da), Some(db)) = (&ca.document, &cb.document) else { continue };
        let rb = rows(db);
        for x in rows(da) {
            let Some(y) = rb.iter().find(|r| r.cpu == x.cpu) else { continue };
            let hist = |c: &CaseRecord, n: &str| stream(c, n).map(|s| s.histogram.clone());
            let ks_gaps = match (hist(ca, &x.cpu), hist(cb, &y.cpu)) {
                (Some(p), Some(q)) => ks_histograms(&p, &q),
                _ => None,
            };
            let stolen = format!("{}.stolen", x.cpu);
            let ks_stolen = match (hist(ca, &stolen), hist(cb, &stolen)) {
                (Some(p), Some(q)) => ks_histograms(&p, &q),
                _ => None,
            };
            let max_delta = match (x.max_gap_ns, y.max_gap_ns) {
                (Some(p), Some(q)) => pct_f(p as f64, q as f64),
                _ => None,
            };
            let v_max = verdict(ks_gaps, max_delta, cfg);
            let v_stolen = verdict(ks_stolen, pct_f(x.stolen_pct(), y.stolen_pct()), cfg);
            let verdict = if severity(v_max) >= severity(v_stolen) { v_max } else { v_stolen };
            out.push(NoiseDiff {
                case: ca.name.clone(),
                a: x,
                b: y.clone(),
                ks_gaps,
                ks_stolen,
                verdict,
            });
        }
    }
    out
}

/// Whether a case measured noise (its gap streams are in compare's noise rows, not among
/// its latency streams).
pub fn is_noise_case(c: &CaseRecord) -> bool {
    c.document.as_ref().is_some_and(|d| d.streams.iter().any(|s| s.metric == GAP_METRIC))
}

fn change(a: f64, b: f64, text: impl Fn(f64) -> String) -> String {
    match pct_f(a, b) {
        Some(p) => format!("{} -> {} ({p:+.0}%)", text(a), text(b)),
        None => format!("{} -> {}", text(a), text(b)),
    }
}

fn p_text(k: Option<Ks>) -> String {
    k.map(|k| if k.p < 1e-4 { "<1e-4".to_string() } else { format!("{:.4}", k.p) })
        .unwrap_or_else(|| "-".into())
}

/// Compare's noise table: per case and CPU, A -> B with the change in percent, the verdict
/// and both tests' p; "" when no case measured noise in both runs.
pub fn render_noise_diffs(d: &[NoiseDiff], cfg: &CompareConfig) -> String {
    if d.is_empty() {
        return String::new();
    }
    let mut rows = vec![[
        "case / cpu",
        "verdict",
        "stolen (%)",
        "max gap (us)",
        "rate (/s)",
        "KS p gaps",
        "KS p stolen",
    ]
    .map(String::from)
    .to_vec()];
    for n in d {
        let max = match (n.a.max_gap_ns, n.b.max_gap_ns) {
            (Some(p), Some(q)) => change(p as f64, q as f64, |v| us_1(v as i64)),
            (p, q) => format!(
                "{} -> {}",
                p.map(us_1).unwrap_or_else(|| "-".into()),
                q.map(us_1).unwrap_or_else(|| "-".into())
            ),
        };
        rows.push(vec![
            format!("{} / {}", n.case, n.a.cpu),
            n.verdict.name().into(),
            change(n.a.stolen_pct(), n.b.stolen_pct(), |v| format!("{v:.3}")),
            max,
            change(n.a.rate_per_s(), n.b.rate_per_s(), |v| format!("{v:.1}")),
            p_text(n.ks_gaps),
            p_text(n.ks_stolen),
        ]);
    }
    let mut out = String::from("Noise per CPU (A -> B)\n");
    out.push_str(&align_left(&rows, &[0, 1]));
    let judged = match cfg.threshold_pct {
        Some(t) => format!("a regression: the max gap or stolen % grew by more than {t}% with p < {} (KS on the gaps for the max gap, on the stolen time per window for stolen %)", cfg.alpha),
        None => "no --threshold: nothing is judged a regression".into(),
    };
    let _ = writeln!(out, "({judged}; the rate shown, not judged)");
    out
}

#[cfg(test)]
mod tests;
