//! The pub/sub probe: cases (payload x rate x subscribers), each run over one transport in
//! `oneway` or `roundtrip` mode, with subscribers in separate processes (default) or threads.
//!
//! - `oneway`: the publisher stamps CLOCK_MONOTONIC right before `publish`; each subscriber
//!   stamps CLOCK_MONOTONIC right after its take returns; sample = receive - send (one host
//!   clock, valid across processes of one host).
//! - `roundtrip`: the pinger publishes on `<topic>_ping`; subscriber i echoes each message
//!   unchanged on `<topic>_pong_<i>`; a receiver thread per subscriber in the pinger's
//!   process stamps the pong; sample = pong received - ping sent, one clock (never halved).
//!
//! Sends follow an absolute grid (t0 + k*period); a slot already passed is skipped and
//! counted as an overrun. A message received more than `loss_timeout` after it was sent is
//! `late` (not a sample); a message never received is `lost`; duplicates and out-of-order
//! arrivals are counted apart ([`crate::seqtrack`]).
//!
//! Contract: every recorder and buffer is allocated before the measured phase; the sender
//! and receiver loops only publish, take, stamp and record into a [`Recorder`]. Middleware
//! is opened after the calling thread's policy is set (so its threads inherit it); app
//! threads are created by `spawn_rt` with policy/priority/CPU. Nothing here prints: a role
//! process speaks to its parent through the [`RoleEvent`] lines on its stdout.

pub mod apart;

use crate::seqtrack::{Arrival, SeqTracker};
use crate::transport::*;
use rtlab_core::schema::Stream;
use rtlab_core::sink::{Recorder, RecorderConfig, Sink};
use rtlab_sys::clock::{monotonic_ns, sleep_until};
use rtlab_sys::sched::{set_current_affinity, set_current_policy, spawn_rt, ThreadSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

/// How long role start-up and warm-up (discovery) may take before the case fails.
pub const SETUP_TIMEOUT_NS: i64 = 30_000_000_000;
/// Warm-up messages are sent at least this far apart until every subscriber got one (and
/// never faster than the case's period, nor than 100 MB/s, so that discovery is not flooded).
const WARMUP_PERIOD_NS: i64 = 10_000_000;

fn warmup_period(period_ns: i64, len: usize) -> i64 {
    WARMUP_PERIOD_NS.max(period_ns).max(len as i64 * 10)
}
/// A receiver checks its stop flag at least this often.
const POLL_SLICE_NS: i64 = 50_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    Oneway,
    Roundtrip,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Oneway => "oneway",
            Mode::Roundtrip => "roundtrip",
        }
    }
    pub fn metric(self) -> &'static str {
        match self {
            Mode::Oneway => "one_way_latency",
            Mode::Roundtrip => "rtt",
        }
    }
    pub fn definition(self) -> &'static str {
        match self {
            Mode::Oneway => {
                "one-way latency: receive stamp (subscriber, CLOCK_MONOTONIC right after the take returns) - send stamp \
                 (publisher, CLOCK_MONOTONIC right before publish), one host clock; not RTT/2"
            }
            Mode::Roundtrip => {
                "round trip: pong received (pinger, CLOCK_MONOTONIC right after the take returns) - ping sent (pinger, \
                 CLOCK_MONOTONIC right before publish), through a subscriber that republishes each message; not halved"
            }
        }
    }
}

/// When the pings of a round trip go out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// On the absolute grid t0 + k*period (open loop; a slot already past is an overrun).
    #[default]
    Periodic,
    /// Closed loop (roundtrip only): the next ping as soon as the pong of the previous one
    /// is in, or its loss timeout passed; one thread publishes and takes the pongs, as the
    /// middlewares' own ping-pong benchmarks do.
    ClosedLoop,
}

impl Schedule {
    pub fn name(self) -> &'static str {
        match self {
            Schedule::Periodic => "periodic",
            Schedule::ClosedLoop => "closed-loop",
        }
    }
}

/// The clock of the one-way send and receive stamps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StampClock {
    /// CLOCK_MONOTONIC: one host (processes and namespaces of one machine).
    #[default]
    Monotonic,
    /// CLOCK_REALTIME: two hosts whose clocks are synchronised (PTP, chrony), or a ROS 2
    /// peer (ROS time is the system clock); a step of the clock shows in the samples.
    Realtime,
}

impl StampClock {
    pub fn name(self) -> &'static str {
        match self {
            StampClock::Monotonic => "CLOCK_MONOTONIC",
            StampClock::Realtime => "CLOCK_REALTIME",
        }
    }
    #[inline]
    pub fn now(self) -> i64 {
        match self {
            StampClock::Monotonic => monotonic_ns(),
            StampClock::Realtime => rtlab_sys::clock::realtime_ns(),
        }
    }
}

/// The definition of a one-way sample stamped on `clock`.
pub fn oneway_definition(clock: StampClock) -> String {
    match clock {
        StampClock::Monotonic => Mode::Oneway.definition().to_string(),
        StampClock::Realtime => "one-way latency: receive stamp (subscriber, CLOCK_REALTIME right after the take returns) - send stamp \
             (publisher, CLOCK_REALTIME right before publish), two clocks stated to be synchronised (or a ROS 2 peer's system \
             clock); their offset is in every sample; not RTT/2"
            .to_string(),
    }
}

/// The transports, named as on the CLI. `dds` is read as `cyclonedds` (its name before
/// there were three DDS implementations; results stored then say `dds`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    Intra,
    Udp,
    Shm,
    Zenoh,
    #[serde(rename = "cyclonedds", alias = "dds")]
    CycloneDds,
    #[serde(rename = "fastdds")]
    FastDds,
    #[serde(rename = "rustdds")]
    RustDds,
    /// ROS 2 itself: rcl and the installation's RMW ([`crate::ros2`]).
    #[serde(rename = "ros2")]
    Ros2,
}

impl TransportKind {
    pub const ALL: [TransportKind; 8] = [
        TransportKind::Intra,
        TransportKind::Udp,
        TransportKind::Shm,
        TransportKind::Zenoh,
        TransportKind::CycloneDds,
        TransportKind::FastDds,
        TransportKind::RustDds,
        TransportKind::Ros2,
    ];
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Intra => "intra",
            TransportKind::Udp => "udp",
            TransportKind::Shm => "shm",
            TransportKind::Zenoh => "zenoh",
            TransportKind::CycloneDds => "cyclonedds",
            TransportKind::FastDds => "fastdds",
            TransportKind::RustDds => "rustdds",
            TransportKind::Ros2 => "ros2",
        }
    }
    pub fn parse(s: &str) -> Option<TransportKind> {
        let s = if s == "dds" { "cyclonedds" } else { s };
        Self::ALL.into_iter().find(|k| k.name() == s)
    }
    /// A DDS implementation, or ROS 2 itself (`ros2`, whose DDS RMWs speak the same RTPS
    /// and ROS 2 naming): they speak to each other, and to ROS 2 nodes; they take a domain,
    /// an interface and peers.
    pub fn is_dds(self) -> bool {
        matches!(
            self,
            TransportKind::CycloneDds
                | TransportKind::FastDds
                | TransportKind::RustDds
                | TransportKind::Ros2
        )
    }
}

/// How a process opens its transport (serialized to role processes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransportSpec {
    pub kind: TransportKind,
    /// zenoh: endpoints this process listens on (e.g. `tcp/127.0.0.1:7447`).
    pub listen: Vec<String>,
    /// zenoh: endpoints this process connects to.
    pub connect: Vec<String>,
    /// dds: the domain id (None: [`crate::default_dds_domain`]).
    #[serde(default)]
    pub domain: Option<u32>,
    /// dds: the network interface (name like `eth0`, or one of its addresses) discovery and
    /// data use; None: loopback only (`lo`). udp: the address this process binds (None:
    /// 127.0.0.1).
    #[serde(default)]
    pub interface: Option<String>,
    /// dds: unicast discovery peers (addresses); none with an `interface`: multicast
    /// discovery on it. udp: the other process's rendezvous address (`IP:PORT`).
    #[serde(default)]
    pub peers: Vec<String>,
    /// zenoh: `peer` (default) or `client` (connect to a router or peer only).
    #[serde(default)]
    pub zenoh_mode: Option<String>,
    /// shm: every receiver busy-polls (`--wait busy-poll`): no wake-up notification per
    /// message and no listener, as iceoryx2's own benchmark.
    #[serde(default)]
    pub busy_poll: bool,
    /// fastdds: its shared-memory transport (default, off, or another segment size).
    #[serde(default)]
    pub fastdds_shm: crate::fastdds::Shm,
    /// fastdds: which Fast DDS library (Debian's 2.9, or the ROS 2 installation's).
    #[serde(default)]
    pub fastdds_lib: crate::fastdds::FastDdsLib,
    /// ros2: the installation (`--ros2-prefix`; None: found as [`crate::ros2::install`]
    /// says). The probe resolves it once, so that its role processes load the same one.
    #[serde(default)]
    pub ros2_prefix: Option<String>,
    /// ros2: the RMW (`--rmw`; None: `RMW_IMPLEMENTATION`, else the installation's default).
    #[serde(default)]
    pub rmw: Option<String>,
    /// ros2: how the probe found `ros2_prefix` when it resolved it (recorded as found).
    #[serde(default)]
    pub ros2_found_by: Option<String>,
}

impl TransportSpec {
    pub fn new(kind: TransportKind) -> Self {
        TransportSpec {
            kind,
            listen: Vec::new(),
            connect: Vec::new(),
            domain: None,
            interface: None,
            peers: Vec::new(),
            zenoh_mode: None,
            busy_poll: false,
            fastdds_shm: crate::fastdds::Shm::Default,
            fastdds_lib: crate::fastdds::FastDdsLib::Debian,
            ros2_prefix: None,
            rmw: None,
            ros2_found_by: None,
        }
    }
}

/// Open a transport in this process.
pub fn open_transport(spec: &TransportSpec) -> Result<Arc<dyn Transport>, TransportError> {
    crate::open(spec)
}

/// Real-time settings of rtlab's own threads (the shared type). CPUs are used round
/// robin: sender first, then subscriber 0, 1, ... (None: not pinned). Processes are never
/// pinned whole: middleware threads float. `mlockall` is the role processes' memory lock.
pub use rtlab_core::rt::RtSettings as RtSpec;

/// What the probe does with its real-time settings.
trait RtUse {
    fn cpu(&self, slot: usize) -> Option<usize>;
    fn apply_policy_here(&self) -> Result<(), String>;
    fn spec(&self, name: &str, slot: usize) -> ThreadSpec;
}

impl RtUse for RtSpec {
    /// The CPU of app thread `slot` (0: sender, 1 + i: subscriber i).
    fn cpu(&self, slot: usize) -> Option<usize> {
        self.cpu_of(slot)
    }
    /// Set the calling thread's policy (so that threads it creates later inherit it).
    fn apply_policy_here(&self) -> Result<(), String> {
        if self.policy.is_realtime() {
            set_current_policy(self.policy, self.priority).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
    fn spec(&self, name: &str, slot: usize) -> ThreadSpec {
        ThreadSpec {
            name: name.into(),
            policy: self.policy,
            priority: self.priority,
            cpus: self.cpu(slot).map(|c| vec![c]),
            stack_bytes: 512 * 1024,
        }
    }
}

/// The whole probe.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PubsubConfig {
    pub transport: TransportSpec,
    /// The far side's transport (the pong or the subscribers) when it is another DDS
    /// implementation than `transport`'s: a cross-implementation case (None: the same).
    #[serde(default)]
    pub far_transport: Option<TransportKind>,
    pub mode: Mode,
    pub wait: WaitStyle,
    pub qos: Qos,
    /// Message sizes in bytes (header included), swept.
    pub payloads: Vec<usize>,
    /// Send periods (ns), swept.
    pub periods_ns: Vec<i64>,
    /// Subscriber counts, swept (one stream per subscriber).
    pub subscribers: Vec<usize>,
    /// Measured time of each case.
    pub case_duration_ns: i64,
    /// Or at most this many messages per case.
    pub case_messages: Option<u64>,
    /// Later than this after sending: `late`; never: `lost`.
    pub loss_timeout_ns: i64,
    /// Samples above it are missed deadlines (None: the period).
    pub deadline_ns: Option<i64>,
    /// Subscribers as threads of this process instead of processes.
    pub in_process: bool,
    /// Policy, priority and CPUs of rtlab's threads; `mlockall`: role processes lock their
    /// memory (the caller locks its own).
    pub rt: RtSpec,
    pub window_ns: i64,
    /// Middleware threads (by name) given their own SCHED_FIFO priority (S3: DDS 70-80).
    #[serde(default)]
    pub thread_priorities: Vec<ThreadPriority>,
    /// Raise this flag on the first sample above its threshold (`--trace-on-spike`):
    /// receivers in this process only (roundtrip pong receivers, `--in-process` subscribers).
    #[serde(skip)]
    pub spike: Option<rtlab_core::sink::SpikeHook>,
    /// One role run by hand on this host, its peer started by hand elsewhere (None: the
    /// probe starts every role itself).
    #[serde(default)]
    pub by_hand: Option<ByHand>,
    /// The clock of one-way stamps (round trips always use CLOCK_MONOTONIC: one clock).
    #[serde(default)]
    pub stamp_clock: StampClock,
    /// When pings go out (roundtrip): on the grid, or closed loop.
    #[serde(default)]
    pub schedule: Schedule,
}

/// A role run by hand (`rtlab pubsub --role R --topic T` on each machine).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByHand {
    pub role: HandRole,
    /// Oneway: data on `T`; roundtrip: pings on `T_ping`, pongs on `T_pong`.
    pub topic: String,
}

/// The roles a user can run by hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HandRole {
    /// Sends pings on the grid and measures the round trips through a pong elsewhere.
    Ping,
    /// Echoes every ping back, unchanged.
    Pong,
    /// Publishes on the grid (its send lateness measured); subscribers are elsewhere.
    Pub,
    /// Receives and measures one-way latency against the publisher's send stamps.
    Sub,
}

impl HandRole {
    pub fn name(self) -> &'static str {
        match self {
            HandRole::Ping => "ping",
            HandRole::Pong => "pong",
            HandRole::Pub => "pub",
            HandRole::Sub => "sub",
        }
    }
}

/// A middleware thread, named as in /proc/<pid>/task/<tid>/comm (prefix match, e.g. `recv`,
/// `tev`, `dq.user` for Cyclone DDS), and the SCHED_FIFO priority to give it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadPriority {
    pub name: String,
    pub priority: i32,
}

/// Give this process's threads named by `rules` their SCHED_FIFO priority (through
/// util-linux `chrt -f -p`, once, before measuring). Returns what was done, one line per
/// thread; a rule that names no thread is an error listing the threads there are.
pub fn apply_thread_priorities(rules: &[ThreadPriority]) -> Result<Vec<String>, String> {
    if rules.is_empty() {
        return Ok(Vec::new());
    }
    let list = || -> Result<Vec<(String, String)>, String> {
        let mut threads = Vec::new();
        for e in std::fs::read_dir("/proc/self/task")
            .map_err(|e| format!("/proc/self/task: {e}"))?
            .flatten()
        {
            let tid = e.file_name().to_string_lossy().to_string();
            if let Ok(comm) = std::fs::read_to_string(e.path().join("comm")) {
                threads.push((tid, comm.trim().to_string()));
            }
        }
        Ok(threads)
    };
    // libraries start some threads lazily (Cyclone's `recv` once discovery runs): give them 2 s
    let end = monotonic_ns() + 2_000_000_000;
    let mut threads = list()?;
    while !rules.iter().all(|r| threads.iter().any(|(_, c)| c.starts_with(&r.name)))
        && monotonic_ns() < end
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
        threads = list()?;
    }
    let mut done = Vec::new();
    for r in rules {
        let matched: Vec<&(String, String)> =
            threads.iter().filter(|(_, c)| c.starts_with(&r.name)).collect();
        if matched.is_empty() {
            let mut names: Vec<&str> = threads.iter().map(|(_, c)| c.as_str()).collect();
            names.sort();
            names.dedup();
            return Err(format!(
                "--thread-priority {}={}: no thread named {} here (threads: {})",
                r.name,
                r.priority,
                r.name,
                names.join(", ")
            ));
        }
        for (tid, comm) in matched {
            let o = Command::new("chrt")
                .args(["-f", "-p", &r.priority.to_string(), tid])
                .output()
                .map_err(|e| format!("--thread-priority: running chrt (util-linux): {e}"))?;
            if !o.status.success() {
                return Err(format!(
                    "--thread-priority {}={}: chrt refused thread {comm} ({tid}): {}",
                    r.name,
                    r.priority,
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
            }
            done.push(format!("thread {comm} (tid {tid}) -> fifo {}", r.priority));
        }
    }
    Ok(done)
}

impl PubsubConfig {
    /// The clock of the stamps the subscribers compare: `stamp_clock` in oneway, always
    /// CLOCK_MONOTONIC in roundtrip (the pinger compares its own stamps).
    pub fn oneway_clock(&self) -> StampClock {
        match self.mode {
            Mode::Oneway => self.stamp_clock,
            Mode::Roundtrip => StampClock::Monotonic,
        }
    }

    /// Messages sent in one case of this period.
    pub fn messages_of(&self, period_ns: i64) -> u64 {
        let by_time = (self.case_duration_ns / period_ns.max(1)).max(1) as u64;
        self.case_messages.map_or(by_time, |m| m.min(by_time).max(1))
    }
    fn cases(&self) -> Vec<(usize, i64, usize)> {
        let mut v = Vec::new();
        for &n in &self.subscribers {
            for &p in &self.periods_ns {
                for &len in &self.payloads {
                    v.push((len, p, n));
                }
            }
        }
        v
    }
}

/// What a role (a subscriber process or thread) does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoleKind {
    /// oneway: receive, stamp, record; report at the end.
    Subscriber,
    /// roundtrip: republish every message unchanged on `topic_out`.
    Echo,
}

/// Everything a role needs (passed as JSON to role processes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoleConfig {
    pub transport: TransportSpec,
    pub kind: RoleKind,
    pub index: usize,
    pub topic_in: String,
    pub topic_out: Option<String>,
    pub qos: Qos,
    pub wait: WaitStyle,
    pub max_len: usize,
    pub deadline_ns: i64,
    pub loss_timeout_ns: i64,
    pub window_ns: i64,
    pub window_capacity: usize,
    /// The role gives up after this long (ns from its start).
    pub run_timeout_ns: i64,
    pub rt: RtSpec,
    /// Lock the role process's memory (mlockall).
    #[serde(default)]
    pub mlockall: bool,
    #[serde(default)]
    pub thread_priorities: Vec<ThreadPriority>,
    /// The clock of the stamps a subscriber compares (one-way); round trips: monotonic.
    #[serde(default)]
    pub stamp_clock: StampClock,
    /// Raise this flag on the first sample above its threshold; in this process only (a
    /// role process gets none).
    #[serde(skip)]
    pub spike: Option<rtlab_core::sink::SpikeHook>,
}

/// What a receiver measured and counted (sent from role processes as JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReceiverReport {
    /// Statistics, histogram and windows of the samples (names/labels filled by the parent).
    pub stream: Stream,
    /// Distinct measured messages received (samples + late).
    pub received: u64,
    pub late: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
    /// Messages with a sequence number outside the measured range.
    pub malformed: u64,
    /// The lowest and highest measured sequence numbers received (a subscriber by hand
    /// joins a publisher's stream wherever it is: its losses are counted between the two).
    #[serde(default)]
    pub first_seq: Option<u64>,
    #[serde(default)]
    pub last_seq: Option<u64>,
}

impl ReceiverReport {
    /// Messages missing between the first and the last one received.
    pub fn lost_between(&self) -> u64 {
        match (self.first_seq, self.last_seq) {
            (Some(f), Some(l)) => (l - f + 1).saturating_sub(self.received),
            _ => 0,
        }
    }
}

/// Lines a role writes to its parent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoleEvent {
    /// Ports created.
    Ready,
    /// A warm-up message arrived: its number (the warm-up bit cleared). Receivers report
    /// every one until their first measured message; set-up ends on the second stage
    /// (see [`Warmup`]).
    Warm(u64),
    /// Finished; a subscriber role carries its report.
    Done(Option<Box<ReceiverReport>>),
    Failed(String),
}

impl RoleEvent {
    /// The role's last event (it reported or failed).
    pub fn is_last(&self) -> bool {
        matches!(self, RoleEvent::Done(_) | RoleEvent::Failed(_))
    }
}

/// Errors that stop the probe.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Setup(String),
    #[error("real-time settings: {0}")]
    Rt(String),
}

impl ProbeError {
    /// Bad input (exit 2 with one line).
    pub fn is_bad_input(&self) -> bool {
        match self {
            ProbeError::Transport(t) => t.is_bad_input(),
            ProbeError::Invalid(_) => true,
            _ => false,
        }
    }
}

/// One case measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    pub payload: usize,
    pub period_ns: i64,
    pub subscribers: usize,
    pub published: u64,
    pub overruns: u64,
    /// One per subscriber, in subscriber order.
    pub streams: Vec<Stream>,
    /// p50 of the slowest subscriber - p50 of the fastest (None with fewer than 2).
    pub p50_spread_ns: Option<i64>,
    pub fastest: Option<usize>,
    pub slowest: Option<usize>,
    /// Why this case measured nothing (it could not run here); None when it ran.
    #[serde(default)]
    pub error: Option<String>,
    /// What `--thread-priority` did in the publisher's process.
    #[serde(default)]
    pub thread_priorities_set: Vec<String>,
    /// The publisher's own lateness: each message's send time - its slot on the grid
    /// (`<case>.pub.send_lateness`); None when the case did not run.
    #[serde(default)]
    pub publisher: Option<Stream>,
    /// A publisher by hand: the subscribers it had when its first message went.
    #[serde(default)]
    pub matched_subscribers: Option<MatchedSubscribers>,
}

/// What a publisher by hand knew of its subscribers (elsewhere, started by hand) before its
/// first measured message: it waits for one, as a ping waits for its pong.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchedSubscribers {
    /// Subscribers matched with the publisher when its first message went (the middleware's
    /// count, [`Publisher::matched`]); None: the transport cannot tell, it published at once.
    pub count: Option<usize>,
    /// How long it waited for the first subscriber.
    pub waited_ns: i64,
    /// Then how long it let a reliable match settle.
    pub settle_ns: i64,
}

impl MatchedSubscribers {
    /// The run's note.
    pub fn note(&self, transport: &str) -> String {
        match self.count {
            Some(n) => format!(
                "pub by hand: {n} subscriber{} matched when the first message went (label matched_subscribers): waited {} for the first{}",
                if n == 1 { "" } else { "s" },
                rtlab_core::units::Nanos(self.waited_ns),
                if self.settle_ns > 0 {
                    format!(", then {} until the subscribers acknowledged a warm-up message (reliable: the path was current both ways)", rtlab_core::units::Nanos(self.settle_ns))
                } else {
                    String::new()
                }
            ),
            None => format!(
                "pub by hand: {transport} cannot tell whether a subscriber matched: published at once (its first messages may have reached no one)"
            ),
        }
    }
}

impl CaseResult {
    fn failed(payload: usize, period_ns: i64, subscribers: usize, why: String) -> CaseResult {
        CaseResult {
            payload,
            period_ns,
            subscribers,
            published: 0,
            overruns: 0,
            streams: Vec::new(),
            p50_spread_ns: None,
            fastest: None,
            slowest: None,
            error: Some(why),
            thread_priorities_set: Vec::new(),
            publisher: None,
            matched_subscribers: None,
        }
    }
}

/// The probe's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PubsubOutcome {
    pub cases: Vec<CaseResult>,
    pub qos_mapping: QosMapping,
    pub notes: Vec<String>,
    pub interrupted: bool,
    pub duration_ns: i64,
    /// What `ros2` ran on (this host's side; `config.ros2` in results), when it was used here.
    #[serde(default)]
    pub ros2: Option<crate::ros2::Ros2Facts>,
}

/// How role processes are started: the command that runs [`role_main`] with this JSON.
pub type Launcher<'a> = &'a dyn Fn(&str) -> Command;

/// Check the configuration against the transport without starting anything.
pub fn validate(cfg: &PubsubConfig, transport: &dyn Transport) -> Result<QosMapping, ProbeError> {
    if cfg.payloads.is_empty() || cfg.periods_ns.is_empty() || cfg.subscribers.is_empty() {
        return Err(ProbeError::Invalid(
            "--payload, --rate and --subscribers need at least one value each".into(),
        ));
    }
    if let Some(p) = cfg.periods_ns.iter().find(|p| **p <= 0) {
        return Err(ProbeError::Invalid(format!("--rate: period {p} ns must be above zero")));
    }
    if cfg.subscribers.contains(&0) {
        return Err(ProbeError::Invalid(
            "--subscribers 0: at least one subscriber is needed".into(),
        ));
    }
    if cfg.loss_timeout_ns <= 0 {
        return Err(ProbeError::Invalid("--loss-timeout: must be above zero".into()));
    }
    if cfg.schedule == Schedule::ClosedLoop {
        if cfg.mode != Mode::Roundtrip {
            return Err(ProbeError::Invalid(
                "--schedule closed-loop: a round trip schedule (give --mode roundtrip)".into(),
            ));
        }
        if cfg.periods_ns.len() > 1 {
            return Err(ProbeError::Invalid(
                "--rate: no rate sweep in closed loop (the next ping goes when the pong is in)"
                    .into(),
            ));
        }
    }
    for &len in &cfg.payloads {
        check_len(transport.name(), transport.max_message(), len)?;
    }
    Ok(transport.map_qos(&cfg.qos)?)
}

/// The far side's transport kind, checked: another one only between DDS implementations,
/// only with role processes (not threads, not by hand). On one host the far transport is
/// opened here once, so that a QoS or a message size it cannot carry is one line before
/// anything runs (a far host's agent checks its own).
///
/// `fastdds` and a `ros2` whose RMW brings another Fast DDS never meet in one process
/// ([`crate::dl::claim_fast_dds`]): for that pair the far side's limits are checked without
/// opening it (`fastdds` honours every QoS; `ros2`'s installation was found by the caller).
/// Returns the far kind, and what a `ros2` far side on this host runs on.
fn check_far_transport(
    cfg: &PubsubConfig,
    spec: &TransportSpec,
    far_host: bool,
) -> Result<(TransportKind, Option<crate::ros2::Ros2Facts>), ProbeError> {
    let Some(kind) = cfg.far_transport.filter(|k| *k != spec.kind) else {
        return Ok((spec.kind, None));
    };
    far_transport_rule(spec.kind, kind, cfg.in_process, cfg.by_hand.is_some())
        .map_err(|m| ProbeError::Invalid(format!("--far-transport {m}")))?;
    if far_host {
        return Ok((kind, None));
    }
    let mut s = spec.clone();
    s.kind = kind;
    let pair = [spec.kind, kind];
    if pair.contains(&TransportKind::FastDds) && pair.contains(&TransportKind::Ros2) {
        let (name, max) = match kind {
            TransportKind::Ros2 => ("ros2", crate::ros2::MAX_MESSAGE),
            _ => ("fastdds", crate::fastdds::MAX_MESSAGE),
        };
        for &len in &cfg.payloads {
            check_len(name, max, len)?;
        }
        let inst = crate::ros2_installation(&s).map_err(ProbeError::Invalid)?;
        // Found here: Fast DDS 3 (the package registry's 3.2.2 under rmw_fastrtps_cpp) on one
        // host with ROS 2's LOCALHOST range announces the host's own address (its first
        // interface's, not 127.0.0.1), which rtlab's fastdds, whitelisted to 127.0.0.1, does
        // not send to: the two never meet on loopback (across a link they do)
        let dds3 = inst.middleware.as_ref().is_some_and(|m| {
            m.name == "Fast DDS"
                && m.version.as_deref().and_then(|v| v.split('.').next()?.parse::<u32>().ok())
                    >= Some(3)
        });
        if dds3 && s.interface.is_none() {
            return Err(ProbeError::Invalid(format!(
                "--far-transport {}: fastdds (Fast DDS 2.9, loopback only) and ros2 ({}) do not meet on one host: Fast DDS 3 announces this host's own address rather than 127.0.0.1, which the loopback-only fastdds does not reach (docs/ros2.md); run them across a link (--netns NS --far netns:NS2), or pair ros2 with cyclonedds",
                kind.name(),
                inst.describe()
            )));
        }
        let facts = (kind == TransportKind::Ros2).then(|| {
            let net = crate::ros2::Ros2Network::of(s.interface.as_deref(), &s.peers);
            crate::ros2::Ros2Facts::of(&inst, &net)
        });
        return Ok((kind, facts));
    }
    let t = crate::open(&s)?;
    for &len in &cfg.payloads {
        check_len(t.name(), t.max_message(), len)?;
    }
    t.map_qos(&cfg.qos)?;
    Ok((kind, t.ros2_facts()))
}

/// When the far side may use transport `far` while this side uses `near` (another one):
/// between DDS implementations, with role processes (`in_process`, `by_hand`: not). The
/// error starts with `far`'s name.
pub fn far_transport_rule(
    near: TransportKind,
    far: TransportKind,
    in_process: bool,
    by_hand: bool,
) -> Result<(), String> {
    if !(far.is_dds() && near.is_dds()) {
        return Err(format!(
            "{}: with transport {}: only DDS implementations speak to each other ({})",
            far.name(),
            near.name(),
            dds_names()
        ));
    }
    if in_process || by_hand {
        return Err(format!(
            "{}: the far side is a process rtlab starts (not with {})",
            far.name(),
            if in_process { "in-process subscribers" } else { "a role by hand" }
        ));
    }
    Ok(())
}

/// The DDS implementations, as the CLI names them.
pub fn dds_names() -> String {
    let names: Vec<&str> =
        TransportKind::ALL.iter().filter(|k| k.is_dds()).map(|k| k.name()).collect();
    names.join(", ")
}

/// Roles on a far host: another computer, or a network namespace, reached through an agent.
pub trait FarRoles: Sync {
    /// Start role `rc` there; its events go to `events`, tagged with `rc.index`, ending with
    /// `Done` or `Failed` (also when the link to the far host is lost).
    fn start(
        &self,
        rc: &RoleConfig,
        events: mpsc::Sender<(usize, RoleEvent)>,
    ) -> Result<Box<dyn FarRole>, String>;
}

/// A role started on a far host.
pub trait FarRole: Send {
    /// Ask it to stop: it reports (`Done`) and ends.
    fn stop(&mut self);
}

/// Where the roles run when they are on a far host, and the two addresses of the link.
pub struct FarPlacement<'a> {
    /// This host's address on the link.
    pub near: String,
    /// The far host's address on the link.
    pub far: String,
    pub roles: &'a dyn FarRoles,
}

fn ip_in_endpoint(ip: &str) -> String {
    if ip.contains(':') {
        format!("[{ip}]")
    } else {
        ip.to_string()
    }
}

/// Run every case. `progress(done, total)` is called between cases.
pub fn run(
    cfg: &PubsubConfig,
    launcher: Launcher,
    stop: Arc<AtomicBool>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<PubsubOutcome, ProbeError> {
    run_with(cfg, launcher, None, stop, progress)
}

/// Run every case, the roles on `far` when given (else processes of this host started by
/// `launcher`, or threads).
pub fn run_with(
    cfg: &PubsubConfig,
    launcher: Launcher,
    far: Option<&FarPlacement>,
    stop: Arc<AtomicBool>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<PubsubOutcome, ProbeError> {
    let started = monotonic_ns();
    if let Some(f) = far {
        match cfg.transport.kind {
            TransportKind::Intra | TransportKind::Shm => {
                return Err(ProbeError::Invalid(format!(
                    "--transport {}: {} reaches one host only; a far side needs dds, zenoh or udp",
                    cfg.transport.kind.name(),
                    if cfg.transport.kind == TransportKind::Shm {
                        "shared memory"
                    } else {
                        "a process's own memory"
                    }
                )))
            }
            _ if cfg.in_process => return Err(ProbeError::Invalid(
                "--in-process: the subscribers are on the far side, not threads of this process"
                    .into(),
            )),
            _ => {}
        }
        if f.near.is_empty() || f.far.is_empty() {
            return Err(ProbeError::Invalid("far side: no address for the link".into()));
        }
    }
    // middleware threads are created after this, so they inherit the policy
    cfg.rt.apply_policy_here().map_err(ProbeError::Rt)?;
    let mut spec = cfg.transport.clone();
    spec.busy_poll = cfg.wait == WaitStyle::BusyPoll;
    if spec.kind == TransportKind::Zenoh && spec.listen.is_empty() {
        let ip = far.map(|f| f.near.as_str()).unwrap_or("127.0.0.1");
        spec.listen = vec![format!(
            "tcp/{}:{}",
            ip_in_endpoint(ip),
            free_tcp_port(ip).map_err(ProbeError::Setup)?
        )];
    }
    if spec.kind.is_dds() && spec.domain.is_none() {
        spec.domain = Some(crate::default_dds_domain());
    }
    // RustDDS has no unicast peers: where it is one of the two sides, both meet by multicast;
    // so do ROS 2 nodes across a link (ROS 2's default discovery, no static peers: Humble has
    // none)
    let with_rustdds =
        spec.kind == TransportKind::RustDds || cfg.far_transport == Some(TransportKind::RustDds);
    let with_ros2 =
        spec.kind == TransportKind::Ros2 || cfg.far_transport == Some(TransportKind::Ros2);
    let multicast = with_rustdds || with_ros2;
    // ros2 here (the near side, or a far side on this host): the installation is found once,
    // so that every process of the run loads the same one (a far host finds its own)
    let fastdds_on_ros2 = spec.fastdds_lib == crate::fastdds::FastDdsLib::Ros2
        && (spec.kind == TransportKind::FastDds
            || cfg.far_transport == Some(TransportKind::FastDds));
    if spec.kind == TransportKind::Ros2
        || (far.is_none() && cfg.far_transport == Some(TransportKind::Ros2))
        || fastdds_on_ros2
    {
        let inst = crate::ros2_installation(&spec).map_err(ProbeError::Invalid)?;
        spec.ros2_prefix = Some(inst.prefix.display().to_string());
        spec.rmw = Some(inst.rmw);
        spec.ros2_found_by = Some(inst.found_by);
    }
    if let Some(f) = far {
        if spec.kind.is_dds() || spec.kind == TransportKind::Udp {
            spec.interface.get_or_insert_with(|| f.near.clone());
            if spec.peers.is_empty() && !multicast {
                spec.peers = vec![f.far.clone()];
            }
        }
    }
    // rustdds on one host (either side), no interface: RustDDS cannot be limited to an
    // interface and ignores lo, so this thread moves into a private network namespace (lo +
    // a veth end, rustdds_t::enter_private_netns) before the transport is opened (a DDS
    // other side uses that veth end too, with multicast discovery); the role processes are
    // spawned from this thread below and are born there too. The namespace has no name: it
    // disappears with its last thread or process, nothing to remove. The guard moves this
    // thread back when run_with returns (after `transport` is dropped).
    let private_netns = if with_rustdds
        && far.is_none()
        && spec.interface.is_none()
        && cfg.by_hand.is_none()
    {
        let g = crate::rustdds_t::enter_private_netns().map_err(|e| {
            ProbeError::Setup(format!(
                "rustdds: on one host RustDDS runs in a private network namespace (it cannot be limited to an interface and ignores lo): {e}; or run it across a link (--far netns:NAME), or accept every interface (--interface all)"
            ))
        })?;
        spec.interface = Some(crate::rustdds_t::PRIVATE_IF.into());
        Some(g)
    } else {
        None
    };
    let transport = open_transport(&spec)?;
    let qos_mapping = validate(cfg, transport.as_ref())?;
    if let Some(h) =
        cfg.by_hand.as_ref().filter(|h| matches!(h.role, HandRole::Pong | HandRole::Sub))
    {
        return run_peer_by_hand(cfg, h, transport, qos_mapping, &stop, started);
    }
    let (far_kind, far_ros2) = check_far_transport(cfg, &spec, far.is_some())?;
    // the transport's own labels (fastdds_version, rmw, ...); streams through ROS 2 on the
    // far side say which too (rmw, ros_distro)
    let mut ros2_labels = transport.labels();
    if let Some(f) = far_ros2.as_ref().filter(|_| transport.ros2_facts().is_none()) {
        ros2_labels.extend(f.labels());
    }
    let mut role_spec = role_spec_of(&spec, far_kind, far, multicast);
    if far.is_some() {
        // a far host finds its own ROS 2 (the user's flags, not this host's paths)
        role_spec.ros2_prefix = cfg.transport.ros2_prefix.clone();
        role_spec.rmw = cfg.transport.rmw.clone();
        role_spec.ros2_found_by = None;
    }
    let in_process = far.is_none() && (cfg.in_process || spec.kind == TransportKind::Intra);
    let cases = cfg.cases();
    let mut out = Vec::new();
    for (ci, &(len, period, n)) in cases.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        progress(ci, cases.len());
        let topic = match &cfg.by_hand {
            Some(h) => h.topic.clone(),
            None => {
                format!("rtlab_{}_{}_{}", std::process::id(), started.rem_euclid(1_000_000), ci)
            }
        };
        let case = CaseSetup {
            cfg,
            transport: transport.clone(),
            role_spec: if in_process { spec.clone() } else { role_spec.clone() },
            in_process,
            topic,
            len,
            period,
            n,
            far,
            labels: &ros2_labels,
        };
        match case.run(launcher, &stop) {
            Ok(c) => out.push(c),
            // bad input stops everything; a case that cannot run here is recorded, the sweep goes on
            Err(e) if e.is_bad_input() || matches!(e, ProbeError::Rt(_)) => return Err(e),
            Err(e) => out.push(CaseResult::failed(len, period, n, e.to_string())),
        }
    }
    progress(out.len(), cases.len());
    let mut notes = transport.notes();
    if let Some(m) = out.iter().find_map(|c| c.matched_subscribers.as_ref()) {
        notes.insert(0, m.note(transport.name()));
    }
    if let Some(c) = out.iter().find(|c| !c.thread_priorities_set.is_empty()) {
        notes.extend(c.thread_priorities_set.iter().map(|d| format!("publisher process: {d}")));
    }
    if !cfg.thread_priorities.is_empty() && !in_process {
        notes.push("subscriber processes: the same --thread-priority rules applied to their middleware threads".into());
    }
    if spec.kind == TransportKind::Intra && !cfg.in_process {
        notes.push("intra: subscribers are threads of the publisher's process (same process by definition)".into());
    }
    let fastdds_both_sides = spec.kind == TransportKind::FastDds
        && cfg.far_transport.is_none_or(|k| k == TransportKind::FastDds);
    let largest = cfg.payloads.iter().copied().max().unwrap_or(0);
    notes.extend(crate::fastdds::shm_segment_note(largest, fastdds_both_sides, spec.fastdds_shm));
    if private_netns.is_some() {
        notes.push(format!(
            "rustdds: ran in a private network namespace (lo, and a veth pair, {} {}/24 and its other end without an address: every packet stayed inside) because RustDDS 0.11 cannot be limited to one interface and ignores lo",
            crate::rustdds_t::PRIVATE_IF,
            crate::rustdds_t::PRIVATE_ADDR
        ));
    }
    let ros2 = transport.ros2_facts().or(far_ros2);
    drop(transport);
    drop(private_netns);
    Ok(PubsubOutcome {
        interrupted: stop.load(Ordering::Relaxed),
        cases: out,
        qos_mapping,
        notes,
        duration_ns: monotonic_ns() - started,
        ros2,
    })
}

/// The transport of the role processes (pongs, subscribers; `far_kind` on the far side
/// or on this host), from the near side's `spec`: its domain, wait and Fast DDS shared
/// memory, its ROS 2 installation; on a far link, that host's address (and this one's as its
/// DDS/udp peer, not when either side discovers by `multicast`: rustdds, ros2); on one host,
/// a DDS keeps the near side's network.
fn role_spec_of(
    spec: &TransportSpec,
    far_kind: TransportKind,
    far: Option<&FarPlacement>,
    multicast: bool,
) -> TransportSpec {
    let mut role_spec = TransportSpec::new(far_kind);
    role_spec.connect = spec.listen.clone();
    role_spec.domain = spec.domain;
    role_spec.busy_poll = spec.busy_poll;
    role_spec.fastdds_shm = spec.fastdds_shm;
    role_spec.fastdds_lib = spec.fastdds_lib;
    role_spec.ros2_prefix = spec.ros2_prefix.clone();
    role_spec.rmw = spec.rmw.clone();
    role_spec.ros2_found_by = spec.ros2_found_by.clone();
    if let Some(f) = far {
        if far_kind.is_dds() || far_kind == TransportKind::Udp {
            role_spec.interface = Some(f.far.clone());
            if !multicast {
                role_spec.peers = vec![f.near.clone()];
            }
        }
    } else if far_kind.is_dds() {
        // one host: the same namespace (private or the caller's), the same network
        role_spec.interface = spec.interface.clone();
        role_spec.peers = spec.peers.clone();
    }
    role_spec
}

/// A pong or a subscriber by hand: one role in this process, on the case's first payload,
/// until Ctrl-C or the case's duration.
fn run_peer_by_hand(
    cfg: &PubsubConfig,
    h: &ByHand,
    transport: Arc<dyn Transport>,
    qos_mapping: QosMapping,
    stop: &Arc<AtomicBool>,
    started: i64,
) -> Result<PubsubOutcome, ProbeError> {
    let transport_notes = transport.notes();
    let transport_labels = transport.labels();
    let ros2 = transport.ros2_facts();
    let len = cfg.payloads.iter().copied().max().unwrap_or(64);
    let period = cfg.periods_ns.first().copied().unwrap_or(10_000_000);
    let duration_ns = cfg.messages_of(period) as i64 * period + cfg.loss_timeout_ns;
    let (kind, topic_in, topic_out) = match h.role {
        HandRole::Pong => {
            (RoleKind::Echo, format!("{}_ping", h.topic), Some(format!("{}_pong", h.topic)))
        }
        _ => (RoleKind::Subscriber, h.topic.clone(), None),
    };
    let rc = RoleConfig {
        transport: cfg.transport.clone(),
        kind,
        index: 0,
        topic_in,
        topic_out,
        qos: cfg.qos,
        wait: cfg.wait,
        max_len: len,
        deadline_ns: cfg.deadline_ns.unwrap_or(period),
        loss_timeout_ns: cfg.loss_timeout_ns,
        window_ns: cfg.window_ns,
        window_capacity: window_capacity(duration_ns, cfg.window_ns),
        run_timeout_ns: duration_ns,
        rt: cfg.rt.clone(),
        mlockall: false,
        thread_priorities: cfg.thread_priorities.clone(),
        stamp_clock: if kind == RoleKind::Subscriber {
            cfg.stamp_clock
        } else {
            StampClock::Monotonic
        },
        spike: cfg.spike.clone(),
    };
    let (tx, rx) = mpsc::channel::<RoleEvent>();
    let spec = cfg.rt.spec(&format!("rtlab-{}", h.role.name()), 1);
    let s2 = stop.clone();
    let t = spawn_rt(&spec, move || {
        let mut emit = |e: RoleEvent| {
            let _ = tx.send(e);
        };
        run_role(&rc, transport, &s2, &mut emit);
    })
    .map_err(|e| ProbeError::Rt(e.to_string()))?;
    let mut report = None;
    for e in rx.iter() {
        match e {
            RoleEvent::Failed(why) => return Err(ProbeError::Setup(why)),
            RoleEvent::Done(r) => report = r.map(|b| *b),
            RoleEvent::Ready | RoleEvent::Warm(_) => {}
        }
    }
    let _ = t.join();
    let mut case = CaseResult::failed(len, period, 1, String::new());
    case.error = None;
    if let Some(r) = report {
        let lost = r.lost_between();
        let mut s = r.stream;
        s.name = format!("{}.oneway.{}.sub", cfg.transport.kind.name(), h.topic);
        s.metric = Mode::Oneway.metric().into();
        s.definition = oneway_definition(cfg.stamp_clock);
        s.deadline_ns = cfg.deadline_ns.unwrap_or(period);
        s.labels.insert("role".into(), "sub".into());
        for (k, v) in &transport_labels {
            s.labels.insert(k.to_string(), v.clone());
        }
        s.labels.insert("topic".into(), h.topic.clone());
        s.stats.late = Some(r.late);
        s.stats.duplicates = Some(r.duplicates);
        s.stats.out_of_order = Some(r.out_of_order);
        s.stats.malformed = Some(r.malformed);
        // joined wherever the publisher was: lost = missing between first and last received
        s.stats.lost = Some(lost);
        if let (Some(f), Some(l)) = (r.first_seq, r.last_seq) {
            s.labels.insert("first_seq".into(), f.to_string());
            s.labels.insert("last_seq".into(), l.to_string());
        }
        case.published = r.received;
        case.streams.push(s);
    }
    Ok(PubsubOutcome {
        interrupted: stop.load(Ordering::Relaxed),
        cases: vec![case],
        qos_mapping,
        notes: vec![match h.role {
            HandRole::Pong => format!("pong by hand: echoed {0}_ping on {0}_pong until stopped", h.topic),
            _ => format!("sub by hand on {}: one-way latency = receive stamp here - the publisher's send stamp (its clock)", h.topic),
        }].into_iter().chain(transport_notes).collect(),
        duration_ns: monotonic_ns() - started,
        ros2,
    })
}

fn free_tcp_port(ip: &str) -> Result<u16, String> {
    let l = std::net::TcpListener::bind((ip, 0))
        .map_err(|e| format!("finding a free port on {ip}: {e}"))?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

struct CaseSetup<'a> {
    far: Option<&'a FarPlacement<'a>>,
    cfg: &'a PubsubConfig,
    transport: Arc<dyn Transport>,
    role_spec: TransportSpec,
    in_process: bool,
    topic: String,
    len: usize,
    period: i64,
    n: usize,
    /// Labels of every stream besides the case's own (ros2: `rmw`, `ros_distro`).
    labels: &'a [(&'static str, String)],
}

/// A started role: a thread or a process, with its stop signal.
enum RoleHandle {
    Thread {
        stop: Arc<AtomicBool>,
        thread: Option<rtlab_sys::sched::RtThread<()>>,
    },
    Process {
        child: Child,
        stdin: Option<ChildStdin>,
    },
    /// On the far host (its agent waits for it to end).
    Far(Box<dyn FarRole>),
}

impl RoleHandle {
    fn stop(&mut self) {
        match self {
            RoleHandle::Thread { stop, .. } => stop.store(true, Ordering::Relaxed),
            RoleHandle::Process { stdin, .. } => drop(stdin.take()), // EOF = stop
            RoleHandle::Far(r) => r.stop(),
        }
    }
    fn finish(mut self) {
        self.stop();
        match self {
            RoleHandle::Thread { thread, .. } => {
                if let Some(t) = thread {
                    let _ = t.join();
                }
            }
            RoleHandle::Far(_) => {}
            RoleHandle::Process { mut child, .. } => {
                rtlab_sys::process::wait_or_kill(&mut child, std::time::Duration::from_secs(5));
            }
        }
    }
}

/// Stops every role still running when dropped (also on an error path).
struct Roles(Vec<RoleHandle>);

impl Drop for Roles {
    fn drop(&mut self) {
        for r in self.0.drain(..) {
            r.finish();
        }
    }
}

fn window_capacity(duration_ns: i64, window_ns: i64) -> usize {
    ((duration_ns / window_ns.max(1)) as usize + 4).clamp(16, 1 << 16)
}

impl CaseSetup<'_> {
    fn role_config(&self, kind: RoleKind, index: usize, duration_ns: i64) -> RoleConfig {
        let cfg = self.cfg;
        RoleConfig {
            transport: self.role_spec.clone(),
            kind,
            index,
            topic_in: match kind {
                RoleKind::Subscriber => format!("{}_data", self.topic),
                RoleKind::Echo => format!("{}_ping", self.topic),
            },
            topic_out: (kind == RoleKind::Echo).then(|| format!("{}_pong_{index}", self.topic)),
            qos: cfg.qos,
            wait: cfg.wait,
            max_len: self.len,
            deadline_ns: cfg.deadline_ns.unwrap_or(self.period),
            loss_timeout_ns: cfg.loss_timeout_ns,
            window_ns: cfg.window_ns,
            window_capacity: window_capacity(duration_ns, cfg.window_ns),
            run_timeout_ns: 2 * SETUP_TIMEOUT_NS + duration_ns + cfg.loss_timeout_ns,
            rt: cfg.rt.clone(),
            mlockall: cfg.rt.mlockall,
            thread_priorities: cfg.thread_priorities.clone(),
            stamp_clock: cfg.oneway_clock(),
            spike: cfg.spike.clone(),
        }
    }

    fn start_role(
        &self,
        rc: RoleConfig,
        events: mpsc::Sender<(usize, RoleEvent)>,
        launcher: Launcher,
    ) -> Result<RoleHandle, ProbeError> {
        let index = rc.index;
        if let Some(f) = self.far {
            let mut rc = rc;
            // the far host's CPUs are its own
            rc.rt.cpus = None;
            return f
                .roles
                .start(&rc, events)
                .map(RoleHandle::Far)
                .map_err(|e| ProbeError::Setup(format!("far subscriber {index}: {e}")));
        }
        if self.in_process {
            let stop = Arc::new(AtomicBool::new(false));
            let s2 = stop.clone();
            let transport = self.transport.clone();
            let spec = rc.rt.spec(&format!("rtlab-sub{index}"), 1 + index);
            let thread = spawn_rt(&spec, move || {
                let mut emit = |e: RoleEvent| {
                    let _ = events.send((index, e));
                };
                run_role(&rc, transport, &s2, &mut emit);
            })
            .map_err(|e| ProbeError::Rt(e.to_string()))?;
            return Ok(RoleHandle::Thread { stop, thread: Some(thread) });
        }
        let json = serde_json::to_string(&rc).map_err(|e| ProbeError::Setup(e.to_string()))?;
        let mut cmd = launcher(&json);
        // a process group of its own: a terminal's Ctrl-C reaches only the parent, which
        // stops the roles itself (closing their stdin) and keeps what they measured
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        // no middleware socket of this process in the role's (a Fast DDS port held by the
        // child moved its participant to the next id and outlived the parent's participant)
        rtlab_sys::process::close_inherited_fds(&mut cmd);
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| ProbeError::Setup(format!("starting subscriber process {index}: {e}")))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let last_err = Arc::new(std::sync::Mutex::new(String::new()));
        let le = last_err.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !line.trim().is_empty() {
                    *le.lock().unwrap_or_else(|e| e.into_inner()) = line;
                }
            }
        });
        std::thread::spawn(move || {
            let mut ended = false;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(e) = parse_event(&line) {
                    ended |= matches!(e, RoleEvent::Done(_) | RoleEvent::Failed(_));
                    let _ = events.send((index, e));
                }
            }
            if !ended {
                std::thread::sleep(std::time::Duration::from_millis(50));
                let why = last_err.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let why = if why.is_empty() { "exited without a report".to_string() } else { why };
                let _ = events
                    .send((index, RoleEvent::Failed(format!("subscriber process {index}: {why}"))));
            }
        });
        Ok(RoleHandle::Process { child, stdin })
    }

    fn run(&self, launcher: Launcher, stop: &Arc<AtomicBool>) -> Result<CaseResult, ProbeError> {
        let cfg = self.cfg;
        // closed loop: as many round trips as fit in the case (or its count); no grid
        let closed = cfg.schedule == Schedule::ClosedLoop;
        let (count, duration_ns) = if closed {
            (cfg.case_messages.unwrap_or(u64::MAX), cfg.case_duration_ns)
        } else {
            let c = cfg.messages_of(self.period);
            (c, c as i64 * self.period)
        };
        let deadline_ns = match (cfg.deadline_ns, closed) {
            (Some(d), _) => d,
            (None, true) => cfg.loss_timeout_ns,
            (None, false) => self.period,
        };
        let (tx, rx) = mpsc::channel::<(usize, RoleEvent)>();
        let kind = match cfg.mode {
            Mode::Oneway => RoleKind::Subscriber,
            Mode::Roundtrip => RoleKind::Echo,
        };
        let by_hand = cfg.by_hand.is_some();
        let out_topic = match (cfg.mode, by_hand) {
            (Mode::Oneway, false) => format!("{}_data", self.topic),
            (Mode::Oneway, true) => self.topic.clone(),
            (Mode::Roundtrip, _) => format!("{}_ping", self.topic),
        };
        let mut publisher = self.transport.publisher(&out_topic, &cfg.qos, self.len)?;

        // roundtrip: the pong receivers live here, one thread each, started before the echoes
        let rstop = Arc::new(AtomicBool::new(false));
        // set once every receiver is warm: the closed loop's watchers hand their ports back
        let settled = Arc::new(AtomicBool::new(false));
        let mut receivers = JoinOnDrop::new(&rstop);
        let mut watchers = JoinOnDrop::new(&rstop);
        if cfg.mode == Mode::Roundtrip {
            for i in 0..self.n {
                let rc = self.role_config(RoleKind::Subscriber, i, duration_ns);
                let pong = if by_hand {
                    format!("{}_pong", self.topic)
                } else {
                    format!("{}_pong_{i}", self.topic)
                };
                let sub = self.transport.subscriber(&pong, &cfg.qos, self.len)?;
                let events = tx.clone();
                let rs = rstop.clone();
                let spec = cfg.rt.spec(&format!("rtlab-pong{i}"), 1 + i);
                if closed {
                    // until warm; then the pinger's own thread takes the pongs
                    let wait = cfg.wait;
                    let done = settled.clone();
                    let t = spawn_rt(&spec, move || {
                        let mut emit = |e: RoleEvent| {
                            let _ = events.send((1000 + i, e));
                        };
                        warm_watch(sub, wait, &rs, &done, &mut emit)
                    })
                    .map_err(|e| ProbeError::Rt(e.to_string()))?;
                    watchers.threads.push(t);
                    continue;
                }
                let t = spawn_rt(&spec, move || {
                    let mut emit = |e: RoleEvent| {
                        let _ = events.send((1000 + i, e));
                    };
                    receive_loop(sub, &rc, &rs, &mut emit)
                })
                .map_err(|e| ProbeError::Rt(e.to_string()))?;
                receivers.threads.push(t);
            }
        }
        // middleware threads exist once ports do (Cyclone starts `recv` lazily)
        let thread_priorities_set =
            apply_thread_priorities(&cfg.thread_priorities).map_err(ProbeError::Invalid)?;

        let mut roles = Roles(Vec::new());
        if !by_hand {
            for i in 0..self.n {
                let rc = self.role_config(kind, i, duration_ns);
                roles.0.push(self.start_role(rc, tx.clone(), launcher)?);
            }
        }
        drop(tx);

        // ready, then warm: warm-up messages until every receiver is warm ([`Warmup`]); by
        // hand the peer is started elsewhere: a ping waits for its pongs, a publisher cannot
        // know its subscribers and starts at once
        let mut ready = vec![by_hand; self.n];
        let mut warm: Vec<Warmup> = (0..self.n)
            .map(|_| if by_hand && cfg.mode == Mode::Oneway { Warmup::Warm } else { Warmup::Cold })
            .collect();
        let mut reports: Vec<Option<ReceiverReport>> = vec![None; self.n];
        let setup_end = monotonic_ns() + SETUP_TIMEOUT_NS;
        let mut k = 0u64;
        let mut next_warm = monotonic_ns();
        while !(ready.iter().all(|r| *r) && warm.iter().all(|w| *w == Warmup::Warm)) {
            if stop.load(Ordering::Relaxed) {
                return Err(ProbeError::Setup("interrupted during set-up".into()));
            }
            let now = monotonic_ns();
            if now > setup_end {
                let which = if !ready.iter().all(|r| *r) {
                    "did not start"
                } else if warm.iter().any(|w| matches!(w, Warmup::Matched { .. })) {
                    "received warm-up messages, but none sent after the first arrived (the path never became current)"
                } else {
                    "received nothing (discovery failed?)"
                };
                let idx: Vec<String> = (0..self.n)
                    .filter(|i| !(ready[*i] && warm[*i] == Warmup::Warm))
                    .map(|i| i.to_string())
                    .collect();
                return Err(ProbeError::Setup(format!(
                    "{}: subscriber(s) {} {which} within {} s",
                    self.transport.name(),
                    idx.join(","),
                    SETUP_TIMEOUT_NS / 1_000_000_000
                )));
            }
            if ready.iter().all(|r| *r) && now >= next_warm {
                publisher.publish(WARMUP_BIT | k, monotonic_ns(), self.len)?;
                k += 1;
                next_warm = now + warmup_period(self.period, self.len);
            }
            match rx.recv_timeout(std::time::Duration::from_millis(2)) {
                Ok((i, e)) => {
                    let (i, own) = if i >= 1000 { (i - 1000, true) } else { (i, false) };
                    match e {
                        RoleEvent::Ready => ready[i] = true,
                        RoleEvent::Warm(j) => {
                            if own || cfg.mode == Mode::Oneway {
                                warm[i] = warm[i].arrived(j, k);
                            }
                        }
                        RoleEvent::Failed(why) => return Err(ProbeError::Setup(why)),
                        RoleEvent::Done(r) => reports[i] = r.map(|b| *b),
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(ProbeError::Setup("every subscriber ended during set-up".into()))
                }
            }
        }
        settled.store(true, Ordering::Relaxed);
        // a publisher by hand cannot know its subscribers' reports, but the middleware knows
        // whom it matched: it waits for one, as a ping waits for its pong
        let matched_subscribers = if by_hand && cfg.mode == Mode::Oneway {
            Some(self.wait_for_subscribers(publisher.as_mut(), stop, setup_end)?)
        } else {
            None
        };
        // let the last warm-up messages drain before measuring
        std::thread::sleep(std::time::Duration::from_millis(20));

        // the measured phase, on an app thread of its own
        let sstop = stop.clone();
        let len = self.len;
        let period = self.period;
        let spec = cfg.rt.spec("rtlab-pub", 0);
        let clock = cfg.oneway_clock();
        let (published, overruns, publisher, lateness) = if closed {
            let subs = std::mem::take(&mut watchers.threads)
                .into_iter()
                .map(|t| t.join())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| ProbeError::Setup("a pong receiver thread panicked".into()))?;
            // every recorder allocated here, filled on the pinger's thread
            let rcfg = RecorderConfig {
                deadline_ns,
                window_ns: cfg.window_ns,
                window_capacity: window_capacity(duration_ns, cfg.window_ns),
                max_samples: None,
                us_histogram_buckets: None,
                spike_threshold_ns: None,
            };
            let mut sides: Vec<Tally> =
                (0..self.n).map(|_| Tally::new(&rcfg, cfg.spike.as_ref())).collect();
            let lp = ClosedLoop {
                len,
                wait: cfg.wait,
                count,
                duration_ns,
                loss_timeout_ns: cfg.loss_timeout_ns,
            };
            let pinger = spawn_rt(&spec, move || {
                let mut subs = subs;
                let r = closed_loop(publisher.as_mut(), &mut subs, &mut sides, &lp, &sstop);
                (r, publisher, sides)
            })
            .map_err(|e| ProbeError::Rt(e.to_string()))?;
            let ((published, err), publisher, sides) = pinger
                .join()
                .map_err(|_| ProbeError::Setup("the pinger thread panicked".into()))?;
            if let Some(e) = err {
                return Err(e.into());
            }
            for (i, side) in sides.into_iter().enumerate() {
                reports[i] = Some(side.report());
            }
            (published, 0, publisher, None)
        } else {
            // the publisher's lateness: preallocated here, filled on the sender thread
            let mut lateness = Recorder::new(
                &RecorderConfig {
                    deadline_ns: self.period,
                    window_ns: cfg.window_ns,
                    window_capacity: window_capacity(duration_ns, cfg.window_ns),
                    max_samples: None,
                    us_histogram_buckets: None,
                    spike_threshold_ns: None,
                },
                None,
            )
            .with_hook(cfg.spike.as_ref().map(|h| h.for_source(PUBLISHER_SPIKE_SOURCE)).as_ref());
            let sender = spawn_rt(&spec, move || {
                let r =
                    send_loop(publisher.as_mut(), len, period, count, clock, &sstop, &mut lateness);
                (r, publisher, lateness)
            })
            .map_err(|e| ProbeError::Rt(e.to_string()))?;
            let ((published, overruns, send_err), publisher, lateness) = sender
                .join()
                .map_err(|_| ProbeError::Setup("the sender thread panicked".into()))?;
            if let Some(e) = send_err {
                return Err(e.into());
            }
            // late messages still count as late, not lost, within the loss timeout
            rtlab_sys::clock::sleep_for(cfg.loss_timeout_ns);
            (published, overruns, publisher, Some(lateness))
        };

        // stop and collect
        let mut done = vec![false; self.n];
        match cfg.mode {
            Mode::Oneway => {
                for r in roles.0.iter_mut() {
                    r.stop();
                }
                let end = monotonic_ns() + 10_000_000_000 + cfg.loss_timeout_ns;
                while !done.iter().all(|d| *d) && monotonic_ns() < end {
                    match rx.recv_timeout(std::time::Duration::from_millis(20)) {
                        Ok((i, RoleEvent::Done(r))) if i < 1000 => {
                            reports[i] = r.map(|b| *b);
                            done[i] = true;
                        }
                        Ok((i, RoleEvent::Failed(why))) if i < 1000 => {
                            return Err(ProbeError::Setup(why))
                        }
                        Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                }
            }
            Mode::Roundtrip => {
                rstop.store(true, Ordering::Relaxed);
                for (i, t) in receivers.threads.drain(..).enumerate() {
                    reports[i] = t.join().ok();
                }
            }
        }
        drop(roles);
        drop(publisher);

        let mut streams = Vec::new();
        // a publisher by hand has no report of its subscribers: its own lateness only
        let reports = if by_hand && cfg.mode == Mode::Oneway { Vec::new() } else { reports };
        for (i, r) in reports.into_iter().enumerate() {
            let r = r.ok_or_else(|| ProbeError::Setup(format!("subscriber {i} sent no report")))?;
            let mut s = r.stream;
            s.name = self.stream_name(&format!("sub{i}"));
            s.metric = cfg.mode.metric().into();
            s.definition = match cfg.mode {
                Mode::Oneway => oneway_definition(cfg.oneway_clock()),
                Mode::Roundtrip => cfg.mode.definition().into(),
            };
            s.deadline_ns = deadline_ns;
            s.labels = self.labels(i, published);
            s.stats.overruns = (!closed).then_some(overruns);
            s.stats.lost = Some(published.saturating_sub(r.received));
            s.stats.late = Some(r.late);
            s.stats.duplicates = Some(r.duplicates);
            s.stats.out_of_order = Some(r.out_of_order);
            s.stats.malformed = Some(r.malformed);
            streams.push(s);
        }
        let (mut p50_spread_ns, mut fastest, mut slowest) = (None, None, None);
        let p50s: Vec<(usize, i64)> = streams
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.stats.p50_ns.map(|p| (i, p)))
            .collect();
        if p50s.len() >= 2 {
            let f = p50s.iter().min_by_key(|x| x.1).copied().expect("non-empty");
            let sl = p50s.iter().max_by_key(|x| x.1).copied().expect("non-empty");
            p50_spread_ns = Some(sl.1 - f.1);
            fastest = Some(f.0);
            slowest = Some(sl.0);
        }
        if let Some(sp) = p50_spread_ns {
            for s in streams.iter_mut() {
                s.labels.insert("case_p50_spread_ns".into(), sp.to_string());
            }
        }
        // closed loop: no grid, no send lateness
        let publisher = lateness.map(|lateness| {
            let mut p = Stream::from_recorder(
                self.stream_name("pub.send_lateness"),
                "send_lateness",
                SEND_LATENESS_DEFINITION,
                self.labels(0, published),
                &lateness,
            );
            p.labels.remove("subscriber");
            if let Some(n) = matched_subscribers.as_ref().and_then(|m| m.count) {
                p.labels.insert("matched_subscribers".into(), n.to_string());
            }
            p.stats.missed = None;
            p.stats.overruns = Some(overruns);
            p
        });
        Ok(CaseResult {
            payload: self.len,
            period_ns: if closed { 0 } else { self.period },
            subscribers: self.n,
            published,
            overruns,
            streams,
            p50_spread_ns,
            fastest,
            slowest,
            error: None,
            thread_priorities_set,
            publisher,
            matched_subscribers,
        })
    }

    /// A publisher by hand: wait (until `setup_end`, as long as `stop` is not raised) until
    /// the middleware has matched at least one subscriber with `publisher`. A transport that
    /// cannot tell ([`Publisher::matched`] is None) publishes at once. No subscriber in the
    /// set-up time is an error: nothing that was asked (a subscriber's messages) could be
    /// measured.
    ///
    /// Reliable, the match then settles: the publisher's library matched the subscriber when
    /// it learnt of it, but the subscriber may not have learnt of the publisher yet (each side
    /// hears of the other in its own discovery message); it drops what comes before, and a
    /// reliable protocol repairs it only after its next heartbeat (Fast DDS 2.9: 3 s), late,
    /// or never once the history moved on. So a warm-up message (sequence bit 63, which a
    /// subscriber does not measure) is published until every matched subscriber acknowledged
    /// it ([`Publisher::wait_acknowledged`]): a subscriber acknowledges only a publisher it
    /// matched, so from then on the path is current both ways.
    fn wait_for_subscribers(
        &self,
        publisher: &mut dyn Publisher,
        stop: &AtomicBool,
        setup_end: i64,
    ) -> Result<MatchedSubscribers, ProbeError> {
        let start = monotonic_ns();
        loop {
            if stop.load(Ordering::Relaxed) {
                return Err(ProbeError::Setup("interrupted during set-up".into()));
            }
            match publisher.matched() {
                None => return Ok(MatchedSubscribers { count: None, waited_ns: 0, settle_ns: 0 }),
                Some(n) if n > 0 => break,
                Some(_) => {}
            }
            if monotonic_ns() > setup_end {
                return Err(ProbeError::Setup(format!(
                    "{}: no subscriber of {} matched the publisher within {} s (is one running, on domain {} and this network? a reliable subscriber does not match a best-effort publisher: --reliability)",
                    self.transport.name(),
                    self.topic,
                    SETUP_TIMEOUT_NS / 1_000_000_000,
                    self.role_spec.domain.map_or("the default".to_string(), |d| d.to_string()),
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let waited_ns = monotonic_ns() - start;
        let settle_start = monotonic_ns();
        if self.cfg.qos.reliability == Reliability::Reliable {
            let mut k = 0u64;
            loop {
                if stop.load(Ordering::Relaxed) {
                    return Err(ProbeError::Setup("interrupted during set-up".into()));
                }
                publisher.publish(WARMUP_BIT | k, monotonic_ns(), self.len)?;
                k += 1;
                let left = setup_end - monotonic_ns();
                match publisher.wait_acknowledged(left.clamp(0, WARMUP_PERIOD_NS * 10)) {
                    Some(true) | None => break,
                    Some(false) if left > 0 => {}
                    Some(false) => {
                        return Err(ProbeError::Setup(format!(
                            "{}: a subscriber of {} matched the publisher but did not acknowledge its messages within {} s (the path never became current)",
                            self.transport.name(),
                            self.topic,
                            SETUP_TIMEOUT_NS / 1_000_000_000
                        )))
                    }
                }
            }
        }
        let settle_ns = monotonic_ns() - settle_start;
        let count = publisher.matched();
        Ok(MatchedSubscribers { count, waited_ns, settle_ns })
    }

    /// `<transport>.<mode>.<len>B.<rate>.n<subscribers>.<what>`: a stream of this case.
    fn stream_name(&self, what: &str) -> String {
        format!(
            "{}.{}.{}B.{}.n{}.{what}",
            self.transport.name(),
            self.cfg.mode.name(),
            self.len,
            self.rate_name(),
            self.n
        )
    }

    /// The case's rate in names and labels: `1khz`, or `closed-loop`.
    fn rate_name(&self) -> String {
        match self.cfg.schedule {
            Schedule::Periodic => rate_label(self.period),
            Schedule::ClosedLoop => Schedule::ClosedLoop.name().into(),
        }
    }

    fn labels(&self, i: usize, published: u64) -> BTreeMap<String, String> {
        let cfg = self.cfg;
        let mut l = BTreeMap::new();
        l.insert("transport".into(), self.transport.name().into());
        for (k, v) in self.labels {
            l.insert(k.to_string(), v.clone());
        }
        if self.role_spec.kind != self.cfg.transport.kind {
            l.insert("far_transport".into(), self.role_spec.kind.name().into());
        }
        if let Some(v) = self.cfg.transport.fastdds_shm.label() {
            l.insert("fastdds_shm".into(), v);
        }
        l.insert("mode".into(), cfg.mode.name().into());
        l.insert("schedule".into(), cfg.schedule.name().into());
        l.insert("wait".into(), cfg.wait.name().into());
        l.insert("payload_bytes".into(), self.len.to_string());
        if cfg.schedule == Schedule::Periodic {
            l.insert("period_ns".into(), self.period.to_string());
        }
        l.insert("rate".into(), self.rate_name());
        l.insert("subscribers".into(), self.n.to_string());
        l.insert("subscriber".into(), i.to_string());
        l.insert("placement".into(), if self.in_process { "threads" } else { "processes" }.into());
        l.insert("reliability".into(), cfg.qos.reliability.to_string());
        l.insert("history".into(), cfg.qos.history.to_string());
        l.insert("durability".into(), cfg.qos.durability.to_string());
        l.insert("published".into(), published.to_string());
        l
    }
}

/// Threads of this process that use ports of the case, with their stop flag: an early
/// return (an error) stops and joins the ones still there, so that no port, transport or
/// library object goes while a thread is still inside a take (seen: a Fast DDS reader
/// freed at exit under a pong receiver, a segmentation fault). Normal paths take them out.
struct JoinOnDrop<T> {
    stop: Arc<AtomicBool>,
    threads: Vec<rtlab_sys::sched::RtThread<T>>,
}
impl<T> JoinOnDrop<T> {
    fn new(stop: &Arc<AtomicBool>) -> Self {
        JoinOnDrop { stop: stop.clone(), threads: Vec::new() }
    }
}
impl<T> Drop for JoinOnDrop<T> {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.stop.store(true, Ordering::Relaxed);
            for t in self.threads.drain(..) {
                let _ = t.join();
            }
        }
    }
}

/// `100hz`, `2.5khz`... for names.
pub fn rate_label(period_ns: i64) -> String {
    let hz = 1e9 / period_ns as f64;
    if hz >= 1000.0 && (hz / 1000.0).fract() == 0.0 {
        format!("{}khz", hz as i64 / 1000)
    } else if hz.fract() == 0.0 {
        format!("{}hz", hz as i64)
    } else {
        format!("{hz:.2}hz")
    }
}

/// What the publisher's `send_lateness` stream measures.
pub const SEND_LATENESS_DEFINITION: &str = "message stamped and handed to the transport - its slot on the absolute grid t0 + k*T (publisher CLOCK_MONOTONIC): the publisher's own wake-up latency; skipped slots are overruns";

/// The spike hook's source of the publisher's lateness (receivers raise source 0).
pub const PUBLISHER_SPIKE_SOURCE: u32 = 1;

/// The sender: `count` messages on the absolute grid t0 + k*period, each one's lateness
/// (stamp - slot) into `lateness`; the message carries a stamp of `clock`. Returns
/// (published, overruns, error). Allocation-free.
fn send_loop(
    publisher: &mut dyn Publisher,
    len: usize,
    period: i64,
    count: u64,
    clock: StampClock,
    stop: &AtomicBool,
    lateness: &mut Recorder,
) -> (u64, u64, Option<TransportError>) {
    let t0 = monotonic_ns() + period.min(10_000_000);
    lateness.origin_monotonic_ns = Some(t0);
    let mut published = 0u64;
    let mut overruns = 0u64;
    let mut slot = 0u64;
    while slot < count && !stop.load(Ordering::Relaxed) {
        let due = t0 + slot as i64 * period;
        let now = monotonic_ns();
        if now > due + period {
            // this slot (and any others already over) passed: skip, no catch-up burst; the
            // slots skipped are at most the ones left (published + overruns = count)
            let behind = (((now - due) / period) as u64).min(count - slot);
            overruns += behind;
            slot += behind;
            continue;
        }
        sleep_until(due);
        let stamp = monotonic_ns();
        let sent = match clock {
            StampClock::Monotonic => stamp,
            StampClock::Realtime => clock.now(),
        };
        if let Err(e) = publisher.publish(published, sent, len) {
            return (published, overruns, Some(e));
        }
        lateness.record(slot, stamp - t0, stamp - due);
        published += 1;
        slot += 1;
    }
    (published, overruns, None)
}

/// A receiver: take, stamp, count, record until `stop`. Emits `Warm` on each warm-up
/// message until the first measured one (never in the measured phase). Allocation-free
/// after set-up.
pub fn receive_loop(
    mut sub: Box<dyn Subscriber>,
    rc: &RoleConfig,
    stop: &AtomicBool,
    emit: &mut dyn FnMut(RoleEvent),
) -> ReceiverReport {
    let rcfg = RecorderConfig {
        deadline_ns: rc.deadline_ns,
        window_ns: rc.window_ns,
        window_capacity: rc.window_capacity,
        max_samples: None,
        us_histogram_buckets: None,
        spike_threshold_ns: None,
    };
    let mut tally = Tally::new(&rcfg, rc.spike.as_ref());
    let mut measuring = false;
    let give_up = monotonic_ns() + rc.run_timeout_ns;
    while !stop.load(Ordering::Relaxed) && monotonic_ns() < give_up {
        let got = match sub.take(rc.wait, POLL_SLICE_NS) {
            Ok(g) => g,
            Err(_) => {
                tally.malformed += 1;
                continue;
            }
        };
        let now_mono = monotonic_ns();
        let now = match rc.stamp_clock {
            StampClock::Monotonic => now_mono,
            StampClock::Realtime => rc.stamp_clock.now(),
        };
        let Some(r) = got else { continue };
        match tally.arrive(&r, now, now_mono, rc.loss_timeout_ns) {
            Arrived::Warmup if !measuring => emit(RoleEvent::Warm(r.seq & !WARMUP_BIT)),
            Arrived::Warmup => {}
            Arrived::Counted | Arrived::Sample => measuring = true,
        }
    }
    drop(sub);
    tally.report()
}

/// An echo: republish every message unchanged (sequence and stamp kept) until `stop`.
fn echo_loop(
    mut sub: Box<dyn Subscriber>,
    mut publisher: Box<dyn Publisher>,
    rc: &RoleConfig,
    stop: &AtomicBool,
) -> Result<(), TransportError> {
    let give_up = monotonic_ns() + rc.run_timeout_ns;
    while !stop.load(Ordering::Relaxed) && monotonic_ns() < give_up {
        match sub.take(rc.wait, POLL_SLICE_NS) {
            Ok(Some(r)) => publisher.publish(r.seq, r.stamp_ns, r.len)?,
            Ok(None) | Err(TransportError::Malformed { .. }) => {} // not ours to echo
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Closed loop, before measuring: report this pong port's warm-up messages until every
/// receiver is warm (`settled`), then hand the port back for the pinger's own thread.
fn warm_watch(
    mut sub: Box<dyn Subscriber>,
    wait: WaitStyle,
    stop: &AtomicBool,
    settled: &AtomicBool,
    emit: &mut dyn FnMut(RoleEvent),
) -> Box<dyn Subscriber> {
    // a short slice: set-up waits for this thread to see `settled`
    const SLICE_NS: i64 = 2_000_000;
    while !stop.load(Ordering::Relaxed) && !settled.load(Ordering::Relaxed) {
        if let Ok(Some(r)) = sub.take(wait, SLICE_NS) {
            if r.seq & WARMUP_BIT != 0 {
                emit(RoleEvent::Warm(r.seq & !WARMUP_BIT));
            }
        }
    }
    sub
}

/// A receiver's warm-up, in two stages. Its first warm-up message shows discovery matched
/// the two sides; but what arrives first may be a burst of earlier messages, repaired by a
/// reliable protocol once the reader matched a writer that had already been sending (seen
/// with RustDDS against a ros2-client node: a second of round trips up to 0.5 s right after
/// the first echo, which an immediate start measured as late and lost). So a receiver is
/// warm once a warm-up message *sent after its first arrival* arrives too: the path is
/// current.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Warmup {
    /// No warm-up message yet.
    Cold,
    /// The first arrived when `sent` warm-up messages had been sent (numbers `0..sent`).
    Matched {
        sent: u64,
    },
    Warm,
}

impl Warmup {
    /// Warm-up message `j` arrived, `sent` having been sent so far.
    fn arrived(self, j: u64, sent: u64) -> Warmup {
        match self {
            Warmup::Cold => Warmup::Matched { sent },
            Warmup::Matched { sent: s } if j >= s => Warmup::Warm,
            w => w,
        }
    }
}

/// What a receiver counts and records of the messages it takes: the receive loop's (a thread
/// per subscriber or pong) and the closed loop's (one per pong port, on the pinger's thread).
struct Tally {
    rec: Recorder,
    track: SeqTracker,
    late: u64,
    malformed: u64,
    first_seq: Option<u64>,
    /// The send stamp of the first sample: `at_ns` = 0.
    start: Option<i64>,
}

/// What one arrival was to a [`Tally`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arrived {
    /// A warm-up message (never a sample).
    Warmup,
    /// Malformed, a duplicate, or late: counted, not a sample.
    Counted,
    /// A sample.
    Sample,
}

impl Tally {
    fn new(cfg: &RecorderConfig, spike: Option<&rtlab_core::sink::SpikeHook>) -> Tally {
        Tally {
            rec: Recorder::new(cfg, None).with_hook(spike),
            track: SeqTracker::new(),
            late: 0,
            malformed: 0,
            first_seq: None,
            start: None,
        }
    }

    /// One message taken: received at `now` on the stamps' clock (`now_mono` on
    /// CLOCK_MONOTONIC); later than `loss_timeout_ns` after its send stamp it is late.
    fn arrive(&mut self, r: &Received, now: i64, now_mono: i64, loss_timeout_ns: i64) -> Arrived {
        if r.seq & WARMUP_BIT != 0 {
            return Arrived::Warmup;
        }
        if r.len < HEADER_LEN {
            self.malformed += 1;
            return Arrived::Counted;
        }
        if let Arrival::Duplicate = self.track.arrive(r.seq) {
            return Arrived::Counted;
        }
        self.first_seq = Some(self.first_seq.map_or(r.seq, |f| f.min(r.seq)));
        let latency = now - r.stamp_ns;
        if latency > loss_timeout_ns {
            self.late += 1;
            return Arrived::Counted;
        }
        let rec = &mut self.rec;
        let start = *self.start.get_or_insert_with(|| {
            // the send instant on this host's monotonic clock (the same when it stamped)
            rec.origin_monotonic_ns = Some(now_mono - latency);
            r.stamp_ns
        });
        self.rec.record(r.seq, now - start, latency);
        Arrived::Sample
    }

    fn report(self) -> ReceiverReport {
        ReceiverReport {
            stream: Stream::from_recorder("", "", "", BTreeMap::new(), &self.rec),
            received: self.track.received,
            late: self.late,
            duplicates: self.track.duplicates,
            out_of_order: self.track.out_of_order,
            malformed: self.malformed,
            first_seq: self.first_seq,
            last_seq: self.first_seq.map(|_| self.track.highest()),
        }
    }
}

/// The closed loop's settings.
struct ClosedLoop {
    len: usize,
    wait: WaitStyle,
    /// At most this many pings (u64::MAX: by time only).
    count: u64,
    duration_ns: i64,
    loss_timeout_ns: i64,
}

/// Closed loop on one thread: publish ping k, take the pongs until every port's pong k is
/// in or k's loss timeout passed, then ping k+1 at once. A pong of an earlier ping that
/// comes after its loss timeout is `late`; one that never comes is lost. Returns the pings
/// sent. Allocation-free: publish, take, stamp, record.
fn closed_loop(
    publisher: &mut dyn Publisher,
    subs: &mut [Box<dyn Subscriber>],
    sides: &mut [Tally],
    lp: &ClosedLoop,
    stop: &AtomicBool,
) -> (u64, Option<TransportError>) {
    let end = monotonic_ns().saturating_add(lp.duration_ns);
    let mut k = 0u64;
    while k < lp.count && !stop.load(Ordering::Relaxed) && monotonic_ns() < end {
        let sent = monotonic_ns();
        if let Err(e) = publisher.publish(k, sent, lp.len) {
            return (k, Some(e));
        }
        let give_up = sent.saturating_add(lp.loss_timeout_ns);
        for (sub, side) in subs.iter_mut().zip(sides.iter_mut()) {
            loop {
                let left = give_up - monotonic_ns();
                if left <= 0 {
                    break;
                }
                let got = match sub.take(lp.wait, left.min(POLL_SLICE_NS)) {
                    Ok(g) => g,
                    Err(_) => {
                        side.malformed += 1;
                        continue;
                    }
                };
                let now = monotonic_ns();
                let Some(r) = got else { continue };
                if side.arrive(&r, now, now, lp.loss_timeout_ns) == Arrived::Sample && r.seq == k {
                    break;
                }
            }
        }
        k += 1;
    }
    (k, None)
}

/// Run one role on the calling thread with an open transport.
pub fn run_role(
    rc: &RoleConfig,
    transport: Arc<dyn Transport>,
    stop: &AtomicBool,
    emit: &mut dyn FnMut(RoleEvent),
) {
    let sub = match transport.subscriber(&rc.topic_in, &rc.qos, rc.max_len) {
        Ok(s) => s,
        Err(e) => return emit(RoleEvent::Failed(e.to_string())),
    };
    // middleware threads exist once ports do (Cyclone starts `recv` lazily)
    if let Err(e) = apply_thread_priorities(&rc.thread_priorities) {
        return emit(RoleEvent::Failed(e));
    }
    match rc.kind {
        RoleKind::Subscriber => {
            emit(RoleEvent::Ready);
            let r = receive_loop(sub, rc, stop, emit);
            emit(RoleEvent::Done(Some(Box::new(r))));
        }
        RoleKind::Echo => {
            let topic = rc.topic_out.as_deref().unwrap_or("pong");
            let publisher = match transport.publisher(topic, &rc.qos, rc.max_len) {
                Ok(p) => p,
                Err(e) => return emit(RoleEvent::Failed(e.to_string())),
            };
            emit(RoleEvent::Ready);
            match echo_loop(sub, publisher, rc, stop) {
                Ok(()) => emit(RoleEvent::Done(None)),
                Err(e) => emit(RoleEvent::Failed(e.to_string())),
            }
        }
    }
}

/// The event of a role's output line (`rtlab-role {json}`); None for any other line.
pub fn parse_event(line: &str) -> Option<RoleEvent> {
    // the marker may follow other output on the same line (a test harness, a library)
    let at = line.find("rtlab-role ")?;
    serde_json::from_str(&line[at + "rtlab-role ".len()..]).ok()
}

/// A role's event as its output line (without the newline).
pub fn event_line(e: &RoleEvent) -> String {
    format!("rtlab-role {}", serde_json::to_string(e).unwrap_or_default())
}

fn write_event(e: &RoleEvent) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", event_line(e));
    let _ = out.flush();
}

/// The body of a role process: `json` is a [`RoleConfig`]. Speaks [`RoleEvent`] lines on
/// stdout; stops when its stdin closes. Returns the exit code.
pub fn role_main(json: &str) -> i32 {
    let rc: RoleConfig = match serde_json::from_str(json) {
        Ok(rc) => rc,
        Err(e) => {
            write_event(&RoleEvent::Failed(format!("bad role configuration: {e}")));
            return 2;
        }
    };
    // policy first, then the middleware: its threads inherit the policy
    if let Err(e) = rc.rt.apply_policy_here() {
        write_event(&RoleEvent::Failed(format!("real-time settings: {e}")));
        return 1;
    }
    let transport = match open_transport(&rc.transport) {
        Ok(t) => t,
        Err(e) => {
            write_event(&RoleEvent::Failed(e.to_string()));
            return 1;
        }
    };
    let _lock = if rc.mlockall { rtlab_sys::memory::MemoryLock::lock_all().ok() } else { None };
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
        s2.store(true, Ordering::Relaxed);
    });
    // pin this thread only (never the whole process: middleware threads float)
    if let Some(cpu) = rc.rt.cpu(1 + rc.index) {
        if let Err(e) = set_current_affinity(&[cpu]) {
            write_event(&RoleEvent::Failed(format!("real-time settings: {e}")));
            return 1;
        }
    }
    run_role(&rc, transport, &stop, &mut |e| write_event(&e));
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::sync::Mutex;

    /// A scripted link: ping 2 is lost, 4's pong comes twice, 7's comes only after ping 8
    /// went out (past its loss timeout: late); the others come back at once.
    #[derive(Default)]
    struct Net {
        q: VecDeque<Received>,
        held: Option<Received>,
        pings: Vec<u64>,
    }
    struct FakePub(Arc<Mutex<Net>>);
    struct FakeSub(Arc<Mutex<Net>>);

    impl Publisher for FakePub {
        fn publish(&mut self, seq: u64, stamp_ns: i64, len: usize) -> Result<(), TransportError> {
            let mut n = self.0.lock().unwrap();
            n.pings.push(seq);
            if let Some(h) = n.held.take() {
                n.q.push_back(h);
            }
            let r = Received { seq, stamp_ns, len };
            match seq {
                2 => {}
                4 => n.q.extend([r, r]),
                7 => n.held = Some(r),
                _ => n.q.push_back(r),
            }
            Ok(())
        }
    }

    impl Subscriber for FakeSub {
        fn try_take(&mut self) -> Result<Option<Received>, TransportError> {
            Ok(self.0.lock().unwrap().q.pop_front())
        }
        fn wait_take(&mut self, timeout_ns: i64) -> Result<Option<Received>, TransportError> {
            let r = self.try_take()?;
            if r.is_none() {
                rtlab_sys::clock::sleep_for(timeout_ns.min(100_000));
            }
            Ok(r)
        }
    }

    fn pong_side(deadline_ns: i64) -> Tally {
        let rcfg = RecorderConfig {
            deadline_ns,
            window_ns: 1_000_000_000,
            window_capacity: 16,
            max_samples: None,
            us_histogram_buckets: None,
            spike_threshold_ns: None,
        };
        Tally::new(&rcfg, None)
    }

    #[test]
    fn role_processes_get_the_near_sides_domain_network_and_fast_dds_shared_memory() {
        let mut spec = TransportSpec::new(TransportKind::FastDds);
        spec.domain = Some(42);
        spec.interface = Some("10.1.2.3".into());
        spec.fastdds_shm = crate::fastdds::Shm::Segment(4 << 20);
        let r = role_spec_of(&spec, TransportKind::FastDds, None, false);
        assert_eq!(r.fastdds_shm, crate::fastdds::Shm::Segment(4 << 20));
        assert_eq!((r.domain, r.interface.as_deref()), (Some(42), Some("10.1.2.3")));
        // a cross-implementation far side keeps the setting (it is for its fastdds)
        let mut c = spec.clone();
        c.kind = TransportKind::CycloneDds;
        assert_eq!(
            role_spec_of(&c, TransportKind::FastDds, None, false).fastdds_shm,
            spec.fastdds_shm
        );
    }

    #[test]
    fn a_receiver_is_warm_once_a_warm_up_sent_after_its_first_arrival_arrives() {
        // the first arrival (any number) only matches; a number sent before it does not warm
        let w = Warmup::Cold.arrived(0, 5);
        assert_eq!(w, Warmup::Matched { sent: 5 });
        let w = w.arrived(1, 6).arrived(4, 7);
        assert_eq!(w, Warmup::Matched { sent: 5 }, "a repaired backlog is not the present");
        let w = w.arrived(5, 7);
        assert_eq!(w, Warmup::Warm);
        assert_eq!(w.arrived(2, 9), Warmup::Warm, "warm stays warm");
    }

    #[test]
    fn closed_loop_sends_on_each_pong_or_after_the_loss_timeout() {
        let net = Arc::new(Mutex::new(Net::default()));
        let mut publisher = FakePub(net.clone());
        let mut subs: Vec<Box<dyn Subscriber>> = vec![Box::new(FakeSub(net.clone()))];
        let mut sides = vec![pong_side(2_000_000)];
        let lp = ClosedLoop {
            len: 64,
            wait: WaitStyle::Blocking,
            count: 10,
            duration_ns: 60_000_000_000,
            loss_timeout_ns: 2_000_000,
        };
        let start = monotonic_ns();
        let (sent, err) =
            closed_loop(&mut publisher, &mut subs, &mut sides, &lp, &AtomicBool::new(false));
        let took = monotonic_ns() - start;
        assert!(err.is_none());
        assert_eq!(sent, 10);
        assert_eq!(net.lock().unwrap().pings, (0..10).collect::<Vec<_>>());
        // two loss timeouts waited for (2 lost, 7 late): the loop did wait, and did not
        // wait for the pongs that came
        assert!(took >= 2 * lp.loss_timeout_ns, "{took} ns");
        let r = sides.pop().unwrap().report();
        assert_eq!(r.received, 9, "every ping but 2");
        assert_eq!(r.late, 1, "7's pong after its loss timeout");
        assert_eq!(r.duplicates, 1, "4's second pong");
        assert_eq!(r.out_of_order, 0);
        assert_eq!(r.stream.stats.count, 8, "samples: received - late");
        assert_eq!((r.first_seq, r.last_seq), (Some(0), Some(9)));
        assert_eq!(r.lost_between(), 1);
    }

    #[test]
    fn closed_loop_stops_at_its_time_and_on_the_stop_flag() {
        let net = Arc::new(Mutex::new(Net::default()));
        let mut subs: Vec<Box<dyn Subscriber>> = vec![Box::new(FakeSub(net.clone()))];
        let mut sides = vec![pong_side(1_000_000)];
        let lp = ClosedLoop {
            len: 64,
            wait: WaitStyle::BusyPoll,
            count: u64::MAX,
            duration_ns: 20_000_000,
            loss_timeout_ns: 1_000_000,
        };
        let (sent, _) = closed_loop(
            &mut FakePub(net.clone()),
            &mut subs,
            &mut sides,
            &lp,
            &AtomicBool::new(false),
        );
        assert!(sent > 10, "by time only: {sent}");
        let (sent, _) = closed_loop(
            &mut FakePub(net.clone()),
            &mut subs,
            &mut sides,
            &lp,
            &AtomicBool::new(true),
        );
        assert_eq!(sent, 0);
    }

    #[test]
    fn the_grid_skips_no_more_slots_than_are_left() {
        // a 1 us period on this machine: the sender is late past many slots, also near the
        // end (seen: 201 slots accounted for of 200 when it was late at the last one)
        for count in [1u64, 7, 50] {
            let net = Arc::new(Mutex::new(Net::default()));
            let mut lateness = Recorder::new(
                &RecorderConfig {
                    deadline_ns: 1_000,
                    window_ns: 1_000_000_000,
                    window_capacity: 16,
                    max_samples: None,
                    us_histogram_buckets: None,
                    spike_threshold_ns: None,
                },
                None,
            );
            let (published, overruns, err) = send_loop(
                &mut FakePub(net),
                64,
                1_000,
                count,
                StampClock::Monotonic,
                &AtomicBool::new(false),
                &mut lateness,
            );
            assert!(err.is_none());
            assert_eq!(published + overruns, count, "{published} + {overruns}");
        }
    }

    #[test]
    fn rate_labels() {
        assert_eq!(rate_label(10_000_000), "100hz");
        assert_eq!(rate_label(200_000), "5khz");
        assert_eq!(rate_label(40_000_000), "25hz");
    }

    #[test]
    fn events_round_trip_through_lines() {
        for e in [
            RoleEvent::Ready,
            RoleEvent::Warm(3),
            RoleEvent::Failed("x y".into()),
            RoleEvent::Done(None),
        ] {
            let line = format!("rtlab-role {}", serde_json::to_string(&e).unwrap());
            assert_eq!(parse_event(&line), Some(e));
        }
        assert_eq!(parse_event("zenoh says hello"), None);
    }
}
