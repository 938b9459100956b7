//! Running the UDP probe: `udp ping` (the client) and `udp reflect` (the far side).
//!
//! Contract: the configs are checked before anything touches the system; sockets are
//! created (inside a network namespace when asked: only a helper thread enters it),
//! bound only where told, and given their options before the measuring thread starts;
//! a knob the kernel refuses is an error, not a silent default. The measuring thread is
//! created with its policy, priority and CPU already set (`spawn_rt`), memory is locked
//! (guard, undone on return), and everything it records into is allocated before it
//! starts. A ping first checks that a reflector answers (hello datagrams, not counted),
//! so a wrong address is one clear error instead of a run of losses. Ctrl-C raises the
//! stop flag: what was measured is returned. Nothing here prints.

use super::link::UdpLink;
use super::ping::{PingMode, PingPlan, Pinger};
use super::reflect::{Action, ReflectCounts, ReflectLoop, Reflector};
use super::track::{Counts, Tracker};
use super::wire::{self, Kind};
use crate::timer::LoopEnd;
use rtlab_core::schema::Stream;
use rtlab_core::sink::{Recorder, RecorderConfig, Sink};
use rtlab_sys::memory::prefault_stack;
use rtlab_sys::net::{self as sysnet, AbsTimer};
use rtlab_sys::sched::{current_affinity, current_policy, spawn_rt, Policy, ThreadSpec};
use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

pub use super::config::*;
use super::open::{
    apply_socket, check_etf, detach, open_socket, preflight, stamp_device, AnyLink, OpenedPing,
};

/// What a ping run measured.
pub struct PingOutcome {
    pub run_id: u64,
    pub counts: Counts,
    pub rtt: Recorder,
    pub lateness: Recorder,
    pub end: LoopEnd,
    pub duration_ns: i64,
    pub socket: SocketReport,
    pub local_addr: String,
    pub policy_seen: (Option<Policy>, i32),
    pub cpus_seen: Vec<usize>,
    pub memory_lock: Option<Result<(), String>>,
    /// Requests whose fate the tracker remembers.
    pub ring_capacity: usize,
    /// The XDP path's facts (None: the socket path).
    pub xdp: Option<XdpReport>,
    /// The round trips' stages (`--timestamps`).
    pub stages: Option<StageOutcome>,
}

fn recorder(deadline_ns: i64, window_ns: i64, planned_span_ns: i64) -> Recorder {
    let window_capacity = ((planned_span_ns / window_ns.max(1)) as usize + 2).clamp(16, 1 << 16);
    Recorder::new(
        &RecorderConfig {
            deadline_ns,
            window_ns,
            window_capacity,
            max_samples: None,
            us_histogram_buckets: None,
            spike_threshold_ns: None,
        },
        None,
    )
}

/// The socket path of a ping: its settings, the kernel's stamps and launch times where
/// asked for, the preflight.
fn open_ping_socket(
    cfg: &UdpPingConfig,
    sock: UdpSocket,
    to: SocketAddr,
    run_id: u64,
    timer: AbsTimer,
) -> Result<OpenedPing, UdpError> {
    let socket = apply_socket(&sock, to.is_ipv6(), &cfg.socket)?;
    let local_addr = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
    // launch times need the launch stamps: software timestamps come with them
    let ts = cfg.timestamps.or(cfg.txtime_lead_ns.map(|_| Timestamps::Software));
    let stamps = match ts {
        None => None,
        Some(ts) => {
            let local =
                sock.local_addr().map_err(|e| UdpError::Invalid(format!("--to {to}: {e}")))?;
            Some(stamp_device(cfg.netns.as_deref(), local, ts)?)
        }
    };
    let tai_offset = match (cfg.txtime_lead_ns, &stamps) {
        (Some(_), Some((dev, _))) => {
            check_etf(cfg.netns.as_deref(), dev)?;
            rtlab_sys::stamp::enable_txtime(sock.as_raw_fd(), libc::CLOCK_TAI, true)
                .map_err(|e| UdpError::Invalid(format!("--txtime: {e}")))?;
            Some(rtlab_sys::stamp::tai_ns() - rtlab_sys::clock::monotonic_ns())
        }
        _ => None,
    };
    let enable = |tx: bool| {
        rtlab_sys::stamp::enable_software(sock.as_raw_fd(), tx)
            .map_err(|e| UdpError::Invalid(format!("--timestamps software: {e}")))
    };
    if stamps.is_some() {
        // rx stamps before the hellos: the kernel turns them on through a work item,
        // which has run by the first request; tx stamps after (they would wait on
        // the error queue)
        enable(false)?;
    }
    if cfg.preflight_ns > 0 {
        let launch = tai_offset.zip(cfg.txtime_lead_ns);
        preflight(&sock, run_id, cfg.payload, to, cfg.preflight_ns, launch)?;
    }
    if stamps.is_some() {
        enable(true)?;
    }
    let link = UdpLink { sock, timer, stamps: None, tai_offset };
    Ok((socket, local_addr, AnyLink::Socket(link), None, None, stamps))
}

/// A ping's recorders, sized for its span: the round trips (held to the deadline) and the
/// send lateness; with the kernel's stamps, the link's stage recorders too.
fn ping_recorders(
    cfg: &UdpPingConfig,
    outstanding: usize,
    link: &mut AnyLink,
    stamps: bool,
) -> (Recorder, Recorder) {
    let span = match (cfg.duration_ns, cfg.count) {
        (Some(d), _) => d,
        (None, Some(c)) if cfg.mode == PingMode::Periodic => c as i64 * cfg.period_ns,
        _ => 4096 * cfg.window_ns,
    };
    // a late send (the thread held off its CPU) is a spike as much as a slow round trip
    let rtt = recorder(cfg.deadline_ns, cfg.window_ns, span).with_hook(cfg.spike.as_ref());
    let lateness = recorder(i64::MAX, cfg.window_ns, span)
        .with_hook(cfg.spike.as_ref().map(|h| h.for_source(1)).as_ref());
    if let (AnyLink::Socket(l), true) = (link, stamps) {
        let window = cfg.window_ns;
        let launch = cfg.txtime_lead_ns.is_some();
        l.stamps =
            Some(Box::new(super::link::Stamps::new(cfg.payload, outstanding, launch, || {
                recorder(i64::MAX, window, span)
            })));
    }
    (rtt, lateness)
}

/// Run `udp ping`. `on_progress(sent, planned)` is called about every 100 ms from the
/// calling thread (never from the measuring thread).
pub fn ping(
    cfg: &UdpPingConfig,
    stop: Arc<AtomicBool>,
    mut on_progress: impl FnMut(u64, u64),
) -> Result<PingOutcome, UdpError> {
    let (online, _) = rtlab_sys::cpus::online_cpus(std::path::Path::new("/"));
    let (to, bind, policy) = cfg.validate(&online)?;
    let local = bind.unwrap_or_else(|| {
        if to.is_ipv4() {
            "0.0.0.0:0".parse().unwrap()
        } else {
            "[::]:0".parse().unwrap()
        }
    });
    let sock = open_socket(cfg.netns.as_deref(), local, Some(to), "--bind")?;
    let run_id = sysnet::random_u64();
    let timer = AbsTimer::new()?;
    let (socket, local_addr, mut link, steering, xdp_report, stamp_dev) = match &cfg.xdp {
        None => open_ping_socket(cfg, sock, to, run_id, timer)?,
        Some(x) => super::xdp::open::open_ping(cfg, x, sock, to, run_id, timer)?,
    };
    let (lock_guard, memory_lock) = crate::hold::lock_memory(cfg.rt.mlockall);

    // everything the loop touches, allocated now
    let outstanding = match cfg.mode {
        PingMode::Periodic => (cfg.loss_timeout_ns / cfg.period_ns) as usize + 1024,
        PingMode::Pingpong => 1024,
    };
    let mut tracker = Tracker::new(
        outstanding.min(1 << 22),
        cfg.loss_timeout_ns,
        cfg.deadline_ns,
        run_id,
        cfg.payload,
    );
    let ring_capacity = tracker.capacity();
    let (mut rtt, mut lateness) = ping_recorders(cfg, outstanding, &mut link, stamp_dev.is_some());
    let mut tx = vec![0u8; cfg.payload];
    wire::write(&mut tx, Kind::Request, run_id, 0, 0);
    wire::fill(&mut tx);
    let mut rx = vec![0u8; RX_BYTES];
    let plan = PingPlan {
        mode: cfg.mode,
        period_ns: cfg.period_ns,
        count: cfg.count,
        duration_ns: cfg.duration_ns,
        loss_timeout_ns: cfg.loss_timeout_ns,
        lead_ns: cfg.txtime_lead_ns.unwrap_or(0),
    };
    let progress = Arc::new(AtomicU64::new(0));
    let spec = ThreadSpec {
        name: "rtlab-udp-ping".into(),
        policy,
        priority: cfg.rt.priority,
        cpus: cfg.rt.cpu_of(0).map(|c| vec![c]),
        stack_bytes: STACK_BYTES,
    };
    let (stop_in, progress_in) = (stop.clone(), progress.clone());
    let period = cfg.period_ns;
    let mode = cfg.mode;
    let t0 = rtlab_sys::clock::monotonic_ns();
    let h = spawn_rt(&spec, move || {
        prefault_stack(STACK_BYTES / 4);
        let seen = (current_policy(), current_affinity());
        let mut link = link;
        // cost: this thread's counters right before its loop and right after it
        let cost = rtlab_sys::usage::begin("udp");
        // the first slot one period from now, so the thread is settled when it comes
        let start =
            rtlab_sys::clock::monotonic_ns() + if mode == PingMode::Periodic { period } else { 0 };
        rtt.origin_monotonic_ns = Some(start);
        lateness.origin_monotonic_ns = Some(start);
        let end = Pinger {
            link: &mut link,
            tracker: &mut tracker,
            tx: &mut tx,
            rx: &mut rx,
            run_id,
            rtt: &mut rtt,
            lateness: &mut lateness,
            stop: &stop_in,
            progress: &progress_in,
        }
        .run(&plan, start);
        cost.end();
        rtlab_sys::usage::set_messages("udp", tracker.counts.sent);
        let (xdp_seen, stamps) = match link {
            AnyLink::Xdp(l) => (Some((l.xsk.stats().rx_dropped, l.malformed_frames)), None),
            AnyLink::Socket(l) => (None, l.stamps),
        };
        (tracker.counts, rtt, lateness, end, (seen, xdp_seen, stamps))
    })?;
    let planned = cfg.planned();
    while !h.is_finished() {
        on_progress(progress.load(Ordering::Relaxed), planned);
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (counts, rtt, lateness, end, ((policy_seen, cpus_seen), xdp_seen, stamps)) =
        h.join().map_err(|_| UdpError::Invalid("the ping thread panicked".into()))?;
    let stages = match (stamps, stamp_dev) {
        (Some(stamps), Some((dev, offers))) => Some(StageOutcome { stamps, dev, offers }),
        _ => None,
    };
    on_progress(counts.sent, planned);
    drop(lock_guard);
    detach(steering);
    let xdp = xdp_report.map(|mut r| {
        if let Some((dropped, malformed)) = xdp_seen {
            (r.rx_dropped, r.malformed_frames) = (dropped, malformed);
        }
        r
    });
    Ok(PingOutcome {
        run_id,
        counts,
        rtt,
        lateness,
        end,
        duration_ns: rtlab_sys::clock::monotonic_ns() - t0,
        socket,
        local_addr,
        policy_seen,
        cpus_seen,
        memory_lock,
        ring_capacity,
        xdp,
        stages,
    })
}

fn socket_labels(labels: &mut BTreeMap<String, String>, s: &SocketReport) {
    let mut put = |k: &str, v: Option<i32>| {
        labels.insert(k.into(), v.map(|v| v.to_string()).unwrap_or_else(|| "unknown".into()));
    };
    put("so_priority", s.so_priority);
    put("tos", s.tos);
    put("busy_poll_us", s.busy_poll_us);
    put("rcvbuf", s.rcvbuf);
    put("sndbuf", s.sndbuf);
}

fn rt_labels(
    labels: &mut BTreeMap<String, String>,
    rt: &RtConfig,
    seen: &(Option<Policy>, i32),
    cpus: &[usize],
) {
    labels.insert("policy".into(), rt.policy.name().into());
    labels.insert("priority".into(), rt.priority.to_string());
    labels
        .insert("cpu".into(), rt.cpu_of(0).map(|c| c.to_string()).unwrap_or_else(|| "any".into()));
    labels.insert("policy_seen".into(), seen.0.map(|p| p.name()).unwrap_or("unknown").into());
    labels.insert("priority_seen".into(), seen.1.to_string());
    labels.insert("cpus_seen".into(), format!("{cpus:?}"));
}

/// The RTT definition, as DESIGN.md words it.
pub const RTT_DEFINITION: &str = "RTT = reply received - request sent, both on the client's CLOCK_MONOTONIC (S1: T2 - T1); first replies within the loss timeout only";

impl PingOutcome {
    /// `ping` (RTT, with every counter) and, in periodic mode, `ping.send_lateness`.
    pub fn streams(&self, cfg: &UdpPingConfig) -> Vec<Stream> {
        let c = &self.counts;
        let mut labels = BTreeMap::new();
        labels.insert("mode".into(), cfg.mode.name().into());
        labels.insert("to".into(), cfg.to.clone());
        labels.insert("from".into(), self.local_addr.clone());
        if let Some(ns) = &cfg.netns {
            labels.insert("netns".into(), ns.clone());
        }
        labels.insert("payload".into(), cfg.payload.to_string());
        if cfg.mode == PingMode::Periodic {
            labels.insert("period_ns".into(), cfg.period_ns.to_string());
        }
        labels.insert("loss_timeout_ns".into(), cfg.loss_timeout_ns.to_string());
        if let Some(lead) = cfg.txtime_lead_ns {
            // launch times: a request's send stamp is its slot, when it is to leave
            labels.insert("txtime_lead_ns".into(), lead.to_string());
        }
        labels.insert("run_id".into(), format!("{:016x}", self.run_id));
        labels.insert("sent".into(), c.sent.to_string());
        labels.insert("foreign".into(), c.foreign.to_string());
        labels.insert("stale".into(), c.stale.to_string());
        labels.insert("send_errors".into(), c.send_errors.to_string());
        labels.insert("receive_errors".into(), c.receive_errors.to_string());
        labels.insert("hello_replies".into(), c.hello_replies.to_string());
        labels.insert("ring".into(), self.ring_capacity.to_string());
        rt_labels(&mut labels, &cfg.rt, &self.policy_seen, &self.cpus_seen);
        socket_labels(&mut labels, &self.socket);
        super::xdp::path_labels(&mut labels, self.xdp.as_ref());
        let mut s = Stream::from_recorder("ping", "rtt", RTT_DEFINITION, labels.clone(), &self.rtt);
        s.stats.lost = Some(c.lost);
        s.stats.late = Some(c.late);
        s.stats.duplicates = Some(c.duplicates);
        s.stats.out_of_order = Some(c.out_of_order);
        s.stats.malformed = Some(c.malformed);
        if cfg.mode == PingMode::Pingpong {
            s.stats.overruns = None;
        }
        let mut out = vec![s];
        let launch = self.stages.as_ref().and_then(|s| s.stamps.launch.as_ref());
        if let (PingMode::Periodic, Some(launch), Some(st)) = (cfg.mode, launch, &self.stages) {
            // launch times: the send lateness is the launch's, the hand-off is its own stream
            let mut labels = labels.clone();
            labels.insert("txtime_lead_ns".into(), cfg.txtime_lead_ns.unwrap_or(0).to_string());
            labels.insert("launch_errors".into(), st.stamps.launch_errors.to_string());
            labels.insert("no_tx_stamp".into(), st.stamps.no_tx_stamp.to_string());
            for (name, what, def, r) in [
                ("ping.send_lateness", "send_lateness", "the request's driver tx software timestamp (its launch through the etf qdisc, CLOCK_REALTIME) - its slot on the absolute grid start + k*T: how far from its slot it really left", launch),
                ("ping.handoff_lateness", "handoff_lateness", "request handed to the kernel with SO_TXTIME - (its slot - the lead) (client CLOCK_MONOTONIC): the sender's own wake-up latency", &self.lateness),
            ] {
                let mut l = Stream::from_recorder(name, what, def, labels.clone(), r);
                l.deadline_ns = cfg.period_ns;
                l.stats.missed = None;
                l.stats.overruns = None;
                out.push(l);
            }
        } else if cfg.mode == PingMode::Periodic {
            let mut l = Stream::from_recorder(
                "ping.send_lateness",
                "send_lateness",
                "request sent - its slot on the absolute grid start + k*T (client CLOCK_MONOTONIC): the sender's own wake-up latency",
                labels.clone(),
                &self.lateness,
            );
            l.deadline_ns = cfg.period_ns;
            l.stats.missed = None;
            l.stats.overruns = None;
            out.push(l);
        }
        if let Some(st) = self.stages.as_ref().filter(|_| cfg.timestamps.is_some()) {
            let mut labels = labels.clone();
            labels.insert("timestamps".into(), "software".into());
            labels.insert("timestamps_dev".into(), st.dev.clone());
            labels.insert("timestamps_offered".into(), st.offers.clone());
            labels.insert("no_tx_stamp".into(), st.stamps.no_tx_stamp.to_string());
            labels.insert("no_rx_stamp".into(), st.stamps.no_rx_stamp.to_string());
            for (name, what, def, r) in [
                ("ping.tx_stack", "tx_stack", "the request's driver tx software timestamp - the user's CLOCK_REALTIME read right before send(): the sender's stack (syscall, UDP/IP, qdisc, driver)", &st.stamps.tx_stack),
                ("ping.wire", "wire", "the reply's rx software timestamp - the request's tx software timestamp (kernel CLOCK_REALTIME): the link both ways and the far side, its reflector included", &st.stamps.wire),
                ("ping.rx_wakeup", "rx_wakeup", "the user's CLOCK_REALTIME read when it took the reply - the reply's rx software timestamp: the receive stack and the pinger's wake-up (scheduler)", &st.stamps.rx_wakeup),
            ] {
                let mut s = Stream::from_recorder(name, what, def, labels.clone(), r);
                s.deadline_ns = 0;
                s.stats.missed = None;
                s.stats.overruns = None;
                out.push(s);
            }
        }
        out
    }
}

/// What a reflector saw.
pub struct ReflectOutcome {
    pub counts: ReflectCounts,
    pub forward_lost: u64,
    /// Reply sent - request received, on the reflector's clock.
    pub turnaround: Recorder,
    pub end: LoopEnd,
    pub duration_ns: i64,
    pub socket: SocketReport,
    pub local_addr: String,
    pub policy_seen: (Option<Policy>, i32),
    pub cpus_seen: Vec<usize>,
    pub memory_lock: Option<Result<(), String>>,
    /// The XDP path's facts (None: the socket path).
    pub xdp: Option<XdpReport>,
}

/// The reflector on the socket path: answer each request as it comes (non-blocking
/// receives, a poll of at most 100 ms between them to see the stop flag and the duration).
fn reflect_socket(
    sock: &UdpSocket,
    reflector: &mut Reflector,
    turnaround: &mut Recorder,
    buf: &mut [u8],
    l: &ReflectLoop,
) -> LoopEnd {
    let fd = sock.as_raw_fd();
    let mut index = 0u64;
    loop {
        if l.stop.load(Ordering::Relaxed) {
            break LoopEnd::Interrupted;
        }
        if matches!(l.count, Some(c) if reflector.counts.received >= c) {
            break LoopEnd::Count;
        }
        let now = rtlab_sys::clock::monotonic_ns();
        if matches!(l.duration, Some(d) if now - l.start >= d) {
            break LoopEnd::Duration;
        }
        match sock.recv_from(buf) {
            Ok((n, from)) => {
                let t_recv = rtlab_sys::clock::monotonic_ns();
                if let Action::Answer(len) = reflector.handle(buf, n) {
                    if sock.send_to(&buf[..len], from).is_err() {
                        reflector.counts.send_errors += 1;
                    }
                    let t_done = rtlab_sys::clock::monotonic_ns();
                    turnaround.record(index, t_recv - l.start, t_done - t_recv);
                    index += 1;
                }
                l.progress.store(reflector.counts.received, Ordering::Relaxed);
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::Interrupted =>
            {
                // wake at least every 100 ms to see the stop flag and the duration
                let left = l
                    .duration
                    .map(|d| ((l.start + d - now) / 1_000_000 + 1).clamp(1, 100) as i32)
                    .unwrap_or(100);
                sysnet::wait2(fd, -1, left);
            }
            Err(_) => {} // an ICMP error queued on the socket: nothing to answer
        }
    }
}

/// Run `udp reflect` until the stop flag, the duration or the count. `on_ready(addr)` is
/// called once the socket is bound (before any datagram is taken); `on_progress(received)`
/// about every 100 ms, from the calling thread.
pub fn reflect(
    cfg: &UdpReflectConfig,
    stop: Arc<AtomicBool>,
    on_ready: impl FnOnce(&str),
    mut on_progress: impl FnMut(u64),
) -> Result<ReflectOutcome, UdpError> {
    let (online, _) = rtlab_sys::cpus::online_cpus(std::path::Path::new("/"));
    let (bind, policy) = cfg.validate(&online)?;
    let sock = open_socket(cfg.netns.as_deref(), bind, None, "--bind")?;
    sock.set_nonblocking(true).map_err(|e| UdpError::Invalid(format!("--bind {bind}: {e}")))?;
    let local = sock.local_addr().map_err(|e| UdpError::Invalid(format!("--bind {bind}: {e}")))?;
    let local_addr = local.to_string();
    let (socket, xdp_side) = match (&cfg.xdp, local) {
        (None, _) => (apply_socket(&sock, bind.is_ipv6(), &cfg.socket)?, None),
        (Some(x), SocketAddr::V4(l4)) => {
            // the largest payload one frame of the device carries is checked per frame
            let side = super::xdp::open::open(cfg.netns.as_deref(), l4, x, &cfg.socket, 16)?;
            let report = SocketReport {
                so_priority: sysnet::priority(side.xsk.fd()),
                busy_poll_us: cfg.socket.busy_poll_us.map(|u| u as i32),
                ..Default::default()
            };
            (report, Some(side))
        }
        (Some(_), a) => {
            return Err(UdpError::Invalid(format!("--bind {a}: --xdp builds IPv4 frames only")))
        }
    };
    let busy = cfg.socket.busy_poll_us.is_some();
    let (mut xsk, steering, xdp_report) = match xdp_side {
        Some(x) => (Some(x.xsk), Some((x.steering, x.journaled)), Some(x.report)),
        None => (None, None, None),
    };
    let (lock_guard, memory_lock) = crate::hold::lock_memory(cfg.rt.mlockall);
    let mut turnaround =
        recorder(i64::MAX, cfg.window_ns, cfg.duration_ns.unwrap_or(4096 * cfg.window_ns))
            .with_hook(cfg.spike.as_ref());
    let mut reflector = Reflector::new(cfg.drop_every);
    let mut buf = vec![0u8; RX_BYTES];
    let progress = Arc::new(AtomicU64::new(0));
    let spec = ThreadSpec {
        name: "rtlab-udp-refl".into(),
        policy,
        priority: cfg.rt.priority,
        cpus: cfg.rt.cpu_of(0).map(|c| vec![c]),
        stack_bytes: STACK_BYTES,
    };
    let (stop_in, progress_in) = (stop.clone(), progress.clone());
    let (duration, count) = (cfg.duration_ns, cfg.count);
    let cost_window = cfg.cost_window.clone();
    let t0 = rtlab_sys::clock::monotonic_ns();
    let h = spawn_rt(&spec, move || {
        prefault_stack(STACK_BYTES / 4);
        let seen = (current_policy(), current_affinity());
        // cost: this thread's counters right before its loop and right after it
        let cost = rtlab_sys::usage::begin(cost_window.as_deref().unwrap_or("reflect"));
        let start = rtlab_sys::clock::monotonic_ns();
        turnaround.origin_monotonic_ns = Some(start);
        let mut xdp_seen = None;
        let l =
            ReflectLoop { start, duration, count, busy, stop: &stop_in, progress: &progress_in };
        let end = if let Some(xsk) = xsk.as_mut() {
            let mut malformed_frames = 0u64;
            let end = super::xdp::reflect::reflect(
                xsk,
                &mut reflector,
                &mut turnaround,
                &l,
                &mut malformed_frames,
            );
            xdp_seen = Some((xsk.stats().rx_dropped, malformed_frames));
            end
        } else {
            reflect_socket(&sock, &mut reflector, &mut turnaround, &mut buf, &l)
        };
        drop(xsk);
        cost.end();
        if cost_window.is_none() {
            rtlab_sys::usage::set_messages("reflect", reflector.counts.received);
        }
        (reflector, turnaround, end, (seen, xdp_seen))
    })?;
    on_ready(&local_addr);
    while !h.is_finished() {
        on_progress(progress.load(Ordering::Relaxed));
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (reflector, turnaround, end, ((policy_seen, cpus_seen), xdp_seen)) =
        h.join().map_err(|_| UdpError::Invalid("the reflector thread panicked".into()))?;
    on_progress(reflector.counts.received);
    drop(lock_guard);
    detach(steering);
    let xdp = xdp_report.map(|mut r| {
        if let Some((dropped, malformed)) = xdp_seen {
            (r.rx_dropped, r.malformed_frames) = (dropped, malformed);
        }
        r
    });
    let forward_lost = reflector.forward_lost();
    Ok(ReflectOutcome {
        counts: reflector.counts,
        forward_lost,
        turnaround,
        end,
        duration_ns: rtlab_sys::clock::monotonic_ns() - t0,
        socket,
        local_addr,
        policy_seen,
        cpus_seen,
        memory_lock,
        xdp,
    })
}

impl ReflectOutcome {
    /// One stream, `reflector`: the turnaround samples and what the forward path showed.
    pub fn streams(&self, cfg: &UdpReflectConfig) -> Vec<Stream> {
        let c = &self.counts;
        let mut labels = BTreeMap::new();
        labels.insert("bind".into(), self.local_addr.clone());
        if let Some(ns) = &cfg.netns {
            labels.insert("netns".into(), ns.clone());
        }
        for (k, v) in [
            ("received", c.received),
            ("answered", c.answered),
            ("hellos", c.hellos),
            ("dropped_on_purpose", c.dropped),
            ("foreign", c.foreign),
            ("send_errors", c.send_errors),
            ("runs", c.runs.len() as u64),
            ("other_runs_requests", c.other_runs_requests),
        ] {
            labels.insert(k.into(), v.to_string());
        }
        if let Some(n) = cfg.drop_every {
            labels.insert("drop_every".into(), n.to_string());
        }
        rt_labels(&mut labels, &cfg.rt, &self.policy_seen, &self.cpus_seen);
        socket_labels(&mut labels, &self.socket);
        super::xdp::path_labels(&mut labels, self.xdp.as_ref());
        let mut s = Stream::from_recorder(
            "reflector",
            "turnaround",
            "reply sent - request received, on the reflector's CLOCK_MONOTONIC (the reflector's share of the RTT); lost = requests never received below the highest sequence number of each run (forward path)",
            labels,
            &self.turnaround,
        );
        s.deadline_ns = 0;
        s.stats.missed = None;
        s.stats.overruns = None;
        s.stats.lost = Some(self.forward_lost);
        s.stats.duplicates = Some(c.runs.iter().map(|r| r.duplicates).sum());
        s.stats.out_of_order = Some(c.runs.iter().map(|r| r.out_of_order).sum());
        s.stats.malformed = Some(c.malformed + c.foreign);
        vec![s]
    }
}

#[cfg(test)]
mod tests;
