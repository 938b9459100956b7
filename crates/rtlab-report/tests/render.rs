//! Snapshot tests of the terminal report and the HTML tables, and the structure of the HTML
//! report, on a run built from real `rtlab timer` documents (tests/fixture).
//! `UPDATE_SNAPSHOTS=1 cargo test -p rtlab-report` rewrites the snapshots (review the diff).

mod fixture;

use std::path::PathBuf;

fn snapshot(name: &str, got: &str) {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots").join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&p, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&p).unwrap_or_else(|e| {
        panic!("{}: {e} (run with UPDATE_SNAPSHOTS=1 to create it)", p.display())
    });
    if want != got {
        let line = want
            .lines()
            .zip(got.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(want.lines().count().min(got.lines().count()));
        panic!("{name} differs from the snapshot at line {}:\nwant: {:?}\ngot:  {:?}\n(UPDATE_SNAPSHOTS=1 to accept)", line + 1, want.lines().nth(line), got.lines().nth(line));
    }
}

#[test]
fn terminal_report_snapshot() {
    let run = fixture::run();
    let out = rtlab_report::render_terminal(std::slice::from_ref(&run), false);
    snapshot("terminal.txt", &out);
    // every case is there, failed and skipped with their error or reason
    for c in &run.cases {
        assert!(out.contains(&format!("== Case {}: {}", c.index, c.name)), "{} missing", c.name);
    }
    assert!(out.contains("error: synthetic failure for the report tests"));
    assert!(out.contains("reason: synthetic skip for the report tests"));
    assert_eq!(out.matches("published: ").count(), 2);
    assert!(!out.contains('\x1b'), "no colour asked");
}

#[test]
fn studies_table_snapshot() {
    let run = fixture::run();
    snapshot("studies.txt", &rtlab_report::terminal::studies_table(&run));
    snapshot("studies.html", &rtlab_report::html::studies_table(&run));
    snapshot("percentiles.html", &rtlab_report::html::percentile_table(&run));
}

#[test]
fn html_report_structure() {
    let run = fixture::run();
    let h = rtlab_report::render_html(std::slice::from_ref(&run));
    assert!(h.starts_with("<!DOCTYPE html>") && h.trim_end().ends_with("</html>"));
    // self-contained: no script, no external resource of any kind
    for bad in ["<script", "<link", " src=", "url(", "@import", "https://"] {
        assert!(!h.contains(bad), "found {bad}");
    }
    assert_eq!(
        h.matches("http://").count(),
        h.matches("xmlns=\"http://www.w3.org/2000/svg\"").count(),
        "only SVG namespaces may name a URL"
    );
    // one section per case, every case present
    for c in &run.cases {
        assert!(h.contains(&format!("id=\"run1-case{}\"", c.index)), "case {} missing", c.index);
    }
    let measured = run.cases.iter().filter(|c| c.document.is_some()).count();
    assert_eq!(h.matches("class=\"plot histogram\"").count(), measured);
    assert_eq!(h.matches("class=\"plot timeplot\"").count(), measured);
    assert_eq!(h.matches("class=\"plot bars\"").count(), 1, "fairness of the 3-thread case");
    assert_eq!(
        h.matches("class=\"plot lines\"").count(),
        1,
        "the interval sweep of timer/idle/no-rt"
    );
    assert!(h.contains("latency vs rate: timer / idle / no-rt"));
    assert_eq!(h.matches("<svg").count(), h.matches("</svg>").count());
    // deadline lines on the time plots
    assert!(h.matches("class=\"deadline\"").count() >= measured);
    // the studies table: one row per case plus the published rows
    let studies = &h[h.find("<table class=\"studies\">").unwrap()..];
    let studies = &studies[..studies.find("</table>").unwrap()];
    assert_eq!(studies.matches("<tr").count(), 1 + run.cases.len() + 2);
    assert_eq!(studies.matches("class=\"published\"").count(), 2);
    assert!(h.contains("error: synthetic failure for the report tests"));
    assert!(h.contains("skipped: synthetic skip for the report tests"));
    // profile x load grid of the timer: 2 profiles x 5 columns, one per load and parameters
    // (idle at 200us, 500us, 1ms, 1ms with 3 threads; cpu at 1ms), each cell with its verdict
    assert!(h.contains("Profile x load: timer"));
    let grid = &h[h.find("<table class=\"grid\">").unwrap()..];
    let grid = &grid[..grid.find("</table>").unwrap()];
    assert_eq!(grid.matches("<td class=\"grid\"").count(), 10);
    assert_eq!(grid.matches("<th>").count(), 1 + 5 + 2, "{grid}");
    assert_eq!(grid.matches("<span class=\"verdict-missed\">missed ").count(), 7, "{grid}");
    // reading order: the verdict, the grid, the overlays, the cases, then the detail
    let at = |s: &str| h.find(s).unwrap_or_else(|| panic!("{s} missing"));
    let order = [
        "<div class=\"verdict missed\"><p class=\"headline\">Verdict: 0 of 7 cases kept every deadline; 7 missed deadlines",
        "<h2>Profiles and loads</h2>",
        "<h2>Cases (9)</h2>",
        "<h2>Percentiles</h2>",
        "<h2>The run</h2>",
        "<h2>Case by case</h2>",
    ];
    for w in order.windows(2) {
        assert!(at(w[0]) < at(w[1]), "{} after {}", w[0], w[1]);
    }
    assert!(h.contains("<p class=\"remedy\">So: no profile kept every deadline and every message in timer/idle/interval=1ms; timer/cpu/interval=1ms"), "{}", &h[at("<div class=\"verdict")..][..1500]);
    // the run's warnings: each code once, with its cases; a case names the codes said there
    let section = &h[h.find("<ul class=\"runwarn\">").expect("the run's warnings")..];
    let section = &section[..section.find("</ul>").unwrap()];
    let mut codes: Vec<&str> = Vec::new();
    for c in &run.cases {
        for w in c.document.iter().flat_map(|d| &d.warnings) {
            if !codes.contains(&w.code.as_str()) {
                codes.push(&w.code);
            }
        }
    }
    assert!(!codes.is_empty());
    for code in &codes {
        assert_eq!(
            section.matches(&format!("<li><b>{code}</b> (")).count(),
            1,
            "{code}: {section}"
        );
    }
    assert!(h.contains("(<a href=\"#run1-warnings\">the run's warnings</a>)"));
    // warnings on every measured case
    assert_eq!(
        h.matches("<ul class=\"warn\">").count() + h.matches("Warnings: none").count(),
        measured
    );
}

#[test]
fn html_shows_the_spike_and_the_worst_windows_with_their_counters() {
    use rtlab_core::evidence::{Evidence, KernelCounters, SpikeEvidence, WindowCounters};
    let mut run = fixture::run();
    let doc = run.cases[5].document.as_mut().unwrap();
    let w = &doc.streams[0].windows;
    let worst = w.max_ns.iter().enumerate().max_by_key(|(_, m)| **m).map(|(i, _)| i).unwrap();
    let windows = (0..w.max_ns.len())
        .map(|i| KernelCounters {
            net_rx: vec![0, if i == worst { 777 } else { 1 }],
            context_switches: 5,
            ..Default::default()
        })
        .collect();
    doc.evidence = Some(Evidence {
        counters: Some(WindowCounters {
            width_ns: w.width_ns,
            start_monotonic_ns: None,
            resolution_ns: w.width_ns / 8,
            windows,
            last_partial: false,
        }),
        spike: Some(SpikeEvidence {
            threshold_ns: 500_000,
            index: Some(3),
            at_ns: Some(3_000_000),
            value_ns: Some(812_000),
            attribution: vec!["preempted by pid 812 (rustc, kernel prio 120) for 4.7 ms".into()],
            ..Default::default()
        }),
        notes: vec!["no timerlat <here>".into()],
    });
    let h = rtlab_report::render_html(std::slice::from_ref(&run));
    assert!(h.contains("Spike (first sample above 500.0 us): sample 3, 812.0 us"), "the spike");
    assert!(h.contains("<li>preempted by pid 812 (rustc, kernel prio 120) for 4.7 ms</li>"));
    assert!(
        h.contains(&format!("<li>window {worst}: max ")) && h.contains("NET_RX 777 (CPU 1: 777)"),
        "the worst window carries its counters"
    );
    assert!(h.contains("Note: no timerlat &lt;here&gt;"), "notes are escaped");
    let t = rtlab_report::render_terminal(std::slice::from_ref(&run), false);
    assert!(
        t.contains("spike (first above 500.0 us): sample 3, 812.0 us\n  - preempted by pid 812"),
        "{t}"
    );
    assert!(
        t.contains(&format!("worst window of thread0: {worst}, max "))
            && t.contains("NET_RX 777 (CPU 1: 777)"),
        "{t}"
    );
}

#[test]
fn profiles_are_compared_per_probe_and_load() {
    let mut run = fixture::run();
    let cmp = rtlab_report::model::profile_comparisons(&run);
    let labels: Vec<String> = cmp.iter().map(|c| c.label()).collect();
    assert_eq!(labels, ["timer / idle / interval=1ms", "timer / cpu / interval=1ms"]);
    for c in &cmp {
        let names: Vec<&str> = c.profiles.iter().map(|p| p.profile.as_str()).collect();
        assert_eq!(names, ["no-rt", "fifo80"]);
        assert_eq!((c.stream.as_str(), c.metric.as_str()), ("thread0", "wakeup_latency"));
        for p in &c.profiles {
            let s = &rtlab_report::model::headline(p.cases[0]).unwrap().stats;
            assert_eq!(p.count, s.count, "every sample is in the histogram");
            assert_eq!((p.p99_9_ns, p.max_ns), (s.p99_9_ns, s.max_ns), "one case: its figures");
            let cc = p.ccdf();
            assert_eq!(cc.len(), p.buckets.len() + 1);
            assert_eq!(cc[0].1, 1.0, "no sample below the first bucket");
            assert!(cc.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 >= w[1].1), "monotone");
            assert!(cc.last().unwrap().1 >= 1.0 / p.count as f64, "never 0 (log axis)");
        }
    }
    // a second repetition of a case: its histogram is summed into the profile's line
    let mut rep = run.cases[3].clone();
    rep.repetition = 2;
    rep.name = rep.name.replace("#1", "#2");
    run.cases.push(rep);
    let cmp = rtlab_report::model::profile_comparisons(&run);
    let fifo = &cmp[0].profiles[1];
    let s = &rtlab_report::model::headline(&run.cases[3]).unwrap().stats;
    assert_eq!((fifo.cases.len(), fifo.count), (2, 2 * s.count));
    assert_eq!(fifo.max_ns, s.max_ns);
    assert!(fifo.p99_9_ns.unwrap() >= s.p99_ns.unwrap(), "the nearest rank of the sum");
    // HTML: one CCDF plot per comparison, one line and one legend entry per profile
    let h = rtlab_report::render_html(std::slice::from_ref(&run));
    assert_eq!(h.matches("class=\"plot ccdf\"").count(), 2);
    assert_eq!(h.matches("class=\"ccdf-line\"").count(), 4);
    assert_eq!(h.matches("class=\"legend\"").count(), 4);
    assert!(h.contains("timer / idle / interval=1ms: thread0 by profile"));
    // terminal: the same comparison as figures side by side
    let t = rtlab_report::terminal::profiles_compared(&run);
    assert_eq!(t.matches("Profiles compared: ").count(), 2);
    snapshot("profiles_compared.txt", &t);
}

#[test]
fn the_partial_last_window_is_not_drawn_as_a_drop() {
    let run = fixture::run();
    // case 0's thread0: 5 windows of 100 ms, the last with 25 samples of 500
    let w = &run.cases[0].document.as_ref().unwrap().streams[0].windows;
    assert_eq!(w.count.last(), Some(&25));
    let svg = rtlab_report::svg::max_over_time("t", w, Some(200_000));
    assert_eq!(svg.matches("class=\"partial\"").count(), 1, "marked apart");
    assert!(svg.contains("last window partial (25 samples)"));
    let path = svg.split("<path d=\"").nth(1).unwrap().split('"').next().unwrap();
    assert_eq!(path.matches(['M', 'L']).count(), w.max_ns.len() - 1, "the line stops before it");
    // every plotted circle but the partial one is on the line
    assert_eq!(svg.matches("<circle").count(), w.max_ns.len());
    // a window without samples breaks the line instead of dropping to zero
    let gap = rtlab_core::windows::WindowData {
        width_ns: 1_000_000,
        max_ns: vec![Some(50_000), None, Some(60_000), Some(55_000)],
        count: vec![10, 0, 10, 10],
    };
    let svg = rtlab_report::svg::max_over_time("t", &gap, None);
    let path = svg.split("<path d=\"").nth(1).unwrap().split('"').next().unwrap();
    assert_eq!((path.matches('M').count(), path.matches('L').count()), (2, 1), "{path}");
    assert!(!svg.contains("class=\"partial\""));
}

/// A case measured with a far side: both renderers say where it was and what the far
/// host's kernel counted, next to this host's counters.
#[test]
fn a_far_side_is_in_both_reports() {
    use rtlab_core::evidence::{KernelCounters, WindowCounters};
    let mut run = fixture::run();
    let doc = run.cases.iter_mut().find_map(|c| c.document.as_mut()).expect("a document");
    let k = |n: u64| KernelCounters {
        net_rx: vec![n, 1],
        interrupts: vec![n, 2],
        ..Default::default()
    };
    doc.far = Some(rtlab_core::schema::FarSide {
        link: "ssh:robot2".into(),
        host: "robot2".into(),
        version: "0.1.0".into(),
        near_address: "10.0.0.1".into(),
        far_address: "10.0.0.2".into(),
        clocks: "round-trips-only".into(),
        counters: Some(WindowCounters {
            width_ns: 1_000_000_000,
            start_monotonic_ns: None,
            resolution_ns: 125_000_000,
            windows: vec![k(10), k(900), k(20)],
            last_partial: false,
        }),
        ..Default::default()
    });
    let t = rtlab_report::render_terminal(std::slice::from_ref(&run), false);
    assert!(t.contains("far side ssh:robot2 (host robot2, rtlab 0.1.0): 10.0.0.1 -> 10.0.0.2, clocks: round-trips-only"), "{t}");
    assert!(t.contains("far kernel counters over 3 windows of 1000 ms: NET_RX 933"), "{t}");
    assert!(t.contains("far busiest window 1 (by interrupts)"), "{t}");
    let h = rtlab_report::render_html(std::slice::from_ref(&run));
    assert!(h.contains("far side ssh:robot2 (host robot2"), "no far side in the HTML");
    // a far side that recorded its architecture says it
    let far = run.cases.iter_mut().find_map(|c| c.document.as_mut()?.far.as_mut()).unwrap();
    far.environment.architecture = "aarch64".into();
    far.environment.kernel_architecture = "aarch64".into();
    let t = rtlab_report::render_terminal(std::slice::from_ref(&run), false);
    assert!(t.contains("far side ssh:robot2 (host robot2, rtlab 0.1.0, aarch64): 10.0.0.1"), "{t}");
}
