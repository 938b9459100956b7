//! The UDP probe's XDP path (`--xdp`): the same datagrams, sequence, deadlines and
//! accounting as the socket path, sent and received through an AF_XDP socket on the
//! device that holds the address, with rtlab's steering program in front of it.
//!
//! Contract: the frames are Ethernet / IPv4 (no options) / UDP, the UDP payload exactly
//! the socket path's datagram. The pinger's UDP checksum is 0 (allowed for IPv4, RFC 768);
//! the reflector answers in place (addresses and ports swapped, the kind byte changed) and
//! recomputes a checksum that was not 0. A frame that does not parse (lengths that
//! disagree, a header cut short) is counted as malformed, never answered. The kernel UDP
//! socket on the same address and port stays open for the whole run: it holds the port,
//! carries the pinger's pre-flight hellos, and takes what the program leaves to the
//! kernel. [`parse`] never panics on any input; nothing on the hot path allocates.
//!
//! Here: the frames and the pinger's link (this file), the opening of the path (`open`:
//! device, steering, socket, pre-flight), the reflector's loop (`reflect`), the streams'
//! labels of the path ([`path_labels`]).

pub(in crate::udp) mod open;
pub(in crate::udp) mod reflect;

use super::ping::{Link, Recv};
use rtlab_sys::net::{wait2, AbsTimer};
use rtlab_sys::xdp::{Frame, Xsk};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::ops::Range;

/// Ethernet + IPv4 + UDP header bytes.
pub const HDR: usize = 42;

/// The ones' complement sum of `b` (as 16-bit big-endian words), not yet folded.
fn sum16(b: &[u8], mut acc: u32) -> u32 {
    let mut c = b.chunks_exact(2);
    for w in &mut c {
        acc += u16::from_be_bytes([w[0], w[1]]) as u32;
    }
    if let [last] = c.remainder() {
        acc += (*last as u32) << 8;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// The 42 header bytes of a datagram of `payload` bytes from `src` to `dst`.
pub fn header(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: SocketAddrV4,
    dst: SocketAddrV4,
    tos: u8,
    payload: usize,
) -> [u8; HDR] {
    let mut h = [0u8; HDR];
    h[0..6].copy_from_slice(&dst_mac);
    h[6..12].copy_from_slice(&src_mac);
    h[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (20 + 8 + payload) as u16;
    h[14] = 0x45;
    h[15] = tos;
    h[16..18].copy_from_slice(&ip_len.to_be_bytes());
    h[20..22].copy_from_slice(&[0x40, 0x00]); // DF
    h[22] = 64;
    h[23] = 17;
    h[26..30].copy_from_slice(&src.ip().octets());
    h[30..34].copy_from_slice(&dst.ip().octets());
    let c = fold(sum16(&h[14..34], 0));
    h[24..26].copy_from_slice(&c.to_be_bytes());
    h[34..36].copy_from_slice(&src.port().to_be_bytes());
    h[36..38].copy_from_slice(&dst.port().to_be_bytes());
    h[38..40].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
    h
}

/// What a frame carries, when it is an IPv4/UDP datagram whose lengths agree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Udp4 {
    pub src_mac: [u8; 6],
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    /// Where the UDP payload lies in the frame.
    pub payload: Range<usize>,
}

/// Parse a frame (None: not IPv4 without options, not UDP, a fragment, or lengths that
/// disagree with each other or with the frame).
pub fn parse(f: &[u8]) -> Option<Udp4> {
    if f.len() < HDR || f[12..14] != [0x08, 0x00] || f[14] != 0x45 || f[23] != 17 {
        return None;
    }
    if u16::from_be_bytes([f[20], f[21]]) & 0x3fff != 0 {
        return None;
    }
    let ip_len = u16::from_be_bytes([f[16], f[17]]) as usize;
    let udp_len = u16::from_be_bytes([f[38], f[39]]) as usize;
    if ip_len < 28 || 14 + ip_len > f.len() || udp_len < 8 || udp_len != ip_len - 20 {
        return None;
    }
    let ip = |o: usize| Ipv4Addr::new(f[o], f[o + 1], f[o + 2], f[o + 3]);
    let port = |o: usize| u16::from_be_bytes([f[o], f[o + 1]]);
    let mut src_mac = [0u8; 6];
    src_mac.copy_from_slice(&f[6..12]);
    Some(Udp4 {
        src_mac,
        src: SocketAddrV4::new(ip(26), port(34)),
        dst: SocketAddrV4::new(ip(30), port(36)),
        payload: HDR..HDR + udp_len - 8,
    })
}

/// The UDP checksum of the datagram in `f` (parsed), over the pseudo header.
fn udp_checksum(f: &[u8], udp_len: usize) -> u16 {
    let mut acc = sum16(&f[26..34], 0); // source and destination addresses
    acc += 17 + udp_len as u32;
    acc = sum16(&f[34..38], acc); // ports, length and checksum (zero) skipped below
    acc += udp_len as u32;
    acc = sum16(&f[HDR..HDR + udp_len - 8], acc);
    match fold(acc) {
        0 => 0xffff,
        c => c,
    }
}

/// Turn the parsed request in `f` (its payload already made an answer) into the answer's
/// frame: MACs, addresses and ports swapped; the UDP checksum recomputed unless it was 0.
pub fn answer_in_place(f: &mut [u8], u: &Udp4) {
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&f[0..6]);
    f.copy_within(6..12, 0);
    f[6..12].copy_from_slice(&mac);
    for (a, b) in [(26, 30), (27, 31), (28, 32), (29, 33), (34, 36), (35, 37)] {
        f.swap(a, b);
    }
    if f[40..42] != [0, 0] {
        f[40..42].copy_from_slice(&[0, 0]);
        let c = udp_checksum(f, u.payload.len() + 8);
        f[40..42].copy_from_slice(&c.to_be_bytes());
    }
}

/// The pinger's XDP link: the AF_XDP socket, the header of every request, the wake-up
/// timer, and the kernel socket that holds the port.
pub struct XdpLink {
    pub xsk: Xsk,
    pub timer: AbsTimer,
    pub header: [u8; HDR],
    /// Spin on the rx ring (driving the driver's busy poll) instead of sleeping in poll(2).
    pub busy: bool,
    /// Frames that came in but were not IPv4/UDP datagrams whose lengths agree.
    pub malformed_frames: u64,
    /// Held for the run: the port is the pinger's.
    pub _sock: UdpSocket,
}

/// Polls of the rx ring between two clock reads when spinning.
const POLLS_PER_CHECK: u32 = 16;

impl Link for XdpLink {
    #[inline]
    fn now(&mut self) -> i64 {
        rtlab_sys::clock::monotonic_ns()
    }

    #[inline]
    fn send(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.xsk.reap();
        let Some(addr) = self.xsk.alloc() else {
            return Err(std::io::ErrorKind::WouldBlock.into());
        };
        let f = self.xsk.frame(addr);
        let len = HDR + buf.len();
        if len > f.len() {
            self.xsk.release(addr);
            return Err(std::io::ErrorKind::InvalidInput.into());
        }
        f[..HDR].copy_from_slice(&self.header);
        f[HDR..len].copy_from_slice(buf);
        if !self.xsk.tx(Frame { addr, len: len as u32 }) {
            self.xsk.release(addr);
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        self.xsk.kick()
    }

    #[inline]
    fn recv_until(&mut self, buf: &mut [u8], until_ns: i64) -> Recv {
        let mut polls = 0u32;
        loop {
            if let Some(fr) = self.xsk.rx() {
                let f = self.xsk.frame(fr.addr);
                let f = &f[..(fr.len as usize).min(f.len())];
                let n = match parse(f) {
                    Some(u) if u.payload.len() <= buf.len() => {
                        buf[..u.payload.len()].copy_from_slice(&f[u.payload.clone()]);
                        u.payload.len()
                    }
                    _ => {
                        self.malformed_frames += 1;
                        0 // an empty datagram: the engine counts it malformed
                    }
                };
                self.xsk.release(fr.addr);
                self.xsk.reap();
                return Recv::Datagram(n);
            }
            if self.busy {
                self.xsk.poke_rx();
                polls += 1;
                if polls.is_multiple_of(POLLS_PER_CHECK)
                    && rtlab_sys::clock::monotonic_ns() >= until_ns
                {
                    return Recv::Timeout;
                }
                std::hint::spin_loop();
                continue;
            }
            if rtlab_sys::clock::monotonic_ns() >= until_ns {
                return Recv::Timeout;
            }
            self.timer.arm(until_ns);
            let r = wait2(self.xsk.fd(), self.timer.fd(), -1);
            if r.b {
                self.timer.clear();
            }
        }
    }
}

/// `path` (socket / xdp) and, on the XDP path, what it had.
pub(in crate::udp) fn path_labels(
    labels: &mut std::collections::BTreeMap<String, String>,
    x: Option<&super::config::XdpReport>,
) {
    labels.insert("path".into(), if x.is_some() { "xdp" } else { "socket" }.into());
    if let Some(x) = x {
        labels.insert("xdp_dev".into(), x.dev.clone());
        labels.insert("xdp_attach".into(), x.attach.into());
        labels.insert("xdp_copy".into(), x.copy.into());
        labels.insert("xdp_queue".into(), x.queue.to_string());
        labels.insert("xdp_rx_dropped".into(), x.rx_dropped.to_string());
        labels.insert("xdp_malformed_frames".into(), x.malformed_frames.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udp::reflect::{Action, Reflector};
    use crate::udp::wire::{self, Kind};

    fn a(s: &str) -> SocketAddrV4 {
        s.parse().unwrap()
    }

    fn request_frame(payload: usize) -> Vec<u8> {
        let h = header([2; 6], [4; 6], a("198.18.0.1:4000"), a("198.18.0.2:9200"), 0, payload);
        let mut f = h.to_vec();
        let mut p = vec![0u8; payload];
        wire::write(&mut p, Kind::Request, 7, 3, 1234);
        f.extend_from_slice(&p);
        f
    }

    #[test]
    fn the_header_is_what_the_kernel_would_write() {
        let f = request_frame(64);
        let u = parse(&f).unwrap();
        assert_eq!(
            (u.src, u.dst, u.payload.clone()),
            (a("198.18.0.1:4000"), a("198.18.0.2:9200"), 42..106)
        );
        // a correct IP header sums to 0xffff (its checksum folded in)
        assert_eq!(fold(sum16(&f[14..34], 0)), 0);
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 92);
    }

    #[test]
    fn the_answer_swaps_ends_and_keeps_a_checksum_right() {
        for csum in [false, true] {
            let mut f = request_frame(100);
            if csum {
                let c = udp_checksum(&f, 108);
                f[40..42].copy_from_slice(&c.to_be_bytes());
            }
            let u = parse(&f).unwrap();
            let mut r = Reflector::new(None);
            let n = u.payload.len();
            assert_eq!(r.handle(&mut f[u.payload.clone()], n), Action::Answer(n));
            answer_in_place(&mut f, &u);
            let back = parse(&f).unwrap();
            assert_eq!((back.src, back.dst), (u.dst, u.src));
            assert_eq!((&f[0..6], &f[6..12]), (&[2u8; 6][..], &[4u8; 6][..]));
            assert_eq!(wire::parse(&f[back.payload]).unwrap().kind, Kind::Reply);
            if csum {
                // the receiver's check: the sum over pseudo header and datagram is 0xffff
                let stored = u16::from_be_bytes([f[40], f[41]]);
                f[40..42].copy_from_slice(&[0, 0]);
                assert_eq!(udp_checksum(&f, 108), stored);
            } else {
                assert_eq!(f[40..42], [0, 0], "a zero checksum stays zero");
            }
        }
    }

    #[test]
    fn frames_that_disagree_with_themselves_do_not_parse() {
        let good = request_frame(64);
        type Spoil = Box<dyn Fn(&mut Vec<u8>)>;
        let cases: Vec<(&str, Spoil)> = vec![
            ("short", Box::new(|f| f.truncate(41))),
            ("arp", Box::new(|f| f[12..14].copy_from_slice(&[0x08, 0x06]))),
            ("ip options", Box::new(|f| f[14] = 0x46)),
            ("tcp", Box::new(|f| f[23] = 6)),
            ("fragment", Box::new(|f| f[20] = 0x20)),
            (
                "ip length past the frame",
                Box::new(|f| f[16..18].copy_from_slice(&2000u16.to_be_bytes())),
            ),
            (
                "udp length != ip payload",
                Box::new(|f| f[38..40].copy_from_slice(&20u16.to_be_bytes())),
            ),
            (
                "udp length below its header",
                Box::new(|f| f[38..40].copy_from_slice(&4u16.to_be_bytes())),
            ),
            ("cut after the header", Box::new(|f| f.truncate(60))),
        ];
        for (what, spoil) in cases {
            let mut f = good.clone();
            spoil(&mut f);
            assert_eq!(parse(&f), None, "{what}");
        }
        // a frame with padding past the IP length (Ethernet minimum) still parses
        let mut f = request_frame(16);
        f.resize(60, 0);
        assert_eq!(parse(&f).unwrap().payload, 42..58);
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = parse(&bytes);
        }
    }
}
