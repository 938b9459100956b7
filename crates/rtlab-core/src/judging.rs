//! Judging a run's cases by its gates: every gate's verdict on every case and stream it
//! names, and on the cases that measured nothing (failed, hung, skipped, interrupted, not run).

use crate::gate::{Gate, GateVerdict, Outcome};
use crate::run::{CaseRecord, CaseStatus};

/// Every gate's verdicts over a run's cases (in gate order, then case order, then stream
/// order). `planned` names every case the run was to measure: a planned case with no record
/// is skipped ("not run").
pub fn evaluate(gates: &[Gate], cases: &[CaseRecord], planned: &[String]) -> Vec<GateVerdict> {
    let mut out = Vec::new();
    for g in gates {
        let verdict =
            |case: Option<&str>, stream: Option<&str>, outcome, value, message| GateVerdict {
                gate: g.to_string(),
                origin: g.origin.clone(),
                case: case.map(str::to_string),
                stream: stream.map(str::to_string),
                metric: g.metric,
                limit: g.limit.to_string(),
                value,
                outcome,
                message,
            };
        let mut names: Vec<&str> =
            cases.iter().map(|c| c.name.as_str()).filter(|n| g.matches_case(n)).collect();
        for p in planned {
            if g.matches_case(p) && !names.contains(&p.as_str()) {
                names.push(p);
            }
        }
        if names.is_empty() {
            out.push(verdict(
                None,
                None,
                Outcome::NoCase,
                None,
                format!("no case of this run matches '{}'", g.case),
            ));
            continue;
        }
        let (mut measured, mut checked, mut seen) = (0, 0, Vec::<String>::new());
        for name in names {
            let Some(c) = cases.iter().find(|c| c.name == name) else {
                out.push(verdict(Some(name), None, Outcome::Skipped, None, "not run".into()));
                continue;
            };
            match &c.status {
                CaseStatus::Failed { error } => out.push(verdict(
                    Some(name),
                    None,
                    Outcome::Failed,
                    None,
                    format!("the case failed: {error}"),
                )),
                CaseStatus::Hung { error } => out.push(verdict(
                    Some(name),
                    None,
                    Outcome::Failed,
                    None,
                    format!("the case hung: {error}"),
                )),
                CaseStatus::Skipped { reason } => out.push(verdict(
                    Some(name),
                    None,
                    Outcome::Skipped,
                    None,
                    format!("the case was skipped: {reason}"),
                )),
                CaseStatus::Interrupted => out.push(verdict(
                    Some(name),
                    None,
                    Outcome::Skipped,
                    None,
                    "the case was interrupted".into(),
                )),
                CaseStatus::Ok => {
                    measured += 1;
                    for s in c.document.iter().flat_map(|d| &d.streams) {
                        if !seen.contains(&s.name) {
                            seen.push(s.name.clone());
                        }
                        if !g.matches_stream(&s.name) {
                            continue;
                        }
                        if let Some((value, kept)) = g.check(s) {
                            checked += 1;
                            let o = if kept { Outcome::Kept } else { Outcome::Broken };
                            out.push(verdict(
                                Some(name),
                                Some(&s.name),
                                o,
                                Some(value),
                                String::new(),
                            ));
                        }
                    }
                }
            }
        }
        if measured > 0 && checked == 0 {
            out.push(verdict(
                None,
                None,
                Outcome::Unmatched,
                None,
                format!(
                    "no stream of the {measured} measured case(s) matching '{}' matches '{}' with a {} value (streams: {})",
                    g.case,
                    g.stream,
                    g.metric.name(),
                    seen.join(", ")
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str, status: CaseStatus) -> CaseRecord {
        CaseRecord {
            index: 0,
            name: name.into(),
            probe: "timer".into(),
            load: "idle".into(),
            profile: "no-rt".into(),
            params: Default::default(),
            repetition: 1,
            status,
            document: None,
            load_report: None,
            profile_report: None,
            spike_evidence: None,
            published: None,
            started_at: String::new(),
            duration_ns: 0,
        }
    }

    #[test]
    fn cases_that_measured_nothing_and_gates_that_match_no_case() {
        let cases = [
            case("a/failed", CaseStatus::Failed { error: "boom".into() }),
            case("a/skipped", CaseStatus::Skipped { reason: "no qdisc".into() }),
            case("a/interrupted", CaseStatus::Interrupted),
        ];
        let planned: Vec<String> =
            ["a/failed", "a/skipped", "a/interrupted", "a/not-run"].map(String::from).to_vec();
        let gates = [
            Gate::parse_flag("a/*:*:max<=1ms").unwrap(),
            Gate::parse_flag("b:*:max<=1ms").unwrap(),
        ];
        let v = evaluate(&gates, &cases, &planned);
        let got: Vec<(Option<&str>, Outcome, &str)> =
            v.iter().map(|v| (v.case.as_deref(), v.outcome, v.message.as_str())).collect();
        assert_eq!(
            got,
            [
                (Some("a/failed"), Outcome::Failed, "the case failed: boom"),
                (Some("a/skipped"), Outcome::Skipped, "the case was skipped: no qdisc"),
                (Some("a/interrupted"), Outcome::Skipped, "the case was interrupted"),
                (Some("a/not-run"), Outcome::Skipped, "not run"),
                (None, Outcome::NoCase, "no case of this run matches 'b'"),
            ]
        );
        assert!(v[0].outcome.fails() && !v[1].outcome.fails() && !v[4].outcome.fails());
        assert_eq!(
            v[0].line(),
            "gate failed: a/failed: the case failed: boom (--gate a/*:*:max<=1ms)"
        );
        for o in [Outcome::Kept, Outcome::Broken, Outcome::Unmatched, Outcome::NoCase] {
            assert_eq!(Outcome::parse(o.name()), Some(o));
        }
    }
}
