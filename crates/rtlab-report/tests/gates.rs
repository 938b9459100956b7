//! A run's gates in the reports and as JUnit XML, on the fixture run (real rtlab timer
//! documents, one failed and one skipped case): the XML read back by Python's xml.etree
//! (elements, results and counts), every name escaped, the terminal and HTML sections.

mod fixture;

use rtlab_core::gate::Gate;
use rtlab_core::judging::evaluate;
use rtlab_core::run::Run;
use rtlab_report::junit::junit;

const ODD: &str = "timer/<script>alert('x')</script>&\"\u{1}";

/// The fixture with an odd first case name, judged by three gates: one broken on every
/// measured stream, one matching no stream, one matching no case; a planned case never run.
fn judged() -> Run {
    let mut r = fixture::run();
    r.cases[0].name = ODD.into();
    let mut planned: Vec<String> = r.cases.iter().map(|c| c.name.clone()).collect();
    planned.push("not/run".into());
    let gates =
        ["*:*:max<=1ns", "*:nope:max<=1ms", "zzz:*:max<=1ms"].map(|g| Gate::parse_flag(g).unwrap());
    r.gates = evaluate(&gates, &r.cases, &planned);
    r
}

/// Per testcase (classname, name, result), and the counts of the suite and the root.
fn read_back(xml: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("junit.xml");
    std::fs::write(&f, xml).unwrap();
    let py = r#"
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
counts = lambda e: {k: int(e.get(k)) for k in ("tests", "failures", "errors", "skipped")}
suites = root.findall("testsuite")
cases = []
for c in suites[0].findall("testcase"):
    kids = [k.tag for k in c if k.tag in ("failure", "error", "skipped")]
    cases.append([c.get("classname"), c.get("name"), kids[0] if kids else "passed"])
print(json.dumps({"tag": root.tag, "suites": len(suites), "root": counts(root), "suite": counts(suites[0]), "cases": cases}))
"#;
    let o = std::process::Command::new("python3")
        .args(["-c", py, f.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn junit_has_a_testcase_per_case_and_gate_and_counts_them() {
    let r = judged();
    let j = read_back(&junit(&r));
    assert_eq!((j["tag"].as_str(), j["suites"].as_u64()), (Some("testsuites"), Some(1)));
    // 7 measured cases x the broken gate (failures), the failed case (errors: both gates),
    // the skipped and the not-run case (skipped: both gates), the unmatched gate (a
    // failure), the gate on no case (skipped)
    let counts = serde_json::json!({"tests": 15, "failures": 8, "errors": 2, "skipped": 5});
    assert_eq!(j["root"], counts);
    assert_eq!(j["suite"], counts);
    let cases = j["cases"].as_array().unwrap();
    let odd = ODD.replace('\u{1}', "\u{FFFD}");
    assert_eq!(
        cases[0],
        serde_json::json!([odd, "--gate *:*:max<=1ns", "failure"]),
        "escaped, read back"
    );
    let unmatched = cases.iter().find(|c| c[0] == "gates" && c[2] == "failure").unwrap();
    assert_eq!(unmatched[1], "--gate *:nope:max<=1ms");
    assert!(cases.iter().any(|c| c[0] == "not/run" && c[2] == "skipped"));
    assert!(cases
        .iter()
        .any(|c| c[0] == "gates" && c[1] == "--gate zzz:*:max<=1ms" && c[2] == "skipped"));
}

#[test]
fn junit_without_gates_has_a_testcase_per_case() {
    let r = fixture::run();
    let j = read_back(&junit(&r));
    assert_eq!(
        j["root"],
        serde_json::json!({"tests": 9, "failures": 0, "errors": 1, "skipped": 1})
    );
    let cases = j["cases"].as_array().unwrap();
    assert!(cases.iter().all(|c| c[1] == "measured"), "{cases:?}");
    assert_eq!(cases.iter().filter(|c| c[2] == "passed").count(), 7);
}

#[test]
fn the_reports_show_every_verdict_escaped() {
    let r = judged();
    let text = rtlab_report::render_terminal(std::slice::from_ref(&r), false);
    assert!(
        text.contains("Gates (19 broken, 2 failed, 1 unmatched, 4 skipped, 1 no_case)"),
        "{text}"
    );
    let html = rtlab_report::render_html(std::slice::from_ref(&r));
    assert!(
        html.contains("<h2>Gates (19 broken, 2 failed, 1 unmatched, 4 skipped, 1 no_case)</h2>")
    );
    assert_eq!(html.matches("<tr class=\"broken\">").count(), 19);
    assert!(!html.contains("<script>alert"), "a case name is text, not markup");
    assert!(html.contains("timer/&lt;script&gt;alert"));
    // a run without gates has no gates section
    let plain = rtlab_report::render_terminal(&[fixture::run()], false);
    assert!(!plain.contains("Gates ("));
}
