//! dds, zenoh and udp across two network namespaces joined by a veth pair (root only).
//!
//! Each `root_*` test makes its own pair of namespaces (`rtps{pid}{k}a` / `...b`, addresses
//! 198.18.{pid % 200 + 20}.1/24 and .2/24, `lo` up in both) and removes them in a Drop
//! guard. The publisher and the subscriber are two child processes, re-runs of this test
//! binary under `ip netns exec` (the [`child_role`] test, which does nothing unless
//! [`ROLE_ENV`] holds its configuration). They meet through files in a shared temporary
//! directory: `ready` (publisher up), `go` (subscriber got a warm-up), `done` (subscriber got
//! the end marker). The subscriber asserts it got exactly the N measured messages, in order;
//! nothing here asserts a time. Without root or without `ip` the tests say why and pass.

#[path = "support/ip.rs"]
mod ip_cmd;

use ip_cmd::ip;
// the suite's helpers only (its rules are tests/conformance.rs's)
#[path = "support/conformance.rs"]
#[allow(dead_code, unused_macros)]
mod conformance;
use conformance::usable_qos;
use rtlab_pubsub::transport::{WaitStyle, END_SEQ, WARMUP_BIT};
use rtlab_pubsub::{TransportKind, TransportSpec};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable that carries a child's [`Role`] (JSON).
const ROLE_ENV: &str = "RTLAB_ACROSS_NETNS_ROLE";
/// Measured messages per run.
const N: u64 = 200;
const LEN: usize = 64;

#[derive(Serialize, Deserialize)]
struct Role {
    publisher: bool,
    spec: TransportSpec,
    topic: String,
    dir: PathBuf,
}

fn root_and_ip() -> Result<(), String> {
    if let Some(why) = rtlab_sys::net::netns_unavailable() {
        return Err(why.into());
    }
    match Command::new("ip").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(s) if s.success() => Ok(()),
        _ => Err("the `ip` command (iproute2) is missing".into()),
    }
}

/// Two namespaces joined by a veth pair; deleted on drop.
struct NetnsPair {
    a: String,
    b: String,
    /// The veth end in `a` (`b`'s end is the same with a `b`).
    dev_a: String,
    addr_a: String,
    addr_b: String,
}

impl NetnsPair {
    fn new(k: char) -> NetnsPair {
        let pid = std::process::id();
        let x = pid % 200 + 20;
        let p = NetnsPair {
            a: format!("rtps{pid}{k}a"),
            b: format!("rtps{pid}{k}b"),
            dev_a: format!("vp{pid}{k}a"),
            addr_a: format!("198.18.{x}.1"),
            addr_b: format!("198.18.{x}.2"),
        };
        let dev_b = format!("vp{pid}{k}b");
        ip(&["netns", "add", &p.a]);
        // from here on the guard removes what exists
        let guard = p;
        ip(&["netns", "add", &guard.b]);
        ip(&[
            "link",
            "add",
            &guard.dev_a,
            "netns",
            &guard.a,
            "type",
            "veth",
            "peer",
            "name",
            &dev_b,
            "netns",
            &guard.b,
        ]);
        for (ns, dev, addr) in
            [(&guard.a, &guard.dev_a, &guard.addr_a), (&guard.b, &dev_b, &guard.addr_b)]
        {
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        guard
    }
}

impl Drop for NetnsPair {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).stderr(Stdio::null()).status();
        }
    }
}

/// Start this binary's [`child_role`] test in namespace `ns` with `role`; output to `log`.
fn spawn_role(ns: &str, role: &Role, log: &Path) -> Child {
    let exe = std::env::current_exe().expect("test binary path");
    let out = std::fs::File::create(log).expect("log file");
    let err = out.try_clone().expect("log file");
    Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(exe)
        .args(["--exact", "child_role", "--nocapture", "--ignored"])
        .env(ROLE_ENV, serde_json::to_string(role).expect("role json"))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("spawn ip netns exec")
}

/// Wait for `child` at most `secs`; kill it (it is ours) when it takes longer.
fn finish(child: &mut Child, secs: u64) -> Option<std::process::ExitStatus> {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(s) = child.try_wait().expect("wait child") {
            return Some(s);
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_for(file: &Path, secs: u64) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while !file.exists() {
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// Publisher in namespace a with `pub_spec`, subscriber in b with `sub_spec`: the
/// subscriber must get all N measured messages in order.
fn across(k: char, make: impl Fn(&NetnsPair) -> (TransportSpec, TransportSpec)) {
    if let Err(why) = root_and_ip() {
        rtlab_sys::test_skip::skipped(format_args!("{why}"));
        return;
    }
    let pair = NetnsPair::new(k);
    let (pub_spec, sub_spec) = make(&pair);
    let dir = tempfile::tempdir().expect("temp dir");
    let topic = format!("rtlab_netns_{}_{k}", std::process::id());
    let role = |publisher, spec: TransportSpec| Role {
        publisher,
        spec,
        topic: topic.clone(),
        dir: dir.path().to_path_buf(),
    };
    let (pub_log, sub_log) = (dir.path().join("pub.log"), dir.path().join("sub.log"));
    let mut p = spawn_role(&pair.a, &role(true, pub_spec), &pub_log);
    let ready = wait_for(&dir.path().join("ready"), 60);
    let mut s = ready.then(|| spawn_role(&pair.b, &role(false, sub_spec), &sub_log));
    let sub_status = s.as_mut().and_then(|s| finish(s, 90));
    let pub_status = finish(&mut p, 30);
    let logs = format!(
        "--- publisher:\n{}\n--- subscriber:\n{}",
        std::fs::read_to_string(&pub_log).unwrap_or_default(),
        std::fs::read_to_string(&sub_log).unwrap_or_default()
    );
    assert!(ready, "the publisher never got ready\n{logs}");
    assert!(sub_status.is_some_and(|s| s.success()), "subscriber: {sub_status:?}\n{logs}");
    let got = std::fs::read_to_string(dir.path().join("result")).unwrap_or_default();
    assert_eq!(got.trim(), format!("received {N} in order"), "{logs}");
    assert!(pub_status.is_some_and(|s| s.success()), "publisher: {pub_status:?}\n{logs}");
}

fn spec(kind: TransportKind) -> TransportSpec {
    let mut s = TransportSpec::new(kind);
    s.domain = Some(7);
    s
}

#[test]
fn root_dds_across_netns_unicast_peers() {
    across('d', |n| {
        let mut a = spec(TransportKind::CycloneDds);
        a.interface = Some(n.dev_a.clone()); // by name
        a.peers = vec![n.addr_b.clone()];
        let mut b = spec(TransportKind::CycloneDds);
        b.interface = Some(n.addr_b.clone()); // by address
        b.peers = vec![n.addr_a.clone()];
        (a, b)
    });
}

#[test]
fn root_dds_across_netns_multicast_discovery() {
    across('m', |n| {
        let mut a = spec(TransportKind::CycloneDds);
        a.interface = Some(n.addr_a.clone());
        let mut b = spec(TransportKind::CycloneDds);
        b.interface = Some(n.addr_b.clone());
        (a, b)
    });
}

#[test]
fn root_zenoh_across_netns_peer_and_client() {
    across('z', |n| {
        let ep = format!("tcp/{}:7447", n.addr_a);
        let mut a = spec(TransportKind::Zenoh);
        a.listen = vec![ep.clone()];
        let mut b = spec(TransportKind::Zenoh);
        b.connect = vec![ep];
        b.zenoh_mode = Some("client".into());
        (a, b)
    });
}

#[test]
fn root_udp_across_netns() {
    across('u', |n| {
        let mut a = spec(TransportKind::Udp);
        a.interface = Some(n.addr_a.clone());
        let mut b = spec(TransportKind::Udp);
        b.interface = Some(n.addr_b.clone());
        b.peers = vec![n.addr_a.clone()];
        (a, b)
    });
}

/// One side of [`across`], run in a child process (does nothing without [`ROLE_ENV`]).
#[test]
#[ignore = "a child process of the root_* tests"]
fn child_role() {
    let Ok(json) = std::env::var(ROLE_ENV) else { return };
    let role: Role = serde_json::from_str(&json).expect("role json");
    let t = rtlab_pubsub::open(&role.spec).expect("open the transport");
    eprintln!("notes: {:?}", t.notes());
    let qos = usable_qos(t.as_ref());
    let now = rtlab_sys::clock::monotonic_ns;
    let file = |name: &str| role.dir.join(name);
    if role.publisher {
        let mut p = t.publisher(&role.topic, &qos, LEN).expect("publisher");
        std::fs::write(file("ready"), "").expect("ready file");
        let end = Instant::now() + Duration::from_secs(60);
        let mut k = 0;
        while !file("go").exists() {
            assert!(Instant::now() < end, "no subscriber in 60 s");
            p.publish(WARMUP_BIT | k, now(), LEN).expect("publish warm-up");
            k += 1;
            std::thread::sleep(Duration::from_millis(10));
        }
        for seq in 0..N {
            p.publish(seq, now(), LEN).expect("publish");
            std::thread::sleep(Duration::from_millis(2));
        }
        let end = Instant::now() + Duration::from_secs(30);
        while !file("done").exists() && Instant::now() < end {
            p.publish(END_SEQ, now(), LEN).expect("publish end");
            std::thread::sleep(Duration::from_millis(20));
        }
    } else {
        let mut s = t.subscriber(&role.topic, &qos, LEN).expect("subscriber");
        let end = Instant::now() + Duration::from_secs(60);
        let mut seqs = Vec::new();
        let mut warm = false;
        loop {
            assert!(Instant::now() < end, "60 s: warm-up seen {warm}, got {}", seqs.len());
            let Some(r) = s.take(WaitStyle::Blocking, 50_000_000).expect("take") else {
                continue;
            };
            assert_eq!(r.len, LEN, "message length");
            if r.seq == END_SEQ {
                break;
            }
            if r.seq & WARMUP_BIT != 0 {
                if !warm {
                    std::fs::write(file("go"), "").expect("go file");
                    warm = true;
                }
                continue;
            }
            seqs.push(r.seq);
        }
        std::fs::write(file("done"), "").expect("done file");
        assert_eq!(seqs, (0..N).collect::<Vec<_>>(), "measured sequence numbers");
        std::fs::write(file("result"), format!("received {N} in order")).expect("result");
    }
}

#[test]
fn dds_with_a_missing_interface_names_it() {
    let mut s = spec(TransportKind::CycloneDds);
    s.interface = Some("nosuchrtps0".into());
    s.peers = vec!["198.18.0.2".into()];
    let e = rtlab_pubsub::open(&s).err().expect("must fail").to_string();
    assert!(e.contains("nosuchrtps0") && !e.contains('\n'), "{e}");
    s.interface = Some("198.18.255.254".into());
    let e = rtlab_pubsub::open(&s).err().expect("must fail").to_string();
    assert!(e.contains("198.18.255.254"), "{e}");
}

#[test]
fn zenoh_router_mode_is_refused_by_name() {
    let mut s = spec(TransportKind::Zenoh);
    s.zenoh_mode = Some("router".into());
    let e = rtlab_pubsub::open(&s).err().expect("must fail").to_string();
    assert!(e.contains("router"), "{e}");
}

#[test]
fn udp_port_of_is_stable_and_in_range() {
    use rtlab_pubsub::transport::udp::port_of;
    // FNV-1a 32 of "rtlab" computed by hand-rolled reference below
    let mut h: u32 = 0x811c_9dc5;
    for b in b"rtlab" {
        h = (h ^ *b as u32).wrapping_mul(16_777_619);
    }
    assert_eq!(port_of("rtlab"), (20_000 + h % 40_000) as u16);
    for i in 0..1000 {
        let t = format!("topic_{i}");
        assert_eq!(port_of(&t), port_of(&t.clone()));
        assert!((20_000..=59_999).contains(&port_of(&t)));
    }
}
