//! The kernel's osnoise tracer driven for the noise probe (`rtlab noise --tracer osnoise`):
//! its per-CPU workload threads read the time in a loop, as rtlab's busy loop does, and the
//! kernel attributes every interference itself (HW, NMI, IRQ, softirq, thread).
//!
//! Contract: every tracefs change goes through a journaled [`Session`] and is undone before
//! [`run`] returns (or by `rtlab tune restore` after a kill -9): tracefs mounted if needed,
//! a tracefs instance of rtlab's own (`instances/rtlab-noise-PID`, removed after), the global
//! `osnoise/` settings it writes (`cpus`, `period_us`, `runtime_us`, `tracing_threshold`,
//! `stop_tracing_us`, `stop_tracing_total_us`) and the global `tracing_thresh` (osnoise's
//! threshold in Linux 6.1) written back. The instance's `trace` is read
//! once, at the end. Source: Documentation/trace/osnoise-tracer.rst (torvalds/linux): the
//! per-period summary line (RUNTIME, NOISE, % CPU available, MAX SINGLE NOISE, HW, NMI, IRQ,
//! SIRQ, THREAD) and the osnoise events (`irq_noise`, `softirq_noise`, `thread_noise`,
//! `nmi_noise`: the source, its start and its duration).

use crate::trace::parse_trace;
use rtlab_host::host::Host;
use rtlab_host::session::{Action, Session};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What to run.
#[derive(Clone, Debug)]
pub struct OsnoiseConfig {
    pub cpus: Vec<usize>,
    /// How long the tracer runs.
    pub duration: Duration,
    /// One summary line per CPU per period (the probe's window), in us.
    pub period_us: u64,
    /// An interference below this (us) is not noise (osnoise's `tracing_threshold`).
    pub threshold_us: u64,
}

/// One period of one CPU (a summary line).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Period {
    pub cpu: usize,
    /// When the line was written, at the period's end (trace clock, ns).
    pub ts_ns: u64,
    pub runtime_ns: i64,
    pub noise_ns: i64,
    pub max_single_ns: i64,
    /// HW, NMI, IRQ, SIRQ, THREAD interference counts.
    pub counts: [u64; 5],
}

/// One interference the kernel attributed (an osnoise event).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interference {
    pub cpu: usize,
    /// When the event was written (trace clock, ns).
    pub ts_ns: u64,
    /// `irq`, `softirq`, `thread`, `nmi`.
    pub kind: String,
    /// Its source as the event names it (`local_timer:236`, `TIMER:1`, `kworker/1:1:80`).
    pub source: String,
    pub duration_ns: i64,
}

/// What the tracer reported.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OsnoiseReport {
    pub periods: Vec<Period>,
    pub interferences: Vec<Interference>,
    /// What did not go as planned (tracefs not fully put back).
    pub notes: Vec<String>,
}

/// The names of the five interference counts of a summary line.
pub const KINDS: [&str; 5] = ["hw", "nmi", "irq", "sirq", "thread"];

/// Parse an osnoise instance's `trace`: its summary lines and its noise events.
pub fn parse(text: &str) -> OsnoiseReport {
    let mut r = OsnoiseReport::default();
    for e in parse_trace(text) {
        let kind = e.name.strip_suffix("_noise").filter(|k| !k.contains(':'));
        match kind {
            Some(kind) => {
                // "local_timer:236 start 81.637220123 duration 3418 ns" (nmi: no source)
                let w: Vec<&str> = e.fields.split_whitespace().collect();
                let at = |k: &str| w.iter().position(|x| *x == k);
                let (Some(d), Some(s)) = (at("duration"), at("start")) else { continue };
                let Some(ns) = w.get(d + 1).and_then(|v| v.parse().ok()) else { continue };
                r.interferences.push(Interference {
                    cpu: e.cpu,
                    ts_ns: e.ts_ns,
                    kind: kind.to_string(),
                    source: w[..s].join(" "),
                    duration_ns: ns,
                });
            }
            None => {
                // a summary line: the "event" is its first number (RUNTIME IN US)
                let mut nums = std::iter::once(e.name.as_str()).chain(e.fields.split_whitespace());
                let v: Vec<f64> = nums.by_ref().filter_map(|x| x.parse().ok()).collect();
                if v.len() != 9 {
                    continue;
                }
                let us = |x: f64| (x * 1_000.0) as i64;
                r.periods.push(Period {
                    cpu: e.cpu,
                    ts_ns: e.ts_ns,
                    runtime_ns: us(v[0]),
                    noise_ns: us(v[1]),
                    max_single_ns: us(v[3]),
                    counts: [v[4] as u64, v[5] as u64, v[6] as u64, v[7] as u64, v[8] as u64],
                });
            }
        }
    }
    r
}

/// The global osnoise settings written, with their values.
fn settings(cfg: &OsnoiseConfig) -> Vec<(&'static str, String)> {
    vec![
        ("cpus", rtlab_host::cpu_list(&cfg.cpus)),
        ("period_us", cfg.period_us.to_string()),
        ("runtime_us", cfg.period_us.to_string()),
        ("tracing_threshold", cfg.threshold_us.max(1).to_string()),
        ("stop_tracing_us", "0".into()),
        ("stop_tracing_total_us", "0".into()),
    ]
}

/// Run the osnoise tracer in an instance of its own for `cfg.duration` (or until `stop`),
/// read what it reported, put tracefs back. `dir` is the tracefs directory (mounted already
/// or mounted here, journaled). Err: one line naming what failed (nothing left changed).
pub fn run(
    host: &dyn Host,
    journal: &Path,
    dir: &str,
    cfg: &OsnoiseConfig,
    stop: &AtomicBool,
) -> Result<OsnoiseReport, String> {
    crate::noise_tracer::run_journaled(
        host,
        journal,
        dir,
        "osnoise",
        |r: &mut OsnoiseReport| &mut r.notes,
        |s| run_in(s, host, dir, cfg, stop),
    )
}

fn run_in(
    s: &mut Session<'_>,
    host: &dyn Host,
    dir: &str,
    cfg: &OsnoiseConfig,
    stop: &AtomicBool,
) -> Result<OsnoiseReport, String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("--tracer osnoise: {what}: {e}");
    for (k, v) in settings(cfg) {
        let path = format!("{dir}/osnoise/{k}");
        if !host.exists(&path) {
            continue;
        }
        if k == "cpus" {
            // osnoise/cpus refuses a read shorter than its text + 1 (EINVAL, kernel 6.1), as
            // std's small reads are: read in one call, written back by a journaled command
            let old = read_whole(&host.path(&path)).map_err(|e| fail(&path, &e))?;
            let real = host.path(&path).display().to_string();
            let echo = |v: &str| vec!["sh".into(), "-c".into(), format!("echo {v} > {real}")];
            s.apply(&Action::Command { did: echo(&v), undo: echo(old.trim()) })
                .map_err(|e| fail(k, &e))?;
        } else {
            s.apply(&Action::WriteFile { path, value: v }).map_err(|e| fail(k, &e))?;
        }
    }
    // Linux 6.1's osnoise takes its threshold from the global tracing_thresh (5 us when 0,
    // kernel/trace/trace_osnoise.c run_osnoise) and has no osnoise/tracing_threshold: without
    // this the run's --threshold was not the kernel's (rtla's -T writes it too)
    let thresh = settings(cfg).into_iter().find(|(k, _)| *k == "tracing_threshold").map(|x| x.1);
    if let Some(v) = thresh.filter(|_| host.exists(&format!("{dir}/tracing_thresh"))) {
        s.apply(&Action::WriteFile { path: format!("{dir}/tracing_thresh"), value: v })
            .map_err(|e| fail("tracing_thresh", &e))?;
    }
    let inst = format!("{dir}/instances/rtlab-noise-{}", std::process::id());
    let real = host.path(&inst).display().to_string();
    s.apply(&Action::Command {
        did: vec!["mkdir".into(), real.clone()],
        undo: vec!["rmdir".into(), real],
    })
    .map_err(|e| fail("creating its tracefs instance", &e))?;
    let w = |s: &mut Session<'_>, f: &str, v: &str| {
        s.apply(&Action::WriteFile { path: format!("{inst}/{f}"), value: v.into() })
            .map_err(|e| fail(f, &e))
    };
    w(s, "tracing_on", "0")?;
    // the four noise events only: osnoise's sample_threshold (one per noise above the
    // threshold, thousands a second under an emulator) filled the instance's buffer and
    // overwrote the oldest summary lines (14 of 30 periods kept in the RT VM under TCG)
    for ev in ["irq_noise", "softirq_noise", "thread_noise", "nmi_noise"] {
        let f = format!("events/osnoise/{ev}/enable");
        if host.exists(&format!("{inst}/{f}")) {
            w(s, &f, "1")?;
        }
    }
    w(s, "current_tracer", "osnoise")?;
    w(s, "tracing_on", "1")?;
    let end = std::time::Instant::now() + cfg.duration;
    while std::time::Instant::now() < end && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50).min(end - std::time::Instant::now()));
    }
    w(s, "tracing_on", "0")?;
    let text = host.read(&format!("{inst}/trace")).map_err(|e| fail("reading its trace", &e))?;
    let mut report = parse(&text);
    report.notes.extend(lost_note(&text));
    Ok(report)
}

/// The note of a trace whose ring buffer overwrote its oldest entries (periods missing from
/// the figures), if it did.
pub fn lost_note(text: &str) -> Option<String> {
    crate::trace::overwritten(text).map(|(kept, written)| {
        format!("the tracer's buffer overflowed: {kept} of {written} entries kept, the oldest lost (the figures cover the rest of the run)")
    })
}

/// A tracefs file read in one `read` of 4 KiB.
fn read_whole(p: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut buf = [0u8; 4096];
    let n = std::fs::File::open(p)?.read(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

impl OsnoiseReport {
    /// Per CPU: the interferences' total duration by `kind:source`, largest first.
    pub fn attribution(&self, cpu: usize) -> Vec<(String, i64, u64)> {
        let mut by: BTreeMap<String, (i64, u64)> = BTreeMap::new();
        for i in self.interferences.iter().filter(|i| i.cpu == cpu) {
            // a thread's source ends with its pid: kept, as the kernel names it
            let e = by.entry(format!("{}:{}", i.kind, i.source)).or_default();
            e.0 += i.duration_ns;
            e.1 += 1;
        }
        let mut v: Vec<_> = by.into_iter().map(|(k, (ns, n))| (k, ns, n)).collect();
        v.sort_by_key(|x| std::cmp::Reverse(x.1));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary lines of Documentation/trace/osnoise-tracer.rst's example and events in
    /// the format of include/trace/events/osnoise.h.
    const TRACE: &str = "# tracer: osnoise
#
#                                _-----=> irqs-off
#                               / _----=> need-resched
#                              | / _---=> hardirq/softirq
#                              || / _--=> preempt-depth                            MAX
#                              || /                                             SINGLE      Interference counters:
#                              ||||               RUNTIME      NOISE  %% OF CPU  NOISE    +-----------------------------+
#           TASK-PID      CPU# ||||   TIMESTAMP    IN US       IN US  AVAILABLE  IN US     HW    NMI    IRQ   SIRQ THREAD
#              | |         |   ||||      |           |             |    |            |      |      |      |      |      |
           <...>-859     [001] ....    81.637220: 1000000        190  99.98100       9     18      0   1007     18      1
           <...>-860     [001] d.h.    82.000100: irq_noise: local_timer:236 start 82.000095123 duration 3418 ns
           <...>-860     [001] ..s.    82.000200: softirq_noise: TIMER:1 start 82.000196001 duration 2100 ns
           <...>-860     [001] d...    82.100000: thread_noise: kworker/1:1:80 start 82.099000000 duration 1000000 ns
           <...>-860     [001] d.h.    82.200000: irq_noise: local_timer:236 start 82.199995000 duration 3582 ns
           <...>-860     [001] ....    82.637220: 1000000       1020  99.89800    1000      0      0   1000     17      1
";

    #[test]
    fn summary_lines_and_noise_events_are_parsed() {
        let r = parse(TRACE);
        assert_eq!(r.periods.len(), 2);
        assert_eq!(
            r.periods[0],
            Period {
                cpu: 1,
                ts_ns: 81_637_220_000,
                runtime_ns: 1_000_000_000,
                noise_ns: 190_000,
                max_single_ns: 9_000,
                counts: [18, 0, 1007, 18, 1]
            }
        );
        assert_eq!(r.interferences.len(), 4);
        assert_eq!(r.interferences[0].kind, "irq");
        assert_eq!(r.interferences[0].source, "local_timer:236");
        assert_eq!(r.interferences[2].source, "kworker/1:1:80");
        assert_eq!(r.interferences[2].duration_ns, 1_000_000);
        let a = r.attribution(1);
        assert_eq!(a[0], ("thread:kworker/1:1:80".to_string(), 1_000_000, 1));
        assert_eq!(a[1], ("irq:local_timer:236".to_string(), 7_000, 2));
        assert!(r.attribution(0).is_empty());
    }

    #[test]
    fn an_overwritten_buffer_is_a_note() {
        assert!(lost_note(TRACE).is_none(), "no entries-written line: nothing said");
        let full = "# tracer: osnoise\n#\n# entries-in-buffer/entries-written: 8/8   #P:2\n";
        assert!(lost_note(full).is_none());
        let lost =
            "# tracer: osnoise\n#\n# entries-in-buffer/entries-written: 16402/41730   #P:2\n";
        let n = lost_note(lost).unwrap();
        assert!(n.contains("16402 of 41730 entries kept"), "{n}");
    }

    #[test]
    fn the_settings_written_are_the_runs() {
        let cfg = OsnoiseConfig {
            cpus: vec![1, 2, 3],
            duration: Duration::from_secs(1),
            period_us: 500_000,
            threshold_us: 0,
        };
        let s = settings(&cfg);
        assert_eq!(s[0], ("cpus", "1-3".to_string()));
        assert_eq!(s[1].1, "500000");
        assert_eq!(s[3], ("tracing_threshold", "1".to_string()));
    }
}
