//! `rtlab udp reflect` and `rtlab udp ping`: flags -> UdpReflectConfig / UdpPingConfig
//! (in one place each), run, print the studies' summary and the percentiles, write JSON.
//! `udp ping --pair` also makes two network namespaces for the run, runs the reflector
//! in the second one, and removes both afterwards, whatever happens.

use super::netns::{PriorityPathArg, ShaperArg};
use super::{duration_flag, stop_flag};
use crate::args::RtArgs;
use crate::document::{check_writable, write_json};
use clap::{Args, Subcommand, ValueEnum};
use rtlab_core::rt::RtSettings;
use rtlab_core::units::{format_duration_exact, parse_bitrate, Nanos};
use rtlab_lab::config::{from_table, read_table, FlagTable, RtFields};
use rtlab_lab::netns::{NetnsConfig, NetnsPair};
use rtlab_lab::probes::udp::PingMode;
use rtlab_lab::probes::udp::{self, SocketFields, UdpProbeConfig};
use rtlab_lab::probes::udp::{UdpPingConfig, UdpReflectConfig};
use rtlab_report::summary;
use std::io::{IsTerminal, Write};

#[derive(Args, Debug)]
pub struct UdpArgs {
    #[command(subcommand)]
    pub command: UdpCommand,
}

#[derive(Subcommand, Debug)]
pub enum UdpCommand {
    /// Answer rtlab requests (the far side of `udp ping`); Ctrl-C ends it with a report.
    Reflect(Box<ReflectArgs>),
    /// Measure UDP round trips to a reflector (S1).
    Ping(Box<PingArgs>),
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

/// The XDP path, both sides.
#[derive(Args, Debug, Clone)]
pub struct XdpArgs {
    /// Send and receive through an AF_XDP socket on the device holding the address, with rtlab's XDP program steering the probe's datagrams to it (IPv4; the program is removed on exit, also after kill -9).
    #[arg(long)]
    pub xdp: bool,
    /// With --xdp: attach the program in the driver where it takes it (auto), or on the kernel's generic path.
    #[arg(long, value_enum, requires = "xdp", value_name = "WHERE")]
    pub xdp_attach: Option<XdpAttachArg>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum TimestampsArg {
    Software,
    Hardware,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum XdpAttachArg {
    Auto,
    Generic,
}

impl XdpArgs {
    fn fill(&self, t: &mut FlagTable) {
        if self.xdp {
            t.str("path", &Some("xdp".to_string()));
        }
        t.str(
            "xdp_attach",
            &self.xdp_attach.map(|a| match a {
                XdpAttachArg::Auto => "auto".to_string(),
                XdpAttachArg::Generic => "generic".to_string(),
            }),
        );
    }

    /// The engine's XDP configuration (journaled), None without --xdp.
    pub fn engine(&self) -> Option<rtlab_lab::probes::udp::XdpConfig> {
        self.xdp.then(|| rtlab_lab::probes::udp::XdpConfig {
            generic: matches!(self.xdp_attach, Some(XdpAttachArg::Generic)),
            journal: Some(rtlab_lab::guard::xdp_journal()),
        })
    }
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
    pub xdp: XdpArgs,
    #[command(flatten)]
    pub evidence: crate::args::EvidenceArgs,
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

#[derive(Args, Debug)]
pub struct PingArgs {
    /// The reflector, IP:PORT or [IPv6]:PORT.
    #[arg(long, value_name = "ADDR:PORT", required_unless_present_any = ["pair", "far"])]
    pub to: Option<String>,
    /// Start the reflector on a far side: ssh:[USER@]HOST[:PORT] (rtlab there) or netns:NAME.
    #[arg(long, value_name = "SPEC", conflicts_with_all = ["to", "pair"])]
    pub far: Option<String>,
    /// Local address to send from (default: any, port chosen by the kernel).
    #[arg(long, value_name = "ADDR:PORT")]
    pub bind: Option<String>,
    /// Send from inside this network namespace (see `rtlab netns up`).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// periodic (an absolute grid, S1) or pingpong (closed loop, like sockperf) [periodic].
    #[arg(long, value_enum)]
    pub mode: Option<PingModeArg>,
    /// Send period (periodic mode) [1ms].
    #[arg(long)]
    pub period: Option<String>,
    /// UDP payload, 16 B to 65507 B [500].
    #[arg(long)]
    pub payload: Option<String>,
    /// RTTs above this are missed deadlines. Default: the period (pingpong: 1ms).
    #[arg(long)]
    pub deadline: Option<String>,
    /// No reply within this is a loss; a reply after it is late [500ms].
    #[arg(long)]
    pub loss_timeout: Option<String>,
    /// How long to send [20s unless --count is given].
    #[arg(long, short = 'D')]
    pub duration: Option<String>,
    /// How many requests to send (slots: a skipped slot counts).
    #[arg(long)]
    pub count: Option<i64>,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub sock: SockArgs,
    #[command(flatten)]
    pub xdp: XdpArgs,
    #[command(flatten)]
    pub evidence: crate::args::EvidenceArgs,
    /// Width of a max-over-time window [1s].
    #[arg(long)]
    pub window: Option<String>,
    /// Do not check first that a reflector answers.
    #[arg(long)]
    pub no_preflight: bool,
    /// Split each round trip into stages from the kernel's timestamps: user send -> driver tx (ping.tx_stack), the wire and far side (ping.wire), driver rx -> user wake-up (ping.rx_wakeup).
    #[arg(long, value_enum, value_name = "KIND")]
    pub timestamps: Option<TimestampsArg>,
    /// Launch-time sending: hand each request to the kernel this long before its slot (e.g. 200us), to leave at the slot through the device's etf qdisc (SO_TXTIME); ping.send_lateness is then the launch against its slot.
    #[arg(long, value_name = "LEAD")]
    pub txtime: Option<String>,
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
    #[command(flatten)]
    pub out: crate::args::OutputArgs,
    #[command(flatten)]
    pub gates: crate::args::GateArgs,
    /// Print a terminal histogram of the RTT.
    #[arg(long)]
    pub histogram: bool,
}

pub fn run(a: UdpArgs) -> anyhow::Result<u8> {
    match a.command {
        UdpCommand::Reflect(r) => reflect(*r),
        UdpCommand::Ping(p) => ping(*p),
    }
}

impl SockArgs {
    fn fill(&self, t: &mut FlagTable) {
        t.str("so_priority", &self.so_priority)
            .str("tos", &self.tos)
            .int("busy_poll", self.busy_poll.map(i64::from))
            .str("rcvbuf", &self.rcvbuf)
            .str("sndbuf", &self.sndbuf);
    }
}

impl PingArgs {
    /// The flags given, as the probe's table (every default lives in the configuration).
    pub fn table(&self) -> toml::Table {
        let mut t = FlagTable::default();
        t.str("to", &self.to)
            .str("bind", &self.bind)
            .str("netns", &self.netns)
            .str("far", &self.far)
            .str(
                "mode",
                &self.mode.map(|m| match m {
                    PingModeArg::Periodic => "periodic".to_string(),
                    PingModeArg::Pingpong => "pingpong".to_string(),
                }),
            )
            .str("period", &self.period)
            .str("payload", &self.payload)
            .str("deadline", &self.deadline)
            .str("loss_timeout", &self.loss_timeout)
            .str("duration", &self.duration)
            .int("count", self.count)
            .str("window", &self.window)
            .flag("preflight", self.no_preflight, false)
            .str("txtime", &self.txtime)
            .str(
                "timestamps",
                &self.timestamps.map(|t| match t {
                    TimestampsArg::Software => "software".to_string(),
                    TimestampsArg::Hardware => "hardware".to_string(),
                }),
            );
        self.rt.fill(&mut t);
        self.sock.fill(&mut t);
        self.xdp.fill(&mut t);
        t.take()
    }
}

/// Flags -> the probe's configuration (the same struct as a scenario's udp probe).
pub fn ping_config(a: &PingArgs) -> anyhow::Result<UdpProbeConfig> {
    from_table(&a.table()).map_err(|e| anyhow::anyhow!(e.cli_text()))
}

fn positive(flag: &str, v: &str) -> anyhow::Result<i64> {
    let ns = duration_flag(flag, v)?;
    if ns <= 0 {
        anyhow::bail!("{flag} {v}: must be above zero");
    }
    Ok(ns)
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
        rt: reflect_rt(a, &udp::default_rt())?,
        socket: {
            let mut t = FlagTable::default();
            a.sock.fill(&mut t);
            let s: SocketFields =
                read_table(&t.take()).map_err(|e| anyhow::anyhow!(e.cli_text()))?;
            s.validate().map_err(|e| anyhow::anyhow!(e.cli_text()))?;
            s.socket()
        },
        cost_window: None,
        xdp: a.xdp.engine(),
        spike: None,
    })
}

/// The reflector's real-time settings: its flags over `base` (SCHED_FIFO 80, or the
/// profile's), one thread.
fn reflect_rt(a: &ReflectArgs, base: &RtSettings) -> anyhow::Result<RtSettings> {
    let mut t = FlagTable::default();
    a.rt.fill(&mut t);
    let f: RtFields = read_table(&t.take()).map_err(|e| anyhow::anyhow!(e.cli_text()))?;
    let rt = f.over(base);
    rt.check().map_err(|m| anyhow::anyhow!("--priority: {m}"))?;
    Ok(RtSettings { cpus: rt.cpu_of(0).map(|c| vec![c]), ..rt })
}

fn reflect(a: ReflectArgs) -> anyhow::Result<u8> {
    let mut cfg = reflect_config(&a)?;
    let profile = super::command_profile(&a.rt)?;
    if let Some(p) = &profile {
        cfg.rt = reflect_rt(&a, &p.base())?;
    }
    if let Some(p) = &a.json {
        check_writable(p, "--json")?;
    }
    let evidence = a.evidence.options()?;
    let stop = stop_flag()?;
    let quiet = a.quiet || a.json.as_deref() == Some("-");
    // no machine lock (a reflector answers a ping that holds it); a --profile is refused by
    // the journal while another rtlab's is in force
    let applied = super::apply_profile_for(profile.as_ref(), true, &cfg.rt, quiet)?;
    let json_to_stdout = a.json.as_deref() == Some("-");
    let netns = cfg.netns.clone();
    let on_listening = |addr: &str| {
        if !json_to_stdout {
            // the line scripts and tests wait for: the socket is bound
            let mut out = std::io::stdout().lock();
            let _ = writeln!(
                out,
                "rtlab udp reflect: listening on {addr}{}",
                netns.as_deref().map(|n| format!(" in netns {n}")).unwrap_or_default()
            );
            let _ = out.flush();
        }
    };
    let udp::ReflectRun { mut doc, outcome } = udp::reflect(&mut cfg, evidence, stop, on_listening)
        .map_err(|e| match e {
            udp::ReflectError::Lab(e) => super::lab_error(e),
            udp::ReflectError::Udp(e) => anyhow::Error::from(e),
        })?;
    super::finish_profile(applied, &mut doc, quiet);
    if let Some(p) = &a.json {
        write_json(&doc, p)?;
    }
    if !quiet {
        print!("{}", summary::udp::reflector(&udp::reflector_counts(&outcome), &doc.streams[0]));
        for w in &doc.warnings {
            eprintln!("warning: {}", w.message);
        }
    }
    super::print_evidence(doc.evidence.as_ref(), &doc.streams, quiet);
    super::print_cost(&doc, quiet);
    Ok(0)
}

fn pair_config(a: &PingArgs) -> anyhow::Result<NetnsConfig> {
    Ok(NetnsConfig {
        name: format!("rtlab{}", std::process::id() % 100_000),
        rate_bps: a
            .rate
            .as_deref()
            .map(|r| parse_bitrate(r).map_err(|e| anyhow::anyhow!("--rate: {e}")))
            .transpose()?,
        shaper: a.shaper.into(),
        priority_path: a.priority_path.into(),
        ..NetnsConfig::default()
    })
}

fn ping(a: PingArgs) -> anyhow::Result<u8> {
    // check every flag before anything is made
    let cfg = ping_config(&a)?;
    if !a.pair && cfg.to.is_none() && cfg.far.is_none() {
        anyhow::bail!("--to: no reflector given (IP:PORT), or use --pair");
    }
    if let Some(p) = &a.out.json {
        check_writable(p, "--json")?;
    }
    let profile = super::command_profile(&a.rt)?;
    let base = super::rt_base(profile.as_ref(), udp::default_rt());
    let evidence = a.evidence.options()?;
    let stop = stop_flag()?;
    let quiet = a.out.is_quiet();
    let gates = a.gates.parse()?;
    let engine = cfg.engine(&cfg.rt.over(&base)).map_err(|e| anyhow::anyhow!(e.cli_text()))?;
    let line = |pair: Option<&NetnsPair>| match pair {
        Some(p) => format!(
            "pair: {} ({}) -> {} ({}){}{}\n{}",
            p.ns_a,
            p.ip_a,
            p.ns_b,
            p.ip_b,
            p.config.rate_bps.map(|r| format!(", bottleneck {r} bit/s")).unwrap_or_default(),
            p.priority_hint().map(|h| format!("; priority path: {h}")).unwrap_or_default(),
            headline_of(p, &engine)
        ),
        None => match &cfg.far {
            Some(f) => {
                let mut c = engine.clone();
                c.to = format!("the reflector on the far side {f}");
                headline(&c)
            }
            None => headline(&engine),
        },
    };
    let mut say = super::Say::new("udp ping", engine.planned(), quiet, line);
    let mut command =
        super::probe_command(Some("rtlab udp ping"), profile.as_ref(), base, stop, evidence);
    // --pair: the namespaces are made once the machine is this command's, and removed after
    command.pair = if a.pair { Some(pair_config(&a)?) } else { None };
    let run =
        command.run(&cfg, &mut say, |ctx| udp::measure(&cfg, ctx)).map_err(super::lab_error)?;
    let doc = &run.doc;
    if let Some(p) = &a.out.json {
        write_json(doc, p)?;
    }
    if !quiet {
        let color = std::io::stdout().is_terminal();
        let far = super::far_lines(doc);
        print!("{}", summary::udp::ping(&udp::ping_summary(&run), a.histogram, &far, color));
        for w in &doc.warnings {
            eprintln!("warning: {}", w.message);
        }
    }
    super::print_evidence(doc.evidence.as_ref(), &doc.streams, quiet);
    super::print_cost(doc, quiet);
    Ok(super::judge(doc, &gates, quiet))
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
