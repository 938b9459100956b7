//! Gate verdicts in the store (read back exactly, replaced on a second save) and the last
//! good run `compare --baseline` takes: the newest earlier run of the same scenario and host
//! that is complete, has every case ok and no gate that failed.

#[path = "../../rtlab-report/tests/fixture/mod.rs"]
mod fixture;

use rtlab_core::gate::{Gate, Outcome};
use rtlab_core::judging::evaluate;
use rtlab_core::run::{CaseStatus, Run, RunStatus};
use rtlab_store::Store;

/// The fixture run with its ok cases only (real rtlab timer documents).
fn ok_run() -> Run {
    let mut r = fixture::run();
    r.cases.retain(|c| c.status == CaseStatus::Ok);
    assert!(r.cases.len() >= 2);
    r
}

fn store(s: &mut Store, r: &Run, status: RunStatus, gates: &[Gate]) -> i64 {
    let id = s.begin_run(&r.info).unwrap();
    for c in &r.cases {
        s.add_case(id, c).unwrap();
    }
    s.finish_run(id, status).unwrap();
    let names: Vec<String> = r.cases.iter().map(|c| c.name.clone()).collect();
    s.save_gate_verdicts(id, &evaluate(gates, &r.cases, &names)).unwrap();
    id
}

fn gate(text: &str) -> Gate {
    Gate::parse_flag(text).unwrap()
}

#[test]
fn verdicts_round_trip_and_a_second_save_replaces_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path().join("rtlab.db")).unwrap();
    let r = ok_run();
    let gates = [gate("timer/*:*:max<=1ns"), gate("timer/*:*:max<=1h"), gate("*:nope:max<=1ms")];
    let id = store(&mut s, &r, RunStatus::Complete, &gates);
    let names: Vec<String> = r.cases.iter().map(|c| c.name.clone()).collect();
    let verdicts = evaluate(&gates, &r.cases, &names);
    let back = s.load_run(id).unwrap();
    assert_eq!(back.gates, verdicts, "read back exactly, in order");
    for o in [Outcome::Kept, Outcome::Broken, Outcome::Unmatched] {
        assert!(back.gates.iter().any(|v| v.outcome == o), "{o:?} among {:?}", back.gates);
    }
    s.save_gate_verdicts(id, &verdicts[..1]).unwrap();
    assert_eq!(s.gate_verdicts(id).unwrap(), verdicts[..1]);
    s.save_gate_verdicts(id, &[]).unwrap();
    assert!(s.load_run(id).unwrap().gates.is_empty());
    assert!(s.save_gate_verdicts(id + 7, &[]).is_err(), "an unknown run is refused");
}

#[test]
fn the_last_good_run_is_the_newest_earlier_one_of_the_same_scenario_and_host() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(dir.path().join("rtlab.db")).unwrap();
    let good = ok_run();
    let kept = [gate("*:*:max<=1h")];
    let broken = [gate("*:*:max<=1ns")];
    let mut other_host = good.clone();
    other_host.info.environment.hostname = "robot-2".into();
    let mut other_scenario = good.clone();
    other_scenario.info.scenario = "another".into();
    let with_failed_case = fixture::run();
    assert!(with_failed_case.cases.iter().any(|c| c.status != CaseStatus::Ok));

    let g1 = store(&mut s, &good, RunStatus::Complete, &kept); // 1: good
    let g2 = store(&mut s, &good, RunStatus::Complete, &[]); // 2: good, no gates
    let b3 = store(&mut s, &good, RunStatus::Complete, &broken); // 3: a gate broken
    let b4 = store(&mut s, &with_failed_case, RunStatus::Complete, &[]); // 4: a case failed
    let b5 = store(&mut s, &good, RunStatus::Interrupted, &kept); // 5: interrupted
    let h6 = store(&mut s, &other_host, RunStatus::Complete, &kept); // 6: another host
    let s7 = store(&mut s, &other_scenario, RunStatus::Complete, &kept); // 7: another scenario
    let last = store(&mut s, &good, RunStatus::Complete, &kept); // 8
    assert_eq!((g1, g2, b3, b4, b5, h6, s7, last), (1, 2, 3, 4, 5, 6, 7, 8));

    let host = &good.info.environment.hostname;
    let scenario = &good.info.scenario;
    assert_eq!(s.last_good_run(scenario, host, None, last).unwrap(), Some(g2));
    assert_eq!(s.last_good_run(scenario, host, None, g2).unwrap(), Some(g1));
    assert_eq!(
        s.last_good_run(scenario, host, None, g1).unwrap(),
        None,
        "nothing before the first"
    );
    assert_eq!(s.last_good_run(scenario, "robot-2", None, 99).unwrap(), Some(h6));
    assert_eq!(s.last_good_run("another", host, None, 99).unwrap(), Some(s7));
    assert_eq!(s.last_good_run(scenario, host, None, 99).unwrap(), Some(last));
    // the same host is the same name and, where both runs recorded one, the same machine id:
    // a robot that shares the name but not the machine is not the baseline
    let machine = s.run_host(last).unwrap().machine_id;
    let path = s.path().to_path_buf();
    let twin = store(&mut s, &good, RunStatus::Complete, &kept); // 9: the name, another machine
    drop(s);
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute("UPDATE runs SET machine_id = 'another-machine' WHERE id = ?1", [twin])
        .unwrap();
    let s = Store::open_existing(&path).unwrap();
    if let Some(m) = machine.as_deref() {
        assert_eq!(s.last_good_run(scenario, host, Some(m), 99).unwrap(), Some(last));
    }
    assert_eq!(s.last_good_run(scenario, host, Some("another-machine"), 99).unwrap(), Some(twin));
    // the runs before it: this machine's (or no machine id recorded: then they count)
    let before_twin = if machine.is_some() { None } else { Some(last) };
    assert_eq!(
        s.last_good_run(scenario, host, Some("another-machine"), twin).unwrap(),
        before_twin
    );
    assert_eq!(s.last_good_run(scenario, host, None, 99).unwrap(), Some(twin), "name only");
}
