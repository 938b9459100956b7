//! `rtlab pubsub`: flags -> PubsubConfig, run the cases, print the tables, write JSON.
//! With the hidden `--role-config JSON` it is a subscriber/echo process started by the probe.

use super::stop_flag;
use crate::document::{check_writable, write_json};
use clap::{Args, ValueEnum};
use rtlab_core::units::{format_duration_exact, Nanos};
use rtlab_lab::config::{from_table, FlagTable};
use rtlab_lab::probes::pubsub::{
    self, EchoStyle, HandRole, PubsubConfig, PubsubProbeConfig, TransportKind,
};
use rtlab_report::summary;
use std::io::IsTerminal;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PubsubModeArg {
    /// Publisher and subscribers on one host clock: receive stamp - send stamp.
    Oneway,
    /// Ping/pong through each subscriber: pong received - ping sent (not halved).
    Roundtrip,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScheduleArg {
    /// Pings on the rate's absolute grid (open loop; a slot already past is an overrun).
    Periodic,
    /// The next ping as soon as the pong is in, or its loss timeout passed (like the
    /// middlewares' own ping-pong benchmarks; roundtrip only, no --rate).
    ClosedLoop,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitArg {
    /// Sleep in the library's/kernel's wait.
    Blocking,
    /// Spin on a non-blocking take (burns a CPU per receiver).
    BusyPoll,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EchoArg {
    /// A thread of rtlab's takes each ping (waiting as --wait says) and publishes it back.
    Thread,
    /// The middleware's subscriber callback or listener publishes it back, in its own thread
    /// (zenoh, cyclonedds, fastdds): one spinner per round trip under busy-poll.
    Callback,
}

#[derive(Args, Debug)]
#[command(
    next_help_heading = "What is measured",
    mut_arg("policy", |a| a.help("Scheduling policy of the measuring threads [other]")),
    mut_arg("domain", |a| a.help("dds, rustdds: the domain id [100-199, from the process id]")),
    mut_arg("interface", |a| a.help("dds: the interface (name or address) to use; rustdds: the only interface up besides lo, or `all`; udp: the address to bind [loopback]")),
    mut_arg("peer", |a| a.help("dds: unicast discovery peers (none: multicast on --interface); udp: hosts to join")),
)]
pub struct PubsubArgs {
    /// Transport [intra]: intra (same process, zero copy), shm (iceoryx2), zenoh, cyclonedds (Cyclone DDS; also: dds), fastdds (eProsima Fast DDS), rustdds (RustDDS), ros2 (ROS 2 itself: rcl and an RMW), ros1 (ROS 1 itself: roscpp, on ROS_MASTER_URI's master or one rtlab starts), udp.
    #[arg(long)]
    pub transport: Option<String>,
    /// The far side's transport (pong or subscribers), another DDS implementation: a cross-implementation case [--transport].
    #[arg(long, value_name = "TRANSPORT")]
    pub far_transport: Option<String>,
    /// What is measured [oneway].
    #[arg(long, value_enum)]
    pub mode: Option<PubsubModeArg>,
    /// When round-trip pings go out [periodic].
    #[arg(long, value_enum)]
    pub schedule: Option<ScheduleArg>,
    /// Message sizes (header of 16 bytes included), swept: 64,4kib,64kib,1mib,16mib [64].
    #[arg(long, value_delimiter = ',')]
    pub payload: Vec<String>,
    /// Publish rates, swept: 25hz,100hz,1khz,5khz [100hz].
    #[arg(long, value_delimiter = ',')]
    pub rate: Vec<String>,
    /// Or send periods, swept: 10ms,1ms (a scenario's `period`; the same as --rate 100hz,1khz).
    #[arg(long, value_delimiter = ',', conflicts_with = "rate")]
    pub period: Vec<String>,
    /// Subscriber counts, swept (one row per subscriber): 1,2,6 or 1-6 [1].
    #[arg(long, value_delimiter = ',')]
    pub subscribers: Vec<String>,
    /// Measured time of each case [5s].
    #[arg(long)]
    pub duration: Option<String>,
    /// At most this many messages per case.
    #[arg(long)]
    pub count: Option<i64>,
    /// How receivers wait [blocking].
    #[arg(long, value_enum)]
    pub wait: Option<WaitArg>,
    /// Round trips: where the pong answers from [thread].
    #[arg(long, value_enum)]
    pub echo: Option<EchoArg>,
    /// Subscribers as threads of this process (default: separate processes).
    #[arg(long)]
    pub in_process: bool,
    /// QoS reliability: reliable | best-effort [best-effort].
    #[arg(help_heading = "QoS", long)]
    pub reliability: Option<String>,
    /// QoS history: keep-last:N | keep-all [keep-last:5].
    #[arg(help_heading = "QoS", long)]
    pub history: Option<String>,
    /// QoS durability: volatile | transient-local [volatile].
    #[arg(help_heading = "QoS", long)]
    pub durability: Option<String>,
    /// A message later than this is late; never received, lost [500ms].
    #[arg(long)]
    pub loss_timeout: Option<String>,
    /// Samples above this are missed deadlines [the period; closed loop: the loss timeout].
    #[arg(long)]
    pub deadline: Option<String>,
    /// Hold /dev/cpu_dma_latency at this many us during the run (0 = no deep C-states).
    #[arg(help_heading = "Real-time settings", long, num_args = 0..=1, default_missing_value = "0", value_name = "US")]
    pub cpu_dma_latency: Option<i64>,
    /// Middleware threads at their own SCHED_FIFO priority, by thread name: recv=75,tev=70
    /// (Cyclone DDS: recv, recvUC, tev, dq.user, dq.builtins, gc; applied with chrt after start-up).
    #[arg(
        help_heading = "Real-time settings",
        long,
        value_delimiter = ',',
        value_name = "NAME=PRIO"
    )]
    pub thread_priority: Vec<String>,
    /// Every thread of the middleware STEPS under the measuring threads' priority where those
    /// are real-time: -5 gives Fast DDS's dds.* (or Cyclone DDS's recv, tev, dq.*, gc) FIFO 75
    /// under 80 (S3's DDS threads under its executor).
    #[arg(
        help_heading = "Real-time settings",
        long,
        value_name = "STEPS",
        allow_negative_numbers = true
    )]
    pub middleware_priority: Option<i64>,
    #[command(flatten, next_help_heading = "Real-time settings")]
    pub rt: crate::args::RtArgs,
    /// Width of a max-over-time window [1s].
    #[arg(long, help_heading = "What is measured")]
    pub window: Option<String>,
    #[command(flatten, next_help_heading = "Evidence")]
    pub evidence: crate::args::EvidenceArgs,
    #[command(flatten, next_help_heading = "Output")]
    pub out: crate::args::OutputArgs,
    #[command(flatten)]
    pub gates: crate::args::GateArgs,
    /// The subscribers (oneway) or the pong (roundtrip) on a far side: ssh:[USER@]HOST[:PORT] (rtlab there) or netns:NAME.
    #[arg(help_heading = "Far side and network", long, value_name = "SPEC")]
    pub far: Option<String>,
    /// Measure from inside this network namespace (see `rtlab netns up`).
    #[arg(help_heading = "Far side and network", long, value_name = "NAME")]
    pub netns: Option<String>,
    /// The hosts' clocks agree (PTP, chrony): allows oneway across hosts.
    #[arg(help_heading = "Far side and network", long)]
    pub synced_clocks: bool,
    #[command(flatten, next_help_heading = "Far side and network")]
    pub network: crate::args::DdsNetworkArgs,
    /// zenoh: endpoints to connect to, e.g. tcp/192.168.1.2:7447.
    #[arg(help_heading = "Zenoh", long, value_delimiter = ',', value_name = "ENDPOINT")]
    pub connect: Vec<String>,
    /// zenoh: endpoints to listen on.
    #[arg(help_heading = "Zenoh", long, value_delimiter = ',', value_name = "ENDPOINT")]
    pub listen: Vec<String>,
    /// zenoh: session mode, peer or client [peer].
    #[arg(help_heading = "Zenoh", long, value_name = "MODE")]
    pub zenoh_mode: Option<String>,
    /// fastdds: its shared-memory transport: default (a 512 KiB segment, as a ROS 2 node), off (UDP only), or a segment size, e.g. 4MiB.
    #[arg(help_heading = "Fast DDS", long, value_name = "off|SIZE")]
    pub fastdds_shm: Option<String>,
    /// fastdds: the Fast DDS library: debian (Debian's 2.9) or ros2 (the ROS 2 installation's, which its rmw_fastrtps_cpp runs on) [debian].
    #[arg(help_heading = "Fast DDS", long, value_name = "debian|ros2")]
    pub fastdds_lib: Option<String>,
    /// ros1: subscribers ask their publishers for TCP_NODELAY (roscpp's transport hint).
    #[arg(help_heading = "ROS 1", long)]
    pub tcp_nodelay: bool,
    /// ros1: best-effort subscribers ask for UDPROS first (roscpp's datagram transport; TCPROS otherwise); one-way runs only.
    #[arg(help_heading = "ROS 1", long)]
    pub udpros: bool,
    /// ros2: the ROS 2 installation to use, an ament prefix such as /opt/ros/jazzy [AMENT_PREFIX_PATH, /opt/ros/*, then /opt/rtlab/ros2].
    #[arg(help_heading = "ROS 2", long, value_name = "DIR")]
    pub ros2_prefix: Option<String>,
    /// ros2: the RMW implementation, e.g. rmw_fastrtps_cpp, rmw_cyclonedds_cpp, rmw_zenoh_cpp [RMW_IMPLEMENTATION, else the installation's default].
    #[arg(help_heading = "ROS 2", long, value_name = "NAME")]
    pub rmw: Option<String>,
    /// Run one role by hand, its peer by hand on the other machine: ping (with pong there) or pub (with sub there).
    #[arg(help_heading = "Roles by hand", long, value_name = "ping|pong|pub|sub")]
    pub role: Option<String>,
    /// The topic of a role by hand [rtlab]: oneway on TOPIC, roundtrip on TOPIC_ping / TOPIC_pong.
    #[arg(help_heading = "Roles by hand", long, requires = "role")]
    pub topic: Option<String>,
    /// Internal: run as a subscriber/echo process of a probe (JSON role configuration).
    #[arg(long, hide = true)]
    pub role_config: Option<String>,
    /// Internal: run a case's near side in a process of its own (JSON engine configuration).
    #[arg(long, hide = true)]
    pub engine_config: Option<String>,
}

impl PubsubArgs {
    /// The flags given, as the probe's table (every default lives in the configuration).
    pub fn table(&self) -> toml::Table {
        let mut t = FlagTable::default();
        t.str("transport", &self.transport)
            .str("far_transport", &self.far_transport)
            .str(
                "mode",
                &self.mode.map(|m| match m {
                    PubsubModeArg::Oneway => "oneway".to_string(),
                    PubsubModeArg::Roundtrip => "roundtrip".to_string(),
                }),
            )
            .str(
                "schedule",
                &self.schedule.map(|m| {
                    match m {
                        ScheduleArg::Periodic => pubsub::Schedule::Periodic,
                        ScheduleArg::ClosedLoop => pubsub::Schedule::ClosedLoop,
                    }
                    .name()
                    .to_string()
                }),
            )
            .list("payload", &self.payload)
            .list("rate", &self.rate)
            .list("period", &self.period)
            .list("subscribers", &self.subscribers)
            .str("duration", &self.duration)
            .int("count", self.count)
            .str(
                "wait",
                &self.wait.map(|w| match w {
                    WaitArg::Blocking => "blocking".to_string(),
                    WaitArg::BusyPoll => "busy-poll".to_string(),
                }),
            )
            .str(
                "echo",
                &self.echo.map(|e| match e {
                    EchoArg::Thread => "thread".to_string(),
                    EchoArg::Callback => "callback".to_string(),
                }),
            )
            .flag("in_process", self.in_process, true)
            .str("reliability", &self.reliability)
            .str("history", &self.history)
            .str("durability", &self.durability)
            .str("loss_timeout", &self.loss_timeout)
            .str("deadline", &self.deadline)
            .int("cpu_dma_latency", self.cpu_dma_latency)
            .list("thread_priority", &self.thread_priority)
            .int("middleware_priority", self.middleware_priority)
            .str("window", &self.window)
            .str("far", &self.far)
            .str("netns", &self.netns)
            .flag("synced_clocks", self.synced_clocks, true)
            .list("connect", &self.connect)
            .list("listen", &self.listen)
            .str("zenoh_mode", &self.zenoh_mode)
            .str("fastdds_shm", &self.fastdds_shm)
            .str("fastdds_lib", &self.fastdds_lib)
            .flag("tcp_nodelay", self.tcp_nodelay, true)
            .flag("udpros", self.udpros, true)
            .str("ros2_prefix", &self.ros2_prefix)
            .str("rmw", &self.rmw)
            .str("role", &self.role)
            .str("topic", &self.topic);
        self.network.fill(&mut t);
        self.rt.fill(&mut t);
        t.take()
    }
}

/// Flags -> the probe's configuration (the same struct as a scenario's pubsub probe).
pub fn config_of(a: &PubsubArgs) -> anyhow::Result<PubsubProbeConfig> {
    from_table(&a.table()).map_err(|e| anyhow::anyhow!(e.cli_text()))
}

pub fn run(a: PubsubArgs) -> anyhow::Result<u8> {
    if let Some(json) = &a.role_config {
        return Ok(pubsub::role_main(json).clamp(0, 255) as u8);
    }
    if let Some(json) = &a.engine_config {
        return Ok(pubsub::engine_main(json).clamp(0, 255) as u8);
    }
    let cfg = config_of(&a)?;
    let profile = super::command_profile(&a.rt)?;
    let base = super::rt_base(profile.as_ref(), pubsub::default_rt());
    let engine = cfg.engine(&cfg.rt.over(&base)).map_err(|e| anyhow::anyhow!(e.cli_text()))?;
    if let Some(p) = &a.out.json {
        check_writable(p, "--json")?;
    }
    // the ROS 2 installation this side loads, found before waiting for the machine's lock (a
    // wrong --ros2-prefix is said at once, not after another rtlab's run)
    pubsub::find_ros2(&engine).map_err(|why| anyhow::anyhow!(why))?;
    let stop = stop_flag()?;
    let quiet = a.out.is_quiet();
    // a pong or a subscriber by hand is the peer of a ping or publisher that holds the
    // machine's lock when both run here: it must not wait for it
    let peer_by_hand = matches!(cfg.role, Some(HandRole::Pong | HandRole::Sub));
    let gates = a.gates.parse()?;
    let holder = if peer_by_hand { None } else { Some("rtlab pubsub") };
    // the headline once the configuration has passed the transport's checks
    let mut say = super::Say::new("pubsub", 0, quiet, |_| headline(&engine)).at_first_progress();
    let command = super::probe_command(holder, profile.as_ref(), base, stop, a.evidence.options()?);
    let (doc, (outcome, engine)) = command
        .run(&cfg, &mut say, |ctx| pubsub::measure(&cfg, ctx).map(|(d, o, e)| (d, (o, e))))
        .map_err(super::lab_error)?;
    if let Some(path) = &a.out.json {
        write_json(&doc, path)?;
    }
    if !quiet {
        let color = std::io::stdout().is_terminal();
        print!(
            "{}",
            summary::pubsub::render(&pubsub::summary(&engine, &outcome, doc.cost.as_ref()), color)
        );
        if doc.far.is_some() {
            print!("\n{}", super::far_lines(&doc));
        }
        for w in &doc.warnings {
            eprintln!("warning: {}", w.message);
        }
    }
    super::print_evidence(doc.evidence.as_ref(), &doc.streams, quiet);
    super::print_cost(&doc, quiet);
    Ok(super::judge(&doc, &gates, quiet))
}

fn headline(cfg: &PubsubConfig) -> String {
    let sizes: Vec<String> = cfg.payloads.iter().map(|p| format!("{p}B")).collect();
    let rates: Vec<String> = match cfg.schedule {
        pubsub::Schedule::Periodic => {
            cfg.periods_ns.iter().map(|p| pubsub::rate_label(*p)).collect()
        }
        pubsub::Schedule::ClosedLoop => vec![pubsub::Schedule::ClosedLoop.name().into()],
    };
    let subs: Vec<String> = cfg.subscribers.iter().map(|s| s.to_string()).collect();
    format!(
        "rtlab pubsub: {} {}, {} wait{}, payload {}, rate {}, subscribers {} ({}), {} per case, QoS {} {} {}, {} {}",
        match cfg.far_transport.filter(|k| *k != cfg.transport.kind) {
            Some(far) => format!("{} (far side: {})", cfg.transport.kind.name(), far.name()),
            None => cfg.transport.kind.name().to_string(),
        },
        cfg.mode.name(),
        cfg.wait.name(),
        match (cfg.mode, cfg.echo) {
            (pubsub::Mode::Roundtrip, EchoStyle::Callback) => ", echo from the callback",
            _ => "",
        },
        sizes.join(","),
        rates.join(","),
        subs.join(","),
        if cfg.in_process || cfg.transport.kind == TransportKind::Intra { "threads" } else { "processes" },
        match cfg.case_messages {
            // both bounds hold: the case ends at whichever comes first
            Some(n) => format!("{n} messages or {}", format_duration_exact(Nanos(cfg.case_duration_ns))),
            None => format_duration_exact(Nanos(cfg.case_duration_ns)),
        },
        cfg.qos.reliability,
        cfg.qos.history,
        cfg.qos.durability,
        cfg.rt.policy,
        cfg.rt.priority,
    )
}
