//! The trace probe (`rtlab trace -- COMMAND...`, scenario `kind = "trace"`): a ROS 2
//! application's own messages, through rtlab's tracepoint interposer preloaded into every
//! process it starts (no rebuild, no LTTng): its graph with each edge's latency and losses,
//! its chains hop by hop, its callbacks where the client library reports them.
//!
//! Contract: [`TraceProbeConfig`] is the one configuration. Each edge (a publisher and a
//! subscription that carried messages) is a stream `message_latency`; each chain a stream
//! `chain_latency` whose hops are in the document's `config.trace.chains`. A sample's
//! deadline is the one given for its topic or chain (`deadline`), else the publisher's median
//! period. The kernel's windows are the evidence's, as every probe's. The application's exit
//! is said; a command that cannot start is a [`ConfigError`] of one line.

use crate::config::{positive, ConfigError, Dur, List, Validate};
use crate::document::{new_document, run_warnings, RunFacts};
use crate::error::LabError;
use crate::far::FarSpec;
use crate::probe::{Context, Plan, Probe, ProbeKind};
use rtlab_core::rt::RtSettings;
use rtlab_core::schema::{ResultDocument, Stream, Warning};
use rtlab_core::sink::{Recorder, RecorderConfig, Sink};
use rtlab_core::stats::Summary;
use rtlab_pubsub::trace::analysis::{analyse, host_pid, Analysis, Chain, Edge};
use rtlab_pubsub::trace::ring::{DEFAULT_SLOTS, MAX_SLOTS, MIN_SLOTS};
use rtlab_pubsub::trace::run::{run, Ended, TraceError, TraceOutcome, TraceRun};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;

mod far;
pub(crate) mod pids;

pub const KIND: ProbeKind = ProbeKind {
    kind: "trace",
    about: "a ROS 2 application's own messages: its graph, edges, chains and callbacks",
    parse: crate::probe::parse_as::<TraceProbeConfig>,
};

/// The trace probe's configuration (flags and `[[probe]]` keys have these names).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TraceProbeConfig {
    /// The application: a program and its arguments; one string with spaces is a shell
    /// command line (`sh -c`), as a scenario writes it (`command = "ros2 launch pkg x.py"`).
    pub command: List<String>,
    /// Or processes that run already, by pid: their tracepoints through uprobes.
    pub pid: List<i64>,
    /// A far side whose application is traced too, by the agent there, and joined with this
    /// host's through the clock offset measured over the link: ssh:[USER@]HOST[:PORT],
    /// netns:NAME or pair.
    pub far: Option<FarSpec>,
    /// The far side's application (as `command`, run there).
    pub far_command: List<String>,
    /// Or processes that run there already, by pid.
    pub far_pid: List<i64>,
    /// Stop it after this long (default: when it ends).
    pub duration: Option<Dur>,
    /// Chains to follow (`/scan,/filtered,/cmd_vel`); none: every chain the graph implies.
    pub chain: List<String>,
    /// Deadlines by topic or chain (`/scan=20ms`, `/scan,/cmd_vel=50ms`).
    pub deadline: List<String>,
    /// Each process's ring, in 64-byte slots (a power of two, 1024 to 16777216).
    pub slots: u64,
    pub window: Dur,
}

impl Default for TraceProbeConfig {
    fn default() -> Self {
        TraceProbeConfig {
            command: List(Vec::new()),
            pid: List(Vec::new()),
            far: None,
            far_command: List(Vec::new()),
            far_pid: List(Vec::new()),
            duration: None,
            chain: List(Vec::new()),
            deadline: List(Vec::new()),
            slots: DEFAULT_SLOTS,
            window: Dur::s(1),
        }
    }
}

impl Validate for TraceProbeConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        let no_command = self.command.0.is_empty() || self.command.0[0].trim().is_empty();
        let no_far_command =
            self.far_command.0.is_empty() || self.far_command.0[0].trim().is_empty();
        let far_traced = !no_far_command || !self.far_pid.0.is_empty();
        match (no_command, self.pid.0.is_empty()) {
            (true, true) if !far_traced => {
                return Err(ConfigError::new(
                    "command",
                    "none given (rtlab trace -- COMMAND..., or --pid PID of a running process)",
                ))
            }
            (true, true) if self.duration.is_none() => {
                return Err(ConfigError::new(
                    "duration",
                    "none given: with nothing traced on this host, the far side is traced for a duration (-D)",
                ))
            }
            (false, false) => {
                return Err(ConfigError::new("pid", "and a command: trace one or the other"))
            }
            _ => {}
        }
        match (&self.far, far_traced) {
            (None, true) => {
                let key = if no_far_command { "far_pid" } else { "far_command" };
                return Err(ConfigError::new(
                    key,
                    "needs a far side (far = ssh:HOST, netns:NAME or pair)",
                ));
            }
            (Some(_), false) => {
                return Err(ConfigError::new(
                    "far",
                    "and nothing to trace there (far_command, or far_pid of a process there)",
                ))
            }
            _ if !no_far_command && !self.far_pid.0.is_empty() => {
                return Err(ConfigError::new(
                    "far_pid",
                    "and a far_command: trace one or the other",
                ))
            }
            _ => {}
        }
        for (key, pids) in [("pid", &self.pid), ("far_pid", &self.far_pid)] {
            if let Some(p) = pids.0.iter().find(|&&p| p <= 0 || p > i64::from(i32::MAX)) {
                return Err(ConfigError::new(key, format!("{p}: a process id is above 0")));
            }
        }
        for c in &self.chain.0 {
            let topics = chain_topics(c);
            if topics.len() < 2 || topics.iter().any(|t| !t.starts_with('/') || t.len() < 2) {
                return Err(ConfigError::new(
                    "chain",
                    format!("'{c}': two topics or more, each a ROS 2 name (/scan,/cmd_vel)"),
                ));
            }
        }
        self.deadlines()?;
        if !(MIN_SLOTS..=MAX_SLOTS).contains(&self.slots) || !self.slots.is_power_of_two() {
            return Err(ConfigError::new(
                "slots",
                format!("{}: a power of two from {MIN_SLOTS} to {MAX_SLOTS}", self.slots),
            ));
        }
        positive("duration", self.duration)?;
        positive("window", Some(self.window))?;
        Ok(())
    }
}

/// A command as a program and its arguments: one string with spaces is a shell command line.
fn argv(command: &List<String>) -> Vec<String> {
    match command.0.as_slice() {
        [one] if one.trim().is_empty() => Vec::new(),
        [one] if one.contains(char::is_whitespace) => vec!["sh".into(), "-c".into(), one.clone()],
        all => all.to_vec(),
    }
}

fn chain_topics(spec: &str) -> Vec<String> {
    spec.split(',').map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect()
}

impl TraceProbeConfig {
    /// The program and its arguments to start.
    pub fn argv(&self) -> Vec<String> {
        argv(&self.command)
    }

    /// The far side's program and its arguments.
    pub fn far_argv(&self) -> Vec<String> {
        argv(&self.far_command)
    }

    /// Whether anything is traced on this host (else only the far side is).
    pub fn traces_here(&self) -> bool {
        !self.argv().is_empty() || !self.pid.0.is_empty()
    }

    /// `deadline` as (topic or chain, ns).
    pub fn deadlines(&self) -> Result<BTreeMap<String, i64>, ConfigError> {
        let mut m = BTreeMap::new();
        for d in &self.deadline.0 {
            let bad = |why: &str| ConfigError::new("deadline", format!("'{d}': {why}"));
            let (what, dur) = d.rsplit_once('=').ok_or_else(|| bad("TOPIC=DURATION"))?;
            let ns =
                rtlab_core::units::parse_duration(dur.trim()).map_err(|e| bad(&e.to_string()))?.0;
            if ns <= 0 || !what.starts_with('/') {
                return Err(bad("a topic or chain (/scan, /scan,/cmd_vel) = a positive duration"));
            }
            m.insert(chain_topics(what).join(","), ns);
        }
        Ok(m)
    }
}

/// Who a process key is: this host's pid, or a far host's (`analysis::far_key`).
#[derive(Clone, Debug, Default)]
pub struct Hosts {
    /// The far host's name (`--far`).
    pub far: Option<String>,
    /// The uncertainty of a latency across the two hosts' clocks (0: one clock).
    pub uncertainty_ns: i64,
}

impl Hosts {
    fn pid(&self, key: i32) -> i32 {
        host_pid(key).1
    }
    /// The far host's name for a far key (None: this host).
    fn host(&self, key: i32) -> Option<&str> {
        host_pid(key).0.then(|| self.far.as_deref().unwrap_or("far"))
    }
    /// `pid N`, or `pid N on HOST` for a far process.
    fn label(&self, key: i32) -> String {
        match self.host(key) {
            Some(h) => format!("pid {} on {h}", self.pid(key)),
            None => format!("pid {}", self.pid(key)),
        }
    }
}

/// A summary of values (ns), through the same statistics every stream has.
fn summary_of(values: impl Iterator<Item = i64>) -> Summary {
    let mut r = Recorder::new(&recorder_config(i64::MAX, 1_000_000_000, 1), None);
    for (i, v) in values.enumerate() {
        r.record(i as u64, 0, v);
    }
    let mut s = r.summary();
    s.missed = None;
    s.overruns = None;
    s
}

fn recorder_config(deadline_ns: i64, window_ns: i64, duration_ns: i64) -> RecorderConfig {
    RecorderConfig {
        deadline_ns,
        window_ns,
        window_capacity: rtlab_engines::hold::window_capacity(duration_ns, window_ns),
        max_samples: None,
        us_histogram_buckets: None,
        spike_threshold_ns: None,
    }
}

fn median(mut v: Vec<i64>) -> Option<i64> {
    v.sort_unstable();
    v.get(v.len() / 2).copied()
}

/// Each publisher's median period: the deadline of a topic nobody gave one.
fn periods(a: &Analysis) -> BTreeMap<usize, i64> {
    let mut times: BTreeMap<usize, Vec<i64>> = BTreeMap::new();
    for p in &a.publishes {
        times.entry(p.publisher).or_default().push(p.time_ns);
    }
    times
        .into_iter()
        .filter_map(|(k, mut t)| {
            t.sort_unstable();
            let d: Vec<i64> = t.windows(2).map(|w| w[1] - w[0]).collect();
            median(d).map(|m| (k, m))
        })
        .collect()
}

fn short(s: &Summary) -> serde_json::Value {
    json!({"count": s.count, "mean_ns": s.mean_ns, "p50_ns": s.p50_ns, "p99_ns": s.p99_ns,
           "max_ns": s.max_ns})
}

fn edge_stream(
    a: &Analysis,
    hosts: &Hosts,
    e: &Edge,
    deadline_ns: i64,
    origin: i64,
    window_ns: i64,
    duration_ns: i64,
) -> Stream {
    let p = &a.publishers[e.publisher];
    let s = &a.subscriptions[e.subscription];
    let mut r = Recorder::new(&recorder_config(deadline_ns, window_ns, duration_ns), None);
    r.origin_monotonic_ns = Some(origin);
    for (i, &(t, l)) in e.latencies.iter().enumerate() {
        r.record(i as u64, t - origin, l);
    }
    let labels = BTreeMap::from([
        ("topic".to_string(), p.topic.clone()),
        ("publisher".to_string(), format!("{} ({})", p.node, hosts.label(p.pid))),
        ("subscription".to_string(), format!("{} ({})", s.node, hosts.label(s.pid))),
    ]);
    let across = (p.pid < 0) != (s.pid < 0);
    let definition = if across && hosts.uncertainty_ns > 0 {
        format!("rmw_take in the subscription's process - rcl_publish in the publisher's, on two hosts: the far one's times through the clock offset measured over the link (± {} ns)", hosts.uncertainty_ns)
    } else {
        "rmw_take in the subscription's process - rcl_publish in the publisher's (one CLOCK_MONOTONIC)".to_string()
    };
    let mut st = Stream::from_recorder(
        format!("{} {} -> {}", p.topic, p.node, s.node),
        "message_latency",
        &definition,
        labels,
        &r,
    );
    st.stats.lost = Some(e.lost);
    st
}

/// Whether a chain's messages cross the two hosts (its first publish on one, a take on the
/// other).
fn chain_across(a: &Analysis, c: &Chain) -> bool {
    let Some(m) = c.messages.first() else { return false };
    let first = m.takes.first().and_then(|&t| a.takes[t].publish);
    let Some(p) = first.map(|p| a.publishers[a.publishes[p].publisher].pid) else { return false };
    m.takes.iter().any(|&t| (a.subscriptions[a.takes[t].subscription].pid < 0) != (p < 0))
}

fn chain_stream(
    a: &Analysis,
    hosts: &Hosts,
    c: &Chain,
    deadline_ns: i64,
    (origin, window_ns, dur): (i64, i64, i64),
) -> Stream {
    let mut r = Recorder::new(&recorder_config(deadline_ns, window_ns, dur), None);
    r.origin_monotonic_ns = Some(origin);
    for (i, m) in c.messages.iter().enumerate() {
        r.record(i as u64, m.start_ns - origin, m.end_to_end_ns);
    }
    let labels = BTreeMap::from([("chain".to_string(), c.topics.join(","))]);
    let mut definition = "rmw_take of the last topic - rcl_publish of the first, along one message's way (its hops: middleware, node, ...)".to_string();
    if hosts.uncertainty_ns > 0 && chain_across(a, c) {
        definition.push_str(&format!(", across two hosts: the far one's times through the clock offset measured over the link (± {} ns)", hosts.uncertainty_ns));
    }
    let mut st = Stream::from_recorder(
        chain_stream_name(&c.topics),
        "chain_latency",
        &definition,
        labels,
        &r,
    );
    st.stats.lost = Some(c.incomplete);
    st
}

/// A chain's stream: `chain /scan -> /cmd_vel` (a gate's `chain = "/scan,/cmd_vel"`).
pub fn chain_stream_name<S: AsRef<str>>(topics: &[S]) -> String {
    let t: Vec<&str> = topics.iter().map(AsRef::as_ref).collect();
    format!("chain {}", t.join(" -> "))
}

/// The chain's facts: its hops' summaries and its worst messages with where they ran.
fn chain_facts(a: &Analysis, hosts: &Hosts, c: &Chain, origin: i64) -> serde_json::Value {
    let hops: Vec<_> = c
        .hop_names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let s = summary_of(c.messages.iter().filter_map(|m| m.hops.get(i).copied()));
            json!({"hop": name, "summary": short(&s)})
        })
        .collect();
    let mut worst: Vec<_> = c.messages.iter().collect();
    worst.sort_by_key(|m| std::cmp::Reverse(m.end_to_end_ns));
    let worst: Vec<_> = worst
        .iter()
        .take(3)
        .map(|m| {
            let takes: Vec<_> = m
                .takes
                .iter()
                .map(|&t| {
                    let tk = &a.takes[t];
                    let s = &a.subscriptions[tk.subscription];
                    json!({"topic": s.topic, "node": s.node, "pid": hosts.pid(s.pid), "host": hosts.host(s.pid), "tid": tk.tid, "cpu": tk.cpu})
                })
                .collect();
            json!({"at_ns": m.start_ns - origin, "end_to_end_ns": m.end_to_end_ns, "hops_ns": m.hops, "takes": takes})
        })
        .collect();
    let across = chain_across(a, c);
    json!({"topics": c.topics, "messages": c.messages.len(), "incomplete": c.incomplete,
           "across_hosts": across,
           "clock_uncertainty_ns": if across { hosts.uncertainty_ns } else { 0 },
           "end_to_end": short(&summary_of(c.messages.iter().map(|m| m.end_to_end_ns))),
           "hops": hops, "worst": worst})
}

fn facts(
    cfg: &TraceProbeConfig,
    o: &TraceOutcome,
    a: &Analysis,
    hosts: &Hosts,
    origin: i64,
) -> serde_json::Value {
    let edges: Vec<_> = a
        .edges
        .iter()
        .map(|e| {
            let p = &a.publishers[e.publisher];
            let s = &a.subscriptions[e.subscription];
            let across = (p.pid < 0) != (s.pid < 0);
            json!({"topic": p.topic, "publisher": p.node, "publisher_pid": hosts.pid(p.pid),
                   "publisher_host": hosts.host(p.pid),
                   "subscription": s.node, "subscription_pid": hosts.pid(s.pid),
                   "subscription_host": hosts.host(s.pid), "across_hosts": across,
                   "clock_uncertainty_ns": if across { hosts.uncertainty_ns } else { 0 },
                   "taken": e.latencies.len(), "lost": e.lost, "before_first": e.before_first,
                   "after_last": e.after_last,
                   "latency": short(&summary_of(e.latencies.iter().map(|l| l.1)))})
        })
        .collect();
    let callbacks: Vec<_> = a
        .callbacks
        .iter()
        .map(|c| json!({"pid": hosts.pid(c.pid), "host": hosts.host(c.pid), "symbol": c.symbol, "duration": short(&summary_of(c.durations.iter().copied())), "dispatch": short(&summary_of(c.dispatch.iter().copied()))}))
        .collect();
    let ended = match &o.ended {
        Ended::Exited(w) => json!({"by": "exit", "status": w}),
        Ended::Duration(w) => json!({"by": "duration", "status": w}),
        Ended::Stopped(w) => json!({"by": "stop", "status": w}),
    };
    let mut notes = o.notes.clone();
    if a.callbacks.is_empty() && !a.nodes.is_empty() {
        notes.push("no callbacks: the client library reported none (rclpy has no tracepoints; rclcpp reports callback_start/end): a hop inside a node is from its take to its publish".to_string());
    }
    if a.unjoined_takes > 0 {
        notes.push(format!("{} takes had no publish in the trace (a publisher outside the traced command, or started before its ring)", a.unjoined_takes));
    }
    if o.not_kept > 0 {
        notes.push(format!(
            "{} events beyond the {} kept were counted, not analysed",
            o.not_kept,
            o.events.iter().map(|p| p.events.len()).sum::<usize>()
        ));
    }
    json!({
        "probe": serde_json::to_value(cfg).unwrap_or_default(),
        "trace": {
            "ended": ended,
            "processes": o.processes.iter().map(|p| json!({"pid": p.pid, "host": p.host, "ppid": p.ppid, "comm": p.comm,
                "events": p.events, "dropped": p.dropped, "abandoned": p.abandoned,
                "unknown": p.unknown, "malformed": p.malformed})).collect::<Vec<_>>(),
            "nodes": rtlab_pubsub::trace::analysis::nodes(a).iter().map(|n| json!({
                "pid": hosts.pid(n.pid), "host": hosts.host(n.pid), "name": n.name, "inputs": n.inputs, "outputs": n.outputs,
                "taken": n.taken, "published": n.published,
                "inside": short(&summary_of(n.inside.iter().copied())),
            })).collect::<Vec<_>>(),
            "publishes": a.publishes.len(),
            "takes": a.takes.len(),
            "unjoined_takes": a.unjoined_takes,
            "edges": edges,
            "chains": a.chains.iter().map(|c| chain_facts(a, hosts, c, origin)).collect::<Vec<_>>(),
            "callbacks": callbacks,
            "not_kept": o.not_kept,
            "notes": notes,
        }
    })
}

fn warnings(o: &TraceOutcome) -> Vec<Warning> {
    let mut w = Vec::new();
    let dropped: u64 = o.processes.iter().map(|p| p.dropped).sum();
    if dropped > 0 {
        w.push(Warning {
            code: "trace-dropped".into(),
            message: format!("{dropped} tracepoint records did not fit their process's ring (the application went on; raise --slots): the latencies miss those messages"),
        });
    }
    for p in o.processes.iter().filter(|p| p.malformed.is_some()) {
        w.push(Warning {
            code: "trace-ring-refused".into(),
            message: format!(
                "the ring of pid {}{} was set aside: {}",
                p.pid,
                p.host.as_deref().map(|h| format!(" on {h}")).unwrap_or_default(),
                p.malformed.as_deref().unwrap_or("")
            ),
        });
    }
    if o.processes.is_empty() {
        w.push(Warning {
            code: "trace-nothing".into(),
            message: "no process of the command started ROS 2 (rcl_init): nothing was traced (a statically linked rcl, or a client library other than rcl's, is not seen)".into(),
        });
    }
    w
}

/// A trace inside a trace (this rtlab started by `rtlab trace`) is refused (the probe's
/// `ready`, before anything runs).
fn refuse_nested() -> Result<(), LabError> {
    match rtlab_pubsub::trace::run::nested() {
        Some(why) => Err(LabError::Config(ConfigError::new("command", why))),
        None => Ok(()),
    }
}

/// This host's trace: its command run, or its processes probed, or (nothing traced here)
/// the duration waited.
fn trace_here(
    cfg: &TraceProbeConfig,
    tr: &TraceRun,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<Option<TraceOutcome>, LabError> {
    if !cfg.traces_here() {
        let began = std::time::Instant::now();
        let d = tr.duration.unwrap_or_default();
        while began.elapsed() < d && !stop.load(std::sync::atomic::Ordering::Relaxed) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        return Ok(None);
    }
    if cfg.pid.0.is_empty() {
        return run(tr, stop).map(Some).map_err(|e| match e {
            TraceError::Command(m) => LabError::Config(ConfigError::new("command", m)),
            TraceError::Setup(m) => LabError::Failed(m),
        });
    }
    let pids: Vec<i32> = cfg.pid.0.iter().map(|&p| p as i32).collect();
    pids::probe(&pids, tr.duration, stop).map(Some)
}

/// What was traced here and on the far side, as one outcome on this host's clock; the far
/// side's section and clock.
fn trace_all(
    cfg: &TraceProbeConfig,
    tr: &TraceRun,
    ctx: &Context<'_>,
) -> Result<(TraceOutcome, Option<far::FarOutcome>), LabError> {
    let Some(spec) = &cfg.far else {
        let o = trace_here(cfg, tr, &ctx.stop)?.expect("a command or pids here");
        return Ok((o, None));
    };
    let ft = far_trace(cfg, tr);
    let window = ctx.evidence.counters.then_some(cfg.window.0);
    let tracing = far::start(ctx.far, spec, ft, window).map_err(|e| match e {
        // the far side could not start its trace: that side's bad input, said as its flag's
        LabError::Failed(m) if m.contains("): trace: ") => {
            let (side, why) = m.split_once("): trace: ").unwrap_or_default();
            let key = if cfg.far_pid.0.is_empty() { "far_command" } else { "far_pid" };
            LabError::Config(ConfigError::new(key, format!("{why} ({side})")))
        }
        e => e,
    })?;
    let here = trace_here(cfg, tr, &ctx.stop);
    let mut f = tracing.finish();
    let here = here?;
    let there = std::mem::replace(&mut f.traced, Err(LabError::Failed(String::new())))?;
    Ok((far::merge(here, there), Some(f)))
}

fn far_trace(cfg: &TraceProbeConfig, tr: &TraceRun) -> crate::far::protocol::FarTrace {
    crate::far::protocol::FarTrace {
        command: cfg.far_argv(),
        pid: cfg.far_pid.0.iter().map(|&p| p as i32).collect(),
        duration_ns: tr.duration.map(|d| d.as_nanos().min(i64::MAX as u128) as i64),
        slots: cfg.slots,
    }
}

/// Run the application (or probe the processes) and analyse it.
pub fn measure(cfg: &TraceProbeConfig, ctx: &mut Context<'_>) -> Result<ResultDocument, LabError> {
    let mut tr = TraceRun::new(cfg.argv());
    tr.duration = cfg.duration.map(|d| std::time::Duration::from_nanos(d.0 as u64));
    tr.slots = cfg.slots;
    let deadlines = cfg.deadlines()?;
    if ctx.evidence.trace_on_spike_ns.is_some() {
        return Err(LabError::Config(ConfigError::new(
            "trace_on_spike",
            "not with rtlab trace yet: its messages are joined after the run, so no spike is seen while the tracer could catch it (the kernel's counters per window are there)",
        )));
    }
    let mut ev = ctx.evidence.clone();
    ev.window_ns = cfg.window.0;
    ev.planned = tr.duration;
    let evidence = crate::evidence::EvidenceRun::start(crate::host::host(), &ev)?;
    let env = rtlab_sys::env::detect(std::path::Path::new("/"));
    let started = std::time::SystemTime::now();
    let (o, far) = trace_all(cfg, &tr, ctx)?;
    let hosts = Hosts {
        far: far.as_ref().map(|f| f.side.host.clone()),
        uncertainty_ns: far.as_ref().map_or(0, |f| f.uncertainty_ns),
    };
    let chains: Vec<Vec<String>> = cfg.chain.0.iter().map(|c| chain_topics(c)).collect();
    let a = analyse(&o.events, &chains);
    let origin = o.start_monotonic_ns;
    let duration_ns = o.end_monotonic_ns - o.start_monotonic_ns;
    let periods = periods(&a);
    let mut streams = Vec::new();
    // the chains first: the headline (a run's line, compare) is the answer end to end
    for c in &a.chains {
        let first = a.publishers.iter().position(|p| Some(&p.topic) == c.topics.first());
        let d = deadlines
            .get(&c.topics.join(","))
            .copied()
            .or(first.and_then(|f| periods.get(&f).copied()));
        let d = d.unwrap_or(i64::MAX);
        streams.push(chain_stream(&a, &hosts, c, d, (origin, cfg.window.0, duration_ns)));
    }
    for e in &a.edges {
        let topic = &a.publishers[e.publisher].topic;
        let d = deadlines.get(topic).copied().or(periods.get(&e.publisher).copied());
        let d = d.unwrap_or(i64::MAX);
        streams.push(edge_stream(&a, &hosts, e, d, origin, cfg.window.0, duration_ns));
    }
    let evidence = evidence.finish(&streams);
    let mut doc = new_document("trace", started, env, facts(cfg, &o, &a, &hosts, origin));
    if let Some(f) = far {
        doc.config["trace"]["clock"] = f.clock;
        doc.far = Some(f.side);
    }
    doc.duration_ns = duration_ns;
    doc.interrupted = matches!(o.ended, Ended::Stopped(_));
    doc.streams = streams;
    doc.evidence = Some(evidence);
    let facts = RunFacts {
        memory_lock: &None,
        any_other_policy: false,
        mlockall_off_by_profile: true,
        cpu_dma_latency_error: None,
        fewest_samples: doc.streams.iter().map(|s| s.stats.count).min().unwrap_or(0),
        interrupted: doc.interrupted,
    };
    doc.warnings = run_warnings(&doc.environment, &facts, Vec::new());
    doc.warnings.extend(warnings(&o));
    Ok(doc)
}

impl Probe for TraceProbeConfig {
    fn kind(&self) -> &'static str {
        "trace"
    }
    fn config(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
    fn plan(&self) -> Plan {
        Plan {
            duration_ns: self.duration.map(|d| d.0),
            count: None,
            period_ns: 10_000_000,
            sweep: 1,
        }
    }
    fn scale(&mut self, factor: f64, floor: u64) -> Option<String> {
        let mut count = None;
        crate::probe::scale_length(&mut self.duration, &mut count, 10_000_000, factor, floor)
    }
    fn pins_process(&self) -> bool {
        false
    }
    fn ready(&self) -> Result<(), LabError> {
        refuse_nested()
    }
    fn needs_pair(&self) -> bool {
        self.far == Some(FarSpec::Pair)
    }
    fn far(&self) -> Option<&FarSpec> {
        self.far.as_ref()
    }
    fn rt(&self, base: &RtSettings) -> RtSettings {
        base.clone()
    }
    fn measure(&self, ctx: &mut Context<'_>) -> Result<ResultDocument, LabError> {
        measure(self, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_chains_and_deadlines_are_checked() {
        let t: toml::Table = "command = 'ros2 launch a b.py'".parse().unwrap();
        let c = crate::config::from_table::<TraceProbeConfig>(&t).unwrap();
        assert_eq!(c.argv(), ["sh", "-c", "ros2 launch a b.py"]);
        let t: toml::Table = "command = ['ros2', 'run', 'a b']".parse().unwrap();
        let c = crate::config::from_table::<TraceProbeConfig>(&t).unwrap();
        assert_eq!(c.argv(), ["ros2", "run", "a b"]);
        let t: toml::Table = "command = []".parse().unwrap();
        let e = crate::config::from_table::<TraceProbeConfig>(&t).unwrap_err();
        assert_eq!(e.field, "command");
        let t: toml::Table = "command = ['x']\nchain = '/a'".parse().unwrap();
        assert_eq!(crate::config::from_table::<TraceProbeConfig>(&t).unwrap_err().field, "chain");
        let t: toml::Table = "command = ['x']\ndeadline = '/a'".parse().unwrap();
        assert_eq!(
            crate::config::from_table::<TraceProbeConfig>(&t).unwrap_err().field,
            "deadline"
        );
        let t: toml::Table = "command = ['x']\nslots = 1000".parse().unwrap();
        assert_eq!(crate::config::from_table::<TraceProbeConfig>(&t).unwrap_err().field, "slots");
        let t: toml::Table =
            "command = ['x']\nchain = '/a, /b'\ndeadline = ['/a=10ms', '/a,/b=30ms']"
                .parse()
                .unwrap();
        let c = crate::config::from_table::<TraceProbeConfig>(&t).unwrap();
        let d = c.deadlines().unwrap();
        assert_eq!(d["/a"], 10_000_000);
        assert_eq!(d["/a,/b"], 30_000_000);
        assert_eq!(chain_topics(&c.chain.0[0]), ["/a", "/b"]);
    }

    #[test]
    fn a_far_side_needs_something_to_trace_there_and_its_keys_need_a_far_side() {
        let field = |toml: &str| {
            let t: toml::Table = toml.parse().unwrap();
            crate::config::from_table::<TraceProbeConfig>(&t).err().map(|e| e.field)
        };
        assert_eq!(
            field("far = 'netns:b'\nfar_command = 'ros2 launch x y'\nduration = '5s'"),
            None
        );
        assert_eq!(field("far = 'netns:b'\nfar_command = 'x'\ncommand = 'y'"), None);
        assert_eq!(field("far = 'pair'\nfar_pid = [7]\npid = [8]"), None);
        assert_eq!(field("far_command = 'x'\ncommand = 'y'").as_deref(), Some("far_command"));
        assert_eq!(field("far_pid = [7]\ncommand = 'y'").as_deref(), Some("far_pid"));
        assert_eq!(field("far = 'netns:b'\ncommand = 'y'").as_deref(), Some("far"));
        assert_eq!(
            field("far = 'netns:b'\nfar_command = 'x'\nfar_pid = [7]\ncommand = 'y'").as_deref(),
            Some("far_pid")
        );
        assert_eq!(field("far = 'netns:b'\nfar_command = 'x'").as_deref(), Some("duration"));
        assert_eq!(
            field("far = 'netns:b'\nfar_pid = [-1]\ncommand = 'y'").as_deref(),
            Some("far_pid")
        );
        assert_eq!(
            field("far = 'robot2'\nfar_command = 'x'\ncommand = 'y'").as_deref(),
            Some("far")
        );
        let t: toml::Table = "far = 'pair'\nfar_command = 'a b'\ncommand = 'y'".parse().unwrap();
        let c = crate::config::from_table::<TraceProbeConfig>(&t).unwrap();
        assert_eq!(c.far_argv(), ["sh", "-c", "a b"]);
        assert!(c.needs_pair() && c.traces_here());
        assert_eq!(Probe::far(&c), Some(&FarSpec::Pair));
    }

    #[test]
    fn far_keys_are_named_with_their_host() {
        let h = Hosts { far: Some("robot2".into()), uncertainty_ns: 5 };
        let k = rtlab_pubsub::trace::analysis::far_key(42);
        assert_eq!(
            (h.pid(k), h.host(k), h.label(k)),
            (42, Some("robot2"), "pid 42 on robot2".into())
        );
        assert_eq!((h.pid(42), h.host(42), h.label(42)), (42, None, "pid 42".into()));
    }
}
