//! Locks the result document: the key paths a real run writes are exactly the ones below,
//! and every one of them is documented in docs/result-schema.md. Change all three together
//! (and bump schema_version for an incompatible change).

mod common;
use common::*;
use serde_json::Value;
use std::collections::BTreeSet;

const TIMER_KEYS: &[&str] = &[
    "command_line[]",
    "config.cpu_dma_latency_us",
    "config.duration_ns",
    "config.histogram_us_buckets",
    "config.loops",
    "config.mlockall",
    "config.mode",
    "config.raw_file",
    "config.roscpp_rt",
    "config.stack_prefault_bytes",
    "config.threads[].cpu",
    "config.threads[].deadline_ns",
    "config.threads[].interval_ns",
    "config.threads[].policy",
    "config.threads[].priority",
    "config.window_ns",
    "duration_ns",
    "environment.architecture",
    "environment.cmdline",
    "environment.cpu_dma_latency_us",
    "environment.cpu_model",
    "environment.cpufreq_governor",
    "environment.cpuidle_driver",
    "environment.cpuidle_governor",
    "environment.cpus_online",
    "environment.high_res_timers",
    "environment.hostname",
    "environment.hz",
    "environment.isolcpus",
    "environment.kernel_architecture",
    "environment.kernel_release",
    "environment.kernel_version",
    "environment.memory_locked",
    "environment.nohz_full",
    "environment.preempt_dynamic",
    "environment.preempt_rt",
    "environment.preemption_model",
    "environment.preemption_source",
    "environment.sched_rt_runtime_us",
    "environment.threaded_irqs",
    "environment.virtualization",
    "interrupted",
    "probe",
    "schema_version",
    "started_at",
    "streams[].deadline_ns",
    "streams[].definition",
    "streams[].histogram.buckets[].count",
    "streams[].histogram.buckets[].high_ns",
    "streams[].histogram.buckets[].low_ns",
    "streams[].histogram.buckets_per_octave",
    "streams[].histogram.exact_below_ns",
    "streams[].histogram.limit_ns",
    "streams[].histogram.overflow_high",
    "streams[].histogram.overflow_low",
    "streams[].histogram.scheme",
    "streams[].labels.*",
    "streams[].metric",
    "streams[].name",
    "streams[].raw_dropped",
    "streams[].raw_file",
    "streams[].start_monotonic_ns",
    "streams[].stats.count",
    "streams[].stats.max_at_ns",
    "streams[].stats.max_index",
    "streams[].stats.max_ns",
    "streams[].stats.mean_ns",
    "streams[].stats.min_ns",
    "streams[].stats.missed",
    "streams[].stats.overruns",
    "streams[].stats.p50_ns",
    "streams[].stats.p90_ns",
    "streams[].stats.p99_99_ns",
    "streams[].stats.p99_9_ns",
    "streams[].stats.p99_ns",
    "streams[].stats.stddev_ns",
    "streams[].windows.count[]",
    "streams[].windows.max_ns[]",
    "streams[].windows.width_ns",
    "tool.name",
    "tool.version",
    "warnings[].code",
    "warnings[].message",
    "evidence.counters.width_ns",
    "evidence.counters.start_monotonic_ns",
    "evidence.counters.resolution_ns",
    "evidence.counters.last_partial",
    "evidence.counters.windows[].net_rx[]",
    "evidence.counters.windows[].timer[]",
    "evidence.counters.windows[].interrupts[]",
    "evidence.counters.windows[].ksoftirqd_ns[]",
    "evidence.counters.windows[].context_switches",
    "evidence.counters.windows[].steal_ticks[]",
    "evidence.spike",
    "evidence.notes[]",
];

/// What every case cost (`cost`): in every document of this rtlab.
const COST_KEYS: &[&str] = &[
    "cost.windows[].name",
    "cost.windows[].window_ns",
    "cost.windows[].messages",
    "cost.windows[].measuring[].process",
    "cost.windows[].measuring[].thread",
    "cost.windows[].measuring[].policy",
    "cost.windows[].measuring[].priority",
    "cost.windows[].measuring[].window_ns",
    "cost.windows[].measuring[].usage.user_ns",
    "cost.windows[].measuring[].usage.system_ns",
    "cost.windows[].measuring[].usage.minor_faults",
    "cost.windows[].measuring[].usage.major_faults",
    "cost.windows[].measuring[].usage.voluntary_switches",
    "cost.windows[].measuring[].usage.involuntary_switches",
    "cost.windows[].groups[].process",
    "cost.windows[].groups[].group",
    "cost.windows[].groups[].threads",
    "cost.windows[].groups[].born",
    "cost.windows[].groups[].user_ns",
    "cost.windows[].groups[].system_ns",
    "cost.windows[].groups[].minor_faults",
    "cost.windows[].groups[].major_faults",
    "cost.windows[].groups[].sched[].policy",
    "cost.windows[].groups[].sched[].priority",
    "cost.windows[].groups[].sched[].threads",
    "cost.windows[].processes[].process",
    "cost.windows[].processes[].max_rss_kib",
    "cost.max_rss_kib",
    "cost.notes[]",
    "cost.far[]",
];

/// What `--trace-on-spike` adds (documented with the rest; a real capture is tested in tune_spike_cli.rs).
const SPIKE_KEYS: &[&str] = &[
    "evidence.spike.threshold_ns",
    "evidence.spike.stream",
    "evidence.spike.index",
    "evidence.spike.at_ns",
    "evidence.spike.value_ns",
    "evidence.spike.trace_file",
    "evidence.spike.attribution[]",
    "evidence.spike.timerlat",
    "evidence.spike.spikes[]",
    "evidence.spike.spikes[].stream",
    "evidence.spike.spikes[].index",
    "evidence.spike.spikes[].at_ns",
    "evidence.spike.spikes[].value_ns",
    "evidence.spike.spikes[].trace_file",
    "evidence.spike.spikes[].attribution[]",
    "evidence.counters",
];

/// Counters other probes fill (udp, pubsub); documented with the rest.
const COUNTER_KEYS: &[&str] = &[
    "streams[].stats.lost",
    "streams[].stats.late",
    "streams[].stats.duplicates",
    "streams[].stats.out_of_order",
    "streams[].stats.malformed",
];

fn walk(v: &Value, path: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) if path.ends_with("labels") => {
            out.insert(format!("{path}.*"));
            let _ = m;
        }
        Value::Object(m) => {
            for (k, x) in m {
                walk(x, &if path.is_empty() { k.clone() } else { format!("{path}.{k}") }, out);
            }
        }
        Value::Array(a) => {
            if a.is_empty() {
                out.insert(format!("{path}[]"));
            }
            for x in a {
                walk(x, &format!("{path}[]"), out);
            }
        }
        _ => {
            out.insert(path.to_string());
        }
    }
}

#[test]
fn the_timer_document_has_exactly_the_locked_keys() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("t.json");
    let raw = d.path().join("r.csv");
    // the raw file makes raw_file/raw_dropped non-null; a short run guarantees warnings
    let o = run(&[
        "timer",
        "--loops",
        "20",
        "--interval",
        "100us",
        "--policy",
        "other",
        "-q",
        "--json",
        json.to_str().unwrap(),
        "--raw-file",
        raw.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let mut got = BTreeSet::new();
    walk(&v, "", &mut got);
    let want: BTreeSet<String> =
        TIMER_KEYS.iter().chain(COST_KEYS).map(|s| s.to_string()).collect();
    // an empty array of locked elements is no new key (under load a stream can end with no
    // sample, e.g. a jitter stream whose every pair was broken by an overrun: no buckets)
    let of_locked =
        |k: &String| k.ends_with("[]") && want.iter().any(|w| w.starts_with(&format!("{k}.")));
    let extra: Vec<_> = got.difference(&want).filter(|k| !of_locked(k)).collect();
    // a timer case has no role process: its empty list is its locked elements' prefix
    let missing: Vec<_> =
        want.difference(&got).filter(|k| !k.starts_with("cost.windows[].processes[].")).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "not locked: {extra:?}; locked but absent: {missing:?}"
    );
}

#[test]
fn the_summary_serializes_every_counter_with_the_design_keys() {
    let s = rtlab_core::Summary {
        lost: Some(1),
        late: Some(2),
        duplicates: Some(3),
        out_of_order: Some(4),
        malformed: Some(5),
        ..Default::default()
    };
    let v = serde_json::to_value(&s).unwrap();
    for k in [
        "count",
        "min_ns",
        "mean_ns",
        "stddev_ns",
        "p50_ns",
        "p90_ns",
        "p99_ns",
        "p99_9_ns",
        "p99_99_ns",
        "max_ns",
        "lost",
        "late",
        "duplicates",
        "out_of_order",
        "malformed",
    ] {
        assert!(v.get(k).is_some(), "{k} missing from {v}");
    }
}

#[test]
fn every_locked_key_is_documented() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/result-schema.md"
    ))
    .unwrap();
    for k in TIMER_KEYS.iter().chain(COUNTER_KEYS).chain(SPIKE_KEYS).chain(COST_KEYS) {
        // environment, config and streams are documented under their full path
        assert!(doc.contains(&format!("`{k}`")), "{k} is not in docs/result-schema.md");
    }
}
