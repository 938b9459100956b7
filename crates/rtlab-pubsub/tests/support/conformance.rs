//! The one conformance suite every [`Transport`] is checked with (model: iceoryx2's
//! `iceoryx2-cal/conformance-tests/` and its `instantiate_conformance_tests!`): delivery,
//! order, fan-out, loss counting, QoS mapping, size limits and clean shutdown with no
//! leftover files.
//!
//! Contract:
//! - Each rule is a function taking a [`Subject`]: how to make a (publishing side,
//!   subscribing side) pair of transports — the same one, or two sessions that talk over the
//!   wire — and which files the transport could leave behind. A rule panics (asserts) on a
//!   breach: rules are for tests. They assert counts and fields only, never a time bound.
//! - Each rule is its own test for each transport: [`instantiate_conformance_tests!`]`(name,
//!   harness)` makes a module `name` with one `#[test]` per rule (`dds::fan_out`,
//!   `fastdds::clean_shutdown`, ...), so a failure names the rule and the transport. The
//!   harness is a function taking the rule ([`Rule`]): it makes the transport's [`Subject`],
//!   keeps what the transport needs around a run (a lock for files it lists, a private network
//!   namespace, a temporary directory, a check after the rule) and runs the rule on it, or
//!   prints `skipped: <why>` and returns where the machine cannot run it. Tests of one binary
//!   run in parallel: a harness whose leftovers are shared files (/dev/shm) holds the lock
//!   every test making such files takes.
//! - The rules are the names in the macro's list; a new rule is one more name there and is
//!   then a test of every transport.
//!
//! `tests/conformance.rs` instantiates it for every transport, `tests/ros2.rs` for those that
//! run through the ROS 2 installation (a process of their own: one Fast DDS per process).

use rtlab_pubsub::seqtrack::SeqTracker;
use rtlab_pubsub::transport::*;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

/// A transport under test.
pub struct Subject<'a> {
    /// A fresh (publishing side, subscribing side) pair.
    pub make: &'a dyn Fn() -> (Arc<dyn Transport>, Arc<dyn Transport>),
    /// Files this transport may create (everything listed must be gone after shutdown).
    pub leftovers: &'a dyn Fn() -> BTreeSet<PathBuf>,
}

static TOPIC: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A topic name no other check uses.
pub fn fresh_topic(what: &str) -> String {
    let n = TOPIC.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(
        "rtlab_conf_{}_{}_{what}_{n}",
        std::process::id(),
        rtlab_sys::clock::monotonic_ns() % 1_000_000
    )
}

/// The strongest QoS the transport honours among reliable/best-effort with a deep history.
pub fn usable_qos(t: &dyn Transport) -> Qos {
    let reliable = Qos {
        reliability: Reliability::Reliable,
        history: History::KeepLast(256),
        durability: Durability::Volatile,
    };
    if t.map_qos(&reliable).is_ok() {
        return reliable;
    }
    Qos { reliability: Reliability::BestEffort, ..reliable }
}

/// Publish warm-up messages until every subscriber got one (bounded: 60 s; two vendors'
/// multicast discovery in a fresh namespace, RustDDS with Cyclone, once took more than 20 s
/// in CI). Returns the subscribers once discovery is done; panics if it never is.
pub fn warm_up(publisher: &mut dyn Publisher, subs: &mut [Box<dyn Subscriber>], len: usize) {
    let end = rtlab_sys::clock::monotonic_ns() + 60_000_000_000;
    let mut got = vec![false; subs.len()];
    let mut k = 0u64;
    while !got.iter().all(|g| *g) {
        assert!(
            rtlab_sys::clock::monotonic_ns() < end,
            "warm-up: subscribers {got:?} got nothing in 60 s"
        );
        publisher
            .publish(WARMUP_BIT | k, rtlab_sys::clock::monotonic_ns(), len)
            .expect("publish warm-up");
        k += 1;
        for (i, s) in subs.iter_mut().enumerate() {
            while let Some(r) = s.take(WaitStyle::Blocking, 5_000_000).expect("take") {
                assert!(r.seq & WARMUP_BIT != 0, "a measured message before any was sent");
                got[i] = true;
            }
        }
    }
    // drain what is still in flight
    std::thread::sleep(std::time::Duration::from_millis(50));
    for s in subs.iter_mut() {
        while s.take(WaitStyle::Blocking, 10_000_000).expect("take").is_some() {}
    }
}

/// Receive on every subscriber concurrently until `want` measured messages each or 10 s.
fn collect(
    subs: Vec<Box<dyn Subscriber>>,
    want: usize,
    wait: WaitStyle,
) -> Vec<std::thread::JoinHandle<Vec<Received>>> {
    subs.into_iter()
        .map(|mut s| {
            std::thread::spawn(move || {
                let mut v = Vec::with_capacity(want);
                let end = rtlab_sys::clock::monotonic_ns() + 10_000_000_000;
                while v.len() < want && rtlab_sys::clock::monotonic_ns() < end {
                    if let Some(r) = s.take(wait, 20_000_000).expect("take") {
                        if r.seq & WARMUP_BIT == 0 {
                            v.push(r);
                        }
                    }
                }
                v
            })
        })
        .collect()
}

/// Send `seqs` paced by `gap_ns`, each `len` bytes, and return what each subscriber got.
fn exchange(
    s: &Subject,
    n_subs: usize,
    len: usize,
    seqs: &[u64],
    wait: WaitStyle,
) -> Vec<Vec<Received>> {
    exchange_sized(s, n_subs, len, seqs, wait, &|_| len)
}

/// [`exchange`] with message `q` of `len_of(q)` bytes (at most `len`).
fn exchange_sized(
    s: &Subject,
    n_subs: usize,
    len: usize,
    seqs: &[u64],
    wait: WaitStyle,
    len_of: &dyn Fn(u64) -> usize,
) -> Vec<Vec<Received>> {
    let (pt, st) = (s.make)();
    let topic = fresh_topic("x");
    let qos = usable_qos(pt.as_ref());
    let mut subs: Vec<Box<dyn Subscriber>> =
        (0..n_subs).map(|_| st.subscriber(&topic, &qos, len).expect("subscriber")).collect();
    let mut p = pt.publisher(&topic, &qos, len).expect("publisher");
    warm_up(p.as_mut(), &mut subs, len);
    let handles = collect(subs, seqs.len(), wait);
    for &q in seqs {
        p.publish(q, rtlab_sys::clock::monotonic_ns(), len_of(q)).expect("publish");
        std::thread::sleep(std::time::Duration::from_micros(500));
    }
    let out: Vec<Vec<Received>> =
        handles.into_iter().map(|h| h.join().expect("receiver")).collect();
    drop(p);
    out
}

/// Every message arrives once, in order, with its header and length intact (both wait styles).
pub fn delivery_and_order(s: &Subject) {
    for wait in [WaitStyle::Blocking, WaitStyle::BusyPoll] {
        let seqs: Vec<u64> = (0..100).collect();
        let got = exchange(s, 1, 64, &seqs, wait);
        let r = &got[0];
        assert_eq!(r.len(), seqs.len(), "{wait:?}: delivered {} of {}", r.len(), seqs.len());
        for (i, m) in r.iter().enumerate() {
            assert_eq!(m.seq, i as u64, "{wait:?}: order");
            assert_eq!(m.len, 64);
            assert!(m.stamp_ns > 0);
        }
    }
}

/// A publisher's messages may change length from one to the next (up to the length it was
/// made for); each arrives with its own.
pub fn lengths_may_change(s: &Subject) {
    let len_of = |q: u64| [64, 4096, HEADER_LEN, 64, 1000][q as usize % 5];
    let seqs: Vec<u64> = (0..20).collect();
    let got = exchange_sized(s, 1, 4096, &seqs, WaitStyle::Blocking, &len_of);
    let want: Vec<(u64, usize)> = seqs.iter().map(|&q| (q, len_of(q))).collect();
    assert_eq!(got[0].iter().map(|m| (m.seq, m.len)).collect::<Vec<_>>(), want);
}

/// Every subscriber of a topic gets every message (fan-out).
pub fn fan_out(s: &Subject) {
    let seqs: Vec<u64> = (0..50).collect();
    let got = exchange(s, 3, 128, &seqs, WaitStyle::Blocking);
    assert_eq!(got.len(), 3);
    for (i, r) in got.iter().enumerate() {
        let q: Vec<u64> = r.iter().map(|m| m.seq).collect();
        assert_eq!(q, seqs, "subscriber {i}");
    }
}

/// Sequence gaps made by the publisher are counted as lost, nothing else.
pub fn loss_counting(s: &Subject) {
    // the last number (60) is sent, so every skipped one is a visible gap
    let seqs: Vec<u64> = (0..=60).filter(|q| q % 7 != 3).collect();
    let got = exchange(s, 1, 64, &seqs, WaitStyle::Blocking);
    let mut t = SeqTracker::new();
    for m in &got[0] {
        t.arrive(m.seq);
    }
    let skipped = (0..60).filter(|q| q % 7 == 3).count() as u64;
    assert_eq!(t.received, seqs.len() as u64);
    assert_eq!(t.lost, skipped);
    assert_eq!((t.duplicates, t.out_of_order), (0, 0));
}

/// Every QoS combination is either mapped (each item says what it became) or refused as
/// bad input, and ports refuse what the mapping refuses.
pub fn qos_mapping(s: &Subject) {
    let (pt, _st) = (s.make)();
    let mut honoured = 0;
    for reliability in [Reliability::Reliable, Reliability::BestEffort] {
        for history in [History::KeepLast(4), History::KeepAll] {
            for durability in [Durability::Volatile, Durability::TransientLocal] {
                let q = Qos { reliability, history, durability };
                let topic = fresh_topic("qos");
                match pt.map_qos(&q) {
                    Ok(m) => {
                        honoured += 1;
                        assert_eq!(m.reliability.asked, reliability.to_string());
                        assert_eq!(m.history.asked, history.to_string());
                        assert_eq!(m.durability.asked, durability.to_string());
                        for it in [&m.reliability, &m.history, &m.durability] {
                            assert!(!it.native.is_empty(), "{q:?}: empty native mapping");
                        }
                        drop(pt.publisher(&topic, &q, 64).unwrap_or_else(|e| {
                            panic!("{q:?} mapped but the publisher failed: {e}")
                        }));
                    }
                    Err(e) => {
                        assert!(matches!(e, TransportError::QosUnsupported { .. }), "{q:?}: {e}");
                        assert!(e.is_bad_input());
                        let p = pt.publisher(&topic, &q, 64);
                        assert!(
                            matches!(p, Err(TransportError::QosUnsupported { .. })),
                            "{q:?}: refused by map_qos, accepted by publisher"
                        );
                    }
                }
            }
        }
    }
    assert!(honoured >= 1, "{}: no QoS combination honoured", pt.name());
    // the default profile is honoured everywhere
    pt.map_qos(&Qos::default()).expect("the default QoS");
}

/// Sizes: below a header or above the maximum is refused as bad input; a large message
/// (up to 1 MiB or the maximum) arrives whole.
pub fn size_limits(s: &Subject) {
    let (pt, _st) = (s.make)();
    let q = usable_qos(pt.as_ref());
    let small = pt.publisher(&fresh_topic("small"), &q, HEADER_LEN - 1);
    assert!(matches!(small, Err(TransportError::MessageTooSmall(_))));
    let max = pt.max_message();
    if max < (1 << 40) {
        let big = pt.publisher(&fresh_topic("big"), &q, max + 1);
        assert!(
            matches!(big, Err(TransportError::MessageTooLarge { .. })),
            "{}: {} bytes accepted",
            pt.name(),
            max + 1
        );
        assert!(big.err().is_some_and(|e| e.is_bad_input()));
    }
    drop(pt);
    let len = max.min(1 << 20);
    let got = exchange(s, 1, len, &[0, 1], WaitStyle::Blocking);
    assert_eq!(got[0].iter().map(|m| (m.seq, m.len)).collect::<Vec<_>>(), vec![(0, len), (1, len)]);
}

/// A wait of no time (zero, or a deadline already past) returns: nothing to take is None,
/// in either wait style (found: iceoryx2's `timed_wait` with a zero timeout never returned,
/// and an echo whose wait slice had just ended hung its role).
pub fn no_wait_blocks(s: &Subject) {
    let (pt, st) = (s.make)();
    let q = usable_qos(pt.as_ref());
    let topic = fresh_topic("nowait");
    let _p = pt.publisher(&topic, &q, 64).expect("publisher");
    let mut sub = st.subscriber(&topic, &q, 64).expect("subscriber");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let past = rtlab_sys::clock::monotonic_ns() - 1;
        let got = [
            sub.wait_take(0),
            sub.take(WaitStyle::Blocking, 0),
            sub.take(WaitStyle::Blocking, -1),
            sub.take_until(WaitStyle::Blocking, past),
            sub.take(WaitStyle::BusyPoll, 0),
            sub.take_until(WaitStyle::BusyPoll, past),
        ];
        let _ = tx.send(got.into_iter().map(|g| g.map(|r| r.is_none())).collect::<Vec<_>>());
    });
    // a bound for "never returns", not a latency: each wait above takes no time
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("{}: a wait of no time did not return in 30 s", pt.name()));
    for (i, g) in got.iter().enumerate() {
        assert!(matches!(g, Ok(true)), "{}: wait {i}: {g:?}", pt.name());
    }
}

/// After ports and transports are dropped, no file the transport made is left.
pub fn clean_shutdown(s: &Subject) {
    let before = (s.leftovers)();
    {
        let (pt, st) = (s.make)();
        let topic = fresh_topic("bye");
        let q = usable_qos(pt.as_ref());
        let mut subs = vec![st.subscriber(&topic, &q, 256).expect("subscriber")];
        let mut p = pt.publisher(&topic, &q, 256).expect("publisher");
        warm_up(p.as_mut(), &mut subs, 256);
        drop(subs);
        drop(p);
        drop(pt);
        drop(st);
    }
    // give a library that cleans up from its own threads a moment
    let end = rtlab_sys::clock::monotonic_ns() + 2_000_000_000;
    loop {
        let after = (s.leftovers)();
        let new: Vec<_> = after.difference(&before).collect();
        if new.is_empty() {
            break;
        }
        assert!(rtlab_sys::clock::monotonic_ns() < end, "left behind: {new:?}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A rule of the suite, as a harness receives it.
pub type Rule = fn(&Subject<'_>);

/// `instantiate_conformance_tests!(name, harness)`: a module `name` with one `#[test]` per
/// rule of the suite, each calling `harness(rule)` (see the module's contract).
///
/// `harness` is an expression of a function `fn(Rule)`, resolved beside the macro's call (the
/// module sees its parent's items):
///
/// ```text
/// instantiate_conformance_tests!(udp, with_udp);
///
/// fn with_udp(rule: Rule) {
///     let dir = tempfile::tempdir().unwrap();
///     let make = || { /* a UdpTransport on `dir`, twice */ };
///     let leftovers = || files_under(&[dir.path().into()], &[]);
///     rule(&Subject { make: &make, leftovers: &leftovers });
///     assert!(leftovers().is_empty());
/// }
/// ```
///
/// gives the tests `udp::qos_mapping`, `udp::delivery_and_order`, ..., `udp::clean_shutdown`.
macro_rules! instantiate_conformance_tests {
    ($module:ident, $harness:expr $(,)?) => {
        crate::conformance::instantiate_conformance_tests!(@rules tests[$module, $harness]);
    };
    // The rules: the one list of the suite.
    (@rules $then:ident[$($args:tt)*]) => {
        crate::conformance::instantiate_conformance_tests!(@$then[$($args)*]
            qos_mapping
            delivery_and_order
            lengths_may_change
            fan_out
            loss_counting
            size_limits
            no_wait_blocks
            clean_shutdown
        );
    };
    (@tests[$module:ident, $harness:expr] $($rule:ident)*) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                fn $rule() {
                    let rule: crate::conformance::Rule = crate::conformance::$rule;
                    ($harness)(rule)
                }
            )*
        }
    };
}

#[allow(unused_imports)]
pub(crate) use instantiate_conformance_tests;

/// List the files under `dirs` (recursively, bounded) whose name contains any of `needles`
/// (all files when `needles` is empty).
pub fn files_under(dirs: &[PathBuf], needles: &[&str]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut stack: Vec<PathBuf> = dirs.to_vec();
    let mut visited = 0;
    while let Some(d) = stack.pop() {
        visited += 1;
        if visited > 10_000 {
            break;
        }
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let name =
                    p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
                if needles.is_empty() || needles.iter().any(|n| name.contains(n)) {
                    out.insert(p);
                }
            }
        }
    }
    out
}
