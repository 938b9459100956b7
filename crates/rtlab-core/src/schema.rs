//! The versioned result document that `--json` writes and the store keeps.
//!
//! Contract: field names are the words of DESIGN.md ("Result files"); every field is
//! documented in `docs/result-schema.md` and locked by `tests/schema_lock.rs`. Changing a
//! field means bumping [`SCHEMA_VERSION`], the doc and the lock together.

use crate::histogram::HistogramData;
use crate::stats::Summary;
use crate::windows::WindowData;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Bumped on any incompatible change of the result document.
pub const SCHEMA_VERSION: u32 = 2;

/// One result document: one probe run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultDocument {
    pub schema_version: u32,
    pub tool: ToolInfo,
    /// The command line as given (argv).
    pub command_line: Vec<String>,
    /// UTC start time, RFC 3339.
    pub started_at: String,
    /// Wall duration of the measurement, ns.
    pub duration_ns: i64,
    /// True when Ctrl-C (or a signal) ended the run before its planned end.
    pub interrupted: bool,
    /// `timer`, `udp` or `pubsub`.
    pub probe: String,
    pub environment: Environment,
    /// The probe's full configuration (its `<Probe>Config`, as serialized).
    pub config: serde_json::Value,
    pub streams: Vec<Stream>,
    pub warnings: Vec<Warning>,
    /// Kernel counters per window and what the tracer found around a spike (schema 2;
    /// absent from schema-1 documents).
    #[serde(default)]
    pub evidence: Option<crate::evidence::Evidence>,
    /// The far side of a run that had one (`--far`): the host that ran the reflector, the
    /// pong or the subscribers. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub far: Option<FarSide>,
    /// What the case cost: CPU time, page faults and context switches of the measuring
    /// threads, the process's threads by name group, max RSS. Absent from documents of an
    /// rtlab without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<crate::cost::Cost>,
}

/// The far host of a run, as its agent reported it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FarSide {
    /// How it was reached: `ssh:[USER@]HOST[:PORT]` or `netns:NAME`.
    pub link: String,
    /// Its host name.
    pub host: String,
    /// The rtlab version there.
    pub version: String,
    /// This host's address on the link, and the far host's.
    pub near_address: String,
    pub far_address: String,
    /// `one-host` (a namespace of this machine: one clock), `stated-synchronised`
    /// (`--synced-clocks`), `round-trips-only` (two clocks: one-way figures refused) or
    /// `measured-offset` (two clocks, the far one's offset measured over the link: `rtlab
    /// trace --far`).
    pub clocks: String,
    pub environment: Environment,
    /// The far host's kernel counters per window (its own windows, from its sampling start).
    pub counters: Option<crate::evidence::WindowCounters>,
    /// The far profile's steps and whether it was put back.
    pub profile: Option<serde_json::Value>,
    /// The far load's report.
    pub load: Option<serde_json::Value>,
    pub notes: Vec<String>,
    /// Why the link to the far side ended before the run did (None: it lasted); the far
    /// side's own streams and counters are then missing.
    #[serde(default)]
    pub link_lost: Option<String>,
}

impl FarSide {
    /// In a few lines: where it was, its rtlab, the clocks, what its kernel counted in
    /// total and in its busiest window (by interrupts), its notes.
    pub fn summary(&self) -> Vec<String> {
        let arch = self.environment.arch_said();
        // no addresses (`rtlab trace --far`: the application finds its peers itself): "-"
        let link = if self.near_address == "-" && self.far_address == "-" {
            String::new()
        } else {
            format!("{} -> {}, ", self.near_address, self.far_address)
        };
        let mut v = vec![format!(
            "far side {} (host {}, rtlab {}{}): {link}clocks: {}",
            self.link,
            self.host,
            self.version,
            if arch.is_empty() { String::new() } else { format!(", {arch}") },
            self.clocks
        )];
        if let Some(c) = &self.counters {
            let mut total = crate::evidence::KernelCounters::default();
            for w in &c.windows {
                total.add(w);
            }
            v.push(format!(
                "far kernel counters over {} windows of {} ms: {}",
                c.windows.len(),
                c.width_ns / 1_000_000,
                total.describe()
            ));
            let busiest =
                c.windows.iter().enumerate().max_by_key(|(_, w)| w.interrupts.iter().sum::<u64>());
            if let (Some((i, w)), true) = (busiest, c.windows.len() > 1) {
                v.push(format!("far busiest window {i} (by interrupts): {}", w.describe()));
            }
        }
        if let Some(r) = self.profile.as_ref().and_then(|p| p.get("profile")) {
            v.push(format!("far profile: {}", r.as_str().unwrap_or("?")));
        }
        if let Some(l) = &self.link_lost {
            v.push(format!("LINK LOST before the run ended: {l}"));
        }
        v.extend(self.notes.iter().map(|n| format!("note: {n}")));
        v
    }

    /// The warning of a run whose far side went away before it ended.
    pub fn warning(&self) -> Option<Warning> {
        self.link_lost.as_ref().map(|why| Warning {
            code: "far-link-lost".into(),
            message: format!(
                "the link to the far side {} ended before the run did ({why}): its streams and counters are missing; the far host restored itself when its keep-alive deadline passed",
                self.link
            ),
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInfo {
    pub name: String,
    pub version: String,
}

/// One measured stream of samples (a timer thread, a ping, a subscriber) or an aggregate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stream {
    /// Unique within the document, e.g. `thread0`, `all`.
    pub name: String,
    /// What a sample is: `wakeup_latency`, `timer_error`, `cycle_jitter`, `rtt`, `one_way_latency`.
    pub metric: String,
    /// The definition of the metric in words (DESIGN.md "Definitions").
    pub definition: String,
    /// Free labels of the stream: thread, cpu, policy, priority, interval, ...
    pub labels: BTreeMap<String, String>,
    /// Samples above this are `missed`.
    pub deadline_ns: i64,
    pub stats: Summary,
    pub histogram: HistogramData,
    pub windows: WindowData,
    /// Path of the raw-sample file of this stream, when asked for.
    pub raw_file: Option<String>,
    /// Samples that did not reach the raw file (writer fell behind); they are in the stats.
    pub raw_dropped: Option<u64>,
    /// CLOCK_MONOTONIC instant (ns) of the stream's time 0 (schema 2; None: not known).
    #[serde(default)]
    pub start_monotonic_ns: Option<i64>,
}

impl Stream {
    /// A stream from a [`crate::sink::Recorder`]'s statistics, histogram and windows.
    pub fn from_recorder(
        name: impl Into<String>,
        metric: &str,
        definition: &str,
        labels: BTreeMap<String, String>,
        r: &crate::sink::Recorder,
    ) -> Stream {
        Stream {
            name: name.into(),
            metric: metric.into(),
            definition: definition.into(),
            labels,
            deadline_ns: r.deadline_ns,
            stats: r.summary(),
            histogram: r.histogram.to_data(),
            windows: r.windows.to_data(),
            raw_file: None,
            raw_dropped: None,
            start_monotonic_ns: r.origin_monotonic_ns,
        }
    }
}

/// What the machine was: everything that changes how a latency should be read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Environment {
    pub hostname: String,
    /// `uname -r`.
    pub kernel_release: String,
    /// `uname -v`.
    pub kernel_version: String,
    /// `none`, `voluntary`, `full`, `lazy`, `rt`, or `unknown`.
    pub preemption_model: String,
    /// How the model was found (`/sys/kernel/debug/sched/preempt`, `cmdline preempt=`, `config`...).
    pub preemption_source: String,
    pub preempt_dynamic: bool,
    pub preempt_rt: bool,
    /// CONFIG_HZ, when the kernel config is readable.
    pub hz: Option<u32>,
    /// `hres_active` from /proc/timer_list (None: unreadable).
    pub high_res_timers: Option<bool>,
    /// `kvm`, `qemu` (QEMU's arm64 `virt` board: KVM or emulation), `xen`, `vmware`,
    /// `hyperv`, `hypervisor` (unknown kind) or None (bare metal).
    pub virtualization: Option<String>,
    pub cpuidle_driver: Option<String>,
    pub cpuidle_governor: Option<String>,
    /// cpufreq governor of cpu0 (None: no cpufreq on this machine).
    pub cpufreq_governor: Option<String>,
    /// /sys/devices/system/cpu/isolated (empty: none).
    pub isolcpus: String,
    /// /sys/devices/system/cpu/nohz_full (None: not built in).
    pub nohz_full: Option<String>,
    /// Kernel threads IRQs (`threadirqs` or PREEMPT_RT).
    pub threaded_irqs: bool,
    pub cpus_online: String,
    pub cpu_model: String,
    /// The CPU architecture rtlab ran as (`uname -m`: `x86_64`, `aarch64`).
    #[serde(default)]
    pub architecture: String,
    /// The kernel's own (/proc/sys/kernel/arch; empty where the kernel has no such file):
    /// another than `architecture` only under an emulator (qemu-user).
    #[serde(default)]
    pub kernel_architecture: String,
    /// /proc/cmdline.
    pub cmdline: String,
    /// RT throttling: /proc/sys/kernel/sched_rt_runtime_us (-1: off).
    pub sched_rt_runtime_us: Option<i64>,
    /// The value rtlab held on /dev/cpu_dma_latency during the run (None: not held).
    pub cpu_dma_latency_us: Option<i32>,
    /// Whether mlockall(MCL_CURRENT|MCL_FUTURE) succeeded.
    pub memory_locked: bool,
}

impl Environment {
    /// The architecture rtlab ran as, and the kernel's when an emulator stood between them:
    /// `aarch64`, `aarch64 emulated on x86_64`; empty in a result written before rtlab
    /// recorded it.
    pub fn arch_said(&self) -> String {
        match (self.architecture.as_str(), self.kernel_architecture.as_str()) {
            ("", _) => String::new(),
            (a, k) if k.is_empty() || k == a => a.to_string(),
            (a, k) => format!("{a} emulated on {k}"),
        }
    }
}

/// Something that weakens the measurement, with what to do about it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// Stable identifier, e.g. `not-preempt-rt`.
    pub code: String,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_round_trips() {
        let e = Environment { hz: Some(250), preempt_dynamic: true, ..Default::default() };
        let v = serde_json::to_string(&e).unwrap();
        let back: Environment = serde_json::from_str(&v).unwrap();
        assert_eq!(back, e);
    }
}
