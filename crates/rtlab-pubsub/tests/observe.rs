//! Observing a live topic of a type rtlab has no support for: a std_msgs/Header publisher
//! (serialized by hand, a raw writer) measured by its arrivals and, with the clocks stated to
//! agree, by the latency of its Header stamps. Counts only, never a latency bound.

use rtlab_pubsub::observe::{observe, ObserveConfig};
use rtlab_pubsub::transport::cyclonedds::{CycloneDdsTransport, DdsNetwork};
use rtlab_pubsub::{Durability, History, Qos, Reliability};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A std_msgs/Header sample: CDR little endian, sec, nanosec, frame_id.
fn header(now_ns: i64, frame: &str) -> Vec<u8> {
    let mut v = vec![0x00, 0x01, 0x00, 0x00];
    v.extend_from_slice(&(now_ns.div_euclid(1_000_000_000) as i32).to_le_bytes());
    v.extend_from_slice(&(now_ns.rem_euclid(1_000_000_000) as u32).to_le_bytes());
    v.extend_from_slice(&(frame.len() as u32 + 1).to_le_bytes());
    v.extend_from_slice(frame.as_bytes());
    v.push(0);
    v
}

#[test]
fn a_header_topic_is_measured_with_its_stamps() {
    let domain = 201 + (std::process::id() + 5) % 14;
    let t = CycloneDdsTransport::new(domain).unwrap();
    let qos = Qos {
        reliability: Reliability::Reliable,
        history: History::KeepLast(10),
        durability: Durability::Volatile,
    };
    let mut w = t.raw_writer("rt/stamped", "std_msgs::msg::dds_::Header_", true, &qos).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let publisher = std::thread::spawn(move || {
        let mut n = 0u64;
        while !s2.load(Ordering::Relaxed) {
            w.write(&header(rtlab_sys::clock::realtime_ns(), "base")).unwrap();
            n += 1;
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        n
    });
    let cfg = ObserveConfig {
        domain,
        net: DdsNetwork::default(),
        topic: "rt/stamped".into(),
        nominal_ns: Some(5_000_000),
        duration_ns: 1_500_000_000,
        window_ns: 1_000_000_000,
        reliability: None,
        header_latency: true,
        discover_ns: 500_000_000,
        rt: rtlab_core::rt::RtSettings::normal(),
    };
    let o = observe(&cfg, Arc::new(AtomicBool::new(false))).unwrap();
    stop.store(true, Ordering::Relaxed);
    let sent = publisher.join().unwrap();
    assert_eq!(o.type_name, "std_msgs::msg::dds_::Header_");
    assert_eq!(o.reader_reliability, "reliable", "every writer is reliable");
    assert!(o.received > 0 && o.received <= sent, "{} of {sent}", o.received);
    assert_eq!((o.size_min, o.size_max), (Some(21), Some(21)));
    let names: Vec<&str> = o.streams.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["/stamped.period", "/stamped.deviation", "/stamped.latency"]);
    assert_eq!(o.streams[0].stats.count, o.received - 1);
    assert_eq!(o.streams[2].stats.count, o.received, "one latency per message");
    assert_eq!(o.streams[2].metric, "header_latency");
    assert!(!o.nominal_estimated);
    assert!(o.notes.iter().any(|n| n.contains("keyless")), "{:?}", o.notes);
}
