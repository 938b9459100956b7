//! The udp probe (`rtlab udp ping`, scenario `kind = "udp"`): periodic or ping-pong round
//! trips to a reflector, every datagram accounted for (S1).
//!
//! Contract: [`UdpProbeConfig`] is the one configuration of the ping (defaults shared by
//! the CLI and scenarios). With a pair in the context (a scenario case, `udp ping --pair`)
//! the reflector runs in this process inside namespace `b` and the ping goes from `a`;
//! else the ping goes to `to`.

use crate::config::{
    at_least_one, positive, ConfigError, Dur, NumberOrText, RtFields, Size, Validate,
};
use crate::document::{new_document, process_warnings};
use crate::error::LabError;
use crate::far::protocol::{Reflected, Request};
use crate::far::run::{with_port, FarRun};
use crate::far::FarSpec;
use crate::probe::{Context, Plan, Probe, ProbeKind};
use rtlab_core::rt::RtSettings;
use rtlab_core::schema::ResultDocument;
use rtlab_core::warnings::{Warn, MIN_SAMPLES_FOR_TAIL};
use rtlab_engines::netns::NetnsPair;
use rtlab_engines::udp::run::{
    self as udp_run, PingOutcome, ReflectOutcome, SocketConfig, Timestamps, UdpError,
};
/// The udp engine's words the commands' flags and headlines use.
pub use rtlab_engines::udp::{
    ping::PingMode,
    run::{UdpPingConfig, UdpReflectConfig, XdpConfig},
};
use rtlab_report::summary::udp::{PingCounts, PingSummary, ReflectorCounts, RunCounts, SocketSeen};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How long it measures when neither `duration` nor `count` is given.
pub const DEFAULT_DURATION: Dur = Dur::s(20);

pub const KIND: ProbeKind = ProbeKind {
    kind: "udp",
    about: "UDP round trips to a reflector (S1): deadlines, losses, sequence accounting",
    parse: crate::probe::parse_as::<UdpProbeConfig>,
};

/// The streams of a ping run, in the order the spike hook's sources number them.
pub const PING_SOURCES: [&str; 3] = ["ping", "ping.send_lateness", "reflector"];
/// Thread names of a ping and its in-process reflector (what the spike tracer explains).
pub const PAIR_THREADS: &str = "rtlab-udp-ping|rtlab-udp-refl";

/// `periodic` (an absolute grid, S1) or `pingpong` (closed loop, like sockperf).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UdpMode {
    Periodic,
    Pingpong,
}

/// The path the datagrams take: the kernel's socket, or AF_XDP past the stack.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UdpPath {
    #[default]
    Socket,
    Xdp,
}

/// Where the XDP program is attached: in the driver where it takes it (`auto`), or on the
/// kernel's generic path (`generic`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum XdpAttach {
    #[default]
    Auto,
    Generic,
}

/// Socket options (both sides).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SocketFields {
    /// SO_PRIORITY: 0-6, above 6 as root, or an htb class id like "1:10".
    pub so_priority: Option<PriorityValue>,
    /// IP_TOS / IPV6_TCLASS byte ("0xb8" or 184).
    pub tos: Option<PriorityValue>,
    /// SO_BUSY_POLL in µs.
    pub busy_poll: Option<u32>,
    pub rcvbuf: Option<Size>,
    pub sndbuf: Option<Size>,
}

/// A number written in decimal, `0x` hex, or as an htb class `MAJOR:MINOR` (hex).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct PriorityValue(pub u32);

impl<'de> Deserialize<'de> for PriorityValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = match NumberOrText::deserialize(d)? {
            NumberOrText::Number(n) => u32::try_from(n).map_err(|_| format!("{n}: out of range")),
            NumberOrText::Text(s) => number(&s),
        };
        v.map(PriorityValue).map_err(serde::de::Error::custom)
    }
}

/// Decimal, 0x hex, or an htb class id MAJOR:MINOR (hex).
pub fn number(v: &str) -> Result<u32, String> {
    let bad =
        || format!("'{v}': not a number (accepted: decimal, 0x hex, or an htb class id like 1:10)");
    let v = v.trim();
    if let Some((maj, min)) = v.split_once(':') {
        let maj = u32::from_str_radix(maj, 16).map_err(|_| bad())?;
        let min = u32::from_str_radix(min, 16).map_err(|_| bad())?;
        if maj > 0xffff || min > 0xffff {
            return Err(bad());
        }
        return Ok((maj << 16) | min);
    }
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).map_err(|_| bad()),
        None => v.parse::<u32>().map_err(|_| bad()),
    }
}

impl SocketFields {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(PriorityValue(t)) = self.tos.filter(|t| t.0 > 255) {
            return Err(ConfigError::new("tos", format!("{t}: not a byte, 0..=255")));
        }
        for (f, v) in [("rcvbuf", self.rcvbuf), ("sndbuf", self.sndbuf)] {
            if matches!(v, Some(Size(n)) if n == 0 || n > i32::MAX as u64) {
                return Err(ConfigError::new(f, "out of range (1 B .. 2 GiB)"));
            }
        }
        Ok(())
    }

    pub fn socket(&self) -> SocketConfig {
        SocketConfig {
            so_priority: self.so_priority.map(|p| p.0),
            tos: self.tos.map(|t| t.0 as u8),
            busy_poll_us: self.busy_poll,
            rcvbuf: self.rcvbuf.map(|s| s.0 as u32),
            sndbuf: self.sndbuf.map(|s| s.0 as u32),
        }
    }
}

/// The ping's configuration (flags and `[[probe]]` keys have these names).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UdpProbeConfig {
    /// The reflector, IP:PORT (a scenario case without it gets two namespaces).
    pub to: Option<String>,
    /// Local address to send from.
    pub bind: Option<String>,
    /// Send from inside this network namespace.
    pub netns: Option<String>,
    /// The reflector on a far side started here: `ssh:[USER@]HOST[:PORT]` or `netns:NAME`.
    pub far: Option<FarSpec>,
    pub mode: UdpMode,
    /// Send period (periodic mode).
    pub period: Dur,
    /// UDP payload, 16 B to 65507 B.
    pub payload: Size,
    /// RTTs above this are missed deadlines (default: the period; pingpong: 1 ms).
    pub deadline: Option<Dur>,
    /// No reply within this is a loss; a reply after it is late.
    pub loss_timeout: Dur,
    /// How long to send (20 s when neither this nor `count` is given).
    pub duration: Option<Dur>,
    /// Requests to send (slots: a skipped slot counts).
    pub count: Option<u64>,
    pub window: Dur,
    /// Check first that a reflector answers.
    pub preflight: bool,
    /// `socket` or `xdp` (both ends: the pair's or far side's reflector too).
    pub path: UdpPath,
    /// With `path = "xdp"`: where the program is attached.
    pub xdp_attach: XdpAttach,
    /// Split each round trip into stages from the kernel's timestamps (`software`).
    pub timestamps: Option<Timestamps>,
    /// Launch-time sending: hand each request to the kernel this long before its slot
    /// (SO_TXTIME through an etf qdisc on the device).
    pub txtime: Option<Dur>,
    #[serde(flatten)]
    pub socket: SocketFields,
    #[serde(flatten)]
    pub rt: RtFields,
}

impl Default for UdpProbeConfig {
    fn default() -> Self {
        UdpProbeConfig {
            to: None,
            bind: None,
            netns: None,
            far: None,
            mode: UdpMode::Periodic,
            period: Dur::ms(1),
            payload: Size(500),
            deadline: None,
            loss_timeout: Dur::ms(500),
            duration: None,
            count: None,
            window: Dur::s(1),
            preflight: true,
            path: UdpPath::Socket,
            xdp_attach: XdpAttach::Auto,
            timestamps: None,
            txtime: None,
            socket: SocketFields::default(),
            rt: RtFields::default(),
        }
    }
}

/// On the command line the ping runs SCHED_FIFO 80 with memory locked.
pub fn default_rt() -> RtSettings {
    RtSettings::fifo80()
}

impl Validate for UdpProbeConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        positive("period", Some(self.period))?;
        positive("deadline", self.deadline)?;
        positive("loss_timeout", Some(self.loss_timeout))?;
        positive("duration", self.duration)?;
        positive("window", Some(self.window))?;
        at_least_one("count", self.count)?;
        if !(16..=65507).contains(&self.payload.0) {
            return Err(ConfigError::new(
                "payload",
                format!("{} bytes is outside 16..=65507 (a UDP datagram)", self.payload.0),
            ));
        }
        if self.far.is_some() && self.to.is_some() {
            return Err(ConfigError::new(
                "far",
                "and --to: give one (the far side's reflector, or a reflector already running)",
            ));
        }
        for (f, a) in [("to", &self.to), ("bind", &self.bind)] {
            if let Some(a) = a {
                // the engine's own check and words ("'X': port 0 ..."), without its flag
                udp_run::parse_addr("", a, f == "bind")
                    .map_err(|e| ConfigError::new(f, e.to_string().trim_start()))?;
            }
        }
        self.socket.validate()
    }
}

impl UdpProbeConfig {
    /// The engine's ping configuration under `rt`.
    pub fn engine(&self, rt: &RtSettings) -> Result<UdpPingConfig, ConfigError> {
        rt.check().map_err(|m| ConfigError::new("priority", m))?;
        let mode = match self.mode {
            UdpMode::Periodic => PingMode::Periodic,
            UdpMode::Pingpong => PingMode::Pingpong,
        };
        let duration_ns = crate::probe::run_length(self.duration, self.count, DEFAULT_DURATION);
        Ok(UdpPingConfig {
            to: self.to.clone().unwrap_or_default(),
            bind: self.bind.clone(),
            netns: self.netns.clone(),
            mode,
            period_ns: self.period.0,
            payload: self.payload.0 as usize,
            deadline_ns: self.deadline.map(|d| d.0).unwrap_or(match mode {
                PingMode::Periodic => self.period.0,
                PingMode::Pingpong => 1_000_000,
            }),
            loss_timeout_ns: self.loss_timeout.0,
            duration_ns,
            count: self.count,
            window_ns: self.window.0,
            rt: RtSettings { cpus: rt.cpu_of(0).map(|c| vec![c]), ..rt.clone() },
            socket: self.socket.socket(),
            preflight_ns: if self.preflight { 2_000_000_000 } else { 0 },
            xdp: (self.path == UdpPath::Xdp).then(|| XdpConfig {
                generic: self.xdp_attach == XdpAttach::Generic,
                journal: Some(crate::guard::xdp_journal()),
            }),
            timestamps: self.timestamps,
            txtime_lead_ns: self.txtime.map(|d| d.0),
            spike: None,
        })
    }
}

/// What one measured ping produced.
pub struct PingRun {
    pub doc: ResultDocument,
    pub cfg: UdpPingConfig,
    pub outcome: PingOutcome,
    pub reflected: Option<ReflectOutcome>,
    /// `tc -s qdisc` of the client's veth end when there was a bottleneck.
    pub qdisc: Option<String>,
}

/// Measure: with a pair in the context, the reflector in side b and the ping from side a;
/// else ping `to`.
pub fn measure(cfg: &UdpProbeConfig, ctx: &mut Context<'_>) -> Result<PingRun, LabError> {
    crate::cost::before_case();
    let rt = cfg.rt.over(&ctx.rt);
    let mut engine = cfg.engine(&rt)?;
    // with a far side, the case's pair (far = "pair") only places this side in its side a
    let pair = ctx.pair.filter(|_| cfg.far.is_none());
    if let (Some(p), true) = (ctx.pair, cfg.far.is_some()) {
        engine.netns = Some(p.ns_a.clone());
    }
    let mut far = match &cfg.far {
        Some(spec) => Some(far_reflector(spec, &mut engine, ctx)?),
        None => None,
    };
    if let Some(p) = pair {
        engine.netns = Some(p.ns_a.clone());
        engine.to = format!("{}:9000", p.ip_b);
    } else if engine.to.is_empty() {
        return Err(ConfigError::new("to", "no reflector given (IP:PORT)").into());
    }
    let online = crate::host::online_cpus().0;
    engine.validate(&online).map_err(udp_error)?;
    let mut ev = ctx.evidence.clone();
    ev.window_ns = engine.window_ns;
    ev.victim = if pair.is_some() { PAIR_THREADS } else { "rtlab-udp-ping" }.into();
    ev.cpus = engine.rt.cpu_of(0).into_iter().collect();
    ev.sources = PING_SOURCES.iter().map(|s| s.to_string()).collect();
    ev.planned =
        Some(std::time::Duration::from_nanos(Probe::plan(cfg).estimate_ns().max(0) as u64));
    let evidence = crate::evidence::EvidenceRun::start(crate::host::host(), &ev)?;
    engine.spike = evidence.hook();
    let env = rtlab_sys::env::detect(std::path::Path::new("/"));
    let started = std::time::SystemTime::now();
    let mut measured = ping_with_reflector(&engine, pair, ctx);
    if let (Some(f), Ok(m)) = (&far, &mut measured) {
        // the far reflector's turnaround, labelled with its host
        let r: Result<Reflected, _> =
            f.link().ask(Request::StopReflect, crate::far::link::REQUEST_TIMEOUT);
        match r {
            Ok(r) => {
                m.0.extend(r.streams);
                if let Some(w) = r.cost {
                    crate::cost::far_window(w);
                }
            }
            Err(e) => {
                if let Some(f) = far.as_mut() {
                    f.lost = Some(e.to_string());
                    f.notes.push(format!("far reflector: {e}"));
                }
            }
        }
    }
    let streams = measured.as_ref().map(|r| r.0.clone()).unwrap_or_default();
    let evidence = evidence.finish(&streams);
    let (streams, outcome, reflected, reflect_cfg) = measured?;
    let qdisc = pair.filter(|p| p.config.rate_bps.is_some()).map(|p| p.qdisc_stats());
    let config = serde_json::json!({
        "role": "ping",
        "ping": engine,
        "pair": pair.map(|p| &p.config),
        "reflect": reflect_cfg,
    });
    let mut doc = new_document("udp", started, env, config);
    doc.far = far.map(FarRun::finish);
    doc.duration_ns = outcome.duration_ns;
    doc.interrupted = outcome.end == rtlab_engines::timer::LoopEnd::Interrupted;
    doc.environment.memory_locked = matches!(outcome.memory_lock, Some(Ok(())));
    doc.streams = streams;
    doc.evidence = Some(evidence);
    let warns = ping_warnings(&doc, &engine, &outcome, ctx.mlockall_off_by_profile);
    doc.warnings =
        crate::document::with_machine_state(warns.iter().map(|w| w.to_warning()).collect());
    if let Some(w) = doc.far.as_ref().and_then(|f| f.warning()) {
        doc.warnings.push(w);
    }
    crate::cost::attach(&mut doc);
    Ok(PingRun { doc, cfg: engine, outcome, reflected, qdisc })
}

/// The far side's reflector, started through its agent on the engine's socket settings;
/// the engine then pings the address it answers on.
fn far_reflector<'a>(
    spec: &crate::far::FarSpec,
    engine: &mut UdpPingConfig,
    ctx: &mut Context<'a>,
) -> Result<FarRun<'a>, LabError> {
    let far_rt = RtSettings { cpus: None, ..engine.rt.clone() };
    let window = ctx.evidence.counters.then_some(engine.window_ns);
    let f = FarRun::start(ctx.far, spec, engine.netns.as_deref(), false, &far_rt, &[], window)?;
    let rc = UdpReflectConfig {
        bind: with_port(&f.far, 0),
        netns: None,
        drop_every: None,
        duration_ns: None,
        count: None,
        window_ns: engine.window_ns,
        rt: far_rt,
        socket: engine.socket.clone(),
        cost_window: None,
        xdp: engine.xdp.clone(),
        spike: None,
    };
    let addr: String =
        f.link().ask(Request::Reflect { config: rc }, crate::far::link::REQUEST_TIMEOUT)?;
    engine.to = addr;
    Ok(f)
}

/// What weakens a ping's figures: its sockets and memory, too few samples, foreign
/// datagrams, fragments, losses, a late sender, an interruption.
fn ping_warnings(
    doc: &ResultDocument,
    engine: &UdpPingConfig,
    outcome: &PingOutcome,
    mlockall_off_by_profile: bool,
) -> Vec<Warn> {
    let c = &outcome.counts;
    let mut warns = socket_warnings(
        doc,
        &outcome.memory_lock,
        &engine.rt,
        &engine.socket,
        mlockall_off_by_profile,
        engine.xdp.is_some(),
    );
    if c.samples < MIN_SAMPLES_FOR_TAIL {
        warns.push(Warn::RunTooShort { samples: c.samples, wanted: MIN_SAMPLES_FOR_TAIL });
    }
    if c.malformed > 0 {
        warns.push(Warn::UdpForeignDatagrams { count: c.malformed });
    }
    if engine.payload > 1472 {
        warns.push(Warn::UdpFragmented { payload: engine.payload });
    }
    if c.lost > 0 {
        warns.push(Warn::UdpPacketLoss { lost: c.lost, sent: c.sent });
    }
    if engine.mode == PingMode::Periodic && outcome.rtt.overruns > 0 {
        warns.push(Warn::UdpSenderLate {
            overruns: outcome.rtt.overruns,
            max_late_ns: outcome.lateness.running.max,
        });
    }
    if doc.interrupted {
        warns.push(Warn::Interrupted);
    }
    warns
}

type Pinged = (
    Vec<rtlab_core::schema::Stream>,
    PingOutcome,
    Option<ReflectOutcome>,
    Option<UdpReflectConfig>,
);

fn ping_with_reflector(
    cfg: &UdpPingConfig,
    pair: Option<&NetnsPair>,
    ctx: &mut Context<'_>,
) -> Result<Pinged, LabError> {
    let mut reflector = None;
    let reflector_stop = Arc::new(AtomicBool::new(false));
    let mut reflect_cfg = None;
    if let Some(p) = pair {
        let rc = UdpReflectConfig {
            bind: cfg.to.clone(),
            netns: Some(p.ns_b.clone()),
            drop_every: None,
            duration_ns: None,
            count: None,
            window_ns: cfg.window_ns,
            rt: cfg.rt.clone(),
            socket: cfg.socket.clone(),
            // in this process: one window with the ping (its threads are this process's)
            cost_window: Some("udp".into()),
            xdp: cfg.xdp.clone(),
            // the reflector of the pair is in this process: its turnaround counts too
            spike: cfg.spike.as_ref().map(|h| h.for_source(2)),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let (rs, rcc) = (reflector_stop.clone(), rc.clone());
        reflector = Some(std::thread::spawn(move || {
            udp_run::reflect(&rcc, rs, |addr| drop(tx.send(Ok(addr.to_string()))), |_| {})
                .inspect_err(|e| {
                    // the pinger waits for this: an error before binding ends the wait too
                    let _ = tx.send(Err(e.to_string()));
                })
        }));
        match rx.recv() {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(LabError::Failed(format!("--pair reflector: {e}"))),
            Err(_) => return Err(LabError::failed("--pair reflector: ended before listening")),
        }
        reflect_cfg = Some(rc);
    }
    let progress = &mut *ctx.progress;
    let outcome = udp_run::ping(cfg, ctx.stop.clone(), progress);
    reflector_stop.store(true, Ordering::Relaxed);
    let reflected: Option<ReflectOutcome> =
        reflector.and_then(|h| h.join().ok()).and_then(|r| r.ok());
    let outcome = outcome.map_err(udp_error)?;
    let mut streams = outcome.streams(cfg);
    if let (Some(r), Some(rc)) = (&reflected, &reflect_cfg) {
        streams.extend(r.streams(rc));
    }
    Ok((streams, outcome, reflected, reflect_cfg))
}

/// An engine error as a lab error (a refused priority is a missing privilege).
pub fn udp_error(e: UdpError) -> LabError {
    match e {
        UdpError::Sys(s) => LabError::from_sys(s),
        other => LabError::failed(other),
    }
}

/// A reflector by hand (`rtlab udp reflect`): what it counted and its result document.
pub struct ReflectRun {
    pub doc: ResultDocument,
    pub outcome: ReflectOutcome,
}

/// Why a reflector by hand did not run: its evidence could not start, or the engine refused.
#[derive(Debug, thiserror::Error)]
pub enum ReflectError {
    #[error(transparent)]
    Lab(#[from] LabError),
    #[error(transparent)]
    Udp(#[from] UdpError),
}

/// Run a reflector by hand until `stop` (or its duration or count) with the evidence `ev`
/// around it (its window, thread, CPU and sources filled in here), and build its result
/// document; `on_listening(addr)` once the socket is bound. Ctrl-C is a reflector's normal
/// end: the document is not marked interrupted.
pub fn reflect(
    cfg: &mut UdpReflectConfig,
    mut ev: crate::evidence::EvidenceOptions,
    stop: Arc<AtomicBool>,
    on_listening: impl FnOnce(&str),
) -> Result<ReflectRun, ReflectError> {
    crate::cost::before_case();
    ev.window_ns = cfg.window_ns;
    ev.victim = "rtlab-udp-refl".into();
    ev.cpus = cfg.rt.cpu_of(0).into_iter().collect();
    ev.planned = cfg.duration_ns.map(|d| std::time::Duration::from_nanos(d as u64));
    ev.sources = vec!["reflector".into()];
    // the tracer's tracefs changes are journaled and undone in `finish` (or on drop)
    let evidence = crate::evidence::EvidenceRun::start(crate::host::host(), &ev)?;
    cfg.spike = evidence.hook();
    let started = std::time::SystemTime::now();
    let env = rtlab_sys::env::detect(std::path::Path::new("/"));
    let outcome = udp_run::reflect(cfg, stop, on_listening, |_| {})?;
    let mut doc =
        new_document("udp", started, env, serde_json::json!({ "role": "reflect", "reflect": cfg }));
    doc.duration_ns = outcome.duration_ns;
    doc.interrupted = false; // a reflector runs until told to stop: Ctrl-C is its normal end
    doc.environment.memory_locked = matches!(outcome.memory_lock, Some(Ok(())));
    doc.streams = outcome.streams(cfg);
    doc.evidence = Some(evidence.finish(&doc.streams));
    let mut warns =
        socket_warnings(&doc, &outcome.memory_lock, &cfg.rt, &cfg.socket, false, cfg.xdp.is_some());
    if outcome.counts.malformed + outcome.counts.foreign > 0 {
        warns.push(Warn::UdpForeignDatagrams {
            count: outcome.counts.malformed + outcome.counts.foreign,
        });
    }
    doc.warnings = warns.iter().map(|w| w.to_warning()).collect();
    crate::cost::attach(&mut doc);
    Ok(ReflectRun { doc, outcome })
}

/// What a reflector counted, as its report shows it.
pub fn reflector_counts(o: &ReflectOutcome) -> ReflectorCounts {
    let c = &o.counts;
    ReflectorCounts {
        local_addr: o.local_addr.clone(),
        received: c.received,
        answered: c.answered,
        hellos: c.hellos,
        dropped: c.dropped,
        malformed: c.malformed,
        foreign: c.foreign,
        send_errors: c.send_errors,
        runs: c
            .runs
            .iter()
            .map(|r| RunCounts {
                run_id: r.run_id,
                requests: r.requests,
                answered: r.answered,
                dropped: r.dropped,
                forward_lost: r.forward_lost(),
                duplicates: r.duplicates,
                out_of_order: r.out_of_order,
                highest_seq: r.highest_seq,
            })
            .collect(),
    }
}

/// A ping run as its report shows it (rendered by [`rtlab_report::summary::udp`]).
pub fn ping_summary(run: &PingRun) -> PingSummary<'_> {
    let (o, c) = (&run.outcome, &run.outcome.counts);
    PingSummary {
        doc: &run.doc,
        rtt_definition: udp_run::RTT_DEFINITION,
        deadline_ns: run.cfg.deadline_ns,
        loss_timeout_ns: run.cfg.loss_timeout_ns,
        overruns: (run.cfg.mode == PingMode::Periodic).then_some(o.rtt.overruns),
        counts: PingCounts {
            sent: c.sent,
            samples: c.samples,
            missed: c.missed,
            lost: c.lost,
            late: c.late,
            duplicates: c.duplicates,
            out_of_order: c.out_of_order,
            malformed: c.malformed,
            stale: c.stale,
            send_errors: c.send_errors,
            receive_errors: c.receive_errors,
        },
        socket: SocketSeen {
            local_addr: o.local_addr.clone(),
            so_priority: o.socket.so_priority,
            tos: o.socket.tos,
            busy_poll_us: o.socket.busy_poll_us,
            rcvbuf: o.socket.rcvbuf,
            sndbuf: o.socket.sndbuf,
            policy: o.policy_seen.0.map(|p| p.name()),
            priority: o.policy_seen.1,
            cpus: o.cpus_seen.clone(),
        },
        reflector: run.reflected.as_ref().map(reflector_counts),
        qdisc: run.qdisc.as_deref(),
    }
}

/// The shared warnings plus the socket's (busy polling that the kernel does not do).
pub fn socket_warnings(
    doc: &ResultDocument,
    memory_lock: &Option<Result<(), String>>,
    rt: &RtSettings,
    socket: &SocketConfig,
    mlockall_off_by_profile: bool,
    xdp: bool,
) -> Vec<Warn> {
    let mut w = process_warnings(
        &doc.environment,
        memory_lock,
        !rt.policy.is_realtime(),
        mlockall_off_by_profile,
    );
    let busy = matches!(socket.busy_poll_us, Some(us) if us > 0);
    // the XDP path's busy poll spins on its ring: a real-time thread that never sleeps meets
    // RT throttling (BENCHMARKS.md "Socket vs XDP": 50 ms stops, once a second)
    match doc.environment.sched_rt_runtime_us {
        Some(r) if busy && xdp && r >= 0 && rt.policy.is_realtime() => {
            w.push(Warn::RtThrottling { runtime_us: r })
        }
        _ => {}
    }
    if busy && !xdp {
        let global = std::fs::read_to_string("/proc/sys/net/core/busy_poll")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok());
        if global == Some(0) {
            w.push(Warn::UdpBusyPollInactive);
        }
    }
    w
}

impl Probe for UdpProbeConfig {
    fn kind(&self) -> &'static str {
        "udp"
    }
    fn config(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
    fn plan(&self) -> Plan {
        let duration_ns = crate::probe::run_length(self.duration, self.count, DEFAULT_DURATION);
        // pingpong is as fast as the round trips go: its length is its duration or count
        Plan { duration_ns, count: self.count, period_ns: self.period.0, sweep: 1 }
    }
    fn scale(&mut self, factor: f64, floor: u64) -> Option<String> {
        let p = self.period.0;
        crate::probe::scale_length(&mut self.duration, &mut self.count, p, factor, floor)
    }
    fn needs_pair(&self) -> bool {
        (self.to.is_none() && self.far.is_none()) || self.far == Some(FarSpec::Pair)
    }
    fn near_netns(&self) -> Option<&str> {
        self.netns.as_deref()
    }
    fn far(&self) -> Option<&FarSpec> {
        self.far.as_ref()
    }
    fn set_far(&mut self, far: &FarSpec) -> bool {
        if self.to.is_none() && self.far.is_none() {
            self.far = Some(far.clone());
        }
        true
    }
    fn rt(&self, base: &RtSettings) -> RtSettings {
        self.rt.over(base)
    }
    fn measure(&self, ctx: &mut Context<'_>) -> Result<ResultDocument, LabError> {
        measure(self, ctx).map(|r| r.doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_class_ids() {
        assert_eq!(number("6").unwrap(), 6);
        assert_eq!(number("1:10").unwrap(), 0x10010);
        assert_eq!(number("0x10010").unwrap(), 0x10010);
        assert_eq!(number("0xb8").unwrap(), 184);
        assert!(number("x").is_err());
        let t: toml::Table = "tos = '1:10'".parse().unwrap();
        let e = crate::config::from_table::<UdpProbeConfig>(&t).unwrap_err();
        assert_eq!(e.cli_text(), "--tos 65552: not a byte, 0..=255");
    }
}
