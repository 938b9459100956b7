//! The pubsub probe (`rtlab pubsub`, scenario `kind = "pubsub"`): message latency through
//! real transports (intra, shm/iceoryx2, zenoh, dds/Cyclone DDS, udp), swept over payloads,
//! rates and subscriber counts, one way or round trip.
//!
//! Contract: [`PubsubProbeConfig`] is the one configuration (defaults shared by the CLI and
//! scenarios: oneway, 64 B, 100 Hz, 1 subscriber, best effort, keep-last:5, volatile,
//! blocking waits, 5 s per case). Subscribers run in processes of this binary
//! (`rtlab pubsub --role-config JSON`), started by `measure`.

use crate::config::{
    at_least_one, positive, ConfigError, Dur, List, NumberOrText, Rate, RtFields, Size, Validate,
};
use crate::document::{new_document, run_warnings, RunFacts};
use crate::error::LabError;
use crate::far::roles::AgentRoles;
use crate::far::run::FarRun;
use crate::far::FarSpec;
use crate::probe::{Context, Plan, Probe, ProbeKind};
use rtlab_core::rt::{Policy, RtSettings};
use rtlab_core::schema::ResultDocument;
use rtlab_pubsub::engine::{
    self, HandRole, Mode, PubsubConfig, PubsubOutcome, Schedule, TransportKind, TransportSpec,
};
use rtlab_pubsub::transport::{Durability, History, Qos, Reliability, WaitStyle};
use serde::{Deserialize, Serialize};

pub const KIND: ProbeKind = ProbeKind {
    kind: "pubsub",
    about: "message latency through real middleware transports (S2, S3)",
    parse: crate::probe::parse_as::<PubsubProbeConfig>,
};

/// A subscriber count or a range of them (`1-6`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Subscribers(pub String);

impl<'de> Deserialize<'de> for Subscribers {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = crate::config::NumberOrText::deserialize(d)?.text();
        counts(&s).map_err(serde::de::Error::custom)?;
        Ok(Subscribers(s))
    }
}

fn counts(s: &str) -> Result<Vec<usize>, String> {
    let bad = || format!("'{s}': expected a count or a range like 1-6 (1..=64)");
    if let Some((a, b)) = s.split_once('-') {
        let a: usize = a.trim().parse().map_err(|_| bad())?;
        let b: usize = b.trim().parse().map_err(|_| bad())?;
        if a == 0 || b < a || b > 64 {
            return Err(bad());
        }
        return Ok((a..=b).collect());
    }
    let n: usize = s.trim().parse().map_err(|_| bad())?;
    if n == 0 || n > 64 {
        return Err(bad());
    }
    Ok(vec![n])
}

/// The pub/sub probe's configuration (flags and `[[probe]]` keys have these names).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PubsubProbeConfig {
    pub transport: TransportKind,
    /// The far side's transport (the pong or the subscribers) when it is another DDS
    /// implementation: a cross-implementation case (default: `transport`).
    pub far_transport: Option<TransportKind>,
    /// fastdds: its shared-memory transport: `default` (512 KiB segment, as a ROS 2 node),
    /// `off` (UDP only), or a segment size (`4MiB`).
    pub fastdds_shm: Option<FastDdsShm>,
    /// fastdds: the Fast DDS library, `debian` (Debian's 2.9, the default) or `ros2` (the one
    /// the ROS 2 installation's rmw_fastrtps_cpp runs on: then `fastdds` beside `ros2` differs
    /// by rcl, the RMW and the type support alone).
    pub fastdds_lib: Option<rtlab_pubsub::fastdds::FastDdsLib>,
    /// ros2: the ROS 2 installation (an ament prefix such as `/opt/ros/jazzy`; default:
    /// `AMENT_PREFIX_PATH`, `/opt/ros/*`, then the one scripts/setup.sh installs).
    pub ros2_prefix: Option<String>,
    /// ros2: the RMW implementation (`rmw_fastrtps_cpp`, `rmw_cyclonedds_cpp`,
    /// `rmw_zenoh_cpp`...; default: `RMW_IMPLEMENTATION`, else the installation's default).
    pub rmw: Option<String>,
    /// `oneway` (receive - send on one clock) or `roundtrip` (pong received - ping sent).
    pub mode: Mode,
    /// Round trips: `periodic` (pings on the rate's grid) or `closed-loop` (the next ping as
    /// soon as the pong is in, as the middlewares' own ping-pong benchmarks do).
    pub schedule: Schedule,
    /// Message sizes (header of 16 bytes included), swept.
    pub payload: List<Size>,
    /// Publish rates, swept.
    pub rate: List<Rate>,
    /// Or send periods, swept (over `rate`).
    pub period: Option<List<Dur>>,
    /// Subscriber counts, swept (a range like 1-6 is every count in it).
    pub subscribers: List<Subscribers>,
    /// Measured time of each case of the sweep.
    pub duration: Option<Dur>,
    /// At most this many messages per case.
    pub count: Option<u64>,
    /// How receivers wait: blocking or busy-poll.
    pub wait: WaitStyle,
    /// Subscribers as threads of this process.
    pub in_process: bool,
    pub reliability: Reliability,
    pub history: HistoryText,
    pub durability: Durability,
    /// A message later than this is late; never received, lost.
    pub loss_timeout: Dur,
    /// Samples above it are missed deadlines (default: the period).
    pub deadline: Option<Dur>,
    /// Hold /dev/cpu_dma_latency at this many µs during the run.
    pub cpu_dma_latency: Option<u32>,
    /// Middleware threads at their own SCHED_FIFO priority, by thread name: `recv=75`.
    pub thread_priority: List<String>,
    pub window: Dur,
    /// The subscribers (oneway) or the pong (roundtrip) on a far side: `ssh:[USER@]HOST[:PORT]`
    /// or `netns:NAME`.
    pub far: Option<FarSpec>,
    /// Measure from inside this network namespace (its transport, and its local roles).
    pub netns: Option<String>,
    /// The two hosts' clocks agree (PTP, chrony): one-way latencies across hosts are valid.
    pub synced_clocks: bool,
    /// dds: the domain id (default: one from the process id, 100-199; across hosts both
    /// ends must use the same: the far side is told).
    pub domain: Option<u32>,
    /// dds: the interface (name or address) discovery and data use; udp: the address to bind
    /// (default: loopback; with a far side, this host's address on the link).
    pub interface: Option<String>,
    /// dds: unicast discovery peers (default with an interface: multicast); udp: the hosts
    /// whose publishers to join.
    pub peer: List<String>,
    /// zenoh: endpoints to connect to (e.g. tcp/192.168.1.2:7447).
    pub connect: List<String>,
    /// zenoh: endpoints to listen on.
    pub listen: List<String>,
    /// zenoh: `peer` or `client`.
    pub zenoh_mode: Option<ZenohMode>,
    /// Run one role by hand, its peer started by hand on the other machine: `ping` (with a
    /// `pong` there), `pub` (with a `sub` there).
    pub role: Option<HandRole>,
    /// The topic of a role by hand: oneway data on TOPIC, roundtrip on TOPIC_ping / TOPIC_pong.
    pub topic: Option<String>,
    #[serde(flatten)]
    pub rt: RtFields,
}

/// `fastdds_shm`: `off`, `default` or a segment size, read as [`rtlab_pubsub::fastdds::Shm`]
/// (a bad value is an error naming it); written back as given.
#[derive(Clone, Debug, PartialEq)]
pub struct FastDdsShm(pub rtlab_pubsub::fastdds::Shm, String);

impl Serialize for FastDdsShm {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.1)
    }
}

impl<'de> Deserialize<'de> for FastDdsShm {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<FastDdsShm, D::Error> {
        let text = NumberOrText::deserialize(d)?.text();
        rtlab_pubsub::fastdds::Shm::parse(&text)
            .map(|s| FastDdsShm(s, text))
            .map_err(serde::de::Error::custom)
    }
}

/// Zenoh's session mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ZenohMode {
    Peer,
    Client,
}

/// `keep-last:N` or `keep-all`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct HistoryText(pub String);

impl<'de> Deserialize<'de> for HistoryText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        History::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!("'{s}': accepted: keep-last:N (N >= 1), keep-all"))
        })?;
        Ok(HistoryText(s))
    }
}

impl Default for PubsubProbeConfig {
    fn default() -> Self {
        PubsubProbeConfig {
            transport: TransportKind::Intra,
            far_transport: None,
            fastdds_shm: None,
            fastdds_lib: None,
            ros2_prefix: None,
            rmw: None,
            mode: Mode::Oneway,
            schedule: Schedule::Periodic,
            payload: List::one(Size(64)),
            rate: List::one(Rate { text: "100hz".into(), period_ns: 10_000_000 }),
            period: None,
            subscribers: List::one(Subscribers("1".into())),
            duration: None,
            count: None,
            wait: WaitStyle::Blocking,
            in_process: false,
            reliability: Reliability::BestEffort,
            history: HistoryText("keep-last:5".into()),
            durability: Durability::Volatile,
            loss_timeout: Dur::ms(500),
            deadline: None,
            cpu_dma_latency: None,
            thread_priority: List(Vec::new()),
            window: Dur::s(1),
            far: None,
            netns: None,
            synced_clocks: false,
            domain: None,
            interface: None,
            peer: List(Vec::new()),
            connect: List(Vec::new()),
            listen: List(Vec::new()),
            zenoh_mode: None,
            role: None,
            topic: None,
            rt: RtFields::default(),
        }
    }
}

/// On the command line the probe's threads run SCHED_OTHER (the middleware inherits the
/// policy: give `--policy fifo` for an RT run), memory locked.
pub fn default_rt() -> RtSettings {
    RtSettings { mlockall: true, ..RtSettings::normal() }
}

impl Validate for PubsubProbeConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.payload.0.is_empty() {
            return Err(ConfigError::new("payload", "no size given"));
        }
        for p in &self.payload.0 {
            if p.0 > 1 << 30 {
                return Err(ConfigError::new("payload", format!("{} bytes is above 1 GiB", p.0)));
            }
        }
        if let Some(p) = &self.period {
            for d in &p.0 {
                positive("period", Some(*d))?;
            }
        }
        positive("duration", self.duration)?;
        positive("loss_timeout", Some(self.loss_timeout))?;
        if self.schedule == Schedule::ClosedLoop {
            let roundtrip = self.mode == Mode::Roundtrip || self.role == Some(HandRole::Ping);
            if !roundtrip {
                return Err(ConfigError::new(
                    "schedule",
                    "closed-loop: a round trip schedule (give --mode roundtrip)",
                ));
            }
            if self.period.is_some() || self.rate != PubsubProbeConfig::default().rate {
                return Err(ConfigError::new(
                    "rate",
                    "not with --schedule closed-loop: the next ping goes as soon as the pong is in (--duration and --count end a case)",
                ));
            }
        }
        positive("deadline", self.deadline)?;
        positive("window", Some(self.window))?;
        at_least_one("count", self.count)?;
        self.thread_priorities()?;
        if let Some(ft) = self.far_transport.filter(|k| *k != self.transport) {
            engine::far_transport_rule(self.transport, ft, self.in_process, self.role.is_some())
                .map_err(|m| ConfigError::new("far_transport", m))?;
        }
        if self.fastdds_shm.is_some()
            && self.transport != TransportKind::FastDds
            && self.far_transport != Some(TransportKind::FastDds)
        {
            return Err(ConfigError::new(
                "fastdds_shm",
                format!("for the fastdds transport only (transport is {})", self.transport.name()),
            ));
        }
        let fastdds = self.transport == TransportKind::FastDds
            || self.far_transport == Some(TransportKind::FastDds);
        if self.fastdds_lib.is_some() && !fastdds {
            return Err(ConfigError::new(
                "fastdds_lib",
                format!("for the fastdds transport only (transport is {})", self.transport.name()),
            ));
        }
        let ros2 = self.transport == TransportKind::Ros2
            || self.far_transport == Some(TransportKind::Ros2)
            || self.fastdds_lib == Some(rtlab_pubsub::fastdds::FastDdsLib::Ros2);
        for (key, given) in [("ros2_prefix", &self.ros2_prefix), ("rmw", &self.rmw)] {
            if given.is_some() && !ros2 {
                return Err(ConfigError::new(
                    key,
                    format!(
                        "for the ros2 transport (or fastdds with fastdds_lib ros2) only (transport is {})",
                        self.transport.name()
                    ),
                ));
            }
        }
        if let Some(rmw) = &self.rmw {
            if !rmw.starts_with("rmw_")
                || !rmw.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return Err(ConfigError::new(
                    "rmw",
                    format!("'{rmw}': an RMW implementation's package name, e.g. rmw_fastrtps_cpp, rmw_cyclonedds_cpp, rmw_zenoh_cpp"),
                ));
            }
        }
        if let Some(far) = &self.far {
            if matches!(self.transport, TransportKind::Intra | TransportKind::Shm) {
                return Err(ConfigError::new(
                    "transport",
                    format!(
                        "{}: one host only; a far side needs dds, zenoh or udp",
                        self.transport.name()
                    ),
                ));
            }
            if self.mode == Mode::Oneway && !far.same_clock() && !self.synced_clocks {
                return Err(ConfigError::new(
                    "mode",
                    format!("oneway across hosts ({far}) compares two clocks: use --mode roundtrip, or say --synced-clocks if the clocks agree (PTP, chrony)"),
                ));
            }
        }
        if let Some(role) = self.role {
            if self.far.is_some() {
                return Err(ConfigError::new(
                    "role",
                    "and --far: a role by hand has its peer started by hand, not by an agent",
                ));
            }
            let wanted = match role {
                HandRole::Ping | HandRole::Pong => Mode::Roundtrip,
                HandRole::Pub | HandRole::Sub => Mode::Oneway,
            };
            if self.mode != wanted && !(self.mode == Mode::Oneway && wanted == Mode::Roundtrip) {
                return Err(ConfigError::new(
                    "role",
                    format!(
                        "{}: a {} role (not --mode {})",
                        role.name(),
                        wanted.name(),
                        self.mode.name()
                    ),
                ));
            }
            if matches!(self.transport, TransportKind::Intra) {
                return Err(ConfigError::new(
                    "transport",
                    "intra: one process only; a role by hand needs dds, zenoh, udp or shm",
                ));
            }
            if role == HandRole::Sub && !self.synced_clocks {
                return Err(ConfigError::new("role", "sub: one-way latency compares this clock with the publisher's: say --synced-clocks when both run on one host or their clocks agree (PTP, chrony)"));
            }
        } else if self.topic.is_some() {
            return Err(ConfigError::new(
                "topic",
                "only with --role (the probe names its own topics)",
            ));
        }
        if let Some(t) = &self.topic {
            if t.is_empty() || !t.chars().all(|c| c.is_ascii_alphanumeric() || "_/-".contains(c)) {
                return Err(ConfigError::new(
                    "topic",
                    format!("'{t}': letters, digits, _ - / only"),
                ));
            }
        }
        if let Some(d) = self.domain {
            if d > rtlab_pubsub::dds::MAX_DOMAIN {
                return Err(ConfigError::new(
                    "domain",
                    format!(
                        "{d}: a DDS domain id is 0..={} here (the ports of a higher one overflow)",
                        rtlab_pubsub::dds::MAX_DOMAIN
                    ),
                ));
            }
        }
        if let Some(ns) = &self.netns {
            if !rtlab_engines::netns::exists(ns) {
                return Err(ConfigError::new(
                    "netns",
                    format!("{ns}: no such network namespace (create it with `rtlab netns up`)"),
                ));
            }
        }
        Ok(())
    }
}

impl PubsubProbeConfig {
    fn periods(&self) -> Vec<i64> {
        match &self.period {
            Some(p) => p.0.iter().map(|d| d.0).collect(),
            None => self.rate.0.iter().map(|r| r.period_ns).collect(),
        }
    }

    fn subscriber_counts(&self) -> Vec<usize> {
        self.subscribers.0.iter().flat_map(|s| counts(&s.0).unwrap_or_default()).collect()
    }

    fn thread_priorities(&self) -> Result<Vec<engine::ThreadPriority>, ConfigError> {
        let mut out = Vec::new();
        for r in &self.thread_priority.0 {
            let bad = || {
                ConfigError::new(
                    "thread_priority",
                    format!("'{r}': expected NAME=PRIORITY with a SCHED_FIFO priority 1-99, e.g. recv=75"),
                )
            };
            let (name, p) = r.split_once('=').ok_or_else(bad)?;
            let priority: i32 = p.trim().parse().map_err(|_| bad())?;
            if name.trim().is_empty() || !(1..=99).contains(&priority) {
                return Err(bad());
            }
            out.push(engine::ThreadPriority { name: name.trim().into(), priority });
        }
        Ok(out)
    }

    fn case_duration_ns(&self) -> i64 {
        match (self.duration, self.count) {
            (Some(d), _) => d.0,
            // a count-only case runs as long as its messages need, plus the loss timeout
            (None, Some(c)) => {
                let p = self.periods().into_iter().max().unwrap_or(10_000_000);
                (c as i64).saturating_mul(p).saturating_add(self.loss_timeout.0)
            }
            (None, None) => 5_000_000_000,
        }
    }

    fn by_hand(&self) -> Option<engine::ByHand> {
        self.role.map(|role| engine::ByHand {
            role,
            topic: self.topic.clone().unwrap_or_else(|| "rtlab".into()),
        })
    }

    /// The engine's configuration under `rt`.
    pub fn engine(&self, rt: &RtSettings) -> Result<PubsubConfig, ConfigError> {
        rt.check().map_err(|m| ConfigError::new("priority", m))?;
        let mut transport = TransportSpec::new(self.transport);
        transport.domain = self.domain;
        transport.interface = self.interface.clone();
        transport.peers = self.peer.0.clone();
        transport.connect = self.connect.0.clone();
        transport.listen = self.listen.0.clone();
        transport.fastdds_shm = self.fastdds_shm.as_ref().map(|s| s.0).unwrap_or_default();
        transport.fastdds_lib = self.fastdds_lib.unwrap_or_default();
        transport.ros2_prefix = self.ros2_prefix.clone();
        transport.rmw = self.rmw.clone();
        transport.zenoh_mode = self.zenoh_mode.map(|m| match m {
            ZenohMode::Peer => "peer".to_string(),
            ZenohMode::Client => "client".to_string(),
        });
        let mode = match self.role {
            Some(HandRole::Ping | HandRole::Pong) => Mode::Roundtrip,
            _ => self.mode,
        };
        Ok(PubsubConfig {
            transport,
            far_transport: self.far_transport,
            mode,
            wait: self.wait,
            qos: Qos {
                reliability: self.reliability,
                history: History::parse(&self.history.0).unwrap_or(History::KeepLast(5)),
                durability: self.durability,
            },
            payloads: self.payload.0.iter().map(|s| s.0 as usize).collect(),
            periods_ns: self.periods(),
            subscribers: self.subscriber_counts(),
            case_duration_ns: self.case_duration_ns(),
            case_messages: self.count,
            loss_timeout_ns: self.loss_timeout.0,
            deadline_ns: self.deadline.map(|d| d.0),
            in_process: self.in_process,
            rt: rt.clone(),
            window_ns: self.window.0,
            thread_priorities: self.thread_priorities()?,
            spike: None,
            by_hand: self.by_hand(),
            stamp_clock: self.stamp_clock(),
            schedule: self.schedule,
        })
    }

    /// One-way stamps on CLOCK_REALTIME when they are compared with another host's clock or
    /// a peer's started by hand (a ROS 2 node stamps system time); else CLOCK_MONOTONIC.
    fn stamp_clock(&self) -> engine::StampClock {
        let other_host = self.far.as_ref().is_some_and(|f| !f.same_clock());
        if matches!(self.role, Some(HandRole::Pub | HandRole::Sub)) || other_host {
            engine::StampClock::Realtime
        } else {
            engine::StampClock::Monotonic
        }
    }
}

/// The threads explained (the publisher, the receivers and echoes in this process) and the
/// streams that raise the flag.
pub fn fit_evidence(cfg: &PubsubConfig, o: &mut crate::evidence::EvidenceOptions) {
    let in_process = cfg.in_process || cfg.transport.kind == TransportKind::Intra;
    // a round trip's latency goes through the echoes (rtlab-subN) and the pong receivers
    o.victim = if cfg.mode == Mode::Roundtrip {
        "rtlab-pub|rtlab-pong|rtlab-sub"
    } else {
        "rtlab-pub|rtlab-sub"
    }
    .into();
    o.window_ns = cfg.window_ns;
    // source 0: any receiver here (several streams); 1: the publisher's lateness
    o.sources = vec![String::new(), "pub.send_lateness".into()];
    o.cpus = cfg.rt.cpus.clone().unwrap_or_default();
    let cases = (cfg.payloads.len() * cfg.periods_ns.len() * cfg.subscribers.len()) as u64;
    o.planned =
        Some(std::time::Duration::from_nanos(cfg.case_duration_ns.max(0) as u64 * cases.max(1)));
    if o.trace_on_spike_ns.is_some() && cfg.mode == Mode::Oneway && !in_process {
        o.notes.push("trace on spike: the subscribers run in their own processes and cannot raise the spike flag, only the publisher's send lateness does; for the message latency use in-process subscribers or roundtrip mode".into());
    }
}

/// Run the probe with memory locked and, when asked, /dev/cpu_dma_latency held; the
/// document (with its evidence and warnings), the outcome and the engine configuration.
pub fn measure(
    cfg: &PubsubProbeConfig,
    ctx: &mut Context<'_>,
) -> Result<(ResultDocument, PubsubOutcome, PubsubConfig), LabError> {
    let rt = cfg.rt.over(&ctx.rt);
    let mut engine = cfg.engine(&rt)?;
    let mut ev = ctx.evidence.clone();
    fit_evidence(&engine, &mut ev);
    let evidence = crate::evidence::EvidenceRun::start(crate::host::host(), &ev)?;
    engine.spike = evidence.hook();
    let env = rtlab_sys::env::detect(std::path::Path::new("/"));
    let started = std::time::SystemTime::now();
    let (lock_guard, memory_lock) = rtlab_engines::hold::lock_memory(rt.mlockall);
    let (dma_guard, dma) = rtlab_engines::hold::cpu_dma_latency(
        cfg.cpu_dma_latency.map(|v| v.min(i32::MAX as u32) as i32),
    );
    let exe = std::env::current_exe().map_err(|e| {
        LabError::Failed(format!("finding the rtlab binary to start subscriber processes: {e}"))
    })?;
    let role_exe = exe.clone();
    let launcher = move |json: &str| {
        let mut c = std::process::Command::new(&role_exe);
        c.args(["pubsub", "--role-config", json]);
        c
    };
    // the near side's namespace: its own, or side a of the case's pair (far = "pair")
    let near_netns = cfg.netns.clone().or_else(|| ctx.pair.map(|p| p.ns_a.clone()));
    let far = match &cfg.far {
        Some(spec) => {
            let far_rt = RtSettings { cpus: None, ..rt.clone() };
            let window = ctx.evidence.counters.then_some(engine.window_ns);
            Some(FarRun::start(
                ctx.far,
                spec,
                near_netns.as_deref(),
                cfg.synced_clocks,
                &far_rt,
                &[],
                window,
            )?)
        }
        None => None,
    };
    let roles = far.as_ref().map(|f| AgentRoles { link: (*f.link()).clone() });
    let placement = far.as_ref().zip(roles.as_ref()).map(|(f, r)| engine::FarPlacement {
        near: f.near.clone(),
        far: f.far.clone(),
        roles: r,
    });
    let progress = &mut *ctx.progress;
    let stop = ctx.stop.clone();
    // a Fast DDS other than the one this process already holds (ros2 after fastdds in one
    // run, or the reverse): the case's near side runs in a process of its own
    let apart = rtlab_pubsub::engine::apart::conflict(&engine, placement.is_some());
    if let (Some(why), Some(_)) = (&apart, &placement) {
        return Err(LabError::Failed(format!(
            "{why}; with a far side it cannot run in a process of its own here: run this case in an rtlab run of its own"
        )));
    }
    let run = |engine: &PubsubConfig,
               placement: Option<&engine::FarPlacement>,
               stop,
               progress: &mut dyn FnMut(usize, usize)| match &apart {
        Some(why) => rtlab_pubsub::engine::apart::run_apart(engine, &exe, why, stop, progress),
        None => engine::run_with(engine, &launcher, placement, stop, progress),
    };
    let outcome = match &near_netns {
        None => run(&engine, placement.as_ref(), stop, &mut |d, t| progress(d as u64, t as u64)),
        // a thread of its own enters the namespace: the transport's sockets and threads and
        // the local role processes are born there; its progress comes back over a channel
        Some(ns) => {
            let (tx, rx) = std::sync::mpsc::channel::<(u64, u64)>();
            let (engine, placement, run) = (&engine, placement.as_ref(), &run);
            std::thread::scope(|s| {
                let h = s.spawn(move || {
                    rtlab_sys::net::enter_netns(&format!("/run/netns/{ns}"))
                        .map_err(|e| engine::ProbeError::Setup(format!("--netns {ns}: {e}")))?;
                    run(engine, placement, stop, &mut |d, t| {
                        let _ = tx.send((d as u64, t as u64));
                    })
                });
                for (d, t) in rx.iter() {
                    progress(d, t);
                }
                h.join().unwrap_or_else(|_| {
                    Err(engine::ProbeError::Setup("the measuring thread panicked".into()))
                })
            })
        }
    };
    let streams: Vec<_> = match &outcome {
        Ok(o) => o
            .cases
            .iter()
            .flat_map(|c| c.streams.iter().cloned().chain(c.publisher.clone()))
            .collect(),
        Err(_) => Vec::new(),
    };
    let evidence = evidence.finish(&streams);
    let outcome = outcome.map_err(|e| match e {
        engine::ProbeError::Rt(m) if m.contains("EPERM") || m.contains("refused") => {
            LabError::Missing(crate::error::refused(rt.policy.name(), rt.priority))
        }
        e if e.is_bad_input() => LabError::Failed(e.to_string()),
        e => LabError::failed(e),
    })?;
    if let Some(first) =
        outcome.cases.first().filter(|_| outcome.cases.iter().all(|c| c.error.is_some()))
    {
        return Err(LabError::Failed(
            first.error.clone().unwrap_or_else(|| "no case could run".into()),
        ));
    }
    let mut doc = new_document("pubsub", started, env, config_value(&engine, &outcome));
    doc.far = far.map(FarRun::finish);
    doc.duration_ns = outcome.duration_ns;
    doc.interrupted = outcome.interrupted;
    doc.environment.memory_locked = matches!(memory_lock, Some(Ok(())));
    doc.environment.cpu_dma_latency_us = dma.as_ref().and_then(|r| r.as_ref().ok().copied());
    // per case: its subscribers, then the publisher's own lateness
    doc.streams = streams;
    doc.evidence = Some(evidence);
    let dma_error = match &dma {
        Some(Err(why)) => Some(why.as_str()),
        _ => None,
    };
    let facts = RunFacts {
        memory_lock: &memory_lock,
        any_other_policy: rt.policy == Policy::Other,
        mlockall_off_by_profile: ctx.mlockall_off_by_profile,
        cpu_dma_latency_error: dma_error,
        fewest_samples: doc.streams.iter().map(|s| s.stats.count).min().unwrap_or(0),
        interrupted: outcome.interrupted,
    };
    doc.warnings = run_warnings(&doc.environment, &facts, Vec::new());
    if let Some(w) = doc.far.as_ref().and_then(|f| f.warning()) {
        doc.warnings.push(w);
    }
    if doc.far.is_none() {
        let cpus = match &engine.rt.cpus {
            Some(c) => c.len(),
            None => rtlab_sys::cpus::online_cpus(std::path::Path::new("/")).0.len(),
        };
        doc.warnings.extend(spinners_warning(&engine, cpus));
    }
    for c in outcome.cases.iter().filter(|c| c.error.is_some()) {
        doc.warnings.push(rtlab_core::schema::Warning {
            code: "case-failed".into(),
            message: format!(
                "case {}B {} n{} measured nothing: {}",
                c.payload,
                engine::rate_label(c.period_ns),
                c.subscribers,
                c.error.as_deref().unwrap_or("")
            ),
        });
    }
    drop(dma_guard);
    drop(lock_guard);
    Ok((doc, outcome, engine))
}

/// Busy-poll with as many spinning threads as CPUs starves a middleware's own receive threads
/// (DDS, Zenoh): they run only when the scheduler preempts a spinner, so the tail is rtlab's
/// doing. Measured: dds and zenoh closed loops on 2 CPUs, p99 3.6-8.8 ms busy-polling against
/// 0.2-0.7 ms blocking (BENCHMARKS.md).
fn spinners_warning(cfg: &PubsubConfig, cpus: usize) -> Option<rtlab_core::schema::Warning> {
    let own_threads = cfg.transport.kind.is_dds() || cfg.transport.kind == TransportKind::Zenoh;
    if cfg.wait != WaitStyle::BusyPoll || !own_threads {
        return None;
    }
    // every subscriber (a pong in roundtrip) spins, and so does the pinger
    let spinners = cfg.subscribers.iter().copied().max().unwrap_or(1)
        + usize::from(cfg.mode == Mode::Roundtrip);
    (spinners >= cpus).then(|| rtlab_core::schema::Warning {
        code: "busy-poll-starves-middleware".into(),
        message: format!(
            "busy-poll: {spinners} threads spin on {cpus} CPU{}, so {}'s own receive threads run only when the scheduler preempts a spinner: millisecond tails here are rtlab's doing, not the middleware's (use --wait blocking, or fewer spinners than CPUs)",
            if cpus == 1 { "" } else { "s" },
            cfg.transport.kind.name()
        ),
    })
}

/// The configuration as recorded: the probe config, what the QoS became, notes, per-case figures.
fn config_value(cfg: &PubsubConfig, o: &PubsubOutcome) -> serde_json::Value {
    let cases: Vec<serde_json::Value> = o
        .cases
        .iter()
        .map(|c| {
            serde_json::json!({
                "payload_bytes": c.payload, "period_ns": c.period_ns, "subscribers": c.subscribers,
                "published": c.published, "overruns": c.overruns,
                "p50_spread_ns": c.p50_spread_ns, "fastest_subscriber": c.fastest, "slowest_subscriber": c.slowest,
                "error": c.error,
            })
        })
        .collect();
    serde_json::json!({
        "probe": serde_json::to_value(cfg).unwrap_or_default(),
        "qos_mapping": serde_json::to_value(&o.qos_mapping).unwrap_or_default(),
        "ros2": o.ros2,
        "notes": o.notes,
        "cases": cases,
    })
}

impl Probe for PubsubProbeConfig {
    fn kind(&self) -> &'static str {
        "pubsub"
    }
    fn config(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
    fn plan(&self) -> Plan {
        let sweep =
            (self.payload.0.len() * self.periods().len() * self.subscriber_counts().len()) as u64;
        Plan {
            duration_ns: Some(self.case_duration_ns()),
            count: self.count,
            period_ns: self.periods().into_iter().max().unwrap_or(10_000_000),
            sweep,
        }
    }
    fn scale(&mut self, factor: f64, floor: u64) -> Option<String> {
        let p = self.periods().into_iter().max().unwrap_or(10_000_000);
        if self.duration.is_none() && self.count.is_none() {
            self.duration = Some(Dur::s(5));
        }
        crate::probe::scale_length(&mut self.duration, &mut self.count, p, factor, floor)
    }
    fn pins_process(&self) -> bool {
        false
    }
    fn needs_pair(&self) -> bool {
        self.far == Some(FarSpec::Pair)
    }
    fn near_netns(&self) -> Option<&str> {
        self.netns.as_deref()
    }
    fn far(&self) -> Option<&FarSpec> {
        self.far.as_ref()
    }
    fn set_far(&mut self, far: &FarSpec) -> bool {
        if self.far.is_none()
            && !matches!(self.transport, TransportKind::Intra | TransportKind::Shm)
        {
            self.far = Some(far.clone());
        }
        true
    }
    fn rt(&self, base: &RtSettings) -> RtSettings {
        self.rt.over(base)
    }
    fn measure(&self, ctx: &mut Context<'_>) -> Result<ResultDocument, LabError> {
        measure(self, ctx).map(|(doc, _, _)| doc)
    }
}
