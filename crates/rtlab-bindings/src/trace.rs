//! rtlab's tracepoint interposer (`trace/interpose.c`, built by this crate's `build.rs`) and
//! the reader of the rings it writes (`trace/ring.h` is the format: one file per traced
//! process, a page of header, then 64-byte slots).
//!
//! Contract: [`Ring::open`] checks a ring's header (magic, version, slot size, a power-of-two
//! slot count within bounds, the file's size) and refuses any other file in one line;
//! [`Ring::read`] copies whole committed records (each as its slots' eight words) and moves
//! the ring's tail, and refuses a record whose span is out of bounds or a head that ran past
//! the tail by more than the ring holds: a malformed ring is never read past, and nothing a
//! ring holds can make the reader index outside its mapping. Words are returned as written
//! (native order); the meaning of the events is rtlab-pubsub's (`trace::event`).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The interposer, to be written to a file and preloaded (`LD_PRELOAD`).
pub static INTERPOSER: &[u8] = include_bytes!(env!("RTLAB_TRACE_INTERPOSER"));

pub const MAGIC: &[u8; 8] = b"RTLTRACE";
pub const VERSION: u32 = 1;
pub const HEADER: usize = 4096;
pub const SLOT: usize = 64;
pub const MAX_SPAN: u64 = 8;
pub const MIN_SLOTS: u64 = 1024;
pub const MAX_SLOTS: u64 = 1 << 24;
/// The interposer's slots unless `RTLAB_TRACE_SLOTS` says another power of two.
pub const DEFAULT_SLOTS: u64 = 65536;

const HEAD: usize = 64;
const DROPPED: usize = 72;
const TAIL: usize = 128;

/// What a ring's header says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingInfo {
    pub pid: i32,
    pub ppid: i32,
    pub slots: u64,
    pub start_monotonic_ns: i64,
    pub start_realtime_ns: i64,
    /// The process's name when its ring was made.
    pub comm: String,
}

/// Why a ring was not opened or not read further.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RingError {
    /// Its header is not written yet (the process is making it): try again.
    NotReady,
    /// Not a ring of this rtlab: the reason.
    Malformed(String),
}

impl std::fmt::Display for RingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RingError::NotReady => f.write_str("its header is not written yet"),
            RingError::Malformed(why) => f.write_str(why),
        }
    }
}

/// One record: its first slot's words (seq, kind/span/cpu/flags, tid, time, a, b, c, d)
/// and its names' bytes (the continuation slots' payloads, empty for a one-slot record).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawRecord {
    pub words: [u64; 8],
    pub text: Vec<u8>,
}

/// What one [`Ring::read`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOutcome {
    /// Records copied.
    pub records: u64,
    /// Slots reserved but not committed yet stand at the tail (a writer is filling them, or
    /// died filling them).
    pub waiting: bool,
}

/// A process's ring, mapped for reading.
#[derive(Debug)]
pub struct Ring {
    map: *mut u8,
    len: usize,
    info: RingInfo,
}

// SAFETY: the mapping is owned by the Ring and every access to it goes through &self/&mut self
// with atomic or volatile reads; nothing thread-local is held.
unsafe impl Send for Ring {}

impl Ring {
    /// Map the ring at `path` and check its header.
    pub fn open(path: &Path) -> Result<Ring, RingError> {
        use std::os::unix::io::AsRawFd;
        let bad = |why: String| RingError::Malformed(format!("{}: {why}", path.display()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| bad(format!("cannot open: {e}")))?;
        let size = file.metadata().map_err(|e| bad(e.to_string()))?.len();
        if size < HEADER as u64 {
            return Err(if size == 0 { RingError::NotReady } else { bad(format!("{size} bytes")) });
        }
        let len = size as usize;
        // SAFETY: a fresh shared mapping of the whole file, read and written only through
        // this Ring; unmapped on drop.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(bad(format!("mmap: {}", std::io::Error::last_os_error())));
        }
        let mut ring = Ring { map: map.cast(), len, info: Self::empty_info() };
        ring.info = ring.check(size).map_err(|e| match e {
            RingError::Malformed(why) => bad(why),
            other => other,
        })?;
        Ok(ring)
    }

    fn empty_info() -> RingInfo {
        RingInfo {
            pid: 0,
            ppid: 0,
            slots: 0,
            start_monotonic_ns: 0,
            start_realtime_ns: 0,
            comm: String::new(),
        }
    }

    fn check(&self, size: u64) -> Result<RingInfo, RingError> {
        let mut head = [0u8; 64];
        for (i, b) in head.iter_mut().enumerate() {
            // SAFETY: i < 64 <= HEADER <= len.
            *b = unsafe { std::ptr::read_volatile(self.map.add(i)) };
        }
        if &head[..8] != MAGIC {
            return Err(if head[..8].iter().all(|&b| b == 0) {
                RingError::NotReady
            } else {
                RingError::Malformed("not an rtlab trace ring (magic)".into())
            });
        }
        std::sync::atomic::fence(Ordering::Acquire);
        let u32_at = |o: usize| u32::from_ne_bytes(head[o..o + 4].try_into().unwrap());
        let i32_at = |o: usize| i32::from_ne_bytes(head[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_ne_bytes(head[o..o + 8].try_into().unwrap());
        let (version, slot, slots) = (u32_at(8), u32_at(12), u64_at(16));
        if version != VERSION {
            return Err(RingError::Malformed(format!(
                "ring version {version}, this rtlab reads {VERSION}"
            )));
        }
        if slot as usize != SLOT {
            return Err(RingError::Malformed(format!("slots of {slot} bytes, not {SLOT}")));
        }
        if !(MIN_SLOTS..=MAX_SLOTS).contains(&slots) || !slots.is_power_of_two() {
            return Err(RingError::Malformed(format!(
                "{slots} slots (a power of two in {MIN_SLOTS}..={MAX_SLOTS})"
            )));
        }
        let want = HEADER as u64 + slots * SLOT as u64;
        if size != want {
            return Err(RingError::Malformed(format!("{size} bytes, {slots} slots need {want}")));
        }
        let comm = &head[48..64];
        let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
        let i64_at = |o: usize| i64::from_ne_bytes(head[o..o + 8].try_into().unwrap());
        Ok(RingInfo {
            pid: i32_at(24),
            ppid: i32_at(28),
            slots,
            start_monotonic_ns: i64_at(32),
            start_realtime_ns: i64_at(40),
            comm: String::from_utf8_lossy(&comm[..end]).into_owned(),
        })
    }

    pub fn info(&self) -> &RingInfo {
        &self.info
    }

    fn word(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(offset.is_multiple_of(8) && offset + 8 <= self.len);
        // SAFETY: offset is 8-aligned (the mapping is page-aligned) and inside the mapping,
        // which lives as long as &self; the writers access it atomically too.
        unsafe { &*self.map.add(offset).cast::<AtomicU64>() }
    }

    /// Records the process's full ring refused.
    pub fn dropped(&self) -> u64 {
        self.word(DROPPED).load(Ordering::Relaxed)
    }

    /// Slots reserved and not yet read (committed or not).
    pub fn backlog(&self) -> u64 {
        let head = self.word(HEAD).load(Ordering::Acquire);
        head.wrapping_sub(self.word(TAIL).load(Ordering::Relaxed))
    }

    fn slot_offset(&self, pos: u64) -> usize {
        HEADER + ((pos & (self.info.slots - 1)) as usize) * SLOT
    }

    /// Copy up to `max` committed records from the tail on into `out`, then move the tail.
    pub fn read(&mut self, out: &mut Vec<RawRecord>, max: u64) -> Result<ReadOutcome, RingError> {
        let head = self.word(HEAD).load(Ordering::Acquire);
        let mut tail = self.word(TAIL).load(Ordering::Relaxed);
        if head.wrapping_sub(tail) > self.info.slots {
            return Err(RingError::Malformed(format!(
                "head {head} ran {} slots past the tail {tail} of a ring of {}",
                head.wrapping_sub(tail),
                self.info.slots
            )));
        }
        let mut done = ReadOutcome::default();
        while tail != head && done.records < max {
            let first = self.slot_offset(tail);
            if self.word(first).load(Ordering::Acquire) != tail.wrapping_add(1) {
                done.waiting = true;
                break;
            }
            let mut words = [0u64; 8];
            for (i, w) in words.iter_mut().enumerate() {
                *w = self.word(first + 8 * i).load(Ordering::Relaxed);
            }
            let span = (words[1] >> 16) & 0xffff;
            if span == 0 || span > MAX_SPAN || span > head.wrapping_sub(tail) {
                return Err(RingError::Malformed(format!(
                    "a record of span {span} at slot {tail} (1..={MAX_SPAN}, inside the head)"
                )));
            }
            let mut text = Vec::new();
            let mut complete = true;
            for k in 1..span {
                let at = self.slot_offset(tail.wrapping_add(k));
                if self.word(at).load(Ordering::Acquire) != tail.wrapping_add(k + 1) {
                    complete = false;
                    break;
                }
                for i in 1..8 {
                    text.extend_from_slice(
                        &self.word(at + 8 * i).load(Ordering::Relaxed).to_ne_bytes(),
                    );
                }
            }
            if !complete {
                done.waiting = true;
                break;
            }
            out.push(RawRecord { words, text });
            tail = tail.wrapping_add(span);
            done.records += 1;
        }
        self.word(TAIL).store(tail, Ordering::Release);
        Ok(done)
    }

    /// Give up the slots between the tail and the head (a dead process's uncommitted ones):
    /// how many.
    pub fn abandon(&mut self) -> u64 {
        let head = self.word(HEAD).load(Ordering::Acquire);
        let tail = self.word(TAIL).load(Ordering::Relaxed);
        let n = head.wrapping_sub(tail).min(self.info.slots);
        self.word(TAIL).store(head, Ordering::Release);
        n
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping made in open, of len bytes, unmapped once.
        unsafe { libc::munmap(self.map.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring file as the interposer makes it, with `records` (first-slot words, names).
    fn ring_file(dir: &Path, slots: u64, records: &[([u64; 4], &[u8])]) -> std::path::PathBuf {
        let mut b = vec![0u8; HEADER + slots as usize * SLOT];
        b[..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_ne_bytes());
        b[12..16].copy_from_slice(&(SLOT as u32).to_ne_bytes());
        b[16..24].copy_from_slice(&slots.to_ne_bytes());
        b[24..28].copy_from_slice(&42i32.to_ne_bytes());
        b[48..52].copy_from_slice(b"node");
        let mut pos = 0u64;
        for (args, text) in records {
            let span = 1 + text.len().div_ceil(56) as u64;
            let o = HEADER + pos as usize * SLOT;
            b[o..o + 8].copy_from_slice(&(pos + 1).to_ne_bytes());
            b[o + 8..o + 16].copy_from_slice(&(7u64 | span << 16).to_ne_bytes());
            for (i, a) in args.iter().enumerate() {
                b[o + 32 + 8 * i..o + 40 + 8 * i].copy_from_slice(&a.to_ne_bytes());
            }
            for k in 1..span {
                let c = HEADER + (pos + k) as usize * SLOT;
                b[c..c + 8].copy_from_slice(&(pos + k + 1).to_ne_bytes());
                let part = &text[((k - 1) * 56) as usize..text.len().min((k * 56) as usize)];
                b[c + 8..c + 8 + part.len()].copy_from_slice(part);
            }
            pos += span;
        }
        b[HEAD..HEAD + 8].copy_from_slice(&pos.to_ne_bytes());
        let p = dir.join("42.ring");
        std::fs::write(&p, b).unwrap();
        p
    }

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("rtlab-ring-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn reads_records_with_their_names_and_moves_the_tail() {
        let d = dir("read");
        let long = [b'x'; 70];
        let p = ring_file(&d, 1024, &[([1, 2, 3, 4], b""), ([5, 6, 7, 8], &long)]);
        let mut r = Ring::open(&p).unwrap();
        assert_eq!(r.info().pid, 42);
        assert_eq!(r.info().comm, "node");
        let mut out = Vec::new();
        let got = r.read(&mut out, 100).unwrap();
        assert_eq!(got, ReadOutcome { records: 2, waiting: false });
        assert_eq!(out[0].words[4..], [1, 2, 3, 4]);
        assert!(out[0].text.is_empty());
        assert_eq!(out[1].words[4..], [5, 6, 7, 8]);
        assert_eq!(&out[1].text[..70], &long[..]);
        assert_eq!(r.backlog(), 0);
        // read again: nothing new
        assert_eq!(r.read(&mut out, 100).unwrap().records, 0);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn refuses_what_is_not_a_ring() {
        let d = dir("bad");
        let p = d.join("1.ring");
        std::fs::write(&p, vec![0u8; HEADER + 1024 * SLOT]).unwrap();
        assert_eq!(Ring::open(&p).unwrap_err(), RingError::NotReady);
        let mut b = vec![0u8; HEADER + 1024 * SLOT];
        b[..8].copy_from_slice(b"NOTARING");
        std::fs::write(&p, &b).unwrap();
        assert!(Ring::open(&p).unwrap_err().to_string().contains("magic"), "magic");
        b[..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_ne_bytes());
        b[12..16].copy_from_slice(&(SLOT as u32).to_ne_bytes());
        b[16..24].copy_from_slice(&1000u64.to_ne_bytes());
        std::fs::write(&p, &b).unwrap();
        assert!(Ring::open(&p).unwrap_err().to_string().contains("power of two"));
        b[16..24].copy_from_slice(&2048u64.to_ne_bytes());
        std::fs::write(&p, &b).unwrap();
        assert!(Ring::open(&p).unwrap_err().to_string().contains("need"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_bad_span_or_a_runaway_head_is_refused_not_read_past() {
        let d = dir("span");
        let p = ring_file(&d, 1024, &[([1, 2, 3, 4], b"")]);
        let mut b = std::fs::read(&p).unwrap();
        b[HEADER + 8..HEADER + 16].copy_from_slice(&(7u64 | 9 << 16).to_ne_bytes());
        std::fs::write(&p, &b).unwrap();
        let mut r = Ring::open(&p).unwrap();
        assert!(r.read(&mut Vec::new(), 10).unwrap_err().to_string().contains("span 9"));
        b[HEAD..HEAD + 8].copy_from_slice(&5000u64.to_ne_bytes());
        std::fs::write(&p, &b).unwrap();
        let mut r = Ring::open(&p).unwrap();
        assert!(r.read(&mut Vec::new(), 10).unwrap_err().to_string().contains("ran"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn an_uncommitted_slot_waits_and_can_be_abandoned() {
        let d = dir("wait");
        let p = ring_file(&d, 1024, &[([1, 2, 3, 4], b""), ([5, 6, 7, 8], b"")]);
        let mut b = std::fs::read(&p).unwrap();
        // the second record reserved, not committed
        b[HEADER + SLOT..HEADER + SLOT + 8].copy_from_slice(&0u64.to_ne_bytes());
        std::fs::write(&p, &b).unwrap();
        let mut r = Ring::open(&p).unwrap();
        let mut out = Vec::new();
        assert_eq!(r.read(&mut out, 10).unwrap(), ReadOutcome { records: 1, waiting: true });
        assert_eq!(r.abandon(), 1);
        assert_eq!(r.backlog(), 0);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
