//! Opening the XDP path: the device holding the local address, the steering program
//! (journaled), the AF_XDP socket on its queue 0, and for a ping the pre-flight hellos whose
//! answer names the peer's MAC.

use super::super::config::{
    SocketConfig, SocketReport, UdpError, UdpPingConfig, XdpConfig, XdpReport, RX_BYTES,
};
use super::super::open::{in_netns, AnyLink, OpenedPing};
use super::super::wire::{self, Kind};
use super::XdpLink;
use rtlab_sys::net::{self as sysnet, AbsTimer};
use rtlab_sys::SysError;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;

/// The XDP side of a run: the socket, the steering program, the device.
pub(in crate::udp) struct XdpSide {
    pub(in crate::udp) xsk: rtlab_sys::xdp::Xsk,
    pub(in crate::udp) steering: rtlab_sys::xdp::Steering,
    pub(in crate::udp) mac: [u8; 6],
    pub(in crate::udp) report: XdpReport,
    /// The journal's guard: dropped after `steering`.
    pub(in crate::udp) journaled: Option<Box<dyn std::any::Any>>,
}

/// Find the device holding `local`, journal, attach the steering program for `local` and
/// open the XDP socket on its queue 0; check that `payload` fits one frame.
pub(in crate::udp) fn open(
    netns: Option<&str>,
    local: SocketAddrV4,
    x: &XdpConfig,
    socket: &SocketConfig,
    payload: usize,
) -> Result<XdpSide, UdpError> {
    let (so_priority, busy_poll_us) = (socket.so_priority, socket.busy_poll_us);
    use rtlab_sys::xdp::{self as sx, AttachMode, Steer, Xsk};
    let ip = *local.ip();
    let (dev, ifindex, mac, mtu) = in_netns(netns, move || sx::device_of(ip))?
        .map_err(|e| UdpError::Invalid(format!("--xdp: {e}")))?;
    if payload + 28 > mtu as usize {
        return Err(UdpError::Invalid(format!("--payload {payload} with --xdp: above what one frame of {dev} carries (MTU {mtu}: at most {} bytes; the XDP path does not fragment)", (mtu as usize).saturating_sub(28))));
    }
    let journaled = match &x.journal {
        Some(j) => Some((j.0)(netns, &dev).map_err(|e| {
            UdpError::Invalid(format!("--xdp: journaling the XDP program on {dev}: {e}"))
        })?),
        None => None,
    };
    let generic = x.generic;
    let port = local.port();
    let (steering, xsk) = in_netns(netns, move || -> Result<_, SysError> {
        let s = sx::attach_steering(ifindex, Steer { ip, port }, generic)?;
        let xsk = Xsk::open(ifindex, 0, s.mode == AttachMode::Generic)?;
        s.insert(0, &xsk)?;
        Ok((s, xsk))
    })?
    .map_err(|e| UdpError::Invalid(format!("--xdp on {dev}: {e}")))?;
    if let Some(p) = so_priority {
        let p = i32::try_from(p)
            .map_err(|_| UdpError::Invalid(format!("--so-priority {p}: too large")))?;
        sysnet::set_priority(xsk.fd(), p)
            .map_err(|e| UdpError::Invalid(format!("--so-priority with --xdp: {e}")))?;
    }
    if let Some(us) = busy_poll_us {
        sx::set_busy_poll(&xsk, us)
            .map_err(|e| UdpError::Invalid(format!("--busy-poll {us} with --xdp: {e}")))?;
    }
    let report = XdpReport {
        dev,
        attach: steering.mode.name(),
        copy: xsk.mode.name(),
        queue: xsk.queue,
        rx_dropped: 0,
        malformed_frames: 0,
    };
    Ok(XdpSide { xsk, steering, mac, report, journaled })
}

/// The XDP path of a ping: an AF_XDP socket on the device holding the local address, the
/// peer's MAC found by the preflight, the frames' header.
pub(in crate::udp) fn open_ping(
    cfg: &UdpPingConfig,
    x: &XdpConfig,
    sock: UdpSocket,
    to: SocketAddr,
    run_id: u64,
    timer: AbsTimer,
) -> Result<OpenedPing, UdpError> {
    let (SocketAddr::V4(l4), SocketAddr::V4(to4)) =
        (sock.local_addr().map_err(|e| UdpError::Invalid(format!("--to {to}: {e}")))?, to)
    else {
        return Err(UdpError::Invalid(format!("--to {to}: --xdp builds IPv4 frames only")));
    };
    let mut side = open(cfg.netns.as_deref(), l4, x, &cfg.socket, cfg.payload)?;
    let dst_mac = preflight(&sock, &mut side.xsk, run_id, cfg.payload, to, cfg.preflight_ns)?;
    let tos = cfg.socket.tos.unwrap_or(0);
    let header = super::header(side.mac, dst_mac, l4, to4, tos, cfg.payload);
    let socket = SocketReport {
        so_priority: sysnet::priority(side.xsk.fd()),
        tos: Some(tos as i32),
        busy_poll_us: cfg.socket.busy_poll_us.map(|u| u as i32),
        ..Default::default()
    };
    let link = XdpLink {
        xsk: side.xsk,
        timer,
        header,
        busy: cfg.socket.busy_poll_us.is_some(),
        malformed_frames: 0,
        _sock: sock,
    };
    let held = (side.steering, side.journaled);
    Ok((socket, l4.to_string(), AnyLink::Xdp(Box::new(link)), Some(held), Some(side.report), None))
}

/// The pre-flight check of the XDP path: hellos go out through the kernel socket, the answer
/// comes back through the XDP socket; its source MAC is where the requests go.
fn preflight(
    s: &UdpSocket,
    xsk: &mut rtlab_sys::xdp::Xsk,
    run_id: u64,
    payload: usize,
    to: SocketAddr,
    wait_ns: i64,
) -> Result<[u8; 6], UdpError> {
    let now = rtlab_sys::clock::monotonic_ns;
    let start = now();
    let mut tx = vec![0u8; payload];
    let mut rx = vec![0u8; RX_BYTES];
    let mut refused = false;
    let mut attempt = 0u64;
    while now() - start < wait_ns {
        wire::write(&mut tx, Kind::Hello, run_id, attempt, now());
        attempt += 1;
        if let Err(e) = s.send(&tx) {
            refused |= e.raw_os_error() == Some(libc::ECONNREFUSED);
        }
        let until = now() + 200_000_000;
        while now() < until {
            // what reaches the kernel socket: ICMP errors (and answers the program let by)
            if let Err(e) = sysnet::recv_dontwait(s.as_raw_fd(), &mut rx) {
                refused |= e.raw_os_error() == Some(libc::ECONNREFUSED);
            }
            xsk.reap();
            if let Some(fr) = xsk.rx() {
                let f = xsk.frame(fr.addr);
                let f = &f[..(fr.len as usize).min(f.len())];
                let mac = super::parse(f).and_then(|u| {
                    let h = wire::parse(&f[u.payload.clone()]).ok()?;
                    (h.kind == Kind::HelloReply && h.is_run(run_id)).then_some(u.src_mac)
                });
                xsk.release(fr.addr);
                if let Some(m) = mac {
                    return Ok(m);
                }
                continue;
            }
            let left = ((until - now()) / 1_000_000).clamp(1, 50) as i32;
            sysnet::wait2(xsk.fd(), s.as_raw_fd(), left);
        }
    }
    Err(UdpError::NoReflector {
        addr: to.to_string(),
        waited_ms: wait_ns / 1_000_000,
        launched_late: None,
        refused,
    })
}
