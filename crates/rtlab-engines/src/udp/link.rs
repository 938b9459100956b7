//! The real [`Link`]: a connected UDP socket, CLOCK_MONOTONIC, and a wait in poll(2) on
//! the socket and an absolute timerfd.
//!
//! Contract: no allocation. `recv_until` first takes what is queued (MSG_DONTWAIT), then
//! arms the timerfd at the absolute time asked for and sleeps in poll until a datagram or
//! the time comes; the time is read on CLOCK_MONOTONIC right after the wake-up by the
//! engine. Errors queued on the socket (ICMP port unreachable on a connected socket)
//! come back as [`Recv::Error`] and the run goes on.

use super::ping::{Link, Recv};
use rtlab_sys::net::{recv_dontwait, wait2, AbsTimer};
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

/// A connected UDP socket with its wake-up timer.
pub struct UdpLink {
    pub sock: UdpSocket,
    pub timer: AbsTimer,
}

impl Link for UdpLink {
    #[inline]
    fn now(&mut self) -> i64 {
        rtlab_sys::clock::monotonic_ns()
    }

    #[inline]
    fn send(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self.sock.send(buf) {
            Ok(n) if n == buf.len() => Ok(()),
            Ok(_) => Err(std::io::ErrorKind::WriteZero.into()),
            Err(e) => Err(e),
        }
    }

    #[inline]
    fn recv_until(&mut self, buf: &mut [u8], until_ns: i64) -> Recv {
        let fd = self.sock.as_raw_fd();
        loop {
            match recv_dontwait(fd, buf) {
                Ok(Some(n)) => return Recv::Datagram(n),
                Ok(None) => {}
                Err(_) => return Recv::Error,
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
