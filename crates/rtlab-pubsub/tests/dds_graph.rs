//! The graph of a DDS domain: a participant with a writer and a reader is found from the
//! built-in topics, with its topic names, type name and the QoS each endpoint asked for.

use rtlab_pubsub::observe::dds_graph::discover;
use rtlab_pubsub::transport::cyclonedds::{CycloneDdsTransport, DdsNetwork};
use rtlab_pubsub::{Durability, History, Qos, Reliability, Transport};
use std::time::Duration;

#[test]
fn a_writer_and_a_reader_are_found_with_their_qos() {
    // outside 100-199, where probes pick their domains from their pid
    let domain = 201 + std::process::id() % 14;
    let t = CycloneDdsTransport::new(domain).unwrap();
    let be = Qos {
        reliability: Reliability::BestEffort,
        history: History::KeepLast(5),
        durability: Durability::Volatile,
    };
    let rel = Qos { reliability: Reliability::Reliable, history: History::KeepAll, ..be };
    let _w = t.publisher("graph_chatter", &be, 64).unwrap();
    let _r = t.subscriber("graph_status", &rel, 64).unwrap();
    // discovery within one process is immediate; a second of margin for a busy machine
    let mut g = discover(domain, &DdsNetwork::default(), Duration::from_millis(300)).unwrap();
    for _ in 0..10 {
        if !g.writers.is_empty() && !g.readers.is_empty() {
            break;
        }
        g = discover(domain, &DdsNetwork::default(), Duration::from_millis(300)).unwrap();
    }
    assert_eq!(g.domain, domain);
    let w: Vec<_> = g.writers.iter().filter(|e| e.topic == "rt/graph_chatter").collect();
    assert_eq!(w.len(), 1, "{g:?}");
    assert_eq!(w[0].type_name, rtlab_pubsub::transport::cyclonedds::TYPE_NAME);
    assert_eq!(
        (w[0].qos.reliability.as_str(), w[0].qos.history.as_str(), w[0].qos.durability.as_str()),
        ("best-effort", "keep-last:5", "volatile")
    );
    let r: Vec<_> = g.readers.iter().filter(|e| e.topic == "rt/graph_status").collect();
    assert_eq!(r.len(), 1, "{g:?}");
    assert_eq!(
        (r[0].qos.reliability.as_str(), r[0].qos.history.as_str()),
        ("reliable", "keep-all")
    );
    assert!(g.participants.contains(&w[0].participant), "{g:?}");
    let topics = g.topics();
    let chatter = topics.iter().find(|t| t.topic == "rt/graph_chatter").unwrap();
    assert_eq!(chatter.ros_name.as_deref(), Some("/graph_chatter"));
    assert_eq!(chatter.ros_type.as_deref(), Some("sensor_msgs/msg/CompressedImage"));
    assert_eq!((chatter.writers, chatter.readers), (1, 0));
}

#[test]
fn an_empty_domain_has_no_one() {
    let domain = 215 + std::process::id() % 15;
    let g = discover(domain, &DdsNetwork::default(), Duration::from_millis(200)).unwrap();
    assert!(g.participants.is_empty() && g.writers.is_empty() && g.readers.is_empty(), "{g:?}");
}
