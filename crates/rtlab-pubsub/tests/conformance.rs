//! The conformance suite (support/conformance.rs) run against every transport: one module per
//! transport, one test per rule (`intra::fan_out`, `fastdds::clean_shutdown`, ...), so a
//! failure names the rule and the transport. Each transport is a harness `with_<transport>`
//! that makes its pair of transports, keeps what it needs around one rule (a lock, a private
//! network namespace, a temporary directory) and runs the rule.
//!
//! ros2, and fastdds on ROS 2's Fast DDS, are in tests/ros2.rs: a process holds one Fast DDS,
//! and this one holds Debian's 2.9 (rtlab's `fastdds`).

#[path = "support/conformance.rs"]
mod conformance;
use conformance::{files_under, instantiate_conformance_tests, Rule, Subject};
use rtlab_pubsub::transport::Transport;
use std::collections::BTreeSet;
use std::sync::Arc;

instantiate_conformance_tests!(intra, with_intra);

fn with_intra(rule: Rule) {
    let make = || {
        let t: Arc<dyn Transport> = Arc::new(rtlab_pubsub::transport::intra::IntraTransport::new());
        (t.clone(), t)
    };
    let leftovers = BTreeSet::new;
    rule(&Subject { make: &make, leftovers: &leftovers });
}

instantiate_conformance_tests!(udp, with_udp);

/// Port files in a directory of the test's own, empty again after the rule.
fn with_udp(rule: Rule) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    let make = || {
        let t: Arc<dyn Transport> =
            Arc::new(rtlab_pubsub::transport::udp::UdpTransport::new(d.clone()));
        (t.clone(), t)
    };
    let leftovers = || files_under(std::slice::from_ref(&d), &[]);
    rule(&Subject { make: &make, leftovers: &leftovers });
    assert!(leftovers().is_empty());
}

/// Files iceoryx2 may create (its default config: /dev/shm/iox2_*, /tmp/iceoryx2/...),
/// except its one machine-wide management segment (`..._node.<version>.global_mgmt`),
/// which iceoryx2 0.10 keeps on purpose for every later node; it is not per service.
/// The shm tests list the same directories: one at a time.
static SHM: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn iceoryx2_files() -> BTreeSet<std::path::PathBuf> {
    let mut f = files_under(&["/dev/shm".into(), "/tmp/iceoryx2".into()], &["iox2"]);
    f.retain(|p| !p.to_string_lossy().ends_with(".global_mgmt"));
    f
}

#[test]
fn shm_files_are_seen_by_the_leftover_check() {
    let _one = SHM.lock().unwrap_or_else(|e| e.into_inner());
    // the clean-shutdown check is only worth something if it sees what iceoryx2 makes
    let t = rtlab_pubsub::transport::shm::ShmTransport::new().unwrap();
    let before = iceoryx2_files();
    let q = rtlab_pubsub::Qos::default();
    let p = t.publisher(&conformance::fresh_topic("seen"), &q, 64).unwrap();
    let during = iceoryx2_files();
    assert!(during.difference(&before).count() > 0, "no iceoryx2 file appeared for a new service");
    drop(p);
}

instantiate_conformance_tests!(shm, with_shm);

fn with_shm(rule: Rule) {
    shm_subject(rule, || rtlab_pubsub::transport::shm::ShmTransport::new().unwrap());
}

/// Run `rule` on two shm transports opened by `open`, one shm suite at a time.
fn shm_subject(rule: Rule, open: fn() -> rtlab_pubsub::transport::shm::ShmTransport) {
    let _one = SHM.lock().unwrap_or_else(|e| e.into_inner());
    let make = || {
        let (a, b): (Arc<dyn Transport>, Arc<dyn Transport>) = (Arc::new(open()), Arc::new(open()));
        (a, b)
    };
    rule(&Subject { make: &make, leftovers: &iceoryx2_files });
}

instantiate_conformance_tests!(shm_sized_for_the_run, with_shm_sized_for_the_run);

/// Services made for three subscribers and one publisher per topic, as a run opens them
/// (the suite's fan-out is three).
fn with_shm_sized_for_the_run(rule: Rule) {
    shm_subject(rule, || rtlab_pubsub::transport::shm::ShmTransport::new().unwrap().sized_for(3));
}

#[test]
fn shm_sized_services_refuse_a_port_beyond_their_size_in_one_line() {
    let _one = SHM.lock().unwrap_or_else(|e| e.into_inner());
    let t = rtlab_pubsub::transport::shm::ShmTransport::new().unwrap().sized_for(2);
    let q = rtlab_pubsub::Qos::default();
    let topic = conformance::fresh_topic("sized");
    let _p = t.publisher(&topic, &q, 64).unwrap();
    let _s: Vec<_> = (0..2).map(|_| t.subscriber(&topic, &q, 64).unwrap()).collect();
    for e in [t.subscriber(&topic, &q, 64).err(), t.publisher(&topic, &q, 64).err()] {
        let e = e.expect("a third subscriber and a second publisher are refused").to_string();
        assert!(e.starts_with("shm: "), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
    assert!(
        t.notes()[0].contains("made for 1 publisher(s) and 2 subscriber(s)"),
        "{:?}",
        t.notes()
    );
}

instantiate_conformance_tests!(shm_opened_for_busy_poll, with_shm_opened_for_busy_poll);

/// No event service: a blocking take spins, publishers notify nobody.
fn with_shm_opened_for_busy_poll(rule: Rule) {
    shm_subject(rule, || rtlab_pubsub::transport::shm::ShmTransport::new().unwrap().busy_poll());
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

instantiate_conformance_tests!(zenoh, with_zenoh);

/// Two peer sessions joined by one explicit loopback TCP link.
fn with_zenoh(rule: Rule) {
    let make = || {
        let ep = vec![format!("tcp/127.0.0.1:{}", free_port())];
        let a: Arc<dyn Transport> =
            Arc::new(rtlab_pubsub::transport::zenoh::ZenohTransport::new(&ep, &[]).unwrap());
        let b: Arc<dyn Transport> =
            Arc::new(rtlab_pubsub::transport::zenoh::ZenohTransport::new(&[], &ep).unwrap());
        (a, b)
    };
    let leftovers = BTreeSet::new;
    rule(&Subject { make: &make, leftovers: &leftovers });
}

instantiate_conformance_tests!(dds, with_dds);

/// Cyclone DDS: two participants of one loopback-only domain.
fn with_dds(rule: Rule) {
    let domain = rtlab_pubsub::default_dds_domain();
    let make = || {
        let a: Arc<dyn Transport> = Arc::new(
            rtlab_pubsub::transport::cyclonedds::CycloneDdsTransport::new(domain).unwrap(),
        );
        let b: Arc<dyn Transport> = Arc::new(
            rtlab_pubsub::transport::cyclonedds::CycloneDdsTransport::new(domain).unwrap(),
        );
        (a, b)
    };
    let leftovers = BTreeSet::new;
    rule(&Subject { make: &make, leftovers: &leftovers });
}

/// Run `f` on a thread of its own inside a fresh private network namespace
/// (`rustdds::enter_private_netns`: lo + a veth pair, rdds0 and rdds1): every
/// packet RustDDS sends stays in it, and it disappears with the thread.
fn in_private_netns(f: impl FnOnce() + Send + 'static) {
    std::thread::spawn(move || {
        let _ns =
            rtlab_pubsub::transport::rustdds::enter_private_netns().expect("private namespace");
        f();
    })
    .join()
    .expect("the test thread in the private namespace");
}

instantiate_conformance_tests!(rustdds, with_rustdds);

/// Root only: each rule on a thread of its own in a private network namespace of its own.
fn with_rustdds(rule: Rule) {
    if let Some(why) = rtlab_sys::net::netns_unavailable() {
        rtlab_sys::test_skip::skipped(format_args!("{why}"));
        return;
    }
    in_private_netns(move || {
        let make = || {
            let open = || {
                rtlab_pubsub::transport::rustdds::RustDdsTransport::new(
                    7,
                    Some(rtlab_pubsub::transport::rustdds::PRIVATE_IF),
                    &[],
                )
                .unwrap()
            };
            let (a, b): (Arc<dyn Transport>, Arc<dyn Transport>) =
                (Arc::new(open()), Arc::new(open()));
            (a, b)
        };
        let leftovers = BTreeSet::new;
        rule(&Subject { make: &make, leftovers: &leftovers });
    });
}

/// Files Fast DDS's shared-memory transport makes (/dev/shm/fastrtps_*: segments, port
/// queues and their locks). The fastdds tests list them: one at a time.
static FASTDDS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn fastdds_files() -> BTreeSet<std::path::PathBuf> {
    files_under(&["/dev/shm".into()], &["fastrtps"])
}

instantiate_conformance_tests!(fastdds, with_fastdds);

/// Two participants of one loopback-only domain (Debian's Fast DDS 2.9).
fn with_fastdds(rule: Rule) {
    let _one = FASTDDS.lock().unwrap_or_else(|e| e.into_inner());
    let domain = rtlab_pubsub::default_dds_domain();
    let make = || {
        let open = || rtlab_pubsub::transport::fastdds::FastDdsTransport::new(domain).unwrap();
        let (a, b): (Arc<dyn Transport>, Arc<dyn Transport>) = (Arc::new(open()), Arc::new(open()));
        (a, b)
    };
    rule(&Subject { make: &make, leftovers: &fastdds_files });
}

#[test]
fn fastdds_shared_memory_files_are_seen_by_the_leftover_check() {
    let _one = FASTDDS.lock().unwrap_or_else(|e| e.into_inner());
    // the clean-shutdown check is only worth something if it sees what Fast DDS makes
    let domain = rtlab_pubsub::default_dds_domain();
    let before = fastdds_files();
    let t = rtlab_pubsub::transport::fastdds::FastDdsTransport::new(domain).unwrap();
    let q = rtlab_pubsub::Qos::default();
    let s = t.subscriber(&conformance::fresh_topic("seen"), &q, 64).unwrap();
    let during = fastdds_files();
    assert!(
        during.difference(&before).count() > 0,
        "no /dev/shm/fastrtps_* file for a participant"
    );
    drop((s, t));
}

instantiate_conformance_tests!(ros1, with_ros1);

/// roscpp: this process's one node on the master it starts (rtlab-bindings
/// `roscpp::shared_master`), both ends on it (roscpp's intraprocess links).
fn with_ros1(rule: Rule) {
    let make = || {
        let t: Arc<dyn Transport> = Arc::new(
            rtlab_pubsub::transport::ros1::Ros1Transport::open(None, None, false, false).unwrap(),
        );
        (t.clone(), t)
    };
    let leftovers = BTreeSet::new;
    rule(&Subject { make: &make, leftovers: &leftovers });
}

/// Found in CI: the rules run on threads of one process, and two opening this process's
/// roscpp node at once could see it half made (`ros::isInitialized()` before its master was
/// recorded) and fail with "already uses the master at " (no master). Opening it is one step
/// at a time: this opens it from 16 threads at once, in a process of its own (the node can be
/// made once per process), three times.
#[test]
fn ros1_node_opened_from_many_threads_at_once() {
    const CHILD: &str = "RTLAB_TEST_ROS1_OPEN_AT_ONCE";
    if std::env::var_os(CHILD).is_none() {
        for run in 0..3 {
            let o = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "ros1_node_opened_from_many_threads_at_once", "--nocapture"])
                .env(CHILD, "1")
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "run {run}: {}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            assert!(String::from_utf8_lossy(&o.stdout).contains("16 threads opened the node"));
        }
        return;
    }
    let at_once = Arc::new(std::sync::Barrier::new(16));
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let b = at_once.clone();
            std::thread::spawn(move || {
                b.wait();
                rtlab_pubsub::transport::ros1::Ros1Transport::open(None, None, false, false)
                    .map(|t| t.master().to_string())
                    .map_err(|e| e.to_string())
            })
        })
        .collect();
    let masters: Vec<Result<String, String>> =
        threads.into_iter().map(|t| t.join().unwrap()).collect();
    let first = masters[0].clone().unwrap();
    for m in &masters {
        assert_eq!(m.as_ref(), Ok(&first), "{masters:?}");
    }
    println!("16 threads opened the node on {first}");
}
