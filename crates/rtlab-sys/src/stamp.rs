//! Kernel timestamps of a UDP socket's datagrams (SO_TIMESTAMPING, timestamping.rst) and
//! launch times (SO_TXTIME, for the etf qdisc), and what a device offers (ETHTOOL_GET_TS_INFO).
//!
//! Contract: software timestamps are CLOCK_REALTIME, taken by the kernel when the driver
//! hands a datagram to the device (tx) and when the device's datagram enters the stack
//! (rx). [`recv_stamped`] and [`take_tx_stamp`] never allocate (the caller's buffers) and
//! never block. Nothing here prints.

use crate::SysError;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

const SO_TIMESTAMPING: i32 = 37; // SO_TIMESTAMPING_OLD: struct timespec, 64-bit here
const SCM_TIMESTAMPING: i32 = SO_TIMESTAMPING;
const SO_TXTIME: i32 = 61;
const SCM_TXTIME: i32 = SO_TXTIME;

/// Ask for software rx timestamps on `fd`, and tx ones with `tx`. The first socket on the
/// machine to ask for rx stamps turns the kernel's stamping on through a work item: the
/// datagrams of the next moments may come without one (ask early; count what lacks one).
pub fn enable_software(fd: RawFd, tx: bool) -> Result<(), SysError> {
    let flags: u32 = if tx { libc::SOF_TIMESTAMPING_TX_SOFTWARE } else { 0 }
        | libc::SOF_TIMESTAMPING_RX_SOFTWARE
        | libc::SOF_TIMESTAMPING_SOFTWARE;
    // SAFETY: flags is a live u32 of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_TIMESTAMPING,
            &flags as *const u32 as *const libc::c_void,
            4,
        )
    };
    if rc != 0 {
        return Err(SysError::os("SO_TIMESTAMPING (software tx and rx)", errno()));
    }
    Ok(())
}

/// Room for the control messages of one datagram.
pub const CMSG_BYTES: usize = 256;

/// The origin of an error-queue message that is a rejected or missed launch time, and the
/// code of a missed one (linux/errqueue.h).
const SO_EE_ORIGIN_TXTIME: u8 = 6;
const SO_EE_CODE_TXTIME_MISSED: u8 = 2;

/// The first software timestamp (ns, CLOCK_REALTIME) among `msg`'s control messages, and
/// the origin and code of its extended error (IP_RECVERR / IPV6_RECVERR) when it carries one.
fn stamp_of(msg: &libc::msghdr) -> (Option<i64>, Option<(u8, u8)>) {
    let (mut stamp, mut origin) = (None, None);
    // SAFETY: msg was filled by recvmsg; the CMSG macros walk its control buffer.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            let (level, kind) = ((*c).cmsg_level, (*c).cmsg_type);
            if level == libc::SOL_SOCKET && kind == SCM_TIMESTAMPING && stamp.is_none() {
                let ts = libc::CMSG_DATA(c) as *const libc::timespec;
                let t = ts.read_unaligned();
                if t.tv_sec != 0 || t.tv_nsec != 0 {
                    stamp = Some(t.tv_sec * 1_000_000_000 + t.tv_nsec);
                }
            }
            if (level == libc::SOL_IP && kind == libc::IP_RECVERR)
                || (level == libc::SOL_IPV6 && kind == libc::IPV6_RECVERR)
            {
                let e = (libc::CMSG_DATA(c) as *const libc::sock_extended_err).read_unaligned();
                origin = Some((e.ee_origin, e.ee_code));
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    (stamp, origin)
}

/// One message of a socket's error queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxReport {
    /// Bytes of the looped-back packet in the buffer, its headers first.
    pub len: usize,
    /// When the driver handed it to the device (CLOCK_REALTIME), for a timestamp report.
    pub stamp: Option<i64>,
    /// A launch time the qdisc refused or missed (SO_EE_ORIGIN_TXTIME): not sent.
    pub launch_error: bool,
    /// Of those, one the qdisc released after its time had passed (SO_EE_CODE_TXTIME_MISSED:
    /// etf woke later than its delta allows), not one it refused on arrival.
    pub launch_missed: bool,
}

/// What [`recvmsg`] got: bytes, a software stamp, an extended error's origin and code.
type Got = (usize, Option<i64>, Option<(u8, u8)>);

fn recvmsg(fd: RawFd, buf: &mut [u8], cmsg: &mut [u8], flags: i32) -> std::io::Result<Option<Got>> {
    let mut iov =
        libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
    // SAFETY: msghdr is plain data; every pointer set below is to a live buffer.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = cmsg.len();
    // SAFETY: msg points at live buffers of the lengths given.
    let n = unsafe { libc::recvmsg(fd, &mut msg, flags | libc::MSG_DONTWAIT) };
    if n >= 0 {
        let (stamp, origin) = stamp_of(&msg);
        return Ok(Some((n as usize, stamp, origin)));
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
        _ => Err(e),
    }
}

/// Receive one datagram without blocking, with its software rx timestamp when the kernel
/// gave one. Ok(None): nothing queued.
#[inline]
pub fn recv_stamped(
    fd: RawFd,
    buf: &mut [u8],
    cmsg: &mut [u8],
) -> std::io::Result<Option<(usize, Option<i64>)>> {
    Ok(recvmsg(fd, buf, cmsg, 0)?.map(|(n, stamp, _)| (n, stamp)))
}

/// Take one message from the socket's error queue: a tx timestamp, or a launch time the
/// qdisc refused (its looped-back packet carries the launch time as a stamp: not one).
/// None: the queue is empty.
#[inline]
pub fn take_tx_stamp(fd: RawFd, buf: &mut [u8], cmsg: &mut [u8]) -> Option<TxReport> {
    let (len, stamp, origin) = recvmsg(fd, buf, cmsg, libc::MSG_ERRQUEUE).ok().flatten()?;
    let launch_error = origin.is_some_and(|(o, _)| o == SO_EE_ORIGIN_TXTIME);
    let launch_missed = launch_error && origin.is_some_and(|(_, c)| c == SO_EE_CODE_TXTIME_MISSED);
    Some(TxReport { len, stamp: stamp.filter(|_| !launch_error), launch_error, launch_missed })
}

/// What a device's driver offers (SOF_TIMESTAMPING_* bits), from ETHTOOL_GET_TS_INFO, in
/// the calling thread's network namespace.
pub fn device_offers(dev: &str) -> Result<u32, SysError> {
    #[repr(C)]
    struct TsInfo {
        cmd: u32,
        so_timestamping: u32,
        phc_index: i32,
        tx_types: u32,
        tx_reserved: [u32; 3],
        rx_filters: u32,
        rx_reserved: [u32; 3],
    }
    const ETHTOOL_GET_TS_INFO: u32 = 0x41;
    let mut info = TsInfo {
        cmd: ETHTOOL_GET_TS_INFO,
        so_timestamping: 0,
        phc_index: -1,
        tx_types: 0,
        tx_reserved: [0; 3],
        rx_filters: 0,
        rx_reserved: [0; 3],
    };
    // SAFETY: a plain socket for the ioctl, owned below.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(SysError::os("socket(AF_INET) for ETHTOOL_GET_TS_INFO", errno()));
    }
    // SAFETY: s is a fresh descriptor.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    // SAFETY: ifreq is plain data.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in dev.bytes().take(libc::IFNAMSIZ - 1).enumerate() {
        req.ifr_name[i] = b as libc::c_char;
    }
    req.ifr_ifru.ifru_data = &mut info as *mut TsInfo as *mut libc::c_char;
    // SAFETY: req names the device and points at a live ethtool_ts_info.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCETHTOOL, &mut req) } != 0 {
        return Err(SysError::os(format!("ETHTOOL_GET_TS_INFO {dev}"), errno()));
    }
    Ok(info.so_timestamping)
}

/// The offers in words (`software tx, software rx, hardware tx, hardware rx`).
pub fn describe_offers(bits: u32) -> String {
    let mut v = Vec::new();
    for (b, w) in [
        (libc::SOF_TIMESTAMPING_TX_SOFTWARE, "software tx"),
        (libc::SOF_TIMESTAMPING_RX_SOFTWARE, "software rx"),
        (libc::SOF_TIMESTAMPING_TX_HARDWARE, "hardware tx"),
        (libc::SOF_TIMESTAMPING_RX_HARDWARE, "hardware rx"),
    ] {
        if bits & b != 0 {
            v.push(w);
        }
    }
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Whether the offers include hardware tx and rx timestamps with a raw hardware clock.
pub fn offers_hardware(bits: u32) -> bool {
    let want = libc::SOF_TIMESTAMPING_TX_HARDWARE
        | libc::SOF_TIMESTAMPING_RX_HARDWARE
        | libc::SOF_TIMESTAMPING_RAW_HARDWARE;
    bits & want == want
}

/// Let `fd` send with launch times on `clock` (SO_TXTIME; the etf qdisc honours them).
/// `report_errors`: ask for the errors of late or dropped launches on the error queue.
pub fn enable_txtime(
    fd: RawFd,
    clock: libc::clockid_t,
    report_errors: bool,
) -> Result<(), SysError> {
    const SOF_TXTIME_REPORT_ERRORS: u32 = 1 << 1;
    let cfg = libc::sock_txtime {
        clockid: clock,
        flags: if report_errors { SOF_TXTIME_REPORT_ERRORS } else { 0 },
    };
    // SAFETY: cfg is a live sock_txtime of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_TXTIME,
            &cfg as *const libc::sock_txtime as *const libc::c_void,
            std::mem::size_of::<libc::sock_txtime>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        let e = errno();
        let what = if e == libc::EPERM {
            "SO_TXTIME (needs CAP_NET_ADMIN: run as root)"
        } else {
            "SO_TXTIME"
        };
        return Err(SysError::os(what, e));
    }
    Ok(())
}

/// Send `buf` on the connected socket `fd` to leave at `txtime_ns` (on the clock given to
/// [`enable_txtime`]): one SCM_TXTIME control message. Never allocates.
#[inline]
pub fn send_at(fd: RawFd, buf: &[u8], txtime_ns: u64) -> std::io::Result<usize> {
    // room for one cmsg carrying a u64, aligned as the kernel reads it
    #[repr(C, align(8))]
    struct Ctl([u8; 32]);
    let mut ctl = Ctl([0u8; 32]);
    let mut iov = libc::iovec { iov_base: buf.as_ptr() as *mut libc::c_void, iov_len: buf.len() };
    // SAFETY: msghdr is plain data; every pointer set below is to a live buffer.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.0.as_mut_ptr() as *mut libc::c_void;
    // SAFETY: CMSG_SPACE is a pure size computation.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(8) } as usize;
    // SAFETY: the control buffer holds CMSG_SPACE(8) bytes (32 >= 24).
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = SCM_TXTIME;
        (*c).cmsg_len = libc::CMSG_LEN(8) as usize;
        (libc::CMSG_DATA(c) as *mut u64).write_unaligned(txtime_ns);
    }
    // SAFETY: msg points at live buffers.
    let n = unsafe { libc::sendmsg(fd, &msg, 0) };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// CLOCK_TAI now, ns.
#[inline]
pub fn tai_ns() -> i64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: t is a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_TAI, &mut t) };
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On loopback the kernel stamps a datagram when it leaves (tx, error queue) and when it
    /// arrives (rx), in that order, on CLOCK_REALTIME around the user's own reads.
    #[test]
    fn loopback_datagrams_carry_tx_and_rx_stamps() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        enable_software(a.as_raw_fd(), true).unwrap();
        enable_software(b.as_raw_fd(), true).unwrap();
        let (mut buf, mut cmsg) = ([0u8; 2048], [0u8; CMSG_BYTES]);
        // the kernel turns rx stamping on through a work item: the first datagrams may come
        // without a stamp; one with both comes within a few tries
        for attempt in 0..200 {
            let before = crate::clock::realtime_ns();
            a.send(&[7u8; 100]).unwrap();
            let mut rx = None;
            for _ in 0..1000 {
                if let Some(r) = recv_stamped(b.as_raw_fd(), &mut buf, &mut cmsg).unwrap() {
                    rx = Some(r);
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let (n, rx_ts) = rx.expect("the datagram arrives");
            assert_eq!(n, 100);
            let r = take_tx_stamp(a.as_raw_fd(), &mut buf, &mut cmsg).expect("a tx stamp");
            assert!(!r.launch_error);
            assert!(r.len >= 100, "the packet comes back with its headers: {}", r.len);
            assert_eq!(&buf[r.len - 100..r.len], &[7u8; 100][..]);
            let tx = r.stamp.expect("tx stamps do not wait for the work item");
            let Some(rx) = rx_ts else {
                assert!(attempt < 199, "no rx stamp in 200 datagrams");
                std::thread::sleep(std::time::Duration::from_millis(5));
                continue;
            };
            let after = crate::clock::realtime_ns();
            assert!(before <= tx && tx <= rx && rx <= after, "{before} {tx} {rx} {after}");
            break;
        }
        assert!(!offers_hardware(0) && describe_offers(0) == "none");
    }
}
