//! A run as JUnit XML, the test report CI systems show: one `<testsuite>` per run, one
//! `<testcase>` per case and gate (classname = the case, name = the gate), and one per case
//! no gate names (name `measured`); a broken gate is a `<failure>` with the limit and the
//! value of every stream that broke it, a failed case an `<error>`, a skipped case
//! `<skipped>`; a gate that matched no stream is a failed testcase of classname `gates`.
//!
//! Contract: well-formed XML 1.0 whatever the names and messages hold (every text escaped,
//! characters XML cannot carry replaced); the counts on `<testsuites>` and `<testsuite>`
//! are those of the testcases written. Pure: returns the text.

use rtlab_core::gate::{GateVerdict, Outcome};
use rtlab_core::run::{CaseStatus, Run};
use std::fmt::Write as _;

/// Text for an XML attribute or element: escaped, and the characters XML 1.0 cannot hold
/// (controls other than tab, newline, carriage return) replaced by U+FFFD.
pub fn xml_esc(s: &str) -> String {
    let held: String = s
        .chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => c,
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => '\u{FFFD}',
            c => c,
        })
        .collect();
    crate::svg::esc(&held)
}

enum Result_ {
    Pass,
    Failure { message: String, body: String },
    Error { message: String },
    Skipped { message: String },
}

struct TestCase {
    classname: String,
    name: String,
    seconds: f64,
    result: Result_,
}

/// The testcases of a run, in case order (then the gates that matched no stream or case).
fn testcases(run: &Run) -> Vec<TestCase> {
    let mut out = Vec::new();
    for c in &run.cases {
        let seconds = c.duration_ns as f64 / 1e9;
        // this case's verdicts, grouped by gate in the order they were stored
        let mut groups: Vec<(String, Vec<&GateVerdict>)> = Vec::new();
        for v in run.gates.iter().filter(|v| v.case.as_deref() == Some(c.name.as_str())) {
            let key = format!("{} {}", v.origin, v.gate);
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, g)) => g.push(v),
                None => groups.push((key, vec![v])),
            }
        }
        if groups.is_empty() {
            let result = match &c.status {
                CaseStatus::Ok => Result_::Pass,
                CaseStatus::Failed { error } => {
                    Result_::Error { message: format!("the case failed: {error}") }
                }
                CaseStatus::Skipped { reason } => Result_::Skipped { message: reason.clone() },
                CaseStatus::Interrupted => {
                    Result_::Skipped { message: "the case was interrupted".into() }
                }
                CaseStatus::Hung { error } => {
                    Result_::Error { message: format!("the case hung: {error}") }
                }
            };
            out.push(TestCase {
                classname: c.name.clone(),
                name: "measured".into(),
                seconds,
                result,
            });
            continue;
        }
        for (name, vs) in groups {
            let broken: Vec<&&GateVerdict> =
                vs.iter().filter(|v| v.outcome == Outcome::Broken).collect();
            let first = vs[0];
            let result = if !broken.is_empty() {
                let lines: Vec<String> = broken
                    .iter()
                    .map(|v| {
                        format!(
                            "{}: {} {} > {}",
                            v.stream.as_deref().unwrap_or("-"),
                            v.metric.name(),
                            v.value.as_deref().unwrap_or("-"),
                            v.limit
                        )
                    })
                    .collect();
                Result_::Failure {
                    message: format!(
                        "{} (limit {} {}) broken: {}",
                        first.gate,
                        first.metric.name(),
                        first.limit,
                        lines.join("; ")
                    ),
                    body: lines.join("\n"),
                }
            } else if first.outcome == Outcome::Failed {
                Result_::Error { message: first.message.clone() }
            } else if first.outcome == Outcome::Skipped {
                Result_::Skipped { message: first.message.clone() }
            } else {
                Result_::Pass
            };
            out.push(TestCase { classname: c.name.clone(), name, seconds, result });
        }
    }
    // verdicts on no case of the run: not run, or no stream matched, or no case matched
    for v in run.gates.iter() {
        let name = format!("{} {}", v.origin, v.gate);
        let result = match (v.outcome, &v.case) {
            (Outcome::Unmatched, _) => {
                Result_::Failure { message: v.message.clone(), body: v.message.clone() }
            }
            (Outcome::NoCase, _) => Result_::Skipped { message: v.message.clone() },
            (Outcome::Skipped, Some(case)) if !run.cases.iter().any(|c| &c.name == case) => {
                out.push(TestCase {
                    classname: case.clone(),
                    name,
                    seconds: 0.0,
                    result: Result_::Skipped { message: v.message.clone() },
                });
                continue;
            }
            _ => continue,
        };
        out.push(TestCase { classname: "gates".into(), name, seconds: 0.0, result });
    }
    out
}

/// The run as a JUnit XML document.
pub fn junit(run: &Run) -> String {
    let cases = testcases(run);
    let count = |f: fn(&Result_) -> bool| cases.iter().filter(|c| f(&c.result)).count();
    let failures = count(|r| matches!(r, Result_::Failure { .. }));
    let errors = count(|r| matches!(r, Result_::Error { .. }));
    let skipped = count(|r| matches!(r, Result_::Skipped { .. }));
    let seconds: f64 = run.cases.iter().map(|c| c.duration_ns as f64 / 1e9).sum();
    let counts = format!(
        "tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{seconds:.3}\"",
        cases.len()
    );
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(o, "<testsuites name=\"rtlab\" {counts}>");
    let i = &run.info;
    let _ = writeln!(
        o,
        "  <testsuite name=\"{}\" {counts} timestamp=\"{}\" hostname=\"{}\">",
        xml_esc(&format!("rtlab run {} ({})", run.id, i.scenario)),
        xml_esc(&i.started_at),
        xml_esc(&i.environment.hostname)
    );
    o.push_str("    <properties>\n");
    for (k, v) in [
        ("run", run.id.to_string()),
        ("scenario", i.scenario.clone()),
        ("status", run.status.name().to_string()),
        ("kernel", i.environment.kernel_release.clone()),
        ("command", i.command_line.join(" ")),
    ] {
        let _ = writeln!(o, "      <property name=\"{k}\" value=\"{}\"/>", xml_esc(&v));
    }
    o.push_str("    </properties>\n");
    for c in &cases {
        let head = format!(
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            xml_esc(&c.classname),
            xml_esc(&c.name),
            c.seconds
        );
        match &c.result {
            Result_::Pass => {
                let _ = writeln!(o, "{head}/>");
            }
            Result_::Failure { message, body } => {
                let _ = writeln!(
                    o,
                    "{head}>\n      <failure type=\"gate\" message=\"{}\">{}</failure>\n    </testcase>",
                    xml_esc(message),
                    xml_esc(body)
                );
            }
            Result_::Error { message } => {
                let _ = writeln!(
                    o,
                    "{head}>\n      <error type=\"case failed\" message=\"{}\"/>\n    </testcase>",
                    xml_esc(message)
                );
            }
            Result_::Skipped { message } => {
                let _ = writeln!(
                    o,
                    "{head}>\n      <skipped message=\"{}\"/>\n    </testcase>",
                    xml_esc(message)
                );
            }
        }
    }
    o.push_str("  </testsuite>\n</testsuites>\n");
    o
}
