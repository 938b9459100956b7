//! Inline SVG plots generated in Rust (no JS, no external resources): a latency histogram
//! with log counts, a max-over-time plot with the deadline line, line plots for sweeps and a
//! grouped bar chart for per-stream fairness.
//!
//! Contract: pure functions returning one `<svg>` element; all text is XML-escaped; an empty
//! input gives a small SVG that says "no samples" (never a broken element).

use rtlab_core::histogram::HistogramData;
use rtlab_core::windows::WindowData;
use std::fmt::Write as _;

const W: f64 = 640.0;
const H: f64 = 260.0;
const ML: f64 = 64.0; // left margin (y labels)
const MR: f64 = 16.0;
const MT: f64 = 34.0; // top margin: a title of up to two lines
const MB: f64 = 44.0; // bottom margin (x labels)

/// Series colours (also checked by the screenshot test: the bars are `BAR`).
pub const BAR: &str = "#3b6fb6";
pub const DEADLINE: &str = "#d62728";
pub const SERIES: [&str; 8] =
    ["#3b6fb6", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"];

/// Escape text for XML/HTML.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// A number for an axis label: compact, no trailing zeros.
fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 || v == v.trunc() {
        format!("{:.0}", v)
    } else if a >= 1.0 {
        format!("{:.1}", v)
    } else {
        format!("{:.2}", v)
    }
}

/// "Nice" linear ticks covering [lo, hi] (Heckbert, "Nice numbers for graph labels", Graphics Gems, 1990).
fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if hi <= lo || !lo.is_finite() || !hi.is_finite() {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step =
        [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 && out.len() < 50 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

/// Decade ticks for a log axis over [lo, hi] (both > 0).
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut e = lo.log10().floor() as i32;
    while 10f64.powi(e) <= hi * 1.0001 && out.len() < 20 {
        if 10f64.powi(e) >= lo * 0.9999 {
            out.push(10f64.powi(e));
        }
        e += 1;
    }
    out
}

struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Axis {
    fn new(lo: f64, hi: f64, log: bool) -> Axis {
        let (lo, hi) = if hi > lo {
            (lo, hi)
        } else if log {
            (lo / 2.0, lo * 2.0)
        } else {
            (lo - 1.0, lo + 1.0)
        };
        Axis { lo, hi, log }
    }
    fn frac(&self, v: f64) -> f64 {
        if self.log {
            (v.max(self.lo).ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }
    fn x(&self, v: f64) -> f64 {
        ML + self.frac(v) * (W - ML - MR)
    }
    fn y(&self, v: f64) -> f64 {
        H - MB - self.frac(v) * (H - MT - MB)
    }
    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let t = log_ticks(self.lo, self.hi);
            if t.len() >= 2 {
                return t;
            }
        }
        ticks(self.lo, self.hi, 6)
    }
}

fn open(out: &mut String, title: &str, class: &str) {
    let _ = write!(
        out,
        r#"<svg class="plot {class}" xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img"><title>{}</title>"#,
        esc(title)
    );
    let _ = write!(out, r##"<rect x="0" y="0" width="{W}" height="{H}" fill="#ffffff"/>"##);
    for (l, (line, y, size)) in title_lines(title).into_iter().enumerate() {
        // a line estimated wider than the plot is fitted to it (never cut off)
        let room = W - 16.0;
        let fit = if line.chars().count() as f64 * size * CHAR_EM > room {
            format!(r#" textLength="{room}" lengthAdjust="spacingAndGlyphs""#)
        } else {
            String::new()
        };
        let _ = write!(
            out,
            r##"<text class="title{l}" x="8" y="{y}" font-size="{size}" font-family="sans-serif" fill="#222"{fit}>{}</text>"##,
            esc(&line)
        );
    }
}

/// The average width of a sans-serif character, in ems (to estimate a text's width).
const CHAR_EM: f64 = 0.56;

/// A plot's title as (line, baseline y, font size): one line at 13 px when it fits the
/// plot's width, else two lines at 11 px broken at the space or `/` nearest the middle.
fn title_lines(title: &str) -> Vec<(String, f64, f64)> {
    let room = W - 16.0;
    let n = title.chars().count();
    if n as f64 * 13.0 * CHAR_EM <= room {
        return vec![(title.to_string(), 17.0, 13.0)];
    }
    let chars: Vec<char> = title.chars().collect();
    let mid = n / 2;
    let cut = (0..n)
        .filter(|&i| chars[i] == ' ' || chars[i] == '/')
        .min_by_key(|&i| i.abs_diff(mid))
        .map(|i| i + 1)
        .unwrap_or(mid);
    let first: String = chars[..cut].iter().collect();
    let second: String = chars[cut..].iter().collect();
    vec![(first.trim_end().to_string(), 13.0, 11.0), (second.trim().to_string(), 27.0, 11.0)]
}

/// The label of a vertical deadline line at `x`: right of the line, or left of it where the
/// text would leave the plot.
fn deadline_label(x: f64, text: &str) -> String {
    let width = text.chars().count() as f64 * 10.0 * CHAR_EM;
    let (lx, anchor) = if x + 3.0 + width > W - MR { (x - 3.0, "end") } else { (x + 3.0, "start") };
    format!(
        r#"<text class="deadline-label" x="{lx:.1}" y="{:.1}" font-size="10" font-family="sans-serif" text-anchor="{anchor}" fill="{DEADLINE}">{}</text>"#,
        MT + 10.0,
        esc(text)
    )
}

fn frame(
    out: &mut String,
    x: &Axis,
    y: &Axis,
    xlabel: &str,
    ylabel: &str,
    xfmt: &dyn Fn(f64) -> String,
) {
    frame_fmt(out, x, y, xlabel, ylabel, xfmt, &num)
}

fn frame_fmt(
    out: &mut String,
    x: &Axis,
    y: &Axis,
    xlabel: &str,
    ylabel: &str,
    xfmt: &dyn Fn(f64) -> String,
    yfmt: &dyn Fn(f64) -> String,
) {
    let (x0, x1, y0, y1) = (ML, W - MR, MT, H - MB);
    for t in y.ticks() {
        let py = y.y(t);
        let _ = write!(
            out,
            r##"<line x1="{x0}" y1="{py:.1}" x2="{x1}" y2="{py:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" font-size="10" font-family="sans-serif" text-anchor="end" fill="#444">{}</text>"##,
            x0 - 4.0,
            py + 3.0,
            yfmt(t)
        );
    }
    for t in x.ticks() {
        let px = x.x(t);
        let _ = write!(
            out,
            r##"<line x1="{px:.1}" y1="{y1}" x2="{px:.1}" y2="{:.1}" stroke="#888"/><text x="{px:.1}" y="{:.1}" font-size="10" font-family="sans-serif" text-anchor="middle" fill="#444">{}</text>"##,
            y1 + 4.0,
            y1 + 15.0,
            xfmt(t)
        );
    }
    let _ = write!(
        out,
        r##"<rect x="{x0}" y="{y0}" width="{:.1}" height="{:.1}" fill="none" stroke="#888"/>"##,
        x1 - x0,
        y1 - y0
    );
    let _ = write!(
        out,
        r##"<text x="{:.1}" y="{:.1}" font-size="11" font-family="sans-serif" text-anchor="middle" fill="#222">{}</text>"##,
        (x0 + x1) / 2.0,
        H - 8.0,
        esc(xlabel)
    );
    let _ = write!(
        out,
        r##"<text x="12" y="{:.1}" font-size="11" font-family="sans-serif" text-anchor="middle" fill="#222" transform="rotate(-90 12 {:.1})">{}</text>"##,
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0,
        esc(ylabel)
    );
}

fn empty(title: &str, class: &str) -> String {
    let mut out = String::new();
    open(&mut out, title, class);
    let _ = write!(
        out,
        r##"<text x="{:.1}" y="{:.1}" font-size="13" font-family="sans-serif" text-anchor="middle" fill="#888">no samples</text></svg>"##,
        W / 2.0,
        H / 2.0
    );
    out
}

/// A latency histogram: x in us (log scale when every bucket is above zero and the range
/// spans more than a decade), bar height = log10(count + 1); the deadline as a red line.
pub fn histogram(title: &str, h: &HistogramData, deadline_ns: Option<i64>) -> String {
    let bs = &h.buckets;
    if bs.is_empty() {
        return empty(title, "histogram");
    }
    let lo = bs[0].low_ns as f64 / 1e3;
    let mut hi = (bs[bs.len() - 1].high_ns + 1) as f64 / 1e3;
    // the deadline is on the axis, with the data
    if let Some(d) = deadline_ns.map(|d| d as f64 / 1e3).filter(|d| *d > lo) {
        hi = hi.max(d * 1.05);
    }
    let log = lo > 0.0 && hi / lo > 10.0;
    let xa = Axis::new(lo, hi, log);
    // rebin into at most 120 columns so small buckets stay visible
    const COLS: usize = 120;
    let mut cols = vec![0u64; COLS];
    for b in bs {
        let mid = (b.low_ns as f64 + b.high_ns as f64 + 1.0) / 2.0 / 1e3;
        let i = ((xa.frac(mid) * COLS as f64) as isize).clamp(0, COLS as isize - 1) as usize;
        cols[i] += b.count;
    }
    let top = cols.iter().copied().max().unwrap_or(1).max(1) as f64;
    let ya = Axis::new(0.0, (top + 1.0).log10().ceil().max(1.0), false);
    let mut out = String::new();
    open(&mut out, title, "histogram");
    frame(
        &mut out,
        &xa,
        &ya,
        if log { "latency (us, log scale)" } else { "latency (us)" },
        "log10(count+1)",
        &num,
    );
    let cw = (W - ML - MR) / COLS as f64;
    for (i, &c) in cols.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let v = (c as f64 + 1.0).log10();
        let y = ya.y(v);
        let _ = write!(
            out,
            r#"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{BAR}"><title>{c} samples</title></rect>"#,
            ML + i as f64 * cw,
            (cw - 0.5).max(0.8),
            H - MB - y
        );
    }
    if let Some(d) = deadline_ns {
        let du = d as f64 / 1e3;
        if du >= xa.lo && du <= xa.hi {
            let x = xa.x(du);
            let _ = write!(
                out,
                r#"<line class="deadline" x1="{x:.1}" y1="{MT}" x2="{x:.1}" y2="{:.1}" stroke="{DEADLINE}" stroke-width="2" stroke-dasharray="6 3"/>{}"#,
                H - MB,
                deadline_label(x, &format!("deadline {} us", num(du)))
            );
        }
    }
    if h.overflow_high + h.overflow_low > 0 {
        let _ = write!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-size="10" font-family="sans-serif" text-anchor="end" fill="#b00">overflow: {} high, {} low</text>"##,
            W - MR - 4.0,
            MT + 12.0,
            h.overflow_high,
            h.overflow_low
        );
    }
    out.push_str("</svg>");
    out
}

/// Max over time: the maximum of each window (us) against the window's start (s), with the
/// deadline as a red dashed line. Windows without samples are gaps in the line (never
/// zeros); a partial last window ([`crate::model::window_points`]) is a hollow marker, not
/// joined to the line, and said so in the plot.
pub fn max_over_time(title: &str, w: &WindowData, deadline_ns: Option<i64>) -> String {
    let wp = crate::model::window_points(w);
    let at = |i: usize| i as f64 * w.width_ns as f64 / 1e9;
    let pts: Vec<(usize, f64, f64, bool)> =
        wp.iter().map(|p| (p.index, at(p.index), p.max_ns as f64 / 1e3, p.partial)).collect();
    if pts.is_empty() {
        return empty(title, "timeplot");
    }
    let xmax = at(w.max_ns.len()).max(pts.last().map(|p| p.1).unwrap_or(0.0));
    let mut ymax = pts.iter().map(|p| p.2).fold(f64::MIN, f64::max);
    let ymin = pts.iter().map(|p| p.2).fold(f64::MAX, f64::min).min(0.0);
    if let Some(d) = deadline_ns {
        ymax = ymax.max(d as f64 / 1e3);
    }
    let xa = Axis::new(0.0, xmax, false);
    // the data and the deadline both readable: log y when they span more than a decade
    let ypos = pts.iter().map(|p| p.2).fold(f64::MAX, f64::min);
    let ylog = ypos > 0.0 && ymax / ypos > 10.0;
    let ya = if ylog {
        Axis::new(ypos / 1.5, ymax * 1.5, true)
    } else {
        Axis::new(ymin, ymax * 1.08, false)
    };
    let mut out = String::new();
    open(&mut out, title, "timeplot");
    frame(
        &mut out,
        &xa,
        &ya,
        &format!("time (s), window {} ms", num(w.width_ns as f64 / 1e6)),
        if ylog { "max latency (us, log)" } else { "max latency (us)" },
        &num,
    );
    let mut path = String::new();
    let mut prev: Option<usize> = None;
    for &(i, x, y, partial) in &pts {
        if partial {
            continue;
        }
        let cmd = if prev.is_some_and(|p| p + 1 == i) { " L" } else { " M" };
        let _ = write!(path, "{cmd}{:.1},{:.1}", xa.x(x), ya.y(y));
        prev = Some(i);
    }
    let _ = write!(
        out,
        r#"<path d="{}" fill="none" stroke="{BAR}" stroke-width="1.5"/>"#,
        path.trim_start()
    );
    for &(_, x, y, partial) in &pts {
        if partial {
            continue;
        }
        let _ = write!(
            out,
            r#"<circle cx="{:.1}" cy="{:.1}" r="2.2" fill="{BAR}"/>"#,
            xa.x(x),
            ya.y(y)
        );
    }
    if let Some(p) = wp.iter().find(|p| p.partial) {
        let (x, y) = (xa.x(at(p.index)), ya.y(p.max_ns as f64 / 1e3));
        let _ = write!(
            out,
            r##"<circle class="partial" cx="{x:.1}" cy="{y:.1}" r="3" fill="#ffffff" stroke="{BAR}" stroke-width="1.2"><title>window {}: partial ({} samples)</title></circle><text x="{:.1}" y="{:.1}" font-size="10" font-family="sans-serif" text-anchor="end" fill="#555">○ last window partial ({} samples), not joined</text>"##,
            p.index,
            p.count,
            W - MR - 4.0,
            MT + 12.0,
            p.count
        );
    }
    if let Some(d) = deadline_ns {
        let y = ya.y(d as f64 / 1e3);
        let _ = write!(
            out,
            r#"<line class="deadline" x1="{ML}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{DEADLINE}" stroke-width="2" stroke-dasharray="6 3"/><text x="{:.1}" y="{:.1}" font-size="10" font-family="sans-serif" text-anchor="end" fill="{DEADLINE}">deadline {} us</text>"#,
            W - MR,
            W - MR - 4.0,
            y - 4.0,
            num(d as f64 / 1e3)
        );
    }
    out.push_str("</svg>");
    out
}

/// A probability on a log axis: `1`, `0.1`, `0.01`, then `1e-3`, `1e-4`, ...
fn prob(v: f64) -> String {
    if v >= 0.01 {
        num(v)
    } else {
        format!("1e{}", v.log10().round() as i32)
    }
}

/// One line of a [`ccdf`] plot.
pub struct CcdfLine {
    /// Legend text (the profile and its figures).
    pub name: String,
    /// Steps (x_us, P(X >= x)) as [`crate::model::ProfileDist::ccdf`] gives them (in us).
    pub points: Vec<(f64, f64)>,
}

/// The complementary CDF of several distributions on the same axes: x latency (us; log
/// when the range spans more than a decade), y the fraction of samples at or above x (log),
/// one step line per distribution, a legend, the deadline as a red dashed line. The tail
/// is at the bottom right: the line further left and lower is the better one.
pub fn ccdf(title: &str, xlabel: &str, lines: &[CcdfLine], deadline_ns: Option<i64>) -> String {
    let all: Vec<(f64, f64)> = lines.iter().flat_map(|l| l.points.iter().copied()).collect();
    if all.is_empty() {
        return empty(title, "ccdf");
    }
    let xpos: Vec<f64> = all.iter().map(|p| p.0).filter(|x| *x > 0.0).collect();
    let mut xhi = all.iter().map(|p| p.0).fold(f64::MIN, f64::max);
    // the deadline is on the axis, with the data
    if let Some(d) = deadline_ns.map(|d| d as f64 / 1e3) {
        xhi = xhi.max(d * 1.05);
    }
    let xlo_pos = xpos.iter().copied().fold(f64::MAX, f64::min);
    // log whenever every latency is positive (the plots of a report compare alike)
    let xlog = !xpos.is_empty() && xpos.len() == all.len() && xhi / xlo_pos > 2.0;
    let xa = if xlog {
        Axis::new(xlo_pos / 1.2, xhi * 1.2, true)
    } else {
        let lo = all.iter().map(|p| p.0).fold(f64::MAX, f64::min);
        Axis::new(lo.min(0.0), xhi * 1.05, false)
    };
    let ylo = all.iter().map(|p| p.1).filter(|y| *y > 0.0).fold(1.0, f64::min);
    let ya = Axis::new(10f64.powf(ylo.log10().floor()).min(ylo / 1.5), 1.0, true);
    let mut out = String::new();
    open(&mut out, title, "ccdf");
    frame_fmt(&mut out, &xa, &ya, xlabel, "fraction of samples >= x (log)", &num, &prob);
    let mut legend: Vec<(&str, &String)> = Vec::new();
    for (k, l) in lines.iter().enumerate() {
        let col = SERIES[k % SERIES.len()];
        let mut path = String::new();
        let mut last_y = None;
        for &(x, y) in &l.points {
            let (px, py) = (xa.x(x), ya.y(y));
            match last_y {
                None => {
                    let _ = write!(path, "M{px:.1},{py:.1}");
                }
                Some(ly) => {
                    let _ = write!(path, " L{px:.1},{ly:.1} L{px:.1},{py:.1}");
                }
            }
            last_y = Some(py);
        }
        let _ = write!(
            out,
            r#"<path class="ccdf-line" d="{path}" fill="none" stroke="{col}" stroke-width="2"><title>{}</title></path>"#,
            esc(&l.name)
        );
        legend.push((col, &l.name));
    }
    // the legend at the bottom left, where a CCDF never is (low latencies have P = 1)
    let lh = 14.0;
    let top = H - MB - 6.0 - legend.len() as f64 * lh;
    let widest = legend.iter().map(|l| l.1.chars().count()).max().unwrap_or(0) as f64;
    let _ = write!(
        out,
        r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#ffffff" fill-opacity="0.85" stroke="#cccccc"/>"##,
        ML + 4.0,
        top,
        widest * 5.6 + 30.0,
        legend.len() as f64 * lh + 2.0
    );
    for (k, (col, name)) in legend.iter().enumerate() {
        let ly = top + lh * (k as f64 + 1.0) - 3.0;
        let _ = write!(
            out,
            r##"<rect x="{:.1}" y="{:.1}" width="14" height="3" fill="{col}"/><text class="legend" x="{:.1}" y="{:.1}" font-size="10" font-family="sans-serif" fill="#222">{}</text>"##,
            ML + 8.0,
            ly - 4.0,
            ML + 26.0,
            ly,
            esc(name)
        );
    }
    if let Some(d) = deadline_ns {
        let du = d as f64 / 1e3;
        if du >= xa.lo && du <= xa.hi {
            let x = xa.x(du);
            let _ = write!(
                out,
                r#"<line class="deadline" x1="{x:.1}" y1="{MT}" x2="{x:.1}" y2="{:.1}" stroke="{DEADLINE}" stroke-width="2" stroke-dasharray="6 3"/>{}"#,
                H - MB,
                deadline_label(x, &format!("deadline {} us", num(du)))
            );
        }
    }
    out.push_str("</svg>");
    out
}

/// Line plot of several named series over a numeric x (log y; log x when the x range spans
/// more than a decade).
pub fn lines(
    title: &str,
    xlabel: &str,
    ylabel: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> String {
    let all: Vec<(f64, f64)> =
        series.iter().flat_map(|s| s.1.iter().copied()).filter(|p| p.1 > 0.0).collect();
    if all.is_empty() {
        return empty(title, "lines");
    }
    let (xlo, xhi) = all.iter().fold((f64::MAX, f64::MIN), |a, p| (a.0.min(p.0), a.1.max(p.0)));
    let (ylo, yhi) = all.iter().fold((f64::MAX, f64::MIN), |a, p| (a.0.min(p.1), a.1.max(p.1)));
    let xlog = xlo > 0.0 && xhi / xlo > 10.0;
    let xa =
        Axis::new(if xlog { xlo } else { xlo.min(0.0) }, xhi * if xlog { 1.0 } else { 1.05 }, xlog);
    let ya = Axis::new(ylo / 1.5, yhi * 1.5, true);
    let mut out = String::new();
    open(&mut out, title, "lines");
    frame(&mut out, &xa, &ya, xlabel, ylabel, &num);
    for (k, (name, pts)) in series.iter().enumerate() {
        let col = SERIES[k % SERIES.len()];
        let mut path = String::new();
        for (i, (x, y)) in pts.iter().filter(|p| p.1 > 0.0).enumerate() {
            let _ =
                write!(path, "{}{:.1},{:.1}", if i == 0 { "M" } else { " L" }, xa.x(*x), ya.y(*y));
        }
        let _ = write!(out, r#"<path d="{path}" fill="none" stroke="{col}" stroke-width="2"/>"#);
        for (x, y) in pts.iter().filter(|p| p.1 > 0.0) {
            let _ = write!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{col}"/>"#,
                xa.x(*x),
                ya.y(*y)
            );
        }
        let ly = MT + 12.0 + k as f64 * 13.0;
        let _ = write!(
            out,
            r#"<rect x="{:.1}" y="{:.1}" width="10" height="3" fill="{col}"/><text x="{:.1}" y="{:.1}" font-size="10" font-family="sans-serif" fill="{col}">{}</text>"#,
            ML + 8.0,
            ly - 4.0,
            ML + 22.0,
            ly,
            esc(name)
        );
    }
    out.push_str("</svg>");
    out
}

/// Grouped bars: one group per category (stream), one bar per series (p50, p99, max), log y.
pub fn bars(
    title: &str,
    ylabel: &str,
    categories: &[String],
    series: &[(String, Vec<Option<f64>>)],
) -> String {
    let vals: Vec<f64> =
        series.iter().flat_map(|s| s.1.iter().flatten().copied()).filter(|v| *v > 0.0).collect();
    if vals.is_empty() || categories.is_empty() {
        return empty(title, "bars");
    }
    let (lo, hi) = vals.iter().fold((f64::MAX, f64::MIN), |a, v| (a.0.min(*v), a.1.max(*v)));
    let ya = Axis::new(lo / 2.0, hi * 1.5, true);
    let xa = Axis::new(0.0, categories.len() as f64, false);
    // the names' common prefix (up to a `.`) is said once, under the axis
    let first = categories[0].as_str();
    let mut cut = first.len();
    for c in &categories[1..] {
        cut = cut.min(first.bytes().zip(c.bytes()).take_while(|(a, b)| a == b).count());
    }
    let cut = if categories.len() > 1 { first[..cut].rfind('.').map_or(0, |i| i + 1) } else { 0 };
    let xlabel = if cut > 0 { format!("{}*", &first[..cut]) } else { String::new() };
    let mut out = String::new();
    open(&mut out, title, "bars");
    frame(&mut out, &xa, &ya, &xlabel, ylabel, &|_| String::new());
    let gw = (W - ML - MR) / categories.len() as f64;
    let bw = (gw * 0.8) / series.len().max(1) as f64;
    for (ci, cat) in categories.iter().enumerate() {
        let gx = ML + ci as f64 * gw + gw * 0.1;
        for (si, (_, v)) in series.iter().enumerate() {
            if let Some(v) = v.get(ci).copied().flatten().filter(|v| *v > 0.0) {
                let y = ya.y(v);
                let _ = write!(
                    out,
                    r#"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}: {}</title></rect>"#,
                    gx + si as f64 * bw,
                    bw - 1.0,
                    H - MB - y,
                    SERIES[si % SERIES.len()],
                    esc(cat),
                    num(v)
                );
            }
        }
        let label = &cat[cut..];
        // a label wider than its group is fitted to it (never over its neighbour)
        let fit = if label.chars().count() as f64 * 10.0 * CHAR_EM > gw - 4.0 {
            format!(r#" textLength="{:.1}" lengthAdjust="spacingAndGlyphs""#, gw - 4.0)
        } else {
            String::new()
        };
        let _ = write!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-size="10" font-family="sans-serif" text-anchor="middle" fill="#222"{fit}>{}</text>"##,
            ML + (ci as f64 + 0.5) * gw,
            H - MB + 14.0,
            esc(label)
        );
    }
    for (si, (name, _)) in series.iter().enumerate() {
        let col = SERIES[si % SERIES.len()];
        let lx = ML + 8.0 + si as f64 * 70.0;
        let _ = write!(
            out,
            r##"<rect x="{lx:.1}" y="{:.1}" width="10" height="8" fill="{col}"/><text x="{:.1}" y="{:.1}" font-size="10" font-family="sans-serif" fill="#222">{}</text>"##,
            MT + 4.0,
            lx + 13.0,
            MT + 12.0,
            esc(name)
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::Histogram;

    #[test]
    fn histogram_has_one_bar_per_filled_column_and_a_deadline() {
        let mut h = Histogram::new();
        for v in [1_000, 1_000, 2_000, 50_000] {
            h.record(v);
        }
        let s = histogram("t", &h.to_data(), Some(40_000));
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert_eq!(s.matches("samples</title></rect>").count(), 3, "{s}");
        assert!(s.contains("class=\"deadline\""));
    }

    #[test]
    fn empty_inputs_say_so() {
        let h = Histogram::new().to_data();
        assert!(histogram("t", &h, None).contains("no samples"));
        let w = WindowData { width_ns: 1, max_ns: vec![None], count: vec![0] };
        assert!(max_over_time("t", &w, Some(1)).contains("no samples"));
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
        assert!(lines("<x>", "x", "y", &[("s<".into(), vec![(1.0, 2.0), (2.0, 3.0)])])
            .contains("&lt;x&gt;"));
    }

    #[test]
    fn nice_ticks() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(log_ticks(3.0, 2000.0), vec![10.0, 100.0, 1000.0]);
    }
}
