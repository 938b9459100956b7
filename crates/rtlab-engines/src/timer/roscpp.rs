//! roscpp itself (`rtlab timer --mode roscpp | roscpp-wall | roscpp-steady | roscpp-oneshot`):
//! each measuring thread's timer is a roscpp node in a process of its own (`rtlab
//! roscpp-node`, hidden), on Debian's roscpp through rtlab's shim (rtlab-bindings `roscpp`).
//!
//! Why a process each: roscpp starts its threads once per process (its poll manager, XML-RPC
//! server and one timer thread per clock) and they keep the policy of the thread that made
//! them. S4's warning is exactly that: set the priority *before* `ros::init`, or those threads
//! run at normal priority. Each case therefore gets a fresh node, and [`RtOrder`] says when
//! the node sets the thread's policy, priority and CPU: before `ros::init` (S4's order, every
//! roscpp thread inherits them) or after the timer exists (only the thread that spins does).
//! The node reports its threads' policies ([`NodeReport`]): the difference is shown.
//!
//! The master: the user's `ROS_MASTER_URI` when set; otherwise [`Master`] (rtlab-bindings')
//! starts Debian's `rosmaster --core` on a free loopback port for the run and stops it.
//!
//! Contract: the node's callbacks write into a [`SharedRing`]; the measuring thread here runs
//! at normal priority, unpinned, reads the ring every 2 ms and records (off the node's hot
//! path: the node's threads are the ones measured). Every sample is accounted for: a full
//! ring's drops are counted and said. Nothing here prints.

use crate::timer::{Cycles, LoopEnd, Schedule, TimerMode};
use rtlab_core::sink::{Recorder, Sink};
use rtlab_sys::sched::Policy;
use rtlab_sys::shared_ring::SharedRing;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// When the node sets its policy, priority and CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RtOrder {
    /// Before `ros::init` (S4's order): every roscpp thread inherits them.
    #[default]
    BeforeInit,
    /// After the node and its timer exist: only the spinning thread has them.
    AfterInit,
}

/// Samples the ring holds (about 65 s at 1 kHz: read every 2 ms, it never fills unless this
/// process stalls that long).
pub const RING_CAPACITY: u64 = 1 << 16;
/// How long the node waits for the master before it gives up.
pub const MASTER_TIMEOUT_MS: u32 = 5_000;

/// What the node process is told (its one argument, JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeConfig {
    pub mode: TimerMode,
    pub period_ns: i64,
    /// Callbacks to take (None: until the deadline or the stop flag).
    pub count: Option<u64>,
    /// CLOCK_MONOTONIC at which to stop (None: none).
    pub deadline_monotonic_ns: Option<i64>,
    pub policy: Policy,
    pub priority: i32,
    pub cpu: Option<usize>,
    pub order: RtOrder,
    pub mlockall: bool,
    /// The shared ring's descriptor, inherited.
    pub ring_fd: i32,
}

/// One thread of the node as the node saw it at its end.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadSeen {
    pub tid: i32,
    /// `other`, `fifo`, `rr` ... (rtlab-sys `policy_word`).
    pub policy: String,
    pub priority: i32,
}

impl ThreadSeen {
    pub fn describe(&self) -> String {
        if self.priority == 0 {
            self.policy.clone()
        } else {
            format!("{} {}", self.policy, self.priority)
        }
    }
}

/// What the node process says at its end (one JSON line on its stdout).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeReport {
    /// The roscpp version rtlab's shim was built against.
    pub roscpp: String,
    pub master: String,
    pub pid: i32,
    pub order: Option<RtOrder>,
    /// The thread that spun the callback queue (ran the callbacks).
    pub spin: Option<ThreadSeen>,
    /// roscpp's timer thread (the one that queued the callbacks; None: none fired).
    pub timer: Option<ThreadSeen>,
    /// Every other thread roscpp started.
    pub others: Vec<ThreadSeen>,
    /// Callbacks the node took.
    pub callbacks: u64,
    /// Why it failed (None: it ran).
    pub error: Option<String>,
}

impl NodeReport {
    /// The one line that says where roscpp's threads ran, and, after init, what that changed.
    pub fn threads_line(&self) -> Option<String> {
        let spin = self.spin.as_ref()?;
        let timer = self.timer.as_ref().map(ThreadSeen::describe).unwrap_or("not seen".into());
        let same = self
            .others
            .iter()
            .filter(|t| t.policy == spin.policy && t.priority == spin.priority)
            .count();
        let line = format!(
            "roscpp's threads (node pid {}): callbacks spun at {}, roscpp's timer thread at {}, {} of its {} other threads at the spinning thread's policy",
            self.pid,
            spin.describe(),
            timer,
            same,
            self.others.len()
        );
        Some(match (self.order, &self.timer) {
            (Some(RtOrder::AfterInit), Some(t))
                if t.policy != spin.policy || t.priority != spin.priority =>
            {
                format!("{line}; the policy was set after ros::init, so the threads roscpp had started kept theirs (S4's warning)")
            }
            (Some(RtOrder::BeforeInit), _) => {
                format!("{line}; the policy was set before ros::init (S4's order)")
            }
            _ => line,
        })
    }
}

pub use rtlab_bindings::roscpp::Master;

/// One measuring thread's node: started, read until it ends, its report.
#[allow(clippy::too_many_arguments)]
pub fn measure(
    exe: &Path,
    master: &[(String, String)],
    node: NodeConfigBase,
    sched: Schedule,
    latency: &mut Recorder,
    jitter: &mut Recorder,
    second: &mut Recorder,
    stop: &AtomicBool,
    prog: &AtomicU64,
) -> (LoopEnd, NodeReport) {
    let failed =
        |e: String| (LoopEnd::Interrupted, NodeReport { error: Some(e), ..NodeReport::default() });
    let ring = match SharedRing::create(RING_CAPACITY) {
        Ok(r) => r,
        Err(e) => return failed(e.to_string()),
    };
    let start = rtlab_sys::clock::monotonic_ns();
    let cfg = NodeConfig {
        mode: sched.mode,
        period_ns: sched.interval_ns,
        count: sched.slots,
        deadline_monotonic_ns: sched.duration_ns.map(|d| start + d),
        policy: node.policy,
        priority: node.priority,
        cpu: node.cpu,
        order: node.order,
        mlockall: node.mlockall,
        ring_fd: ring.fd(),
    };
    let json = serde_json::to_string(&cfg).unwrap_or_default();
    let mut cmd = Command::new(exe);
    cmd.arg("roscpp-node").arg(json).envs(master.iter().cloned());
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
    // a group of its own: the terminal's Ctrl-C reaches rtlab only, which stops the node
    // through the ring (so that it still reports)
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    rtlab_sys::process::die_with_parent(&mut cmd);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return failed(format!("starting roscpp's node ({}): {e}", exe.display())),
    };
    for r in [&mut *latency, &mut *jitter, &mut *second] {
        r.origin_monotonic_ns = Some(start);
    }
    let mut second_index = 0u64;
    let mut cycles = Cycles::new(latency, jitter, prog);
    let mut asked_stop = false;
    let mut record = |s: rtlab_sys::shared_ring::RingSample| {
        let at = s.at_monotonic - start;
        cycles.record(at, s.error);
        second.record(second_index, at, s.second);
        second_index += 1;
    };
    let status = loop {
        let ended = child.try_wait();
        ring.drain(&mut record);
        match ended {
            Ok(Some(status)) => break Some(status),
            Err(_) => break None,
            Ok(None) => {}
        }
        if stop.load(Ordering::Relaxed) && !asked_stop {
            ring.stop();
            asked_stop = true;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    ring.drain(&mut record);
    let mut out = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    let mut report =
        out.lines().rev().find_map(|l| serde_json::from_str::<NodeReport>(l).ok()).unwrap_or_else(
            || NodeReport {
                error: Some(format!(
                    "roscpp's node (pid {}) ended ({}) without a report",
                    child.id(),
                    status.map(|s| s.to_string()).unwrap_or_else(|| "not reaped".into())
                )),
                ..NodeReport::default()
            },
        );
    cycles.latency.overrun(ring.skipped());
    if ring.dropped() > 0 && report.error.is_none() {
        report.error = Some(format!(
            "{} callbacks were dropped: the ring of {RING_CAPACITY} was full (this process did not read it)",
            ring.dropped()
        ));
    }
    let end = if asked_stop {
        LoopEnd::Interrupted
    } else if sched.slots.is_some_and(|n| report.callbacks >= n) {
        LoopEnd::Count
    } else {
        LoopEnd::Duration
    };
    (end, report)
}

/// What a measuring thread's node needs besides its schedule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NodeConfigBase {
    pub policy: Policy,
    pub priority: i32,
    pub cpu: Option<usize>,
    pub order: RtOrder,
    pub mlockall: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(policy: &str, priority: i32) -> ThreadSeen {
        ThreadSeen { tid: 1, policy: policy.into(), priority }
    }

    #[test]
    fn the_threads_line_says_what_setting_the_policy_after_init_changed() {
        let mut r = NodeReport {
            pid: 7,
            order: Some(RtOrder::AfterInit),
            spin: Some(seen("fifo", 80)),
            timer: Some(seen("other", 0)),
            others: vec![seen("other", 0), seen("other", 0)],
            ..NodeReport::default()
        };
        let line = r.threads_line().unwrap();
        assert!(line.contains("callbacks spun at fifo 80, roscpp's timer thread at other, 0 of its 2 other threads"), "{line}");
        assert!(line.contains("kept theirs (S4's warning)"), "{line}");
        r.order = Some(RtOrder::BeforeInit);
        r.timer = Some(seen("fifo", 80));
        r.others = vec![seen("fifo", 80)];
        let line = r.threads_line().unwrap();
        assert!(
            line.contains("1 of its 1 other threads") && line.contains("(S4's order)"),
            "{line}"
        );
        assert_eq!(NodeReport::default().threads_line(), None);
    }

    #[test]
    fn the_node_config_crosses_as_json() {
        let c = NodeConfig {
            mode: TimerMode::RoscppSteady,
            period_ns: 1_000_000,
            count: Some(5),
            deadline_monotonic_ns: None,
            policy: Policy::Fifo,
            priority: 80,
            cpu: Some(1),
            order: RtOrder::AfterInit,
            mlockall: true,
            ring_fd: 3,
        };
        let j = serde_json::to_string(&c).unwrap();
        assert!(j.contains("\"roscpp-steady\"") && j.contains("\"after-init\""), "{j}");
        assert_eq!(serde_json::from_str::<NodeConfig>(&j).unwrap(), c);
    }
}
