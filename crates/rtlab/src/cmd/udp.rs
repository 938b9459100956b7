//! `rtlab udp reflect` and `rtlab udp ping`: flags -> UdpReflectConfig / UdpPingConfig
//! (in one place each), run, print the studies' summary and the percentiles, write JSON.
//! `udp ping --pair` also makes two network namespaces for the run, runs the reflector
//! in the second one, and removes both afterwards, whatever happens.

use super::{cpus_flag, duration_flag, stop_flag};
use crate::cli::{PolicyArg, RtArgs};
use crate::document::{check_writable, new_document, write_json};
use crate::progress::Progress;
use clap::{Args, Subcommand, ValueEnum};
use rtlab_core::render::{stats_table, terminal_histogram, Row};
use rtlab_core::schema::{ResultDocument, Stream};
use rtlab_core::units::{format_duration_exact, parse_bitrate, parse_size, us_1, Nanos};
use rtlab_core::warnings::{Warn, MIN_SAMPLES_FOR_TAIL};
use rtlab_probes::netns::{NetnsConfig, NetnsPair, PriorityPath, Shaper};
use rtlab_probes::udp::ping::PingMode;
use rtlab_probes::udp::run::{
    self as udp_run, PingOutcome, ReflectOutcome, RtConfig, SocketConfig, UdpPingConfig,
    UdpReflectConfig,
};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct UdpArgs {
    #[command(subcommand)]
    pub command: UdpCommand,
}

#[derive(Subcommand, Debug)]
pub enum UdpCommand {
    /// Answer rtlab requests (the far side of `udp ping`); Ctrl-C ends it with a report.
    Reflect(ReflectArgs),
    /// Measure UDP round trips to a reflector (S1).
    Ping(PingArgs),
}

/// Socket options, both sides.
#[derive(Args, Debug, Clone)]
pub struct SockArgs {
    /// SO_PRIORITY of the socket: 0-6, above 6 as root, or an htb class id like 1:10 (= 0x10010).
    #[arg(long, value_name = "N")]
    pub so_priority: Option<String>,
    /// IP_TOS / IPV6_TCLASS byte, e.g. 0xb8 (DSCP EF) or 184.
    #[arg(long, value_name = "BYTE")]
    pub tos: Option<String>,
    /// SO_BUSY_POLL in microseconds (needs root; poll busy-polls only with sysctl net.core.busy_poll > 0).
    #[arg(long, value_name = "US")]
    pub busy_poll: Option<u32>,
    /// SO_RCVBUF, e.g. 4mib (as root beyond net.core.rmem_max).
    #[arg(long, value_name = "SIZE")]
    pub rcvbuf: Option<String>,
    /// SO_SNDBUF, e.g. 4mib (as root beyond net.core.wmem_max).
    #[arg(long, value_name = "SIZE")]
    pub sndbuf: Option<String>,
}

#[derive(Args, Debug)]
pub struct ReflectArgs {
    /// Where to listen, IP:PORT or [IPv6]:PORT; nowhere else.
    #[arg(long, value_name = "ADDR:PORT")]
    pub bind: String,
    /// Listen inside this network namespace (see `rtlab netns up`).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Leave every request whose sequence number + 1 is a multiple of N unanswered (a known loss, for tests).
    #[arg(long, value_name = "N")]
    pub drop_every: Option<u64>,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, short = 'D')]
    pub duration: Option<String>,
    /// Stop after this many datagrams received.
    #[arg(long)]
    pub count: Option<u64>,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub sock: SockArgs,
    #[command(flatten)]
    pub evidence: crate::cli::EvidenceArgs,
    /// Width of a max-over-time window.
    #[arg(long, default_value = "1s")]
    pub window: String,
    /// Write the result document (JSON); - for stdout.
    #[arg(long)]
    pub json: Option<String>,
    /// Print only the listening line and errors.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PingModeArg {
    /// Open loop on an absolute-time grid (S1).
    Periodic,
    /// Closed loop at the highest rate (like sockperf ping-pong).
    Pingpong,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShaperArg {
    Htb,
    Tbf,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PriorityPathArg {
    None,
    Class,
    Band,
}

#[derive(Args, Debug)]
pub struct PingArgs {
    /// The reflector, IP:PORT or [IPv6]:PORT.
    #[arg(long, value_name = "ADDR:PORT", required_unless_present = "pair")]
    pub to: Option<String>,
    /// Local address to send from (default: any, port chosen by the kernel).
    #[arg(long, value_name = "ADDR:PORT")]
    pub bind: Option<String>,
    /// Send from inside this network namespace (see `rtlab netns up`).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    #[arg(long, value_enum, default_value = "periodic")]
    pub mode: PingModeArg,
    /// Send period (periodic mode).
    #[arg(long, default_value = "1ms")]
    pub period: String,
    /// UDP payload, 16 B to 65507 B.
    #[arg(long, default_value = "500")]
    pub payload: String,
    /// RTTs above this are missed deadlines. Default: the period (pingpong: 1ms).
    #[arg(long)]
    pub deadline: Option<String>,
    /// No reply within this is a loss; a reply after it is late.
    #[arg(long, default_value = "500ms")]
    pub loss_timeout: String,
    /// How long to send (default 20s unless --count is given).
    #[arg(long, short = 'D')]
    pub duration: Option<String>,
    /// How many requests to send.
    #[arg(long)]
    pub count: Option<u64>,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub sock: SockArgs,
    #[command(flatten)]
    pub evidence: crate::cli::EvidenceArgs,
    /// Width of a max-over-time window.
    #[arg(long, default_value = "1s")]
    pub window: String,
    /// Do not check first that a reflector answers.
    #[arg(long)]
    pub no_preflight: bool,
    /// Two hosts on one machine for this run: make namespaces NAME-a/NAME-b, reflect in b, ping from a, remove both.
    #[arg(long, conflicts_with_all = ["to", "netns", "bind"])]
    pub pair: bool,
    /// With --pair: a bottleneck of this rate on the veth pair (e.g. 100mbit).
    #[arg(long, requires = "pair")]
    pub rate: Option<String>,
    /// With --pair: how the bottleneck is made.
    #[arg(long, value_enum, default_value = "htb", requires = "pair")]
    pub shaper: ShaperArg,
    /// With --pair: keep the probe's traffic apart (class: htb class by TOS / SO_PRIORITY 1:10; band: pfifo_fast band 0 by SO_PRIORITY 6).
    #[arg(long, value_enum, default_value = "none", requires = "pair")]
    pub priority_path: PriorityPathArg,
    /// Write the result document (JSON); - for stdout.
    #[arg(long)]
    pub json: Option<String>,
    /// Print a terminal histogram of the RTT.
    #[arg(long)]
    pub histogram: bool,
    /// Print nothing but errors (the JSON still goes where --json says).
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

pub fn run(a: UdpArgs) -> anyhow::Result<u8> {
    match a.command {
        UdpCommand::Reflect(r) => reflect(r),
        UdpCommand::Ping(p) => ping(p),
    }
}

/// A byte or priority value: decimal, 0x-hex, or for --so-priority an htb class MAJOR:MINOR (hex).
fn number_flag(flag: &str, v: &str, class_ok: bool) -> anyhow::Result<u32> {
    let bad = || {
        anyhow::anyhow!(
            "{flag} '{v}': not a number (accepted: decimal, 0x hex{})",
            if class_ok { ", or an htb class id like 1:10" } else { "" }
        )
    };
    let v = v.trim();
    if class_ok {
        if let Some((maj, min)) = v.split_once(':') {
            let maj = u32::from_str_radix(maj, 16).map_err(|_| bad())?;
            let min = u32::from_str_radix(min, 16).map_err(|_| bad())?;
            if maj > 0xffff || min > 0xffff {
                return Err(bad());
            }
            return Ok((maj << 16) | min);
        }
    }
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).map_err(|_| bad()),
        None => v.parse::<u32>().map_err(|_| bad()),
    }
}

fn socket_config(s: &SockArgs) -> anyhow::Result<SocketConfig> {
    let size = |flag: &str, v: &Option<String>| -> anyhow::Result<Option<u32>> {
        v.as_deref()
            .map(|v| {
                let n = parse_size(v).map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
                u32::try_from(n)
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| anyhow::anyhow!("{flag} {v}: out of range (1 B .. 2 GiB)"))
            })
            .transpose()
    };
    let tos = s
        .tos
        .as_deref()
        .map(|v| {
            let n = number_flag("--tos", v, false)?;
            u8::try_from(n).map_err(|_| anyhow::anyhow!("--tos {v}: a byte, 0..=255"))
        })
        .transpose()?;
    Ok(SocketConfig {
        so_priority: s
            .so_priority
            .as_deref()
            .map(|v| number_flag("--so-priority", v, true))
            .transpose()?,
        tos,
        busy_poll_us: s.busy_poll,
        rcvbuf: size("--rcvbuf", &s.rcvbuf)?,
        sndbuf: size("--sndbuf", &s.sndbuf)?,
    })
}

fn rt_config(r: &RtArgs) -> anyhow::Result<RtConfig> {
    if r.priority.len() > 1 {
        anyhow::bail!("--priority: one value (the probe has one measuring thread)");
    }
    let priority =
        if r.policy == PolicyArg::Other && r.priority == [80] { 0 } else { r.priority[0] };
    let p = rtlab_sys::sched::Policy::parse(r.policy.name()).expect("clap checked the policy");
    p.check_priority(priority).map_err(|e| anyhow::anyhow!("--priority: {e}"))?;
    let cpu = r.cpus.as_deref().map(cpus_flag).transpose()?.map(|c| c[0]);
    Ok(RtConfig { policy: r.policy.name().into(), priority, cpu, mlockall: !r.no_mlockall })
}

fn positive(flag: &str, v: &str) -> anyhow::Result<i64> {
    let ns = duration_flag(flag, v)?;
    if ns <= 0 {
        anyhow::bail!("{flag} {v}: must be above zero");
    }
    Ok(ns)
}

/// Flags -> UdpPingConfig (the one place). `to` is the target when --pair chose it.
pub fn ping_config(a: &PingArgs, to: Option<String>) -> anyhow::Result<UdpPingConfig> {
    let mode = match a.mode {
        PingModeArg::Periodic => PingMode::Periodic,
        PingModeArg::Pingpong => PingMode::Pingpong,
    };
    let period_ns = positive("--period", &a.period)?;
    let payload = parse_size(&a.payload).map_err(|e| anyhow::anyhow!("--payload: {e}"))?;
    let deadline_ns = match &a.deadline {
        Some(d) => positive("--deadline", d)?,
        None if mode == PingMode::Periodic => period_ns,
        None => 1_000_000,
    };
    let duration_ns = match (&a.duration, a.count) {
        (Some(d), _) => Some(positive("--duration", d)?),
        (None, Some(_)) => None,
        (None, None) => Some(20_000_000_000),
    };
    if a.count == Some(0) {
        anyhow::bail!("--count 0: must be at least 1");
    }
    Ok(UdpPingConfig {
        to: to.or_else(|| a.to.clone()).unwrap_or_default(),
        bind: a.bind.clone(),
        netns: a.netns.clone(),
        mode,
        period_ns,
        payload: usize::try_from(payload).unwrap_or(usize::MAX),
        deadline_ns,
        loss_timeout_ns: positive("--loss-timeout", &a.loss_timeout)?,
        duration_ns,
        count: a.count,
        window_ns: positive("--window", &a.window)?,
        rt: rt_config(&a.rt)?,
        socket: socket_config(&a.sock)?,
        preflight_ns: if a.no_preflight { 0 } else { 2_000_000_000 },
        spike: None,
    })
}

/// Flags -> UdpReflectConfig (the one place).
pub fn reflect_config(a: &ReflectArgs) -> anyhow::Result<UdpReflectConfig> {
    Ok(UdpReflectConfig {
        bind: a.bind.clone(),
        netns: a.netns.clone(),
        drop_every: a.drop_every,
        duration_ns: a.duration.as_deref().map(|d| positive("--duration", d)).transpose()?,
        count: a.count,
        window_ns: positive("--window", &a.window)?,
        rt: rt_config(&a.rt)?,
        socket: socket_config(&a.sock)?,
        spike: None,
    })
}

fn common_warnings(
    doc: &ResultDocument,
    memory_lock: &Option<Result<(), String>>,
    rt: &RtConfig,
    socket: &SocketConfig,
) -> Vec<Warn> {
    let mut w =
        crate::document::process_warnings(&doc.environment, memory_lock, rt.policy == "other");
    if matches!(socket.busy_poll_us, Some(us) if us > 0) {
        let global = std::fs::read_to_string("/proc/sys/net/core/busy_poll")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok());
        if global == Some(0) {
            w.push(Warn::UdpBusyPollInactive);
        }
    }
    w
}

fn reflect(a: ReflectArgs) -> anyhow::Result<u8> {
    let mut cfg = reflect_config(&a)?;
    if let Some(p) = &a.json {
        check_writable(p, "--json")?;
    }
    let mut ev_opts = a.evidence.options(cfg.window_ns, "rtlab-udp-refl")?;
    ev_opts.cpus = cfg.rt.cpu.into_iter().collect();
    ev_opts.planned = cfg.duration_ns.map(|d| std::time::Duration::from_nanos(d as u64));
    ev_opts.sources = vec!["reflector".into()];
    let stop = stop_flag()?;
    // the tracer's tracefs changes are journaled and undone in `finish` (or on drop)
    let trace_host = rtlab_tune::host::RealHost::new();
    let evidence = crate::evidence::EvidenceRun::start(&trace_host, &ev_opts)?;
    cfg.spike = evidence.hook();
    let started = std::time::SystemTime::now();
    let env = rtlab_sys::env::detect(std::path::Path::new("/"));
    let quiet = a.quiet || a.json.as_deref() == Some("-");
    let json_to_stdout = a.json.as_deref() == Some("-");
    let outcome = udp_run::reflect(
        &cfg,
        stop,
        |addr| {
            if !json_to_stdout {
                // the line scripts and tests wait for: the socket is bound
                let mut out = std::io::stdout().lock();
                let _ = writeln!(
                    out,
                    "rtlab udp reflect: listening on {addr}{}",
                    cfg.netns.as_deref().map(|n| format!(" in netns {n}")).unwrap_or_default()
                );
                let _ = out.flush();
            }
        },
        |_| {},
    )?;
    let mut doc =
        new_document("udp", started, env, serde_json::json!({ "role": "reflect", "reflect": cfg }));
    doc.duration_ns = outcome.duration_ns;
    doc.interrupted = false; // a reflector runs until told to stop: Ctrl-C is its normal end
    doc.environment.memory_locked = matches!(outcome.memory_lock, Some(Ok(())));
    doc.streams = outcome.streams(&cfg);
    doc.evidence = Some(evidence.finish(&doc.streams));
    let mut warns = common_warnings(&doc, &outcome.memory_lock, &cfg.rt, &cfg.socket);
    if outcome.counts.malformed + outcome.counts.foreign > 0 {
        warns.push(Warn::UdpForeignDatagrams {
            count: outcome.counts.malformed + outcome.counts.foreign,
        });
    }
    doc.warnings = warns.iter().map(|w| w.to_warning()).collect();
    if let Some(p) = &a.json {
        write_json(&doc, p)?;
    }
    if !quiet {
        let mut out = std::io::stdout().lock();
        write_reflector_report(&mut out, &outcome, &doc.streams[0])?;
        for w in &doc.warnings {
            eprintln!("warning: {}", w.message);
        }
    }
    crate::evidence::print(doc.evidence.as_ref(), &doc.streams, quiet);
    Ok(0)
}

fn write_reflector_report(
    out: &mut impl Write,
    o: &ReflectOutcome,
    s: &Stream,
) -> std::io::Result<()> {
    let c = &o.counts;
    writeln!(
        out,
        "reflector on {}: received {}, answered {} ({} hellos), dropped on purpose {}, malformed {}, foreign {}, send errors {}",
        o.local_addr, c.received, c.answered, c.hellos, c.dropped, c.malformed, c.foreign, c.send_errors
    )?;
    for r in &c.runs {
        writeln!(
            out,
            "  run {:016x}: requests {}, answered {}, dropped {}, forward lost {}, duplicates {}, out of order {}, highest seq {}",
            r.run_id,
            r.requests,
            r.answered,
            r.dropped,
            r.forward_lost(),
            r.duplicates,
            r.out_of_order,
            r.highest_seq.map(|h| h.to_string()).unwrap_or_else(|| "-".into())
        )?;
    }
    if s.stats.count > 0 {
        writeln!(out, "turnaround (reply sent - request received, reflector clock)")?;
        write!(
            out,
            "{}",
            stats_table(&[Row { label: "reflector".into(), summary: &s.stats }], false)
        )?;
    }
    Ok(())
}

fn pair_config(a: &PingArgs) -> anyhow::Result<NetnsConfig> {
    Ok(NetnsConfig {
        name: format!("rtlab{}", std::process::id() % 100_000),
        rate_bps: a
            .rate
            .as_deref()
            .map(|r| parse_bitrate(r).map_err(|e| anyhow::anyhow!("--rate: {e}")))
            .transpose()?,
        shaper: match a.shaper {
            ShaperArg::Htb => Shaper::Htb,
            ShaperArg::Tbf => Shaper::Tbf,
        },
        priority_path: match a.priority_path {
            PriorityPathArg::None => PriorityPath::None,
            PriorityPathArg::Class => PriorityPath::Class,
            PriorityPathArg::Band => PriorityPath::Band,
        },
        ..NetnsConfig::default()
    })
}

/// What one measured ping produced (the CLI prints it; the scenario runner stores it).
pub struct PingRun {
    pub doc: ResultDocument,
    pub outcome: PingOutcome,
    pub reflected: Option<ReflectOutcome>,
    /// `tc -s qdisc` of the client's veth end when there was a bottleneck.
    pub qdisc: Option<String>,
}

/// Measure: with `pair` (made by the caller, who removes it), run the reflector in side b
/// and ping from side a; else ping `cfg.to`.
pub fn measure(
    mut cfg: UdpPingConfig,
    pair: Option<&NetnsPair>,
    stop: Arc<AtomicBool>,
    env: rtlab_core::schema::Environment,
    config_json: impl FnOnce(&UdpPingConfig) -> serde_json::Value,
    on_progress: impl FnMut(u64, u64),
) -> anyhow::Result<PingRun> {
    let started = std::time::SystemTime::now();
    let mut reflector = None;
    let reflector_stop = Arc::new(AtomicBool::new(false));
    let mut reflect_cfg = None;
    if let Some(p) = pair {
        cfg.netns = Some(p.ns_a.clone());
        cfg.to = format!("{}:9000", p.ip_b);
        let rc = UdpReflectConfig {
            bind: cfg.to.clone(),
            netns: Some(p.ns_b.clone()),
            drop_every: None,
            duration_ns: None,
            count: None,
            window_ns: cfg.window_ns,
            rt: cfg.rt.clone(),
            socket: cfg.socket.clone(),
            // the reflector of the pair is in this process: its turnaround counts too
            spike: cfg.spike.as_ref().map(|h| h.for_source(2)),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let (rs, rcc) = (reflector_stop.clone(), rc.clone());
        reflector = Some(std::thread::spawn(move || {
            udp_run::reflect(&rcc, rs, |addr| drop(tx.send(Ok(addr.to_string()))), |_| {})
                .inspect_err(|e| {
                    // the pinger waits for this: an error before binding ends the wait too
                    let _ = tx.send(Err(e.to_string()));
                })
        }));
        match rx.recv() {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => anyhow::bail!("--pair reflector: {e}"),
            Err(_) => anyhow::bail!("--pair reflector: ended before listening"),
        }
        reflect_cfg = Some(rc);
    }
    let outcome = udp_run::ping(&cfg, stop, on_progress);
    reflector_stop.store(true, Ordering::Relaxed);
    let reflected: Option<ReflectOutcome> =
        reflector.and_then(|h| h.join().ok()).and_then(|r| r.ok());
    let qdisc = pair.filter(|p| p.config.rate_bps.is_some()).map(|p| p.qdisc_stats());
    let outcome = outcome?;

    let mut doc = new_document("udp", started, env, config_json(&cfg));
    doc.duration_ns = outcome.duration_ns;
    doc.interrupted = outcome.end == rtlab_probes::timer::LoopEnd::Interrupted;
    doc.environment.memory_locked = matches!(outcome.memory_lock, Some(Ok(())));
    doc.streams = outcome.streams(&cfg);
    if let (Some(r), Some(rc)) = (&reflected, &reflect_cfg) {
        doc.streams.extend(r.streams(rc));
    }
    let c = &outcome.counts;
    let mut warns = common_warnings(&doc, &outcome.memory_lock, &cfg.rt, &cfg.socket);
    if c.samples < MIN_SAMPLES_FOR_TAIL {
        warns.push(Warn::RunTooShort { samples: c.samples, wanted: MIN_SAMPLES_FOR_TAIL });
    }
    if c.malformed > 0 {
        warns.push(Warn::UdpForeignDatagrams { count: c.malformed });
    }
    if cfg.payload > 1472 {
        warns.push(Warn::UdpFragmented { payload: cfg.payload });
    }
    if c.lost > 0 {
        warns.push(Warn::UdpPacketLoss { lost: c.lost, sent: c.sent });
    }
    if cfg.mode == PingMode::Periodic && outcome.rtt.overruns > 0 {
        warns.push(Warn::UdpSenderLate {
            overruns: outcome.rtt.overruns,
            max_late_ns: outcome.lateness.running.max,
        });
    }
    if doc.interrupted {
        warns.push(Warn::Interrupted);
    }
    doc.warnings = warns.iter().map(|w| w.to_warning()).collect();
    Ok(PingRun { doc, outcome, reflected, qdisc })
}

fn ping(a: PingArgs) -> anyhow::Result<u8> {
    // check every flag before anything is made
    let mut cfg = ping_config(&a, a.pair.then(|| "198.18.0.2:9000".to_string()))?;
    let online = rtlab_sys::cpus::online_cpus(std::path::Path::new("/")).0;
    cfg.validate(&online)?;
    if let Some(p) = &a.json {
        check_writable(p, "--json")?;
    }
    let mut ev_opts = a.evidence.options(
        cfg.window_ns,
        if a.pair { crate::evidence::UDP_PAIR_THREADS } else { "rtlab-udp-ping" },
    )?;
    ev_opts.cpus = cfg.rt.cpu.into_iter().collect();
    ev_opts.sources = crate::evidence::UDP_PING_SOURCES.iter().map(|s| s.to_string()).collect();
    ev_opts.planned = cfg.duration_ns.map(|d| std::time::Duration::from_nanos(d as u64));
    let stop = stop_flag()?;
    let env = rtlab_sys::env::detect(std::path::Path::new("/"));
    let quiet = a.quiet || a.json.as_deref() == Some("-");
    let pair_cfg = if a.pair { Some(pair_config(&a)?) } else { None };
    let pair_json = pair_cfg.clone();
    // --pair: the namespaces are a guard, removed when this function returns, however
    let pair = pair_cfg.as_ref().map(NetnsPair::up).transpose()?;
    if !quiet {
        if let Some(p) = &pair {
            let hint =
                p.priority_hint().map(|h| format!("; priority path: {h}")).unwrap_or_default();
            println!(
                "pair: {} ({}) -> {} ({}){}{}",
                p.ns_a,
                p.ip_a,
                p.ns_b,
                p.ip_b,
                p.config.rate_bps.map(|r| format!(", bottleneck {r} bit/s")).unwrap_or_default(),
                hint
            );
            println!("{}", headline_of(p, &cfg));
        } else {
            println!("{}", headline(&cfg));
        }
    }
    // the tracer's tracefs changes are journaled and undone in `finish` (or on drop)
    let trace_host = rtlab_tune::host::RealHost::new();
    let evidence = crate::evidence::EvidenceRun::start(&trace_host, &ev_opts)?;
    cfg.spike = evidence.hook();
    let progress = Progress::new(cfg.planned(), "udp ping", quiet);
    let run = measure(
        cfg.clone(),
        pair.as_ref(),
        stop,
        env,
        |c| serde_json::json!({ "role": "ping", "ping": c, "pair": pair_json }),
        |done, planned| {
            progress.set_len_once(planned);
            progress.set(done);
        },
    );
    progress.finish();
    drop(pair); // the namespaces go now, also when the ping failed
    let PingRun { mut doc, outcome, reflected, qdisc } = run?;
    doc.evidence = Some(evidence.finish(&doc.streams));
    let cfg: UdpPingConfig = serde_json::from_value(doc.config["ping"].clone()).unwrap_or(cfg);
    if let Some(p) = &a.json {
        write_json(&doc, p)?;
    }
    if !quiet {
        let color = std::io::stdout().is_terminal();
        let mut out = std::io::stdout().lock();
        write_ping_report(&mut out, &cfg, &outcome, &doc, color)?;
        if a.histogram {
            writeln!(out, "\nRTT histogram")?;
            write!(out, "{}", terminal_histogram(&doc.streams[0].histogram, 20, 40))?;
        }
        if let Some(r) = &reflected {
            writeln!(out)?;
            write_reflector_report(
                &mut out,
                r,
                doc.streams.iter().find(|s| s.name == "reflector").expect("reflector stream"),
            )?;
        }
        if let Some(q) = qdisc {
            writeln!(out, "\nqdisc on the client's veth end:\n{}", q.trim_end())?;
        }
        for w in &doc.warnings {
            eprintln!("warning: {}", w.message);
        }
    }
    crate::evidence::print(doc.evidence.as_ref(), &doc.streams, quiet);
    Ok(0)
}

/// The headline once the pair decided where the ping goes.
fn headline_of(p: &NetnsPair, cfg: &UdpPingConfig) -> String {
    let mut c = cfg.clone();
    c.to = format!("{}:9000", p.ip_b);
    headline(&c)
}

fn headline(cfg: &UdpPingConfig) -> String {
    let length = match (cfg.duration_ns, cfg.count) {
        (Some(d), Some(c)) => format!("{} or {c} requests", format_duration_exact(Nanos(d))),
        (Some(d), None) => format_duration_exact(Nanos(d)),
        (None, Some(c)) => format!("{c} requests"),
        (None, None) => String::new(),
    };
    let mode = match cfg.mode {
        PingMode::Periodic => {
            format!("periodic every {}", format_duration_exact(Nanos(cfg.period_ns)))
        }
        PingMode::Pingpong => "pingpong".into(),
    };
    format!(
        "rtlab udp ping: {mode}, {} B to {}{}, deadline {}, loss timeout {}, {} {}, {length}",
        cfg.payload,
        cfg.to,
        cfg.netns.as_deref().map(|n| format!(" from netns {n}")).unwrap_or_default(),
        format_duration_exact(Nanos(cfg.deadline_ns)),
        format_duration_exact(Nanos(cfg.loss_timeout_ns)),
        cfg.rt.policy,
        cfg.rt.priority,
    )
}

/// The studies' table (S1: Min / Avg / Max / Missed deadlines / Packet loss), then the
/// percentiles, then the full accounting and what the socket and thread really had.
fn write_ping_report(
    out: &mut impl Write,
    cfg: &UdpPingConfig,
    o: &PingOutcome,
    doc: &ResultDocument,
    color: bool,
) -> std::io::Result<()> {
    let c = &o.counts;
    let s = &doc.streams[0].stats;
    let cell = |v: Option<i64>| v.map(us_1).unwrap_or_else(|| "-".into());
    writeln!(out, "RTT ({})", udp_run::RTT_DEFINITION)?;
    let head = ["Min", "Avg", "Max", "Missed deadlines", "Packet loss"];
    let row = [
        cell(s.min_ns),
        cell(s.mean_ns),
        cell(s.max_ns),
        format!("{} / {}", c.missed, c.sent),
        format!("{} / {}", c.lost, c.sent),
    ];
    let widths: Vec<usize> = head.iter().zip(&row).map(|(h, r)| h.len().max(r.len())).collect();
    let line = |cells: &[String]| {
        cells.iter().zip(&widths).map(|(v, w)| format!("{v:>w$}")).collect::<Vec<_>>().join("  ")
    };
    writeln!(out, "{}", line(&head.map(String::from)))?;
    writeln!(out, "{}", line(&row))?;
    writeln!(
        out,
        "(us; missed = RTT above the deadline {}, loss = no reply within {})",
        format_duration_exact(Nanos(cfg.deadline_ns)),
        format_duration_exact(Nanos(cfg.loss_timeout_ns))
    )?;
    writeln!(out)?;
    let rows: Vec<Row> = doc
        .streams
        .iter()
        .filter(|s| s.name.starts_with("ping"))
        .map(|s| Row { label: s.name.clone(), summary: &s.stats })
        .collect();
    write!(out, "{}", stats_table(&rows, color))?;
    writeln!(
        out,
        "accounted: sent {} = replies {} + lost {}; late {}, duplicates {}, out of order {}, malformed/foreign {}{}",
        c.sent,
        c.samples,
        c.lost,
        c.late,
        c.duplicates,
        c.out_of_order,
        c.malformed,
        if cfg.mode == PingMode::Periodic { format!(", overruns {}", o.rtt.overruns) } else { String::new() }
    )?;
    if c.send_errors + c.receive_errors + c.stale > 0 {
        writeln!(
            out,
            "  of which: send errors {}, receive errors {}, stale {}",
            c.send_errors, c.receive_errors, c.stale
        )?;
    }
    if let (Some(max), Some(idx), Some(at)) = (s.max_ns, s.max_index, s.max_at_ns) {
        writeln!(out, "max {} us at request {} ({} after start)", us_1(max), idx, Nanos(at))?;
    }
    let k = &o.socket;
    let opt = |v: Option<i32>| v.map(|v| v.to_string()).unwrap_or_else(|| "?".into());
    writeln!(
        out,
        "socket {}: SO_PRIORITY {}, TOS {}, busy poll {} us, rcvbuf {}, sndbuf {}; thread {} {} on CPUs {:?}",
        o.local_addr,
        opt(k.so_priority),
        k.tos.map(|t| format!("{t:#04x}")).unwrap_or_else(|| "?".into()),
        opt(k.busy_poll_us),
        opt(k.rcvbuf),
        opt(k.sndbuf),
        o.policy_seen.0.map(|p| p.name()).unwrap_or("?"),
        o.policy_seen.1,
        o.cpus_seen
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_class_ids() {
        assert_eq!(number_flag("--so-priority", "6", true).unwrap(), 6);
        assert_eq!(number_flag("--so-priority", "1:10", true).unwrap(), 0x10010);
        assert_eq!(number_flag("--so-priority", "0x10010", true).unwrap(), 0x10010);
        assert_eq!(number_flag("--tos", "0xb8", false).unwrap(), 184);
        assert!(number_flag("--tos", "1:10", false)
            .unwrap_err()
            .to_string()
            .contains("--tos '1:10'"));
        assert!(number_flag("--so-priority", "x", true).is_err());
    }
}
