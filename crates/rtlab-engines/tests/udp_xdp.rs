//! As root: the XDP path (`--xdp`) between two network namespaces joined by veth (copy
//! mode: veth has no zero-copy). Every datagram is accounted for on both ends; the XDP
//! path and the socket path answer each other; other traffic on the link (TCP, UDP to
//! another port) goes on to the kernel untouched; hostile datagrams at the XDP reflector
//! are counted and never answered; the program is gone when the run ends.

use rtlab_engines::netns::{NetnsConfig, NetnsPair};
use rtlab_engines::udp::ping::PingMode;
use rtlab_engines::udp::run::{
    ping, reflect, ReflectOutcome, RtConfig, SocketConfig, UdpPingConfig, UdpReflectConfig,
    XdpConfig,
};
use rtlab_engines::udp::wire::{self, Kind};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

static N: AtomicUsize = AtomicUsize::new(0);

fn pair() -> NetnsPair {
    let name = format!("rtx{}x{}", std::process::id() % 100_000, N.fetch_add(1, Ordering::Relaxed));
    NetnsPair::up(&NetnsConfig { name, ..Default::default() }).expect("netns pair")
}

fn xdp() -> Option<XdpConfig> {
    Some(XdpConfig::default())
}

fn reflect_cfg(
    p: &NetnsPair,
    port: u16,
    drop_every: Option<u64>,
    x: Option<XdpConfig>,
) -> UdpReflectConfig {
    UdpReflectConfig {
        bind: format!("{}:{port}", p.ip_b),
        netns: Some(p.ns_b.clone()),
        drop_every,
        duration_ns: None,
        count: None,
        window_ns: 1_000_000_000,
        rt: RtConfig::normal(),
        socket: SocketConfig::default(),
        cost_window: None,
        xdp: x,
        spike: None,
    }
}

/// A reflector in side b for the duration of `f`, then its outcome.
fn with_reflector<T>(cfg: UdpReflectConfig, f: impl FnOnce() -> T) -> (T, ReflectOutcome) {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let s = stop.clone();
    let h = std::thread::spawn(move || reflect(&cfg, s, |_| tx.send(()).unwrap(), |_| {}).unwrap());
    rx.recv().expect("reflector listening");
    let t = f();
    stop.store(true, Ordering::Relaxed);
    (t, h.join().unwrap())
}

fn ping_cfg(p: &NetnsPair, port: u16, count: u64, x: Option<XdpConfig>) -> UdpPingConfig {
    UdpPingConfig {
        to: format!("{}:{port}", p.ip_b),
        bind: None,
        netns: Some(p.ns_a.clone()),
        mode: PingMode::Periodic,
        period_ns: 1_000_000,
        payload: 200,
        deadline_ns: 1_000_000,
        loss_timeout_ns: 500_000_000,
        duration_ns: None,
        count: Some(count),
        window_ns: 1_000_000_000,
        rt: RtConfig::normal(),
        socket: SocketConfig::default(),
        preflight_ns: 3_000_000_000,
        xdp: x,
        timestamps: None,
        txtime_lead_ns: None,
        spike: None,
    }
}

fn xdp_attached(ns: &str, dev: &str) -> bool {
    let o = std::process::Command::new("ip")
        .args(["-n", ns, "-d", "link", "show", "dev", dev])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).contains("rtlab_steer")
}

#[test]
fn root_xdp_both_ends_account_for_every_datagram() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (CI runs as root)"));
        return;
    }
    let p = pair();
    let cfg = ping_cfg(&p, 9200, 400, xdp());
    let (out, refl) = with_reflector(reflect_cfg(&p, 9200, Some(25), xdp()), || {
        let o = ping(&cfg, Arc::new(AtomicBool::new(false)), |_, _| {}).unwrap();
        assert!(xdp_attached(&p.ns_b, &p.dev_b), "the reflector's program is on while it runs");
        o
    });
    let c = out.counts;
    assert_eq!(c.sent + out.rtt.overruns, 400, "{c:?}");
    assert_eq!(c.lost, c.sent / 25, "exactly the dropped ones: {c:?}");
    assert_eq!(c.samples, c.sent - c.lost);
    assert_eq!((c.late, c.duplicates, c.malformed, c.send_errors), (0, 0, 0, 0), "{c:?}");
    assert_eq!(refl.counts.runs[0].requests, c.sent);
    assert_eq!((refl.forward_lost, refl.counts.malformed, refl.counts.send_errors), (0, 0, 0));
    for x in [out.xdp.as_ref().unwrap(), refl.xdp.as_ref().unwrap()] {
        assert_eq!(x.copy, "copy", "veth has no zero-copy: {x:?}");
        assert!(x.attach == "native" || x.attach == "generic", "{x:?}");
        assert_eq!((x.rx_dropped, x.malformed_frames), (0, 0), "{x:?}");
    }
    let s = out.streams(&cfg);
    assert_eq!(s[0].labels["path"], "xdp");
    assert_eq!(s[0].labels["xdp_dev"], p.dev_a);
    assert_eq!(s[0].stats.lost, Some(c.lost));
    // both programs gone with their runs
    assert!(!xdp_attached(&p.ns_a, &p.dev_a) && !xdp_attached(&p.ns_b, &p.dev_b));
}

#[test]
fn root_xdp_and_socket_paths_answer_each_other_generic_too() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (CI runs as root)"));
        return;
    }
    let p = pair();
    // socket ping -> XDP reflector (attached on the generic path)
    let generic = Some(XdpConfig { generic: true, journal: None });
    let (out, refl) = with_reflector(reflect_cfg(&p, 9200, None, generic), || {
        ping(&ping_cfg(&p, 9200, 200, None), Arc::new(AtomicBool::new(false)), |_, _| {}).unwrap()
    });
    assert_eq!((out.counts.lost, out.counts.malformed), (0, 0), "{:?}", out.counts);
    assert!(out.xdp.is_none());
    assert_eq!(refl.xdp.as_ref().unwrap().attach, "generic");
    assert_eq!(refl.counts.runs[0].requests, out.counts.sent);
    // XDP ping -> socket reflector
    let (out, refl) = with_reflector(reflect_cfg(&p, 9201, None, None), || {
        ping(&ping_cfg(&p, 9201, 200, xdp()), Arc::new(AtomicBool::new(false)), |_, _| {}).unwrap()
    });
    assert_eq!((out.counts.lost, out.counts.malformed), (0, 0), "{:?}", out.counts);
    assert!(out.counts.samples > 0 && refl.xdp.is_none());
    assert_eq!(refl.counts.runs[0].requests, out.counts.sent);
}

#[test]
fn root_xdp_leaves_other_traffic_to_the_kernel_and_counts_hostile_datagrams() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (CI runs as root)"));
        return;
    }
    let p = pair();
    let (path_a, path_b) = (p.path_a(), p.path_b());
    let (ip_b, ip_b2) = (p.ip_b.clone(), p.ip_b.clone());
    // a TCP server in b, on the device the XDP program sits on
    let listener = rtlab_sys::net::socket_in_netns(&path_b, move || {
        std::net::TcpListener::bind(format!("{ip_b}:9300")).unwrap()
    })
    .unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut all = Vec::new();
        s.read_to_end(&mut all).unwrap();
        all
    });
    let to = format!("{}:9200", p.ip_b);
    let ((n_hostile, out, sock_refl), xdp_refl) =
        with_reflector(reflect_cfg(&p, 9200, None, xdp()), || {
            // hostile datagrams to the XDP reflector's port, from a plain socket in a
            let s = rtlab_sys::net::socket_in_netns(&path_a, || {
                std::net::UdpSocket::bind("0.0.0.0:0").unwrap()
            })
            .unwrap();
            let mut reply = vec![0u8; 64];
            wire::write(&mut reply, Kind::Reply, 5, 0, 0);
            let hostile: Vec<Vec<u8>> =
                vec![b"GET / HTTP/1.1\r\n\r\n".to_vec(), vec![1, 2, 3], reply, vec![0u8; 300]];
            for h in &hostile {
                s.send_to(h, &to).unwrap();
            }
            // TCP through the same link while the program is attached
            let mut c = rtlab_sys::net::socket_in_netns(&path_a, move || {
                std::net::TcpStream::connect(format!("{ip_b2}:9300")).unwrap()
            })
            .unwrap();
            c.write_all(&vec![0x5au8; 1 << 20]).unwrap();
            drop(c);
            // and a socket reflector on another port of the same address
            let (out, refl) = with_reflector(reflect_cfg(&p, 9201, None, None), || {
                ping(&ping_cfg(&p, 9201, 100, None), Arc::new(AtomicBool::new(false)), |_, _| {})
                    .unwrap()
            });
            (hostile.len() as u64, out, refl)
        });
    let tcp = server.join().unwrap();
    assert_eq!(tcp.len(), 1 << 20, "TCP through the XDP device arrived whole");
    assert_eq!((out.counts.lost, out.counts.malformed), (0, 0), "{:?}", out.counts);
    assert_eq!(
        sock_refl.counts.runs[0].requests, out.counts.sent,
        "the other port stayed the kernel's"
    );
    let c = &xdp_refl.counts;
    assert_eq!(
        c.received, n_hostile,
        "the XDP reflector saw only what was sent to its port: {c:?}"
    );
    assert_eq!((c.malformed, c.foreign, c.answered), (3, 1, 0), "{c:?}");
}
