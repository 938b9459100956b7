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
    let want = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_SNAPSHOTS=1 to create it)", p.display()));
    if want != got {
        let line = want.lines().zip(got.lines()).position(|(a, b)| a != b).unwrap_or(want.lines().count().min(got.lines().count()));
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
    assert_eq!(h.matches("http://").count(), h.matches("xmlns=\"http://www.w3.org/2000/svg\"").count(), "only SVG namespaces may name a URL");
    // one section per case, every case present
    for c in &run.cases {
        assert!(h.contains(&format!("id=\"run1-case{}\"", c.index)), "case {} missing", c.index);
    }
    let measured = run.cases.iter().filter(|c| c.document.is_some()).count();
    assert_eq!(h.matches("class=\"plot histogram\"").count(), measured);
    assert_eq!(h.matches("class=\"plot timeplot\"").count(), measured);
    assert_eq!(h.matches("class=\"plot bars\"").count(), 1, "fairness of the 3-thread case");
    assert_eq!(h.matches("class=\"plot lines\"").count(), 1, "the interval sweep of timer/idle/no-rt");
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
    assert_eq!(h.matches("<ul class=\"warn\">").count() + h.matches("Warnings: none").count(), measured);
}
