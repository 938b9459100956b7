//! A counting global allocator for the hot-loop tests: it counts the allocations of the
//! thread that asked ([`counting`]), never another's (the test harness, a reflector thread).
//! A test binary installs it with
//! `#[global_allocator] static A: common::Counting = common::Counting;`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

pub struct Counting;

thread_local! {
    /// This thread counts, and how many allocations it made while counting (const-initialized:
    /// reading them never allocates).
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // try_with: no panic while a thread's locals are being torn down
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
    }
}

// SAFETY: every call goes straight to the system allocator with the caller's arguments; the
// counting touches only const-initialized thread locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count();
        System.realloc(p, l, n)
    }
}

/// The allocations `f` makes on this thread.
pub fn allocations_of<R>(f: impl FnOnce() -> R) -> (R, u64) {
    ALLOCS.with(|a| a.set(0));
    COUNTING.with(|c| c.set(true));
    let r = f();
    COUNTING.with(|c| c.set(false));
    (r, ALLOCS.with(Cell::get))
}
