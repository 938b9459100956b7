//! Runs and cases: what a scenario execution produces, what the store keeps and what the
//! reports render. A run is one execution of a scenario; a case is one cell of its matrix
//! (probe x load x profile x parameters, one repetition).
//!
//! Contract: plain serde data; a case always carries its status, and a failed case its
//! error, so that nothing is silently missing from a report.

use crate::schema::ResultDocument;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Running,
    Complete,
    /// Ctrl-C: finished cases are kept.
    Interrupted,
    Failed,
}

impl RunStatus {
    pub fn name(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Failed => "failed",
        }
    }
}

/// What a run is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// Scenario name (the preset name, or the file's `name`).
    pub scenario: String,
    /// `preset` or the scenario file's path.
    pub source: String,
    /// The scenario text as run (TOML), so a run can be re-read without the file.
    pub scenario_text: String,
    /// Duration scale applied (`--scale`).
    pub scale: f64,
    pub command_line: Vec<String>,
    /// UTC, RFC 3339.
    pub started_at: String,
    pub tool_version: String,
    /// The machine at the start of the run.
    pub environment: crate::schema::Environment,
}

/// How a case ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CaseStatus {
    Ok,
    /// The case failed; the run went on.
    Failed {
        error: String,
    },
    /// The case could not apply on this machine (a qdisc, a tool, a kernel feature missing).
    Skipped {
        reason: String,
    },
    /// Ctrl-C during the case: what was measured is in the document.
    Interrupted,
    /// The case overran its plan by the run's margin and did not end when asked (its
    /// real-time threads put to SCHED_OTHER, then left behind): the machine was put back
    /// and the run went on. `error` names the overrun and the threads that were running.
    Hung {
        error: String,
    },
}

/// The figures a study published for a case, shown beside the measured ones.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Published {
    /// e.g. `S1 (San Vicente Gutiérrez et al., 2018), RTT table`
    pub source: String,
    /// The study's own case label, e.g. `no-rt / stress`.
    pub label: String,
    pub min_us: Option<f64>,
    pub avg_us: Option<f64>,
    pub max_us: Option<f64>,
    pub median_us: Option<f64>,
    pub missed: Option<u64>,
    pub lost: Option<u64>,
    /// Out of how many samples `missed` and `lost` count.
    pub of: Option<u64>,
}

/// One case of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseRecord {
    /// Position in the run (0-based).
    pub index: u32,
    /// Unique in the run, e.g. `timer/cpu/rt-normal/interval=1ms#1`.
    pub name: String,
    /// `timer`, `udp`, `pubsub`.
    pub probe: String,
    /// Load name (`idle`, `cpu`, `tx`, ...).
    pub load: String,
    /// Profile name (`no-rt`, `rt-normal`, ...).
    pub profile: String,
    /// The matrix parameters of this case (payload, rate, subscribers, period, transport...).
    pub params: BTreeMap<String, String>,
    /// 1-based repetition.
    pub repetition: u32,
    pub status: CaseStatus,
    /// The probe's result document (absent when the case failed before measuring).
    pub document: Option<ResultDocument>,
    /// What the load achieved (CPU use, bit rate), as the load module reports it.
    pub load_report: Option<serde_json::Value>,
    /// What the profile applied and skipped.
    pub profile_report: Option<serde_json::Value>,
    /// Spike evidence (per-window counters, trace attribution).
    pub spike_evidence: Option<serde_json::Value>,
    /// The study's figures for this case (presets only).
    pub published: Option<Published>,
    pub started_at: String,
    pub duration_ns: i64,
}

/// A stored run with its cases.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub id: i64,
    pub info: RunInfo,
    pub status: RunStatus,
    pub finished_at: Option<String>,
    pub cases: Vec<CaseRecord>,
    /// The verdicts of the run's gates (`[[gate]]`, `--gate`), as stored when it ended.
    #[serde(default)]
    pub gates: Vec<crate::gate::GateVerdict>,
}

/// One line of `rtlab runs`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub id: i64,
    pub scenario: String,
    pub started_at: String,
    pub status: RunStatus,
    pub cases: u32,
    pub failed: u32,
    pub hostname: String,
    pub kernel_release: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_status_serializes_with_a_tag() {
        let s =
            serde_json::to_value(CaseStatus::Failed { error: "iperf3 missing".into() }).unwrap();
        assert_eq!(s["status"], "failed");
        assert_eq!(s["error"], "iperf3 missing");
        let back: CaseStatus = serde_json::from_value(s).unwrap();
        assert_eq!(back, CaseStatus::Failed { error: "iperf3 missing".into() });
    }
}
