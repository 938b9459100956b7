//! What every probe holds for the length of its run: the memory lock and, when asked, a
//! /dev/cpu_dma_latency request. Each comes as a guard (dropped: undone) and what became of
//! it, as the result documents record it. And how a probe waits for its measuring threads.

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
