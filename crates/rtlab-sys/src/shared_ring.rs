//! A ring of samples in memory shared with a child process: the child's callback writes, this
//! process reads (rtlab timer's roscpp modes: the node runs in a process of its own, and its
//! callbacks write into this ring; roscpp/shim.h's `struct rros1_ring`, the same layout).
//!
//! Contract: single producer, single consumer. The producer writes slot `head % capacity` and
//! then advances `head` (release); the consumer reads up to `head` (acquire) and advances
//! `tail`. A full ring drops the sample and counts it: the producer never waits. The memory
//! is an anonymous file (`memfd_create`) whose descriptor the child inherits ([`SharedRing::fd`]
//! names it on the child's command line, [`SharedRing::open`] maps it there). Nothing here
//! allocates after [`SharedRing::create`], and nothing prints.

use crate::SysError;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// One sample (shim.h's `struct rros1_sample`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingSample {
    pub error: i64,
    pub second: i64,
    pub at_monotonic: i64,
}

/// The ring's header (shim.h's `struct rros1_ring`), followed by `capacity` samples.
#[repr(C)]
struct Header {
    capacity: u64,
    head: AtomicU64,
    tail: AtomicU64,
    dropped: AtomicU64,
    skipped: AtomicU64,
    stop: AtomicU32,
    pad: u32,
}

/// The ring, mapped in this process.
pub struct SharedRing {
    fd: OwnedFd,
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is shared memory accessed only through atomics (the header) and
// slots published by them (release/acquire); it lives as long as the value.
unsafe impl Send for SharedRing {}
// SAFETY: as above.
unsafe impl Sync for SharedRing {}

fn bytes(capacity: u64) -> usize {
    std::mem::size_of::<Header>() + capacity as usize * std::mem::size_of::<RingSample>()
}

fn os(what: &str) -> SysError {
    SysError::Os { what: what.to_string(), source: std::io::Error::last_os_error() }
}

fn not_a_ring(fd: RawFd) -> SysError {
    SysError::Os {
        what: format!("mapping descriptor {fd}"),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not a shared ring"),
    }
}

impl SharedRing {
    /// A ring of `capacity` samples in a new anonymous file (kept across exec: the child
    /// inherits the descriptor).
    pub fn create(capacity: u64) -> Result<SharedRing, SysError> {
        let capacity = capacity.max(1);
        // SAFETY: a NUL-terminated name; flags 0 (no CLOEXEC: the child inherits it).
        let raw = unsafe { libc::memfd_create(c"rtlab-ring".as_ptr(), 0) };
        if raw < 0 {
            return Err(os("memfd_create for a shared ring"));
        }
        // SAFETY: a descriptor just opened and owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let len = bytes(capacity);
        // SAFETY: fd is an open memfd.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(os("sizing a shared ring"));
        }
        let ring = SharedRing::map(fd, len)?;
        // SAFETY: the mapping is at least a header long and zeroed (a new file); nothing
        // else maps it yet.
        unsafe { (*(ring.base as *mut Header)).capacity = capacity };
        Ok(ring)
    }

    /// Map the ring the parent made, from the inherited descriptor `fd` (the child's side).
    pub fn open(fd: RawFd) -> Result<SharedRing, SysError> {
        // SAFETY: libc::stat is plain data, valid when zeroed.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat on a descriptor number with a valid out-pointer; a bad one is EBADF.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return Err(os(&format!("the shared ring's descriptor {fd}")));
        }
        let len = st.st_size as usize;
        if len < std::mem::size_of::<Header>() {
            return Err(not_a_ring(fd));
        }
        // SAFETY: an open descriptor this process now owns (the parent gave it for this).
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        let ring = SharedRing::map(owned, len)?;
        if bytes(ring.header().capacity) != len {
            return Err(not_a_ring(fd));
        }
        Ok(ring)
    }

    fn map(fd: OwnedFd, len: usize) -> Result<SharedRing, SysError> {
        // SAFETY: a shared, read-write mapping of `len` bytes of an open file of that size.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(os("mapping a shared ring"));
        }
        Ok(SharedRing { fd, base: base as *mut u8, len })
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping starts with a Header (create/open checked its size); its
        // fields other than `capacity` are atomics.
        unsafe { &*(self.base as *const Header) }
    }

    fn slot(&self, i: u64) -> *mut RingSample {
        let h = self.header();
        // SAFETY: i % capacity is within the `capacity` samples after the header.
        unsafe {
            (self.base.add(std::mem::size_of::<Header>()) as *mut RingSample)
                .add((i % h.capacity) as usize)
        }
    }

    /// The descriptor to name on the child's command line (inherited across exec).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The mapping, for a C producer (shim.h's `struct rros1_ring *`).
    pub fn as_ptr(&self) -> *mut std::ffi::c_void {
        self.base as *mut std::ffi::c_void
    }

    /// Write a sample (the producer's side; Rust producers in tests). False: the ring was full
    /// and the sample dropped (counted).
    pub fn push(&self, s: RingSample) -> bool {
        let h = self.header();
        let head = h.head.load(Ordering::Relaxed);
        if head - h.tail.load(Ordering::Acquire) >= h.capacity {
            h.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        // SAFETY: slot `head` is not visible to the consumer until head advances (below).
        unsafe { self.slot(head).write(s) };
        h.head.store(head + 1, Ordering::Release);
        true
    }

    /// Read every sample written so far, oldest first (the consumer's side).
    pub fn drain(&self, mut f: impl FnMut(RingSample)) -> u64 {
        let h = self.header();
        let head = h.head.load(Ordering::Acquire);
        let mut tail = h.tail.load(Ordering::Relaxed);
        let n = head - tail;
        while tail < head {
            // SAFETY: slots before `head` were published by the producer's release store.
            f(unsafe { self.slot(tail).read() });
            tail += 1;
            h.tail.store(tail, Ordering::Release);
        }
        n
    }

    /// Ask the producer to stop (its loop reads the flag).
    pub fn stop(&self) {
        self.header().stop.store(1, Ordering::Relaxed);
    }

    pub fn stopped(&self) -> bool {
        self.header().stop.load(Ordering::Relaxed) != 0
    }

    /// Samples dropped on a full ring.
    pub fn dropped(&self) -> u64 {
        self.header().dropped.load(Ordering::Relaxed)
    }

    /// Periods the producer said were skipped.
    pub fn skipped(&self) -> u64 {
        self.header().skipped.load(Ordering::Relaxed)
    }
}

impl Drop for SharedRing {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_cross_in_order_and_a_full_ring_drops() {
        let r = SharedRing::create(4).unwrap();
        for i in 0..6 {
            r.push(RingSample { error: i, second: -i, at_monotonic: 10 * i });
        }
        assert_eq!(r.dropped(), 2);
        let mut got = Vec::new();
        assert_eq!(r.drain(|s| got.push(s.error)), 4);
        assert_eq!(got, vec![0, 1, 2, 3]);
        assert!(r.push(RingSample { error: 7, second: 0, at_monotonic: 0 }));
        let mut got = Vec::new();
        r.drain(|s| got.push((s.error, s.second)));
        assert_eq!(got, vec![(7, 0)]);
    }

    #[test]
    fn a_second_mapping_of_the_descriptor_sees_the_same_ring() {
        let r = SharedRing::create(8).unwrap();
        // SAFETY: dup of an open descriptor gives an owned copy, as a child inherits it
        let dup = unsafe { libc::dup(r.fd()) };
        let child = SharedRing::open(dup).unwrap();
        child.push(RingSample { error: 42, second: 1, at_monotonic: 2 });
        r.stop();
        assert!(child.stopped());
        let mut got = Vec::new();
        r.drain(|s| got.push(s));
        assert_eq!(got, vec![RingSample { error: 42, second: 1, at_monotonic: 2 }]);
        assert!(SharedRing::open(-1).is_err());
    }
}
