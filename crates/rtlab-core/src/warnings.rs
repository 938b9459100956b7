//! Typed warnings: what weakens a measurement and what the user can do about it.
//! (Model: hyperfine's `src/output/warnings.rs`.)

use crate::schema::{Environment, Warning};

/// Everything rtlab warns about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Warn {
    NotPreemptRt {
        model: String,
    },
    Virtualized {
        kind: String,
    },
    /// rtlab ran as `arch` on a `kernel` kernel: through an emulator (qemu-user).
    Emulated {
        arch: String,
        kernel: String,
    },
    RunTooShort {
        samples: u64,
        wanted: u64,
    },
    NoRtPrivilege,
    NotRealtimePolicy,
    MemoryNotLocked {
        why: String,
    },
    NotHighResTimers,
    RtThrottling {
        runtime_us: i64,
    },
    CpuDmaLatencyUnavailable {
        why: String,
    },
    Interrupted,
    RawSamplesDropped {
        dropped: u64,
    },
    UdpForeignDatagrams {
        count: u64,
    },
    UdpBusyPollInactive,
    UdpFragmented {
        payload: usize,
    },
    UdpPacketLoss {
        lost: u64,
        sent: u64,
    },
    UdpSenderLate {
        overruns: u64,
        max_late_ns: i64,
    },
    /// A load's process ended while the case measured (killed from outside, crashed): after
    /// `after_ms` of the measurement, in window `window`; the windows from there on measured
    /// without it.
    LoadEnded {
        load: String,
        after_ms: Option<i64>,
        window: Option<u64>,
        why: String,
    },
    /// CLOCK_REALTIME stepped by `step_ns` while the case measured (an NTP/chrony step,
    /// `date -s`): after `after_ms`, in window `window`.
    WallClockStepped {
        step_ns: i64,
        after_ms: Option<i64>,
        window: Option<u64>,
    },
    /// The far side's agent, on this machine, was stopped (SIGSTOP: a stall) for `for_ms`
    /// (None: until the measurement's end) from `after_ms`, window `window`.
    FarSideStopped {
        for_ms: Option<i64>,
        after_ms: Option<i64>,
        window: Option<u64>,
    },
    /// The far side ended while the case measured (its agent killed, its host gone): the
    /// case stopped there.
    FarSideEnded {
        why: String,
        after_ms: Option<i64>,
        window: Option<u64>,
    },
    /// The store could not take the case when it ended (`error`); it waited in memory and
    /// was written `waited_ms` later, on try `tries`.
    StoreWaited {
        error: String,
        waited_ms: i64,
        tries: u32,
    },
    /// The link the case measures across (`link`: its interface here) had no carrier for
    /// `for_ms` (None: until the measurement's end) from `after_ms`, window `window`.
    LinkDown {
        link: String,
        for_ms: Option<i64>,
        after_ms: Option<i64>,
        window: Option<u64>,
    },
    /// A cyclic job took longer than its period in half its cycles or more: its deadlines
    /// cannot be kept whatever the machine does.
    JobLongerThanPeriod {
        thread: String,
        job_p50_ns: i64,
        period_ns: i64,
        missed: u64,
        cycles: u64,
    },
    /// A real-time measuring thread page-faulted in its measured window (cost).
    RtThreadPageFaults {
        thread: String,
        faults: u64,
    },
    /// A real-time measuring thread was preempted in its measured window (cost).
    RtThreadPreempted {
        thread: String,
        switches: u64,
    },
    /// The middleware's receive threads ran at a normal policy while the measuring threads
    /// were real-time (cost).
    ReceiveThreadsNotRealtime {
        group: String,
        normal: u32,
        threads: u32,
        middleware: String,
    },
    /// roscpp's timer thread ran at a normal policy while the thread that runs the callbacks
    /// was real-time (the policy set after `ros::init`).
    TimerThreadNotRealtime {
        thread: usize,
        timer: String,
        spin: String,
        normal: u32,
        others: u32,
    },
}

impl Warn {
    pub fn code(&self) -> &'static str {
        match self {
            Warn::NotPreemptRt { .. } => "not-preempt-rt",
            Warn::Virtualized { .. } => "virtualized",
            Warn::Emulated { .. } => "emulated",
            Warn::RunTooShort { .. } => "run-too-short",
            Warn::NoRtPrivilege => "no-rt-privilege",
            Warn::NotRealtimePolicy => "not-realtime-policy",
            Warn::MemoryNotLocked { .. } => "memory-not-locked",
            Warn::NotHighResTimers => "no-high-res-timers",
            Warn::RtThrottling { .. } => "rt-throttling",
            Warn::CpuDmaLatencyUnavailable { .. } => "cpu-dma-latency-unavailable",
            Warn::Interrupted => "interrupted",
            Warn::RawSamplesDropped { .. } => "raw-samples-dropped",
            Warn::UdpForeignDatagrams { .. } => "udp-foreign-datagrams",
            Warn::UdpBusyPollInactive => "udp-busy-poll-inactive",
            Warn::UdpFragmented { .. } => "udp-fragmented",
            Warn::UdpPacketLoss { .. } => "udp-packet-loss",
            Warn::UdpSenderLate { .. } => "udp-sender-late",
            Warn::LoadEnded { .. } => "load-ended",
            Warn::WallClockStepped { .. } => "wall-clock-stepped",
            Warn::FarSideStopped { .. } => "far-side-stopped",
            Warn::LinkDown { .. } => "link-down",
            Warn::FarSideEnded { .. } => "far-side-ended",
            Warn::StoreWaited { .. } => "store-waited",
            Warn::JobLongerThanPeriod { .. } => "job-longer-than-period",
            Warn::RtThreadPageFaults { .. } => "rt-thread-page-faults",
            Warn::RtThreadPreempted { .. } => "rt-thread-preempted",
            Warn::ReceiveThreadsNotRealtime { .. } => "receive-threads-not-realtime",
            Warn::TimerThreadNotRealtime { .. } => "timer-thread-not-realtime",
        }
    }

    pub fn message(&self) -> String {
        match self {
            Warn::NotPreemptRt { model } => format!(
                "the kernel is not PREEMPT_RT (preemption model: {model}): worst cases of milliseconds are expected under load; boot a PREEMPT_RT kernel for bounded latency"
            ),
            Warn::Virtualized { kind } => format!(
                "running in a {kind} virtual machine: the hypervisor can delay any wake-up (steal time); measure on the robot's own hardware for figures that count"
            ),
            Warn::Emulated { arch, kernel } => format!(
                "rtlab ran as {arch} on a {kernel} kernel, through an emulator (qemu-user): this shows behaviour, not latency (every time here is the emulator's); measure on {arch} hardware for figures that count"
            ),
            Warn::RunTooShort { samples, wanted } => format!(
                "only {samples} samples: rare spikes need long runs (the studies ran hours); use at least {wanted} samples for a p99.99 that means something"
            ),
            Warn::NoRtPrivilege => "the threads ran without a real-time policy: run as root or grant CAP_SYS_NICE / an rtprio limit (refused as root: `rtlab tune check` rows rt-privilege and rt-group-sched name the cause, e.g. a cgroup without real-time runtime)".to_string(),
            Warn::MemoryNotLocked { why } => format!(
                "mlockall failed ({why}): page faults can add latency; run as root or raise the memlock limit (ulimit -l)"
            ),
            Warn::NotRealtimePolicy => "the threads ran with SCHED_OTHER: use --policy fifo for real-time figures".to_string(),
            Warn::NotHighResTimers => "high-resolution timers are not active: wake-ups are rounded to the tick".to_string(),
            Warn::RtThrottling { runtime_us } => format!(
                "RT throttling is on (sched_rt_runtime_us = {runtime_us}): a busy real-time thread is stopped for the rest of each second; set it to -1 for long RT bursts"
            ),
            Warn::CpuDmaLatencyUnavailable { why } => format!("could not hold /dev/cpu_dma_latency: {why}"),
            Warn::Interrupted => "the run was interrupted: the figures cover only what was measured before the stop".to_string(),
            Warn::RawSamplesDropped { dropped } => format!(
                "{dropped} raw samples did not reach the raw file (the writer fell behind); the statistics still include them"
            ),
            Warn::UdpForeignDatagrams { count } => format!(
                "{count} datagrams that were not replies of this run arrived (malformed, another run id, or not what was sent): is another client using the reflector?"
            ),
            Warn::UdpBusyPollInactive => "SO_BUSY_POLL is set but net.core.busy_poll is 0, so poll(2) does not busy-poll: set sysctl net.core.busy_poll=50 (and use a NIC with NAPI)".to_string(),
            Warn::UdpFragmented { payload } => format!(
                "a {payload}-byte payload does not fit a 1500-byte MTU (1472 B over IPv4): every datagram travels as IP fragments, and losing one loses the datagram (S3)"
            ),
            Warn::UdpPacketLoss { lost, sent } => format!(
                "{lost} of {sent} requests got no reply within the loss timeout: see the reflector's report for the forward path"
            ),
            Warn::UdpSenderLate { overruns, max_late_ns } => format!(
                "{overruns} send slots were skipped, the sender was up to {} us late (stream ping.send_lateness): it was preempted, or blocked in send() on a full socket buffer because a queue ahead holds the probe's packets; try --sndbuf, --policy fifo, a priority path",
                max_late_ns / 1_000
            ),
            Warn::LoadEnded { load, after_ms, window, why } => format!(
                "the load {load} ended {} into the measurement{}: {why}; the windows from there on measured without it (the case's figures mix both)",
                at(*after_ms),
                in_window(*window)
            ),
            Warn::WallClockStepped { step_ns, after_ms, window } => format!(
                "the wall clock (CLOCK_REALTIME) stepped by {:+.3} ms {} into the measurement{}: one-way figures stamped on the wall clock are invalid in that window (an NTP/chrony step or `date -s`; slew the clock instead); round trips and everything timed on CLOCK_MONOTONIC are not affected",
                *step_ns as f64 / 1e6,
                at(*after_ms),
                in_window(*window)
            ),
            Warn::FarSideStopped { for_ms, after_ms, window } => format!(
                "the far side's agent was stopped {} from {} into the measurement{}: what it should have answered then is counted lost or late, never invented",
                lasting(*for_ms),
                at(*after_ms),
                in_window(*window)
            ),
            Warn::FarSideEnded { why, after_ms, window } => format!(
                "the far side ended {} into the measurement{} ({why}): the case stopped there; what was sent before is accounted for, nothing after",
                at(*after_ms),
                in_window(*window)
            ),
            Warn::StoreWaited { error, waited_ms, tries } => format!(
                "the store could not take this case when it ended ({error}): it waited in memory and was written {:.1} s later, on try {tries}; nothing of it was lost",
                *waited_ms as f64 / 1000.0
            ),
            Warn::LinkDown { link, for_ms, after_ms, window } => format!(
                "the link {link} had no carrier {} from {} into the measurement{}: what was sent across it then is counted lost, never invented",
                lasting(*for_ms),
                at(*after_ms),
                in_window(*window)
            ),
            Warn::JobLongerThanPeriod { thread, job_p50_ns, period_ns, missed, cycles } => format!(
                "{thread}'s job took {:.3} ms at median, longer than its period of {:.3} ms: {missed} of {cycles} deadlines were missed because the job itself does not fit, whatever the machine does; shorten the job (--work) or lengthen the period (--interval)",
                *job_p50_ns as f64 / 1e6,
                *period_ns as f64 / 1e6
            ),
            Warn::RtThreadPageFaults { thread, faults } => format!(
                "the real-time thread {thread} page-faulted {faults} times in its measured window (cost): each fault can add microseconds; lock memory (mlockall, on unless --no-mlockall) and touch buffers before the loop"
            ),
            Warn::RtThreadPreempted { thread, switches } => format!(
                "the real-time thread {thread} was preempted {switches} times in its measured window (involuntary context switches, cost): a thread of higher or equal priority, an IRQ thread or the hypervisor took its CPU; isolate its CPU (profile rt-isolation)"
            ),
            Warn::ReceiveThreadsNotRealtime { group, normal, threads, middleware } => format!(
                "{middleware}'s receive threads {group} ({normal} of {threads}) ran at a normal policy while rtlab's measuring threads were real-time: under CPU load a message waits for them behind every busy thread, late or lost; give them a real-time priority (pubsub --thread-priority, docs/ros2.md \"Threads and priorities\")"
            ),
            Warn::TimerThreadNotRealtime { thread, timer, spin, normal, others } => format!(
                "thread{thread}: roscpp's timer thread ran at {timer} (and {normal} of its {others} other threads at a normal policy) while the callbacks ran at {spin}: it decides when a callback is queued, so under load the callbacks come late; set the policy before ros::init, as S4 did (--roscpp-rt before-init)"
            ),
        }
    }

    pub fn to_warning(&self) -> Warning {
        Warning { code: self.code().to_string(), message: self.message() }
    }
}

/// `12.3 s`: when an event happened, from the measurement's start.
fn at(after_ms: Option<i64>) -> String {
    after_ms
        .map(|m| format!("{:.1} s", m as f64 / 1000.0))
        .unwrap_or_else(|| "at some point".into())
}

/// ` (window 12)`, or nothing.
fn in_window(window: Option<u64>) -> String {
    window.map(|w| format!(" (window {w})")).unwrap_or_default()
}

/// `for 2.0 s`, or `until the end` for what had not ended when the measurement did.
fn lasting(for_ms: Option<i64>) -> String {
    match for_ms {
        Some(m) => format!("for {:.1} s", m as f64 / 1000.0),
        None => "until the end".into(),
    }
}

/// The warnings that follow from the environment alone.
pub fn environment_warnings(env: &Environment) -> Vec<Warn> {
    let mut w = Vec::new();
    if !env.preempt_rt {
        w.push(Warn::NotPreemptRt { model: env.preemption_model.clone() });
    }
    if let Some(kind) = &env.virtualization {
        w.push(Warn::Virtualized { kind: kind.clone() });
    }
    if !env.kernel_architecture.is_empty()
        && !env.architecture.is_empty()
        && env.kernel_architecture != env.architecture
    {
        w.push(Warn::Emulated {
            arch: env.architecture.clone(),
            kernel: env.kernel_architecture.clone(),
        });
    }
    if env.high_res_timers == Some(false) {
        w.push(Warn::NotHighResTimers);
    }
    if !env.memory_locked {
        w.push(Warn::MemoryNotLocked { why: "not requested or refused".into() });
    }
    w
}

/// The warnings of a case's cost: a page fault or an involuntary switch of a real-time
/// (FIFO or RR) measuring thread inside its window, with its count.
pub fn cost_warnings(cost: &crate::cost::Cost) -> Vec<Warn> {
    let mut w = Vec::new();
    for (thread, faults, switches) in cost.realtime_disturbed() {
        if faults > 0 {
            w.push(Warn::RtThreadPageFaults { thread: thread.clone(), faults });
        }
        if switches > 0 {
            w.push(Warn::RtThreadPreempted { thread, switches });
        }
    }
    for (group, normal, threads, middleware) in cost.receive_threads_not_realtime() {
        let middleware = middleware.to_string();
        w.push(Warn::ReceiveThreadsNotRealtime { group, normal, threads, middleware });
    }
    w
}

/// A run shorter than this many samples cannot say much about p99.99.
pub const MIN_SAMPLES_FOR_TAIL: u64 = 100_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_follow_the_environment() {
        let env = Environment {
            preemption_model: "none".into(),
            virtualization: Some("kvm".into()),
            high_res_timers: Some(true),
            memory_locked: true,
            ..Default::default()
        };
        let codes: Vec<_> = environment_warnings(&env).iter().map(|w| w.code()).collect();
        assert_eq!(codes, vec!["not-preempt-rt", "virtualized"]);
        // the same architecture, or a kernel that does not say its own: nothing; another: emulated
        let native = Environment {
            architecture: "x86_64".into(),
            kernel_architecture: "x86_64".into(),
            ..env.clone()
        };
        assert!(!environment_warnings(&native).iter().any(|w| w.code() == "emulated"));
        let unsaid = Environment { kernel_architecture: String::new(), ..native.clone() };
        assert!(!environment_warnings(&unsaid).iter().any(|w| w.code() == "emulated"));
        let emulated = Environment { architecture: "aarch64".into(), ..native };
        let w = environment_warnings(&emulated);
        let e = w.iter().find(|w| w.code() == "emulated").expect("an emulated warning");
        assert!(
            e.message().contains("aarch64 on a x86_64 kernel")
                && e.message().contains("not latency")
        );
        assert!(Warn::NotPreemptRt { model: "none".into() }.message().contains("none"));
    }

    #[test]
    fn a_realtime_thread_that_faulted_or_was_preempted_is_warned_of_with_its_count() {
        use crate::cost::{Cost, CostWindow, MeasuringThread, Usage};
        let t = |policy: &str, minor: u64, invol: u64| MeasuringThread {
            process: "rtlab".into(),
            thread: format!("rtlab-{policy}"),
            policy: policy.into(),
            priority: 0,
            window_ns: 1,
            usage: Usage { minor_faults: minor, involuntary_switches: invol, ..Default::default() },
        };
        let cost = Cost {
            windows: vec![CostWindow {
                name: "timer".into(),
                measuring: vec![t("fifo", 3, 0), t("rr", 0, 2), t("other", 9, 9)],
                ..Default::default()
            }],
            ..Default::default()
        };
        let w = cost_warnings(&cost);
        assert_eq!(
            w,
            vec![
                Warn::RtThreadPageFaults { thread: "rtlab-fifo".into(), faults: 3 },
                Warn::RtThreadPreempted { thread: "rtlab-rr".into(), switches: 2 },
            ]
        );
        assert_eq!(w[0].code(), "rt-thread-page-faults");
        assert!(w[1].message().contains("preempted 2 times"), "{}", w[1].message());
    }

    #[test]
    fn receive_threads_at_a_normal_policy_beside_realtime_measuring_threads_are_warned_of() {
        use crate::cost::{Cost, CostWindow, MeasuringThread, SchedShare, ThreadGroup};
        let share = |policy: &str, priority, threads| SchedShare {
            policy: policy.into(),
            priority,
            threads,
        };
        let group = |process: &str, name: &str, sched: Vec<SchedShare>| ThreadGroup {
            process: process.into(),
            group: name.into(),
            threads: sched.iter().map(|s| s.threads).sum(),
            sched,
            ..Default::default()
        };
        let window = |policy: &str| CostWindow {
            name: "p500".into(),
            measuring: vec![MeasuringThread { policy: policy.into(), ..Default::default() }],
            groups: vec![
                group("rtlab", "dds.udp.*", vec![share("other", 0, 3), share("fifo", 75, 1)]),
                group("rtlab", "dds.ev.*", vec![share("other", 0, 2)]),
                group("pong0", "recv", vec![share("fifo", 75, 1)]),
            ],
            ..Default::default()
        };
        let rt = Cost { windows: vec![window("fifo"), window("fifo")], ..Default::default() };
        let w = cost_warnings(&rt);
        // the receive threads only (not the event threads), once for both windows
        assert_eq!(
            w,
            vec![Warn::ReceiveThreadsNotRealtime {
                group: "rtlab:dds.udp.*".into(),
                normal: 3,
                threads: 4,
                middleware: "Fast DDS".into(),
            }]
        );
        assert_eq!(w[0].code(), "receive-threads-not-realtime");
        assert!(
            w[0].message().starts_with(
                "Fast DDS's receive threads rtlab:dds.udp.* (3 of 4) ran at a normal policy"
            ),
            "{}",
            w[0].message()
        );
        // no-rt: nothing was promised
        let normal = Cost { windows: vec![window("other")], ..Default::default() };
        assert!(cost_warnings(&normal).is_empty());
        // the far side's receive threads count too
        let far = Cost {
            windows: vec![window("fifo")],
            far: vec![CostWindow {
                groups: vec![group("agent", "recvUC", vec![share("other", 0, 1)])],
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(cost_warnings(&far).len(), 2);
    }
}
