//! AF_XDP for the UDP probe: the steering XDP program (emitted here as BPF instructions,
//! loaded with bpf(2), attached through a BPF link), and an XDP socket with its UMEM and
//! four rings (if_xdp.h, Documentation/networking/af_xdp.rst).
//!
//! Contract: the program sends to the socket only IPv4/UDP datagrams (no IP options, not a
//! fragment) for one destination address and port arriving on the socket's queue; every
//! other frame goes on to the kernel (XDP_PASS). It is attached through a BPF link, so the
//! kernel detaches it when the link's last descriptor closes: on drop, on exit, on kill -9.
//! Another XDP program already on the device is never replaced (EBUSY, named). The ring
//! operations used in a hot loop ([`Xsk::rx`], [`Xsk::tx`], [`Xsk::kick`], [`Xsk::reap`],
//! [`Xsk::alloc`]) never allocate. Nothing here prints.

use crate::SysError;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

// ---- BPF -----------------------------------------------------------------------------

const BPF_MAP_CREATE: i32 = 0;
const BPF_MAP_UPDATE_ELEM: i32 = 2;
const BPF_PROG_LOAD: i32 = 5;
const BPF_OBJ_GET_INFO_BY_FD: i32 = 15;
const BPF_LINK_CREATE: i32 = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
const XDP_PASS: i32 = 2;
const HELPER_REDIRECT_MAP: i32 = 51;
/// The name the program carries (bpftool, `ip link`): rtlab's, so it is recognised.
pub const PROGRAM_NAME: &str = "rtlab_steer";

/// bpf(2)'s attribute union, large enough for every command used here (the tail is zero).
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0u8; 128])
    }
    fn u32(&mut self, at: usize, v: u32) -> &mut Attr {
        self.0[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, at: usize, v: u64) -> &mut Attr {
        self.0[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn name(&mut self, at: usize, s: &str) -> &mut Attr {
        let b = s.as_bytes();
        let n = b.len().min(15);
        self.0[at..at + n].copy_from_slice(&b[..n]);
        self
    }
}

fn bpf(cmd: i32, attr: &mut Attr) -> Result<i32, i32> {
    // SAFETY: attr is a live, zero-padded buffer of the size passed; the kernel reads (and
    // for OBJ_GET_INFO writes through pointers the caller set to live buffers).
    let rc = unsafe {
        libc::syscall(libc::SYS_bpf, cmd, attr.0.as_mut_ptr(), std::mem::size_of::<Attr>())
    };
    if rc < 0 {
        Err(errno())
    } else {
        Ok(rc as i32)
    }
}

fn owned(fd: i32) -> OwnedFd {
    // SAFETY: fd is a fresh descriptor returned by the kernel that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// One BPF instruction (linux/bpf.h `struct bpf_insn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn { code, regs: (src << 4) | (dst & 0xf), off, imm }
}

/// What the steering program matches: the destination of the probe's datagrams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Steer {
    pub ip: std::net::Ipv4Addr,
    pub port: u16,
}

/// The steering program's instructions, with `map_fd` as the XSKMAP (keyed by rx queue).
///
/// ```text
/// if frame < 42 bytes, not IPv4, IHL != 5, not UDP, a fragment,
///    dst ip != ip or dst port != port:  XDP_PASS
/// return bpf_redirect_map(xskmap, ctx->rx_queue_index, XDP_PASS)
/// ```
pub fn steering_program(steer: Steer, map_fd: i32) -> Vec<Insn> {
    const LDXW: u8 = 0x61;
    const LDXH: u8 = 0x69;
    const LDXB: u8 = 0x71;
    const MOV64X: u8 = 0xbf;
    const MOV64K: u8 = 0xb7;
    const ADD64K: u8 = 0x07;
    const AND64K: u8 = 0x57;
    const JGTX: u8 = 0x2d;
    const JNEK: u8 = 0x55;
    const JNE32K: u8 = 0x56;
    const LDDW: u8 = 0x18;
    const CALL: u8 = 0x85;
    const EXIT: u8 = 0x95;
    let le16 = |b: [u8; 2]| u16::from_le_bytes(b) as i32;
    let ip = u32::from_le_bytes(steer.ip.octets()) as i32;
    let port = le16(steer.port.to_be_bytes());
    // jumps to "pass" carry off = i16::MIN until patched
    const PASS: i16 = i16::MIN;
    let mut p = vec![
        insn(MOV64X, 6, 1, 0, 0),  // r6 = ctx
        insn(LDXW, 2, 1, 0, 0),    // r2 = data
        insn(LDXW, 3, 1, 4, 0),    // r3 = data_end
        insn(MOV64X, 4, 2, 0, 0),  // r4 = data
        insn(ADD64K, 4, 0, 0, 42), // r4 += eth + ip + udp
        insn(JGTX, 4, 3, PASS, 0), // short frame
        insn(LDXH, 5, 2, 12, 0),   // ethertype
        insn(JNEK, 5, 0, PASS, le16([0x08, 0x00])),
        insn(LDXB, 5, 2, 14, 0), // version, IHL
        insn(JNEK, 5, 0, PASS, 0x45),
        insn(LDXB, 5, 2, 23, 0), // protocol
        insn(JNEK, 5, 0, PASS, 17),
        insn(LDXH, 5, 2, 20, 0), // flags, fragment offset
        insn(AND64K, 5, 0, 0, le16([0x3f, 0xff])),
        insn(JNEK, 5, 0, PASS, 0), // MF or an offset: a fragment
        insn(LDXW, 5, 2, 30, 0),   // destination address
        insn(JNE32K, 5, 0, PASS, ip),
        insn(LDXH, 5, 2, 36, 0), // destination port
        insn(JNEK, 5, 0, PASS, port),
        insn(LDXW, 2, 6, 16, 0),     // key: ctx->rx_queue_index
        insn(LDDW, 1, 1, 0, map_fd), // r1 = the map (BPF_PSEUDO_MAP_FD)
        insn(0, 0, 0, 0, 0),
        insn(MOV64K, 3, 0, 0, XDP_PASS), // flags: XDP_PASS when the queue has no socket
        insn(CALL, 0, 0, 0, HELPER_REDIRECT_MAP),
        insn(EXIT, 0, 0, 0, 0),
    ];
    let pass = p.len();
    p.push(insn(MOV64K, 0, 0, 0, XDP_PASS));
    p.push(insn(EXIT, 0, 0, 0, 0));
    for (i, x) in p.iter_mut().enumerate() {
        if x.off == PASS && x.code != 0 {
            x.off = (pass - i - 1) as i16;
        }
    }
    p
}

/// How the program is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachMode {
    /// In the driver (XDP_FLAGS_DRV_MODE).
    Native,
    /// On the kernel's generic path, after the skb is built (XDP_FLAGS_SKB_MODE).
    Generic,
}

impl AttachMode {
    pub fn name(self) -> &'static str {
        match self {
            AttachMode::Native => "native",
            AttachMode::Generic => "generic",
        }
    }
    /// The `ip link` keyword of the mode (`xdpdrv` / `xdpgeneric`).
    pub fn ip_keyword(self) -> &'static str {
        match self {
            AttachMode::Native => "xdpdrv",
            AttachMode::Generic => "xdpgeneric",
        }
    }
}

/// The steering program, attached: detached by the kernel when this is dropped.
#[derive(Debug)]
pub struct Steering {
    pub map: OwnedFd,
    pub prog: OwnedFd,
    pub link: OwnedFd,
    pub mode: AttachMode,
    /// The program's id (bpftool, `ip link show`).
    pub prog_id: u32,
}

fn prog_id(prog: &OwnedFd) -> u32 {
    // struct bpf_prog_info: type u32 @0, id u32 @4 (the rest is not asked for)
    let mut info = [0u8; 8];
    let mut a = Attr::new();
    a.u32(0, prog.as_raw_fd() as u32).u32(4, info.len() as u32).u64(8, info.as_mut_ptr() as u64);
    match bpf(BPF_OBJ_GET_INFO_BY_FD, &mut a) {
        Ok(_) => u32::from_ne_bytes([info[4], info[5], info[6], info[7]]),
        Err(_) => 0,
    }
}

/// The device's name for messages.
fn dev_name(ifindex: u32) -> String {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: buf has IF_NAMESIZE bytes, as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return format!("ifindex {ifindex}");
    }
    // SAFETY: if_indextoname wrote a NUL-terminated name into buf.
    unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
}

/// Load the steering program for `steer` and attach it to `ifindex` (in the calling
/// thread's network namespace): natively when the driver takes it, else on the generic
/// path. `generic_only` skips the native attempt.
pub fn attach_steering(
    ifindex: u32,
    steer: Steer,
    generic_only: bool,
) -> Result<Steering, SysError> {
    let dev = dev_name(ifindex);
    let mut a = Attr::new();
    a.u32(0, BPF_MAP_TYPE_XSKMAP).u32(4, 4).u32(8, 4).u32(12, 64).name(28, "rtlab_xsks");
    let map = bpf(BPF_MAP_CREATE, &mut a).map_err(|e| {
        let what = match e {
            libc::EPERM => {
                "creating the XSKMAP (bpf(2) needs CAP_BPF and CAP_NET_ADMIN: run as root)"
                    .to_string()
            }
            libc::EINVAL | libc::ENOSYS => {
                "creating the XSKMAP (this kernel has no AF_XDP: CONFIG_XDP_SOCKETS)".to_string()
            }
            _ => "creating the XSKMAP".to_string(),
        };
        SysError::os(what, e)
    })?;
    let map = owned(map);
    let insns = steering_program(steer, map.as_raw_fd());
    let license = c"Dual MIT/GPL";
    let load = |log: Option<&mut Vec<u8>>| {
        let mut a = Attr::new();
        a.u32(0, BPF_PROG_TYPE_XDP)
            .u32(4, insns.len() as u32)
            .u64(8, insns.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64)
            .name(48, PROGRAM_NAME)
            .u32(68, BPF_XDP);
        if let Some(buf) = log {
            a.u32(24, 1).u32(28, buf.len() as u32).u64(32, buf.as_mut_ptr() as u64);
        }
        bpf(BPF_PROG_LOAD, &mut a)
    };
    let prog = match load(None) {
        Ok(fd) => owned(fd),
        Err(e) => {
            let mut log = vec![0u8; 1 << 16];
            let _ = load(Some(&mut log));
            let text = String::from_utf8_lossy(&log);
            let last = text.trim_end_matches('\0').lines().rev().find(|l| !l.trim().is_empty());
            return Err(SysError::os(
                format!(
                    "loading the XDP steering program (verifier: {})",
                    last.unwrap_or("no log")
                ),
                e,
            ));
        }
    };
    let link_with = |flags: u32| {
        let mut a = Attr::new();
        a.u32(0, prog.as_raw_fd() as u32).u32(4, ifindex).u32(8, BPF_XDP).u32(12, flags);
        bpf(BPF_LINK_CREATE, &mut a)
    };
    let attached = if generic_only {
        link_with(XDP_FLAGS_SKB_MODE).map(|l| (l, AttachMode::Generic))
    } else {
        match link_with(XDP_FLAGS_DRV_MODE) {
            Ok(l) => Ok((l, AttachMode::Native)),
            Err(libc::EBUSY) => Err(libc::EBUSY),
            Err(_) => link_with(XDP_FLAGS_SKB_MODE).map(|l| (l, AttachMode::Generic)),
        }
    };
    let (link, mode) = attached.map_err(|e| {
        let what = match e {
            libc::EBUSY | libc::EEXIST => format!("attaching the XDP program to {dev} (another XDP program is attached there: rtlab does not replace it; see `ip link show {dev}`)"),
            libc::EPERM => format!("attaching the XDP program to {dev} (needs CAP_NET_ADMIN: run as root)"),
            _ => format!("attaching the XDP program to {dev}"),
        };
        SysError::os(what, e)
    })?;
    let prog_id = prog_id(&prog);
    Ok(Steering { map, prog, link: owned(link), mode, prog_id })
}

impl Steering {
    /// Send the program's matches on `queue` to `xsk`.
    pub fn insert(&self, queue: u32, xsk: &Xsk) -> Result<(), SysError> {
        let key = queue;
        let value = xsk.fd.as_raw_fd() as u32;
        let mut a = Attr::new();
        a.u32(0, self.map.as_raw_fd() as u32)
            .u64(8, &key as *const u32 as u64)
            .u64(16, &value as *const u32 as u64);
        bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ()).map_err(|e| {
            SysError::os(format!("putting the XDP socket in the XSKMAP at queue {queue}"), e)
        })
    }
}

// ---- the XDP socket ---------------------------------------------------------------------

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

fn unsafe_zeroed<T>() -> T {
    // SAFETY: used only for C structs of integers, for which all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

impl Drop for Xsk {
    fn drop(&mut self) {
        // SAFETY: the UMEM mapping made in open, unmapped once (the kernel keeps its own
        // pin on the pages until the socket, closed right after, lets them go).
        unsafe { libc::munmap(self.umem as *mut libc::c_void, self.umem_len) };
    }
}

// ---- the device ---------------------------------------------------------------------------

/// The device that holds an IPv4 address, in the calling thread's network namespace:
/// (name, ifindex, MAC, MTU).
pub fn device_of(ip: std::net::Ipv4Addr) -> Result<(String, u32, [u8; 6], u32), SysError> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills list, freed below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(SysError::os("getifaddrs", errno()));
    }
    let mut found = None;
    let mut p = list;
    while !p.is_null() {
        // SAFETY: p walks the list getifaddrs returned.
        let ifa = unsafe { &*p };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr is a live sockaddr; its family says whether it is a sockaddr_in.
            let fam = unsafe { (*ifa.ifa_addr).sa_family } as i32;
            if fam == libc::AF_INET {
                // SAFETY: an AF_INET address is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                if u32::from_be(sin.sin_addr.s_addr) == u32::from(ip) {
                    // SAFETY: ifa_name is a NUL-terminated name.
                    found = Some(
                        unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
                            .to_string_lossy()
                            .into_owned(),
                    );
                    break;
                }
            }
        }
        p = ifa.ifa_next;
    }
    // SAFETY: the list from getifaddrs, freed once.
    unsafe { libc::freeifaddrs(list) };
    let name = found.ok_or_else(|| {
        SysError::os(
            format!("{ip} is not an address of a device here (XDP needs the device that holds it)"),
            libc::EADDRNOTAVAIL,
        )
    })?;
    let cname = std::ffi::CString::new(name.clone()).unwrap_or_default();
    // SAFETY: cname is a NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if ifindex == 0 {
        return Err(SysError::os(format!("if_nametoindex({name})"), errno()));
    }
    // SAFETY: a plain socket for the two ioctls, closed on return.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(SysError::os("socket(AF_INET) for SIOCGIFHWADDR", errno()));
    }
    let s = owned(s);
    let mut req: libc::ifreq = unsafe_zeroed();
    for (i, b) in name.bytes().take(libc::IFNAMSIZ - 1).enumerate() {
        req.ifr_name[i] = b as libc::c_char;
    }
    // SAFETY: req is a live ifreq naming the device.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req) } != 0 {
        return Err(SysError::os(format!("SIOCGIFHWADDR {name}"), errno()));
    }
    // SAFETY: SIOCGIFHWADDR filled ifru_hwaddr.
    let hw = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (m, b) in mac.iter_mut().zip(hw.sa_data.iter()) {
        *m = *b as u8;
    }
    // SAFETY: req is a live ifreq naming the device.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFMTU, &mut req) } != 0 {
        return Err(SysError::os(format!("SIOCGIFMTU {name}"), errno()));
    }
    // SAFETY: SIOCGIFMTU filled ifru_mtu.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu } as u32;
    Ok((name, ifindex, mac, mtu))
}

/// Set SO_BUSY_POLL and SO_PREFER_BUSY_POLL on the XDP socket (busy polling of the
/// driver from the receiving thread; effective where the driver polls with NAPI).
pub fn set_busy_poll(xsk: &Xsk, us: u32) -> Result<(), SysError> {
    const SO_PREFER_BUSY_POLL: i32 = 69;
    const SO_BUSY_POLL_BUDGET: i32 = 70;
    for (name, v, what) in [
        (libc::SO_BUSY_POLL, us.min(i32::MAX as u32) as i32, "SO_BUSY_POLL"),
        (SO_PREFER_BUSY_POLL, 1, "SO_PREFER_BUSY_POLL"),
        (SO_BUSY_POLL_BUDGET, 64, "SO_BUSY_POLL_BUDGET"),
    ] {
        // SAFETY: v is a live c_int.
        let rc = unsafe {
            libc::setsockopt(
                xsk.fd(),
                libc::SOL_SOCKET,
                name,
                &v as *const i32 as *const libc::c_void,
                4,
            )
        };
        if rc != 0 {
            return Err(SysError::os(format!("{what} {v} on the XDP socket"), errno()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_jumps_only_to_its_pass_exit_and_ends_in_exits() {
        let p = steering_program(Steer { ip: "198.18.0.2".parse().unwrap(), port: 9200 }, 5);
        let pass = p.len() - 2;
        for (i, x) in p.iter().enumerate() {
            if matches!(x.code, 0x2d | 0x55 | 0x56) {
                assert_eq!(i as i64 + 1 + x.off as i64, pass as i64, "insn {i}");
            }
        }
        assert_eq!(p[pass].imm, XDP_PASS);
        assert_eq!((p[pass + 1].code, p[pass - 1].code), (0x95, 0x95));
        // the address and port in network order, as a little-endian load sees them
        assert!(p
            .iter()
            .any(|x| x.code == 0x56 && x.imm as u32 == u32::from_le_bytes([198, 18, 0, 2])));
        assert!(p
            .iter()
            .any(|x| x.code == 0x55 && x.imm == u16::from_le_bytes(9200u16.to_be_bytes()) as i32));
        let lddw = p.iter().position(|x| x.code == 0x18).unwrap();
        assert_eq!((p[lddw].imm, p[lddw].regs >> 4), (5, 1), "the map fd, BPF_PSEUDO_MAP_FD");
    }
}

#[cfg(test)]
mod root_tests {
    use super::*;
    use std::process::Command;

    fn ip(args: &[&str]) -> String {
        let o = Command::new("ip").args(args).output().expect("ip(8)");
        assert!(o.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    struct Ns(String);
    impl Drop for Ns {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
        }
    }

    /// The verifier takes the program, it attaches to a veth, a socket binds to its queue and
    /// enters the map, and when they are dropped the device has no XDP program left.
    #[test]
    fn root_steering_loads_attaches_and_goes_with_its_link() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root (CI runs as root)");
            return;
        }
        let name = format!("rtxs{}", std::process::id() % 100_000);
        let _ns = Ns(name.clone());
        ip(&["netns", "add", &name]);
        ip(&["-n", &name, "link", "add", "xa", "type", "veth", "peer", "name", "xb"]);
        ip(&["-n", &name, "addr", "add", "198.18.7.1/24", "dev", "xa"]);
        for d in ["xa", "xb", "lo"] {
            ip(&["-n", &name, "link", "set", d, "up"]);
        }
        let path = format!("/run/netns/{name}");
        let r = crate::net::socket_in_netns(&path, || -> Result<_, SysError> {
            let (dev, ifindex, mac, mtu) = device_of("198.18.7.1".parse().unwrap())?;
            let steer = Steer { ip: "198.18.7.1".parse().unwrap(), port: 9300 };
            let s = attach_steering(ifindex, steer, false)?;
            let x = Xsk::open(ifindex, 0, s.mode == AttachMode::Generic)?;
            s.insert(0, &x)?;
            Ok((dev, mac, mtu, s.mode, x.mode, s.prog_id, s, x))
        })
        .unwrap();
        let (dev, mac, mtu, mode, copy, id, s, x) = r.unwrap();
        assert_eq!((dev.as_str(), mtu), ("xa", 1500));
        assert_ne!(mac, [0u8; 6]);
        assert_eq!(copy, CopyMode::Copy, "veth has no zero-copy");
        assert!(id > 0);
        let shown = ip(&["-n", &name, "-d", "link", "show", "dev", "xa"]);
        assert!(shown.contains(&format!("id {id}")), "{mode:?}: {shown}");
        drop((s, x));
        // the link's last descriptor is gone: the kernel detached the program
        let shown = ip(&["-n", &name, "-d", "link", "show", "dev", "xa"]);
        assert!(!shown.contains("prog/xdp"), "{shown}");
    }
}
