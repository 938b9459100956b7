//! The real [`Link`]: a connected UDP socket, CLOCK_MONOTONIC, and a wait in poll(2) on
//! the socket and an absolute timerfd; with `--timestamps software`, the kernel's stamps of
//! each round trip split into stages ([`Stamps`]).
//!
//! Contract: no allocation. `recv_until` first takes what is queued (MSG_DONTWAIT), then
//! arms the timerfd at the absolute time asked for and sleeps in poll until a datagram or
//! the time comes; the time is read on CLOCK_MONOTONIC right after the wake-up by the
//! engine. Errors queued on the socket (ICMP port unreachable on a connected socket)
//! come back as [`Recv::Error`] and the run goes on. With stamps, the error queue's tx
//! stamps are taken before every receive and wait (else poll would wake at once for them).

use super::ping::{Link, Recv};
use rtlab_core::sink::{Recorder, Sink};
use rtlab_sys::net::{recv_dontwait, wait2, AbsTimer};
use rtlab_sys::stamp;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

/// A connected UDP socket with its wake-up timer.
pub struct UdpLink {
    pub sock: UdpSocket,
    pub timer: AbsTimer,
    /// The kernel's timestamps, when asked for (`--timestamps software`, `--txtime`).
    pub stamps: Option<Box<Stamps>>,
    /// Launch times (`--txtime`): CLOCK_TAI - CLOCK_MONOTONIC, for the SCM_TXTIME of each send.
    pub tai_offset: Option<i64>,
}

/// Where a round trip's time goes, from the kernel's software timestamps (all on
/// CLOCK_REALTIME, differences of stamps taken microseconds apart):
/// - `tx_stack`: the user's send call -> the driver hands the request to the device;
/// - `wire`: the request leaves the driver -> its reply enters the stack (the link both
///   ways and the far side, its reflector included);
/// - `rx_wakeup`: the reply enters the stack -> the pinger runs again to take it.
///
/// The three add up to the RTT (up to the clock reads around the send call).
pub struct Stamps {
    payload: usize,
    mask: u64,
    /// By seq & mask: (seq, user send REALTIME, driver tx REALTIME or 0, launch time
    /// MONOTONIC or 0).
    sent: Vec<(u64, i64, i64, i64)>,
    /// REALTIME read right before the last send call, and the launch time it was given.
    send_rt: i64,
    send_launch: i64,
    /// CLOCK_REALTIME - CLOCK_MONOTONIC when the run started; the run's start (MONOTONIC).
    rt_minus_mono: i64,
    start: i64,
    /// Launch lateness (`--txtime`): the request's driver tx stamp - its slot.
    pub launch: Option<Recorder>,
    /// Error-queue messages without a timestamp while sending with launch times: launches
    /// the qdisc refused or dropped (SO_EE_ORIGIN_TXTIME).
    pub launch_errors: u64,
    /// The last datagram received: (its driver rx REALTIME or 0, the user's REALTIME then).
    last_rx: (i64, i64),
    err_buf: Vec<u8>,
    cmsg: [u8; stamp::CMSG_BYTES],
    pub tx_stack: Recorder,
    pub wire: Recorder,
    pub rx_wakeup: Recorder,
    /// Samples whose request got no tx stamp (the driver gives none), or whose reply got no
    /// rx stamp: their stages are not recorded.
    pub no_tx_stamp: u64,
    pub no_rx_stamp: u64,
}

impl Stamps {
    /// `slots`: requests whose stamps are kept at once (rounded up to a power of two).
    /// `launch`: also record launch lateness (`--txtime`).
    pub fn new(payload: usize, slots: usize, launch: bool, make: impl Fn() -> Recorder) -> Stamps {
        let n = slots.next_power_of_two().max(1024);
        Stamps {
            payload,
            mask: n as u64 - 1,
            sent: vec![(u64::MAX, 0, 0, 0); n],
            send_rt: 0,
            send_launch: 0,
            rt_minus_mono: rtlab_sys::clock::realtime_ns() - rtlab_sys::clock::monotonic_ns(),
            start: 0,
            launch: launch.then(&make),
            launch_errors: 0,
            last_rx: (0, 0),
            err_buf: vec![0u8; 65536 + 256],
            cmsg: [0u8; stamp::CMSG_BYTES],
            tx_stack: make(),
            wire: make(),
            rx_wakeup: make(),
            no_tx_stamp: 0,
            no_rx_stamp: 0,
        }
    }

    /// Take every tx stamp waiting on the error queue of `fd`, filed by the request's seq
    /// (read from the looped-back packet's last `payload` bytes).
    #[inline]
    fn drain_tx(&mut self, fd: i32) {
        while let Some(r) = stamp::take_tx_stamp(fd, &mut self.err_buf, &mut self.cmsg) {
            let n = r.len;
            let Some(h) = n
                .checked_sub(self.payload)
                .and_then(|from| super::wire::parse(&self.err_buf[from..n]).ok())
            else {
                continue;
            };
            // a hello's refused launch is the pre-flight's, not a request's
            if r.launch_error && h.kind == super::wire::Kind::Request {
                self.launch_errors += 1;
            }
            let Some(ts) = r.stamp else { continue };
            let slot = &mut self.sent[(h.seq & self.mask) as usize];
            if h.kind == super::wire::Kind::Request && slot.0 == h.seq && slot.2 == 0 {
                slot.2 = ts;
                if let (Some(l), true) = (self.launch.as_mut(), slot.3 != 0) {
                    l.record(h.seq, slot.3 - self.start, ts - (slot.3 + self.rt_minus_mono));
                }
            }
        }
    }

    /// Record the stages of sample `seq`, sent `at_ns` after the run's start.
    #[inline]
    fn sample(&mut self, seq: u64, at_ns: i64) {
        let (s, user_tx, drv_tx, _) = self.sent[(seq & self.mask) as usize];
        let (drv_rx, user_rx) = self.last_rx;
        if drv_rx == 0 {
            self.no_rx_stamp += 1;
        } else {
            self.rx_wakeup.record(seq, at_ns, user_rx - drv_rx);
        }
        if s != seq || drv_tx == 0 {
            self.no_tx_stamp += 1;
            return;
        }
        self.tx_stack.record(seq, at_ns, drv_tx - user_tx);
        if drv_rx != 0 {
            self.wire.record(seq, at_ns, drv_rx - drv_tx);
        }
    }
}

impl Link for UdpLink {
    #[inline]
    fn now(&mut self) -> i64 {
        rtlab_sys::clock::monotonic_ns()
    }

    #[inline]
    fn send(&mut self, buf: &[u8]) -> std::io::Result<()> {
        if let Some(s) = self.stamps.as_mut() {
            s.send_rt = rtlab_sys::clock::realtime_ns();
        }
        match self.sock.send(buf) {
            Ok(n) if n == buf.len() => Ok(()),
            Ok(_) => Err(std::io::ErrorKind::WriteZero.into()),
            Err(e) => Err(e),
        }
    }

    #[inline]
    fn send_at(&mut self, buf: &[u8], launch_ns: i64) -> std::io::Result<()> {
        let Some(off) = self.tai_offset else { return self.send(buf) };
        if let Some(s) = self.stamps.as_mut() {
            s.send_rt = rtlab_sys::clock::realtime_ns();
            s.send_launch = launch_ns;
        }
        match stamp::send_at(self.sock.as_raw_fd(), buf, (launch_ns + off).max(0) as u64) {
            Ok(n) if n == buf.len() => Ok(()),
            Ok(_) => Err(std::io::ErrorKind::WriteZero.into()),
            Err(e) => Err(e),
        }
    }

    #[inline]
    fn on_start(&mut self, start: i64) {
        if let Some(s) = self.stamps.as_mut() {
            s.start = start;
        }
    }

    #[inline]
    fn on_send(&mut self, seq: u64) {
        if let Some(s) = self.stamps.as_mut() {
            s.sent[(seq & s.mask) as usize] = (seq, s.send_rt, 0, s.send_launch);
            s.send_launch = 0;
            s.drain_tx(self.sock.as_raw_fd());
        }
    }

    #[inline]
    fn on_sample(&mut self, seq: u64, at_ns: i64) {
        if let Some(s) = self.stamps.as_mut() {
            s.drain_tx(self.sock.as_raw_fd());
            s.sample(seq, at_ns);
        }
    }

    #[inline]
    fn recv_until(&mut self, buf: &mut [u8], until_ns: i64) -> Recv {
        let fd = self.sock.as_raw_fd();
        loop {
            match self.stamps.as_mut() {
                None => match recv_dontwait(fd, buf) {
                    Ok(Some(n)) => return Recv::Datagram(n),
                    Ok(None) => {}
                    Err(_) => return Recv::Error,
                },
                Some(s) => {
                    s.drain_tx(fd);
                    match stamp::recv_stamped(fd, buf, &mut s.cmsg) {
                        Ok(Some((n, ts))) => {
                            s.last_rx = (ts.unwrap_or(0), rtlab_sys::clock::realtime_ns());
                            return Recv::Datagram(n);
                        }
                        Ok(None) => {}
                        Err(_) => return Recv::Error,
                    }
                }
            }
            if rtlab_sys::clock::monotonic_ns() >= until_ns {
                return Recv::Timeout;
            }
            self.timer.arm(until_ns);
            let r = wait2(fd, self.timer.fd(), -1);
            if r.b {
                self.timer.clear();
            }
        }
    }
}
