//! The answer first: a verdict on every case (kept its deadlines, missed N of M, lost N of M,
//! broke a gate, not measured), the run's verdict in one line, and "what helps": for every
//! probe x load measured under several profiles, which profile kept where another missed,
//! then one sentence a person can act on.
//!
//! Definitions (also in docs/reports.md):
//! - the judged streams of a case are those with a deadline count (`missed`): its `all`
//!   stream when it has one with a count (the threads together), else each such stream
//!   (subscribers, payloads); send lateness, jitter and turnaround streams are not judged;
//! - a deadline is missed by a sample above it, by a period whose send the probe skipped
//!   because it woke a whole period late (an overrun), and by a message that came after the
//!   loss timeout (late); the periods are samples + overruns + late + lost;
//! - a case kept its deadlines when nothing was missed, nothing lost and none of its gates
//!   broken; a case whose streams have no deadline (noise) is measured, not judged.
//!
//! Contract: pure, deterministic for a given run; every case gets a verdict.

use crate::model::case_axes;
use rtlab_core::gate::GateVerdict;
use rtlab_core::run::{CaseRecord, CaseStatus, Run};
use rtlab_core::schema::Stream;
use rtlab_core::units::us_1;

/// What a case's verdict says, worst first where several apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Every deadline kept, nothing lost, no gate broken.
    Kept,
    /// Deadlines missed (and perhaps messages lost).
    Missed,
    /// Nothing missed, but messages or packets lost.
    Lost,
    /// Deadlines and losses as they should be, but a gate of the run broken.
    GateBroken,
    /// Measured, but nothing in it has a deadline (noise).
    Unjudged,
    /// Failed, skipped, hung or interrupted: nothing to judge.
    NotMeasured,
}

/// One case's verdict.
#[derive(Clone, Debug)]
pub struct CaseVerdict<'a> {
    pub case: &'a CaseRecord,
    pub kind: Kind,
    /// Deadlines missed: samples above the deadline + overruns + late.
    pub missed: u64,
    /// Periods judged: samples + overruns + late + lost.
    pub periods: u64,
    pub lost: u64,
    /// What was sent (samples + late + lost) where the probe counts losses, else 0.
    pub sent: u64,
    /// The largest sample of the judged streams and the deadline it was held to.
    pub max_ns: Option<i64>,
    pub deadline_ns: Option<i64>,
    /// The case's gate verdicts that fail the run.
    pub gates_broken: usize,
}

impl CaseVerdict<'_> {
    /// `kept`, `missed 6/987`, `lost 3/600`, `missed 6/987, lost 3/600`, `gate broken`,
    /// `measured` (no deadline), or the case's status (`skipped`, `failed` ...).
    pub fn word(&self) -> String {
        let mut w = match self.kind {
            Kind::Kept => "kept".to_string(),
            Kind::Missed | Kind::Lost | Kind::GateBroken => {
                let mut parts = Vec::new();
                if self.missed > 0 {
                    parts.push(format!("missed {}/{}", self.missed, self.periods));
                }
                if self.lost > 0 {
                    parts.push(format!("lost {}/{}", self.lost, self.sent));
                }
                parts.join(", ")
            }
            Kind::Unjudged => "measured".to_string(),
            Kind::NotMeasured => crate::model::status(self.case).0.to_string(),
        };
        if self.gates_broken > 0 {
            if !w.is_empty() {
                w.push_str(", ");
            }
            w.push_str(if self.gates_broken == 1 { "gate broken" } else { "gates broken" });
        }
        w
    }

    /// The CSS class and terminal tone of the verdict: `kept`, `missed`, `none`.
    pub fn tone(&self) -> &'static str {
        match self.kind {
            Kind::Kept => "kept",
            Kind::Missed | Kind::Lost | Kind::GateBroken => "missed",
            Kind::Unjudged | Kind::NotMeasured => "none",
        }
    }

    /// Judged and something missed, lost or broken.
    pub fn failed(&self) -> bool {
        self.tone() == "missed"
    }
}

/// The streams of a document that carry a deadline count (see the module's definitions).
pub fn judged_streams(c: &CaseRecord) -> Vec<&Stream> {
    let Some(d) = &c.document else { return Vec::new() };
    let counted: Vec<&Stream> = d.streams.iter().filter(|s| s.stats.missed.is_some()).collect();
    match counted.iter().find(|s| s.name == "all") {
        Some(all) => vec![*all],
        None => counted,
    }
}

/// The verdict of case `c` under the run's gate verdicts `gates`.
pub fn case_verdict<'a>(c: &'a CaseRecord, gates: &[GateVerdict]) -> CaseVerdict<'a> {
    let gates_broken =
        gates.iter().filter(|g| g.case.as_deref() == Some(&c.name) && g.outcome.fails()).count();
    let mut v = CaseVerdict {
        case: c,
        kind: Kind::NotMeasured,
        missed: 0,
        periods: 0,
        lost: 0,
        sent: 0,
        max_ns: None,
        deadline_ns: None,
        gates_broken,
    };
    if !matches!(c.status, CaseStatus::Ok) {
        return v;
    }
    let streams = judged_streams(c);
    if streams.is_empty() {
        v.kind = if gates_broken > 0 { Kind::GateBroken } else { Kind::Unjudged };
        return v;
    }
    for s in streams {
        let st = &s.stats;
        let (overruns, late, lost) =
            (st.overruns.unwrap_or(0), st.late.unwrap_or(0), st.lost.unwrap_or(0));
        v.missed += st.missed.unwrap_or(0) + overruns + late;
        v.periods += st.count + overruns + late + lost;
        v.lost += lost;
        if st.lost.is_some() {
            v.sent += st.count + late + lost;
        }
        v.max_ns = v.max_ns.max(st.max_ns);
        v.deadline_ns = Some(v.deadline_ns.map_or(s.deadline_ns, |d| d.min(s.deadline_ns)));
    }
    v.kind = if v.missed > 0 {
        Kind::Missed
    } else if v.lost > 0 {
        Kind::Lost
    } else if gates_broken > 0 {
        Kind::GateBroken
    } else {
        Kind::Kept
    };
    v
}

/// One probe x load (x parameters) measured under several profiles: each profile's verdict
/// (its repetitions summed).
#[derive(Debug)]
pub struct Comparison<'a> {
    /// The case's name without its profile: `timer/cpu`, `pubsub/idle/transport=shm`.
    pub label: String,
    /// (profile, verdicts of its cases), in the run's order.
    pub profiles: Vec<(String, Vec<CaseVerdict<'a>>)>,
}

impl Comparison<'_> {
    /// Whether every case of `profile` here kept its deadlines (None: not measured here).
    pub fn kept_by(&self, profile: &str) -> Option<bool> {
        let (_, vs) = self.profiles.iter().find(|(p, _)| p == profile)?;
        let judged: Vec<&CaseVerdict> = vs.iter().filter(|v| v.tone() != "none").collect();
        (!judged.is_empty()).then(|| judged.iter().all(|v| v.kind == Kind::Kept))
    }

    /// `no-rt missed 6/987`, `rt-affinities kept` ... in the run's order.
    pub fn line(&self) -> String {
        let each: Vec<String> =
            self.profiles.iter().map(|(p, vs)| format!("{p} {}", summed_word(vs))).collect();
        format!("{}: {}", self.label, each.join("; "))
    }
}

/// The verdict of several cases (repetitions of one probe x load x profile) summed: the
/// counts added, the worst kind kept (None: no case).
pub fn summed<'a>(vs: &[CaseVerdict<'a>]) -> Option<CaseVerdict<'a>> {
    let mut sum = vs.first()?.clone();
    for v in &vs[1..] {
        sum.missed += v.missed;
        sum.periods += v.periods;
        sum.lost += v.lost;
        sum.sent += v.sent;
        sum.gates_broken += v.gates_broken;
        sum.max_ns = sum.max_ns.max(v.max_ns);
        if v.failed() && !sum.failed() || sum.tone() == "none" {
            sum.kind = v.kind;
        }
    }
    Some(sum)
}

/// [`summed`]'s word, with the largest sample where something was missed.
fn summed_word(vs: &[CaseVerdict<'_>]) -> String {
    let Some(sum) = summed(vs) else { return String::new() };
    let mut w = sum.word();
    if let (true, Some(m)) = (sum.failed(), sum.max_ns) {
        w.push_str(&format!(" (max {} us)", us_1(m)));
    }
    w
}

/// A run judged: every case's verdict, the comparisons across profiles, the sentences.
pub struct RunVerdict<'a> {
    pub cases: Vec<CaseVerdict<'a>>,
    pub comparisons: Vec<Comparison<'a>>,
    /// The profiles of the run in its order.
    pub profiles: Vec<String>,
}

/// Judge `run` (its stored gate verdicts included).
pub fn run_verdict(run: &Run) -> RunVerdict<'_> {
    judge(run, &run.gates)
}

/// Judge `run` under the gate verdicts `gates` (a run that has just ended, before the
/// store gave them back).
pub fn judge<'a>(run: &'a Run, gates: &[GateVerdict]) -> RunVerdict<'a> {
    let cases: Vec<CaseVerdict<'a>> = run.cases.iter().map(|c| case_verdict(c, gates)).collect();
    let mut profiles: Vec<String> = Vec::new();
    let mut groups: Vec<Comparison<'a>> = Vec::new();
    for v in cases.iter().filter(|v| v.tone() != "none") {
        let c = v.case;
        if !profiles.contains(&c.profile) {
            profiles.push(c.profile.clone());
        }
        let axes = case_axes(c);
        let label = if axes.is_empty() {
            format!("{}/{}", c.probe, c.load)
        } else {
            format!("{}/{}/{axes}", c.probe, c.load)
        };
        let g = match groups.iter_mut().position(|g| g.label == label) {
            Some(i) => &mut groups[i],
            None => {
                groups.push(Comparison { label, profiles: Vec::new() });
                groups.last_mut().expect("pushed")
            }
        };
        match g.profiles.iter_mut().find(|(p, _)| *p == c.profile) {
            Some((_, vs)) => vs.push(v.clone()),
            None => g.profiles.push((c.profile.clone(), vec![v.clone()])),
        }
    }
    let comparisons = groups.into_iter().filter(|g| g.profiles.len() >= 2).collect();
    RunVerdict { cases, comparisons, profiles }
}

impl RunVerdict<'_> {
    fn count(&self, f: impl Fn(&CaseVerdict) -> bool) -> usize {
        self.cases.iter().filter(|v| f(v)).count()
    }

    /// The run's tone (as a case's): `missed` when a case failed, `kept` when one kept and
    /// none failed, else `none`.
    pub fn tone(&self) -> &'static str {
        summed(&self.cases).map_or("none", |s| s.tone())
    }

    /// Whether a case missed a deadline, lost a message or broke a gate.
    pub fn failed(&self) -> bool {
        self.cases.iter().any(CaseVerdict::failed)
    }

    /// The run's verdict in one line: `9 of 14 cases kept every deadline; 4 missed (the
    /// worst: CASE, missed 11/982, max 4126.4 us); 1 not measured`.
    pub fn headline(&self) -> String {
        let judged = self.count(|v| v.tone() != "none");
        let kept = self.count(|v| v.kind == Kind::Kept);
        let mut parts = vec![if judged == 0 {
            "no case had a deadline to keep".to_string()
        } else if kept == judged {
            format!(
                "{} every deadline and lost nothing",
                if judged == 1 {
                    "the case kept".to_string()
                } else {
                    format!("all {judged} cases kept")
                }
            )
        } else {
            format!("{kept} of {judged} cases kept every deadline")
        }];
        let mut say = |n: usize, what: &str| {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        };
        let worst = self
            .cases
            .iter()
            .filter(|v| v.kind == Kind::Missed)
            .max_by(|a, b| rate(a.missed, a.periods).total_cmp(&rate(b.missed, b.periods)));
        let missed = self.count(|v| v.kind == Kind::Missed);
        if let Some(w) = worst {
            say(
                missed,
                &format!(
                    "missed deadlines (the most: {}, {}{})",
                    w.case.name,
                    w.word(),
                    w.max_ns.map(|m| format!(", max {} us", us_1(m))).unwrap_or_default()
                ),
            );
        }
        say(self.count(|v| v.kind == Kind::Lost), "lost messages but missed no deadline");
        say(self.count(|v| v.kind == Kind::GateBroken), "kept their deadlines but broke a gate");
        say(self.count(|v| v.kind == Kind::Unjudged), "measured without a deadline");
        say(self.count(|v| v.kind == Kind::NotMeasured), "not measured");
        parts.join("; ")
    }

    /// Per comparison across profiles, one line: `timer/cpu: no-rt missed 11/982 (max
    /// 4126.4 us); rt-affinities kept`.
    pub fn helps_lines(&self) -> Vec<String> {
        self.comparisons.iter().map(Comparison::line).collect()
    }

    /// One sentence a person can act on.
    pub fn remedy(&self) -> String {
        let failing: Vec<&Comparison> = self
            .comparisons
            .iter()
            .filter(|c| c.profiles.iter().any(|(p, _)| c.kept_by(p) == Some(false)))
            .collect();
        let missed_alone: Vec<&CaseVerdict> = self
            .cases
            .iter()
            .filter(|v| v.failed())
            .filter(|v| {
                !self.comparisons.iter().any(|c| {
                    c.profiles.iter().any(|(_, vs)| vs.iter().any(|x| x.case.index == v.case.index))
                })
            })
            .collect();
        if !self.failed() {
            let judged = self.count(|v| v.tone() != "none");
            if judged == 0 {
                return "nothing to act on: no case had a deadline (see the figures)".into();
            }
            return match self.profiles.as_slice() {
                [one] => format!(
                    "this machine kept every deadline under profile {one} and these loads; a longer run (--scale) catches rarer events"
                ),
                _ => format!(
                    "every profile kept every deadline here ({}): the lightest is enough for these loads; a longer run (--scale) catches rarer events",
                    self.profiles.join(", ")
                ),
            };
        }
        // a profile that kept wherever another missed and was measured there
        let cures: Vec<&String> = self
            .profiles
            .iter()
            .filter(|p| !failing.is_empty() && failing.iter().all(|c| c.kept_by(p) == Some(true)))
            .collect();
        let mut s = match (cures.first(), failing.is_empty()) {
            (Some(p), _) => format!(
                "profile {p} kept every deadline where {} {} ({}): `rtlab tune apply {p} --dry-run` shows what it sets",
                others_that_missed(&failing, p).join(", "),
                failed_how(&failing, p),
                failing.iter().map(|c| c.label.as_str()).collect::<Vec<_>>().join("; ")
            ),
            (None, false) => {
                let unkept: Vec<&str> = failing
                    .iter()
                    .filter(|c| !c.profiles.iter().any(|(p, _)| c.kept_by(p) == Some(true)))
                    .map(|c| c.label.as_str())
                    .collect();
                let partly: Vec<String> = failing
                    .iter()
                    .filter_map(|c| {
                        let kept: Vec<&str> = c
                            .profiles
                            .iter()
                            .filter(|(p, _)| c.kept_by(p) == Some(true))
                            .map(|(p, _)| p.as_str())
                            .collect();
                        (!kept.is_empty()).then(|| format!("{}: {}", c.label, kept.join(", ")))
                    })
                    .collect();
                let mut s = String::new();
                if !unkept.is_empty() {
                    s.push_str(&format!(
                        "no profile kept every deadline and every message in {}: read the warnings and the evidence of those cases (the kernel, the machine, the load)",
                        unkept.join("; ")
                    ));
                }
                if !partly.is_empty() {
                    if !s.is_empty() {
                        s.push_str("; ");
                    }
                    s.push_str(&format!("what kept elsewhere: {}", partly.join("; ")));
                }
                s
            }
            (None, true) => String::new(),
        };
        if !missed_alone.is_empty() {
            if !s.is_empty() {
                s.push_str("; ");
            }
            s.push_str(&format!(
                "{} measured under one profile only missed or lost: measure it under others (profiles = [\"no-rt\", \"rt-affinities\", \"rt-isolation\"] in a scenario; the one that keeps it is the answer)",
                if missed_alone.len() == 1 {
                    missed_alone[0].case.name.clone()
                } else {
                    format!("{} cases", missed_alone.len())
                }
            ));
        }
        s
    }
}

fn rate(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        n as f64 / of as f64
    }
}

/// How the profiles other than `cure` failed in `failing`: `missed`, `lost messages`, or
/// `missed or lost`.
fn failed_how(failing: &[&Comparison<'_>], cure: &str) -> &'static str {
    let kinds: Vec<Kind> = failing
        .iter()
        .flat_map(|c| c.profiles.iter().filter(|(p, _)| p != cure))
        .flat_map(|(_, vs)| vs.iter().filter(|v| v.failed()).map(|v| v.kind))
        .collect();
    if kinds.iter().all(|k| *k == Kind::Lost) {
        "lost messages"
    } else if kinds.iter().all(|k| *k == Kind::Missed) {
        "missed"
    } else {
        "missed or lost"
    }
}

/// The profiles other than `cure` that missed in one of `failing`, in order.
fn others_that_missed(failing: &[&Comparison<'_>], cure: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in failing {
        for (p, _) in &c.profiles {
            if p != cure && c.kept_by(p) == Some(false) && !out.contains(p) {
                out.push(p.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
