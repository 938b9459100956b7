//! As root: real runs between two network namespaces joined by veth (made by
//! `NetnsPair`, uniquely named per test and always removed, also when a test fails).
//! Idle runs lose nothing (IPv4 and IPv6); a reflector that drops every Nth request
//! costs exactly those; the priority path carries the probe's packets in its own class.

use rtlab_engines::netns::{exists, NetnsConfig, NetnsPair, PriorityPath, CLASS_SO_PRIORITY};
use rtlab_engines::udp::ping::PingMode;
use rtlab_engines::udp::run::{
    ping, reflect, ReflectOutcome, RtConfig, SocketConfig, UdpPingConfig, UdpReflectConfig,
};
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

fn pair(rate: Option<u64>, path: PriorityPath) -> NetnsPair {
    let name = format!("rtp{}x{}", std::process::id() % 100_000, N.fetch_add(1, Ordering::Relaxed));
    NetnsPair::up(&NetnsConfig { name, rate_bps: rate, priority_path: path, ..Default::default() })
        .expect("netns pair")
}

fn rt() -> RtConfig {
    RtConfig::normal()
}

/// A reflector in side b for the duration of `f`, then its outcome.
fn with_reflector<T>(
    p: &NetnsPair,
    bind: String,
    drop_every: Option<u64>,
    f: impl FnOnce() -> T,
) -> (T, ReflectOutcome) {
    let cfg = UdpReflectConfig {
        bind,
        netns: Some(p.ns_b.clone()),
        drop_every,
        duration_ns: None,
        count: None,
        window_ns: 1_000_000_000,
        rt: rt(),
        socket: SocketConfig::default(),
        cost_window: None,
        xdp: None,
        spike: None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let s = stop.clone();
    let h = std::thread::spawn(move || reflect(&cfg, s, |_| tx.send(()).unwrap(), |_| {}).unwrap());
    rx.recv().expect("reflector listening");
    let t = f();
    stop.store(true, Ordering::Relaxed);
    (t, h.join().unwrap())
}

fn ping_cfg(p: &NetnsPair, to: String, count: u64, socket: SocketConfig) -> UdpPingConfig {
    UdpPingConfig {
        to,
        bind: None,
        netns: Some(p.ns_a.clone()),
        mode: PingMode::Periodic,
        period_ns: 1_000_000,
        payload: 500,
        deadline_ns: 1_000_000,
        loss_timeout_ns: 500_000_000,
        duration_ns: None,
        count: Some(count),
        window_ns: 1_000_000_000,
        rt: rt(),
        socket,
        preflight_ns: 2_000_000_000,
        xdp: None,
        timestamps: None,
        txtime_lead_ns: None,
        spike: None,
    }
}

#[test]
fn root_netns_idle_runs_lose_nothing_ipv4_and_ipv6() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (CI runs as root)"));
        return;
    }
    let p = pair(None, PriorityPath::None);
    let to = format!("{}:9100", p.ip_b);
    let (out, refl) = with_reflector(&p, to.clone(), None, || {
        ping(
            &ping_cfg(&p, to, 2000, SocketConfig::default()),
            Arc::new(AtomicBool::new(false)),
            |_, _| {},
        )
        .unwrap()
    });
    let c = out.counts;
    // 2000 slots: each sent or skipped (an overrun: the sender late past it, noise here)
    assert_eq!(c.sent + out.rtt.overruns, 2000, "{c:?}");
    assert_eq!((c.samples, c.lost, c.late, c.duplicates, c.malformed), (c.sent, 0, 0, 0, 0));
    assert_eq!(refl.forward_lost, 0);
    assert_eq!(refl.counts.runs[0].requests, c.sent);
    assert!(out.local_addr.starts_with(&p.ip_a), "sent from side a: {}", out.local_addr);

    let to6 = format!("[{}]:9101", p.ip6_b.clone().unwrap());
    let (out, _) = with_reflector(&p, to6.clone(), None, || {
        ping(
            &ping_cfg(&p, to6, 300, SocketConfig::default()),
            Arc::new(AtomicBool::new(false)),
            |_, _| {},
        )
        .unwrap()
    });
    assert_eq!((out.counts.samples, out.counts.lost), (out.counts.sent, 0));
    assert_eq!(out.counts.sent + out.rtt.overruns, 300);
}

#[test]
fn root_netns_injected_drops_are_exactly_the_losses() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (CI runs as root)"));
        return;
    }
    let p = pair(None, PriorityPath::None);
    let to = format!("{}:9102", p.ip_b);
    let (out, refl) = with_reflector(&p, to.clone(), Some(7), || {
        ping(
            &ping_cfg(&p, to, 1000, SocketConfig::default()),
            Arc::new(AtomicBool::new(false)),
            |_, _| {},
        )
        .unwrap()
    });
    let c = out.counts;
    assert_eq!(c.sent + out.rtt.overruns, 1000, "{c:?}");
    assert_eq!(c.lost, c.sent / 7, "{c:?}");
    assert_eq!(c.samples, c.sent - c.sent / 7);
    assert_eq!((c.late, c.duplicates, c.malformed), (0, 0, 0));
    assert_eq!(refl.counts.dropped, c.sent / 7);
    assert_eq!(refl.forward_lost, 0, "the network itself lost nothing");
}

fn class_packets(p: &NetnsPair, class: &str) -> u64 {
    let out = std::process::Command::new("tc")
        .args(["-n", &p.ns_a, "-s", "class", "show", "dev", &p.dev_a])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if l.contains(&format!("class htb {class} ")) {
            let sent = lines.next().unwrap_or("");
            // " Sent 12345 bytes 67 pkt ..."
            let w: Vec<&str> = sent.split_whitespace().collect();
            return w
                .iter()
                .position(|x| *x == "pkt")
                .and_then(|i| w[i - 1].parse().ok())
                .unwrap_or(0);
        }
    }
    panic!("class {class} not found in:\n{text}");
}

#[test]
fn root_netns_priority_path_class_takes_the_probe_by_tos_and_by_so_priority() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (CI runs as root)"));
        return;
    }
    let p = pair(Some(100_000_000), PriorityPath::Class);
    let to = format!("{}:9103", p.ip_b);
    let by_tos = SocketConfig { tos: Some(0xb8), ..Default::default() };
    let (out, _) = with_reflector(&p, to.clone(), None, || {
        ping(&ping_cfg(&p, to.clone(), 200, by_tos), Arc::new(AtomicBool::new(false)), |_, _| {})
            .unwrap()
    });
    assert_eq!(out.counts.lost, 0);
    // every request sent (200 slots minus the ones skipped) and the preflight's hello
    let after_tos = class_packets(&p, "1:10");
    let sent = out.counts.sent;
    assert!(after_tos >= sent, "requests marked TOS 0xb8 go to class 1:10: {after_tos} < {sent}");
    let by_prio = SocketConfig { so_priority: Some(CLASS_SO_PRIORITY), ..Default::default() };
    let (out, _) = with_reflector(&p, to.clone(), None, || {
        ping(&ping_cfg(&p, to, 200, by_prio), Arc::new(AtomicBool::new(false)), |_, _| {}).unwrap()
    });
    assert_eq!(out.socket.so_priority, Some(CLASS_SO_PRIORITY as i32));
    let sent = out.counts.sent;
    assert!(
        class_packets(&p, "1:10") >= after_tos + sent,
        "SO_PRIORITY 0x10010 goes to class 1:10"
    );
}

#[test]
fn root_netns_pair_is_removed_when_the_run_panics() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (CI runs as root)"));
        return;
    }
    let names = std::sync::Mutex::new(None);
    let r = std::panic::catch_unwind(|| {
        let p = pair(Some(10_000_000), PriorityPath::Band);
        *names.lock().unwrap() = Some((p.ns_a.clone(), p.ns_b.clone()));
        assert!(exists(&p.ns_a) && exists(&p.ns_b));
        panic!("a failing run");
    });
    assert!(r.is_err());
    let (a, b) = names.lock().unwrap().clone().unwrap();
    assert!(!exists(&a) && !exists(&b), "both namespaces removed on unwind");
}

#[test]
fn root_netns_timestamps_split_every_round_trip_into_three_stages() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (CI runs as root)"));
        return;
    }
    let p = pair(None, PriorityPath::None);
    let mut cfg = ping_cfg(&p, format!("{}:9000", p.ip_b), 500, SocketConfig::default());
    cfg.timestamps = Some(rtlab_engines::udp::run::Timestamps::Software);
    let (out, _) = with_reflector(&p, format!("{}:9000", p.ip_b), None, || {
        ping(&cfg, Arc::new(AtomicBool::new(false)), |_, _| {}).unwrap()
    });
    let c = out.counts;
    assert_eq!((c.lost, c.samples), (0, c.sent), "{c:?}");
    let st = out.stages.as_ref().expect("stages");
    assert_eq!(st.offers, "software tx, software rx", "veth stamps both ways");
    let s = &st.stamps;
    // every request has its tx stamp; an rx stamp may be missing on the first replies, while
    // the kernel's work item turns rx stamping on (counted, never made up)
    assert_eq!(s.no_tx_stamp, 0);
    assert!(
        s.no_rx_stamp <= c.samples / 20,
        "{} of {} without an rx stamp",
        s.no_rx_stamp,
        c.samples
    );
    assert_eq!(s.tx_stack.running.count, c.samples);
    for r in [&s.wire, &s.rx_wakeup] {
        assert_eq!(r.running.count + s.no_rx_stamp, c.samples);
    }
    for r in [&s.tx_stack, &s.wire, &s.rx_wakeup] {
        assert!(r.running.min >= 0, "a stage never runs backwards: {}", r.running.min);
    }
    // the stages lie inside each round trip (its clock reads are around theirs): their
    // means add up to at most the RTT's (1 us for CLOCK_REALTIME's slew)
    let mean = |r: &rtlab_core::sink::Recorder| r.running.mean().unwrap_or(0);
    let gap = mean(&out.rtt) - (mean(&s.tx_stack) + mean(&s.wire) + mean(&s.rx_wakeup));
    if s.no_rx_stamp == 0 {
        // (over the same samples only)
        assert!(gap > -1_000, "RTT mean - stage means = {gap} ns");
    }
    let names: Vec<_> = out.streams(&cfg).iter().map(|s| s.name.clone()).collect();
    assert_eq!(
        names,
        ["ping", "ping.send_lateness", "ping.tx_stack", "ping.wire", "ping.rx_wakeup"]
    );
}
