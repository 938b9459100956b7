//! The supervisor's marks, which a case's setup reads: the supervisor's own thread (a profile
//! leaves it alone) and the case threads it left behind (their guards touch nothing).

use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::thread::ThreadId;

/// Case threads left behind: their guards must not touch the machine if they ever return.
static ABANDONED: Mutex<Vec<ThreadId>> = Mutex::new(Vec::new());

/// The supervisor's thread id while it supervises (0: none): a profile leaves it alone.
static SUPERVISOR: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The thread supervising the running case, if any.
pub fn supervisor_tid() -> Option<i32> {
    Some(SUPERVISOR.load(Ordering::Relaxed)).filter(|t| *t > 0)
}

/// Whether the calling thread is a case left behind by the supervisor.
pub fn abandoned() -> bool {
    let me = std::thread::current().id();
    ABANDONED.lock().map(|v| v.contains(&me)).unwrap_or(false)
}

/// The thread now supervising (0: none).
pub(super) fn set_supervisor(tid: i32) {
    SUPERVISOR.store(tid, Ordering::Relaxed);
}

/// The case thread `id` is left behind.
pub(super) fn abandon(id: ThreadId) {
    if let Ok(mut v) = ABANDONED.lock() {
        v.push(id);
    }
}
