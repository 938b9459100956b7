//! The HTML report: ONE self-contained file (inline CSS, inline SVG plots, no script, no
//! external URL of any kind), so it opens offline and can be mailed or archived.
//!
//! Per run: the run and its machine; the studies' table (Min / Avg / Max / Missed x/N /
//! Packet loss x/N per case, published figures beside the measured ones); the percentile
//! table of every stream; the profile x load grid; payload and frequency sweeps; then per
//! case: status (failed and skipped cases with their error or reason), parameters,
//! environment differences, warnings, latency histogram (log counts), max over time with the
//! deadline line, and per-stream fairness when the case has several streams. Where the runs
//! hold the same pub/sub case through `ros2` and through the DDS its RMW runs on, the run's
//! "ROS 2 layer" table comes before its cases ([`ros2_layer_html`]).
//!
//! Contract: deterministic for a given input; every piece of text is escaped.

use crate::model::{
    grids, headline, lost_of, missed_of, params_text, primary_streams, profile_comparisons, status,
    sweeps,
};
use crate::ros2_layer::{ros2_layer, Ros2Layer, Side, DEFINITION};
use crate::svg::{self, esc};
use crate::terminal::{env_diff, machine_line, signed_us};
use crate::verdict::run_verdict;
use rtlab_core::run::{CaseRecord, Run};
use rtlab_core::units::us_1;
use std::fmt::Write as _;

const CSS: &str = r#"
body { font-family: sans-serif; margin: 24px; color: #1d1d1d; background: #ffffff; max-width: 1340px; }
h1 { font-size: 22px; margin: 8px 0; } h2 { font-size: 18px; margin: 22px 0 8px; border-bottom: 2px solid #8aa0c0; }
h3 { font-size: 15px; margin: 18px 0 6px; }
table { border-collapse: collapse; margin: 6px 0 12px; font-size: 13px; }
th { background: #dce6f4; text-align: left; } th, td { border: 1px solid #b9c3d0; padding: 3px 8px; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.published td { background: #fff4d6; font-style: italic; }
tr.failed td, .status-failed { background: #fbe0e0; } tr.skipped td, .status-skipped { background: #eeeeee; }
.status-ok { color: #1a7f37; } .status-interrupted { background: #fff0c8; }
.verdict-kept { color: #1a7f37; font-weight: bold; } .verdict-missed { color: #a00000; font-weight: bold; } .verdict-none { color: #555; }
td.verdict-missed { background: #fbe0e0; }
div.verdict { border: 2px solid #8aa0c0; border-radius: 6px; padding: 6px 14px; margin: 10px 0; }
div.verdict.missed { border-color: #c03030; background: #fff6f6; } div.verdict.kept { border-color: #2a8f47; background: #f4fbf5; }
div.verdict p.headline { font-size: 17px; font-weight: bold; margin: 6px 0; } div.verdict p.remedy { font-size: 15px; margin: 6px 0; }
div.verdict ul { margin: 4px 0; padding-left: 20px; font-size: 13px; }
.case { border: 1px solid #ccd; border-radius: 6px; padding: 8px 14px; margin: 14px 0; }
.plots { display: flex; flex-wrap: wrap; gap: 10px; }
.warn { color: #8a4b00; } .err { color: #a00000; font-weight: bold; }
.env { font-size: 12px; color: #444; }
td.grid { text-align: right; }
.tablebox { max-width: 100%; overflow-x: auto; }
pre.cost { white-space: pre-wrap; overflow-wrap: anywhere; font-size: 12px; }
table.percentiles { font-size: 12px; }
table.percentiles th, table.percentiles td { padding: 2px 5px; }
table.percentiles td.n { white-space: nowrap; }
table.percentiles td.stream { max-width: 200px; overflow-wrap: anywhere; }
table.percentiles .metric { color: #555; font-size: 11px; }
table.gates tr.broken td, table.gates tr.failed td, table.gates tr.unmatched td { background: #fbe9e9; font-weight: bold; }
tr.casehead td { background: #f2f5fa; font-weight: bold; overflow-wrap: anywhere; }
td.casename { max-width: 460px; overflow-wrap: anywhere; }
table.ros2layer td.side { max-width: 420px; overflow-wrap: anywhere; }
table.ros2layer tr.diff td { font-weight: bold; background: #eef6ee; }
table.ros2layer tr.note td { font-size: 12px; color: #444; }
table.noisepivot { font-size: 12px; }
table.noisepivot th, table.noisepivot td { padding: 2px 5px; }
table.noisepivot th.group { text-align: center; overflow-wrap: anywhere; }
"#;

fn us(v: Option<i64>) -> String {
    v.map(us_1).unwrap_or_else(|| "-".into())
}

fn td(v: &str) -> String {
    format!("<td class=\"n\">{}</td>", esc(v))
}

/// The cost column group of a run (a `<table class="cost">`: a row per case and measured
/// window, a pub/sub case's window with its CPU per message); "" when no case has a cost.
pub fn cost_html(run: &Run) -> String {
    use crate::cost::{case_cost, cost_rows, COST_HEADERS, COST_LEGEND};
    if !run.cases.iter().any(|c| case_cost(c).is_some()) {
        return String::new();
    }
    let mut o = String::from(
        "<h2>Cost</h2><div class=\"tablebox\"><table class=\"cost\"><tr><th>#</th><th>case</th>",
    );
    for h in COST_HEADERS {
        let _ = write!(o, "<th>{}</th>", esc(h));
    }
    o.push_str("</tr>\n");
    for c in &run.cases {
        for (i, cells) in cost_rows(case_cost(c)).into_iter().enumerate() {
            if i == 0 {
                let _ = write!(o, "<tr><td class=\"n\">{}</td><td class=\"casename\"><a href=\"#run{}-case{}\">{}</a></td>", c.index, run.id, c.index, breakable(&c.name));
            } else {
                o.push_str("<tr><td></td><td></td>");
            }
            let _ =
                write!(o, "<td class=\"stream\">{}</td>", esc(&cells[0]).replace('.', ".<wbr>"));
            for v in &cells[1..] {
                o.push_str(&td(v));
            }
            o.push_str("</tr>\n");
        }
    }
    let _ = writeln!(o, "</table></div><p class=\"env\">{}</p>", esc(COST_LEGEND));
    o
}

/// The studies' table of a run (a `<table class="studies">`).
pub fn studies_table(run: &Run) -> String {
    let mut o = String::from("<table class=\"studies\"><tr><th>#</th><th>case</th><th>verdict</th><th>Min (us)</th><th>Avg (us)</th><th>Max (us)</th><th>Missed deadlines</th><th>Packet loss</th></tr>\n");
    let verdict = run_verdict(run);
    for (c, v) in run.cases.iter().zip(&verdict.cases) {
        let (st, why) = status(c);
        let _ = write!(o, "<tr class=\"{st}\"><td class=\"n\">{}</td><td class=\"casename\"><a href=\"#run{}-case{}\">{}</a></td><td class=\"verdict-{}\" title=\"{}\">{}</td>", c.index, run.id, c.index, breakable(&c.name), v.tone(), esc(why), esc(&v.word()));
        match headline(c) {
            Some(s) => {
                let _ = write!(
                    o,
                    "{}{}{}{}{}",
                    td(&us(s.stats.min_ns)),
                    td(&us(s.stats.mean_ns)),
                    td(&us(s.stats.max_ns)),
                    td(&missed_of(s)),
                    td(&lost_of(s))
                );
            }
            None => o.push_str(&"<td class=\"n\">-</td>".repeat(5)),
        }
        o.push_str("</tr>\n");
        if let Some(p) = &c.published {
            let f = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into());
            let of = |x: Option<u64>| {
                x.map(|v| p.of.map(|n| format!("{v}/{n}")).unwrap_or_else(|| v.to_string()))
                    .unwrap_or_else(|| "-".into())
            };
            let _ = writeln!(o, "<tr class=\"published\"><td></td><td>published: {} <span class=\"env\">({})</span></td><td>published</td>{}{}{}{}{}</tr>", esc(&p.label), esc(&p.source), td(&f(p.min_us)), td(&f(p.avg_us)), td(&f(p.max_us)), td(&of(p.missed)), td(&of(p.lost)));
        }
    }
    o.push_str("</table>\n<p class=\"env\">Headline stream of a case: its <code>all</code> stream, or its only / first stream. Missed = samples above the deadline / samples; packet loss = lost / (samples + lost). The verdict counts every judged stream of the case and a skipped period as a missed deadline (docs/reports.md).</p>\n");
    o
}

/// A case name that may wrap after `/` and `,` (escaped).
fn breakable(name: &str) -> String {
    esc(name).replace('/', "/<wbr>").replace(',', ",<wbr>")
}

/// The column headers of the percentile table (all values in us).
pub const PERCENTILE_COLUMNS: [&str; 14] = [
    "stream", "count", "min", "mean", "stddev", "p50", "p90", "p99", "p99.9", "p99.99", "max",
    "missed", "lost", "overruns",
];

/// The percentile table of every stream of every measured case. Made to fit a 1400 px
/// page however long the names: each case is a full-width row of its own (its name wraps
/// after `/` and `,`), its streams follow with the metric under the stream name, the
/// numbers in a smaller font; the table sits in a box that scrolls sideways on a narrower
/// page instead of cutting columns off.
pub fn percentile_table(run: &Run) -> String {
    let mut o = String::from("<div class=\"tablebox\"><table class=\"percentiles\"><tr>");
    for h in PERCENTILE_COLUMNS {
        let _ = write!(o, "<th>{h}</th>");
    }
    o.push_str("</tr>\n");
    for c in &run.cases {
        let Some(d) = &c.document else { continue };
        let _ = writeln!(
            o,
            "<tr class=\"casehead\"><td colspan=\"{}\"><a href=\"#run{}-case{}\">{}</a></td></tr>",
            PERCENTILE_COLUMNS.len(),
            run.id,
            c.index,
            breakable(&c.name)
        );
        for s in &d.streams {
            let t = &s.stats;
            let _ = writeln!(
                o,
                "<tr><td class=\"stream\">{}<br><span class=\"metric\">{}</span></td>{}{}{}{}{}{}{}{}{}{}{}{}{}</tr>",
                esc(&s.name).replace('.', ".<wbr>"),
                esc(&s.metric).replace('_', "_<wbr>"),
                td(&t.count.to_string()),
                td(&us(t.min_ns)),
                td(&us(t.mean_ns)),
                td(&us(t.stddev_ns)),
                td(&us(t.p50_ns)),
                td(&us(t.p90_ns)),
                td(&us(t.p99_ns)),
                td(&us(t.p99_9_ns)),
                td(&us(t.p99_99_ns)),
                td(&us(t.max_ns)),
                td(&missed_of(s)),
                td(&lost_of(s)),
                td(&t.overruns.map(|v| v.to_string()).unwrap_or_else(|| "-".into())),
            );
        }
    }
    o.push_str("</table></div><p class=\"env\">All values in us; missed = samples above the deadline / samples; lost = lost / (samples + lost).</p>\n");
    o
}

/// The noise section of a run (empty without a noise case): per noise case and CPU, what
/// the machine stole from the busy thread (rows of [`crate::summary::noise::rows`]).
pub fn noise_html(run: &Run) -> String {
    use crate::summary::noise::{cells, rows, COLUMNS};
    let mut body = String::new();
    for c in &run.cases {
        let Some(d) = &c.document else { continue };
        for r in rows(d) {
            let _ = write!(
                body,
                "<tr><td class=\"casename\"><a href=\"#run{}-case{}\">{}</a></td>",
                run.id,
                c.index,
                breakable(&c.name)
            );
            for (i, v) in cells(&r).iter().enumerate() {
                if i == 0 {
                    let _ = write!(body, "<td>{}</td>", esc(v));
                } else {
                    body.push_str(&td(v));
                }
            }
            body.push_str("</tr>\n");
        }
    }
    if body.is_empty() {
        return body;
    }
    let mut o = String::from("<h2>Noise</h2><p class=\"env\">What the machine stole from a thread that never sleeps, per CPU: gaps between two clock reads above the threshold, their rate, their sum (stolen, and its share of the time measured), the most stolen in one window, the longest gap.</p>\n<div class=\"tablebox\"><table class=\"noise\"><tr><th>case</th>");
    for h in COLUMNS {
        let _ = write!(o, "<th>{}</th>", esc(h));
    }
    o.push_str("</tr>\n");
    o.push_str(&body);
    o.push_str("</table></div>\n");
    o.push_str(&noise_pivots_html(run));
    o
}

/// The noise cases of a run measured under several profiles, side by side (one
/// `<table class="noisepivot">` per [`crate::noise::Pivot`]: a row per CPU, a column group per
/// case headed by its profile and linked to it); "" when no pivot applies.
pub fn noise_pivots_html(run: &Run) -> String {
    use crate::noise::{pivot_cells, pivots, PIVOT_CELLS, PIVOT_LEGEND};
    let mut o = String::new();
    for p in pivots(run) {
        let _ = write!(
            o,
            "<h3>Profiles side by side: {}</h3>\n<div class=\"tablebox\"><table class=\"noisepivot\"><tr><th rowspan=\"2\">cpu</th>",
            esc(&p.label())
        );
        for c in &p.columns {
            let _ = write!(
                o,
                "<th colspan=\"{}\" class=\"group\"><a href=\"#run{}-case{}\">{}</a></th>",
                PIVOT_CELLS.len(),
                run.id,
                c.case.index,
                esc(&c.heading)
            );
        }
        o.push_str("</tr>\n<tr>");
        for _ in &p.columns {
            for h in PIVOT_CELLS {
                let _ = write!(o, "<th>{}</th>", esc(h));
            }
        }
        o.push_str("</tr>\n");
        for cpu in &p.cpus {
            let _ = write!(o, "<tr><td>{}</td>", esc(cpu));
            for col in 0..p.columns.len() {
                for v in pivot_cells(p.cell(col, cpu)) {
                    o.push_str(&td(&v));
                }
            }
            o.push_str("</tr>\n");
        }
        let _ = writeln!(o, "</table></div><p class=\"env\">{}</p>", esc(PIVOT_LEGEND));
    }
    o
}

/// The column headers of the ROS 2 layer table (figures in us).
pub const ROS2_LAYER_COLUMNS: [&str; 7] =
    ["side", "count", "lost", "p50 (us)", "p99 (us)", "p99.9 (us)", "max (us)"];

/// The "ROS 2 layer" of a run (its part of [`ros2_layer`]): the definition, then a table
/// with per pair the case (a full-width row), the `ros2` row, the direct DDS row (each
/// linked to its case), ros2 minus the direct DDS, and what the difference contains;
/// `ros2` streams left without a counterpart below it. One paragraph when nothing could be
/// paired; empty when the run has no `ros2` stream on a DDS rtlab drives.
pub fn ros2_layer_html(layer: &Ros2Layer<'_>) -> String {
    let mut o = String::new();
    if layer.pairs.is_empty() {
        if let Some(line) = layer.nothing_paired() {
            let _ = writeln!(o, "<h2>ROS 2 layer</h2><p class=\"env\">{}</p>", esc(&line));
        }
        return o;
    }
    let _ = write!(o, "<h2>ROS 2 layer: what rcl + the RMW + the type support add to the DDS underneath</h2>\n<p class=\"env\">{}</p>\n<div class=\"tablebox\"><table class=\"ros2layer\"><tr>", esc(DEFINITION));
    for h in ROS2_LAYER_COLUMNS {
        let _ = write!(o, "<th>{h}</th>");
    }
    o.push_str("</tr>\n");
    let n = ROS2_LAYER_COLUMNS.len();
    let side_row = |o: &mut String, class: &str, side: &Side<'_>| {
        let s = &side.stream.stats;
        let _ = writeln!(
            o,
            "<tr class=\"{class}\"><td class=\"side\"><a href=\"#run{}-case{}\">{}</a> <span class=\"env\">({})</span></td>{}{}{}{}{}{}</tr>",
            side.run_id,
            side.case.index,
            esc(&side.name()),
            esc(&side.place()),
            td(&s.count.to_string()),
            td(&lost_of(side.stream)),
            td(&us(s.p50_ns)),
            td(&us(s.p99_ns)),
            td(&us(s.p99_9_ns)),
            td(&us(s.max_ns)),
        );
    };
    for p in &layer.pairs {
        let _ = writeln!(
            o,
            "<tr class=\"casehead\"><td colspan=\"{n}\">{}</td></tr>",
            esc(&p.label).replace(" · ", " · <wbr>")
        );
        side_row(&mut o, "ros2", &p.ros2);
        side_row(&mut o, "direct", &p.direct);
        let _ = writeln!(
            o,
            "<tr class=\"diff\"><td class=\"side\">ros2 - {}</td><td></td><td></td>{}{}{}{}</tr>",
            esc(p.direct.transport()),
            td(&signed_us(p.diff(|s| s.p50_ns))),
            td(&signed_us(p.diff(|s| s.p99_ns))),
            td(&signed_us(p.diff(|s| s.p99_9_ns))),
            td(&signed_us(p.diff(|s| s.max_ns))),
        );
        for note in &p.notes {
            let _ = writeln!(o, "<tr class=\"note\"><td colspan=\"{n}\">{}</td></tr>", esc(note));
        }
    }
    o.push_str("</table></div>\n");
    for u in &layer.unpaired {
        let _ = writeln!(o, "<p class=\"env\">{}</p>", esc(&u.line()));
    }
    o
}

fn grid_html(run: &Run) -> String {
    let mut o = String::new();
    for g in grids(run) {
        let top = g.cells.iter().flatten().flatten().map(|c| c.0).max().unwrap_or(1).max(1) as f64;
        let bottom =
            g.cells.iter().flatten().flatten().map(|c| c.0).min().unwrap_or(1).max(1) as f64;
        let _ = write!(o, "<h3>Profile x load: {} (the verdict; max / p99.9, us, worst over the cell's cases)</h3><div class=\"tablebox\"><table class=\"grid\"><tr><th>profile \\ load</th>", esc(&g.probe));
        for l in &g.loads {
            let _ = write!(o, "<th>{}</th>", breakable(l));
        }
        o.push_str("</tr>\n");
        for (i, p) in g.profiles.iter().enumerate() {
            let _ = write!(o, "<tr><th>{}</th>", esc(p));
            for cell in &g.cells[i] {
                match cell {
                    Some((max, p999, cases)) => {
                        // shade by log(max) between the best and the worst cell
                        let span = (top.ln() - bottom.ln()).max(1e-9);
                        let f = if top > bottom {
                            (((*max).max(1) as f64).ln() - bottom.ln()) / span
                        } else {
                            1.0
                        };
                        let light = (95.0 - 35.0 * f.clamp(0.0, 1.0)).round();
                        let verdicts: Vec<_> = cases
                            .iter()
                            .map(|c| crate::verdict::case_verdict(c, &run.gates))
                            .collect();
                        let sum = crate::verdict::summed(&verdicts);
                        let tone = sum.as_ref().map_or("none", |v| v.tone());
                        // the hue says the verdict (red missed, green kept), the shade the max
                        let hue = match tone {
                            "missed" => "0, 70%",
                            "kept" => "130, 45%",
                            _ => "0, 0%",
                        };
                        let _ = write!(o, "<td class=\"grid\" style=\"background: hsl({hue}, {light}%)\" title=\"{} case(s)\"><span class=\"verdict-{tone}\">{}</span><br>{} / {}</td>", cases.len(), esc(&sum.map(|v| v.word()).unwrap_or_default()), us_1(*max), us(*p999));
                    }
                    None => o.push_str("<td class=\"grid\">-</td>"),
                }
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</table></div>\n");
    }
    o
}

/// One plot per probe x load (x parameters) measured under several profiles: the
/// complementary CDF of each profile's headline stream on the same axes.
pub fn profiles_compared_html(run: &Run) -> String {
    let cmp = profile_comparisons(run);
    if cmp.is_empty() {
        return String::new();
    }
    let mut o = String::from("<h2>Profiles compared</h2><p class=\"env\">Each plot: the fraction of samples at or above a latency (complementary CDF, both axes log) of the headline stream, one line per profile (repetitions summed). The tail is at the bottom right: the line further left and lower is the better profile.</p><div class=\"plots\">");
    for c in cmp {
        let lines: Vec<svg::CcdfLine> = c
            .profiles
            .iter()
            .map(|p| svg::CcdfLine {
                name: format!(
                    "{}: p99.9 {} · max {} us (n={})",
                    p.profile,
                    us(p.p99_9_ns),
                    us(p.max_ns),
                    p.count
                ),
                points: p.ccdf().into_iter().map(|(x, y)| (x as f64 / 1e3, y)).collect(),
            })
            .collect();
        let deadline = c.profiles.first().map(|p| p.deadline_ns);
        o.push_str(&svg::ccdf(
            &format!("{}: {} by profile", c.label(), c.stream),
            &format!("{} (us)", c.metric),
            &lines,
            deadline,
        ));
    }
    o.push_str("</div>\n");
    o
}

fn sweeps_html(run: &Run) -> String {
    let mut o = String::new();
    let sw = sweeps(run);
    if sw.is_empty() {
        return o;
    }
    o.push_str("<h2>Sweeps</h2><div class=\"plots\">");
    for s in sw {
        let pick = |f: fn(&rtlab_core::stats::Summary) -> Option<i64>| -> Vec<(f64, f64)> {
            s.points
                .iter()
                .filter_map(|(x, _, st)| f(&st.stats).map(|v| (*x, v as f64 / 1e3)))
                .collect()
        };
        let series = vec![
            ("p50".to_string(), pick(|t| t.p50_ns)),
            ("p99".to_string(), pick(|t| t.p99_ns)),
            ("max".to_string(), pick(|t| t.max_ns)),
        ];
        let xlabel = if s.axis == "payload" { "payload (bytes)" } else { "rate (Hz)" };
        o.push_str(&svg::lines(
            &format!("latency vs {}: {}", s.axis, s.label),
            xlabel,
            "latency (us, log)",
            &series,
        ));
    }
    o.push_str("</div>\n");
    o
}

fn case_html(run: &Run, c: &CaseRecord, warned: &[crate::model::RunWarning]) -> String {
    let mut o = String::new();
    let (st, why) = status(c);
    let v = crate::verdict::case_verdict(c, &run.gates);
    let _ = writeln!(o, "<div class=\"case\" id=\"run{}-case{}\"><h3>Case {}: {} <span class=\"verdict-{}\">[{}]</span></h3>", run.id, c.index, c.index, esc(&c.name), v.tone(), esc(&v.word()));
    let _ = writeln!(
        o,
        "<p>probe <b>{}</b> · load <b>{}</b> · profile <b>{}</b> · {} · repetition {} · started {} · {:.1} s</p>",
        esc(&c.probe),
        esc(&c.load),
        esc(&c.profile),
        esc(&if c.params.is_empty() { "no params".into() } else { params_text(c) }),
        c.repetition,
        esc(&c.started_at),
        c.duration_ns as f64 / 1e9
    );
    if !why.is_empty() {
        let _ = writeln!(
            o,
            "<p class=\"err\">{}: {}</p>",
            if st == "skipped" { "skipped" } else { "error" },
            esc(why)
        );
    }
    let Some(d) = &c.document else {
        o.push_str("<p>Nothing was measured in this case.</p></div>\n");
        return o;
    };
    o.push_str(&case_env_and_warnings(run, d, warned));
    if let Some(cost) = &d.cost {
        o.push_str("<pre class=\"cost\">");
        for l in crate::cost::cost_lines(cost) {
            let _ = writeln!(o, "{}", esc(&l));
        }
        o.push_str("</pre>\n");
    }
    o.push_str(&case_plots(c));
    if let Some(ev) = &d.evidence {
        o.push_str(&evidence_html(ev, headline(c)));
    } else if c.spike_evidence.is_some() {
        o.push_str("<p class=\"env\">Spike evidence is stored with this case (see <code>rtlab export --format json</code>).</p>\n");
    }
    if let Some(f) = &d.far {
        o.push_str("<ul class=\"env\">");
        for l in f.summary() {
            let _ = write!(o, "<li>{}</li>", esc(&l));
        }
        o.push_str("</ul>\n");
    }
    o.push_str("</div>\n");
    o
}

/// A case's environment (as the run's, or what differs) and its warnings (those the run's
/// list says in the same words named, the case's own in full).
fn case_env_and_warnings(
    run: &Run,
    d: &rtlab_core::schema::ResultDocument,
    warned: &[crate::model::RunWarning],
) -> String {
    let mut o = String::new();
    let diff = env_diff(&run.info.environment, &d.environment);
    if diff.is_empty() {
        let _ = writeln!(
            o,
            "<p class=\"env\">Environment: as the run's ({})</p>",
            esc(&machine_line(&d.environment))
        );
    } else {
        let _ = writeln!(
            o,
            "<p class=\"env\">Environment: as the run's except {}</p>",
            esc(&diff
                .iter()
                .map(|(k, a, b)| format!("{k}: {a} -> {b}"))
                .collect::<Vec<_>>()
                .join(", "))
        );
    }
    if d.warnings.is_empty() {
        o.push_str("<p class=\"warn\">Warnings: none</p>\n");
    } else {
        // a warning the run's list says in the same words is named; the case's own in full
        let (codes, own) = crate::model::split_warnings(warned, &d.warnings);
        o.push_str("<ul class=\"warn\">");
        if !codes.is_empty() {
            let _ = write!(
                o,
                "<li><b>{}</b> (<a href=\"#run{}-warnings\">the run's warnings</a>)</li>",
                esc(&codes.join(", ")),
                run.id
            );
        }
        for w in own {
            let _ = write!(o, "<li><b>{}</b>: {}</li>", esc(&w.code), esc(&w.message));
        }
        o.push_str("</ul>\n");
    }
    o
}

/// A case's plots: the headline stream's histogram and max over time, and the fairness of
/// its streams when it has several.
fn case_plots(c: &CaseRecord) -> String {
    let mut o = String::new();
    if let Some(h) = headline(c) {
        o.push_str("<div class=\"plots\">");
        o.push_str(&svg::histogram(
            &format!("{}: {} histogram", h.name, h.metric),
            &h.histogram,
            Some(h.deadline_ns),
        ));
        o.push_str(&svg::max_over_time(
            &format!("{}: max over time", h.name),
            &h.windows,
            Some(h.deadline_ns),
        ));
        let prim = primary_streams(c);
        if prim.len() > 1 {
            let cats: Vec<String> = prim.iter().map(|s| s.name.clone()).collect();
            let ser = |f: fn(&rtlab_core::stats::Summary) -> Option<i64>| {
                prim.iter().map(|s| f(&s.stats).map(|v| v as f64 / 1e3)).collect::<Vec<_>>()
            };
            let series = vec![
                ("p50".to_string(), ser(|t| t.p50_ns)),
                ("p99".to_string(), ser(|t| t.p99_ns)),
                ("max".to_string(), ser(|t| t.max_ns)),
            ];
            let what = if c.probe == "pubsub" { "per subscriber" } else { "per stream" };
            o.push_str(&svg::bars(
                &format!("fairness {what} ({})", h.metric),
                "latency (us, log)",
                &cats,
                &series,
            ));
        }
        o.push_str("</div>\n");
    }
    o
}

/// The spike's explanation and the worst windows of the headline stream with what the
/// kernel counted in each (the counters follow the stream's window grid).
fn evidence_html(
    ev: &rtlab_core::evidence::Evidence,
    h: Option<&rtlab_core::schema::Stream>,
) -> String {
    let mut o = String::new();
    if let Some(sp) = &ev.spike {
        match (sp.index, sp.value_ns) {
            (Some(i), Some(v)) => {
                let _ = write!(
                    o,
                    "<p class=\"env\">Spike (first sample above {} us): sample {i}, {} us",
                    rtlab_core::units::us_1(sp.threshold_ns),
                    rtlab_core::units::us_1(v)
                );
                if let Some(f) = &sp.trace_file {
                    let _ = write!(o, "; trace <code>{}</code>", esc(f));
                }
                o.push_str("</p>\n<ul class=\"env\">");
                for l in &sp.attribution {
                    let _ = write!(o, "<li>{}</li>", esc(l));
                }
                o.push_str("</ul>\n");
            }
            _ => {
                let _ = writeln!(
                    o,
                    "<p class=\"env\">Spike tracing armed at {} us: no sample crossed it.</p>",
                    rtlab_core::units::us_1(sp.threshold_ns)
                );
            }
        }
    }
    if let (Some(cn), Some(h)) = (&ev.counters, h) {
        let worst = cn.worst(&h.windows, 3);
        if !worst.is_empty() && worst.iter().any(|w| w.2.is_some()) {
            let _ = write!(o, "<p class=\"env\">Worst windows of {} and what the kernel did in them:</p><ul class=\"env\">", esc(&h.name));
            for (i, max, k) in worst {
                let what =
                    k.map(|k| k.describe()).unwrap_or_else(|| "no counters for this window".into());
                let _ = write!(
                    o,
                    "<li>window {i}: max {} us; {}</li>",
                    rtlab_core::units::us_1(max),
                    esc(&what)
                );
            }
            o.push_str("</ul>\n");
        }
    }
    for n in &ev.notes {
        let _ = writeln!(o, "<p class=\"env\">Note: {}</p>", esc(n));
    }
    o
}

/// The run's verdict, what helps and the sentence to act on (a `<div class="verdict">`):
/// the first thing a run's part of the report shows.
pub fn verdict_html(run: &Run) -> String {
    let v = run_verdict(run);
    let tone = v.tone();
    let mut o = format!(
        "<div class=\"verdict {tone}\"><p class=\"headline\">Verdict: {}</p>\n",
        esc(&v.headline())
    );
    let helps = v.helps_lines();
    if !helps.is_empty() {
        o.push_str("<p>What helps (each profile, per probe and load):</p><ul>");
        for l in helps {
            let _ = write!(o, "<li>{}</li>", esc(&l));
        }
        o.push_str("</ul>\n");
    }
    let _ = writeln!(o, "<p class=\"remedy\">So: {}</p></div>", esc(&v.remedy()));
    o
}

/// The run's warnings, each code once with the cases it applies to; "" when none warned.
pub fn warnings_html(run: &Run) -> String {
    let warned = crate::model::run_warnings(run);
    if warned.is_empty() {
        return String::new();
    }
    let measured = crate::model::measured_cases(run);
    let mut o = format!("<h2 id=\"run{}-warnings\">Warnings</h2><p class=\"env\">Each once, with the cases it applies to; a case's own message is in its section where it differs.</p><ul class=\"runwarn\">", run.id);
    for w in &warned {
        let _ = write!(
            o,
            "<li><b>{}</b> ({}): {}</li>",
            esc(&w.code),
            esc(&w.cases_text(measured)),
            esc(&w.message)
        );
    }
    o.push_str("</ul>\n");
    o
}

/// The whole report as one HTML document.
pub fn render_html(runs: &[Run]) -> String {
    let mut o = String::new();
    let title = runs
        .iter()
        .map(|r| format!("run {} ({})", r.id, r.info.scenario))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = write!(o, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>rtlab report: {}</title><style>{CSS}</style></head><body>\n", esc(&title));
    let _ = writeln!(o, "<h1>rtlab report: {}</h1>", esc(&title));
    let layer = ros2_layer(runs);
    for run in runs {
        let i = &run.info;
        let _ = writeln!(
            o,
            "<section class=\"run\" id=\"run{}\"><h2>Run {}: {} ({})</h2>",
            run.id,
            run.id,
            esc(&i.scenario),
            esc(&i.source)
        );
        let _ = writeln!(
            o,
            "<p class=\"env\">{} · {} · scale {} · started {}</p>",
            run.status.name(),
            esc(&machine_line(&i.environment)),
            i.scale,
            esc(&i.started_at)
        );
        // reading order: the answer, the study's grid, the overlays, then the detail
        o.push_str(&verdict_html(run));
        let g = grid_html(run);
        if !g.is_empty() {
            o.push_str("<h2>Profiles and loads</h2>");
            o.push_str(&g);
        }
        o.push_str(&profiles_compared_html(run));
        let _ = writeln!(o, "<h2>Cases ({})</h2>", run.cases.len());
        o.push_str(&studies_table(run));
        o.push_str(&crate::gates::gates_html(run));
        o.push_str(&warnings_html(run));
        o.push_str(&noise_html(run));
        o.push_str(&crate::trace::html::html(run));
        o.push_str(&sweeps_html(run));
        o.push_str(&ros2_layer_html(&layer.of_run(run.id)));
        o.push_str("<h2>Percentiles</h2>");
        o.push_str(&percentile_table(run));
        o.push_str(&cost_html(run));
        let _ = writeln!(
            o,
            "<h2>The run</h2><table class=\"runinfo\"><tr><th>status</th><td>{}</td></tr><tr><th>started</th><td>{}</td></tr><tr><th>finished</th><td>{}</td></tr><tr><th>rtlab</th><td>{}</td></tr><tr><th>scale</th><td>{}</td></tr><tr><th>command</th><td><code>{}</code></td></tr><tr><th>machine</th><td>{}</td></tr><tr><th>kernel command line</th><td><code>{}</code></td></tr></table>",
            run.status.name(),
            esc(&i.started_at),
            esc(run.finished_at.as_deref().unwrap_or("-")),
            esc(&i.tool_version),
            i.scale,
            esc(&i.command_line.join(" ")),
            esc(&machine_line(&i.environment)),
            esc(&i.environment.cmdline)
        );
        o.push_str("<h2>Case by case</h2>\n");
        let warned = crate::model::run_warnings(run);
        for c in &run.cases {
            o.push_str(&case_html(run, c, &warned));
        }
        o.push_str("</section>\n");
    }
    o.push_str("</body></html>\n");
    o
}
