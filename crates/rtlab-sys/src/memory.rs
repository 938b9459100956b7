//! Locking memory (mlockall) and prefaulting a thread's stack.
//!
//! Contract: [`MemoryLock`] undoes itself (munlockall) in Drop; `prefault_stack` touches
//! the given number of stack bytes so that the hot loop takes no page fault on its stack.

use crate::SysError;

/// mlockall(MCL_CURRENT | MCL_FUTURE) held until dropped.
#[derive(Debug)]
pub struct MemoryLock(());

impl MemoryLock {
    pub fn lock_all() -> Result<MemoryLock, SysError> {
        // SAFETY: mlockall has no memory-safety preconditions.
        let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
        if rc != 0 {
            return Err(SysError::Os {
                what: "mlockall(MCL_CURRENT|MCL_FUTURE)".into(),
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(MemoryLock(()))
    }
}

impl Drop for MemoryLock {
    fn drop(&mut self) {
        // SAFETY: munlockall has no preconditions; undoes lock_all.
        unsafe { libc::munlockall() };
    }
}

/// Touch `bytes` of the current thread's stack (rounded down to 64 KiB steps), so that
/// its pages are present (and locked, under mlockall) before the measurement starts.
#[inline(never)]
pub fn prefault_stack(bytes: usize) {
    const STEP: usize = 64 * 1024;
    #[inline(never)]
    fn touch(left: usize) {
        let mut buf = [0u8; STEP];
        std::hint::black_box(&mut buf);
        if left > STEP {
            touch(left - STEP);
        }
        std::hint::black_box(&buf);
    }
    touch(bytes);
}
