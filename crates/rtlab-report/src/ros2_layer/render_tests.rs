//! The terminal and HTML forms of the layer, on the hand-made runs of `tests`.

use super::tests::*;
use super::*;
use crate::html::ros2_layer_html;
use crate::terminal::ros2_layer_text;

/// The fields of the terminal row that starts with `side` (after its name).
fn row<'t>(text: &'t str, side: &str) -> Vec<&'t str> {
    let line = text
        .lines()
        .find(|l| l.starts_with(side))
        .unwrap_or_else(|| panic!("no row '{side}' in:\n{text}"));
    line[side.len()..].split_whitespace().collect()
}

#[test]
fn terminal_rows_show_both_sides_and_the_difference() {
    let runs = [matching_run()];
    let t = ros2_layer_text(&ros2_layer(&runs));
    assert!(t.starts_with("\nROS 2 layer: what rcl + the RMW + the type support add"), "{t}");
    assert!(t.contains("publish call -> the subscriber's callback"), "the definition: {t}");
    assert!(t.contains("\nside "), "{t}");
    let lines: Vec<&str> = t.lines().collect();
    let label = lines
        .iter()
        .position(|l| l.starts_with("pubsub/idle/no-rt · oneway 64 B 100hz"))
        .expect("the case");
    assert!(lines[label + 1].starts_with("  ros2 rmw_fastrtps_cpp (run 1 case 0)"));
    assert!(lines[label + 2].starts_with("  fastdds (run 1 case 1)"));
    assert!(lines[label + 3].starts_with("  ros2 - fastdds"));
    assert_eq!(
        row(&t, "  ros2 rmw_fastrtps_cpp (run 1 case 0)"),
        ["300", "0/300", "150.0", "300.0", "450.0", "600.0"]
    );
    assert_eq!(
        row(&t, "  fastdds (run 1 case 1)"),
        ["298", "2/300", "100.0", "200.0", "300.0", "400.0"]
    );
    assert_eq!(row(&t, "  ros2 - fastdds"), ["+50.0", "+100.0", "+150.0", "+200.0"]);
    assert!(
        lines[label + 4].starts_with("  note: Fast DDS 3.2.2 under ROS 2, 2.9 driven directly"),
        "{t}"
    );
    assert!(!t.contains("not paired"));
    // in the report: once, before the cases
    let all = crate::render_terminal(&runs, false);
    assert_eq!(all.matches("ROS 2 layer").count(), 1);
    assert!(all.find("ROS 2 layer").unwrap() < all.find("== Case 0").unwrap());
}

#[test]
fn terminal_says_what_could_not_be_paired() {
    // a ros2 stream alone: one line
    let mut r = matching_run();
    r.cases.remove(1);
    let runs = [r];
    let t = ros2_layer_text(&ros2_layer(&runs));
    assert_eq!(t.trim().lines().count(), 1, "{t}");
    assert!(t.starts_with("\nROS 2 layer: 1 ros2 stream(s) over rmw_fastrtps_cpp and no fastdds stream of the same case in the runs given: nothing to compare"), "{t}");
    assert!(t.contains("the first: run 1 case 0, pubsub/idle/no-rt · oneway 64 B"), "{t}");
    // beside a pair: a line per stream left over
    let mut r = matching_run();
    let extra = r.cases[0].clone();
    r.cases.push(CaseRecord { index: 2, ..extra });
    let runs = [r];
    let t = ros2_layer_text(&ros2_layer(&runs));
    assert_eq!(t.matches("  ros2 - fastdds").count(), 1);
    assert!(
        t.contains(
            "\nnot paired: ros2 rmw_fastrtps_cpp (run 1 case 2), pubsub/idle/no-rt · oneway"
        ),
        "{t}"
    );
    // nothing at all for an RMW on no DDS rtlab drives, or for runs without ros2
    let mut r = matching_run();
    for s in &mut r.cases[0].document.as_mut().unwrap().streams {
        s.labels.insert("rmw".into(), "rmw_zenoh_cpp".into());
    }
    let runs = [r];
    assert_eq!(ros2_layer_text(&ros2_layer(&runs)), "");
    assert!(!crate::render_terminal(&runs, false).contains("ROS 2 layer"));
    let mut r = matching_run();
    r.cases.remove(0);
    assert!(!crate::render_terminal(&[r], false).contains("ROS 2 layer"));
}

#[test]
fn missing_figures_are_dashes() {
    let mut r = matching_run();
    r.cases[0].document.as_mut().unwrap().streams[0] =
        stream("ros2.sub0", labels("ros2"), 1, 0, 300);
    let runs = [r];
    let t = ros2_layer_text(&ros2_layer(&runs));
    assert_eq!(
        row(&t, "  ros2 rmw_fastrtps_cpp (run 1 case 0)"),
        ["0", "300/300", "-", "-", "-", "-"]
    );
    assert_eq!(row(&t, "  ros2 - fastdds"), ["-", "-", "-", "-"]);
    let h = ros2_layer_html(&ros2_layer(&runs));
    assert!(h.contains("<td class=\"n\">300/300</td><td class=\"n\">-</td>"), "{h}");
}

#[test]
fn html_table_has_the_rows_links_and_notes() {
    let runs = [matching_run()];
    let h = ros2_layer_html(&ros2_layer(&runs));
    assert!(h.starts_with("<h2>ROS 2 layer: what rcl + the RMW + the type support add"), "{h}");
    assert!(
        h.contains("publish call -&gt; the subscriber&#39;s callback"),
        "the definition, escaped"
    );
    assert_eq!(h.matches("<table class=\"ros2layer\">").count(), 1);
    assert_eq!(h.matches("<tr class=\"casehead\">").count(), 1);
    assert!(h.contains("<tr class=\"ros2\"><td class=\"side\"><a href=\"#run1-case0\">ros2 rmw_fastrtps_cpp</a> <span class=\"env\">(run 1 case 0)</span></td><td class=\"n\">300</td><td class=\"n\">0/300</td><td class=\"n\">150.0</td><td class=\"n\">300.0</td><td class=\"n\">450.0</td><td class=\"n\">600.0</td></tr>"), "{h}");
    assert!(
        h.contains("<tr class=\"direct\"><td class=\"side\"><a href=\"#run1-case1\">fastdds</a>"),
        "{h}"
    );
    assert!(h.contains("<tr class=\"diff\"><td class=\"side\">ros2 - fastdds</td><td></td><td></td><td class=\"n\">+50.0</td><td class=\"n\">+100.0</td><td class=\"n\">+150.0</td><td class=\"n\">+200.0</td></tr>"), "{h}");
    assert!(
        h.contains(
            "<tr class=\"note\"><td colspan=\"7\">Fast DDS 3.2.2 under ROS 2, 2.9 driven directly"
        ),
        "{h}"
    );
    // in the report: before the cases, its links resolve, nothing external
    let all = crate::render_html(&runs);
    assert!(all.find("class=\"ros2layer\"").unwrap() < all.find("<h2>Case by case</h2>").unwrap());
    for id in ["run1-case0", "run1-case1"] {
        assert!(all.contains(&format!("id=\"{id}\"")), "{id}");
    }
    assert!(!all.contains("<script") && !all.contains("https://"));
    // nothing paired: one paragraph; no ros2 at all: nothing
    let mut r = matching_run();
    r.cases.remove(1);
    let h = ros2_layer_html(&ros2_layer(std::slice::from_ref(&r)));
    assert!(
        h.starts_with(
            "<h2>ROS 2 layer</h2><p class=\"env\">1 ros2 stream(s) over rmw_fastrtps_cpp"
        ),
        "{h}"
    );
    let mut r = matching_run();
    r.cases.remove(0);
    assert!(!crate::render_html(&[r]).contains("ROS 2 layer"));
}

#[test]
fn across_runs_the_rows_are_in_the_ros2_runs_part() {
    let mut direct = matching_run();
    direct.id = 2;
    direct.cases.remove(0);
    direct.cases[0].index = 0;
    let mut r2 = matching_run();
    r2.cases.remove(1);
    let runs = [direct, r2];
    let t = crate::render_terminal(&runs, false);
    let run1 = t.find("Run 1 ·").unwrap();
    let run2 = t.find("Run 2 ·").unwrap();
    let at = t.find("ROS 2 layer").unwrap();
    assert!(run2 < run1 && at > run1, "the row is in run 1's part (given second)");
    assert_eq!(
        row(&t, "  fastdds (run 2 case 0)"),
        ["298", "2/300", "100.0", "200.0", "300.0", "400.0"]
    );
    assert!(t.contains("  note: measured in different runs (1 and 2)"), "{t}");
    let h = crate::render_html(&runs);
    assert!(h.contains("<a href=\"#run2-case0\">fastdds</a>"), "a link to the other run's case");
    assert!(h.contains("id=\"run2-case0\""));
}
