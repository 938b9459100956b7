//! The pairing rules on hand-made stored cases (a ros2 and a fastdds stream of one case,
//! then one thing changed at a time); the builders are shared with `render_tests`.

use super::*;
use rtlab_core::histogram::HistogramData;
use rtlab_core::run::{CaseStatus, RunInfo, RunStatus};
use rtlab_core::schema::{Environment, ResultDocument, ToolInfo};
use rtlab_core::windows::WindowData;
use std::collections::BTreeMap;

/// The labels of a pubsub stream of `transport` (oneway, 64 B at 100 Hz, one
/// subscriber, best effort), as the probe writes them.
pub fn labels(transport: &str) -> BTreeMap<String, String> {
    let mut l: BTreeMap<String, String> = [
        ("transport", transport),
        ("mode", "oneway"),
        ("schedule", "periodic"),
        ("wait", "blocking"),
        ("payload_bytes", "64"),
        ("period_ns", "10000000"),
        ("rate", "100hz"),
        ("subscribers", "1"),
        ("subscriber", "0"),
        ("placement", "processes"),
        ("reliability", "best-effort"),
        ("history", "keep-last:5"),
        ("durability", "volatile"),
        ("published", "300"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    if transport == ROS2 {
        l.insert("rmw".into(), "rmw_fastrtps_cpp".into());
        l.insert("ros_distro".into(), "kilted".into());
    }
    l
}

/// A stream whose percentiles are `p50` scaled (p99 = 2x, p99.9 = 3x, max = 4x), with
/// `count` samples and `lost` lost.
pub fn stream(
    name: &str,
    labels: BTreeMap<String, String>,
    p50: i64,
    count: u64,
    lost: u64,
) -> Stream {
    let some = |v: i64| (count > 0).then_some(v);
    Stream {
        name: name.into(),
        metric: "one_way_latency".into(),
        definition: "one-way latency (hand-made for the report's tests)".into(),
        labels,
        deadline_ns: 10_000_000,
        stats: Summary {
            count,
            min_ns: some(p50 / 2),
            mean_ns: some(p50),
            p50_ns: some(p50),
            p99_ns: some(2 * p50),
            p99_9_ns: some(3 * p50),
            max_ns: some(4 * p50),
            missed: Some(0),
            lost: Some(lost),
            ..Default::default()
        },
        histogram: HistogramData {
            scheme: "log-linear".into(),
            exact_below_ns: 1024,
            buckets_per_octave: 16,
            limit_ns: 1 << 40,
            overflow_high: 0,
            overflow_low: 0,
            buckets: Vec::new(),
        },
        windows: WindowData { width_ns: 1_000_000_000, max_ns: Vec::new(), count: Vec::new() },
        raw_file: None,
        raw_dropped: None,
        start_monotonic_ns: None,
    }
}

/// A stored pubsub case holding `streams` (the send-lateness stream added, as the probe
/// does); `ros2` facts in its config when one of them is a ros2 stream.
pub fn case(
    index: u32,
    load: &str,
    profile: &str,
    params: &[(&str, &str)],
    streams: Vec<Stream>,
) -> CaseRecord {
    let ros2 = streams.iter().any(|s| s.labels.get("transport").map(String::as_str) == Some(ROS2));
    let config = if ros2 {
        serde_json::json!({"ros2": {"distro": "kilted", "rcl_version": "10.1.3", "rmw": "rmw_fastrtps_cpp", "rmw_version": "9.3.3", "middleware": "Fast DDS", "middleware_version": "3.2.2"}})
    } else {
        serde_json::json!({})
    };
    let mut all = streams;
    if let Some(first) = all.first() {
        let mut lateness = first.clone();
        lateness.name = format!("{}.pub.send_lateness", first.labels["transport"]);
        lateness.metric = "send_lateness".into();
        lateness.labels.remove("subscriber");
        all.push(lateness);
    }
    let params: BTreeMap<String, String> =
        params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let document = ResultDocument {
        schema_version: rtlab_core::schema::SCHEMA_VERSION,
        tool: ToolInfo { name: "rtlab".into(), version: "0.1.0".into() },
        command_line: vec!["rtlab".into(), "run".into()],
        started_at: "2026-11-25T10:00:00Z".into(),
        duration_ns: 3_000_000_000,
        interrupted: false,
        probe: "pubsub".into(),
        environment: Environment::default(),
        config,
        streams: all,
        warnings: Vec::new(),
        evidence: None,
        far: None,
        cost: None,
    };
    CaseRecord {
        index,
        name: format!(
            "pubsub/{load}/{profile}/{}#1",
            params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
        ),
        probe: "pubsub".into(),
        load: load.into(),
        profile: profile.into(),
        params,
        repetition: 1,
        status: CaseStatus::Ok,
        started_at: "2026-11-25T10:00:00Z".into(),
        duration_ns: 3_000_000_000,
        document: Some(document),
        load_report: None,
        profile_report: None,
        spike_evidence: None,
        published: None,
    }
}

pub fn run(id: i64, cases: Vec<CaseRecord>) -> Run {
    Run {
        id,
        info: RunInfo {
            scenario: "ros2-layer".into(),
            source: "hand-made for the report's tests".into(),
            scenario_text: String::new(),
            scale: 1.0,
            command_line: vec!["rtlab".into(), "run".into()],
            started_at: "2026-11-25T10:00:00Z".into(),
            tool_version: "0.1.0".into(),
            environment: Environment::default(),
        },
        status: RunStatus::Complete,
        finished_at: None,
        cases,
        gates: Vec::new(),
    }
}

/// ros2 (p50 150 us) and fastdds (p50 100 us) on the same case, in one run.
pub fn matching_run() -> Run {
    run(
        1,
        vec![
            case(
                0,
                "idle",
                "no-rt",
                &[("transport", "ros2")],
                vec![stream("ros2.sub0", labels("ros2"), 150_000, 300, 0)],
            ),
            case(
                1,
                "idle",
                "no-rt",
                &[("transport", "fastdds")],
                vec![stream("fastdds.sub0", labels("fastdds"), 100_000, 298, 2)],
            ),
        ],
    )
}

#[test]
fn the_same_case_through_ros2_and_fastdds_pairs_with_its_differences() {
    let runs = [matching_run()];
    let l = ros2_layer(&runs);
    assert_eq!(l.pairs.len(), 1, "the send-lateness streams are not paired");
    assert!(l.unpaired.is_empty());
    let p = &l.pairs[0];
    assert_eq!((p.ros2.case.index, p.direct.case.index), (0, 1));
    assert_eq!(
        (p.ros2.name(), p.direct.name()),
        ("ros2 rmw_fastrtps_cpp".into(), "fastdds".into())
    );
    assert_eq!(p.rmw, "rmw_fastrtps_cpp");
    assert_eq!(p.diff(|s| s.p50_ns), Some(50_000));
    assert_eq!(p.diff(|s| s.p99_ns), Some(100_000));
    assert_eq!(p.diff(|s| s.p99_9_ns), Some(150_000));
    assert_eq!(p.diff(|s| s.max_ns), Some(200_000));
    assert_eq!(
        p.label,
        "pubsub/idle/no-rt · oneway 64 B 100hz · best-effort keep-last:5 volatile · blocking processes · subscriber 0 of 1 · one_way_latency"
    );
    assert_eq!(p.notes.len(), 1, "{:?}", p.notes);
    assert!(
        p.notes[0].contains("Fast DDS 3.2.2 under ROS 2, 2.9 driven directly"),
        "{:?}",
        p.notes
    );
    assert!(p.notes[0].contains("the difference includes the change of Fast DDS version"));
}

#[test]
fn the_fastdds_version_label_decides_whether_the_version_changed() {
    let mut runs = [matching_run()];
    let d = runs[0].cases[1].document.as_mut().unwrap();
    d.streams[0].labels.insert("fastdds_version".into(), "3.2.2".into());
    d.streams[0].labels.insert("fastdds_shm".into(), "off".into());
    let l = ros2_layer(&runs);
    assert_eq!(l.pairs.len(), 1, "fastdds_version and fastdds_shm are not matched");
    let n = &l.pairs[0].notes;
    assert!(
        n[0].contains("3.2.2 driven directly (its fastdds_version label): the same version"),
        "{n:?}"
    );
    assert!(n.iter().any(|x| x.contains("fastdds_shm=off")), "{n:?}");
    // no version under ROS 2 recorded: said, not guessed
    runs[0].cases[0].document.as_mut().unwrap().config = serde_json::json!({});
    let l = ros2_layer(&runs);
    assert!(l.pairs[0].notes[0].contains("not recorded"), "{:?}", l.pairs[0].notes);
    assert_eq!(l.pairs[0].rmw, "rmw_fastrtps_cpp", "the rmw label is enough");
}

#[test]
fn a_different_payload_profile_load_or_qos_does_not_pair() {
    let other = |f: &dyn Fn(&mut CaseRecord)| {
        let mut r = matching_run();
        f(&mut r.cases[1]);
        let runs = [r];
        let l = ros2_layer(&runs);
        (l.pairs.len(), l.unpaired.len(), l.unpaired.first().map(|u| u.wanted))
    };
    let relabel = |k: &'static str, v: &'static str| {
        move |c: &mut CaseRecord| {
            c.document.as_mut().unwrap().streams[0].labels.insert(k.into(), v.into());
        }
    };
    assert_eq!(other(&relabel("payload_bytes", "4096")), (0, 1, Some("fastdds")));
    assert_eq!(other(&relabel("reliability", "reliable")), (0, 1, Some("fastdds")));
    assert_eq!(
        other(&relabel("far_transport", "cyclonedds")),
        (0, 1, Some("fastdds")),
        "a label on one side only"
    );
    assert_eq!(other(&|c| c.profile = "rt-normal".into()), (0, 1, Some("fastdds")));
    assert_eq!(other(&|c| c.load = "cpu".into()), (0, 1, Some("fastdds")));
    // the measured labels and the transport's own do not keep a pair apart
    assert_eq!(other(&relabel("published", "299")), (1, 0, None));
    assert_eq!(other(&relabel("case_p50_spread_ns", "1234")), (1, 0, None));
}

#[test]
fn an_rmw_without_a_direct_counterpart_has_no_row() {
    let mut r = matching_run();
    let d = r.cases[0].document.as_mut().unwrap();
    for s in &mut d.streams {
        s.labels.insert("rmw".into(), "rmw_zenoh_cpp".into());
    }
    let runs = [r];
    let l = ros2_layer(&runs);
    assert!(l.is_empty(), "neither a pair nor an unpaired stream: {:?}", l.unpaired.len());
    assert_eq!(direct_transport("rmw_fastrtps_dynamic_cpp"), Some("fastdds"));
    assert_eq!(direct_transport("rmw_cyclonedds_cpp"), Some("cyclonedds"));
    assert_eq!(direct_transport("rmw_connextdds"), None);
}

#[test]
fn cyclonedds_pairs_with_rmw_cyclonedds_and_says_its_version() {
    let mut r = matching_run();
    let d = r.cases[0].document.as_mut().unwrap();
    for s in &mut d.streams {
        s.labels.insert("rmw".into(), "rmw_cyclonedds_cpp".into());
    }
    d.config = serde_json::json!({"ros2": {"rmw": "rmw_cyclonedds_cpp", "middleware": "Cyclone DDS", "middleware_version": "0.10.5"}});
    // fastdds is not its counterpart
    let runs = [r.clone()];
    let l = ros2_layer(&runs);
    assert_eq!((l.pairs.len(), l.unpaired[0].wanted), (0, "cyclonedds"));
    for s in &mut r.cases[1].document.as_mut().unwrap().streams {
        s.labels.insert("transport".into(), "cyclonedds".into());
    }
    let runs = [r];
    let l = ros2_layer(&runs);
    assert_eq!(l.pairs.len(), 1);
    assert!(
        l.pairs[0].notes[0].contains("Cyclone DDS 0.10.5 under ROS 2, 11.0.1 driven directly"),
        "{:?}",
        l.pairs[0].notes
    );
}

#[test]
fn missing_stats_pair_and_show_no_difference() {
    let mut r = matching_run();
    // every ros2 message lost: no figures
    r.cases[0].document.as_mut().unwrap().streams[0] =
        stream("ros2.sub0", labels("ros2"), 150_000, 0, 300);
    let runs = [r.clone()];
    let l = ros2_layer(&runs);
    assert_eq!(l.pairs.len(), 1);
    assert_eq!(l.pairs[0].diff(|s| s.p50_ns), None);
    assert_eq!(l.pairs[0].ros2.stream.stats.lost, Some(300));
    // a failed direct case has no document: nothing to pair with
    r.cases[1].document = None;
    r.cases[1].status = CaseStatus::Failed { error: "fastdds: library".into() };
    let runs = [r];
    let l = ros2_layer(&runs);
    assert_eq!((l.pairs.len(), l.unpaired.len()), (0, 1));
}

#[test]
fn pairs_across_runs_one_to_one_preferring_equal_parameters_and_the_same_run() {
    // run 1: ros2 with policy fifo and other; run 2: fastdds other, then fifo
    let ros2 = |i, pol| {
        case(
            i,
            "idle",
            "no-rt",
            &[("transport", "ros2"), ("policy", pol)],
            vec![stream("ros2.sub0", labels("ros2"), 150_000, 300, 0)],
        )
    };
    let fast = |i, pol| {
        case(
            i,
            "idle",
            "no-rt",
            &[("policy", pol)],
            vec![stream("fastdds.sub0", labels("fastdds"), 100_000, 300, 0)],
        )
    };
    let runs = [
        run(1, vec![ros2(0, "fifo"), ros2(1, "other"), ros2(2, "other")]),
        run(2, vec![fast(0, "other"), fast(1, "fifo")]),
    ];
    let l = ros2_layer(&runs);
    let got: Vec<_> = l.pairs.iter().map(|p| (p.ros2.place(), p.direct.place())).collect();
    assert_eq!(
        got,
        [
            ("run 1 case 0".to_string(), "run 2 case 1".to_string()),
            ("run 1 case 1".into(), "run 2 case 0".into())
        ]
    );
    assert_eq!(l.unpaired.len(), 1, "each direct stream pairs once");
    assert_eq!(l.unpaired[0].ros2.place(), "run 1 case 2");
    assert!(
        l.pairs[0].notes.iter().any(|n| n == "measured in different runs (1 and 2)"),
        "{:?}",
        l.pairs[0].notes
    );
    assert!(!l.pairs[0].notes.iter().any(|n| n.contains("parameters differ")));
    // the same run wins over another run's equal case
    let runs = [run(1, vec![ros2(0, "other"), fast(1, "other")]), run(2, vec![fast(0, "other")])];
    let l = ros2_layer(&runs);
    assert_eq!(l.pairs[0].direct.place(), "run 1 case 1");
    assert_eq!(l.of_run(1).pairs.len(), 1);
    assert!(l.of_run(2).is_empty(), "a pair is shown with its ros2 side's run");
    // parameters that differ (labels equal) still pair, and the note says so
    let runs = [run(1, vec![ros2(0, "fifo"), fast(1, "other")])];
    let l = ros2_layer(&runs);
    assert!(
        l.pairs[0]
            .notes
            .iter()
            .any(|n| n == "the cases' parameters differ: ros2 policy=fifo, fastdds policy=other"),
        "{:?}",
        l.pairs[0].notes
    );
}

#[test]
fn versions_compare_by_their_leading_components() {
    assert!(same_version("2.9", "2.9.1"));
    assert!(same_version("3.2.2", "3.2.2"));
    assert!(!same_version("3.2.2", "2.9"));
    assert!(!same_version("2.10", "2.1"));
}
