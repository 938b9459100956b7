//! The far side's protocol: what the near rtlab and `rtlab agent` say to each other over the
//! agent's stdin and stdout (an ssh channel, or the pipes of `ip netns exec`).
//!
//! Contract: one message per line, `rtlab-far/1 ` followed by its JSON; any other line (a
//! login banner, a shell's motd) is not a message and is ignored. The agent speaks first
//! ([`FromFar::Hello`]: its protocol, version, host and pid); the near answers
//! [`ToFar::Hello`]; a different [`PROTOCOL`] on either side ends the link with one line
//! naming both versions. Then the near sends requests (`id`s it chose, answered once each by a
//! [`FromFar::Reply`] in any order) and a [`ToFar::Keepalive`] at least every
//! [`KEEPALIVE_EVERY`]. The agent relays the events of the roles it started as
//! [`FromFar::Event`]. [`ToFar::Bye`], the end of its stdin, or no message within its
//! keep-alive deadline all end the agent the same way: everything it started is stopped and
//! its profile restored.

use rtlab_core::error::Missing;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Bumped whenever a message changes meaning; both sides must agree. 2: a relayed role
/// event `warm` carries the warm-up message's number. 3: the clock and the trace requests.
pub const PROTOCOL: u32 = 3;
/// Every message line starts with this.
pub const TAG: &str = "rtlab-far/1 ";
/// The longest line either side reads from the other (a message with a whole case's
/// outcome stays far below it); a longer one ends the link, saying so (see
/// `rtlab_core::lines`).
pub const MAX_LINE: usize = 64 << 20;
/// The longest line of a child's stderr that is kept (the rest of it is skipped).
pub const MAX_ERR_LINE: usize = 64 << 10;

/// The last line a child (the agent, a role process) wrote to stderr that is not blank,
/// trimmed: kept by a thread that reads its stderr to the end, each line bounded by
/// [`MAX_ERR_LINE`]; what is said when the child ends without a word of its own.
pub fn last_stderr_line(
    stderr: std::process::ChildStderr,
) -> std::sync::Arc<std::sync::Mutex<String>> {
    use rtlab_core::lines::{BoundedLines, Line};
    let last = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let le = last.clone();
    std::thread::spawn(move || {
        for l in BoundedLines::new(std::io::BufReader::new(stderr), MAX_ERR_LINE) {
            let (Line::Text(l) | Line::TooLong { head: l, .. }) = l;
            if !l.trim().is_empty() {
                *le.lock().unwrap_or_else(|e| e.into_inner()) = l.trim().to_string();
            }
        }
    });
    last
}
/// How often the near side proves it is alive.
pub const KEEPALIVE_EVERY: Duration = Duration::from_secs(1);
/// The agent's default deadline: no message for this long and the link is down.
pub const KEEPALIVE_DEADLINE: Duration = Duration::from_secs(6);

/// This build's version, as both sides state it.
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// Near to far.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToFar {
    Hello {
        protocol: u32,
        version: String,
    },
    /// Nothing to say, still here.
    Keepalive,
    Request {
        id: u64,
        request: Box<Request>,
    },
    /// The run is over: stop and restore everything, then exit.
    Bye,
}

/// What the near side asks of the agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Request {
    /// The far host's facts ([`Facts`]).
    Facts,
    /// Say now what would stop the run there: tools, the real-time priority.
    Check { tools: Vec<String>, policy: rtlab_core::rt::Policy, priority: i32 },
    /// Apply a profile there (journaled on the far host), until [`Request::Finish`].
    Profile { name: String, profile: rtlab_tune::profile::Profile, rt_cpu: Option<usize> },
    /// Start loads there, each limited to `limit_ns` by its tool too.
    Load { loads: Vec<rtlab_load::LoadConfig>, limit_ns: i64 },
    /// Sample the kernel counters there every window.
    Counters { window_ns: i64 },
    /// Stop sampling; the reply is the counters per window (`WindowCounters`).
    StopCounters,
    /// Start a UDP reflector there; the reply is the address it listens on.
    Reflect { config: rtlab_engines::udp::run::UdpReflectConfig },
    /// Stop the reflector; the reply is [`Reflected`].
    StopReflect,
    /// Start a pub/sub role process there (`config`: its `RoleConfig` JSON); its events come
    /// back as [`FromFar::Event`] with this `role` number.
    Role { role: u64, config: String },
    /// Stop a role (its stdin closed: it reports and ends).
    StopRole { role: u64 },
    /// The far host's CLOCK_MONOTONIC now ([`FarClock`]): one exchange of a clock offset's
    /// measurement.
    Clock,
    /// Start tracing there (`rtlab trace --far`): a command under the interposer, or running
    /// processes through uprobes, until [`Request::StopTrace`].
    Trace { trace: FarTrace },
    /// Stop the trace; the reply is [`FarTraced`] (its events then come in pages).
    StopTrace,
    /// The stopped trace's events of its `process`-th process from its `from`-th event
    /// ([`EventPage`]: at most [`PAGE_EVENTS`]).
    TraceEvents { process: usize, from: usize },
    /// Stop everything started, restore the profile; the reply is [`Finished`].
    Finish,
}

/// The far side's clock, read by the agent as it answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FarClock {
    pub monotonic_ns: i64,
}

/// What the far side traces: a command (a program and its arguments) or running processes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FarTrace {
    pub command: Vec<String>,
    pub pid: Vec<i32>,
    pub duration_ns: Option<i64>,
    /// Each process's ring, in slots.
    pub slots: u64,
}

/// A stopped far trace, all but its events; `events` counts each process's (in the order of
/// `TraceEvents`' `process`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FarTraced {
    pub processes: Vec<rtlab_pubsub::trace::run::Traced>,
    pub ended: rtlab_pubsub::trace::run::Ended,
    pub not_kept: u64,
    pub start_monotonic_ns: i64,
    pub end_monotonic_ns: i64,
    pub notes: Vec<String>,
    /// (pid, events) per process that has events.
    pub events: Vec<(i32, usize)>,
}

/// Events per page of `TraceEvents` (a page's line stays a few MB).
pub const PAGE_EVENTS: usize = 20_000;

/// A page of a far process's events.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventPage {
    pub pid: i32,
    pub events: Vec<rtlab_pubsub::trace::event::Event>,
}

/// Far to near.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromFar {
    Hello {
        protocol: u32,
        version: String,
        host: String,
        pid: u32,
        /// Why this agent cannot serve (another agent holds the host), said in one line.
        #[serde(default)]
        refused: Option<String>,
        /// What the agent restored at its start (a killed agent's profile), in one line.
        #[serde(default)]
        restored: Option<String>,
    },
    Reply {
        id: u64,
        result: Result<serde_json::Value, FarError>,
    },
    /// A role's event line (`rtlab-role {json}` of a role process), relayed unchanged.
    Event {
        role: u64,
        line: String,
    },
}

/// Why a request failed there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FarError {
    pub message: String,
    /// What the far host lacks, when that is the cause (the case is then skipped).
    pub missing: Option<Missing>,
}

impl FarError {
    pub fn new(message: impl Into<String>) -> FarError {
        FarError { message: message.into(), missing: None }
    }
}

/// The far host as the agent sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    pub host: String,
    pub version: String,
    pub pid: u32,
    pub root: bool,
    /// Every address of every interface up there, as (interface, address).
    pub addresses: Vec<(String, String)>,
    /// `SSH_CONNECTION` there (client address, port, server address, port) when reached by ssh.
    pub ssh_connection: Option<String>,
    pub environment: rtlab_core::schema::Environment,
}

impl Facts {
    /// The far host's address on the ssh link (the server address of `SSH_CONNECTION`) and
    /// the near one's (its client address).
    pub fn ssh_addresses(&self) -> Option<(String, String)> {
        let w: Vec<&str> = self.ssh_connection.as_deref()?.split_whitespace().collect();
        (w.len() == 4).then(|| (w[0].to_string(), w[2].to_string()))
    }
}

/// What a stopped reflector measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reflected {
    pub streams: Vec<rtlab_core::schema::Stream>,
    pub outcome: serde_json::Value,
    /// What the reflector's window cost there (its thread, the agent's threads by group, the
    /// agent's max RSS); None from an agent before cost.
    #[serde(default)]
    pub cost: Option<rtlab_core::cost::CostWindow>,
}

/// What the far side did, when it finished.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Finished {
    pub load: Option<serde_json::Value>,
    pub profile: Option<serde_json::Value>,
    pub counters: Option<rtlab_core::evidence::WindowCounters>,
    /// Every change put back (None: no profile was applied).
    pub restored: Option<bool>,
    pub notes: Vec<String>,
}

/// One message as a line (newline not included).
pub fn line<T: Serialize>(m: &T) -> String {
    format!("{TAG}{}", serde_json::to_string(m).unwrap_or_default())
}

/// The message of a line; None for a line that is not one (a banner) or does not parse.
pub fn parse<T: for<'de> Deserialize<'de>>(line: &str) -> Option<T> {
    let at = line.find(TAG)?;
    serde_json::from_str(line[at + TAG.len()..].trim_end()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_through_lines() {
        let m = ToFar::Request {
            id: 7,
            request: Box::new(Request::Counters { window_ns: 1_000_000_000 }),
        };
        assert_eq!(parse::<ToFar>(&line(&m)), Some(m));
        let r = FromFar::Reply { id: 7, result: Err(FarError::new("no")) };
        assert_eq!(parse::<FromFar>(&format!("banner {}\n", line(&r))), Some(r));
        assert_eq!(parse::<FromFar>("Welcome to robot2"), None);
        let t = ToFar::Request {
            id: 8,
            request: Box::new(Request::Trace {
                trace: FarTrace {
                    command: vec!["ros2".into(), "launch".into()],
                    pid: vec![],
                    duration_ns: Some(5),
                    slots: 1024,
                },
            }),
        };
        assert_eq!(parse::<ToFar>(&line(&t)), Some(t));
        let page = EventPage {
            pid: 9,
            events: vec![rtlab_pubsub::trace::event::Event {
                kind: rtlab_pubsub::trace::event::Kind::RmwTake,
                cpu: Some(1),
                flags: 1,
                tid: 9,
                time_ns: -3,
                args: [u64::MAX, 0, 1, 2],
                names: vec!["/scan".into()],
            }],
        };
        let back: EventPage = serde_json::from_str(&serde_json::to_string(&page).unwrap()).unwrap();
        assert_eq!(back, page, "a page's events cross the link unchanged (u64 arguments too)");
        assert_eq!(parse::<FromFar>("rtlab-far/1 {not json"), None);
    }

    #[test]
    fn ssh_connection_gives_both_addresses() {
        let f = Facts {
            host: "b".into(),
            version: "0".into(),
            pid: 1,
            root: true,
            addresses: vec![],
            ssh_connection: Some("198.18.0.1 50000 198.18.0.2 22".into()),
            environment: Default::default(),
        };
        assert_eq!(f.ssh_addresses(), Some(("198.18.0.1".into(), "198.18.0.2".into())));
    }
}
