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
    // profile x load grid of the timer: 2 profiles x 2 loads
    assert!(h.contains("Profile x load: timer"));
    let grid = &h[h.find("<table class=\"grid\">").unwrap()..];
    let grid = &grid[..grid.find("</table>").unwrap()];
    assert_eq!(grid.matches("<td class=\"grid\"").count(), 4);
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
