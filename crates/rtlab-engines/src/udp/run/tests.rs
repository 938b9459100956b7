use super::*;

fn ping_cfg(to: &str) -> UdpPingConfig {
    UdpPingConfig {
        to: to.into(),
        bind: None,
        netns: None,
        mode: PingMode::Periodic,
        period_ns: 1_000_000,
        payload: 500,
        deadline_ns: 1_000_000,
        loss_timeout_ns: 500_000_000,
        duration_ns: None,
        count: Some(200),
        window_ns: 1_000_000_000,
        rt: RtConfig::normal(),
        socket: SocketConfig::default(),
        preflight_ns: 2_000_000_000,
        xdp: None,
        timestamps: None,
        txtime_lead_ns: None,
        spike: None,
    }
}

fn reflect_cfg(drop_every: Option<u64>) -> UdpReflectConfig {
    UdpReflectConfig {
        bind: "127.0.0.1:0".into(),
        netns: None,
        drop_every,
        duration_ns: None,
        count: None,
        window_ns: 1_000_000_000,
        rt: RtConfig::normal(),
        socket: SocketConfig::default(),
        cost_window: None,
        xdp: None,
        spike: None,
    }
}

#[test]
fn validation_names_the_flag() {
    let online = [0usize, 1];
    let bad = |f: &dyn Fn(&mut UdpPingConfig)| {
        let mut c = ping_cfg("127.0.0.1:9");
        f(&mut c);
        c.validate(&online).unwrap_err().to_string()
    };
    assert!(bad(&|c| c.to = "nonsense".into()).contains("--to 'nonsense'"));
    assert!(bad(&|c| c.to = "127.0.0.1:0".into()).contains("port 0"));
    assert!(bad(&|c| c.payload = 15).contains("--payload 15"));
    assert!(bad(&|c| c.payload = 65508).contains("16..=65507"));
    assert!(bad(&|c| c.bind = Some("[::1]:0".into())).contains("family"));
    assert!(bad(&|c| c.rt.cpus = Some(vec![7])).contains("CPU 7"));
    assert!(bad(&|c| c.rt.policy = rtlab_core::rt::Policy::Fifo).contains("--priority"));
    assert!(bad(&|c| c.count = None).contains("--duration or --count"));
    let r = reflect_cfg(Some(0));
    assert!(r.validate(&online).unwrap_err().to_string().contains("--drop-every 0"));
}

#[test]
fn planned_requests() {
    let mut c = ping_cfg("127.0.0.1:9");
    c.count = None;
    c.duration_ns = Some(20_000_000_000);
    assert_eq!(c.planned(), 20_000);
    c.count = Some(5);
    assert_eq!(c.planned(), 5);
    c.mode = PingMode::Pingpong;
    c.count = None;
    assert_eq!(c.planned(), 0);
}

/// A real run on loopback: a reflector thread and a pinger, with a known loss.
#[test]
fn loopback_run_counts_exactly_the_dropped_requests() {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let rstop = stop.clone();
    let r = std::thread::spawn(move || {
        reflect(&reflect_cfg(Some(50)), rstop, |a| tx.send(a.to_string()).unwrap(), |_| {}).unwrap()
    });
    let addr = rx.recv().unwrap();
    let cfg = ping_cfg(&addr);
    let out = ping(&cfg, Arc::new(AtomicBool::new(false)), |_, _| {}).unwrap();
    stop.store(true, Ordering::Relaxed);
    let refl = r.join().unwrap();
    let c = out.counts;
    // 200 slots, each sent or skipped (an overrun: the sender late past it, noise here)
    assert_eq!(c.sent + out.rtt.overruns, 200, "{c:?}");
    let dropped = c.sent / 50; // seqs 49, 99, 149, 199 of those sent
    assert_eq!(c.lost, dropped, "{c:?}");
    assert_eq!(c.samples, c.sent - dropped);
    assert_eq!((c.late, c.duplicates, c.malformed), (0, 0, 0));
    assert!(out.rtt.running.min > 0);
    assert_eq!(refl.counts.dropped, dropped);
    assert_eq!(refl.counts.runs.len(), 1);
    assert_eq!(refl.counts.runs[0].requests, c.sent);
    assert_eq!(refl.forward_lost, 0);
    assert!(refl.counts.hellos >= 1);
    let streams = out.streams(&cfg);
    assert_eq!(streams[0].stats.lost, Some(dropped));
    assert_eq!(streams[0].stats.count, c.sent - dropped);
    assert_eq!(streams[1].name, "ping.send_lateness");
    assert_eq!(streams[1].stats.count, c.sent);
    let rs = refl.streams(&reflect_cfg(Some(50)));
    assert_eq!(rs[0].stats.count, c.sent - dropped + refl.counts.hellos);
}

#[test]
fn pingpong_on_loopback() {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let rstop = stop.clone();
    let r = std::thread::spawn(move || {
        reflect(&reflect_cfg(None), rstop, |a| tx.send(a.to_string()).unwrap(), |_| {}).unwrap()
    });
    let mut cfg = ping_cfg(&rx.recv().unwrap());
    cfg.mode = PingMode::Pingpong;
    cfg.count = Some(2000);
    cfg.payload = 16;
    let out = ping(&cfg, Arc::new(AtomicBool::new(false)), |_, _| {}).unwrap();
    stop.store(true, Ordering::Relaxed);
    r.join().unwrap();
    assert_eq!((out.counts.sent, out.counts.samples, out.counts.lost), (2000, 2000, 0));
    assert_eq!(out.streams(&cfg).len(), 1);
}

#[test]
fn no_reflector_is_one_clear_error() {
    // a port nothing listens on: bind one, learn its number, close it
    let port = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut cfg = ping_cfg(&format!("127.0.0.1:{port}"));
    cfg.preflight_ns = 300_000_000;
    let e = ping(&cfg, Arc::new(AtomicBool::new(false)), |_, _| {}).err().unwrap().to_string();
    assert!(e.contains("no reflector answered") && e.contains("port unreachable"), "{e}");
}

#[test]
fn a_port_in_use_is_named() {
    let held = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut cfg = reflect_cfg(None);
    cfg.bind = held.local_addr().unwrap().to_string();
    let e =
        reflect(&cfg, Arc::new(AtomicBool::new(true)), |_| {}, |_| {}).err().unwrap().to_string();
    assert!(e.contains("already in use"), "{e}");
}
