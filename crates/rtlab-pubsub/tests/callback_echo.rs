//! The callback echo (`--echo callback`) of zenoh, cyclonedds and fastdds, a pong answering
//! from the library's own delivery: every ping comes back once, unchanged (sequence, stamp,
//! length); a ping it cannot read (a malformed DDS sample) is skipped and the echo goes on;
//! once the echo is dropped nothing answers any more. The transports without a callback
//! say so. Counts and order only, never a time bound.

// the suite's helpers only (its rules are tests/conformance.rs's)
#[path = "support/conformance.rs"]
#[allow(dead_code, unused_macros)]
mod conformance;
use conformance::fresh_topic;
use rtlab_pubsub::engine::TransportKind;
use rtlab_pubsub::transport::cyclonedds::CycloneDdsTransport;
use rtlab_pubsub::transport::fastdds::FastDdsTransport;
use rtlab_pubsub::transport::zenoh::ZenohTransport;
use rtlab_pubsub::transport::*;
use rtlab_sys::clock::monotonic_ns;

/// One test at a time: Cyclone opens a domain once per process with one configuration.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

const LEN: usize = 64;

fn reliable() -> Qos {
    Qos {
        reliability: Reliability::Reliable,
        history: History::KeepLast(256),
        durability: Durability::Volatile,
    }
}

/// The next measured message on `pong` within `limit_ns` (warm-ups skipped).
fn next_measured(pong: &mut dyn Subscriber, limit_ns: i64) -> Option<Received> {
    let end = monotonic_ns() + limit_ns;
    while monotonic_ns() < end {
        if let Some(r) = pong.take(WaitStyle::Blocking, 20_000_000).expect("take") {
            if r.seq & WARMUP_BIT == 0 {
                return Some(r);
            }
        }
    }
    None
}

/// Pings from `near` on `T_ping`, a callback echo on `far` answering on `T_pong`: warm-ups
/// until one comes back, then `n` pings one at a time, each answered unchanged; `between`
/// runs before the last ping (a malformed ping there must not stop the echo); after the echo
/// is dropped a ping goes unanswered.
fn round_trips(near: &dyn Transport, far: &dyn Transport, n: u64, between: &mut dyn FnMut(&str)) {
    let topic = fresh_topic("echo");
    let (ping_t, pong_t) = (format!("{topic}_ping"), format!("{topic}_pong"));
    let q = reliable();
    let echo = far.callback_echo(&ping_t, &pong_t, &q, LEN).expect("echo").expect("a callback");
    let mut pong = near.subscriber(&pong_t, &q, LEN).expect("subscriber");
    let mut ping = near.publisher(&ping_t, &q, LEN).expect("publisher");
    let end = monotonic_ns() + 60_000_000_000;
    let mut k = 0u64;
    'warm: loop {
        assert!(monotonic_ns() < end, "no warm-up ping came back in 60 s");
        ping.publish(WARMUP_BIT | k, monotonic_ns(), LEN).expect("warm-up");
        k += 1;
        while let Some(r) = pong.take(WaitStyle::Blocking, 50_000_000).expect("take") {
            if r.seq & WARMUP_BIT != 0 {
                break 'warm;
            }
        }
    }
    for s in 0..n {
        if s + 1 == n {
            between(&ping_t);
        }
        let stamp = monotonic_ns();
        ping.publish(s, stamp, LEN).expect("ping");
        let r = next_measured(pong.as_mut(), 10_000_000_000)
            .unwrap_or_else(|| panic!("ping {s} not answered in 10 s"));
        assert_eq!((r.seq, r.stamp_ns, r.len), (s, stamp, LEN), "answered unchanged");
    }
    assert_eq!(echo.failed(), None);
    assert_eq!(echo.skipped(), 1, "the one message not ours was skipped");
    drop(echo);
    ping.publish(n, monotonic_ns(), LEN).expect("ping");
    assert_eq!(next_measured(pong.as_mut(), 500_000_000), None, "answered after the echo went");
}

#[test]
fn zenoh_answers_from_its_subscriber_callback() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let ep = vec![format!("tcp/127.0.0.1:{port}")];
    let a = ZenohTransport::new(&ep, &[]).unwrap();
    let b = ZenohTransport::new(&[], &ep).unwrap();
    // a message longer than the case's is not ours to echo
    let mut long = None;
    round_trips(&a, &b, 200, &mut |ping_t| {
        let mut p = a.publisher(ping_t, &reliable(), 2 * LEN).unwrap();
        p.publish(1 << 40, monotonic_ns(), 2 * LEN).unwrap();
        long = Some(p);
    });
}

#[test]
fn cyclonedds_answers_from_its_data_available_listener() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let domain = rtlab_pubsub::default_dds_domain();
    let a = CycloneDdsTransport::new(domain).unwrap();
    let b = CycloneDdsTransport::new(domain).unwrap();
    let mut w = None;
    round_trips(&a, &b, 200, &mut |ping_t| {
        let topic = format!("rt/{ping_t}");
        let q = reliable();
        let mut raw =
            a.raw_writer(&topic, rtlab_pubsub::transport::cyclonedds::TYPE_NAME, true, &q).unwrap();
        wait_matched(&|| raw.matched());
        raw.write(&malformed()).unwrap();
        w = Some(raw);
    });
}

#[test]
fn fastdds_answers_from_its_data_reader_listener() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let domain = rtlab_pubsub::default_dds_domain();
    let a = FastDdsTransport::new(domain).unwrap();
    let b = FastDdsTransport::new(domain).unwrap();
    let mut w = None;
    round_trips(&a, &b, 200, &mut |ping_t| {
        let mut raw = a.raw_writer(ping_t, &reliable()).unwrap();
        wait_matched(&|| raw.matched().max(0) as usize);
        raw.write(&malformed()).unwrap();
        w = Some(raw);
    });
}

/// A plain CDR sample of the probe message whose data holds no sequence number.
fn malformed() -> Vec<u8> {
    let mut good = vec![0u8; rtlab_pubsub::ros_msg::serialized_size(LEN)];
    rtlab_pubsub::ros_msg::init(&mut good);
    let n = rtlab_pubsub::ros_msg::encode(&mut good, 7, 1, LEN);
    let mut short = good[..n].to_vec();
    short[36..40].copy_from_slice(&4u32.to_le_bytes());
    short
}

/// Wait (20 s at most) until `matched` says a reader is there.
fn wait_matched(matched: &dyn Fn() -> usize) {
    let end = monotonic_ns() + 20_000_000_000;
    while matched() < 1 {
        assert!(monotonic_ns() < end, "raw writer: no match in 20 s");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn transports_without_a_callback_say_so() {
    for k in TransportKind::ALL {
        let has = k.callback_echo().is_some();
        let expected =
            matches!(k, TransportKind::Zenoh | TransportKind::CycloneDds | TransportKind::FastDds);
        assert_eq!(has, expected, "{}", k.name());
    }
    let t = rtlab_pubsub::transport::intra::IntraTransport::new();
    assert!(t.callback_echo("a", "b", &Qos::default(), LEN).unwrap().is_none());
}
