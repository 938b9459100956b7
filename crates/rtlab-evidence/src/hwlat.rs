//! The kernel's hardware latency detector driven for the noise probe (`rtlab noise --tracer
//! hwlat`): its kernel thread spins with interrupts off for `width` of every `window`,
//! reading the time in a loop; a gap it sees with interrupts off is time the kernel did not
//! take (an SMI, firmware, the hypervisor). Source: Documentation/trace/hwlat_detector.rst
//! (torvalds/linux) and kernel/trace/trace_hwlat.c: one sample per window whose largest gap
//! is above `tracing_thresh`: `#N inner/outer(us): A/B ts:SECS.NS count:C` and, when NMIs came
//! in the window, ` nmi-total:T nmi-count:K` (T in us).
//!
//! Contract: every tracefs change goes through a journaled [`Session`] and is undone before
//! [`run`] returns (or by `rtlab tune restore` after a kill -9): tracefs mounted if needed, a
//! tracefs instance of rtlab's own (`instances/rtlab-hwlat-PID`, removed after; Linux 6.1
//! runs hwlat in an instance, one hwlat at a time machine-wide), and the global settings it
//! writes (`tracing_thresh`, `hwlat_detector/width`, `hwlat_detector/window`,
//! `hwlat_detector/mode` where the kernel has it) written back. The thread goes round the
//! CPUs of `cpus` one window each (mode `round-robin`, the kernel's default and its only
//! behaviour before the `mode` file). Refused in one line, before anything is changed, when
//! hwlat runs already (the top-level `current_tracer` or another instance's): the kernel runs
//! one at a time. The instance's `trace` is read once, at the end.

use crate::trace::parse_trace;
use rtlab_host::host::Host;
use rtlab_host::session::{Action, Session};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What to run.
#[derive(Clone, Debug)]
pub struct HwlatConfig {
    pub cpus: Vec<usize>,
    /// How long the detector runs.
    pub duration: Duration,
    /// One window (us): the thread spins `width_us` of it, then sleeps, then moves on.
    pub window_us: u64,
    /// How long it spins in each window (us).
    pub width_us: u64,
    /// A gap below this (us) is not reported (`tracing_thresh`).
    pub threshold_us: u64,
}

/// The mode rtlab asks for: one thread going round the CPUs, a window on each.
pub const MODE: &str = "round-robin";

/// One sample: a window whose largest gap was above the threshold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// The CPU it was written on (the one the thread spun on).
    pub cpu: usize,
    /// When it was written, at the window's width end (trace clock, ns).
    pub ts_ns: u64,
    /// Its sequence number (`#N`).
    pub seq: u64,
    /// The largest gap between two reads of one loop iteration (ns).
    pub inner_ns: i64,
    /// The largest gap between two iterations (ns).
    pub outer_ns: i64,
    /// Gaps above the threshold in the window (`count`; 0 where the kernel does not say).
    pub count: u64,
    /// Time in NMIs during the window (ns) and how many came.
    pub nmi_total_ns: i64,
    pub nmi_count: u64,
}

impl Sample {
    /// The window's largest gap, inner or outer.
    pub fn gap_ns(&self) -> i64 {
        self.inner_ns.max(self.outer_ns)
    }
}

/// What the detector reported.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HwlatReport {
    pub samples: Vec<Sample>,
    /// The mode it ran in (`round-robin`, or `round-robin (no mode file)` on older kernels).
    pub mode: String,
    /// How long it ran: from `tracing_on` 1 to 0 (ns).
    pub ran_ns: i64,
    /// What did not go as planned (tracefs not fully put back).
    pub notes: Vec<String>,
}

/// `key:value` of a sample's fields.
fn field<'a>(w: &[&'a str], key: &str) -> Option<&'a str> {
    w.iter().find_map(|x| x.strip_prefix(key)?.strip_prefix(':'))
}

/// Parse an hwlat instance's `trace`: its samples (other lines are skipped).
pub fn parse(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for e in parse_trace(text) {
        let Some(seq) = e.name.strip_prefix('#').and_then(|n| n.parse().ok()) else { continue };
        // "inner/outer(us): 16078/12030 ts:1795673787.595209500 count:156 [nmi-total:..]"
        let w: Vec<&str> = e.fields.split_whitespace().collect();
        let Some(k) = w.iter().position(|x| x.starts_with("inner/outer")) else { continue };
        let Some((inner, outer)) = w.get(k + 1).and_then(|v| v.split_once('/')) else {
            continue;
        };
        let us = |v: &str| v.parse::<i64>().ok().map(|v| v * 1_000);
        let (Some(inner_ns), Some(outer_ns)) = (us(inner), us(outer)) else { continue };
        let num = |key: &str| field(&w, key).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        out.push(Sample {
            cpu: e.cpu,
            ts_ns: e.ts_ns,
            seq,
            inner_ns,
            outer_ns,
            count: num("count"),
            nmi_total_ns: num("nmi-total") as i64 * 1_000,
            nmi_count: num("nmi-count"),
        });
    }
    out
}

/// `cpus` as a `tracing_cpumask` value: hex, comma-separated 32-bit groups, highest first.
pub fn cpumask(cpus: &[usize]) -> String {
    let top = cpus.iter().max().copied().unwrap_or(0);
    let mut groups = vec![0u32; top / 32 + 1];
    for &c in cpus {
        groups[c / 32] |= 1 << (c % 32);
    }
    let mut s = format!("{:x}", groups[groups.len() - 1]);
    for g in groups.iter().rev().skip(1) {
        s.push_str(&format!(",{g:08x}"));
    }
    s
}

/// The global settings written (paths under tracefs), in the order written. `now` reads a
/// setting's current value: the kernel refuses a width above the window, so the width goes
/// first when it fits the window in force, else the window first.
fn settings(cfg: &HwlatConfig, now: impl Fn(&str) -> Option<u64>) -> Vec<(&'static str, String)> {
    let width = ("hwlat_detector/width", cfg.width_us.to_string());
    let window = ("hwlat_detector/window", cfg.window_us.to_string());
    let mut v = vec![("tracing_thresh", cfg.threshold_us.max(1).to_string())];
    if now("hwlat_detector/window").is_some_and(|w| cfg.width_us <= w) {
        v.extend([width, window]);
    } else {
        v.extend([window, width]);
    }
    v.push(("hwlat_detector/mode", MODE.into()));
    v
}

/// Where hwlat runs already under tracefs `dir`: the top-level tracer or an instance's
/// `current_tracer` that reads `hwlat` (None: nowhere, or tracefs not mounted).
pub fn running_where(host: &dyn Host, dir: &str) -> Option<String> {
    let is_hwlat = |p: &str| host.read(p).is_ok_and(|t| t.trim() == "hwlat");
    if is_hwlat(&format!("{dir}/current_tracer")) {
        return Some(format!("{dir}/current_tracer"));
    }
    let instances = std::fs::read_dir(host.path(&format!("{dir}/instances"))).ok()?;
    instances.filter_map(|e| e.ok()?.file_name().into_string().ok()).find_map(|name| {
        let p = format!("{dir}/instances/{name}/current_tracer");
        is_hwlat(&p).then_some(p)
    })
}

/// The line of a refusal: hwlat runs already, at `at`.
pub fn already_running(at: &str) -> String {
    format!("--tracer hwlat: hwlat runs already ({at} reads hwlat) and the kernel runs one at a time: stop it first (echo nop > {at})")
}

/// Run the detector in an instance of its own for `cfg.duration` (or until `stop`), read what
/// it reported, put tracefs back. `dir` is the tracefs directory (mounted already or mounted
/// here, journaled). Err: one line naming what failed (nothing left changed).
pub fn run(
    host: &dyn Host,
    journal: &Path,
    dir: &str,
    cfg: &HwlatConfig,
    stop: &AtomicBool,
) -> Result<HwlatReport, String> {
    if cfg.width_us == 0 || cfg.width_us > cfg.window_us {
        return Err(format!(
            "--tracer hwlat: width {} us must be above 0 and at most the window ({} us)",
            cfg.width_us, cfg.window_us
        ));
    }
    crate::noise_tracer::run_journaled(
        host,
        journal,
        dir,
        "hwlat",
        |r: &mut HwlatReport| &mut r.notes,
        |s| run_in(s, host, dir, cfg, stop),
    )
}

fn run_in(
    s: &mut Session<'_>,
    host: &dyn Host,
    dir: &str,
    cfg: &HwlatConfig,
    stop: &AtomicBool,
) -> Result<HwlatReport, String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("--tracer hwlat: {what}: {e}");
    if let Some(at) = running_where(host, dir) {
        return Err(already_running(&at));
    }
    let now = |k: &str| host.read(&format!("{dir}/{k}")).ok()?.trim().parse().ok();
    let mut mode = format!("{MODE} (no mode file: the kernel's only behaviour)");
    for (k, v) in settings(cfg, now) {
        let path = format!("{dir}/{k}");
        if k == "hwlat_detector/mode" {
            if !host.exists(&path) {
                continue;
            }
            mode = MODE.into();
        }
        s.apply(&Action::WriteFile { path, value: v }).map_err(|e| fail(k, &e))?;
    }
    let inst = format!("{dir}/instances/rtlab-hwlat-{}", std::process::id());
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
    w(s, "tracing_cpumask", &cpumask(&cfg.cpus))?;
    w(s, "current_tracer", "hwlat")?;
    w(s, "tracing_on", "1")?;
    let start = std::time::Instant::now();
    let end = start + cfg.duration;
    while std::time::Instant::now() < end && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50).min(end - std::time::Instant::now()));
    }
    w(s, "tracing_on", "0")?;
    let ran_ns = start.elapsed().as_nanos().min(i64::MAX as u128) as i64;
    let text = host.read(&format!("{inst}/trace")).map_err(|e| fail("reading its trace", &e))?;
    let notes = crate::osnoise::lost_note(&text).into_iter().collect();
    Ok(HwlatReport { samples: parse(&text), mode, ran_ns, notes })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header and the first two samples captured from Debian's 6.1.0-56-rt-amd64 in
    /// scripts/rt-vm.sh's guest (QEMU TCG: the emulation's own stalls are the "hardware"
    /// latency), hwlat in an instance with tracing_cpumask 2; the guest had no NMIs, so the
    /// last line's NMI fields are in the format of kernel/trace/trace_output.c
    /// (trace_hwlat_print: nmi-total in us).
    const TRACE: &str = "# tracer: hwlat
#
# entries-in-buffer/entries-written: 3/3   #P:2
#
#                                _-------=> irqs-off/BH-disabled
#                               / _------=> need-resched
#                              | / _-----=> need-resched-lazy
#                              || / _----=> hardirq/softirq
#                              ||| / _---=> preempt-depth
#                              |||| / _--=> preempt-lazy-depth
#                              ||||| / _-=> migrate-disable
#                              |||||| /     delay
#           TASK-PID     CPU#  |||||||  TIMESTAMP  FUNCTION
#              | |         |   |||||||      |         |
           <...>-291     [001] dn.....    27.218992: #1     inner/outer(us): 12057/12063 ts:1795673853.470489950 count:39
           <...>-291     [001] d......    31.093128: #10    inner/outer(us): 4297/19254 ts:1795673857.345919660 count:65
           <...>-317     [000] d......    33.588541: #6     inner/outer(us):   19/26    ts:1581527483.343962693 count:6 nmi-total:4 nmi-count:1
";

    #[test]
    fn samples_are_parsed_with_their_cpu_counts_and_nmis() {
        let s = parse(TRACE);
        assert_eq!(s.len(), 3);
        assert_eq!(
            s[0],
            Sample {
                cpu: 1,
                ts_ns: 27_218_992_000,
                seq: 1,
                inner_ns: 12_057_000,
                outer_ns: 12_063_000,
                count: 39,
                nmi_total_ns: 0,
                nmi_count: 0,
            }
        );
        assert_eq!(s[0].gap_ns(), 12_063_000);
        assert_eq!(
            (s[1].seq, s[1].inner_ns, s[1].outer_ns, s[1].count),
            (10, 4_297_000, 19_254_000, 65)
        );
        assert_eq!(
            (s[2].cpu, s[2].gap_ns(), s[2].nmi_total_ns, s[2].nmi_count),
            (0, 26_000, 4_000, 1)
        );
        // other tracers' lines and a torn line are not samples
        let other =
            "<idle>-0 [001] d.h. 82.0: irq_noise: local_timer:236 start 82.0 duration 3 ns\n\
                     <...>-303 [001] d... 25.4: #7 inner/outer(us): 12/\n";
        assert!(parse(other).is_empty());
    }

    #[test]
    fn the_settings_written_are_the_runs_and_the_width_fits_every_step() {
        let cfg = HwlatConfig {
            cpus: vec![1],
            duration: Duration::from_secs(1),
            window_us: 2_000_000,
            width_us: 1_000_000,
            threshold_us: 0,
        };
        // the kernel's defaults in force (window 1 s): the width fits it, written first
        let s = settings(&cfg, |_| Some(1_000_000));
        let keys: Vec<&str> = s.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            keys,
            [
                "tracing_thresh",
                "hwlat_detector/width",
                "hwlat_detector/window",
                "hwlat_detector/mode"
            ]
        );
        assert_eq!(s[0].1, "1", "a threshold of 0 would be the kernel's default of 10 us");
        assert_eq!(
            (s[1].1.as_str(), s[2].1.as_str(), s[3].1.as_str()),
            ("1000000", "2000000", MODE)
        );
        // a window in force narrower than the new width: the window first
        let s = settings(&cfg, |_| Some(500_000));
        assert_eq!((s[1].0, s[2].0), ("hwlat_detector/window", "hwlat_detector/width"));
    }

    #[test]
    fn the_cpumask_is_hex_in_32_bit_groups() {
        assert_eq!(cpumask(&[1]), "2");
        assert_eq!(cpumask(&[0, 1, 2, 3]), "f");
        assert_eq!(cpumask(&[1, 35]), "8,00000002");
        assert_eq!(cpumask(&[64]), "1,00000000,00000000");
    }

    #[test]
    fn every_change_is_journaled_and_put_back() {
        use rtlab_host::testing::put;
        let d = tempfile::tempdir().unwrap();
        let host = rtlab_host::host::FakeHost::new(d.path());
        let t = "sys/kernel/tracing";
        put(d.path(), &format!("{t}/available_tracers"), "hwlat osnoise nop\n");
        put(d.path(), &format!("{t}/current_tracer"), "nop\n");
        put(d.path(), &format!("{t}/tracing_thresh"), "0\n");
        put(d.path(), &format!("{t}/hwlat_detector/width"), "500000\n");
        put(d.path(), &format!("{t}/hwlat_detector/window"), "1000000\n");
        // mode none in force: rtlab's round-robin written, "none" written back
        put(d.path(), &format!("{t}/hwlat_detector/mode"), "[none] round-robin per-cpu\n");
        std::fs::create_dir_all(d.path().join(format!("{t}/instances"))).unwrap();
        let journal = d.path().join("journal");
        let cfg = HwlatConfig {
            cpus: vec![1],
            duration: Duration::from_millis(1),
            window_us: 100_000,
            width_us: 50_000,
            threshold_us: 5,
        };
        let read = |p: &str| std::fs::read_to_string(d.path().join(format!("{t}/{p}"))).unwrap();
        let run = || run(&host, &journal, "/sys/kernel/tracing", &cfg, &AtomicBool::new(false));
        // the fake kernel's mkdir makes nothing: without its files the run stops at the first
        // instance write, after the global ones, and puts them back
        let e = run().unwrap_err();
        assert!(e.starts_with("--tracer hwlat: tracing_on:") && !e.contains('\n'), "{e}");
        let as_found = || {
            assert_eq!(read("tracing_thresh").trim(), "0");
            assert_eq!(read("hwlat_detector/width").trim(), "500000");
            assert_eq!(read("hwlat_detector/window").trim(), "1000000");
            assert_eq!(read("hwlat_detector/mode").trim(), "none");
            assert!(!journal.exists(), "the journal is removed once everything is back");
        };
        as_found();
        // the instance as the kernel makes it: the run, its samples, everything put back
        let inst = format!("{t}/instances/rtlab-hwlat-{}", std::process::id());
        put(d.path(), &format!("{inst}/tracing_on"), "1\n");
        put(d.path(), &format!("{inst}/tracing_cpumask"), "3\n");
        put(d.path(), &format!("{inst}/current_tracer"), "nop\n");
        put(d.path(), &format!("{inst}/trace"), TRACE);
        let r = run().unwrap();
        assert_eq!((r.samples.len(), r.mode.as_str(), r.notes.len()), (3, MODE, 0));
        as_found();
        let i = |f: &str| read(&format!("instances/rtlab-hwlat-{}/{f}", std::process::id()));
        assert_eq!(
            (i("tracing_on"), i("tracing_cpumask"), i("current_tracer")),
            ("1".into(), "3".into(), "nop".into())
        );
        let c = host.commands();
        assert!(c.iter().any(|c| c.starts_with("mkdir ") && c.ends_with(&inst)), "{c:?}");
        assert!(c.last().is_some_and(|c| c.starts_with("rmdir ") && c.ends_with(&inst)), "{c:?}");
        // hwlat running elsewhere: one line, nothing written
        put(d.path(), &format!("{t}/current_tracer"), "hwlat\n");
        let e = run().unwrap_err();
        assert!(e.contains("hwlat runs already") && !e.contains('\n'), "{e}");
        assert_eq!(read("tracing_thresh").trim(), "0");
    }
}
