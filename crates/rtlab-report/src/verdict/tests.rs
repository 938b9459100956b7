use super::*;
use crate::ros2_layer::tests::{case, labels, run, stream};
use rtlab_core::gate::{GateMetric, Outcome};

/// A case of `load` and `profile` whose one stream missed `missed` of its samples, skipped
/// `overruns` periods and lost `lost` messages out of 1000 periods.
fn measured(
    index: u32,
    load: &str,
    profile: &str,
    missed: u64,
    overruns: u64,
    lost: u64,
) -> CaseRecord {
    let mut s = stream("shm.rtt.sub0", labels("shm"), 100_000, 1000 - overruns - lost, lost);
    s.stats.missed = Some(missed);
    s.stats.overruns = Some(overruns);
    if missed > 0 {
        s.stats.max_ns = Some(12_000_000);
    }
    let mut c = case(index, load, profile, &[("transport", "shm")], vec![s]);
    // the probe's send-lateness stream has no deadline count
    for s in &mut c.document.as_mut().unwrap().streams {
        if s.metric == "send_lateness" {
            (s.stats.missed, s.stats.lost) = (None, None);
        }
    }
    c
}

#[test]
fn a_case_is_judged_on_its_deadline_counts_overruns_and_losses() {
    let r = run(
        1,
        vec![
            measured(0, "idle", "no-rt", 6, 13, 0),
            measured(1, "idle", "rt", 0, 0, 3),
            measured(2, "cpu", "rt", 0, 0, 0),
        ],
    );
    let v = run_verdict(&r);
    // a skipped period is a missed deadline: 6 late + 13 skipped of 1000 periods
    assert_eq!((v.cases[0].kind, v.cases[0].word()), (Kind::Missed, "missed 19/1000".into()));
    assert_eq!((v.cases[1].kind, v.cases[1].word()), (Kind::Lost, "lost 3/1000".into()));
    assert_eq!((v.cases[2].kind, v.cases[2].word()), (Kind::Kept, "kept".into()));
    // the send-lateness stream the case also holds has no deadline count: not judged
    assert_eq!(judged_streams(&r.cases[0]).len(), 1);
    assert!(v.failed());
    assert!(
        v.headline()
            .starts_with("1 of 3 cases kept every deadline; 1 missed deadlines (the most: "),
        "{}",
        v.headline()
    );
    assert!(v.headline().contains("missed 19/1000, max 12000.0 us"), "{}", v.headline());
    assert!(v.headline().contains("1 lost messages but missed no deadline"), "{}", v.headline());
}

#[test]
fn the_all_stream_is_judged_alone_when_there_is_one() {
    let mut c = measured(0, "idle", "no-rt", 2, 0, 0);
    let d = c.document.as_mut().unwrap();
    let mut all = d.streams[0].clone();
    all.name = "all".into();
    all.stats.missed = Some(5);
    d.streams.push(all);
    let v = case_verdict(&c, &[]);
    assert_eq!(v.word(), "missed 5/1000");
}

#[test]
fn a_profile_that_kept_where_another_missed_is_the_remedy() {
    let r = run(
        1,
        vec![
            measured(0, "idle", "no-rt", 6, 0, 0),
            measured(1, "idle", "rt-affinities", 0, 0, 0),
            measured(2, "cpu", "no-rt", 11, 0, 0),
            measured(3, "cpu", "rt-affinities", 0, 0, 0),
        ],
    );
    let v = run_verdict(&r);
    assert_eq!(
        v.helps_lines(),
        [
            "pubsub/idle/transport=shm: no-rt missed 6/1000 (max 12000.0 us); rt-affinities kept",
            "pubsub/cpu/transport=shm: no-rt missed 11/1000 (max 12000.0 us); rt-affinities kept"
        ]
    );
    let remedy = v.remedy();
    assert!(remedy.starts_with("profile rt-affinities kept every deadline where no-rt missed (pubsub/idle/transport=shm; pubsub/cpu/transport=shm)"), "{remedy}");
    assert!(remedy.contains("`rtlab tune apply rt-affinities --dry-run`"), "{remedy}");
    // where the other profile only lost messages, the sentence says so
    let r = run(
        1,
        vec![measured(0, "idle", "no-rt", 0, 0, 4), measured(1, "idle", "rt-affinities", 0, 0, 0)],
    );
    let remedy = run_verdict(&r).remedy();
    assert!(remedy.starts_with("profile rt-affinities kept every deadline where no-rt lost messages (pubsub/idle/transport=shm)"), "{remedy}");
}

#[test]
fn where_no_profile_kept_the_remedy_says_so_and_what_kept_elsewhere() {
    let r = run(
        1,
        vec![
            measured(0, "idle", "no-rt", 6, 0, 0),
            measured(1, "idle", "rt-affinities", 0, 0, 0),
            measured(2, "cpu", "no-rt", 11, 0, 0),
            measured(3, "cpu", "rt-affinities", 1, 0, 0),
        ],
    );
    let remedy = run_verdict(&r).remedy();
    assert_eq!(
        remedy,
        "no profile kept every deadline and every message in pubsub/cpu/transport=shm: read the warnings and the evidence of those cases (the kernel, the machine, the load); what kept elsewhere: pubsub/idle/transport=shm: rt-affinities"
    );
}

#[test]
fn a_run_that_kept_everything_says_the_lightest_profile_is_enough() {
    let r = run(1, vec![measured(0, "idle", "no-rt", 0, 0, 0), measured(1, "idle", "rt", 0, 0, 0)]);
    let v = run_verdict(&r);
    assert!(!v.failed());
    assert_eq!(v.headline(), "all 2 cases kept every deadline and lost nothing");
    assert!(
        v.remedy().starts_with("every profile kept every deadline here (no-rt, rt)"),
        "{}",
        v.remedy()
    );
    // one case under one profile
    let one = run(2, vec![measured(0, "idle", "no-rt", 0, 0, 0)]);
    let v = run_verdict(&one);
    assert_eq!(v.headline(), "the case kept every deadline and lost nothing");
    assert!(v.remedy().starts_with("this machine kept every deadline under profile no-rt"));
}

#[test]
fn a_broken_gate_fails_a_case_that_kept_its_deadlines_and_unmeasured_cases_are_named() {
    let mut skipped = measured(1, "cpu", "no-rt", 0, 0, 0);
    skipped.status = CaseStatus::Skipped { reason: "stress-ng is not installed".into() };
    skipped.document = None;
    let mut noise = measured(2, "cpu", "rt", 0, 0, 0);
    for s in &mut noise.document.as_mut().unwrap().streams {
        s.stats.missed = None;
    }
    let r = run(1, vec![measured(0, "idle", "no-rt", 0, 0, 0), skipped, noise]);
    let gate = GateVerdict {
        gate: "*:*:p99_9<=1us".into(),
        origin: "--gate".into(),
        case: Some(r.cases[0].name.clone()),
        stream: Some("shm.rtt.sub0".into()),
        metric: GateMetric::parse("p99_9").unwrap(),
        limit: "1us".into(),
        value: Some("300.0us".into()),
        outcome: Outcome::Broken,
        message: String::new(),
    };
    let v = judge(&r, &[gate]);
    assert_eq!((v.cases[0].kind, v.cases[0].word()), (Kind::GateBroken, "gate broken".into()));
    assert_eq!((v.cases[1].kind, v.cases[1].word()), (Kind::NotMeasured, "skipped".into()));
    assert_eq!((v.cases[2].kind, v.cases[2].word()), (Kind::Unjudged, "measured".into()));
    assert!(v.failed());
    assert_eq!(
        v.headline(),
        "0 of 1 cases kept every deadline; 1 kept their deadlines but broke a gate; 1 measured without a deadline; 1 not measured"
    );
    assert!(
        v.remedy().contains("measured under one profile only missed or lost"),
        "{}",
        v.remedy()
    );
}
