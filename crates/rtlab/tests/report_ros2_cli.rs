//! `rtlab report`'s "ROS 2 layer" through the binary, on real measurements of this machine:
//! one small scenario through `ros2` (rcl and the installation's RMW, rmw_fastrtps_cpp in
//! /opt/rtlab/ros2, which scripts/setup.sh installs) and the same scenario through `fastdds`
//! (Fast DDS driven directly), stored in one temporary store, then the terminal and HTML
//! reports of both runs. Two runs, not one scenario with both transports: a process holds
//! one Fast DDS (`rtlab_pubsub::dl::claim_fast_dds`), ROS 2's 3.2 or Debian's 2.9, so today
//! the second of the two cases of one `rtlab run` fails; the report pairs the cases across
//! the runs given.
//!
//! Asserted: the rows of that case carry both transports' stored figures (count, lost, p50,
//! p99, p99.9, max) and their difference as stored, the definition and the version note;
//! the HTML rows, opened in headless Chromium at 1400 px, are rendered and fit the page.
//! Never a latency bound or the sign of the difference: timings are noisy here.

mod browser;
mod common;

use common::{run, stderr, stdout};
use rtlab_core::run::Run;
use rtlab_core::schema::Stream;
use rtlab_core::units::us_1;
use std::path::Path;

/// The scenario, through one transport: 300 messages one way at 200 Hz, one subscriber
/// process, one host, default QoS.
fn scenario(transport: &str) -> String {
    format!(
        "name = \"ros2-layer-{transport}\"\ncount = 300\nloads = [\"idle\"]\nprofiles = [\"no-rt\"]\n\n[[probe]]\nkind = \"pubsub\"\ntransport = \"{transport}\"\nmode = \"oneway\"\nrate = \"200hz\"\n"
    )
}

/// Run the scenario through `transport` into the store `db`.
fn measure(dir: &Path, db: &str, transport: &str) {
    let file = dir.join(format!("{transport}.toml"));
    std::fs::write(&file, scenario(transport)).unwrap();
    let o = run(&["run", file.to_str().unwrap(), "--db", db, "--wait"]);
    assert_eq!(o.status.code(), Some(0), "{transport}: {}{}", stdout(&o), stderr(&o));
}

/// The one-way stream of the run's only case.
fn one_way(r: &Run) -> &Stream {
    let c = &r.cases[0];
    let d = c
        .document
        .as_ref()
        .unwrap_or_else(|| panic!("case {} measured nothing: {:?}", c.name, c.status));
    d.streams.iter().find(|s| s.metric == "one_way_latency").expect("a one-way stream")
}

fn us(v: Option<i64>) -> String {
    v.map(us_1).unwrap_or_else(|| "-".into())
}

fn signed(a: Option<i64>, b: Option<i64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a > b => format!("+{}", us_1(a - b)),
        (Some(a), Some(b)) => us_1(a - b),
        _ => "-".into(),
    }
}

/// count, lost/(count+lost), p50, p99, p99.9, max as the report prints them.
fn figures(s: &Stream) -> Vec<String> {
    let t = &s.stats;
    let lost = t.lost.expect("pubsub counts losses");
    vec![
        t.count.to_string(),
        format!("{lost}/{}", t.count + lost),
        us(t.p50_ns),
        us(t.p99_ns),
        us(t.p99_9_ns),
        us(t.max_ns),
    ]
}

/// The fields after `side` on the terminal line that starts with it.
fn row<'t>(text: &'t str, side: &str) -> Vec<&'t str> {
    let line = text
        .lines()
        .find(|l| l.starts_with(side))
        .unwrap_or_else(|| panic!("no row '{side}' in:\n{text}"));
    line[side.len()..].split_whitespace().collect()
}

/// A script this test adds to a copy of the report (the report has none): the rendered
/// text of each row of the ROS 2 layer table, its right edge and the page's width.
#[test]
fn report_shows_the_ros2_layer_of_a_case_measured_through_ros2_and_fastdds() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("rtlab.db").display().to_string();
    measure(dir.path(), &db, "ros2");
    measure(dir.path(), &db, "fastdds");
    let store = rtlab_store::Store::open(&db).unwrap();
    let (r1, r2) = (store.load_run(1).unwrap(), store.load_run(2).unwrap());
    let (ros2, fast) = (one_way(&r1), one_way(&r2));
    assert_eq!(ros2.labels["transport"], "ros2");
    assert_eq!(fast.labels["transport"], "fastdds");
    let rmw = ros2.labels["rmw"].clone();
    assert!(rmw.starts_with("rmw_fastrtps"), "the installation's RMW runs on Fast DDS: {rmw}");
    assert!(ros2.stats.count > 0 && fast.stats.count > 0, "samples on both sides");
    let version = r1.cases[0].document.as_ref().unwrap().config["ros2"]["middleware_version"]
        .as_str()
        .expect("config.ros2.middleware_version")
        .to_string();
    let direct_version = fast.labels.get("fastdds_version").map(String::as_str).unwrap_or("2.9");
    let label = "pubsub/idle/no-rt · oneway 64 B 200hz · best-effort keep-last:5 volatile · blocking processes · subscriber 0 of 1 · one_way_latency";
    let diffs = [
        signed(ros2.stats.p50_ns, fast.stats.p50_ns),
        signed(ros2.stats.p99_ns, fast.stats.p99_ns),
        signed(ros2.stats.p99_9_ns, fast.stats.p99_9_ns),
        signed(ros2.stats.max_ns, fast.stats.max_ns),
    ];
    let ros2_side = format!("  ros2 {rmw} (run 1 case 0)");

    // terminal: the rows of the case, both transports' figures as stored, the difference
    let o = run(&["report", "1", "2", "--db", &db]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let t = stdout(&o);
    assert_eq!(
        t.matches("ROS 2 layer: what rcl + the RMW + the type support add").count(),
        1,
        "{t}"
    );
    assert!(t.contains("publish call -> the subscriber's callback"), "the definition: {t}");
    let lines: Vec<&str> = t.lines().collect();
    let at =
        lines.iter().position(|l| *l == label).unwrap_or_else(|| panic!("no '{label}' in:\n{t}"));
    assert!(lines[at + 1].starts_with(&ros2_side), "{t}");
    assert!(lines[at + 2].starts_with("  fastdds (run 2 case 0)"), "{t}");
    assert!(lines[at + 3].starts_with("  ros2 - fastdds"), "{t}");
    assert_eq!(row(&t, &ros2_side), figures(ros2), "{t}");
    assert_eq!(row(&t, "  fastdds (run 2 case 0)"), figures(fast), "{t}");
    assert_eq!(row(&t, "  ros2 - fastdds"), diffs, "{t}");
    let note = lines[at + 4];
    assert!(
        note.starts_with(&format!(
            "  note: Fast DDS {version} under ROS 2, {direct_version} driven directly"
        )),
        "{t}"
    );
    let changed = !rtlab_report::ros2_layer::same_version(&version, direct_version);
    assert_eq!(
        note.contains("the difference includes the change of Fast DDS version"),
        changed,
        "{note}"
    );
    assert!(t.contains("  note: measured in different runs (1 and 2)"), "{t}");
    eprintln!("{}", lines[at..at + 5].join("\n"));

    // each run alone: the ros2 run says there is nothing to compare with, the fastdds run
    // has no ROS 2 layer at all
    let alone = stdout(&run(&["report", "1", "--db", &db]));
    assert!(alone.contains(&format!("\nROS 2 layer: 1 ros2 stream(s) over {rmw} and no fastdds stream of the same case in the runs given")), "{alone}");
    assert!(!stdout(&run(&["report", "2", "--db", &db])).contains("ROS 2 layer"));

    // HTML: the same rows, linked to their cases
    let html = dir.path().join("r.html");
    let o = run(&["report", "1", "2", "--db", &db, "--html", html.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let h = std::fs::read_to_string(&html).unwrap();
    let cells =
        |f: &[String]| f.iter().map(|v| format!("<td class=\"n\">{v}</td>")).collect::<String>();
    assert!(h.contains(&format!("<tr class=\"ros2\"><td class=\"side\"><a href=\"#run1-case0\">ros2 {rmw}</a> <span class=\"env\">(run 1 case 0)</span></td>{}</tr>", cells(&figures(ros2)))), "{h}");
    assert!(h.contains(&format!("<tr class=\"direct\"><td class=\"side\"><a href=\"#run2-case0\">fastdds</a> <span class=\"env\">(run 2 case 0)</span></td>{}</tr>", cells(&figures(fast)))), "{h}");
    assert!(
        h.contains(&format!(
            "<tr class=\"diff\"><td class=\"side\">ros2 - fastdds</td><td></td><td></td>{}</tr>",
            cells(&diffs)
        )),
        "{h}"
    );
    assert!(h.contains(&format!(
        "<td colspan=\"7\">Fast DDS {version} under ROS 2, {direct_version} driven directly"
    )));
    assert!(h.contains("id=\"run1-case0\"") && h.contains("id=\"run2-case0\""));
    assert!(!h.contains("<script"), "the report has no script");

    // ... rendered by a browser: every row's text, the table inside the 1400 px page
    let laid = browser::table_layout(dir.path(), &h, "ros2layer");
    let (layout, rendered) = (&laid.0, laid.rows());
    let want = |name: &str, place: &str, f: &[String]| format!("{name} ({place}) {}", f.join(" "));
    assert!(rendered.contains(&label), "{layout}");
    assert!(
        rendered.contains(&want(&format!("ros2 {rmw}"), "run 1 case 0", &figures(ros2)).as_str()),
        "{layout}"
    );
    assert!(
        rendered.contains(&want("fastdds", "run 2 case 0", &figures(fast)).as_str()),
        "{layout}"
    );
    assert!(rendered.contains(&format!("ros2 - fastdds {}", diffs.join(" ")).as_str()), "{layout}");
    let get = |k: &str| laid.get(k);
    assert_eq!(get("client_width"), 1400);
    assert!(get("table_right") <= 1400, "the ROS 2 layer table is wider than the page: {layout}");
    assert!(get("scroll_width") <= 1400, "the page scrolls sideways: {layout}");
}
