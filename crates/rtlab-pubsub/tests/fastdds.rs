//! The fastdds transport against Cyclone DDS (the `dds` transport) on one loopback domain,
//! both ways; messages at the largest size; the names given to Fast DDS's threads.
//! Counts and order only, never a time bound.

// the suite's helpers only (its rules are tests/conformance.rs's)
#[path = "support/conformance.rs"]
#[allow(dead_code, unused_macros)]
mod conformance;
use conformance::{fresh_topic, warm_up};
use rtlab_pubsub::transport::cyclonedds::CycloneDdsTransport;
use rtlab_pubsub::transport::fastdds::{FastDdsTransport, Shm, MAX_MESSAGE};
use rtlab_pubsub::transport::*;
use std::sync::Arc;

/// Cyclone opens a domain once per process with one configuration: every test here uses
/// the same domain and the loopback configuration, one test at a time.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn reliable() -> Qos {
    Qos {
        reliability: Reliability::Reliable,
        history: History::KeepLast(256),
        durability: Durability::Volatile,
    }
}

/// Publish `n` measured messages of `len` bytes from `pt` to one subscriber of `st`, paced,
/// and return the sequence numbers received (and their lengths).
fn send(pt: &dyn Transport, st: &dyn Transport, len: usize, n: u64) -> Vec<(u64, usize)> {
    let topic = fresh_topic("interop");
    let q = reliable();
    let mut subs = vec![st.subscriber(&topic, &q, len).expect("subscriber")];
    let mut p = pt.publisher(&topic, &q, len).expect("publisher");
    warm_up(p.as_mut(), &mut subs, len);
    let mut s = subs.pop().unwrap();
    let rx = std::thread::spawn(move || {
        let mut got = Vec::new();
        let end = rtlab_sys::clock::monotonic_ns() + 20_000_000_000;
        while got.len() < n as usize && rtlab_sys::clock::monotonic_ns() < end {
            if let Some(r) = s.take(WaitStyle::Blocking, 20_000_000).expect("take") {
                if r.seq & WARMUP_BIT == 0 {
                    got.push((r.seq, r.len));
                }
            }
        }
        // nothing more than was sent
        std::thread::sleep(std::time::Duration::from_millis(100));
        while let Some(r) = s.try_take().expect("take") {
            got.push((r.seq, r.len));
        }
        got
    });
    for q in 0..n {
        p.publish(q, rtlab_sys::clock::monotonic_ns(), len).expect("publish");
        std::thread::sleep(std::time::Duration::from_micros(if len > 65536 {
            20_000
        } else {
            500
        }));
    }
    let got = rx.join().expect("receiver");
    drop(p);
    got
}

fn pair() -> (Arc<dyn Transport>, Arc<dyn Transport>) {
    let domain = rtlab_pubsub::default_dds_domain();
    let f: Arc<dyn Transport> = Arc::new(FastDdsTransport::new(domain).expect("fastdds"));
    let c: Arc<dyn Transport> = Arc::new(CycloneDdsTransport::new(domain).expect("dds"));
    (f, c)
}

#[test]
fn fastdds_publisher_reaches_a_cyclone_subscriber_and_back() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let (f, c) = pair();
    let want: Vec<(u64, usize)> = (0..100).map(|q| (q, 64)).collect();
    assert_eq!(send(f.as_ref(), c.as_ref(), 64, 100), want, "Fast DDS -> Cyclone");
    assert_eq!(send(c.as_ref(), f.as_ref(), 64, 100), want, "Cyclone -> Fast DDS");
}

#[test]
fn largest_message_crosses_between_fastdds_and_cyclone_both_ways() {
    // over UDP (two libraries: no shared memory, no intraprocess shortcut): Fast DDS
    // fragments MAX_MESSAGE bytes for Cyclone, and reassembles Cyclone's fragments — at
    // MAX_MESSAGE when the system lets its receive buffer reach it (net.core.rmem_max);
    // with less, a note says so and 256 KiB (seen to cross with the 208 KiB default) is sent
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let (f, c) = pair();
    let want: Vec<(u64, usize)> = (0..5).map(|q| (q, MAX_MESSAGE)).collect();
    assert_eq!(send(f.as_ref(), c.as_ref(), MAX_MESSAGE, 5), want, "Fast DDS -> Cyclone");
    let rmem_max: usize =
        std::fs::read_to_string("/proc/sys/net/core/rmem_max").unwrap().trim().parse().unwrap();
    let warned = f.notes().iter().any(|n| n.contains("raise net.core.rmem_max"));
    let back = if rmem_max >= MAX_MESSAGE {
        assert!(!warned, "{:?}", f.notes());
        MAX_MESSAGE
    } else {
        assert!(warned, "rmem_max {rmem_max}: {:?}", f.notes());
        256 << 10
    };
    let want: Vec<(u64, usize)> = (0..5).map(|q| (q, back)).collect();
    assert_eq!(send(c.as_ref(), f.as_ref(), back, 5), want, "Cyclone -> Fast DDS");
    let e = f.publisher(&fresh_topic("big"), &reliable(), MAX_MESSAGE + 1).err().unwrap();
    assert!(matches!(e, TransportError::MessageTooLarge { .. }), "{e}");
}

#[test]
fn largest_message_between_two_fastdds_participants() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let domain = rtlab_pubsub::default_dds_domain();
    let a = FastDdsTransport::new(domain).unwrap();
    let b = FastDdsTransport::new(domain).unwrap();
    let want: Vec<(u64, usize)> = (0..5).map(|q| (q, MAX_MESSAGE)).collect();
    assert_eq!(send(&a, &b, MAX_MESSAGE, 5), want);
}

/// The Fast DDS shared-memory segments this process has mapped (`/dev/shm/fastrtps_<hex>`;
/// not its port queues `fastrtps_port*` nor the `_el` lock files), with their sizes. Read
/// from /proc/self/maps, so Fast DDS processes running beside (another test binary, a
/// benchmark) do not count.
fn shm_segments() -> Vec<(String, u64)> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut v: Vec<(String, u64)> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter_map(|path| {
            let n = path.strip_prefix("/dev/shm/")?;
            let seg = n.starts_with("fastrtps_")
                && !n.starts_with("fastrtps_port")
                && !n.ends_with("_el");
            seg.then(|| (n.to_string(), std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)))
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn the_shared_memory_segment_asked_is_the_one_fast_dds_makes_and_off_makes_none() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let domain = rtlab_pubsub::default_dds_domain();
    let net = rtlab_pubsub::transport::cyclonedds::DdsNetwork::default();
    let len = 64 << 10;
    let want: Vec<(u64, usize)> = (0..5).map(|q| (q, len)).collect();
    let before: Vec<String> = shm_segments().into_iter().map(|s| s.0).collect();
    let segment = 3u32 << 20;
    let a = FastDdsTransport::with_shm(domain, &net, Shm::Segment(segment)).unwrap();
    let b = FastDdsTransport::with_shm(domain, &net, Shm::Segment(segment)).unwrap();
    assert_eq!(send(&a, &b, len, 5), want);
    let new: Vec<(String, u64)> =
        shm_segments().into_iter().filter(|s| !before.contains(&s.0)).collect();
    assert!(!new.is_empty(), "no segment made");
    assert!(new.iter().all(|s| s.1 >= segment as u64), "segments smaller than asked: {new:?}");
    assert!(a.notes()[0].contains(&format!("segment {segment} bytes, --fastdds-shm")));
    drop((a, b));
    let before: Vec<String> = shm_segments().into_iter().map(|s| s.0).collect();
    let a = FastDdsTransport::with_shm(domain, &net, Shm::Off).unwrap();
    let b = FastDdsTransport::with_shm(domain, &net, Shm::Off).unwrap();
    assert_eq!(send(&a, &b, len, 5), want, "by UDP");
    let new: Vec<(String, u64)> =
        shm_segments().into_iter().filter(|s| !before.contains(&s.0)).collect();
    assert!(new.is_empty(), "shared memory off, yet {new:?}");
    assert!(a.notes().iter().any(|n| n.contains("shared memory off")), "{:?}", a.notes());
}

/// This process's threads: (tid, comm).
fn threads() -> Vec<(String, String)> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let c = std::fs::read_to_string(e.path().join("comm")).ok()?;
            Some((e.file_name().to_string_lossy().into_owned(), c.trim().to_string()))
        })
        .collect()
}

#[test]
fn fastdds_threads_are_named_for_thread_priority_rules() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let own = std::fs::read_to_string("/proc/thread-self/comm").unwrap();
    let t = FastDdsTransport::new(rtlab_pubsub::default_dds_domain()).unwrap();
    let named = t.threads();
    // Fast DDS 2.9 starts at least its event thread and a receive thread per input port
    assert!(named.len() >= 2, "named: {named:?}");
    let now = threads();
    for n in &named {
        assert!(n.starts_with("fdds.") && n.len() <= 15, "{n}");
        assert!(now.iter().any(|(_, c)| c == n), "{n} not among {now:?}");
    }
    // no thread is left with the marker, and the creating thread has its name back
    assert!(!now.iter().any(|(_, c)| c.starts_with("fdds.new")), "{now:?}");
    assert_eq!(std::fs::read_to_string("/proc/thread-self/comm").unwrap(), own);
    let q = Qos::default();
    let s = t.subscriber(&fresh_topic("names"), &q, 64).unwrap();
    assert!(t.notes()[0].contains("fdds.N"));
    drop((s, t));
}

#[test]
fn an_interface_with_unicast_peers_meets_cyclone_configured_the_same() {
    // `--interface lo --peers 127.0.0.1` on both: UDPv4 whitelisted to lo's address, no
    // multicast, discovery by unicast (another domain: Cyclone's loopback configuration
    // holds the default one in this process)
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let domain = 200 + std::process::id() % 30;
    let net = rtlab_pubsub::transport::cyclonedds::DdsNetwork {
        interface: Some("lo".into()),
        peers: vec!["127.0.0.1".into()],
    };
    let f = FastDdsTransport::with_network(domain, &net).expect("fastdds");
    let c = CycloneDdsTransport::with_network(domain, &net).expect("dds");
    assert!(
        f.notes()[0].contains("no multicast, unicast discovery peers 127.0.0.1"),
        "{:?}",
        f.notes()
    );
    let want: Vec<(u64, usize)> = (0..50).map(|q| (q, 64)).collect();
    assert_eq!(send(&f, &c, 64, 50), want, "Fast DDS -> Cyclone");
    assert_eq!(send(&c, &f, 64, 50), want, "Cyclone -> Fast DDS");
}

#[test]
fn an_unknown_interface_is_one_line_naming_it() {
    let spec = rtlab_pubsub::TransportSpec {
        interface: Some("nosuchif0".into()),
        ..rtlab_pubsub::TransportSpec::new(rtlab_pubsub::TransportKind::FastDds)
    };
    let e = rtlab_pubsub::open(&spec).err().expect("refused").to_string();
    assert!(e.starts_with("fastdds: interface: ") && e.contains("nosuchif0"), "{e}");
    assert!(!e.contains('\n'), "{e}");
}

#[test]
fn a_malformed_sample_is_an_error_of_that_take_only() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let domain = rtlab_pubsub::default_dds_domain();
    let a = FastDdsTransport::new(domain).unwrap();
    let b = FastDdsTransport::new(domain).unwrap();
    let topic = fresh_topic("malformed");
    let q = reliable();
    let mut s = b.subscriber(&topic, &q, 64).unwrap();
    let mut w = a.raw_writer(&topic, &q).unwrap();
    let end = rtlab_sys::clock::monotonic_ns() + 20_000_000_000;
    while w.matched() < 1 {
        assert!(rtlab_sys::clock::monotonic_ns() < end, "no match in 20 s");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // plain CDR, but its data holds no sequence number; then XCDR "PL_CDR"; then a good one
    let mut good = vec![0u8; rtlab_pubsub::ros_msg::serialized_size(64)];
    rtlab_pubsub::ros_msg::init(&mut good);
    let n = rtlab_pubsub::ros_msg::encode(&mut good, 7, 1, 64);
    let mut short = good[..n].to_vec();
    short[36..40].copy_from_slice(&4u32.to_le_bytes());
    let mut pl = good[..n].to_vec();
    pl[1] = 0x03;
    for sample in [&short[..], &pl[..], &good[..n]] {
        w.write(sample).unwrap();
    }
    let mut outcomes = Vec::new();
    while outcomes.len() < 3 && rtlab_sys::clock::monotonic_ns() < end {
        match s.wait_take(20_000_000) {
            Ok(Some(r)) => outcomes.push(format!("seq {} len {}", r.seq, r.len)),
            Ok(None) => {}
            Err(e) => {
                assert!(matches!(e, TransportError::Malformed { .. }), "{e}");
                outcomes.push(e.to_string());
            }
        }
    }
    assert_eq!(outcomes.len(), 3, "{outcomes:?}");
    assert!(outcomes[0].contains("sequence"), "{outcomes:?}");
    assert!(outcomes[1].contains("encapsulation"), "{outcomes:?}");
    assert_eq!(outcomes[2], "seq 7 len 64");
}
