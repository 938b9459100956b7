//! Where a shared-memory round trip's time goes: iceoryx2's own ping-pong loop, then rtlab's
//! pieces added one rung at a time, every rung in every round (interleaved, so a change of
//! where the host runs the two vCPUs moves all rungs alike).
//!
//! ```text
//! cargo run --release -p rtlab-pubsub --example shm_ladder -- [ROUNDS] [ROUND_TRIPS] [PAYLOAD]
//! cargo run --release -p rtlab-pubsub --example shm_ladder -- --one-thread RUNG ROUND_TRIPS
//! ```
//!
//! Two threads pinned to CPUs 0 and 1 (the pinger and the echo), busy-polling; each rung
//! prints the mean round trip as iceoryx2's benchmark computes it (the loop's time / round
//! trips). `--one-thread` runs a rung's publishes and takes on one thread, no spinning (ping,
//! the echo's take and publish, the pong's take): run under `valgrind --tool=cachegrind
//! --cache-sim=no` at two counts, the difference of the instructions over the difference of
//! the counts is a rung's instructions per round trip (this machine has no PMU counters).
//!
//! The rungs (the engine's pieces, and beside them what they replaced, measured in the same
//! run):
//! - `iox2`: iceoryx2's benchmark (benchmarks/publish-subscribe): its service (1 publisher,
//!   1 subscriber, buffer 1), its loop (send, loan the next, spin on `receive`);
//! - `iox2-service-by-hand`: the same loop on the service rtlab's shm transport opens for a
//!   run by hand (2 publishers, 16 subscribers, 20 nodes, buffer 5 as keep-last 5, 2 loaned
//!   samples), as it did for every run before;
//! - `iox2-service-sized`: on the service it opens for a run with one subscriber (1
//!   publisher, 1 subscriber, buffer 5, 2 loaned samples);
//! - `iox2-header`: and the message touched as rtlab's shm transport touches it, still
//!   through iceoryx2's API (`write_from_slice`, `payload_mut`, `payload`): the publisher
//!   writes the next body (the payload) right after a send, the 16-byte header (sequence,
//!   stamp) at the send; the receiver reads the header (the benchmark's receiver never reads
//!   the payload, its sender never writes one);
//! - `transport`: rtlab's `ShmTransport` (sized for one subscriber) publisher and
//!   subscriber, spinning on `try_take` only: the header in the samples' user header, so
//!   neither side asks for the payload slice on the way (iceoryx2 locks the port's mutex
//!   for that) and the receiver never reads the payload;
//! - `transport-check-per-poll`: the spin reading the clock and running `spin_loop()` (x86
//!   PAUSE) on every poll, as the engine's busy-poll did;
//! - `transport-take`: the spin as the engine's busy-poll now is (`Subscriber::take_until`:
//!   both once per 16 polls);
//! - `closed-loop`: and the engine's closed loop's clock reads per round trip (the send
//!   stamp, also its end check; the arrival stamp) and its echo loop's (the stop flag; the
//!   clock only when a wait slice ends) — all of `rtlab pubsub --schedule closed-loop` but
//!   its recorder.

use iceoryx2::prelude::*;
use rtlab_pubsub::transport::shm::ShmTransport;
use rtlab_pubsub::transport::{
    decode_header, encode_header, Publisher, Qos, Subscriber, Transport, WaitStyle,
};
use rtlab_sys::clock::monotonic_ns;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;

type Svc = ipc_threadsafe::Service;

const IOX: usize = 0;
const IOX_SERVICE_BY_HAND: usize = 1;
const IOX_SERVICE_SIZED: usize = 2;
const IOX_HEADER: usize = 3;
const TRANSPORT: usize = 4;
const TRANSPORT_CHECK_PER_POLL: usize = 5;
const TRANSPORT_TAKE: usize = 6;
const CLOSED_LOOP: usize = 7;
const RUNGS: [&str; 8] = [
    "iox2",
    "iox2-service-by-hand",
    "iox2-service-sized",
    "iox2-header",
    "transport",
    "transport-check-per-poll",
    "transport-take",
    "closed-loop",
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    set_log_level(LogLevel::Error);
    if args.first().map(String::as_str) == Some("--one-thread") {
        let rung = args.get(1).map(String::as_str).unwrap_or("iox2");
        let n = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10_000);
        let rung = RUNGS.iter().position(|r| *r == rung).unwrap_or_else(|| {
            eprintln!("shm_ladder: error: --one-thread: no rung {rung:?} (one of {RUNGS:?})");
            std::process::exit(2)
        });
        one_thread(rung, n, 64);
        return;
    }
    let rounds: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(3);
    let n: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let len: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(64);
    println!("# shm_ladder: {rounds} rounds, {n} round trips per rung and round, {len} B, CPUs 0 and 1, mean round trip ns (loop time / round trips)");
    println!(
        "| rung | median | min | {} |",
        (1..=rounds).map(|r| format!("round {r}")).collect::<Vec<_>>().join(" | ")
    );
    println!("|---|---|---|{}", "---|".repeat(rounds));
    let mut table = vec![Vec::new(); RUNGS.len()];
    for _ in 0..rounds {
        for (i, row) in table.iter_mut().enumerate() {
            row.push(two_threads(i, n, len));
        }
    }
    for (i, row) in table.iter().enumerate() {
        let cells: Vec<String> = row.iter().map(|ns| format!("{ns:.0}")).collect();
        let mut sorted = row.clone();
        sorted.sort_by(f64::total_cmp);
        let median = sorted[sorted.len() / 2];
        println!("| {} | {median:.0} | {:.0} | {} |", RUNGS[i], sorted[0], cells.join(" | "));
    }
}

fn topic(tag: &str) -> String {
    format!("shm_ladder_{}_{}_{tag}", std::process::id(), monotonic_ns() % 1_000_000_000)
}

/// The two directions of a rung's round trip, as the pinger's and the echo's ends.
enum Ends {
    Iox {
        ping_pub: iceoryx2::port::publisher::Publisher<Svc, [u8], ()>,
        pong_sub: iceoryx2::port::subscriber::Subscriber<Svc, [u8], ()>,
        echo_pub: iceoryx2::port::publisher::Publisher<Svc, [u8], ()>,
        echo_sub: iceoryx2::port::subscriber::Subscriber<Svc, [u8], ()>,
    },
    Rtlab {
        ping_pub: Box<dyn Publisher>,
        pong_sub: Box<dyn Subscriber>,
        echo_pub: Box<dyn Publisher>,
        echo_sub: Box<dyn Subscriber>,
    },
}

type PortFactory = iceoryx2::service::port_factory::publish_subscribe::PortFactory<Svc, [u8], ()>;

/// iceoryx2's services and ports for rungs `IOX..=IOX_HEADER`: the benchmark's, or rtlab's
/// for a run by hand, or rtlab's for one subscriber.
fn iox_services(node: &Node<Svc>, rung: usize) -> (PortFactory, PortFactory) {
    let make = |tag: &str| {
        let name = ServiceName::new(&topic(tag)).unwrap();
        let b = node.service_builder(&name).publish_subscribe::<[u8]>().history_size(0);
        let b = match rung {
            IOX => b.max_publishers(1).max_subscribers(1).subscriber_max_buffer_size(1),
            IOX_SERVICE_BY_HAND => {
                b.max_publishers(2).max_subscribers(16).max_nodes(20).subscriber_max_buffer_size(5)
            }
            IOX_SERVICE_SIZED.. => {
                b.max_publishers(1).max_subscribers(1).max_nodes(5).subscriber_max_buffer_size(5)
            }
        };
        b.enable_safe_overflow(true).create().unwrap()
    };
    (make("a2b"), make("b2a"))
}

fn iox_ends(a2b: &PortFactory, b2a: &PortFactory, rung: usize, len: usize) -> Ends {
    let publisher = |svc: &PortFactory| {
        let b = svc.publisher_builder().initial_max_slice_len(len);
        let b = if rung == IOX { b } else { b.max_loaned_samples(2) };
        b.create().unwrap()
    };
    let subscriber = |svc: &PortFactory| {
        let b = svc.subscriber_builder();
        let b = if rung == IOX { b } else { b.buffer_size(5) };
        b.create().unwrap()
    };
    Ends::Iox {
        ping_pub: publisher(a2b),
        pong_sub: subscriber(b2a),
        echo_pub: publisher(b2a),
        echo_sub: subscriber(a2b),
    }
}

fn rtlab_ends(t: &ShmTransport, len: usize) -> Ends {
    let (a2b, b2a) = (topic("a2b"), topic("b2a"));
    let qos = Qos::default();
    Ends::Rtlab {
        ping_pub: t.publisher(&a2b, &qos, len).unwrap(),
        pong_sub: t.subscriber(&b2a, &qos, len).unwrap(),
        echo_pub: t.publisher(&b2a, &qos, len).unwrap(),
        echo_sub: t.subscriber(&a2b, &qos, len).unwrap(),
    }
}

/// What a rung's ports need alive: the node and services of the iceoryx2 rungs, the transport
/// of rtlab's.
struct Rig {
    _node: Node<Svc>,
    _transport: ShmTransport,
    _services: Option<(PortFactory, PortFactory)>,
}

/// A rung's four ports, and what they need alive.
fn rig(rung: usize, len: usize) -> (Rig, Ends) {
    let node = NodeBuilder::new()
        .signal_handling_mode(SignalHandlingMode::Disabled)
        .create::<Svc>()
        .unwrap();
    let transport = ShmTransport::new().unwrap().busy_poll().sized_for(1);
    let services = (rung <= IOX_HEADER).then(|| iox_services(&node, rung));
    let ends = match &services {
        Some((a2b, b2a)) => iox_ends(a2b, b2a, rung, len),
        None => rtlab_ends(&transport, len),
    };
    (Rig { _node: node, _transport: transport, _services: services }, ends)
}

/// A rung's mean round trip in ns: the pinger on CPU 0, the echo on CPU 1.
fn two_threads(rung: usize, n: u64, len: usize) -> f64 {
    let (_rig, ends) = rig(rung, len);
    let start = Barrier::new(2);
    let stop = AtomicBool::new(false);
    let start = &start;
    std::thread::scope(|s| match ends {
        Ends::Iox { ping_pub, pong_sub, echo_pub, echo_sub } => {
            let header = rung == IOX_HEADER;
            s.spawn(move || {
                rtlab_sys::sched::set_current_affinity(&[1]).unwrap();
                start.wait();
                for _ in 0..n {
                    // the benchmark's echo: loan, spin, send
                    let sample = loan(&echo_pub, len, header);
                    let got = loop {
                        if let Some(got) = echo_sub.receive().unwrap() {
                            break got;
                        }
                    };
                    answer(got, sample, header);
                }
            });
            rtlab_sys::sched::set_current_affinity(&[0]).unwrap();
            start.wait();
            let t0 = monotonic_ns();
            let mut sample = loan(&ping_pub, len, header);
            for k in 0..n {
                sample = ping(sample, &ping_pub, k, len, header);
                loop {
                    if let Some(got) = pong_sub.receive().unwrap() {
                        if header {
                            std::hint::black_box(decode_header(got.payload()));
                        }
                        break;
                    }
                }
            }
            (monotonic_ns() - t0) as f64 / n as f64
        }
        Ends::Rtlab { mut ping_pub, mut pong_sub, mut echo_pub, mut echo_sub } => {
            let stop = &stop;
            s.spawn(move || {
                rtlab_sys::sched::set_current_affinity(&[1]).unwrap();
                start.wait();
                let give_up = monotonic_ns() + 60_000_000_000;
                let mut until = monotonic_ns() + 50_000_000;
                for _ in 0..n {
                    let r = if rung == CLOSED_LOOP {
                        // the engine's echo loop: stop flag, a take until the slice's end
                        // (the clock read when a slice ends)
                        loop {
                            if stop.load(Ordering::Relaxed) {
                                return;
                            }
                            match echo_sub.take_until(WaitStyle::BusyPoll, until).unwrap() {
                                Some(r) => break r,
                                None => {
                                    let now = monotonic_ns();
                                    if now >= give_up {
                                        return;
                                    }
                                    until = now + 50_000_000;
                                }
                            }
                        }
                    } else {
                        poll(echo_sub.as_mut(), rung)
                    };
                    echo_pub.publish(r.seq, r.stamp_ns, r.len).unwrap();
                }
            });
            rtlab_sys::sched::set_current_affinity(&[0]).unwrap();
            start.wait();
            let t0 = monotonic_ns();
            let end = t0 + 60_000_000_000;
            for k in 0..n {
                if rung == CLOSED_LOOP {
                    // the closed loop's: the send stamp (and end check), a take until the
                    // loss timeout, the arrival stamp
                    let sent = monotonic_ns();
                    if sent >= end {
                        break;
                    }
                    ping_pub.publish(k, sent, len).unwrap();
                    let give_up = sent + 1_000_000_000;
                    while pong_sub.take_until(WaitStyle::BusyPoll, give_up).unwrap().is_none() {}
                    std::hint::black_box(monotonic_ns());
                } else {
                    ping_pub.publish(k, 0, len).unwrap();
                    poll(pong_sub.as_mut(), rung);
                }
            }
            let mean = (monotonic_ns() - t0) as f64 / n as f64;
            stop.store(true, Ordering::Relaxed);
            mean
        }
    })
}

type Sample = iceoryx2::sample_mut::SampleMut<Svc, [u8], ()>;

/// A loaned sample: the benchmark's (uninitialised, never written) or, with `body`, its body
/// written as rtlab's shm publisher writes it ahead.
fn loan(
    publisher: &iceoryx2::port::publisher::Publisher<Svc, [u8], ()>,
    len: usize,
    body: bool,
) -> Sample {
    let sample = publisher.loan_slice_uninit(len).unwrap();
    if body {
        static BODY: [u8; 65536] = [7; 65536];
        sample.write_from_slice(&BODY[..len])
    } else {
        // SAFETY: as iceoryx2's benchmark: the payload is sent unread
        unsafe { sample.assume_init() }
    }
}

/// The pinger's send of ping `k` (its header written first in the `iox2-header` rung), and
/// the next sample loaned (inlined: the `iox2` rung is iceoryx2's loop, no call added).
#[inline(always)]
fn ping(
    mut sample: Sample,
    publisher: &iceoryx2::port::publisher::Publisher<Svc, [u8], ()>,
    k: u64,
    len: usize,
    header: bool,
) -> Sample {
    if header {
        encode_header(sample.payload_mut(), k, 0);
    }
    sample.send().unwrap();
    loan(publisher, len, header)
}

/// The echo's answer to `got` in `sample` (loaned before the wait), the header copied over
/// in the `iox2-header` rung; `got` goes back before the send (inlined, as `ping`).
#[inline(always)]
fn answer(got: iceoryx2::sample::Sample<Svc, [u8], ()>, mut sample: Sample, header: bool) {
    if header {
        let (seq, stamp) = decode_header(got.payload()).unwrap();
        encode_header(sample.payload_mut(), seq, stamp);
    }
    drop(got);
    sample.send().unwrap();
}

/// Spin until a message is in, as rung `rung` polls.
fn poll(sub: &mut dyn Subscriber, rung: usize) -> rtlab_pubsub::transport::Received {
    loop {
        let got = match rung {
            TRANSPORT_TAKE => sub.take(WaitStyle::BusyPoll, 1_000_000_000).unwrap(),
            _ => sub.try_take().unwrap(),
        };
        if let Some(r) = got {
            return r;
        }
        if rung == TRANSPORT_CHECK_PER_POLL {
            // the engine's busy-poll before: a deadline check and a PAUSE per poll
            std::hint::black_box(monotonic_ns());
            std::hint::spin_loop();
        }
    }
}

/// A rung's work per round trip on one thread, nothing to wait for: ping, the echo's take
/// and publish, the pong's take (for counting instructions).
fn one_thread(rung: usize, n: u64, len: usize) {
    let (_rig, ends) = rig(rung, len);
    match ends {
        Ends::Iox { ping_pub, pong_sub, echo_pub, echo_sub } => {
            let header = rung == IOX_HEADER;
            let mut sample = loan(&ping_pub, len, header);
            for k in 0..n {
                sample = ping(sample, &ping_pub, k, len, header);
                let echo = loan(&echo_pub, len, header);
                answer(echo_sub.receive().unwrap().unwrap(), echo, header);
                let got = pong_sub.receive().unwrap().unwrap();
                if header {
                    std::hint::black_box(decode_header(got.payload()));
                }
            }
        }
        Ends::Rtlab { mut ping_pub, mut pong_sub, mut echo_pub, mut echo_sub } => {
            for k in 0..n {
                let sent = if rung == CLOSED_LOOP { monotonic_ns() } else { 0 };
                ping_pub.publish(k, sent, len).unwrap();
                let r = match rung {
                    TRANSPORT | TRANSPORT_CHECK_PER_POLL => echo_sub.try_take().unwrap(),
                    _ => echo_sub.take(WaitStyle::BusyPoll, 1_000_000_000).unwrap(),
                }
                .unwrap();
                echo_pub.publish(r.seq, r.stamp_ns, r.len).unwrap();
                let got = match rung {
                    TRANSPORT | TRANSPORT_CHECK_PER_POLL => pong_sub.try_take().unwrap(),
                    _ => pong_sub.take(WaitStyle::BusyPoll, 1_000_000_000).unwrap(),
                };
                assert!(got.is_some());
                if rung == CLOSED_LOOP {
                    std::hint::black_box(monotonic_ns());
                }
            }
        }
    }
}
