//! The pages of `rtlab serve`, a read-only dashboard over a store: the runs (with filters on
//! host, kernel, scenario and date), a case's trend run after run, two runs side by side.
//! One run's report is [`crate::render_html`] itself.
//!
//! Contract: pure functions from runs to one HTML page each; the page opens offline (inline
//! CSS and SVG, no script, no external resource); every value that comes from a store (host,
//! kernel, scenario and case names come from other machines) is HTML-escaped with
//! [`esc`], in text and in attributes. Links carry the page's token query (`Ctx`) so a
//! browser that came in with `?token=` stays in. Never reads a store, never prints.

use crate::compare::{compare, render as compare_text, CompareConfig, Metric};
use crate::svg::{esc, DEADLINE, SERIES};
use rtlab_core::fleet::{RunFilter, RunsPage, TrendPoint};
use rtlab_core::run::Run;

use std::fmt::Write as _;

/// What every link of a page carries: `token=...` (percent-encoded) or nothing.
#[derive(Clone, Debug, Default)]
pub struct Ctx {
    pub token_query: String,
}

impl Ctx {
    /// A link to `path` with `params` (empty values left out) and the token, HTML-escaped.
    pub fn href(&self, path: &str, params: &[(&str, &str)]) -> String {
        let mut q: Vec<String> = params
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k}={}", pct_encode(v)))
            .collect();
        if !self.token_query.is_empty() {
            q.push(self.token_query.clone());
        }
        if q.is_empty() {
            esc(path)
        } else {
            esc(&format!("{path}?{}", q.join("&")))
        }
    }
}

/// Percent-encode everything but unreserved characters (RFC 3986 section 2.3).
pub fn pct_encode(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            o.push(b as char);
        } else {
            let _ = write!(o, "%{b:02X}");
        }
    }
    o
}

const CSS: &str = "body{font-family:sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:0.5em 0}th,td{border:1px solid #bbb;padding:2px 8px;text-align:left}\
th{background:#dce6f4}nav a{margin-right:1em}form.filters input{width:10em;margin-right:0.5em}\
pre{background:#f6f6f6;padding:0.5em;overflow-x:auto}.none{color:#777}";

/// A whole page: title, navigation, body.
pub fn page(ctx: &Ctx, title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t} - rtlab</title><style>{CSS}</style></head><body><nav><a href=\"{runs}\">runs</a><a href=\"{trends}\">trends</a><a href=\"{hosts}\">hosts</a></nav><h1>{t}</h1>\n{body}\n</body></html>\n",
        t = esc(title),
        runs = ctx.href("/", &[]),
        trends = ctx.href("/trend", &[]),
        hosts = ctx.href("/hosts", &[]),
    )
}

/// How many runs a page of the runs page shows.
pub const RUNS_PER_PAGE: usize = 100;

/// The filter form of the runs page (and the token, hidden, when the page has one).
fn filter_form(ctx: &Ctx, f: &RunFilter) -> String {
    let mut b = String::from("<form class=\"filters\" method=\"get\" action=\"/\">");
    for (name, v) in [
        ("host", &f.host),
        ("kernel", &f.kernel),
        ("scenario", &f.scenario),
        ("since", &f.since),
        ("until", &f.until),
    ] {
        let _ = write!(b, "<label>{name} <input name=\"{name}\" value=\"{}\"></label>", esc(v));
    }
    b.push_str(&hidden_token(ctx));
    b.push_str("<button type=\"submit\">filter</button></form>\n");
    b
}

fn hidden_token(ctx: &Ctx) -> String {
    match ctx.token_query.strip_prefix("token=") {
        Some(t) => {
            format!("<input type=\"hidden\" name=\"token\" value=\"{}\">", esc(&pct_decode(t)))
        }
        None => String::new(),
    }
}

/// The runs page: the filter form, then one page of the runs that pass (newest first), each
/// linking its report and offering a comparison with the run before it, and links to the
/// newer and older pages.
pub fn runs_page(ctx: &Ctx, pg: &RunsPage, f: &RunFilter) -> String {
    let mut b = filter_form(ctx, f);
    let (from, to) = (pg.offset + 1, pg.offset + pg.runs.len());
    let _ = writeln!(
        b,
        "<p class=\"count\">{} of {} run(s) match{}</p>",
        pg.matching,
        pg.total,
        if pg.runs.is_empty() { String::new() } else { format!("; newest first, {from} to {to}") }
    );
    if pg.runs.is_empty() {
        b.push_str("<p class=\"none\">no run matches</p>");
        return page(ctx, "Runs", &b);
    }
    b.push_str("<table class=\"runs\"><tr><th>id</th><th>scenario</th><th>started</th><th>status</th><th>cases</th><th>failed</th><th>host</th><th>kernel</th><th>compare</th></tr>\n");
    for (i, r) in pg.runs.iter().enumerate() {
        let id = r.id.to_string();
        let prev = match pg.runs.get(i + 1).or(pg.older.as_ref()) {
            Some(p) => {
                let p = p.id.to_string();
                format!(
                    "<a href=\"{}\">with run {p}</a>",
                    ctx.href("/compare", &[("a", &p), ("b", &id)])
                )
            }
            None => String::new(),
        };
        let _ = writeln!(
            b,
            "<tr class=\"run\"><td><a href=\"{}\">{id}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{prev}</td></tr>",
            ctx.href(&format!("/run/{id}"), &[]),
            esc(&r.scenario),
            esc(&r.started_at),
            r.status.name(),
            r.cases,
            r.failed,
            esc(&r.hostname),
            esc(&r.kernel_release),
        );
    }
    b.push_str("</table>");
    let link = |offset: usize, text: &str| {
        let o = offset.to_string();
        format!(
            "<a class=\"pages\" href=\"{}\">{text}</a>",
            ctx.href(
                "/",
                &[
                    ("host", &f.host),
                    ("kernel", &f.kernel),
                    ("scenario", &f.scenario),
                    ("since", &f.since),
                    ("until", &f.until),
                    ("offset", if offset == 0 { "" } else { &o }),
                ]
            )
        )
    };
    let mut nav = Vec::new();
    if pg.offset > 0 {
        nav.push(link(pg.offset.saturating_sub(RUNS_PER_PAGE), "newer runs"));
    }
    if pg.older.is_some() {
        nav.push(link(to, "older runs"));
    }
    if !nav.is_empty() {
        let _ = write!(b, "<p>{}</p>", nav.join(" "));
    }
    page(ctx, "Runs", &b)
}

/// Decode `%XX` and `+` (form encoding); invalid escapes are kept as they are.
pub fn pct_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// The trend index: every case name of the store, each linking its trend.
pub fn trend_index_page(ctx: &Ctx, cases: &[String]) -> String {
    let mut b = String::from("<p>A case's p50, p99.9, max and missed deadlines run after run, per host; kernel and profile changes are marked.</p><ul class=\"cases\">");
    for c in cases {
        let _ =
            write!(b, "<li><a href=\"{}\">{}</a></li>", ctx.href("/trend", &[("case", c)]), esc(c));
    }
    b.push_str("</ul>");
    if cases.is_empty() {
        b.push_str("<p class=\"none\">no case stored</p>");
    }
    page(ctx, "Trends", &b)
}

/// The trend page of one case: one plot and one table per host, in run order; `measured`:
/// how many runs measured it (the page shows the newest `points.len()` of them).
pub fn trend_page(ctx: &Ctx, case: &str, points: &[TrendPoint], measured: usize) -> String {
    let mut b = String::new();
    if points.len() < measured {
        let _ = write!(
            b,
            "<p class=\"count\">the newest {} of the {measured} runs that measured it (<code>last=N</code> shows more)</p>",
            points.len()
        );
    }
    let mut hosts: Vec<&str> = Vec::new();
    for p in points {
        if !hosts.contains(&p.host.as_str()) {
            hosts.push(&p.host);
        }
    }
    if points.is_empty() {
        b.push_str("<p class=\"none\">no run measured this case</p>");
    }
    for h in hosts {
        let pts: Vec<&TrendPoint> = points.iter().filter(|p| p.host == h).collect();
        let _ = write!(b, "<section class=\"host\"><h2>host {}</h2>", esc(h));
        b.push_str(&trend_svg(&pts));
        b.push_str("<table class=\"trend\"><tr><th>run</th><th>started</th><th>kernel</th><th>profile</th><th>stream</th><th>p50 (us)</th><th>p99.9 (us)</th><th>max (us)</th><th>missed</th></tr>");
        for p in &pts {
            let id = p.run.to_string();
            let _ = write!(
                b,
                "<tr class=\"point\"><td><a href=\"{}\">{id}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                ctx.href(&format!("/run/{id}"), &[]),
                esc(&p.started_at),
                esc(&p.kernel),
                esc(&p.profile),
                esc(&p.stream),
                us(p.p50_ns),
                us(p.p99_9_ns),
                us(p.max_ns),
                p.missed.map(|m| m.to_string()).unwrap_or_else(|| "-".into()),
            );
        }
        b.push_str("</table></section>\n");
    }
    page(ctx, &format!("Trend of {case}"), &b)
}

fn us(v: Option<i64>) -> String {
    v.map(|n| format!("{:.1}", n as f64 / 1000.0)).unwrap_or_else(|| "-".into())
}

/// A series' value at a point (None: not measured).
type PointValue = fn(&TrendPoint) -> Option<f64>;

/// A run's line in the side-by-side table.
type RunText = fn(&Run) -> String;

/// A dashed line, with what changed, between two runs whose kernel or profile differ
/// (`x`: a run's position; `(top, bottom)`: the plot's frame).
fn change_marks(
    pts: &[&TrendPoint],
    x: &dyn Fn(usize) -> f64,
    (top, bottom): (f64, f64),
) -> String {
    let n = pts.len();
    let mut o = String::new();
    for i in 1..n {
        let (a, b) = (pts[i - 1], pts[i]);
        let mut what = Vec::new();
        if a.kernel != b.kernel {
            what.push(format!("kernel {}", b.kernel));
        }
        if a.profile != b.profile {
            what.push(format!("profile {}", b.profile));
        }
        if !what.is_empty() {
            let xm = (x(i - 1) + x(i)) / 2.0;
            let _ = write!(
                o,
                r##"<line class="change" x1="{xm:.1}" y1="{top}" x2="{xm:.1}" y2="{}" stroke="#555" stroke-dasharray="4 3"/><text class="change" x="{:.1}" y="{}" font-size="9">{}</text>"##,
                bottom,
                xm + 2.0,
                top + 10.0,
                esc(&what.join(", "))
            );
        }
    }
    o
}

/// The trend plot of one host's points: p50, p99.9 and max (us, linear) and missed deadlines
/// (right axis) over the runs in order; a dashed line where the kernel or the profile changed.
fn trend_svg(pts: &[&TrendPoint]) -> String {
    const W: f64 = 720.0;
    const H: f64 = 280.0;
    const ML: f64 = 64.0;
    const MR: f64 = 56.0;
    const MT: f64 = 28.0;
    const MB: f64 = 40.0;
    let n = pts.len();
    let x = |i: usize| {
        if n <= 1 {
            ML + (W - ML - MR) / 2.0
        } else {
            ML + (W - ML - MR) * i as f64 / (n - 1) as f64
        }
    };
    let ymax = pts
        .iter()
        .flat_map(|p| [p.p50_ns, p.p99_9_ns, p.max_ns])
        .flatten()
        .max()
        .unwrap_or(1)
        .max(1) as f64
        / 1000.0
        * 1.1;
    // the missed axis in whole counts: a multiple of the 4 tick steps
    let mmax =
        (pts.iter().filter_map(|p| p.missed).max().unwrap_or(0).max(4)).div_ceil(4) as f64 * 4.0;
    let y = |v: f64, top: f64| MT + (H - MT - MB) * (1.0 - v / top);
    let mut o = String::new();
    let _ = write!(
        o,
        r##"<svg class="trend" xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="10"><rect x="{ML}" y="{MT}" width="{}" height="{}" fill="none" stroke="#888"/>"##,
        W - ML - MR,
        H - MT - MB
    );
    for k in 0..=4 {
        let v = ymax * k as f64 / 4.0;
        let _ = write!(
            o,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{:.1}</text>"#,
            ML - 4.0,
            y(v, ymax) + 3.0,
            v
        );
        let m = mmax * k as f64 / 4.0;
        let _ =
            write!(o, r#"<text x="{}" y="{:.1}">{:.0}</text>"#, W - MR + 4.0, y(m, mmax) + 3.0, m);
    }
    let _ = write!(
        o,
        r#"<text x="12" y="{}" transform="rotate(-90 12 {})" text-anchor="middle">latency (us)</text><text x="{}" y="{}" text-anchor="middle">runs, oldest first</text><text x="{}" y="{}" transform="rotate(90 {} {})" text-anchor="middle">missed</text>"#,
        H / 2.0,
        H / 2.0,
        (ML + W - MR) / 2.0,
        H - 8.0,
        W - 10.0,
        H / 2.0,
        W - 10.0,
        H / 2.0
    );
    // kernel / profile changes
    o.push_str(&change_marks(pts, &x, (MT, H - MB)));
    let series: [(&str, &str, PointValue); 4] = [
        ("p50", SERIES[0], |p| p.p50_ns.map(|v| v as f64 / 1000.0)),
        ("p99.9", SERIES[1], |p| p.p99_9_ns.map(|v| v as f64 / 1000.0)),
        ("max", SERIES[3], |p| p.max_ns.map(|v| v as f64 / 1000.0)),
        ("missed", DEADLINE, |p| p.missed.map(|v| v as f64)),
    ];
    for (k, (name, col, f)) in series.iter().enumerate() {
        let top = if *name == "missed" { mmax } else { ymax };
        let mut path = String::new();
        let mut dots = String::new();
        for (i, p) in pts.iter().enumerate() {
            let Some(v) = f(p) else { continue };
            let (px, py) = (x(i), y(v, top));
            let _ = write!(path, "{}{px:.1},{py:.1}", if path.is_empty() { "M" } else { " L" });
            let cls = name.replace('.', "_");
            let _ = write!(
                dots,
                r#"<circle class="pt pt-{cls}" cx="{px:.1}" cy="{py:.1}" r="3" fill="{col}"><title>run {}: {name} {}</title></circle>"#,
                p.run,
                if *name == "missed" { format!("{v:.0}") } else { format!("{v:.1} us") }
            );
        }
        // max dashed: where p99.9 equals it (few samples), p99.9 shows through the gaps
        let dash = match *name {
            "missed" => r#" stroke-dasharray="2 2""#,
            "max" => r#" stroke-dasharray="6 3""#,
            _ => "",
        };
        let _ = write!(
            o,
            r#"<path d="{path}" fill="none" stroke="{col}" stroke-width="1.5"{dash}/>{dots}"#
        );
        let lx = ML + 8.0 + k as f64 * 70.0;
        let _ = write!(
            o,
            r#"<rect x="{lx:.1}" y="{}" width="10" height="3" fill="{col}"/><text x="{:.1}" y="{}" fill="{col}">{name}</text>"#,
            MT - 12.0,
            lx + 14.0,
            MT - 8.0
        );
    }
    for (i, p) in pts.iter().enumerate() {
        let _ = write!(
            o,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            x(i),
            H - MB + 12.0,
            p.run
        );
    }
    o.push_str("</svg>");
    o
}

/// A host's newest value of each case (from the store), by case name.
pub type HostCases = [(String, TrendPoint)];

/// Two hosts side by side: a form choosing them among `hosts`, then each case either host
/// measured, with its newest value on each (p50, p99.9, max, missed deadlines), the ratio
/// B/A of p99.9 and the run, kernel and profile it comes from; each case links its trend.
pub fn hosts_page(
    ctx: &Ctx,
    hosts: &[String],
    (a, ca): (&str, &HostCases),
    (b, cb): (&str, &HostCases),
) -> String {
    let mut o = String::from("<form class=\"hosts\" method=\"get\" action=\"/hosts\">");
    for (name, chosen) in [("a", a), ("b", b)] {
        let _ = write!(o, "<label>host {} <select name=\"{name}\">", name.to_uppercase());
        o.push_str("<option value=\"\"></option>");
        for h in hosts {
            let sel = if h == chosen { " selected" } else { "" };
            let _ = write!(o, "<option value=\"{0}\"{sel}>{0}</option>", esc(h));
        }
        o.push_str("</select></label> ");
    }
    o.push_str(&hidden_token(ctx));
    o.push_str("<button type=\"submit\">side by side</button></form>\n");
    if a.is_empty() || b.is_empty() {
        let _ = write!(o, "<p class=\"none\">choose two hosts ({} in the store)</p>", hosts.len());
        return page(ctx, "Hosts side by side", &o);
    }
    let mut names: Vec<&str> = ca.iter().chain(cb).map(|(n, _)| n.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let _ = write!(
        o,
        "<p>Each case's newest run on host A <b>{}</b> and host B <b>{}</b>; B/A is the ratio of p99.9.</p>",
        esc(a),
        esc(b)
    );
    o.push_str("<table class=\"hosts\"><tr><th>case</th><th>p50 A</th><th>p50 B</th><th>p99.9 A</th><th>p99.9 B</th><th>B/A</th><th>max A</th><th>max B</th><th>missed A</th><th>missed B</th><th>A: run, kernel, profile</th><th>B: run, kernel, profile</th></tr>\n");
    let missed = |p: Option<&TrendPoint>| {
        p.and_then(|p| p.missed).map(|m| m.to_string()).unwrap_or_else(|| "-".into())
    };
    let from = |p: Option<&TrendPoint>| match p {
        Some(p) => format!(
            "<a href=\"{}\">{}</a>, {}, {}",
            ctx.href(&format!("/run/{}", p.run), &[]),
            p.run,
            esc(&p.kernel),
            esc(&p.profile)
        ),
        None => "-".into(),
    };
    for n in names {
        let (pa, pb) = (find(ca, n), find(cb, n));

        let v = |p: Option<&TrendPoint>, f: fn(&TrendPoint) -> Option<i64>| us(p.and_then(f));
        let ratio = match (pa.and_then(|p| p.p99_9_ns), pb.and_then(|p| p.p99_9_ns)) {
            (Some(x), Some(y)) if x > 0 => format!("{:.2}", y as f64 / x as f64),
            _ => "-".into(),
        };
        let _ = writeln!(
            o,
            "<tr class=\"case\"><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{ratio}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            ctx.href("/trend", &[("case", n)]),
            esc(n),
            v(pa, |p| p.p50_ns),
            v(pb, |p| p.p50_ns),
            v(pa, |p| p.p99_9_ns),
            v(pb, |p| p.p99_9_ns),
            v(pa, |p| p.max_ns),
            v(pb, |p| p.max_ns),
            missed(pa),
            missed(pb),
            from(pa),
            from(pb),
        );
    }
    o.push_str("</table>");
    page(ctx, &format!("Hosts {a} and {b} side by side"), &o)
}

fn find<'a>(c: &'a HostCases, name: &str) -> Option<&'a TrendPoint> {
    c.iter().find(|(x, _)| x == name).map(|(_, p)| p)
}

/// Two runs side by side: each run's machine and scenario, then compare's table (run B
/// against run A, p99, no threshold: it only reports).
pub fn side_by_side_page(ctx: &Ctx, a: &Run, b: &Run) -> String {
    let mut o = String::from("<table class=\"sides\"><tr><th></th>");
    for r in [a, b] {
        let _ = write!(
            o,
            "<th><a href=\"{}\">run {}</a></th>",
            ctx.href(&format!("/run/{}", r.id), &[]),
            r.id
        );
    }
    o.push_str("</tr>");
    let rows: [(&str, RunText); 6] = [
        ("scenario", |r| r.info.scenario.clone()),
        ("started", |r| r.info.started_at.clone()),
        ("status", |r| r.status.name().to_string()),
        ("host", |r| r.info.environment.hostname.clone()),
        ("kernel", |r| r.info.environment.kernel_release.clone()),
        ("cases", |r| r.cases.len().to_string()),
    ];
    for (name, f) in rows {
        let _ = write!(o, "<tr><th>{name}</th><td>{}</td><td>{}</td></tr>", esc(&f(a)), esc(&f(b)));
    }
    o.push_str("</table>");
    let cmp =
        compare(a, b, CompareConfig { metric: Metric::P99, threshold_pct: None, alpha: 0.01 });
    let _ = write!(
        o,
        "<h2>Case by case (B against A)</h2><pre class=\"compare\">{}</pre>",
        esc(&compare_text(&cmp))
    );
    page(ctx, &format!("Run {} and run {} side by side", a.id, b.id), &o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::run::RunSummary;

    #[test]
    fn percent_coding_round_trips_and_decodes_forms() {
        let s = "a b/<script>&ü%";
        assert_eq!(pct_decode(&pct_encode(s)), s);
        assert_eq!(pct_decode("a+b%3Cx%3e%zz%4"), "a b<x>%zz%4");
    }

    fn point(run: i64, host: &str, kernel: &str, profile: &str) -> TrendPoint {
        TrendPoint {
            run,
            started_at: format!("2026-11-2{run}T00:00:00Z"),
            host: host.into(),
            kernel: kernel.into(),
            profile: profile.into(),
            stream: "all".into(),
            p50_ns: Some(1000 * run),
            p99_9_ns: Some(5000 * run),
            max_ns: Some(9000 * run),
            missed: Some(run as u64),
        }
    }

    #[test]
    fn a_trend_has_a_point_per_run_per_host_and_marks_changes() {
        let pts = vec![
            point(1, "a", "6.1", "no-rt"),
            point(2, "b<script>", "6.1", "no-rt"),
            point(3, "a", "6.1", "rt-normal"),
            point(4, "a", "6.6-rt", "rt-normal"),
            point(5, "a", "6.6-rt", "rt-normal"),
        ];
        let html = trend_page(&Ctx::default(), "timer/x", &pts, 5);
        assert!(!html.contains("the newest"));
        assert_eq!(html.matches("<section class=\"host\">").count(), 2);
        for s in ["p50", "p99_9", "max", "missed"] {
            assert_eq!(html.matches(&format!("class=\"pt pt-{s}\"")).count(), 5, "{s}");
        }
        assert_eq!(html.matches("<line class=\"change\"").count(), 2);
        assert!(
            html.contains(">profile rt-normal</text>") && html.contains(">kernel 6.6-rt</text>")
        );
        assert!(html.contains("host b&lt;script&gt;") && !html.contains("b<script>"));
        let none = trend_page(&Ctx::default(), "<x>", &[], 0);
        assert!(none.contains("no run measured this case") && none.contains("&lt;x&gt;"));
    }

    fn summary(id: i64, host: &str) -> RunSummary {
        RunSummary {
            id,
            scenario: "quick".into(),
            started_at: "2026-11-25T10:20:30Z".into(),
            status: rtlab_core::run::RunStatus::Complete,
            cases: 1,
            failed: 0,
            hostname: host.into(),
            kernel_release: "6.1".into(),
        }
    }

    #[test]
    fn the_runs_page_shows_its_page_links_the_run_before_and_the_other_pages() {
        let f = RunFilter { host: "bot<1>".into(), ..Default::default() };
        let pg = RunsPage {
            runs: vec![summary(205, "bot<1>"), summary(204, "bot<1>")],
            older: Some(summary(203, "bot<1>")),
            matching: 300,
            total: 900,
            offset: 100,
        };
        let html = runs_page(&Ctx::default(), &pg, &f);
        assert_eq!(html.matches("<tr class=\"run\">").count(), 2);
        assert!(html.contains("300 of 900 run(s) match; newest first, 101 to 102"), "{html}");
        // the last row compares with the run just older than the page
        assert!(
            html.contains("/compare?a=204&amp;b=205") && html.contains("/compare?a=203&amp;b=204")
        );
        assert!(html.contains("href=\"/?host=bot%3C1%3E&amp;offset=102\">older runs"), "{html}");
        assert!(html.contains("href=\"/?host=bot%3C1%3E\">newer runs"), "{html}");
        assert!(html.contains("value=\"bot&lt;1&gt;\"") && !html.contains("bot<1>"));
        let last = RunsPage { older: None, offset: 0, ..pg };
        let html = runs_page(&Ctx::default(), &last, &f);
        assert!(!html.contains("older runs") && !html.contains("newer runs"));
        let none = RunsPage { runs: vec![], older: None, matching: 0, total: 900, offset: 0 };
        assert!(runs_page(&Ctx::default(), &none, &f).contains("no run matches"));
    }

    #[test]
    fn two_hosts_side_by_side_show_each_case_once_with_both_values() {
        let a = vec![
            ("timer/x".to_string(), point(1, "a", "6.1", "no-rt")),
            ("udp/<y>".to_string(), point(2, "a", "6.1", "no-rt")),
        ];
        let b = vec![("timer/x".to_string(), point(3, "b<script>", "6.6-rt", "rt-normal"))];
        let hosts = vec!["a".to_string(), "b<script>".to_string()];
        let html = hosts_page(&Ctx::default(), &hosts, ("a", &a), ("b<script>", &b));
        assert_eq!(html.matches("<tr class=\"case\">").count(), 2);
        // timer/x: p99.9 5.0 us on A (run 1), 15.0 us on B (run 3): B/A 3.00
        assert!(html.contains("<td>5.0</td><td>15.0</td><td>3.00</td>"), "{html}");
        // udp/<y> only on A
        assert!(
            html.contains("udp/&lt;y&gt;") && html.contains("<td>10.0</td><td>-</td><td>-</td>")
        );
        assert!(html.contains("<option value=\"b&lt;script&gt;\" selected>"));
        assert!(!html.contains("<script>"));
        let choose = hosts_page(&Ctx::default(), &hosts, ("", &[]), ("", &[]));
        assert!(choose.contains("choose two hosts (2 in the store)"));
    }

    #[test]
    fn links_are_escaped_and_carry_the_token() {
        let ctx = Ctx { token_query: "token=t%26".into() };
        assert_eq!(
            ctx.href("/trend", &[("case", "a&b"), ("host", "")]),
            "/trend?case=a%26b&amp;token=t%26"
        );
        assert_eq!(Ctx::default().href("/", &[]), "/");
    }
}
