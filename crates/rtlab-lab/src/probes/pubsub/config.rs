//! The pubsub probe's one configuration ([`PubsubProbeConfig`]): its fields, defaults, checks
//! and what the engine is given.

use crate::config::{
    at_least_one, positive, ConfigError, Dur, List, NumberOrText, Rate, RtFields, Size, Validate,
};
use crate::far::FarSpec;
use crate::probe::ProbeKind;
use rtlab_core::rt::RtSettings;
use rtlab_pubsub::engine::{
    self, HandRole, Mode, PubsubConfig, Schedule, TransportKind, TransportSpec,
};
use rtlab_pubsub::transport::{Durability, EchoStyle, History, Qos, Reliability, WaitStyle};
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
    pub fastdds_lib: Option<rtlab_pubsub::transport::fastdds::FastDdsLib>,
    /// ros2: the ROS 2 installation (an ament prefix such as `/opt/ros/jazzy`; default:
    /// `AMENT_PREFIX_PATH`, `/opt/ros/*`, then the one scripts/setup.sh installs).
    pub ros2_prefix: Option<String>,
    /// ros2: the RMW implementation (`rmw_fastrtps_cpp`, `rmw_cyclonedds_cpp`,
    /// `rmw_zenoh_cpp`...; default: `RMW_IMPLEMENTATION`, else the installation's default).
    pub rmw: Option<String>,
    /// ros1: subscribers ask their publishers for TCP_NODELAY.
    pub tcp_nodelay: bool,
    /// ros1: best-effort subscribers ask for UDPROS first (roscpp's datagram transport).
    pub udpros: bool,
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
    /// Round trips: where the pong answers from: `thread` (a thread of rtlab's, waiting as
    /// `wait` says) or `callback` (the middleware's subscriber callback or listener: zenoh,
    /// cyclonedds, fastdds).
    pub echo: EchoStyle,
    /// Subscribers as threads of this process.
    pub in_process: bool,
    pub reliability: Reliability,
    pub history: HistoryText,
    pub durability: Durability,
    /// A message later than this is late; never received, lost.
    pub loss_timeout: Dur,
    /// Samples above it are missed deadlines (default: the period; closed loop: the loss
    /// timeout).
    pub deadline: Option<Dur>,
    /// Hold /dev/cpu_dma_latency at this many µs during the run.
    pub cpu_dma_latency: Option<u32>,
    /// Middleware threads at their own SCHED_FIFO priority, by thread name: `recv=75`, or
    /// under the measuring threads' (`dds.=-5`: given only where those are real-time).
    pub thread_priority: List<String>,
    /// Every thread of the middleware this many steps (0 or below) under the measuring
    /// threads' priority, where those are real-time: `-5` gives Fast DDS's `dds.*` (or
    /// Cyclone DDS's `recv`, `tev`, `dq.*`, `gc`) FIFO 75 under rtlab's 80 (S3's DDS threads
    /// under its executor); a transport whose threads rtlab does not know keeps them as
    /// they are (said in the notes).
    pub middleware_priority: Option<i32>,
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

/// `fastdds_shm`: `off`, `default` or a segment size, read as [`rtlab_pubsub::transport::fastdds::Shm`]
/// (a bad value is an error naming it); written back as given.
#[derive(Clone, Debug, PartialEq)]
pub struct FastDdsShm(pub rtlab_pubsub::transport::fastdds::Shm, String);

impl Serialize for FastDdsShm {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.1)
    }
}

impl<'de> Deserialize<'de> for FastDdsShm {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<FastDdsShm, D::Error> {
        let text = NumberOrText::deserialize(d)?.text();
        rtlab_pubsub::transport::fastdds::Shm::parse(&text)
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
            tcp_nodelay: false,
            udpros: false,
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
            echo: EchoStyle::Thread,
            in_process: false,
            reliability: Reliability::BestEffort,
            history: HistoryText("keep-last:5".into()),
            durability: Durability::Volatile,
            loss_timeout: Dur::ms(500),
            deadline: None,
            cpu_dma_latency: None,
            thread_priority: List(Vec::new()),
            middleware_priority: None,
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

/// The ROS 2 installation this side of `engine` loads (the ros2 transport, or fastdds on ROS
/// 2's Fast DDS), found as the run will find it: a wrong `--ros2-prefix` or `--rmw` is said
/// before anything waits for the machine. Ok when this side loads none.
pub fn find_ros2(engine: &PubsubConfig) -> Result<(), String> {
    let t = &engine.transport;
    if t.kind == TransportKind::Ros2
        || t.fastdds_lib == rtlab_pubsub::transport::fastdds::FastDdsLib::Ros2
    {
        rtlab_pubsub::ros2_installation(t)?;
    }
    Ok(())
}

impl Validate for PubsubProbeConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        self.validate_timing()?;
        self.validate_transport()?;
        self.validate_far_and_role()?;
        self.validate_echo()?;
        if let Some(d) = self.domain {
            if d > rtlab_pubsub::transport::cyclonedds::MAX_DOMAIN {
                return Err(ConfigError::new(
                    "domain",
                    format!(
                        "{d}: a DDS domain id is 0..={} here (the ports of a higher one overflow)",
                        rtlab_pubsub::transport::cyclonedds::MAX_DOMAIN
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
    /// Sizes, rates and times: what a case sends and when.
    fn validate_timing(&self) -> Result<(), ConfigError> {
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
        if self.middleware_priority.is_some_and(|s| !(-98..=0).contains(&s)) {
            return Err(ConfigError::new(
                "middleware_priority",
                "expected steps under the measuring threads' priority, 0 to -98 (e.g. -5: 75 under 80)",
            ));
        }
        Ok(())
    }

    /// The options of one transport given to another (Fast DDS's, ROS 2's), and a far
    /// transport the near one cannot talk to.
    fn validate_transport(&self) -> Result<(), ConfigError> {
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
            || self.fastdds_lib == Some(rtlab_pubsub::transport::fastdds::FastDdsLib::Ros2);
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
        if self.udpros
            && (self.transport != TransportKind::Ros1
                || self.reliability != Reliability::BestEffort)
        {
            return Err(ConfigError::new(
                "udpros",
                "for the ros1 transport with best-effort reliability only (UDPROS has no retransmission)",
            ));
        }
        let round_trip = self.mode == Mode::Roundtrip
            || matches!(self.role, Some(HandRole::Ping | HandRole::Pong));
        if self.udpros && round_trip {
            return Err(ConfigError::new(
                "udpros",
                "one-way runs only: UDPROS round trips stall in roscpp (here 1 idle run in 6 to 15: the ping side's UDPROS socket fills with pongs while roscpp never completes that subscription's connection, its poll thread spinning on the socket, and roscpp's TransportUDP asserts at exit, SIGTRAP); without --udpros the round trip is TCPROS",
            ));
        }
        if self.tcp_nodelay && self.transport != TransportKind::Ros1 {
            return Err(ConfigError::new(
                "tcp_nodelay",
                format!("for the ros1 transport only (transport is {})", self.transport.name()),
            ));
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
        Ok(())
    }

    /// A callback echo: a round trip's pong, on a transport whose library has a callback.
    fn validate_echo(&self) -> Result<(), ConfigError> {
        if self.echo == EchoStyle::Thread {
            return Ok(());
        }
        let pong_here = match self.role {
            Some(HandRole::Pong) => true,
            Some(_) => false,
            None => self.mode == Mode::Roundtrip,
        };
        if !pong_here {
            return Err(ConfigError::new(
                "echo",
                "callback: where a round trip's pong answers (--mode roundtrip, or --role pong)",
            ));
        }
        engine::callback_echo_rule(self.far_transport.unwrap_or(self.transport))
            .map_err(|m| ConfigError::new("echo", m))
    }

    /// A far side (another host or namespace) and a role by hand with its topic.
    fn validate_far_and_role(&self) -> Result<(), ConfigError> {
        if let Some(far) = &self.far {
            if matches!(self.transport, TransportKind::Intra | TransportKind::Shm) {
                return Err(ConfigError::new(
                    "transport",
                    format!(
                        "{}: one host only; a far side needs dds, ros1, zenoh or udp",
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
        Ok(())
    }
}

impl PubsubProbeConfig {
    pub(super) fn periods(&self) -> Vec<i64> {
        match &self.period {
            Some(p) => p.0.iter().map(|d| d.0).collect(),
            None => self.rate.0.iter().map(|r| r.period_ns).collect(),
        }
    }

    pub(super) fn subscriber_counts(&self) -> Vec<usize> {
        self.subscribers.0.iter().flat_map(|s| counts(&s.0).unwrap_or_default()).collect()
    }

    fn thread_priorities(&self) -> Result<Vec<engine::ThreadPriority>, ConfigError> {
        let mut out = Vec::new();
        for r in &self.thread_priority.0 {
            let bad = || {
                ConfigError::new(
                    "thread_priority",
                    format!("'{r}': expected NAME=PRIORITY with a SCHED_FIFO priority 1-99, e.g. recv=75, or NAME=-STEPS under the measuring threads' priority (0-98), e.g. dds.=-5"),
                )
            };
            let (name, p) = r.split_once('=').ok_or_else(bad)?;
            let priority: i32 = p.trim().parse().map_err(|_| bad())?;
            if name.trim().is_empty() || !(-98..=99).contains(&priority) {
                return Err(bad());
            }
            out.push(engine::ThreadPriority {
                name: name.trim().into(),
                priority,
                optional: false,
            });
        }
        Ok(out)
    }

    pub(super) fn case_duration_ns(&self) -> i64 {
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
        let thread_priorities = self.thread_priorities()?;
        for t in &thread_priorities {
            t.resolve(rt).map_err(|m| ConfigError::new("thread_priority", m))?;
        }
        if let Some(s) =
            self.middleware_priority.filter(|s| rt.policy.is_realtime() && rt.priority + s < 1)
        {
            return Err(ConfigError::new(
                "middleware_priority",
                format!(
                    "{s}: {} under the measuring threads' {} {} is below 1",
                    -s,
                    rt.policy.name(),
                    rt.priority
                ),
            ));
        }
        let mut transport = TransportSpec::new(self.transport);
        transport.domain = self.domain;
        transport.interface = self.interface.clone();
        transport.peers = self.peer.0.clone();
        transport.connect = self.connect.0.clone();
        transport.listen = self.listen.0.clone();
        transport.fastdds_shm = self.fastdds_shm.as_ref().map(|s| s.0).unwrap_or_default();
        transport.fastdds_lib = self.fastdds_lib.unwrap_or_default();
        transport.tcp_nodelay = self.tcp_nodelay;
        transport.udpros = self.udpros;
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
            echo: self.echo,
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
            thread_priorities,
            middleware_priority: self.middleware_priority,
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
