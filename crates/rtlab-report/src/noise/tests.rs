//! The pivot and compare's noise rows on hand-made noise cases (figures chosen, not measured:
//! the binary's tests in crates/rtlab/tests/noise_report_cli.rs use real ones).

use super::*;
use crate::compare::{compare, render, Metric};
use crate::ros2_layer::tests::run;
use rtlab_core::histogram::Histogram;
use rtlab_core::run::CaseStatus;
use rtlab_core::schema::{ResultDocument, ToolInfo};
use rtlab_core::stats::{Running, Summary};
use rtlab_core::windows::WindowMaxima;

const MEASURED_NS: i64 = 10_000_000_000;
const WINDOW_NS: i64 = 200_000_000;

/// A noise stream from (time, value) samples, in windows of [`WINDOW_NS`].
fn stream(name: &str, metric: &str, samples: &[(i64, i64)], stolen_ns: i64) -> Stream {
    let (mut r, mut h, mut w) =
        (Running::default(), Histogram::new(), WindowMaxima::new(WINDOW_NS, 64));
    for (i, (t, v)) in samples.iter().enumerate() {
        r.record(i as u64, *t, *v);
        h.record(*v);
        w.record(*t, *v);
    }
    let labels = [
        ("measured_ns", MEASURED_NS.to_string()),
        ("stolen_ns", stolen_ns.to_string()),
        ("threshold_ns", "1000".to_string()),
    ];
    Stream {
        name: name.into(),
        metric: metric.into(),
        definition: String::new(),
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
        deadline_ns: 1_000,
        stats: Summary::from_parts(&r, &h),
        histogram: h.to_data(),
        windows: w.to_data(),
        raw_file: None,
        raw_dropped: None,
        start_monotonic_ns: None,
    }
}

/// CPU `cpu`'s two streams: `n` gaps of about `gap_ns` spread over the run, the stolen time
/// per window.
fn cpu_streams(cpu: usize, n: i64, gap_ns: i64) -> Vec<Stream> {
    let gaps: Vec<(i64, i64)> =
        (0..n).map(|i| (i * MEASURED_NS / n, gap_ns + (i * 7919) % (gap_ns / 4 + 1))).collect();
    let stolen: i64 = gaps.iter().map(|g| g.1).sum();
    let per_window: Vec<(i64, i64)> = (0..MEASURED_NS / WINDOW_NS)
        .map(|k| {
            let (lo, hi) = (k * WINDOW_NS, (k + 1) * WINDOW_NS);
            (lo, gaps.iter().filter(|g| g.0 >= lo && g.0 < hi).map(|g| g.1).sum())
        })
        .collect();
    vec![
        stream(&format!("cpu{cpu}"), GAP_METRIC, &gaps, stolen),
        stream(&format!("cpu{cpu}.stolen"), "stolen_time", &per_window, stolen),
    ]
}

/// A noise case of `profile` measuring `cpus`: (cpu, gaps, gap length).
fn noise_case(index: u32, profile: &str, rep: u32, cpus: &[(usize, i64, i64)]) -> CaseRecord {
    let document = ResultDocument {
        schema_version: rtlab_core::schema::SCHEMA_VERSION,
        tool: ToolInfo { name: "rtlab".into(), version: "0".into() },
        command_line: Vec::new(),
        started_at: String::new(),
        duration_ns: MEASURED_NS,
        interrupted: false,
        probe: "noise".into(),
        environment: Default::default(),
        config: serde_json::Value::Null,
        streams: cpus.iter().flat_map(|&(c, n, g)| cpu_streams(c, n, g)).collect(),
        warnings: Vec::new(),
        evidence: None,
        far: None,
        cost: None,
    };
    CaseRecord {
        index,
        name: format!("noise/idle/{profile}#{rep}"),
        probe: "noise".into(),
        load: "idle".into(),
        profile: profile.into(),
        params: Default::default(),
        repetition: rep,
        status: CaseStatus::Ok,
        started_at: String::new(),
        duration_ns: MEASURED_NS,
        document: Some(document),
        load_report: None,
        profile_report: None,
        spike_evidence: None,
        published: None,
    }
}

/// no-rt on CPUs 0 and 1 (100 and 500 gaps of 20 and 50 us), rt-isolation on CPU 1 only
/// (10 gaps of 2 us), and a failed case: the S1 shape.
fn s1_like() -> Run {
    let mut failed = noise_case(2, "rt-normal", 1, &[]);
    failed.document = None;
    failed.status = CaseStatus::Failed { error: "x".into() };
    run(
        7,
        vec![
            noise_case(0, "no-rt", 1, &[(0, 100, 20_000), (1, 500, 50_000)]),
            noise_case(1, "rt-isolation", 1, &[(1, 10, 2_000)]),
            failed,
        ],
    )
}

#[test]
fn the_pivot_has_a_row_per_cpu_and_a_column_group_per_profile_from_its_own_case() {
    let r = s1_like();
    let p = pivots(&r);
    assert_eq!(p.len(), 1);
    let p = &p[0];
    assert_eq!(p.label(), "noise / idle");
    assert_eq!(p.cpus, ["cpu0", "cpu1"]);
    let heads: Vec<&str> = p.columns.iter().map(|c| c.heading.as_str()).collect();
    assert_eq!(heads, ["no-rt", "rt-isolation"], "the failed case has no column");
    assert!(p.cell(1, "cpu0").is_none(), "rt-isolation measured CPU 1 only");
    let iso = p.cell(1, "cpu1").unwrap();
    assert_eq!(
        (iso.gaps, iso.max_gap_ns),
        (10, r.cases[1].document.as_ref().unwrap().streams[0].stats.max_ns)
    );
    let text = pivots_text(&r);
    let line = |cpu: &str| -> Vec<String> {
        text.lines()
            .find(|l| l.starts_with(&format!("{cpu} ")))
            .unwrap_or_else(|| panic!("{text}"))
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    let no_rt = rows(r.cases[0].document.as_ref().unwrap());
    let mut want = vec!["cpu1".to_string()];
    want.extend(pivot_cells(no_rt.iter().find(|x| x.cpu == "cpu1")));
    want.extend(pivot_cells(Some(iso)));
    assert_eq!(line("cpu1"), want, "{text}");
    assert_eq!(&line("cpu0")[4..], ["-", "-", "-"], "{text}");
    // 500 gaps in 10 s; 500 x ~50 us of 10 s
    assert_eq!(line("cpu1")[3], "50.0");
    assert!(text.contains("\nNoise, profiles side by side: noise / idle\n"), "{text}");
    // the profiles stand over their groups: rt-isolation where its first cell starts
    let lines: Vec<&str> = text.lines().collect();
    let at = lines.iter().position(|l| l.starts_with("cpu ")).unwrap();
    let (groups, head) = (lines[at - 1], lines[at]);
    let second = head.match_indices("stolen (%)").nth(1).unwrap().0;
    assert_eq!(groups.find("rt-isolation"), Some(second), "{text}");
    eprintln!("{text}");
}

#[test]
fn one_profile_has_no_pivot_and_repetitions_are_named() {
    let one = run(1, vec![noise_case(0, "no-rt", 1, &[(0, 10, 5_000)])]);
    assert!(pivots(&one).is_empty());
    assert_eq!(pivots_text(&one), "");
    let twice = run(
        1,
        vec![
            noise_case(0, "no-rt", 1, &[(0, 10, 5_000)]),
            noise_case(1, "no-rt", 2, &[(0, 10, 5_000)]),
        ],
    );
    assert!(pivots(&twice).is_empty(), "one profile repeated is not profiles side by side");
    let mixed = run(
        1,
        vec![
            noise_case(0, "no-rt", 1, &[(0, 10, 5_000)]),
            noise_case(1, "rt-normal", 1, &[(0, 10, 5_000)]),
            noise_case(2, "no-rt", 2, &[(0, 10, 5_000)]),
        ],
    );
    let heads: Vec<String> = pivots(&mixed)[0].columns.iter().map(|c| c.heading.clone()).collect();
    assert_eq!(heads, ["no-rt #1", "rt-normal", "no-rt #2"]);
}

#[test]
fn the_html_pivot_links_each_group_to_its_case_and_escapes() {
    let mut r = s1_like();
    r.cases[1].profile = "rt-<iso>".into();
    let h = crate::html::noise_pivots_html(&r);
    assert!(h.contains("<table class=\"noisepivot\">"), "{h}");
    assert!(
        h.contains(
            "<th colspan=\"3\" class=\"group\"><a href=\"#run7-case1\">rt-&lt;iso&gt;</a></th>"
        ),
        "{h}"
    );
    let iso = pivot_cells(rows(r.cases[1].document.as_ref().unwrap()).first());
    let no_rt = rows(r.cases[0].document.as_ref().unwrap());
    let mut row = String::from("<tr><td>cpu1</td>");
    for v in pivot_cells(no_rt.iter().find(|x| x.cpu == "cpu1")).iter().chain(&iso) {
        row.push_str(&format!("<td class=\"n\">{v}</td>"));
    }
    assert!(h.contains(&row), "{row} not in {h}");
    assert!(crate::html::noise_html(&r).contains("<table class=\"noisepivot\">"));
    assert_eq!(crate::html::noise_pivots_html(&run(1, vec![])), "");
}

fn cfg(threshold: Option<f64>) -> CompareConfig {
    CompareConfig { metric: Metric::P99, threshold_pct: threshold, alpha: 0.01 }
}

#[test]
fn compare_judges_the_max_gap_and_stolen_per_cpu_and_shows_the_rate() {
    let a = run(1, vec![noise_case(0, "no-rt", 1, &[(0, 400, 20_000), (1, 400, 20_000)])]);
    // CPU 1's gaps three times as long in B: its max gap and stolen % grew by 200 %
    let b = run(2, vec![noise_case(0, "no-rt", 1, &[(0, 400, 20_000), (1, 400, 60_000)])]);
    let c = compare(&a, &b, cfg(Some(10.0)));
    assert!(c.streams.is_empty(), "gap streams are noise rows, not latency streams");
    assert!(c.unmeasured.is_empty());
    let v: Vec<(&str, Verdict)> = c.noise.iter().map(|n| (n.a.cpu.as_str(), n.verdict)).collect();
    assert_eq!(v, [("cpu0", Verdict::Same), ("cpu1", Verdict::Regression)]);
    assert_eq!(c.regressions(), 1);
    let n = &c.noise[1];
    assert!(n.ks_gaps.unwrap().p < 0.01 && n.ks_stolen.unwrap().p < 0.01, "{n:?}");
    let t = render(&c);
    let row = t.lines().find(|l| l.starts_with("noise/idle/no-rt#1 / cpu1 ")).unwrap();
    let (sa, sb) = (n.a.stolen_pct(), n.b.stolen_pct());
    assert!(
        row.contains(&format!("{sa:.3} -> {sb:.3} (+{:.0}%)", (sb - sa) / sa * 100.0)),
        "{row}"
    );
    assert!(
        row.contains(&format!(
            "{} -> {} (+",
            us_1(n.a.max_gap_ns.unwrap()),
            us_1(n.b.max_gap_ns.unwrap())
        )),
        "{row}"
    );
    assert!(row.contains("40.0 -> 40.0 (+0%)"), "the rate, shown: {row}");
    assert!(row.contains("REGRESSION"), "{row}");
    assert!(t.starts_with("Run 1 (A) -> run 2 (B): 0 stream(s) compared, 2 noise row(s) (case / cpu)\nNoise per CPU (A -> B)\n"), "{t}");
    assert!(t.contains("1 regression(s): p99 grew by more than 10% with p < 0.01 (noise: the max gap or stolen %)"), "{t}");
    // no threshold: worse, not a regression; the other way round: better
    let c = compare(&a, &b, cfg(None));
    assert_eq!((c.noise[1].verdict, c.regressions()), (Verdict::Worse, 0));
    assert!(render(&c).contains("no --threshold: nothing is judged a regression; the rate shown"));
    assert_eq!(compare(&b, &a, cfg(Some(10.0))).noise[1].verdict, Verdict::Better);
    // a growth below the threshold is worse, not a regression
    assert_eq!(compare(&a, &b, cfg(Some(500.0))).noise[1].verdict, Verdict::Worse);
}

#[test]
fn four_times_the_gaps_are_judged_by_stolen_and_a_failed_side_is_not_compared() {
    let a = run(1, vec![noise_case(0, "no-rt", 1, &[(0, 100, 20_000)])]);
    // four times the gaps of the same length: the rate is shown, stolen % (4x) is judged
    let b = run(2, vec![noise_case(0, "no-rt", 1, &[(0, 400, 20_000)])]);
    let c = compare(&a, &b, cfg(Some(10.0)));
    assert_eq!(c.noise.len(), 1);
    assert!((c.noise[0].b.rate_per_s() / c.noise[0].a.rate_per_s() - 4.0).abs() < 1e-9);
    assert_eq!(c.noise[0].verdict, Verdict::Regression, "stolen % quadrupled: {:?}", c.noise[0]);
    // a failed case in B: named as not compared, no noise row
    let mut b = b;
    b.cases[0].document = None;
    b.cases[0].status = CaseStatus::Failed { error: "x".into() };
    let c = compare(&a, &b, cfg(Some(10.0)));
    assert!(c.noise.is_empty());
    assert_eq!(c.unmeasured, [("noise/idle/no-rt#1".to_string(), "ok".into(), "failed".into())]);
    assert_eq!(render_noise_diffs(&[], &cfg(None)), "");
}

#[test]
fn the_dashboards_two_runs_page_has_the_noise_rows() {
    let a = run(1, vec![noise_case(0, "no-rt", 1, &[(1, 400, 20_000)])]);
    let b = run(2, vec![noise_case(0, "no-rt", 1, &[(1, 400, 60_000)])]);
    let page = crate::dashboard::side_by_side_page(&crate::dashboard::Ctx::default(), &a, &b);
    assert!(page.contains("Noise per CPU (A -&gt; B)"), "{page}");
    let row = page.lines().find(|l| l.starts_with("noise/idle/no-rt#1 / cpu1 ")).unwrap();
    assert_eq!(row.split_whitespace().nth(3), Some("worse"), "no threshold on the page: {row}");
}

#[test]
fn four_profiles_continue_in_a_second_block_on_the_terminal() {
    let profiles = ["no-rt", "rt-normal", "rt-affinities", "rt-isolation"];
    let cases = profiles
        .iter()
        .enumerate()
        .map(|(i, p)| noise_case(i as u32, p, 1, &[(1, 10 * (i as i64 + 1), 5_000)]))
        .collect();
    let r = run(1, cases);
    let text = pivots_text(&r);
    eprintln!("{text}");
    let lines: Vec<&str> = text.lines().collect();
    let groups: Vec<Vec<&str>> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("cpu "))
        .map(|(i, _)| lines[i - 1].split_whitespace().collect())
        .collect();
    assert_eq!(groups, [vec!["no-rt", "rt-normal", "rt-affinities"], vec!["rt-isolation"]]);
    let rows: Vec<&str> = lines.iter().copied().filter(|l| l.starts_with("cpu1 ")).collect();
    assert_eq!(rows.len(), 2, "{text}");
    // the rates: 1, 2, 3 gaps/s in the first block, 4 in the second
    let rate = |l: &str, k: usize| l.split_whitespace().nth(3 * k + 3).unwrap().to_string();
    assert_eq!([rate(rows[0], 0), rate(rows[0], 1), rate(rows[0], 2)], ["1.0", "2.0", "3.0"]);
    assert_eq!(rate(rows[1], 0), "4.0");
    assert!(lines.iter().all(|l| l.chars().count() <= 120 || l.starts_with("(per CPU")));
}
