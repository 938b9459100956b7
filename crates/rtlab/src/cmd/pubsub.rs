//! `rtlab pubsub`: flags -> PubsubConfig, run the cases, print the tables, write JSON.
//! With the hidden `--role JSON` it is a subscriber/echo process started by the probe.

use super::{cpus_flag, duration_flag, stop_flag};
use crate::cli::PolicyArg;
use crate::document::{check_writable, new_document, write_json};
use crate::progress::Progress;
use clap::{Args, ValueEnum};
use rtlab_core::render::{stats_table, Row};
use rtlab_core::schema::ResultDocument;
use rtlab_core::units::{format_duration_exact, parse_size, period_of_rate, Nanos};
use rtlab_core::warnings::{Warn, MIN_SAMPLES_FOR_TAIL};
use rtlab_pubsub::probe::{
    self, Mode, PubsubConfig, PubsubOutcome, RtSpec, TransportKind, TransportSpec,
};
use rtlab_pubsub::transport::{Durability, History, Qos, Reliability, WaitStyle};
use std::io::{IsTerminal, Write};

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PubsubModeArg {
    /// Publisher and subscribers on one host clock: receive stamp - send stamp.
    Oneway,
    /// Ping/pong through each subscriber: pong received - ping sent (not halved).
    Roundtrip,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitArg {
    /// Sleep in the library's/kernel's wait.
    Blocking,
    /// Spin on a non-blocking take (burns a CPU per receiver).
    BusyPoll,
}

#[derive(Args, Debug)]
pub struct PubsubArgs {
    /// Transport: intra (same process, zero copy), shm (iceoryx2), zenoh, dds (Cyclone DDS), udp.
    #[arg(long, default_value = "intra")]
    pub transport: String,
    /// What is measured.
    #[arg(long, value_enum, default_value = "oneway")]
    pub mode: PubsubModeArg,
    /// Message sizes (header of 16 bytes included), swept: 64,4kib,64kib,1mib,16mib.
    #[arg(long, default_value = "64", value_delimiter = ',')]
    pub payload: Vec<String>,
    /// Publish rates, swept: 25hz,100hz,1khz,5khz.
    #[arg(long, default_value = "100hz", value_delimiter = ',')]
    pub rate: Vec<String>,
    /// Subscriber counts, swept (one row per subscriber): 1,2,6 or 1-6.
    #[arg(long, default_value = "1", value_delimiter = ',')]
    pub subscribers: Vec<String>,
    /// Measured time of each case.
    #[arg(long, default_value = "5s")]
    pub duration: String,
    /// At most this many messages per case.
    #[arg(long)]
    pub count: Option<u64>,
    /// How receivers wait.
    #[arg(long, value_enum, default_value = "blocking")]
    pub wait: WaitArg,
    /// Subscribers as threads of this process (default: separate processes).
    #[arg(long)]
    pub in_process: bool,
    /// QoS reliability: reliable | best-effort.
    #[arg(long, default_value = "best-effort")]
    pub reliability: String,
    /// QoS history: keep-last:N | keep-all.
    #[arg(long, default_value = "keep-last:5")]
    pub history: String,
    /// QoS durability: volatile | transient-local.
    #[arg(long, default_value = "volatile")]
    pub durability: String,
    /// A message later than this is late; never received, lost.
    #[arg(long, default_value = "500ms")]
    pub loss_timeout: String,
    /// Samples above this are missed deadlines. Default: the period.
    #[arg(long)]
    pub deadline: Option<String>,
    /// Scheduling policy of rtlab's threads (and of the middleware threads, which inherit it).
    #[arg(long, value_enum, default_value = "other")]
    pub policy: PolicyArg,
    /// Priority (fifo/rr: 1-99; default 80).
    #[arg(long, short = 'p')]
    pub priority: Option<i32>,
    /// CPUs for rtlab's threads, in turn: publisher, subscriber 0, 1... (threads, never whole processes).
    #[arg(long)]
    pub cpus: Option<String>,
    /// Do not lock memory (mlockall is on by default).
    #[arg(long)]
    pub no_mlockall: bool,
    /// Hold /dev/cpu_dma_latency at this many us during the run (0 = no deep C-states).
    #[arg(long, num_args = 0..=1, default_missing_value = "0", value_name = "US")]
    pub cpu_dma_latency: Option<i32>,
    /// Middleware threads at their own SCHED_FIFO priority, by thread name: recv=75,tev=70
    /// (Cyclone DDS: recv, recvUC, tev, dq.user, dq.builtins, gc; applied with chrt after start-up).
    #[arg(long, value_delimiter = ',', value_name = "NAME=PRIO")]
    pub thread_priority: Vec<String>,
    /// Width of a max-over-time window.
    #[arg(long, default_value = "1s")]
    pub window: String,
    #[command(flatten)]
    pub evidence: crate::cli::EvidenceArgs,
    /// Write the result document (JSON); - for stdout.
    #[arg(long)]
    pub json: Option<String>,
    /// Print nothing but errors.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Internal: run as a subscriber/echo process of a probe (JSON role configuration).
    #[arg(long, hide = true)]
    pub role: Option<String>,
}

fn subscribers_flag(v: &[String]) -> anyhow::Result<Vec<usize>> {
    let mut out = Vec::new();
    for s in v {
        let bad =
            || anyhow::anyhow!("--subscribers {s}: expected a count or a range like 1-6 (1..64)");
        if let Some((a, b)) = s.split_once('-') {
            let (a, b): (usize, usize) =
                (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
            if a == 0 || b < a || b > 64 {
                return Err(bad());
            }
            out.extend(a..=b);
        } else {
            let n: usize = s.trim().parse().map_err(|_| bad())?;
            if n == 0 || n > 64 {
                return Err(bad());
            }
            out.push(n);
        }
    }
    Ok(out)
}

/// Turn the flags into a config (the one place where flags become a PubsubConfig).
pub fn config_of(a: &PubsubArgs) -> anyhow::Result<PubsubConfig> {
    let kind = TransportKind::parse(&a.transport).ok_or_else(|| {
        anyhow::anyhow!(
            "--transport {}: unknown transport (accepted: intra, shm, zenoh, dds, udp)",
            a.transport
        )
    })?;
    let mut payloads = Vec::new();
    for p in &a.payload {
        let n = parse_size(p).map_err(|e| anyhow::anyhow!("--payload: {e}"))?;
        payloads.push(usize::try_from(n).map_err(|_| anyhow::anyhow!("--payload {p}: too large"))?);
    }
    let mut periods_ns = Vec::new();
    for r in &a.rate {
        periods_ns.push(period_of_rate(r).map_err(|e| anyhow::anyhow!("--rate: {e}"))?.0);
    }
    let reliability = match a.reliability.as_str() {
        "reliable" => Reliability::Reliable,
        "best-effort" => Reliability::BestEffort,
        o => anyhow::bail!("--reliability {o}: accepted: reliable, best-effort"),
    };
    let history = History::parse(&a.history).ok_or_else(|| {
        anyhow::anyhow!("--history {}: accepted: keep-last:N (N >= 1), keep-all", a.history)
    })?;
    let durability = match a.durability.as_str() {
        "volatile" => Durability::Volatile,
        "transient-local" => Durability::TransientLocal,
        o => anyhow::bail!("--durability {o}: accepted: volatile, transient-local"),
    };
    let case_duration_ns = duration_flag("--duration", &a.duration)?;
    if case_duration_ns <= 0 {
        anyhow::bail!("--duration {}: must be above zero", a.duration);
    }
    if a.count == Some(0) {
        anyhow::bail!("--count 0: must be at least 1");
    }
    let loss_timeout_ns = duration_flag("--loss-timeout", &a.loss_timeout)?;
    if loss_timeout_ns <= 0 {
        anyhow::bail!("--loss-timeout {}: must be above zero", a.loss_timeout);
    }
    let deadline_ns = a.deadline.as_deref().map(|d| duration_flag("--deadline", d)).transpose()?;
    let window_ns = duration_flag("--window", &a.window)?;
    if window_ns <= 0 {
        anyhow::bail!("--window {}: must be above zero", a.window);
    }
    let policy = rtlab_sys::sched::Policy::parse(a.policy.name()).expect("clap checked the policy");
    let priority = a.priority.unwrap_or(if policy.is_realtime() { 80 } else { 0 });
    policy.check_priority(priority).map_err(|e| anyhow::anyhow!("--priority: {e}"))?;
    let cpus = a.cpus.as_deref().map(cpus_flag).transpose()?;
    if let Some(v) = a.cpu_dma_latency {
        if v < 0 {
            anyhow::bail!("--cpu-dma-latency {v}: must be 0 or more microseconds");
        }
    }
    let mut thread_priorities = Vec::new();
    for r in &a.thread_priority {
        let bad = || {
            anyhow::anyhow!("--thread-priority {r}: expected NAME=PRIORITY with a SCHED_FIFO priority 1-99, e.g. recv=75")
        };
        let (name, p) = r.split_once('=').ok_or_else(bad)?;
        let priority: i32 = p.trim().parse().map_err(|_| bad())?;
        if name.trim().is_empty() || !(1..=99).contains(&priority) {
            return Err(bad());
        }
        thread_priorities.push(probe::ThreadPriority { name: name.trim().into(), priority });
    }
    Ok(PubsubConfig {
        transport: TransportSpec::new(kind),
        mode: match a.mode {
            PubsubModeArg::Oneway => Mode::Oneway,
            PubsubModeArg::Roundtrip => Mode::Roundtrip,
        },
        wait: match a.wait {
            WaitArg::Blocking => WaitStyle::Blocking,
            WaitArg::BusyPoll => WaitStyle::BusyPoll,
        },
        qos: Qos { reliability, history, durability },
        payloads,
        periods_ns,
        subscribers: subscribers_flag(&a.subscribers)?,
        case_duration_ns,
        case_messages: a.count,
        loss_timeout_ns,
        deadline_ns,
        in_process: a.in_process,
        rt: RtSpec { policy: a.policy.name().into(), priority, cpus },
        window_ns,
        mlockall: !a.no_mlockall,
        thread_priorities,
        spike: None,
    })
}

pub fn run(a: PubsubArgs) -> anyhow::Result<u8> {
    if let Some(json) = &a.role {
        return Ok(probe::role_main(json).clamp(0, 255) as u8);
    }
    let mut cfg = config_of(&a)?;
    if let Some(p) = &a.json {
        check_writable(p, "--json")?;
    }
    let ev_opts = evidence_options(&cfg, &a.evidence)?;
    let stop = stop_flag()?;
    // the tracer's tracefs changes are journaled and undone in `finish` (or on drop)
    let trace_host = rtlab_tune::host::RealHost::new();
    let evidence = crate::evidence::EvidenceRun::start(&trace_host, &ev_opts)?;
    cfg.spike = evidence.hook();
    let started = std::time::SystemTime::now();
    let env = rtlab_sys::env::detect(std::path::Path::new("/"));
    let quiet = a.quiet || a.json.as_deref() == Some("-");
    let dma_us = a.cpu_dma_latency;
    let progress = Progress::new(0, "pubsub", quiet);
    let mut said = false;
    let measured = measure(&cfg, dma_us, stop, env, started, &mut |done, total| {
        // the headline once the configuration has passed the transport's checks
        if !said && !quiet {
            println!("{}", headline(&cfg));
            said = true;
        }
        progress.set_len_once(total as u64);
        progress.set(done as u64);
    });
    progress.finish();
    let (mut doc, outcome) = measured?;
    doc.evidence = Some(evidence.finish(&doc.streams));
    if let Some(path) = &a.json {
        write_json(&doc, path)?;
    }
    if !quiet {
        print_tables(&cfg, &outcome)?;
        for w in &doc.warnings {
            eprintln!("warning: {}", w.message);
        }
    }
    crate::evidence::print(doc.evidence.as_ref(), &doc.streams, quiet);
    Ok(0)
}

/// Evidence around a pubsub run: the tracer explains the wake-ups of the receivers in this
/// process (roundtrip pong receivers, `--in-process` subscribers); subscriber processes
/// cannot raise its flag, so then only the counters are kept and the reason is said.
pub fn evidence_options(
    cfg: &PubsubConfig,
    a: &crate::cli::EvidenceArgs,
) -> anyhow::Result<crate::evidence::EvidenceOptions> {
    let mut o = a.options(cfg.window_ns, "")?;
    fit_evidence(cfg, &mut o);
    Ok(o)
}

/// The threads explained (the publisher, the receivers and echoes in this process) and the
/// streams that raise the flag.
pub fn fit_evidence(cfg: &PubsubConfig, o: &mut crate::evidence::EvidenceOptions) {
    let in_process = cfg.in_process || cfg.transport.kind == probe::TransportKind::Intra;
    // a round trip's latency goes through the echoes (rtlab-subN) and the pong receivers
    o.victim = if cfg.mode == Mode::Roundtrip {
        "rtlab-pub|rtlab-pong|rtlab-sub"
    } else {
        "rtlab-pub|rtlab-sub"
    }
    .into();
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

/// Run the probe with memory locked and, when asked, /dev/cpu_dma_latency held; the result
/// document with its warnings (the CLI prints it; the scenario runner stores it).
pub fn measure(
    cfg: &PubsubConfig,
    dma_us: Option<i32>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    env: rtlab_core::schema::Environment,
    started: std::time::SystemTime,
    on_progress: &mut dyn FnMut(usize, usize),
) -> anyhow::Result<(ResultDocument, PubsubOutcome)> {
    let memory_lock = if cfg.mlockall {
        Some(rtlab_sys::memory::MemoryLock::lock_all().map_err(|e| e.to_string()))
    } else {
        None
    };
    let dma = dma_us.map(|v| {
        rtlab_sys::pmqos::CpuDmaLatency::hold(std::path::Path::new("/dev/cpu_dma_latency"), v)
            .map_err(|e| format!("/dev/cpu_dma_latency: {e}"))
    });
    let exe = std::env::current_exe().map_err(|e| {
        anyhow::anyhow!("finding the rtlab binary to start subscriber processes: {e}")
    })?;
    let launcher = move |json: &str| {
        let mut c = std::process::Command::new(&exe);
        c.args(["pubsub", "--role", json]);
        c
    };
    let outcome = probe::run(cfg, &launcher, stop, on_progress);
    let outcome = outcome.map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(first) =
        outcome.cases.first().filter(|_| outcome.cases.iter().all(|c| c.error.is_some()))
    {
        anyhow::bail!("{}", first.error.as_deref().unwrap_or("no case could run"));
    }

    let mut doc = new_document("pubsub", started, env, config_value(cfg, &outcome)?);
    doc.duration_ns = outcome.duration_ns;
    doc.interrupted = outcome.interrupted;
    doc.environment.memory_locked = matches!(memory_lock, Some(Ok(_)));
    doc.environment.cpu_dma_latency_us = match &dma {
        Some(Ok(h)) => Some(h.value_us),
        _ => None,
    };
    // per case: its subscribers, then the publisher's own lateness
    doc.streams = outcome
        .cases
        .iter()
        .flat_map(|c| c.streams.iter().cloned().chain(c.publisher.clone()))
        .collect();

    let lock_state = memory_lock.as_ref().map(|r| r.as_ref().map(|_| ()).map_err(|e| e.clone()));
    let mut warns =
        crate::document::process_warnings(&doc.environment, &lock_state, cfg.rt.policy == "other");
    if let Some(Err(why)) = &dma {
        warns.push(Warn::CpuDmaLatencyUnavailable { why: why.clone() });
    }
    let fewest = doc.streams.iter().map(|s| s.stats.count).min().unwrap_or(0);
    if fewest < MIN_SAMPLES_FOR_TAIL {
        warns.push(Warn::RunTooShort { samples: fewest, wanted: MIN_SAMPLES_FOR_TAIL });
    }
    if outcome.interrupted {
        warns.push(Warn::Interrupted);
    }
    doc.warnings = warns.iter().map(|w| w.to_warning()).collect();
    for c in outcome.cases.iter().filter(|c| c.error.is_some()) {
        doc.warnings.push(rtlab_core::schema::Warning {
            code: "case-failed".into(),
            message: format!(
                "case {}B {} n{} measured nothing: {}",
                c.payload,
                probe::rate_label(c.period_ns),
                c.subscribers,
                c.error.as_deref().unwrap_or("")
            ),
        });
    }
    drop(dma);
    drop(memory_lock);
    Ok((doc, outcome))
}

/// The configuration as recorded: the probe config, what the QoS became, notes, per-case figures.
fn config_value(cfg: &PubsubConfig, o: &PubsubOutcome) -> anyhow::Result<serde_json::Value> {
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
    Ok(serde_json::json!({
        "probe": serde_json::to_value(cfg)?,
        "qos_mapping": serde_json::to_value(&o.qos_mapping)?,
        "notes": o.notes,
        "cases": cases,
    }))
}

fn headline(cfg: &PubsubConfig) -> String {
    let sizes: Vec<String> = cfg.payloads.iter().map(|p| format!("{p}B")).collect();
    let rates: Vec<String> = cfg.periods_ns.iter().map(|p| probe::rate_label(*p)).collect();
    let subs: Vec<String> = cfg.subscribers.iter().map(|s| s.to_string()).collect();
    format!(
        "rtlab pubsub: {} {}, {} wait, payload {}, rate {}, subscribers {} ({}), {} per case, QoS {} {} {}, {} {}",
        cfg.transport.kind.name(),
        cfg.mode.name(),
        cfg.wait.name(),
        sizes.join(","),
        rates.join(","),
        subs.join(","),
        if cfg.in_process || cfg.transport.kind == TransportKind::Intra { "threads" } else { "processes" },
        format_duration_exact(Nanos(cfg.case_duration_ns)),
        cfg.qos.reliability,
        cfg.qos.history,
        cfg.qos.durability,
        cfg.rt.policy,
        cfg.rt.priority,
    )
}

fn print_tables(cfg: &PubsubConfig, o: &PubsubOutcome) -> anyhow::Result<()> {
    let color = std::io::stdout().is_terminal();
    let mut out = std::io::stdout().lock();
    writeln!(out)?;
    writeln!(out, "{} ({})", cfg.mode.metric().replace('_', " "), cfg.mode.definition())?;
    let label = |s: &rtlab_core::schema::Stream| {
        format!(
            "{}B {} n{} sub{}",
            s.labels["payload_bytes"],
            s.labels["rate"],
            s.labels["subscribers"],
            s.labels["subscriber"]
        )
    };
    let rows: Vec<Row> = o
        .cases
        .iter()
        .flat_map(|c| c.streams.iter())
        .map(|s| Row { label: label(s), summary: &s.stats })
        .collect();
    write!(out, "{}", stats_table(&rows, color))?;
    writeln!(out)?;
    writeln!(out, "publisher send lateness ({})", probe::SEND_LATENESS_DEFINITION)?;
    let pubs: Vec<Row> = o
        .cases
        .iter()
        .filter_map(|c| {
            c.publisher.as_ref().map(|s| Row {
                label: format!(
                    "{}B {} n{}",
                    c.payload,
                    probe::rate_label(c.period_ns),
                    c.subscribers
                ),
                summary: &s.stats,
            })
        })
        .collect();
    write!(out, "{}", stats_table(&pubs, color))?;
    writeln!(out)?;
    writeln!(
        out,
        "{:<28} {:>9} {:>7} {:>7} {:>5} {:>5} {:>9}",
        "counters", "published", "lost", "late", "dup", "ooo", "overruns"
    )?;
    for c in &o.cases {
        for s in &c.streams {
            let st = &s.stats;
            writeln!(
                out,
                "{:<28} {:>9} {:>7} {:>7} {:>5} {:>5} {:>9}",
                label(s),
                c.published,
                st.lost.unwrap_or(0),
                st.late.unwrap_or(0),
                st.duplicates.unwrap_or(0),
                st.out_of_order.unwrap_or(0),
                c.overruns
            )?;
        }
        if let (Some(sp), Some(f), Some(sl)) = (c.p50_spread_ns, c.fastest, c.slowest) {
            writeln!(
                out,
                "  fan-out {}B {} n{}: p50 spread {} us (fastest sub{f}, slowest sub{sl})",
                c.payload,
                probe::rate_label(c.period_ns),
                c.subscribers,
                rtlab_core::units::us_1(sp)
            )?;
        }
    }
    writeln!(out)?;
    let m = &o.qos_mapping;
    for (what, it) in
        [("reliability", &m.reliability), ("history", &m.history), ("durability", &m.durability)]
    {
        writeln!(out, "QoS {what} {} -> {} ({:?})", it.asked, it.native, it.fidelity)?;
    }
    for n in &o.notes {
        writeln!(out, "note: {n}")?;
    }
    Ok(())
}
