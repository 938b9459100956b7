//! The monitor's exposition (`/metrics`) of a [`View`]: the canary, the topics, the chains,
//! the time the kernel took from the canary's CPU, the monitor's own cost (see
//! [`super::openmetrics`] for the format).

use super::config;
use super::openmetrics::{Exposition, Type};
use super::verdict::Verdict;
use super::view::{expected_period_ns, TopicRow, View};
use std::sync::atomic::Ordering;

/// The exposition of a view (see [`openmetrics`]).
pub fn render(v: &View) -> String {
    let mut e = Exposition::default();
    e.family("rtlab_monitor_intervals", Type::Counter, None, "intervals closed");
    e.sample("rtlab_monitor_intervals_total", &[], v.intervals as f64);
    e.family(
        "rtlab_monitor_worst_cases",
        Type::Counter,
        None,
        "worst cases kept (the day's highest canary maximum, or above the limit)",
    );
    e.sample("rtlab_monitor_worst_cases_total", &[], v.worst_cases as f64);
    e.family("rtlab_monitor_reloads", Type::Counter, None, "configurations reloaded on SIGHUP");
    e.sample("rtlab_monitor_reloads_total", &[("result", "ok")], v.reloads as f64);
    e.sample("rtlab_monitor_reloads_total", &[("result", "refused")], v.reload_failures as f64);
    e.family(
        "rtlab_monitor_cpu_seconds",
        Type::Counter,
        Some("seconds"),
        "the monitor's own CPU time",
    );
    e.sample("rtlab_monitor_cpu_seconds_total", &[], v.cpu_seconds);
    e.family(
        "rtlab_monitor_resident_memory_bytes",
        Type::Gauge,
        Some("bytes"),
        "the monitor's resident memory",
    );
    e.sample("rtlab_monitor_resident_memory_bytes", &[], v.rss_bytes as f64);
    if let Some((c, s)) = &v.canary {
        let cpu = c.cpu.map(|c| c.to_string()).unwrap_or_else(|| "any".into());
        let l: [(&str, &str); 1] = [("cpu", &cpu)];
        e.family(
            "rtlab_canary_latency_seconds",
            Type::Histogram,
            Some("seconds"),
            "the timer canary's wake-up latency (woken - expiry asked)",
        );
        e.histogram_ns("rtlab_canary_latency_seconds", &l, &s.latency.snapshot());
        e.family(
            "rtlab_canary_misses",
            Type::Counter,
            None,
            "canary wake-ups later than its deadline",
        );
        e.sample("rtlab_canary_misses_total", &l, s.misses.load(Ordering::Relaxed) as f64);
        e.family(
            "rtlab_canary_overruns",
            Type::Counter,
            None,
            "canary expiries skipped (a wake-up after the next expiry)",
        );
        e.sample("rtlab_canary_overruns_total", &l, s.overruns.load(Ordering::Relaxed) as f64);
        e.family(
            "rtlab_canary_interval_max_seconds",
            Type::Gauge,
            Some("seconds"),
            "the canary's highest latency in the last interval",
        );
        if let Some(m) = v.canary_max_ns {
            e.sample("rtlab_canary_interval_max_seconds", &l, m as f64 / 1e9);
        }
        e.family(
            "rtlab_canary_cpu_seconds",
            Type::Counter,
            Some("seconds"),
            "the canary thread's CPU time (its cost)",
        );
        e.sample("rtlab_canary_cpu_seconds_total", &l, v.canary_cpu_seconds);
    }
    if !v.topics.is_empty() {
        topics_exposition(&mut e, v);
    }
    if !v.chains.is_empty() {
        chains_exposition(&mut e, v);
    }
    let cpus: Vec<usize> = v.canary.as_ref().and_then(|c| c.0.cpu).into_iter().collect();
    noise_exposition(&mut e, &std::fs::read_to_string("/proc/stat").unwrap_or_default(), &cpus);
    e.finish()
}

fn chains_exposition(e: &mut Exposition, v: &View) {
    let name = |c: &config::ChainConfig| c.name();
    e.family(
        "rtlab_chain_latency_seconds",
        Type::Histogram,
        Some("seconds"),
        "a traced chain's end-to-end latency: its last topic's take - its first topic's publish",
    );
    for (c, s, _) in &v.chains {
        e.histogram_ns(
            "rtlab_chain_latency_seconds",
            &[("chain", &name(c))],
            &s.latency.snapshot(),
        );
    }
    e.family("rtlab_chain_messages", Type::Counter, None, "messages followed along the chain");
    for (c, s, _) in &v.chains {
        e.sample(
            "rtlab_chain_messages_total",
            &[("chain", &name(c))],
            s.messages.load(Ordering::Relaxed) as f64,
        );
    }
    e.family("rtlab_chain_misses", Type::Counter, None, "messages later than the chain's deadline");
    for (c, s, _) in v.chains.iter().filter(|c| c.0.deadline.is_some()) {
        e.sample(
            "rtlab_chain_misses_total",
            &[("chain", &name(c))],
            s.misses.load(Ordering::Relaxed) as f64,
        );
    }
    e.family(
        "rtlab_chain_interval_max_seconds",
        Type::Gauge,
        Some("seconds"),
        "the chain's highest end-to-end latency in the last interval (one interval behind)",
    );
    for (c, _, last) in &v.chains {
        if let Some(m) = last {
            e.sample("rtlab_chain_interval_max_seconds", &[("chain", &name(c))], *m as f64 / 1e9);
        }
    }
}

/// USER_HZ: the unit of /proc/stat's times (100 on every Linux architecture rtlab runs on).
const USER_HZ: f64 = 100.0;

/// The time the kernel took from the tasks of `cpus` (every CPU when empty), from
/// /proc/stat: interrupts, softirqs, and steal (the hypervisor ran something else).
fn noise_exposition(e: &mut Exposition, stat: &str, cpus: &[usize]) {
    e.family(
        "rtlab_cpu_taken_seconds",
        Type::Counter,
        Some("seconds"),
        "time taken from the tasks of the canary's CPU (every CPU without one) by interrupts, softirqs and steal (/proc/stat, 10 ms ticks)",
    );
    for l in stat.lines() {
        let mut w = l.split_whitespace();
        let Some(cpu) =
            w.next().and_then(|c| c.strip_prefix("cpu")).and_then(|c| c.parse::<usize>().ok())
        else {
            continue;
        };
        if !cpus.is_empty() && !cpus.contains(&cpu) {
            continue;
        }
        // user nice system idle iowait irq softirq steal
        let f: Vec<f64> = w.filter_map(|x| x.parse().ok()).collect();
        let c = cpu.to_string();
        for (by, i) in [("irq", 5), ("softirq", 6), ("steal", 7)] {
            if let Some(t) = f.get(i) {
                e.sample("rtlab_cpu_taken_seconds_total", &[("cpu", &c), ("by", by)], t / USER_HZ);
            }
        }
    }
}

/// A family with one sample per topic (`value` None: no sample for that topic).
fn per_topic(
    e: &mut Exposition,
    v: &View,
    (name, t, unit, help): (&str, Type, Option<&str>, &str),
    value: impl Fn(&TopicRow) -> Option<f64>,
) {
    e.family(name, t, unit, help);
    let sample = if t == Type::Counter { format!("{name}_total") } else { name.to_string() };
    for row in &v.topics {
        if let Some(x) = value(row) {
            e.sample(&sample, &[("topic", &row.0.name)], x);
        }
    }
}

fn topics_exposition(e: &mut Exposition, v: &View) {
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as f64;
    per_topic(e, v, ("rtlab_topic_messages", Type::Counter, None, "messages received"), |r| {
        Some(load(&r.1.messages))
    });
    e.family(
        "rtlab_topic_period_seconds",
        Type::Histogram,
        Some("seconds"),
        "the time between two arrivals",
    );
    for (t, s, _) in &v.topics {
        e.histogram_ns("rtlab_topic_period_seconds", &[("topic", &t.name)], &s.period.snapshot());
    }
    let hz = Some("hertz");
    per_topic(e, v, ("rtlab_topic_rate_hertz", Type::Gauge, hz, "the last interval's rate"), |r| {
        r.2.as_ref().map(|l| l.rate_hz)
    });
    let expected = (
        "rtlab_topic_expected_rate_hertz",
        Type::Gauge,
        hz,
        "the rate expected (the configuration's, else the writers' Deadline QoS)",
    );
    per_topic(e, v, expected, |r| expected_period_ns(&r.0, &r.1).map(|p| 1e9 / p as f64));
    let max = (
        "rtlab_topic_interval_max_period_seconds",
        Type::Gauge,
        Some("seconds"),
        "the longest time between two arrivals in the last interval",
    );
    per_topic(e, v, max, |r| r.2.as_ref()?.max_period_ns.map(|m| m as f64 / 1e9));
    e.family(
        "rtlab_topic_header_delay_seconds",
        Type::Histogram,
        Some("seconds"),
        "arrival (wall clock) - the Header stamp, where the configuration reads it",
    );
    for (t, s, _) in v.topics.iter().filter(|t| t.0.header_delay.is_some()) {
        e.histogram_ns(
            "rtlab_topic_header_delay_seconds",
            &[("topic", &t.name)],
            &s.delay.snapshot(),
        );
    }
    let writers =
        ("rtlab_topic_writers", Type::Gauge, None, "publishers the reader is matched with");
    per_topic(e, v, writers, |r| Some(load(&r.1.writers)));
    e.family(
        "rtlab_topic_state",
        Type::StateSet,
        None,
        "the last interval's verdict: ok, late, stale or lost",
    );
    for (t, _, last) in &v.topics {
        let Some(l) = last else { continue };
        for s in Verdict::ALL {
            let on = if l.verdict == s { 1.0 } else { 0.0 };
            e.sample(
                "rtlab_topic_state",
                &[("topic", &t.name), ("rtlab_topic_state", s.name())],
                on,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::keep_worst;
    use super::super::KEEP_WORST;
    use super::*;

    #[test]
    fn the_cpus_taken_time_from_proc_stat() {
        let stat = "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 10 0 0 0 0 100 250 3 0 0\ncpu1 0 0 0 0 0 7 8 9 0 0\nintr 5\n";
        let mut e = Exposition::default();
        noise_exposition(&mut e, stat, &[1]);
        let t = e.finish();
        assert!(t.contains("rtlab_cpu_taken_seconds_total{cpu=\"1\",by=\"irq\"} 0.07\n"), "{t}");
        assert!(t.contains("rtlab_cpu_taken_seconds_total{cpu=\"1\",by=\"steal\"} 0.09\n"), "{t}");
        assert!(!t.contains("cpu=\"0\""), "{t}");
        let mut e = Exposition::default();
        noise_exposition(&mut e, stat, &[]);
        let t = e.finish();
        assert!(t.contains("rtlab_cpu_taken_seconds_total{cpu=\"0\",by=\"softirq\"} 2.5\n"), "{t}");
        assert!(!t.contains("cpu=\"\""), "the total line is not a CPU: {t}");
    }

    #[test]
    fn a_worst_case_file_keeps_the_newest() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..(KEEP_WORST + 5) {
            keep_worst(d.path(), &serde_json::json!({ "n": i })).unwrap();
        }
        let text = std::fs::read_to_string(d.path().join("worst.jsonl")).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), KEEP_WORST);
        assert_eq!(lines[0], "{\"n\":5}");
        assert_eq!(*lines.last().unwrap(), format!("{{\"n\":{}}}", KEEP_WORST + 4));
    }
}
