//! rustdds beyond the conformance suite (root only: each test makes its own private network
//! namespace, on a thread of its own, so that every packet stays inside; without root they
//! say why and pass):
//! - RustDDS and Cyclone DDS (`dds`) meet in one domain, both ways (exact count, in order);
//! - the interface rule: refused when another interface is up, or only lo;
//! - the probe on one host runs rustdds in a private namespace, its role processes too,
//!   also as one side of a cross-implementation case with Cyclone (`--far-transport`).

#[path = "support/pubsub_config.rs"]
mod pubsub_config;

#[path = "support/ip.rs"]
mod ip_cmd;

use ip_cmd::ip;
// the suite's helpers only (its rules are tests/conformance.rs's)
#[path = "support/conformance.rs"]
#[allow(dead_code, unused_macros)]
mod conformance;
use conformance::{fresh_topic, warm_up};
use rtlab_pubsub::engine::{self, Mode, PubsubConfig, TransportKind, TransportSpec};
use rtlab_pubsub::transport::cyclonedds::{CycloneDdsTransport, DdsNetwork};
use rtlab_pubsub::transport::rustdds::{enter_private_netns, RustDdsTransport, PRIVATE_IF};
use rtlab_pubsub::transport::*;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

const ROLE_ENV: &str = "RTLAB_RUSTDDS_TEST_ROLE";

/// The body of a role process when this binary is re-executed with ROLE_ENV set.
#[test]
fn role_process_entry() {
    if let Ok(json) = std::env::var(ROLE_ENV) {
        std::process::exit(engine::role_main(&json));
    }
}

fn launcher(json: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "role_process_entry", "--nocapture", "--test-threads=1"])
        .env(ROLE_ENV, json);
    c
}

/// One private namespace at a time in this process, as the probe makes them (one case at a
/// time). Side by side, stressed, RustDDS -> Cyclone in one namespace got nothing in 60 s in
/// 4 of 10 runs while the rustdds probe ran in another (stop 52's CI once, unstressed); one
/// at a time, 0 of 12 stressed. The cause, shared state across namespaces in one process, is
/// not found.
static ONE_NAMESPACE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Run `f` on a thread of its own; the thread's namespace is what `f` makes of it.
fn on_own_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let _one = ONE_NAMESPACE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    std::thread::spawn(f).join().expect("the test thread")
}

const N: u64 = 100;

/// `p` publishes N measured messages after a warm-up; `s` must get them all, in order.
fn one_way(pt: &dyn Transport, st: &dyn Transport) -> Vec<u64> {
    let topic = fresh_topic("cross");
    let qos = Qos {
        reliability: Reliability::Reliable,
        history: History::KeepLast(256),
        durability: Durability::Volatile,
    };
    let mut subs = vec![st.subscriber(&topic, &qos, 64).expect("subscriber")];
    let mut p = pt.publisher(&topic, &qos, 64).expect("publisher");
    warm_up(p.as_mut(), &mut subs, 64);
    for q in 0..N {
        p.publish(q, rtlab_sys::clock::monotonic_ns(), 64).expect("publish");
        std::thread::sleep(std::time::Duration::from_micros(500));
    }
    let mut got = Vec::new();
    let end = rtlab_sys::clock::monotonic_ns() + 10_000_000_000;
    while (got.len() as u64) < N && rtlab_sys::clock::monotonic_ns() < end {
        if let Some(r) = subs[0].take(WaitStyle::Blocking, 20_000_000).expect("take") {
            assert_eq!(r.len, 64);
            if r.seq & WARMUP_BIT == 0 {
                got.push(r.seq);
            }
        }
    }
    got
}

#[test]
fn root_rustdds_and_cyclone_meet_both_ways() {
    if let Some(why) = rtlab_sys::net::netns_unavailable() {
        rtlab_sys::test_skip::skipped(format_args!("{why}"));
        return;
    }
    on_own_thread(|| {
        let _ns = enter_private_netns().expect("private namespace");
        let domain = 9;
        // Cyclone on the same interface with multicast discovery (no peers): RustDDS
        // announces itself only by multicast, on 239.255.0.1, as Cyclone does by default
        let net = DdsNetwork { interface: Some(PRIVATE_IF.into()), peers: Vec::new() };
        let cyclone: Arc<dyn Transport> =
            Arc::new(CycloneDdsTransport::with_network(domain, &net).expect("cyclone"));
        let rustdds: Arc<dyn Transport> =
            Arc::new(RustDdsTransport::new(domain, Some(PRIVATE_IF), &[]).expect("rustdds"));
        let want: Vec<u64> = (0..N).collect();
        eprintln!("cyclone: {:?}\nrustdds: {:?}", cyclone.notes(), rustdds.notes());
        assert_eq!(one_way(rustdds.as_ref(), cyclone.as_ref()), want, "RustDDS -> Cyclone");
        assert_eq!(one_way(cyclone.as_ref(), rustdds.as_ref()), want, "Cyclone -> RustDDS");
    });
}

fn open_err(interface: Option<&str>) -> Option<String> {
    RustDdsTransport::new(9, interface, &[]).err().map(|e| e.to_string())
}

#[test]
fn root_rustdds_refuses_when_another_interface_is_up_or_only_lo() {
    if let Some(why) = rtlab_sys::net::netns_unavailable() {
        rtlab_sys::test_skip::skipped(format_args!("{why}"));
        return;
    }
    on_own_thread(|| {
        let saved = rtlab_sys::net::save_netns().unwrap();
        rtlab_sys::net::unshare_netns().unwrap();
        ip(&["link", "set", "lo", "up"]);
        // only lo: RustDDS would reach nobody
        let e = open_err(None).expect("only lo must be refused");
        assert!(e.starts_with("rustdds: network: ") && e.contains("ignores lo"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        // a veth end up (its peer down)
        ip(&["link", "add", "rdtA", "type", "veth", "peer", "name", "rdtB"]);
        ip(&["addr", "add", "198.19.0.1/24", "dev", "rdtA"]);
        let e = open_err(Some("rdtA")).expect("an interface that is down must be refused");
        assert!(e.contains("rdtA: it is not up"), "{e}");
        ip(&["link", "set", "rdtA", "up"]);
        let e = open_err(None).expect("another interface up must be refused");
        assert!(
            e.contains("cannot be limited to one interface")
                && e.contains("out of rdtA")
                && e.contains("--interface all"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
        // named, by name or address, as the only one up: accepted
        assert_eq!(open_err(Some("rdtA")), None);
        assert_eq!(open_err(Some("198.19.0.1")), None);
        // a second one up without an address carries nothing of RustDDS's: still the only one
        ip(&["link", "set", "rdtB", "up"]);
        assert_eq!(open_err(Some("rdtA")), None);
        // with an address, the named one is no longer the only one
        ip(&["addr", "add", "198.19.1.1/24", "dev", "rdtB"]);
        let e = open_err(Some("rdtA")).expect("two up must be refused");
        assert!(e.contains("rdtB") && e.contains("only interface up"), "{e}");
        // every interface, accepted by the user
        let t = RustDdsTransport::new(9, Some("all"), &[]).expect("--interface all");
        let notes = t.notes().join(" ");
        assert!(notes.contains("every interface") && notes.contains("rdtB"), "{notes}");
        // RustDDS's threads renamed for --thread-priority (rdds.ev, rdds.disc)
        let comms: Vec<String> = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("comm")).ok())
            .map(|c| c.trim().to_string())
            .collect();
        for name in ["rdds.ev", "rdds.disc"] {
            assert!(comms.iter().any(|c| c == name), "no thread {name}: {comms:?}");
        }
        assert!(!comms.iter().any(|c| c.starts_with("RustDDS")), "{comms:?}");
        drop(t);
        saved.restore().unwrap();
    });
}

fn netns_id() -> String {
    std::fs::read_link("/proc/thread-self/ns/net").unwrap().to_string_lossy().into_owned()
}

/// The probe tests' configuration (tests/support/pubsub_config.rs) on rustdds, 64 B only.
fn config(mode: Mode) -> PubsubConfig {
    let mut c = pubsub_config::config(TransportKind::RustDds, mode, vec![1], false);
    c.payloads = vec![64];
    c
}

#[test]
fn root_probe_runs_rustdds_in_a_private_namespace_with_its_role_processes() {
    if let Some(why) = rtlab_sys::net::netns_unavailable() {
        rtlab_sys::test_skip::skipped(format_args!("{why}"));
        return;
    }
    on_own_thread(|| {
        let before = netns_id();
        let cfg = config(Mode::Roundtrip);
        let out = engine::run(&cfg, &launcher, Arc::new(AtomicBool::new(false)), &mut |_, _| {})
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(netns_id(), before, "the probe thread is back in its namespace");
        assert!(
            out.notes.iter().any(|n| n.contains("private network namespace")),
            "{:?}",
            out.notes
        );
        let c = &out.cases[0];
        assert_eq!(c.error, None);
        assert_eq!(c.streams.len(), 1);
        let st = &c.streams[0].stats;
        eprintln!(
            "probe: published {}, round trips {}, notes {:?}",
            c.published, st.count, out.notes
        );
        // the pong process opened rustdds on rdds0, which exists only in the private
        // namespace: that it answered at all shows it was born there
        assert!(st.count > 0, "no round trips");
        assert_eq!(st.count + st.lost.unwrap() + st.late.unwrap(), c.published);
        assert_eq!(st.duplicates, Some(0));
    });
}

#[test]
fn every_transport_is_named_alike_on_the_cli_and_in_json() {
    // the CLI and role processes read the serde name; it must be the CLI name (rustdds)
    for k in TransportKind::ALL {
        assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{}\"", k.name()));
        assert_eq!(TransportKind::parse(k.name()), Some(k));
    }
}

#[test]
fn root_probe_runs_cyclone_and_rustdds_against_each_other_in_a_private_namespace() {
    if let Some(why) = rtlab_sys::net::netns_unavailable() {
        rtlab_sys::test_skip::skipped(format_args!("{why}"));
        return;
    }
    for (near, far) in [
        (TransportKind::CycloneDds, TransportKind::RustDds),
        (TransportKind::RustDds, TransportKind::CycloneDds),
    ] {
        let (c, notes) = on_own_thread(move || {
            let mut cfg = config(Mode::Roundtrip);
            cfg.transport = TransportSpec::new(near);
            cfg.far_transport = Some(far);
            let out =
                engine::run(&cfg, &launcher, Arc::new(AtomicBool::new(false)), &mut |_, _| {})
                    .unwrap_or_else(|e| panic!("{near:?} -> {far:?}: {e}"));
            (out.cases[0].clone(), out.notes)
        });
        assert_eq!(c.error, None, "{near:?} -> {far:?}");
        assert!(notes.iter().any(|n| n.contains("private network namespace")), "{notes:?}");
        let st = &c.streams[0].stats;
        eprintln!("{near:?} -> {far:?}: published {}, round trips {}", c.published, st.count);
        assert!(st.count > 0, "{near:?} -> {far:?}: no round trips");
        assert_eq!(st.count + st.lost.unwrap() + st.late.unwrap(), c.published);
        assert_eq!(st.duplicates, Some(0));
    }
}
