//! The noise cases of a run under two profiles, through the binary, on real measurements of
//! this machine: the report's profiles side by side (terminal and HTML, the HTML opened in
//! headless Chromium at 1400 px) and `rtlab compare`'s noise per CPU (two real runs; then a
//! PLANTED regression, not a measurement: one case's gaps made three times as long).
//!
//! Asserted: each cell holds its own case's stored figures (recomputed here from the stored
//! streams, not through the report's code), the profiles in the run's order, the verdicts of
//! identical and planted data, exit codes. Never a bound on a measured time, nor the
//! verdict of two real runs: noise differs from run to run.
//!
//! The one test that measures in this binary (noise_cli.rs keeps its measuring tests apart
//! with a mutex; one is needed here too when a second one comes).

mod browser;
mod common;
mod stored;

use common::{run, stderr, stdout};
use rtlab_core::run::{CaseRecord, Run};
use rtlab_core::schema::Stream;
use rtlab_core::units::us_1;
use rtlab_core::{Histogram, Running, Summary};

/// The CPU measured: the last online one (CPU 0 keeps the rest of the machine).
fn measured_cpu() -> usize {
    *rtlab_sys::cpus::online_cpus(std::path::Path::new("/")).0.last().unwrap()
}

/// 1 s of noise on `cpu` under no-rt and rt-normal, in windows of 100 ms.
fn scenario(cpu: usize) -> String {
    format!("name = \"noise-profiles\"\nduration = \"1s\"\nloads = [\"idle\"]\nprofiles = [\"no-rt\", \"rt-normal\"]\n[[probe]]\nkind = \"noise\"\ncpus = {cpu}\nwindow = \"100ms\"\n")
}

fn gaps<'a>(c: &'a CaseRecord, cpu: &str) -> &'a Stream {
    let d = c.document.as_ref().unwrap_or_else(|| panic!("{}: {:?}", c.name, c.status));
    d.streams.iter().find(|s| s.name == cpu).unwrap_or_else(|| panic!("{}: no {cpu}", c.name))
}

fn label(s: &Stream, k: &str) -> i64 {
    s.labels[k].parse().unwrap()
}

/// A case's stolen %, max gap (us) and gaps per second of `cpu`, from its stored stream.
fn figures(c: &CaseRecord, cpu: &str) -> [String; 3] {
    let s = gaps(c, cpu);
    let measured = label(s, "measured_ns") as f64;
    [
        format!("{:.3}", label(s, "stolen_ns") as f64 * 100.0 / measured),
        s.stats.max_ns.map(us_1).unwrap_or_else(|| "-".into()),
        format!("{:.1}", s.stats.count as f64 * 1e9 / measured),
    ]
}

/// PLANTED (not a measurement): every sample of the stream three times as large, rebuilt
/// from its histogram's buckets (each bucket's count at three times its lower bound), the
/// windows' maxima and the stolen total likewise.
fn tripled(s: &mut Stream) {
    let (mut h, mut r, mut i) = (Histogram::new(), Running::default(), 0);
    for b in &s.histogram.buckets {
        for _ in 0..b.count {
            h.record(b.low_ns * 3);
            r.record(i, 0, b.low_ns * 3);
            i += 1;
        }
    }
    s.stats = Summary::from_parts(&r, &h);
    s.histogram = h.to_data();
    for m in s.windows.max_ns.iter_mut().flatten() {
        *m *= 3;
    }
    let stolen = label(s, "stolen_ns") * 3;
    s.labels.insert("stolen_ns".into(), stolen.to_string());
}

/// A script this test adds to a copy of the report (the report has none): the rendered
/// text of each row of the pivot, its right edge and the page's width.
#[test]
fn root_two_profiles_side_by_side_in_both_reports_and_compared_per_cpu() {
    if !common::is_root() {
        rtlab_sys::test_skip::skipped(format_args!(
            "needs root (rt-normal's SCHED_FIFO; CI runs as root)"
        ));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cpu_n = measured_cpu();
    let cpu = format!("cpu{cpu_n}");
    let db = dir.path().join("rtlab.db").display().to_string();
    let f = dir.path().join("n.toml");
    std::fs::write(&f, scenario(cpu_n)).unwrap();
    for _ in 0..2 {
        let o = run(&["run", f.to_str().unwrap(), "--db", &db, "--wait"]);
        assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    }
    let store = rtlab_store::Store::open(&db).unwrap();
    let (r1, r2): (Run, Run) = (store.load_run(1).unwrap(), store.load_run(2).unwrap());
    for c in r1.cases.iter().chain(&r2.cases) {
        assert_eq!(c.status, rtlab_core::run::CaseStatus::Ok, "{}", c.name);
    }
    let profiles: Vec<&str> = r1.cases.iter().map(|c| c.profile.as_str()).collect();
    assert_eq!(profiles, ["no-rt", "rt-normal"]);
    let (no_rt, rt) = (&r1.cases[0], &r1.cases[1]);
    let mut want = vec![cpu.clone()];
    want.extend(figures(no_rt, &cpu));
    want.extend(figures(rt, &cpu));

    // terminal: the pivot after the cases' table, the per-case rows kept
    let o = run(&["report", "1", "--db", &db]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let t = stdout(&o);
    let at = t
        .find("\nNoise, profiles side by side: noise / idle / cpus=")
        .unwrap_or_else(|| panic!("{t}"));
    let lines: Vec<&str> = t[at + 1..].lines().collect();
    eprintln!("{}", lines[..5].join("\n"));
    let groups: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(groups, ["no-rt", "rt-normal"], "{t}");
    let group = "stolen (%)  max gap (us)  rate (/s)";
    assert_eq!(
        lines[2].split_whitespace().collect::<Vec<_>>().join(" "),
        format!("cpu {group} {group}").replace("  ", " "),
        "{t}"
    );
    assert_eq!(lines[3].split_whitespace().collect::<Vec<_>>(), want, "{t}");
    assert!(lines[4].starts_with("(per CPU and case: stolen %"), "one CPU measured: {t}");
    assert_eq!(t.matches("noise per CPU:").count(), 2, "each case's own rows: {t}");

    // HTML: the same cells, each group linked to its case, rendered inside the page
    let html = dir.path().join("r.html");
    let o = run(&["report", "1", "--db", &db, "--html", html.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let h = std::fs::read_to_string(&html).unwrap();
    for (c, p) in [(no_rt, "no-rt"), (rt, "rt-normal")] {
        let head = format!("<a href=\"#run1-case{}\">{p}</a></th>", c.index);
        assert!(h.contains(&head), "{head}");
    }
    let cells: String = want[1..].iter().map(|v| format!("<td class=\"n\">{v}</td>")).collect();
    assert!(h.contains(&format!("<tr><td>{cpu}</td>{cells}</tr>")), "{h}");
    let layout = browser::table_layout(dir.path(), &h, "noisepivot");
    let rendered = layout.rows();
    assert_eq!(rendered[0], "cpu no-rt rt-normal", "{}", layout.0);
    assert_eq!(rendered[2], want.join(" "), "{}", layout.0);
    let get = |k: &str| layout.get(k);
    assert_eq!(get("client_width"), 1400);
    assert!(get("table_right") <= 1400, "the pivot is wider than the page: {}", layout.0);
    assert!(get("scroll_width") <= 1400, "the page scrolls sideways: {}", layout.0);

    // compare, two real runs: a row per case and CPU with A's and B's figures, not judged
    // without --threshold (whatever the noise did between the runs)
    let o = run(&["compare", "1", "2", "--db", &db]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(out.starts_with("Run 1 (A) -> run 2 (B): 0 stream(s) compared, 2 noise row(s) (case / cpu)\nNoise per CPU (A -> B)\n"), "{out}");
    for (a, b) in r1.cases.iter().zip(&r2.cases) {
        assert_eq!(a.name, b.name);
        let row = out
            .lines()
            .find(|l| l.starts_with(&format!("{} / {cpu} ", a.name)))
            .unwrap_or_else(|| panic!("no row of {}: {out}", a.name));
        let (fa, fb) = (figures(a, &cpu), figures(b, &cpu));
        for k in 0..3 {
            assert!(row.contains(&format!("{} -> {}", fa[k], fb[k])), "{k}: {row}");
        }
    }
    assert!(out.contains("no --threshold: nothing is judged a regression"), "{out}");

    // a PLANTED regression: run 3 is run 1 with no-rt's gaps three times as long
    let mut planted = r1.clone();
    let d = planted.cases[0].document.as_mut().unwrap();
    for s in d.streams.iter_mut().filter(|s| s.name == cpu || s.name == format!("{cpu}.stolen")) {
        tripled(s);
    }
    let n = gaps(&planted.cases[0], &cpu).stats.count;
    assert!(n >= 20, "a busy SCHED_OTHER thread saw {n} gaps in 1 s: too few to test");
    assert_eq!(stored::store_run(std::path::Path::new(&db), &planted), 3);
    let o = run(&["compare", "1", "3", "--db", &db, "--threshold", "10"]);
    let out = stdout(&o);
    eprintln!("{out}");
    assert_eq!(o.status.code(), Some(1), "{out}{}", stderr(&o));
    let bad: Vec<&str> = out.lines().filter(|l| l.contains("REGRESSION")).collect();
    assert_eq!(bad.len(), 1, "{out}");
    assert!(bad[0].starts_with(&format!("{} / {cpu} ", no_rt.name)), "{}", bad[0]);
    let (fa, fb) = (figures(no_rt, &cpu), figures(&planted.cases[0], &cpu));
    assert!(bad[0].contains(&format!("{} -> {}", fa[1], fb[1])), "the max gap: {}", bad[0]);
    let same = out.lines().find(|l| l.starts_with(&format!("{} / {cpu} ", rt.name))).unwrap();
    assert_eq!(same.split_whitespace().nth(3), Some("same"), "identical data: {same}");
    assert!(out.contains("1 regression(s):"), "{out}");
    // the other way round it is better, exit 0
    let o = run(&["compare", "3", "1", "--db", &db, "--threshold", "10"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("better"), "{}", stdout(&o));
}
