//! The reflector on the XDP path: requests taken from the AF_XDP socket's rx ring and
//! answered in place on its tx ring.

use super::super::reflect::{Action, ReflectLoop, Reflector};
use crate::timer::LoopEnd;
use rtlab_core::sink::{Recorder, Sink};
use rtlab_sys::net as sysnet;
use std::sync::atomic::Ordering;

/// The reflector on the XDP path: take a frame, answer it in place and put it on the tx
/// ring, or give it back. The turnaround is stamped as on the socket path: from the frame
/// taken to the kick that sends the answer returned.
pub(in crate::udp) fn reflect(
    xsk: &mut rtlab_sys::xdp::Xsk,
    reflector: &mut Reflector,
    turnaround: &mut Recorder,
    l: &ReflectLoop,
    malformed_frames: &mut u64,
) -> LoopEnd {
    use rtlab_sys::xdp::Frame;
    let now = rtlab_sys::clock::monotonic_ns;
    let mut index = 0u64;
    let mut polls = 0u32;
    loop {
        if l.stop.load(Ordering::Relaxed) {
            return LoopEnd::Interrupted;
        }
        if matches!(l.count, Some(c) if reflector.counts.received >= c) {
            return LoopEnd::Count;
        }
        xsk.reap();
        let Some(fr) = xsk.rx() else {
            if l.busy {
                xsk.poke_rx();
                polls += 1;
                if polls.is_multiple_of(1024)
                    && matches!(l.duration, Some(d) if now() - l.start >= d)
                {
                    return LoopEnd::Duration;
                }
                std::hint::spin_loop();
            } else {
                let t = now();
                if matches!(l.duration, Some(d) if t - l.start >= d) {
                    return LoopEnd::Duration;
                }
                // wake at least every 100 ms to see the stop flag and the duration
                let left = l
                    .duration
                    .map(|d| ((l.start + d - t) / 1_000_000 + 1).clamp(1, 100) as i32)
                    .unwrap_or(100);
                sysnet::wait2(xsk.fd(), -1, left);
            }
            continue;
        };
        let t_recv = now();
        let f = xsk.frame(fr.addr);
        let len = (fr.len as usize).min(f.len());
        let answered = match super::parse(&f[..len]) {
            Some(u) => {
                let n = u.payload.len();
                match reflector.handle(&mut f[u.payload.clone()], n) {
                    Action::Answer(_) => {
                        super::answer_in_place(&mut f[..len], &u);
                        true
                    }
                    Action::Ignore => false,
                }
            }
            None => {
                reflector.counts.received += 1;
                reflector.counts.malformed += 1;
                *malformed_frames += 1;
                false
            }
        };
        if answered {
            if !xsk.tx(Frame { addr: fr.addr, len: len as u32 }) {
                reflector.counts.send_errors += 1;
                xsk.release(fr.addr);
            } else if xsk.kick().is_err() {
                reflector.counts.send_errors += 1;
            }
            turnaround.record(index, t_recv - l.start, now() - t_recv);
            index += 1;
        } else {
            xsk.release(fr.addr);
        }
        l.progress.store(reflector.counts.received, Ordering::Relaxed);
    }
}
