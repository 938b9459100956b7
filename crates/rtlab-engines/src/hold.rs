//! What every probe holds for the length of its run: the memory lock and, when asked, a
//! /dev/cpu_dma_latency request. Each comes as a guard (dropped: undone) and what became of
//! it, as the result documents record it. And the skeleton the multi-threaded engines (timer,
//! cyclic) share: start one measuring thread each, stop every one already started when one
//! cannot start, watch their progress from the calling thread, join them ([`run_threads`]).

use rtlab_sys::memory::MemoryLock;
use rtlab_sys::pmqos::CpuDmaLatency;
use std::path::Path;

/// mlockall when `on`: the guard, and Ok / why it failed (None: not asked).
pub fn lock_memory(on: bool) -> (Option<MemoryLock>, Option<Result<(), String>>) {
    if !on {
        return (None, None);
    }
    match MemoryLock::lock_all() {
        Ok(g) => (Some(g), Some(Ok(()))),
        Err(e) => (None, Some(Err(e.to_string()))),
    }
}

/// Hold /dev/cpu_dma_latency at `us` when asked: the guard, and the held value / why it
/// could not be held (None: not asked).
pub fn cpu_dma_latency(us: Option<i32>) -> (Option<CpuDmaLatency>, Option<Result<i32, String>>) {
    let Some(v) = us else { return (None, None) };
    match CpuDmaLatency::hold(Path::new("/dev/cpu_dma_latency"), v) {
        Ok(g) => (Some(g), Some(Ok(v))),
        Err(e) => (None, Some(Err(format!("/dev/cpu_dma_latency: {e}")))),
    }
}

/// A measuring thread panicked (a bug in rtlab).
#[derive(Debug, thiserror::Error)]
#[error("a measuring thread panicked")]
pub struct ThreadPanicked;

/// Report progress from the calling thread (never a measuring one) every 100 ms until every
/// measuring thread has ended, then join them in order.
pub fn join_watching<T>(
    handles: Vec<rtlab_sys::sched::RtThread<T>>,
    progress: &[std::sync::Arc<std::sync::atomic::AtomicU64>],
    planned: u64,
    on_progress: &mut impl FnMut(u64, u64),
) -> Result<Vec<T>, ThreadPanicked> {
    loop {
        let done: u64 = progress.iter().map(|p| p.load(std::sync::atomic::Ordering::Relaxed)).sum();
        on_progress(done, planned);
        if handles.iter().all(|h| h.is_finished()) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    handles.into_iter().map(|h| h.join().map_err(|()| ThreadPanicked)).collect()
}

/// How many per-window maxima a stream of `longest_ns` keeps at `window_ns` each (a margin of
/// two, at least 16, at most 65,536).
pub fn window_capacity(longest_ns: i64, window_ns: i64) -> usize {
    ((longest_ns / window_ns.max(1)) as usize + 2).clamp(16, 1 << 16)
}

/// The slots a measuring thread's grid is planned to have: `count` slots, or as many
/// `interval_ns` as fit in `duration_ns`, the fewer of the two (0 when neither is given).
pub fn planned_slots(count: Option<u64>, duration_ns: Option<i64>, interval_ns: i64) -> u64 {
    let by_duration = duration_ns.map(|d| (d / interval_ns.max(1)) as u64);
    match (count, by_duration) {
        (Some(c), Some(d)) => c.min(d),
        (Some(c), None) | (None, Some(c)) => c,
        (None, None) => 0,
    }
}

/// Why the measuring threads did not all run to their end.
#[derive(Debug)]
pub enum RunError<E> {
    /// Starting thread `i` failed (its error); every thread started before it was stopped.
    Spawn(E),
    Panicked(ThreadPanicked),
}

/// The engines' common run: `spawn(i, progress_i)` starts measuring thread i (`n` of them);
/// when one cannot start, `stop` is raised, every thread already started is joined and
/// `on_spawn_error` undoes what the engine started beside them. Then progress is reported
/// from the calling thread ([`join_watching`]) until all are done. Returns their results in
/// order and the time from the first spawn to the last join.
pub fn run_threads<T, E>(
    n: usize,
    stop: &std::sync::atomic::AtomicBool,
    planned: u64,
    on_progress: &mut impl FnMut(u64, u64),
    mut spawn: impl FnMut(
        usize,
        std::sync::Arc<std::sync::atomic::AtomicU64>,
    ) -> Result<rtlab_sys::sched::RtThread<T>, E>,
    on_spawn_error: impl FnOnce(),
) -> Result<(Vec<T>, i64), RunError<E>> {
    let progress: Vec<std::sync::Arc<std::sync::atomic::AtomicU64>> =
        (0..n).map(|_| std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0))).collect();
    let t0 = rtlab_sys::clock::monotonic_ns();
    let mut handles = Vec::with_capacity(n);
    for (i, p) in progress.iter().enumerate() {
        match spawn(i, p.clone()) {
            Ok(h) => handles.push(h),
            Err(e) => {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                for h in handles {
                    let _ = h.join();
                }
                on_spawn_error();
                return Err(RunError::Spawn(e));
            }
        }
    }
    let results =
        join_watching(handles, &progress, planned, on_progress).map_err(RunError::Panicked)?;
    Ok((results, rtlab_sys::clock::monotonic_ns() - t0))
}
