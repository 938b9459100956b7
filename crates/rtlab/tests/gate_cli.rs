//! Gates for CI through the binary: a scenario with a gate kept and one broken (limits no
//! machine can keep or break: `max <= 1ns`, `lost <= 100%`), the exit codes, the lines that
//! name each broken gate, everything stored, the reports showing the verdicts, the JUnit
//! file read back by a JUnit reader (Python's xml.etree, checking elements and counts), and
//! `--gate` errors (exit 2, one line, nothing measured).

mod common;
use common::*;

/// One intra pub/sub case and one timer case, 200 slots each; a gate broken on the
/// subscriber (max <= 1ns) and two kept (lost and missed <= 100%).
const SCENARIO: &str = r#"name = "gated"
count = 200
[[probe]]
kind = "pubsub"
transport = "intra"
rate = "1khz"
[[probe]]
kind = "timer"
interval = "1ms"
policy = "other"
[[gate]]
case = "pubsub/*"
stream = "*sub0"
max = "1ns"
lost = "100%"
[[gate]]
case = "timer/*"
stream = "thread0"
missed = "100%"
"#;

fn scenario(dir: &std::path::Path) -> String {
    let f = dir.join("gated.toml");
    std::fs::write(&f, SCENARIO).unwrap();
    f.display().to_string()
}

/// The JUnit file as Python's JUnit-shaped reading sees it: the root, the suites, and per
/// testcase `classname|name|result|message` (result: passed, failure, error, skipped).
fn read_junit(path: &str) -> serde_json::Value {
    let py = r#"
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "testsuites", root.tag
suites = []
for s in root.findall("testsuite"):
    cases = []
    for c in s.findall("testcase"):
        kids = [k for k in c if k.tag in ("failure", "error", "skipped")]
        assert len(kids) <= 1, kids
        result = kids[0].tag if kids else "passed"
        msg = kids[0].get("message") if kids else ""
        float(c.get("time"))
        cases.append({"classname": c.get("classname"), "name": c.get("name"), "result": result, "message": msg, "text": (kids[0].text or "") if kids else ""})
    counts = {k: int(s.get(k)) for k in ("tests", "failures", "errors", "skipped")}
    props = {p.get("name"): p.get("value") for p in s.find("properties")}
    suites.append({"name": s.get("name"), "counts": counts, "props": props, "cases": cases})
print(json.dumps({"root": {k: int(root.get(k)) for k in ("tests", "failures", "errors", "skipped")}, "suites": suites}))
"#;
    let o = std::process::Command::new("python3").args(["-c", py, path]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn a_broken_gate_exits_1_names_it_and_everything_is_stored() {
    let d = tempfile::tempdir().unwrap();
    let f = scenario(d.path());
    let db = d.path().join("r/rtlab.db").display().to_string();
    let junit = d.path().join("junit.xml").display().to_string();
    let o = run(&["run", &f, "--db", &db, "--junit", &junit, "--wait"]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    // one line per broken gate, naming the case, the stream, the limit and the value
    let broken: Vec<&str> = err.lines().filter(|l| l.starts_with("rtlab: gate broken: ")).collect();
    assert_eq!(broken.len(), 1, "{err}");
    let b = broken[0];
    assert!(b.starts_with("rtlab: gate broken: pubsub/idle/no-rt "), "{b}");
    assert!(
        b.contains(".sub0: max ") && b.contains(" > 1ns (gate[0] pubsub/*:*sub0:max<=1ns)"),
        "{b}"
    );
    assert_eq!(
        err.lines().filter(|l| l.starts_with("rtlab: gate")).count(),
        1,
        "only the broken gate is said: {err}"
    );
    assert!(out.contains("gates FAILED: 2 kept, 1 broken"), "{out}");
    assert!(out.contains(&format!("junit: {junit}")), "{out}");
    // the answer first: the run's verdict counts the broken gate against the pub/sub case
    // (whether the timer kept its deadlines is this machine's to say), and a sentence to act on
    let verdict =
        out.lines().find(|l| l.starts_with("verdict: ")).unwrap_or_else(|| panic!("{out}"));
    assert!(!verdict.contains("kept every deadline and lost nothing"), "{verdict}");
    assert!(out.lines().any(|l| l.starts_with("so: ") && l.len() > 10), "{out}");
    let report = stdout(&run(&["report", "--db", &db]));
    assert!(report.lines().any(|l| l.starts_with("Verdict: ")), "{report}");
    let head = report.lines().find(|l| l.starts_with("== Case ") && l.contains(": pubsub/"));
    let head = head.unwrap_or_else(|| panic!("{report}"));
    assert!(head.ends_with("gate broken]"), "{head}");

    // everything measured is stored, with the verdicts
    let o = run(&["export", "latest", "--format", "json", "--db", &db, "-o", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["status"], "complete");
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    assert!(cases.iter().all(|c| c["status"]["status"] == "ok"), "{cases:?}");
    let gates = v["gates"].as_array().unwrap();
    let outcomes: Vec<(&str, &str)> = gates
        .iter()
        .map(|g| (g["gate"].as_str().unwrap(), g["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("pubsub/*:*sub0:max<=1ns", "broken"),
            ("pubsub/*:*sub0:lost<=100%", "kept"),
            ("timer/*:thread0:missed<=100%", "kept")
        ]
    );
    assert!(gates[1]["value"].as_str().unwrap().ends_with('%'), "a ratio: {}", gates[1]);

    // the terminal report and the HTML report show the gates and their verdicts
    let o = run(&["report", "--db", &db]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rep = stdout(&o);
    assert!(rep.contains("Gates (2 kept, 1 broken)"), "{rep}");
    assert_eq!(
        rep.lines()
            .filter(|l| l.starts_with("BROKEN ") && l.contains(" gate[0] pubsub/*:*sub0:max<=1ns "))
            .count(),
        1,
        "{rep}"
    );
    assert_eq!(rep.lines().filter(|l| l.starts_with("KEPT ")).count(), 2, "{rep}");
    let html_path = out.lines().find_map(|l| l.strip_prefix("report: ")).unwrap();
    let html = std::fs::read_to_string(html_path).unwrap();
    assert!(html.contains("<h2>Gates (2 kept, 1 broken)</h2>"), "the run's own report");
    assert_eq!(html.matches("<tr class=\"broken\">").count(), 1);

    // JUnit: one suite; a testcase per case x gate; the failure with the limit and the value
    let j = read_junit(&junit);
    assert_eq!(
        j["root"],
        serde_json::json!({"tests": 3, "failures": 1, "errors": 0, "skipped": 0})
    );
    let s = &j["suites"][0];
    assert_eq!(j["suites"].as_array().unwrap().len(), 1);
    assert_eq!(s["counts"], j["root"]);
    assert_eq!(s["props"]["scenario"], "gated");
    assert!(s["name"].as_str().unwrap().starts_with("rtlab run 1 (gated)"), "{s}");
    let tc = s["cases"].as_array().unwrap();
    let names: Vec<(&str, &str, &str)> = tc
        .iter()
        .map(|c| {
            (
                c["classname"].as_str().unwrap(),
                c["name"].as_str().unwrap(),
                c["result"].as_str().unwrap(),
            )
        })
        .collect();
    let pubsub = cases[0]["name"].as_str().unwrap();
    let timer = cases[1]["name"].as_str().unwrap();
    assert_eq!(
        names,
        [
            (pubsub, "gate[0] pubsub/*:*sub0:max<=1ns", "failure"),
            (pubsub, "gate[0] pubsub/*:*sub0:lost<=100%", "passed"),
            (timer, "gate[1] timer/*:thread0:missed<=100%", "passed"),
        ]
    );
    let m = tc[0]["message"].as_str().unwrap();
    assert!(
        m.contains("limit max 1ns") && m.contains(".sub0: max ") && m.contains(" > 1ns"),
        "{m}"
    );
}

#[test]
fn kept_gates_exit_0_and_gates_left_out_by_only_are_said() {
    let d = tempfile::tempdir().unwrap();
    let f = scenario(d.path());
    let db = d.path().join("rtlab.db").display().to_string();
    let junit = d.path().join("j.xml").display().to_string();
    // --only leaves the pubsub case out: its gates match no case of this run
    let o = run(&[
        "run",
        &f,
        "--db",
        &db,
        "--only",
        "timer/*",
        "--gate",
        "timer/*:thread0:lost<=0",
        "--gate",
        "timer/idle/no-rt:thread0:missed<=100%",
        "--junit",
        &junit,
        "--wait",
    ]);
    let (out, err) = (stdout(&o), stderr(&o));
    // a timer thread counts no losses: that --gate matches no stream with a value, said
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("rtlab: gate")).collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(lines[0].starts_with("rtlab: gate no_case: no case of this run matches 'pubsub/*' (gate[0] pubsub/*:*sub0:max<=1ns)"), "{err}");
    assert!(lines[1].starts_with("rtlab: gate no_case: "), "{err}");
    assert!(
        lines[2].starts_with("rtlab: gate unmatched: no stream of the 1 measured case(s) matching 'timer/*' matches 'thread0' with a lost value (streams: thread0"),
        "{err}"
    );
    assert!(out.contains("gates FAILED: 2 kept, 1 unmatched, 2 no_case"), "{out}");
    let j = read_junit(&junit);
    assert_eq!(
        j["root"],
        serde_json::json!({"tests": 5, "failures": 1, "errors": 0, "skipped": 2})
    );
    let tc = j["suites"][0]["cases"].as_array().unwrap();
    let unmatched =
        tc.iter().find(|c| c["classname"] == "gates" && c["result"] == "failure").unwrap();
    assert_eq!(unmatched["name"], "--gate timer/*:thread0:lost<=0");

    // the same without the unmatched gate, quiet: exit 0, only the notices on stderr
    let o = run(&["run", &f, "--db", &db, "--only", "timer/*", "-q", "--wait"]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert_eq!(err.lines().filter(|l| l.starts_with("rtlab: gate no_case")).count(), 2, "{err}");
    assert_eq!(out.lines().count(), 1, "quiet: the report's path only: {out}");
    // and not quiet: the tally says the gates passed
    let o = run(&["run", &f, "--db", &db, "--only", "timer/*", "--wait"]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("gates passed: 1 kept, 2 no_case"), "{out}");
    let o = run(&["runs", "--db", &db, "--json"]);
    let runs: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 3);
}

#[test]
fn gate_flag_errors_are_one_line_exit_2_and_nothing_runs() {
    let d = tempfile::tempdir().unwrap();
    let f = scenario(d.path());
    let db = d.path().join("x.db").display().to_string();
    for (gate, says) in [
        ("max<=1ms", "--gate max<=1ms: expected CASE:STREAM:METRIC<=VALUE"),
        ("timer/*:thread0:max>=1ms", "has no '<='"),
        ("timer/*:thread0:p99<=1ms", "unknown metric 'p99' (accepted: p99_9, max, missed, lost)"),
        ("timer/*:thread0:max<=soon", "invalid duration 'soon'"),
        ("timer/*:thread0:lost<=many", "'many' is not a count or a percentage"),
        ("udp/*:*:max<=1ms", "--gate udp/*:*:max<=1ms: 'udp/*' matches no case of gated to run"),
        ("timer:*:max<=1ms", "'timer' matches no case"),
    ] {
        assert_error(&["run", &f, "--db", &db, "--gate", gate], &[says]);
    }
    // a bad [[gate]] in the file: the file, the table and the key
    let bad = d.path().join("bad.toml");
    std::fs::write(&bad, SCENARIO.replace("missed = \"100%\"", "missed = \"all\"")).unwrap();
    let bad = bad.display().to_string();
    assert_error(
        &["run", &bad, "--db", &db],
        &[&format!("{bad}:19: gate[1].missed: 'all' is not a count")],
    );
    let nowhere = d.path().join("no/such/dir/j.xml").display().to_string();
    assert_error(&["run", &f, "--db", &db, "--junit", &nowhere], &["--junit ", "does not exist"]);
    assert!(!std::path::Path::new(&db).exists(), "nothing was measured or stored");
    // --dry-run lists the gates it would judge
    let o = run(&["run", &f, "--dry-run", "--gate", "*:*:p99.9<=2ms"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    for g in [
        "gate gate[0] pubsub/*:*sub0:max<=1ns",
        "gate gate[1] timer/*:thread0:missed<=100%",
        "gate --gate *:*:p99_9<=2ms",
    ] {
        assert!(out.contains(g), "{g}: {out}");
    }
}

/// A run stopped by Ctrl-C in its first case: its cases are not judged (skipped, exit 0);
/// resumed, the gates are judged again over every case and the stored verdicts replaced.
#[test]
fn a_resumed_run_is_judged_again_over_all_its_cases() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("r.toml");
    std::fs::write(
        &f,
        "name = \"r\"\nduration = \"2s\"\n[[probe]]\nkind = \"timer\"\ninterval = [\"1ms\", \"2ms\"]\npolicy = \"other\"\n[[gate]]\ncase = \"timer/*\"\nstream = \"thread0\"\nmax = \"1ns\"\n",
    )
    .unwrap();
    let (f, db) = (f.display().to_string(), d.path().join("rtlab.db").display().to_string());
    let (rest, code) = run_interrupted(&["run", &f, "--db", &db, "--wait"], "rtlab run r:");
    assert_eq!(code, Some(0), "{rest}");
    assert!(rest.contains("gates passed: 2 skipped"), "{rest}");
    let store = || rtlab_store::Store::open(&db).unwrap();
    let id = store().latest_run().unwrap();
    let skipped: Vec<_> =
        store().gate_verdicts(id).unwrap().iter().map(|v| v.message.clone()).collect();
    assert_eq!(skipped, ["the case was interrupted", "not run"]);

    let o = run(&["run", "--resume", &id.to_string(), "--db", &db, "--wait"]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert_eq!(
        err.lines()
            .filter(|l| l.starts_with("rtlab: gate broken: timer/idle/no-rt/interval="))
            .count(),
        2,
        "{err}"
    );
    let v = store().gate_verdicts(id).unwrap();
    assert_eq!(v.len(), 2, "replaced, not added: {v:?}");
    assert!(v.iter().all(|v| v.outcome == rtlab_core::gate::Outcome::Broken), "{v:?}");
}
