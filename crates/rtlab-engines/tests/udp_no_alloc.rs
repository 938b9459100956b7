//! The UDP ping loop allocates nothing: a counting global allocator watches a real run on
//! loopback (real socket, poll, timerfd) against a reflector thread, periodic and
//! pingpong, with losses (a reflector that drops), so every classification path runs.
//! Only allocations made on the measuring thread count; the file holds a single test.
//! The third run takes the kernel's timestamps (`--timestamps software`): the error queue
//! and the stages are read and recorded without allocating either.

use rtlab_core::sink::{Recorder, RecorderConfig};
use rtlab_engines::udp::link::{Stamps, UdpLink};
use rtlab_engines::udp::ping::{PingMode, PingPlan, Pinger};
use rtlab_engines::udp::reflect::{Action, Reflector};
use rtlab_engines::udp::track::Tracker;
use rtlab_engines::udp::wire::{self, Kind};
use rtlab_sys::net::AbsTimer;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

mod common;

#[global_allocator]
static A: common::Counting = common::Counting;

fn recorder(deadline: i64) -> Recorder {
    Recorder::new(
        &RecorderConfig {
            deadline_ns: deadline,
            window_ns: 10_000_000,
            window_capacity: 64,
            max_samples: None,
            us_histogram_buckets: None,
            spike_threshold_ns: None,
        },
        None,
    )
}

#[test]
fn the_ping_loop_allocates_nothing() {
    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    server.set_read_timeout(Some(std::time::Duration::from_millis(50))).unwrap();
    let addr = server.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let rstop = stop.clone();
    let reflector = std::thread::spawn(move || {
        let mut r = Reflector::new(Some(10));
        let mut buf = vec![0u8; 65536];
        while !rstop.load(Ordering::Relaxed) {
            if let Ok((n, from)) = server.recv_from(&mut buf) {
                if let Action::Answer(len) = r.handle(&mut buf, n) {
                    let _ = server.send_to(&buf[..len], from);
                }
            }
        }
        r.counts.dropped
    });

    let mut dropped = 0;
    for (mode, run_id, stamped) in [
        (PingMode::Periodic, 77u64, false),
        (PingMode::Pingpong, 78, false),
        (PingMode::Periodic, 79, true),
    ] {
        // another run id per run: the reflector tracks runs apart
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.connect(addr).unwrap();
        let stamps = stamped.then(|| {
            rtlab_sys::stamp::enable_software(std::os::fd::AsRawFd::as_raw_fd(&sock), true)
                .unwrap();
            Box::new(Stamps::new(64, 1024, false, || recorder(i64::MAX)))
        });
        let mut link = UdpLink { sock, timer: AbsTimer::new().unwrap(), stamps, tai_offset: None };
        let plan = PingPlan {
            mode,
            period_ns: 200_000,
            count: Some(300),
            duration_ns: None,
            loss_timeout_ns: 50_000_000,
            lead_ns: 0,
        };
        let mut tracker = Tracker::new(1024, plan.loss_timeout_ns, 1_000_000, run_id, 64);
        let mut tx = vec![0u8; 64];
        wire::write(&mut tx, Kind::Request, run_id, 0, 0);
        wire::fill(&mut tx);
        let mut rx = vec![0u8; 65536];
        let (mut rtt, mut lateness) = (recorder(1_000_000), recorder(i64::MAX));
        let never = AtomicBool::new(false);
        let progress = AtomicU64::new(0);
        let start = rtlab_sys::clock::monotonic_ns() + 1_000_000;
        let (_, allocs) = common::allocations_of(|| {
            Pinger {
                link: &mut link,
                tracker: &mut tracker,
                tx: &mut tx,
                rx: &mut rx,
                run_id,
                rtt: &mut rtt,
                lateness: &mut lateness,
                stop: &never,
                progress: &progress,
            }
            .run(&plan, start)
        });
        let c = tracker.counts;
        // the loss path ran (every 10th request is dropped); the exact count is checked
        // elsewhere with the default 500 ms timeout, here a busy machine may add late ones
        // 300 slots: each sent or (periodic) skipped when the sender was late past it
        assert_eq!(c.sent + rtt.overruns, 300, "{mode:?}: {c:?}");
        assert!(c.lost >= c.sent / 10, "{mode:?}: {c:?}");
        dropped += c.sent / 10;
        assert_eq!(c.sent, c.samples + c.lost, "{c:?}");
        assert_eq!(allocs, 0, "{mode:?} (stamps: {stamped}): the ping loop allocated");
        if let Some(s) = &link.stamps {
            // loopback stamps every datagram both ways
            assert_eq!(s.tx_stack.running.count + s.no_tx_stamp, c.samples);
            assert_eq!(s.rx_wakeup.running.count + s.no_rx_stamp, c.samples);
            assert!(s.wire.running.count > 0 && s.tx_stack.running.min >= 0, "{c:?}");
        }
    }
    stop.store(true, Ordering::Relaxed);
    assert_eq!(reflector.join().unwrap(), dropped);
}
