//! The probe's configuration: what is measured ([`Mode`], [`Schedule`], [`StampClock`]),
//! the sweep ([`PubsubConfig`]: payloads x rates x subscribers), a role run by hand
//! ([`ByHand`]), middleware thread priorities ([`ThreadPriority`]) and the real-time
//! settings of rtlab's own threads ([`RtSpec`]).
//!
//! Plain data (serde, no CLI types): the CLI and scenario files fill it; nothing here runs.

use super::spec::{TransportKind, TransportSpec};
use crate::transport::{EchoStyle, Qos, WaitStyle};
use rtlab_sys::clock::monotonic_ns;
use serde::{Deserialize, Serialize};

/// What a sample measures: a message's way from publisher to subscriber, or a round trip.
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

/// Real-time settings of rtlab's own threads (the shared type). CPUs are used round
/// robin: sender first, then subscriber 0, 1, ... (None: not pinned). Processes are never
/// pinned whole: middleware threads float. `mlockall` is the role processes' memory lock.
pub use rtlab_core::rt::RtSettings as RtSpec;

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
    /// Round trips: where the pong answers from (its own thread, or the middleware's
    /// callback).
    #[serde(default)]
    pub echo: EchoStyle,
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
    /// Every thread of the middleware (the transport's [`crate::transport::Transport::thread_names`])
    /// this many steps (0 or below) under the measuring threads' priority, where those are
    /// real-time (S3's DDS threads under its executor).
    #[serde(default)]
    pub middleware_priority: Option<i32>,
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

/// A middleware thread, named as in `/proc/<pid>/task/<tid>/comm` (prefix match, e.g. `recv`,
/// `tev`, `dq.user` for Cyclone DDS), and the SCHED_FIFO priority to give it: 1-99, or 0 and
/// below for that many steps under the measuring threads' priority (`dds.=-5`: 75 under
/// FIFO 80), given only where those run at a real-time policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadPriority {
    pub name: String,
    pub priority: i32,
    /// A name from the middleware's own list (`middleware_priority`): skipped where no
    /// thread has it (yet), not an error.
    #[serde(default)]
    pub optional: bool,
}

impl ThreadPriority {
    /// The priority its threads get beside measuring threads at `rt`: None where it is
    /// relative and those run at a normal policy (nothing real-time to be under).
    pub fn resolve(&self, rt: &RtSpec) -> Result<Option<i32>, String> {
        if self.priority > 0 {
            return Ok(Some(self.priority));
        }
        if !rt.policy.is_realtime() {
            return Ok(None);
        }
        let p = rt.priority + self.priority;
        if p < 1 {
            return Err(format!(
                "{}={}: {} under the measuring threads' {} {} is below 1",
                self.name,
                self.priority,
                -self.priority,
                rt.policy.name(),
                rt.priority
            ));
        }
        Ok(Some(p))
    }
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

    /// The transport of the far side (the pong or the subscribers): `far_transport`, else the
    /// near side's.
    pub fn far_kind(&self) -> TransportKind {
        self.far_transport.unwrap_or(self.transport.kind)
    }

    /// Messages sent in one case of this period.
    pub fn messages_of(&self, period_ns: i64) -> u64 {
        let by_time = (self.case_duration_ns / period_ns.max(1)).max(1) as u64;
        self.case_messages.map_or(by_time, |m| m.min(by_time).max(1))
    }
    pub(super) fn cases(&self) -> Vec<(usize, i64, usize)> {
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
