//! The steering XDP program: emitted here as BPF instructions, loaded with bpf(2), attached
//! through a BPF link (the kernel detaches it when the link's last descriptor closes).

use super::os::{dev_name, errno, owned};
use super::xsk::Xsk;
use crate::SysError;
use std::os::fd::{AsRawFd, OwnedFd};

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
        let value = xsk.fd() as u32;
        let mut a = Attr::new();
        a.u32(0, self.map.as_raw_fd() as u32)
            .u64(8, &key as *const u32 as u64)
            .u64(16, &value as *const u32 as u64);
        bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ()).map_err(|e| {
            SysError::os(format!("putting the XDP socket in the XSKMAP at queue {queue}"), e)
        })
    }
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
