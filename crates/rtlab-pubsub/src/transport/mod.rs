//! The `Transport` contract every pub/sub transport implements, the QoS it is asked for and
//! the record of what that QoS became natively.
//!
//! Contract (checked for every implementation by the conformance suite, which only tests
//! reach: tests/support/conformance.rs, run by tests/conformance.rs):
//! - A message is `len` bytes (`len >= HEADER_LEN`): bytes 0..8 the sequence number, 8..16 the
//!   send stamp (CLOCK_MONOTONIC ns), both little endian, then payload. [`Publisher::publish`]
//!   sends one; every [`Subscriber`] of the same topic (created before, and matched) gets it,
//!   in publish order, at most once.
//! - [`Subscriber::try_take`] never blocks; [`Subscriber::wait_take`] blocks at most the given
//!   time. Neither returns the payload: only [`Received`] (sequence, stamp, length). The
//!   subscriber stamps nothing: the caller stamps right after the call returns.
//! - Publish and take do not allocate on rtlab's side: buffers are preallocated at creation
//!   (a library that only accepts owned buffers says so in [`Transport::notes`]).
//! - [`Transport::map_qos`] says what each asked QoS setting becomes natively, or fails with
//!   [`TransportError::QosUnsupported`]; publishers/subscribers are created with that mapping.
//! - [`Transport::max_message`] is the largest message the transport carries; larger is
//!   refused with [`TransportError::MessageTooLarge`] when the port is created.
//! - [`Publisher::matched`] is the number of subscribers the library has matched with the
//!   publisher *now* (its own view: a subscriber it matched may not have matched it back
//!   yet), or None where the transport does not say (here `intra`, `udp`, `shm` and
//!   `zenoh`); [`Publisher::wait_acknowledged`] waits until every matched subscriber
//!   that acknowledges (reliable) acknowledged what was published, or None where the library
//!   has no acknowledgements. Neither is called in the measured phase.
//! - Dropping publishers, subscribers and then the transport releases everything it made:
//!   threads, sockets, and files (shared memory segments included).
//! - Nothing here prints.

use serde::{Deserialize, Serialize};
use std::fmt;

pub mod cyclonedds;
mod dds_common;
pub mod fastdds;
pub mod intra;
pub mod ros1;
pub mod ros2;
pub mod rustdds;
pub mod shm;
pub mod udp;
pub mod zenoh;

/// Bytes at the start of every message: sequence number (8) + send stamp (8).
pub const HEADER_LEN: usize = 16;
/// Sequence numbers with this bit set are warm-up messages (not measured).
pub const WARMUP_BIT: u64 = 1 << 63;
/// The sequence number of the end-of-stream marker.
pub const END_SEQ: u64 = u64::MAX;

/// Write the header into the first [`HEADER_LEN`] bytes of `buf`.
#[inline]
pub fn encode_header(buf: &mut [u8], seq: u64, stamp_ns: i64) {
    buf[0..8].copy_from_slice(&seq.to_le_bytes());
    buf[8..16].copy_from_slice(&stamp_ns.to_le_bytes());
}

/// Read the header of a message (None: shorter than a header, i.e. malformed).
#[inline]
pub fn decode_header(buf: &[u8]) -> Option<(u64, i64)> {
    if buf.len() < HEADER_LEN {
        return None;
    }
    let seq = u64::from_le_bytes(buf[0..8].try_into().ok()?);
    let stamp = i64::from_le_bytes(buf[8..16].try_into().ok()?);
    Some((seq, stamp))
}

/// What a subscriber got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    pub seq: u64,
    pub stamp_ns: i64,
    pub len: usize,
}

/// How a receiver waits for the next message (changes latency 10-50x, so it is recorded).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitStyle {
    /// Sleep in the library's/kernel's blocking wait until a message arrives.
    Blocking,
    /// Spin on a non-blocking take (burns the CPU).
    BusyPoll,
}

impl WaitStyle {
    pub fn name(self) -> &'static str {
        match self {
            WaitStyle::Blocking => "blocking",
            WaitStyle::BusyPoll => "busy-poll",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reliability {
    Reliable,
    BestEffort,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum History {
    KeepLast(u32),
    KeepAll,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Durability {
    Volatile,
    TransientLocal,
}

/// The QoS asked for (DDS/ROS 2 words).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Qos {
    pub reliability: Reliability,
    pub history: History,
    pub durability: Durability,
}

impl Default for Qos {
    /// ROS 2's "sensor data" profile: best effort, keep last 5, volatile.
    fn default() -> Self {
        Qos {
            reliability: Reliability::BestEffort,
            history: History::KeepLast(5),
            durability: Durability::Volatile,
        }
    }
}

impl fmt::Display for Reliability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reliability::Reliable => "reliable",
            Reliability::BestEffort => "best-effort",
        })
    }
}
impl fmt::Display for History {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            History::KeepLast(n) => write!(f, "keep-last:{n}"),
            History::KeepAll => f.write_str("keep-all"),
        }
    }
}
impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Durability::Volatile => "volatile",
            Durability::TransientLocal => "transient-local",
        })
    }
}

impl History {
    /// Parse `keep-last:N` or `keep-all`.
    pub fn parse(s: &str) -> Option<History> {
        if s == "keep-all" {
            return Some(History::KeepAll);
        }
        let n = s.strip_prefix("keep-last:")?.parse::<u32>().ok()?;
        (n >= 1).then_some(History::KeepLast(n))
    }
    /// The queue depth this history needs (keep-all: `keep_all_depth`).
    pub fn depth(self, keep_all_depth: usize) -> usize {
        match self {
            History::KeepLast(n) => n as usize,
            History::KeepAll => keep_all_depth,
        }
    }
}

/// How closely one QoS setting was honoured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fidelity {
    /// The native setting has the same meaning.
    Exact,
    /// The closest native setting; `native` says how it differs.
    Closest,
}

/// What one asked setting became.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QosItem {
    pub asked: String,
    pub native: String,
    pub fidelity: Fidelity,
}

/// What the whole QoS became on one transport (recorded in results).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QosMapping {
    pub reliability: QosItem,
    pub history: QosItem,
    pub durability: QosItem,
}

pub(crate) fn item(
    asked: impl fmt::Display,
    native: impl Into<String>,
    fidelity: Fidelity,
) -> QosItem {
    QosItem { asked: asked.to_string(), native: native.into(), fidelity }
}

/// A DDS implementation's own names for the QoS rtlab asks, each of which it honours
/// exactly (the DDS QoS policies are rtlab's): [`exact_dds_mapping`].
pub(crate) struct DdsQosNames {
    pub reliable: &'static str,
    pub best_effort: &'static str,
    /// `{n}` stands for the depth.
    pub keep_last: &'static str,
    pub keep_all: &'static str,
    pub volatile: &'static str,
    pub transient_local: &'static str,
}

/// `qos` in a DDS implementation's `names`, every setting [`Fidelity::Exact`].
pub(crate) fn exact_dds_mapping(qos: &Qos, names: &DdsQosNames) -> QosMapping {
    let reliability = match qos.reliability {
        Reliability::Reliable => names.reliable,
        Reliability::BestEffort => names.best_effort,
    };
    let history = match qos.history {
        History::KeepLast(n) => names.keep_last.replace("{n}", &n.to_string()),
        History::KeepAll => names.keep_all.to_string(),
    };
    let durability = match qos.durability {
        Durability::Volatile => names.volatile,
        Durability::TransientLocal => names.transient_local,
    };
    QosMapping {
        reliability: item(qos.reliability, reliability, Fidelity::Exact),
        history: item(qos.history, history, Fidelity::Exact),
        durability: item(qos.durability, durability, Fidelity::Exact),
    }
}

/// Errors of a transport.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("transport {transport} cannot honour {setting} {asked}: {why}")]
    QosUnsupported { transport: &'static str, setting: &'static str, asked: String, why: String },
    #[error("transport {transport} carries at most {max} bytes per message, {asked} asked")]
    MessageTooLarge { transport: &'static str, max: usize, asked: usize },
    #[error("messages are at least {HEADER_LEN} bytes (sequence + stamp), {0} asked")]
    MessageTooSmall(usize),
    #[error("{transport}: {what}: {why}")]
    Library { transport: &'static str, what: &'static str, why: String },
    /// A received message rtlab cannot read (counted as malformed, never fatal).
    #[error("{transport}: a malformed message: {why}")]
    Malformed { transport: &'static str, why: &'static str },
    #[error("{transport}: {what}: {source}")]
    Io { transport: &'static str, what: &'static str, source: std::io::Error },
}

impl TransportError {
    /// Bad input from the user (exit 2 with one line) rather than a runtime failure.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            TransportError::QosUnsupported { .. }
                | TransportError::MessageTooLarge { .. }
                | TransportError::MessageTooSmall(_)
        )
    }
}

/// Check a message length against a transport's limits.
pub fn check_len(transport: &'static str, max: usize, len: usize) -> Result<(), TransportError> {
    if len < HEADER_LEN {
        return Err(TransportError::MessageTooSmall(len));
    }
    if len > max {
        return Err(TransportError::MessageTooLarge { transport, max, asked: len });
    }
    Ok(())
}

/// One sending port.
pub trait Publisher: Send {
    /// Send one message of `len` bytes (checked at creation against `max_len`) with this
    /// header. Does not allocate on rtlab's side.
    fn publish(&mut self, seq: u64, stamp_ns: i64, len: usize) -> Result<(), TransportError>;
    /// How many subscribers (readers) are matched with this publisher now; None where the
    /// library cannot tell.
    fn matched(&self) -> Option<usize> {
        None
    }
    /// Wait at most `timeout_ns` until every matched subscriber that acknowledges (a reliable
    /// reader) acknowledged every message published so far: Some(true) they did, Some(false)
    /// not in the time, None where the library cannot tell.
    fn wait_acknowledged(&self, _timeout_ns: i64) -> Option<bool> {
        None
    }
}

/// One receiving port.
pub trait Subscriber: Send {
    /// The next message if one is there; never blocks.
    fn try_take(&mut self) -> Result<Option<Received>, TransportError>;
    /// The next message, waiting at most `timeout_ns` in the library's blocking wait.
    fn wait_take(&mut self, timeout_ns: i64) -> Result<Option<Received>, TransportError>;
    /// The next message with the given wait style, at most `timeout_ns`.
    fn take(
        &mut self,
        wait: WaitStyle,
        timeout_ns: i64,
    ) -> Result<Option<Received>, TransportError> {
        match wait {
            WaitStyle::Blocking if timeout_ns <= 0 => self.try_take(),
            WaitStyle::Blocking => self.wait_take(timeout_ns),
            WaitStyle::BusyPoll => {
                self.poll_until(rtlab_sys::clock::monotonic_ns().saturating_add(timeout_ns.max(0)))
            }
        }
    }
    /// The next message with the given wait style, until `deadline_ns` on CLOCK_MONOTONIC
    /// (a busy-poll reads no clock before its first polls).
    fn take_until(
        &mut self,
        wait: WaitStyle,
        deadline_ns: i64,
    ) -> Result<Option<Received>, TransportError> {
        match wait {
            WaitStyle::Blocking => {
                match deadline_ns.saturating_sub(rtlab_sys::clock::monotonic_ns()) {
                    left if left <= 0 => self.try_take(),
                    left => self.wait_take(left),
                }
            }
            WaitStyle::BusyPoll => self.poll_until(deadline_ns),
        }
    }
    /// Busy-poll: `try_take` until a message is in or `deadline_ns` passed. The clock is
    /// read, and the CPU told it spins (`spin_loop`, x86 PAUSE), once per [`POLLS_PER_CHECK`]
    /// polls: once per poll they cost a 64 B shared-memory round trip ~50 ns of its ~0.7 us
    /// here (examples/shm_ladder.rs). The deadline is overrun by at most that many polls (a
    /// shm poll is tens of ns, a socket's or a DDS take a microsecond or two). Checks the
    /// deadline at least once.
    fn poll_until(&mut self, deadline_ns: i64) -> Result<Option<Received>, TransportError> {
        loop {
            for _ in 0..POLLS_PER_CHECK {
                if let Some(r) = self.try_take()? {
                    return Ok(Some(r));
                }
            }
            if rtlab_sys::clock::monotonic_ns() >= deadline_ns {
                return Ok(None);
            }
            std::hint::spin_loop();
        }
    }
}

/// A busy-poll reads the clock (for its deadline) once per this many polls.
pub const POLLS_PER_CHECK: u32 = 16;

/// Where a round trip's pong answers from (recorded: on a machine with as many CPUs as
/// spinners it decides who waits for a preemption).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EchoStyle {
    /// A thread of rtlab's takes each ping (in the wait style asked) and publishes it back.
    #[default]
    Thread,
    /// The middleware's own delivery answers: its subscriber callback or data-available
    /// listener publishes the ping back, in the library's thread (one spinner per round
    /// trip, as the middlewares' own ping-pong benchmarks run).
    Callback,
}

impl EchoStyle {
    pub fn name(self) -> &'static str {
        match self {
            EchoStyle::Thread => "thread",
            EchoStyle::Callback => "callback",
        }
    }
}

/// A pong answering from the middleware's delivery ([`Transport::callback_echo`]): it
/// answers from creation until dropped (dropping removes the callback first, waiting for
/// one that runs, then the ports).
pub trait CallbackEcho: Send {
    /// The first error a callback met (the echo stopped answering then), if any so far.
    fn failed(&self) -> Option<String>;
    /// Messages it did not answer because they were not ours to echo (malformed, or longer
    /// than the case's messages).
    fn skipped(&self) -> u64;
}

/// What a callback echo met, written by its callbacks and read by its role: the first error
/// (the echo stops answering then) and the messages not ours to echo.
#[derive(Default)]
pub(crate) struct EchoTally {
    failed: std::sync::OnceLock<String>,
    skipped: std::sync::atomic::AtomicU64,
}

impl EchoTally {
    /// Keep `why` if it is the first error.
    pub(crate) fn fail(&self, why: String) {
        let _ = self.failed.set(why);
    }
    pub(crate) fn skip(&self) {
        self.skipped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    /// An error was met: answer nothing more.
    pub(crate) fn stopped(&self) -> bool {
        self.failed.get().is_some()
    }
}

/// A callback echo as its transport made it: the ports whose callback answers (dropped
/// first: the library removes the callback) and its tally.
pub(crate) struct Answering<P: Send> {
    pub(crate) _ports: P,
    pub(crate) tally: std::sync::Arc<EchoTally>,
}

impl<P: Send> CallbackEcho for Answering<P> {
    fn failed(&self) -> Option<String> {
        self.tally.failed.get().cloned()
    }
    fn skipped(&self) -> u64 {
        self.tally.skipped.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// What a DDS callback echo shares with its callbacks: the pong publisher, used by one
/// callback at a time and never waited for ([`EchoState::on_data`]), and the tally.
pub(crate) struct EchoState {
    again: std::sync::atomic::AtomicBool,
    pong: std::sync::Mutex<Box<dyn Publisher>>,
    tally: std::sync::Arc<EchoTally>,
}

impl EchoState {
    pub(crate) fn new(pong: Box<dyn Publisher>) -> EchoState {
        EchoState {
            again: std::sync::atomic::AtomicBool::new(false),
            pong: std::sync::Mutex::new(pong),
            tally: Default::default(),
        }
    }

    /// What its callbacks met (shared with the [`Answering`] that holds the callback).
    pub(crate) fn tally(&self) -> std::sync::Arc<EchoTally> {
        self.tally.clone()
    }

    /// Called by a data-available callback: take every ping there (`take`: the next one,
    /// None when there is none) and publish each back, unchanged (sequence, stamp, length).
    /// Never waits: the publisher is only ever tried (`try_lock`), and a callback that finds
    /// another one answering leaves its data to it, which takes again before it lets go
    /// (libraries that run callbacks of one reader concurrently lose nothing; Cyclone DDS runs
    /// them one at a time, so there the try always succeeds). A malformed message is not ours
    /// to echo; any other error stops the echo and is kept ([`EchoTally`]).
    pub(crate) fn on_data(
        &self,
        take: &mut dyn FnMut() -> Result<Option<Received>, TransportError>,
    ) {
        use std::sync::atomic::{
            fence,
            Ordering::{AcqRel, Acquire, Release, SeqCst},
        };
        self.again.store(true, Release);
        // store `again`, then try the lock; the one answering unlocks, then reads `again`:
        // each side writes one place and reads the other, which release and acquire alone
        // do not order (on aarch64 both could read the old value and a sample wait for the
        // next callback); a full fence on each side does
        fence(SeqCst);
        loop {
            let mut pong = match self.pong.try_lock() {
                Ok(p) => p,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return, // the one answering sees `again`
            };
            while self.again.swap(false, AcqRel) {
                while !self.tally.stopped() {
                    match take() {
                        Ok(Some(r)) => {
                            if let Err(e) = pong.publish(r.seq, r.stamp_ns, r.len) {
                                self.tally.fail(e.to_string());
                            }
                        }
                        Ok(None) => break,
                        Err(TransportError::Malformed { .. }) => self.tally.skip(),
                        Err(e) => {
                            self.tally.fail(e.to_string());
                        }
                    }
                }
            }
            drop(pong);
            fence(SeqCst);
            if !self.again.load(Acquire) {
                return;
            }
        }
    }
}

/// What a transport is: its CLI name and the largest message (header included) it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct About {
    pub name: &'static str,
    pub max_message: usize,
}

/// A publisher or subscriber a transport made, or why not.
pub type Made<T> = Result<Box<T>, TransportError>;

/// A transport: one per process (it owns the library's session/node/participant).
pub trait Transport: Send + Sync {
    /// What it is.
    fn about(&self) -> About;
    /// The CLI name (`intra`, `udp`, `shm`, `zenoh`, `cyclonedds` ...).
    fn name(&self) -> &'static str {
        self.about().name
    }
    /// The largest message (header included) this transport carries.
    fn max_message(&self) -> usize {
        self.about().max_message
    }
    /// What `qos` becomes natively, or why it cannot be honoured.
    fn map_qos(&self, qos: &Qos) -> Result<QosMapping, TransportError>;
    /// What a publisher or subscriber checks first: `qos` honoured, `max_len` carried.
    fn check(&self, qos: &Qos, max_len: usize) -> Result<(), TransportError> {
        self.map_qos(qos)?;
        check_len(self.name(), self.max_message(), max_len)
    }
    /// A publisher on `topic` for messages up to `max_len` bytes.
    fn publisher(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Publisher>;
    /// A subscriber on `topic` for messages up to `max_len` bytes.
    fn subscriber(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Subscriber>;
    /// A pong that answers every message of `topic_in` on `topic_out` (same sequence, stamp
    /// and length) from the library's own delivery of it: its subscriber callback or
    /// data-available listener ([`EchoStyle::Callback`]). Ok(None) where the library has
    /// none (see [`crate::engine::TransportKind::callback_echo`]).
    fn callback_echo(
        &self,
        _topic_in: &str,
        _topic_out: &str,
        _qos: &Qos,
        _max_len: usize,
    ) -> Result<Option<Box<dyn CallbackEcho>>, TransportError> {
        Ok(None)
    }
    /// The names its middleware gives its own threads (prefixes of `/proc/.../comm`), for
    /// `middleware_priority`; empty where rtlab knows none.
    fn thread_names(&self) -> &'static [&'static str] {
        &[]
    }
    /// Facts about this transport that a reader of the results needs (recorded).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// Labels every stream through this transport carries besides `transport` (ros2: `rmw`,
    /// `ros_distro`).
    fn labels(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    /// What a `ros2` transport runs on (distribution, rcl, RMW, middleware; recorded with the
    /// results); None for every other transport.
    fn ros2_facts(&self) -> Option<crate::ros2_facts::Ros2Facts> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Empty until its `ready`-th poll, then one message; counts its polls.
    struct Polled {
        polls: u32,
        ready: u32,
    }

    impl Subscriber for Polled {
        fn try_take(&mut self) -> Result<Option<Received>, TransportError> {
            self.polls += 1;
            Ok((self.polls == self.ready).then_some(Received { seq: 7, stamp_ns: 1, len: 64 }))
        }
        fn wait_take(&mut self, _timeout_ns: i64) -> Result<Option<Received>, TransportError> {
            unreachable!("busy-poll only")
        }
    }

    #[test]
    fn a_busy_poll_checks_its_deadline_once_per_slice_of_polls() {
        // a deadline already past: one slice of polls, then none
        let mut s = Polled { polls: 0, ready: u32::MAX };
        assert_eq!(s.take_until(WaitStyle::BusyPoll, 0).unwrap(), None);
        assert_eq!(s.polls, POLLS_PER_CHECK);
        // a message in a later slice is taken on the poll it is there
        let mut s = Polled { polls: 0, ready: 3 * POLLS_PER_CHECK + 5 };
        let far = rtlab_sys::clock::monotonic_ns() + 60_000_000_000;
        assert_eq!(s.take_until(WaitStyle::BusyPoll, far).unwrap().map(|r| r.seq), Some(7));
        assert_eq!(s.polls, 3 * POLLS_PER_CHECK + 5);
        // an empty take returns at its deadline, not before (take: a timeout from now)
        let mut s = Polled { polls: 0, ready: u32::MAX };
        let deadline = rtlab_sys::clock::monotonic_ns() + 2_000_000;
        assert_eq!(s.take_until(WaitStyle::BusyPoll, deadline).unwrap(), None);
        assert!(rtlab_sys::clock::monotonic_ns() >= deadline);
        let before = rtlab_sys::clock::monotonic_ns();
        assert_eq!(s.take(WaitStyle::BusyPoll, 1_000_000).unwrap(), None);
        assert!(rtlab_sys::clock::monotonic_ns() >= before + 1_000_000);
    }

    #[test]
    fn a_dds_mapping_names_each_setting_exactly_with_the_depth_in_place() {
        let names = DdsQosNames {
            reliable: "R",
            best_effort: "B",
            keep_last: "KL depth {n} (raised)",
            keep_all: "KA",
            volatile: "V",
            transient_local: "TL",
        };
        let q = Qos {
            reliability: Reliability::Reliable,
            history: History::KeepLast(7),
            durability: Durability::TransientLocal,
        };
        let m = exact_dds_mapping(&q, &names);
        assert_eq!(m.history.native, "KL depth 7 (raised)");
        assert_eq!((m.reliability.native.as_str(), m.durability.native.as_str()), ("R", "TL"));
        assert!([&m.reliability, &m.history, &m.durability]
            .iter()
            .all(|i| i.fidelity == Fidelity::Exact));
        let q = Qos {
            reliability: Reliability::BestEffort,
            history: History::KeepAll,
            durability: Durability::Volatile,
        };
        let m = exact_dds_mapping(&q, &names);
        assert_eq!(
            (
                m.reliability.native.as_str(),
                m.history.native.as_str(),
                m.durability.native.as_str()
            ),
            ("B", "KA", "V")
        );
        assert_eq!(m.history.asked, History::KeepAll.to_string());
    }

    /// A publisher that records what it published (and fails on `fail_at`).
    struct Recording(std::sync::Arc<std::sync::Mutex<Vec<u64>>>, Option<u64>);

    impl Publisher for Recording {
        fn publish(&mut self, seq: u64, _: i64, _: usize) -> Result<(), TransportError> {
            if Some(seq) == self.1 {
                return Err(TransportError::Library {
                    transport: "t",
                    what: "put",
                    why: "x".into(),
                });
            }
            self.0.lock().unwrap().push(seq);
            Ok(())
        }
    }

    /// Callbacks from four threads at once, each after queuing its messages: every message
    /// is published once, in the order taken, though no callback ever waits for another.
    #[test]
    fn an_echo_answers_each_message_once_whichever_callback_takes_it() {
        use std::sync::{Arc, Mutex};
        let out = Arc::new(Mutex::new(Vec::new()));
        let state = Arc::new(EchoState::new(Box::new(Recording(out.clone(), None))));
        let echo = Answering { _ports: (), tally: state.tally() };
        let queue = Arc::new(Mutex::new(std::collections::VecDeque::new()));
        let taken = Arc::new(Mutex::new(Vec::new()));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let (state, queue, taken) = (state.clone(), queue.clone(), taken.clone());
                std::thread::spawn(move || {
                    for i in 0..2000u64 {
                        queue.lock().unwrap().push_back(t * 10_000 + i);
                        state.on_data(&mut || {
                            let Some(seq) = queue.lock().unwrap().pop_front() else {
                                return Ok(None);
                            };
                            taken.lock().unwrap().push(seq);
                            if seq % 97 == 0 {
                                // not ours: skipped, the echo goes on
                                return Err(TransportError::Malformed { transport: "t", why: "x" });
                            }
                            Ok(Some(Received { seq, stamp_ns: 0, len: 16 }))
                        });
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(queue.lock().unwrap().is_empty(), "a message was left untaken");
        let taken = taken.lock().unwrap().clone();
        assert_eq!(taken.len(), 8000);
        let expected: Vec<u64> = taken.iter().copied().filter(|s| s % 97 != 0).collect();
        assert_eq!(*out.lock().unwrap(), expected);
        assert_eq!(echo.failed(), None);
        assert_eq!(echo.skipped(), taken.len() as u64 - expected.len() as u64);
    }

    /// A failed publish stops the echo and is kept; later callbacks take nothing.
    #[test]
    fn an_echo_keeps_its_first_error_and_stops() {
        use std::sync::{Arc, Mutex};
        let out = Arc::new(Mutex::new(Vec::new()));
        let state = EchoState::new(Box::new(Recording(out.clone(), Some(3))));
        let echo = Answering { _ports: (), tally: state.tally() };
        let mut next = 0u64;
        let mut take = || {
            next += 1;
            Ok(Some(Received { seq: next, stamp_ns: 0, len: 16 }))
        };
        state.on_data(&mut take);
        state.on_data(&mut take);
        assert_eq!(*out.lock().unwrap(), vec![1, 2]);
        assert_eq!(next, 3, "nothing taken after the error");
        assert!(echo.failed().is_some_and(|e| e.contains("put")), "{:?}", echo.failed());
    }

    #[test]
    fn header_round_trips_and_short_is_malformed() {
        let mut b = [0u8; 20];
        encode_header(&mut b, 42, -7);
        assert_eq!(decode_header(&b), Some((42, -7)));
        assert_eq!(decode_header(&b[..15]), None);
    }

    #[test]
    fn history_parses() {
        assert_eq!(History::parse("keep-last:7"), Some(History::KeepLast(7)));
        assert_eq!(History::parse("keep-all"), Some(History::KeepAll));
        assert_eq!(History::parse("keep-last:0"), None);
        assert_eq!(History::parse("keep-first"), None);
        assert_eq!(History::KeepLast(3).to_string(), "keep-last:3");
    }

    #[test]
    fn length_limits_are_bad_input() {
        assert!(check_len("x", 100, 15).unwrap_err().is_bad_input());
        assert!(check_len("x", 100, 101).unwrap_err().is_bad_input());
        assert!(check_len("x", 100, 100).is_ok());
    }
}
