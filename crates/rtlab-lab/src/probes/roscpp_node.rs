//! The node of `rtlab timer --mode roscpp*` (rtlab-engines `timer::roscpp` starts it as
//! `rtlab roscpp-node JSON`, a process of its own per measured timer): it maps the ring its
//! parent made, sets its policy, priority and CPU before `ros::init` or after its timer
//! exists (the configuration's `order`), spins the timer's callbacks on its main thread, and
//! says what it did and where roscpp's threads ran ([`NodeReport`], one JSON line).

use rtlab_bindings::roscpp;
use rtlab_engines::timer::roscpp::{NodeConfig, NodeReport, RtOrder, ThreadSeen};
use rtlab_engines::timer::TimerMode;
use rtlab_sys::shared_ring::SharedRing;

/// Run the node of `json` (its [`NodeConfig`]); the exit code (0: it ran, 2: it could not)
/// and its report.
pub fn run(json: &str) -> (u8, NodeReport) {
    let mut report = NodeReport {
        roscpp: roscpp::BUILT_VERSION.to_string(),
        pid: std::process::id() as i32,
        ..NodeReport::default()
    };
    let code = match node(json, &mut report) {
        Ok(()) => 0,
        Err(e) => {
            report.error = Some(e);
            2
        }
    };
    (code, report)
}

/// Set the node's policy, priority and CPU on this thread (the one that spins).
fn rt(cfg: &NodeConfig) -> Result<(), String> {
    if let Some(c) = cfg.cpu {
        rtlab_sys::sched::set_current_affinity(&[c]).map_err(|e| e.to_string())?;
    }
    if cfg.policy.is_realtime() {
        rtlab_sys::sched::set_current_policy(cfg.policy, cfg.priority)
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn node(json: &str, report: &mut NodeReport) -> Result<(), String> {
    let cfg: NodeConfig = serde_json::from_str(json).map_err(|e| format!("roscpp-node: {e}"))?;
    report.order = Some(cfg.order);
    let kind = match cfg.mode {
        TimerMode::Roscpp => roscpp::Kind::Timer,
        TimerMode::RoscppWall => roscpp::Kind::Wall,
        TimerMode::RoscppSteady => roscpp::Kind::Steady,
        TimerMode::RoscppOneshot => roscpp::Kind::Oneshot,
        m => return Err(format!("roscpp-node: {} is not a roscpp mode", m.name())),
    };
    let ring: &'static SharedRing =
        Box::leak(Box::new(SharedRing::open(cfg.ring_fd).map_err(|e| e.to_string())?));
    roscpp::load()?;
    // memory locked before roscpp allocates (its threads' stacks included)
    let _lock = match cfg.mlockall {
        true => Some(rtlab_sys::memory::MemoryLock::lock_all().map_err(|e| e.to_string())?),
        false => None,
    };
    if cfg.order == RtOrder::BeforeInit {
        rt(&cfg)?;
    }
    roscpp::init("rtlab_timer", None, None, rtlab_engines::timer::roscpp::MASTER_TIMEOUT_MS)?;
    report.master = roscpp::master();
    let ran = roscpp::timer_open(kind, cfg.period_ns, ring).and_then(|()| {
        if cfg.order == RtOrder::AfterInit {
            rt(&cfg)?;
        }
        roscpp::spin(cfg.count.unwrap_or(0), cfg.deadline_monotonic_ns.unwrap_or(0))
    });
    report.callbacks = roscpp::callbacks();
    see_threads(report);
    roscpp::shutdown();
    ran
}

/// Every thread of this process, by its policy and priority: the spinning one (this), roscpp's
/// timer thread, and the rest.
fn see_threads(report: &mut NodeReport) {
    let me = rtlab_sys::tasks::gettid();
    let timer = roscpp::timer_thread();
    for (tid, policy, priority) in rtlab_sys::tasks::OwnThreads::now().0 {
        let seen = ThreadSeen {
            tid,
            policy: rtlab_sys::sched::policy_word(policy.into()).unwrap_or("unknown").to_string(),
            priority,
        };
        if tid == me {
            report.spin = Some(seen);
        } else if Some(tid) == timer {
            report.timer = Some(seen);
        } else {
            report.others.push(seen);
        }
    }
}
