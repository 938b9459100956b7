//! Real runs of the cyclic probe: 200 slots at 1 ms with 100 us of calibrated computation,
//! as SCHED_OTHER (no root needed) and as SCHED_FIFO 80 (root: the `_as_root` test skips
//! without it), a memory walk, two threads, and the stop flag. Counts, fields and the
//! presence of samples are asserted; never an upper bound on a time.

use rtlab_core::rt::{Policy, RtSettings};
use rtlab_engines::cyclic::{
    run, run_with_spike, CyclicConfig, CyclicOutcome, Work, JOB_METRIC, RESPONSE_METRIC,
    WAKEUP_METRIC,
};
use rtlab_engines::timer::LoopEnd;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

fn compute_cfg(rt: RtSettings) -> CyclicConfig {
    let mut c = CyclicConfig::new(1_000_000, Work::Compute { ns: 100_000 }, rt);
    c.count = Some(200);
    c
}

/// What every finished run of `slots` slots per thread must show: each slot measured or
/// skipped (overrun), never both, never neither.
fn check_counts(out: &CyclicOutcome, cfg: &CyclicConfig, slots: u64) {
    assert!(!out.interrupted);
    assert_eq!(out.threads.len(), cfg.threads);
    for t in &out.threads {
        assert_eq!(t.end, LoopEnd::Count);
        let cycles = t.cycles();
        assert_eq!(cycles + t.response.overruns, slots);
        assert!(cycles > 0);
        assert_eq!(t.wakeup.count(), cycles);
        assert_eq!(t.job.count(), cycles);
        assert!(t.job.running.min > 0, "every job takes some time: {}", t.job.running.min);
        assert!(t.wakeup.running.min >= 0, "a wake-up is never before its slot");
        assert!(t.response.running.min >= t.job.running.min);
        assert!(t.response.missed <= cycles);
        assert!(t.response.origin_monotonic_ns.is_some());
    }
    let streams = out.streams(cfg);
    let per_thread = 3 * cfg.threads + usize::from(cfg.threads > 1);
    assert_eq!(streams.len(), per_thread);
    for i in 0..cfg.threads {
        let cycles = out.threads[i].cycles();
        let s = &streams[3 * i];
        assert_eq!(
            (s.name.as_str(), s.metric.as_str()),
            (format!("thread{i}").as_str(), RESPONSE_METRIC)
        );
        assert_eq!(s.stats.count, cycles);
        assert!(s.stats.missed.is_some() && s.stats.overruns.is_some());
        assert_eq!(s.deadline_ns, cfg.deadline());
        assert_eq!(s.labels["work"], cfg.work.kind());
        let w = &streams[3 * i + 1];
        assert_eq!(
            (w.name.clone(), w.metric.as_str()),
            (format!("thread{i}.wakeup"), WAKEUP_METRIC)
        );
        assert_eq!(w.stats.missed, None);
        let j = &streams[3 * i + 2];
        assert_eq!((j.name.clone(), j.metric.as_str()), (format!("thread{i}.job"), JOB_METRIC));
        assert_eq!(j.stats.count, cycles);
        assert!(j.stats.min_ns.unwrap() > 0);
        assert_eq!(j.stats.overruns, None);
    }
}

#[test]
fn compute_200_cycles_at_1ms_as_sched_other() {
    let cfg = compute_cfg(RtSettings::normal());
    let mut calls = 0;
    let out = run(&cfg, Arc::new(AtomicBool::new(false)), |_, planned| {
        assert_eq!(planned, 200);
        calls += 1;
    })
    .unwrap();
    assert!(calls >= 2, "progress is reported during and after the run");
    check_counts(&out, &cfg, 200);
    let t = &out.threads[0];
    assert_eq!(t.policy_seen.0, Some(Policy::Other));
    let c = t.calibration.as_ref().expect("a computation is calibrated");
    assert_eq!(c.asked_ns, 100_000);
    assert!(c.iterations > 0 && c.iterations_per_us > 0.0 && c.check_ns > 0);
    let s = &out.streams(&cfg)[0];
    assert_eq!(s.labels["work_iterations"], c.iterations.to_string());
    assert_eq!(s.labels["policy_seen"], "other");
}

#[test]
fn compute_200_cycles_at_1ms_as_sched_fifo_as_root() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("SCHED_FIFO needs root"));
        return;
    }
    let rt = RtSettings { cpus: Some(vec![0]), ..RtSettings::fifo80() };
    let cfg = compute_cfg(rt);
    let out = run(&cfg, Arc::new(AtomicBool::new(false)), |_, _| {}).unwrap();
    check_counts(&out, &cfg, 200);
    let t = &out.threads[0];
    assert_eq!(t.policy_seen, (Some(Policy::Fifo), 80));
    assert_eq!(t.cpus_seen, vec![0]);
    assert_eq!(t.calibration.as_ref().unwrap().cpu, Some(0), "calibrated on its own CPU");
    assert_eq!(out.memory_lock, Some(Ok(())));
}

#[test]
fn memory_walk_two_threads_with_duration() {
    let mut cfg = CyclicConfig::new(
        1_000_000,
        Work::MemoryWalk { bytes: 4 << 20, stride: 4096 },
        RtSettings::normal(),
    );
    cfg.threads = 2;
    cfg.duration_ns = Some(100_000_000);
    let out = run(&cfg, Arc::new(AtomicBool::new(false)), |_, _| {}).unwrap();
    assert!(!out.interrupted);
    for t in &out.threads {
        assert_eq!(t.end, LoopEnd::Duration);
        assert!(t.calibration.is_none());
        // 100 slots in the duration: each was measured or skipped
        assert_eq!(t.cycles() + t.response.overruns, 100);
        assert!(t.job.running.min > 0);
    }
    let streams = out.streams(&cfg);
    assert_eq!(streams.len(), 7);
    let all = streams.last().unwrap();
    assert_eq!((all.name.as_str(), all.metric.as_str()), ("all", RESPONSE_METRIC));
    assert_eq!(all.stats.count, out.threads.iter().map(|t| t.cycles()).sum::<u64>());
    assert_eq!(streams[0].labels["work_touches"], "1024");
}

#[test]
fn the_stop_flag_ends_a_run_and_keeps_what_was_measured() {
    let mut cfg = compute_cfg(RtSettings::normal());
    cfg.count = None;
    cfg.duration_ns = Some(60_000_000_000);
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let out = run(&cfg, stop, |done, _| {
        if done >= 20 {
            s2.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    })
    .unwrap();
    assert!(out.interrupted);
    assert!(out.threads[0].cycles() >= 20);
}

#[test]
fn a_response_above_the_spike_threshold_raises_the_flag() {
    let cfg = CyclicConfig { count: Some(20), ..compute_cfg(RtSettings::normal()) };
    let flag = Arc::new(rtlab_core::sink::SpikeFlag::default());
    let hook = rtlab_core::sink::SpikeHook { threshold_ns: 0, flag: flag.clone(), source: 0 };
    let out =
        run_with_spike(&cfg, Arc::new(AtomicBool::new(false)), Some(hook), |_, _| {}).unwrap();
    assert_eq!(out.threads[0].cycles() + out.threads[0].response.overruns, 20);
    let (index, _, value) = flag.get().expect("every response is above 0 ns");
    assert_eq!(index, 0);
    assert!(value > 0);
}

#[test]
fn bad_config_is_refused_before_anything_runs() {
    let cfg = CyclicConfig { count: Some(0), ..compute_cfg(RtSettings::normal()) };
    let e = run(&cfg, Arc::new(AtomicBool::new(false)), |_, _| {}).err().unwrap();
    assert!(e.to_string().contains("--count"));
}
