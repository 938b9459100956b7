//! What a scenario is made of once read: its cases (probe, load, profile, repetition) and
//! loads, the limits on them, and the one-line error naming the file, line and field.

use crate::probe::Probe;
use rtlab_core::run::Published;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Cases one run may hold unless the file raises it (`max_cases = N`).
pub const MAX_CASES: u64 = 10_000;
/// Repetitions of a probe's matrix, at most.
pub const MAX_REPETITIONS: i64 = 1000;
/// A scaled case keeps at least this many slots (`--scale` never makes a case meaningless).
pub const MIN_SLOTS: u64 = 100;

/// A load as the runner starts it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LoadSpec {
    Idle,
    /// stress-ng workers: cpu (with a method), vm, io, hdd — S2's `-c 4 --cpu-method fft`,
    /// S3's 8/8/8/8.
    Stress {
        cpu: u32,
        cpu_method: Option<String>,
        cpu_load: Option<u8>,
        vm: u32,
        io: u32,
        hdd: u32,
    },
    /// iperf3 traffic at a bit rate; `direction` tx (from the probe's side) or rx (towards it).
    Traffic {
        bits_per_second: u64,
        direction: String,
        protocol: String,
    },
    /// A user command, started and stopped like the others.
    Command {
        argv: Vec<String>,
    },
    /// Several loads at once (S3: "load + 40 Mbps").
    Combined {
        parts: Vec<LoadSpec>,
    },
}

/// Built-in loads by name.
pub fn builtin_load(name: &str) -> Option<LoadSpec> {
    let stress = |cpu, vm, io, hdd, m: Option<&str>| LoadSpec::Stress {
        cpu,
        cpu_method: m.map(str::to_string),
        cpu_load: None,
        vm,
        io,
        hdd,
    };
    Some(match name {
        "idle" => LoadSpec::Idle,
        "cpu" => stress(0, 0, 0, 0, Some("fft")), // 0 = one worker per online CPU
        "stress" => stress(8, 8, 8, 8, None),
        "tx" => LoadSpec::Traffic {
            bits_per_second: 100_000_000,
            direction: "tx".into(),
            protocol: "udp".into(),
        },
        "rx" => LoadSpec::Traffic {
            bits_per_second: 100_000_000,
            direction: "rx".into(),
            protocol: "udp".into(),
        },
        _ => return None,
    })
}

/// One cell of the matrix, one repetition: everything the runner needs.
#[derive(Clone, Debug)]
pub struct CaseSpec {
    pub index: u32,
    pub name: String,
    pub probe: String,
    /// The probe, configured (the same typed configuration as its flags give).
    pub config: Arc<dyn Probe>,
    pub load: String,
    pub load_spec: LoadSpec,
    /// The profile as written (a built-in name or a file path).
    pub profile: String,
    /// The profile, resolved.
    pub profile_spec: rtlab_tune::profile::NamedProfile,
    /// Matrix parameters as written (units kept): what names the case and what
    /// `[[published]]` matches.
    pub params: BTreeMap<String, String>,
    pub repetition: u32,
    /// Arm ftrace for this case and explain its first samples above this (root).
    pub trace_on_spike_ns: Option<i64>,
    /// Sample the kernel counters per window.
    pub counters: bool,
    pub published: Option<Published>,
    /// Said when `--scale` hit a floor.
    pub scale_note: Option<String>,
}

impl CaseSpec {
    /// How long the case is expected to measure, for progress and ETA (slots, not samples).
    pub fn planned_ns(&self) -> i64 {
        self.config.plan().estimate_ns()
    }

    /// The case's length as the dry run shows it.
    pub fn length(&self) -> String {
        use rtlab_core::units::{format_duration_exact, Nanos};
        let p = self.config.plan();
        let one = match (p.duration_ns, p.count) {
            (Some(d), Some(c)) => format!("{} or {c} slots", format_duration_exact(Nanos(d))),
            (Some(d), None) => format_duration_exact(Nanos(d)),
            (None, Some(c)) => format!("{c} slots"),
            (None, None) => String::new(),
        };
        if p.sweep > 1 {
            format!("{one} x {} sweep cases", p.sweep)
        } else {
            one
        }
    }
}

/// An error in a scenario: origin, line, field, message — printed as one line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{origin}:{line}: {field}: {message}")]
pub struct ScenarioError {
    pub origin: String,
    pub line: usize,
    pub field: String,
    pub message: String,
}

/// A validated scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    /// Where it came from (file path or `preset NAME`), used in error messages.
    pub origin: String,
    pub text: String,
    pub(super) cases: Vec<CaseSpec>,
    /// The `[[gate]]` limits, each matching at least one case of the file (before `--only`).
    pub gates: Vec<rtlab_core::gate::Gate>,
}
