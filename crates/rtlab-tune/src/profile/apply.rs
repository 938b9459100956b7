//! Applying a plan through a journaled session, step by step, and whether a journaled
//! change is still in force.

use super::catalog::{find, NamedProfile, Profile, ProfileError};
use super::plan::plan;
use super::step::{Step, Target};
use rtlab_host::host::Host;
use rtlab_host::journal::{Change, JournalError};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// Whether a journaled change is still in force (for `rtlab tune show`).
pub fn in_force(host: &dyn Host, c: &Change) -> String {
    match c {
        Change::File { path, new, .. } => match host.read(path) {
            Ok(v) if v.trim() == new.trim() => "in force".into(),
            Ok(v) => format!("changed since: now '{}'", v.trim()),
            Err(_) => "gone".into(),
        },
        Change::Sched { pid, new_policy, new_priority, .. } => match host.sched_get(*pid) {
            Ok((p, pr)) if (p, pr) == (*new_policy, *new_priority) => "in force".into(),
            Ok((p, pr)) => {
                format!("changed since: now {} {pr}", rtlab_host::journal::policy_name(p))
            }
            Err(_) => "task gone".into(),
        },
        Change::Affinity { pid, new_cpus, .. } => match host.affinity_get(*pid) {
            Ok(c) if &c == new_cpus => "in force".into(),
            Ok(c) => format!("changed since: now CPUs {}", rtlab_host::cpu_list(&c)),
            Err(_) => "task gone".into(),
        },
        Change::WriteWithUndo { path, new, .. } => match host.read(path) {
            Ok(v) if rtlab_host::session::control_holds(&v, new) => "in force".into(),
            Ok(v) => format!("changed since: now '{}'", v.trim()),
            Err(_) => "gone".into(),
        },
        Change::MkDir { path, .. } => if host.exists(path) { "exists" } else { "gone" }.into(),
        Change::PmQos { holder_pid, .. } => {
            if rtlab_sys::tasks::pid_alive(*holder_pid) {
                "held".into()
            } else {
                "released (holder exited)".into()
            }
        }
        _ => "recorded".into(),
    }
}

/// What applying one step did.
#[derive(Clone, Debug, Serialize)]
pub struct StepOutcome {
    pub what: String,
    /// `done`, `partial`, `failed` or `skipped`.
    pub status: &'static str,
    /// The alternative kept, the skip reason, outcomes and errors.
    pub detail: Vec<String>,
}

/// Apply one step through the session (journaled); alternatives are tried in order.
pub fn apply_step(s: &mut rtlab_host::session::Session<'_>, step: &Step) -> StepOutcome {
    let mut detail = Vec::new();
    if let Some(why) = &step.skip {
        return StepOutcome {
            what: step.what.clone(),
            status: "skipped",
            detail: vec![why.clone()],
        };
    }
    let mut tried = Vec::new();
    for (label, actions) in &step.alternatives {
        let Some(first) = actions.first() else { continue };
        match s.apply(first) {
            Err(e) => {
                tried.push(if label.is_empty() {
                    e.to_string()
                } else {
                    format!(
                        "{}: {e}",
                        label.split_whitespace().next().unwrap_or(label).trim_end_matches(':')
                    )
                });
                continue;
            }
            Ok(o) => {
                if !label.is_empty() {
                    detail.push(label.clone());
                }
                if !tried.is_empty() {
                    detail.push(format!("not available: {}", tried.join("; ")));
                }
                let mut errors = Vec::new();
                let mut outcomes = vec![o];
                for a in &actions[1..] {
                    match s.apply(a) {
                        Ok(o) => outcomes.push(o),
                        Err(e) => errors.push(e.to_string()),
                    }
                }
                let changed = outcomes.iter().filter(|o| o.as_str() != "already so").count();
                let special: Vec<&String> = outcomes
                    .iter()
                    .filter(|o| !["done", "already so"].contains(&o.as_str()))
                    .collect();
                detail.push(format!(
                    "{changed} of {} changed, {} already so",
                    actions.len(),
                    outcomes.len() - changed
                ));
                detail.extend(special.into_iter().cloned());
                let status = if errors.is_empty() { "done" } else { "partial" };
                if !errors.is_empty() {
                    detail.push(format!(
                        "{} refused: {}",
                        errors.len(),
                        rtlab_host::session::abbreviate(&errors, 4)
                    ));
                }
                if let Some(r) = &step.report {
                    detail.push(r.run(s.host()));
                }
                return StepOutcome { what: step.what.clone(), status, detail };
            }
        }
    }
    StepOutcome { what: step.what.clone(), status: "failed", detail: tried }
}

/// Apply a profile for a probe or scenario: plan it on `host`, apply every step through a new
/// journaled session, and hand back the session (the guard: drop it, or call `restore`, after
/// the measurement window) with what each step did.
pub fn apply_profile<'h>(
    host: &'h dyn Host,
    name: &str,
    user: &BTreeMap<String, Profile>,
    target: &Target,
    journal: &std::path::Path,
) -> Result<(rtlab_host::session::Session<'h>, Vec<StepOutcome>), ProfileError> {
    let profile = find(name, user)?;
    Ok(apply_named(host, &NamedProfile { name: name.into(), profile }, target, journal)?)
}

/// Apply a resolved profile ([`resolve`]): plan it on `host`, apply every step through a new
/// session journaled at `journal` (its `begin` line says `profile NAME`), and hand back the
/// session (the guard: drop it, or call `restore`, after the measurement) with what each
/// step did. Err only when the journal cannot be begun (pending changes, no privilege).
pub fn apply_named<'h>(
    host: &'h dyn Host,
    p: &NamedProfile,
    target: &Target,
    journal: &Path,
) -> Result<(rtlab_host::session::Session<'h>, Vec<StepOutcome>), JournalError> {
    let steps = plan(&p.profile, target, host);
    let mut s = rtlab_host::session::Session::begin(host, journal, &format!("profile {}", p.name))?;
    let outcomes = steps.iter().map(|st| apply_step(&mut s, st)).collect();
    Ok((s, outcomes))
}
