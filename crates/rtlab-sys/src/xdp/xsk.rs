//! The XDP socket: its UMEM, its four rings (fill, completion, rx, tx) and their hot-loop
//! operations, which never allocate.

use super::os::{dev_name, errno, owned, unsafe_zeroed};
use crate::SysError;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

/// One frame in the UMEM: its address (as the rings carry it) and length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    pub addr: u64,
    pub len: u32,
}

struct Ring {
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    desc: *mut u8,
    mask: u32,
    size: u32,
    map: *mut libc::c_void,
    map_len: usize,
}

impl Ring {
    fn map(
        fd: RawFd,
        off: &libc::xdp_ring_offset,
        n: u32,
        entry: usize,
        pgoff: i64,
        what: &str,
    ) -> Result<Ring, SysError> {
        let len = off.desc as usize + n as usize * entry;
        // SAFETY: a shared mapping of the socket's ring at the offset if_xdp.h names; the
        // pointers below stay inside it and it is unmapped in Drop.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(SysError::os(format!("mapping the XDP {what} ring"), errno()));
        }
        let base = map as *mut u8;
        // SAFETY: the offsets are the kernel's, inside the mapping of `len` bytes.
        unsafe {
            Ok(Ring {
                producer: base.add(off.producer as usize) as *const AtomicU32,
                consumer: base.add(off.consumer as usize) as *const AtomicU32,
                desc: base.add(off.desc as usize),
                mask: n - 1,
                size: n,
                map,
                map_len: len,
            })
        }
    }
    #[inline]
    fn prod(&self) -> &AtomicU32 {
        // SAFETY: inside the live mapping, aligned by the kernel.
        unsafe { &*self.producer }
    }
    #[inline]
    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*self.consumer }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping made in Ring::map, unmapped once.
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}

/// How the socket was bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyMode {
    /// The kernel copies frames between the driver's buffers and the UMEM.
    Copy,
    /// The driver reads and writes the UMEM itself.
    ZeroCopy,
}

impl CopyMode {
    pub fn name(self) -> &'static str {
        match self {
            CopyMode::Copy => "copy",
            CopyMode::ZeroCopy => "zero-copy",
        }
    }
}

/// What the socket's statistics say (XDP_STATISTICS).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XskStats {
    /// Frames the kernel dropped for want of room (rx ring full, no fill frame).
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
}

/// Frame size in the UMEM (a page: any Ethernet frame up to a 1500-byte MTU fits).
pub const FRAME: u32 = 4096;
const FRAMES: u32 = 4096;
const RING: u32 = 2048;

/// An AF_XDP socket on one queue of one device, with its UMEM (FRAMES frames of FRAME
/// bytes) and its fill, completion, rx and tx rings.
pub struct Xsk {
    fd: OwnedFd,
    umem: *mut u8,
    umem_len: usize,
    rx: Ring,
    tx: Ring,
    fill: Ring,
    comp: Ring,
    /// Frames that are in no ring (preallocated to hold them all).
    free: Vec<u64>,
    pub mode: CopyMode,
    pub queue: u32,
}

// SAFETY: the raw pointers are into mappings the socket owns; one thread uses it at a time.
unsafe impl Send for Xsk {}

fn setopt<T>(fd: RawFd, name: i32, v: &T, what: &str) -> Result<(), SysError> {
    // SAFETY: v is a live value of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            name,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(SysError::os(what.to_string(), errno()));
    }
    Ok(())
}

fn getopt<T: Default>(fd: RawFd, name: i32) -> Option<T> {
    let mut v = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: v is a live, writable value of the size passed.
    let rc = unsafe {
        libc::getsockopt(fd, libc::SOL_XDP, name, &mut v as *mut T as *mut libc::c_void, &mut len)
    };
    (rc == 0).then_some(v)
}

impl Xsk {
    /// Create the socket and bind it to `queue` of `ifindex` (in the calling thread's network
    /// namespace). `copy_only` asks for copy mode; else the kernel takes zero-copy where the
    /// driver offers it (which was used is in `mode`).
    pub fn open(ifindex: u32, queue: u32, copy_only: bool) -> Result<Xsk, SysError> {
        let dev = dev_name(ifindex);
        // SAFETY: plain syscall; the descriptor is checked and owned below.
        let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            let e = errno();
            let what = match e {
                libc::EAFNOSUPPORT => {
                    "socket(AF_XDP) (this kernel has no AF_XDP: CONFIG_XDP_SOCKETS)"
                }
                libc::EPERM => "socket(AF_XDP) (needs CAP_NET_RAW: run as root)",
                _ => "socket(AF_XDP)",
            };
            return Err(SysError::os(what, e));
        }
        let fd = owned(fd);
        let raw = fd.as_raw_fd();
        let umem_len = (FRAMES * FRAME) as usize;
        // SAFETY: a private anonymous mapping, unmapped in Drop.
        let umem = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                umem_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if umem == libc::MAP_FAILED {
            return Err(SysError::os(format!("mapping the {umem_len}-byte UMEM"), errno()));
        }
        let umem = umem as *mut u8;
        let unmap = |e: SysError| {
            // SAFETY: the mapping just made, not used after this.
            unsafe { libc::munmap(umem as *mut libc::c_void, umem_len) };
            e
        };
        let reg = libc::xdp_umem_reg {
            addr: umem as u64,
            len: umem_len as u64,
            chunk_size: FRAME,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setopt(raw, libc::XDP_UMEM_REG, &reg, "registering the UMEM (XDP_UMEM_REG)")
            .map_err(unmap)?;
        for (opt, what) in [
            (libc::XDP_UMEM_FILL_RING, "XDP_UMEM_FILL_RING"),
            (libc::XDP_UMEM_COMPLETION_RING, "XDP_UMEM_COMPLETION_RING"),
            (libc::XDP_RX_RING, "XDP_RX_RING"),
            (libc::XDP_TX_RING, "XDP_TX_RING"),
        ] {
            setopt(raw, opt, &RING, &format!("sizing the XDP rings ({what} {RING})"))
                .map_err(unmap)?;
        }
        let off: libc::xdp_mmap_offsets = match getopt_offsets(raw) {
            Some(o) => o,
            None => return Err(unmap(SysError::os("reading XDP_MMAP_OFFSETS", errno()))),
        };
        let rings = (|| -> Result<_, SysError> {
            let desc = std::mem::size_of::<libc::xdp_desc>();
            Ok((
                Ring::map(raw, &off.rx, RING, desc, libc::XDP_PGOFF_RX_RING, "rx")?,
                Ring::map(raw, &off.tx, RING, desc, libc::XDP_PGOFF_TX_RING, "tx")?,
                Ring::map(raw, &off.fr, RING, 8, libc::XDP_UMEM_PGOFF_FILL_RING as i64, "fill")?,
                Ring::map(
                    raw,
                    &off.cr,
                    RING,
                    8,
                    libc::XDP_UMEM_PGOFF_COMPLETION_RING as i64,
                    "completion",
                )?,
            ))
        })();
        let (rx, tx, fill, comp) = rings.map_err(unmap)?;
        let mut free = Vec::with_capacity(FRAMES as usize);
        for i in (0..FRAMES).rev() {
            free.push(i as u64 * FRAME as u64);
        }
        let mut x =
            Xsk { fd, umem, umem_len, rx, tx, fill, comp, free, mode: CopyMode::Copy, queue };
        // half the frames wait in the fill ring for the kernel to receive into
        x.refill_to(RING);
        let addr = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: if copy_only { libc::XDP_COPY } else { 0 },
            sxdp_ifindex: ifindex,
            sxdp_queue_id: queue,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: addr is a live sockaddr_xdp of the size passed.
        let rc = unsafe {
            libc::bind(
                raw,
                &addr as *const libc::sockaddr_xdp as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            let e = errno();
            let what = match e {
                libc::EINVAL => format!("binding the XDP socket to {dev} queue {queue} (no such queue on this device?)"),
                libc::EBUSY => format!("binding the XDP socket to {dev} queue {queue} (another XDP socket holds that queue)"),
                _ => format!("binding the XDP socket to {dev} queue {queue}"),
            };
            return Err(SysError::os(what, e));
        }
        let zc =
            getopt::<u32>(raw, libc::XDP_OPTIONS).unwrap_or(0) & libc::XDP_OPTIONS_ZEROCOPY != 0;
        x.mode = if zc { CopyMode::ZeroCopy } else { CopyMode::Copy };
        Ok(x)
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Move free frames into the fill ring until it holds `want` (or no frame is free).
    fn refill_to(&mut self, want: u32) {
        let prod = self.fill.prod().load(Ordering::Relaxed);
        let cons = self.fill.cons().load(Ordering::Acquire);
        let held = prod.wrapping_sub(cons);
        let n = want.min(self.fill.size).saturating_sub(held).min(self.free.len() as u32);
        for i in 0..n {
            let a = self.free.pop().unwrap_or(0);
            let slot = (prod.wrapping_add(i) & self.fill.mask) as usize;
            // SAFETY: slot < size: inside the fill ring's descriptors (u64 each).
            unsafe { (self.fill.desc as *mut u64).add(slot).write(a) };
        }
        if n > 0 {
            self.fill.prod().store(prod.wrapping_add(n), Ordering::Release);
        }
    }

    /// Take back the frames the kernel has sent (completion ring), and keep the fill ring
    /// topped up, holding back `RING / 2` frames for sending.
    #[inline]
    pub fn reap(&mut self) {
        let cons = self.comp.cons().load(Ordering::Relaxed);
        let prod = self.comp.prod().load(Ordering::Acquire);
        let n = prod.wrapping_sub(cons);
        for i in 0..n {
            let slot = (cons.wrapping_add(i) & self.comp.mask) as usize;
            // SAFETY: slot inside the completion ring's descriptors.
            let a = unsafe { (self.comp.desc as *const u64).add(slot).read() };
            if self.free.len() < self.free.capacity() {
                self.free.push(a & !(FRAME as u64 - 1));
            }
        }
        if n > 0 {
            self.comp.cons().store(prod, Ordering::Release);
        }
        if self.free.len() > (RING / 2) as usize {
            let spare = self.free.len() as u32 - RING / 2;
            let held = self
                .fill
                .prod()
                .load(Ordering::Relaxed)
                .wrapping_sub(self.fill.cons().load(Ordering::Acquire));
            self.refill_to(held + spare);
        }
    }

    /// A free frame to write a datagram into.
    #[inline]
    pub fn alloc(&mut self) -> Option<u64> {
        self.free.pop()
    }

    /// Give a frame back (one received and not sent on).
    #[inline]
    pub fn release(&mut self, addr: u64) {
        if self.free.len() < self.free.capacity() {
            self.free.push(addr & !(FRAME as u64 - 1));
        }
    }

    /// The bytes of the frame at `addr` (to the end of its chunk).
    #[inline]
    pub fn frame(&mut self, addr: u64) -> &mut [u8] {
        let a = (addr as usize).min(self.umem_len - 1);
        let end = (a | (FRAME as usize - 1)) + 1;
        // SAFETY: [a, end) lies inside one chunk of the UMEM mapping, which lives as long as self.
        unsafe { std::slice::from_raw_parts_mut(self.umem.add(a), end - a) }
    }

    /// The next received frame, if one is there.
    #[inline]
    pub fn rx(&mut self) -> Option<Frame> {
        let cons = self.rx.cons().load(Ordering::Relaxed);
        let prod = self.rx.prod().load(Ordering::Acquire);
        if prod == cons {
            return None;
        }
        let slot = (cons & self.rx.mask) as usize;
        // SAFETY: slot inside the rx ring's descriptors, written by the kernel before prod.
        let d = unsafe { (self.rx.desc as *const libc::xdp_desc).add(slot).read() };
        self.rx.cons().store(cons.wrapping_add(1), Ordering::Release);
        Some(Frame { addr: d.addr, len: d.len })
    }

    /// Put a frame on the tx ring (false: the ring is full). [`Xsk::kick`] sends it.
    #[inline]
    pub fn tx(&mut self, f: Frame) -> bool {
        let prod = self.tx.prod().load(Ordering::Relaxed);
        let cons = self.tx.cons().load(Ordering::Acquire);
        if prod.wrapping_sub(cons) >= self.tx.size {
            return false;
        }
        let slot = (prod & self.tx.mask) as usize;
        let d = libc::xdp_desc { addr: f.addr, len: f.len, options: 0 };
        // SAFETY: slot inside the tx ring's descriptors; published by the store below.
        unsafe { (self.tx.desc as *mut libc::xdp_desc).add(slot).write(d) };
        self.tx.prod().store(prod.wrapping_add(1), Ordering::Release);
        true
    }

    /// Ask the kernel to send what is on the tx ring (sendto, MSG_DONTWAIT). EAGAIN / EBUSY
    /// (the ring not drained yet) are not errors: the next kick sends the rest.
    #[inline]
    pub fn kick(&self) -> std::io::Result<()> {
        // SAFETY: a zero-length sendto with no buffer and no address, as af_xdp.rst describes.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if rc >= 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {
                Ok(())
            }
            _ => Err(e),
        }
    }

    /// Drive the device's receive from this thread (recvfrom, MSG_DONTWAIT): with busy
    /// polling this is where the driver is polled.
    #[inline]
    pub fn poke_rx(&self) {
        // SAFETY: a zero-length recvfrom with no buffer, as xdpsock does.
        unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }

    /// XDP_STATISTICS.
    pub fn stats(&self) -> XskStats {
        match getopt::<StatsRaw>(self.fd.as_raw_fd(), libc::XDP_STATISTICS) {
            Some(s) => {
                XskStats { rx_dropped: s.0[0], rx_invalid_descs: s.0[1], tx_invalid_descs: s.0[2] }
            }
            None => XskStats::default(),
        }
    }
}

#[derive(Default)]
#[repr(C)]
struct StatsRaw([u64; 6]);

fn getopt_offsets(fd: RawFd) -> Option<libc::xdp_mmap_offsets> {
    let mut v: libc::xdp_mmap_offsets = unsafe_zeroed();
    let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
    // SAFETY: v is a live, writable xdp_mmap_offsets of the size passed.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            &mut v as *mut libc::xdp_mmap_offsets as *mut libc::c_void,
            &mut len,
        )
    };
    (rc == 0 && len as usize == std::mem::size_of::<libc::xdp_mmap_offsets>()).then_some(v)
}

impl Drop for Xsk {
    fn drop(&mut self) {
        // SAFETY: the UMEM mapping made in open, unmapped once (the kernel keeps its own
        // pin on the pages until the socket, closed right after, lets them go).
        unsafe { libc::munmap(self.umem as *mut libc::c_void, self.umem_len) };
    }
}
