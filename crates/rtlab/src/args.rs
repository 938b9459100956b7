//! The flag groups several commands share (real-time settings, spike evidence, output, a
//! periodic run's length, a DDS network): one definition each, turned into the probes'
//! configuration tables in one place.

use clap::{Args, ValueEnum};

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyArg {
    Fifo,
    Rr,
    #[value(alias = "normal")]
    Other,
}

impl PolicyArg {
    pub fn name(self) -> &'static str {
        match self {
            PolicyArg::Fifo => "fifo",
            PolicyArg::Rr => "rr",
            PolicyArg::Other => "other",
        }
    }
}

/// Flags every real-time thread of rtlab takes (defaults: the probe's own, see its help).
#[derive(Args, Debug, Clone, Default)]
pub struct RtArgs {
    // (pubsub, noise and observe say their own default, with mut_arg)
    /// Scheduling policy of the measuring threads [fifo].
    #[arg(long, value_enum)]
    pub policy: Option<PolicyArg>,
    /// Priority (fifo/rr: 1-99 [80], other: 0). A comma list gives one per thread (timer).
    #[arg(long, short = 'p', value_delimiter = ',', alias = "prio")]
    pub priority: Vec<i32>,
    /// CPUs to pin to (e.g. 0,1 or 2-3); threads take them in turn. Default: not pinned.
    #[arg(long)]
    pub cpus: Option<String>,
    /// Do not lock memory (mlockall is on by default).
    #[arg(long)]
    pub no_mlockall: bool,
    /// Run under a profile (rt-normal, rt-affinities, ... or ./FILE.toml[#NAME]): its settings
    /// under these flags, its steps applied before the run (journaled) and put back after.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
}

impl RtArgs {
    /// Put the flags given into the probe's table (`priorities` when one per thread).
    pub fn fill(&self, t: &mut rtlab_lab::config::FlagTable) {
        t.str("policy", &self.policy.map(|p| p.name().to_string()));
        match self.priority.as_slice() {
            [] => {}
            [one] => {
                t.int("priority", Some(*one as i64));
            }
            many => {
                t.0.insert(
                    "priorities".into(),
                    toml::Value::Array(
                        many.iter().map(|p| toml::Value::Integer(*p as i64)).collect(),
                    ),
                );
            }
        }
        t.str("cpus", &self.cpus);
        t.flag("mlockall", self.no_mlockall, false);
    }
}

/// Spike evidence flags every probe takes.
#[derive(Args, Debug, Clone, Default)]
pub struct EvidenceArgs {
    /// Arm ftrace and explain the first samples above THRESHOLD (e.g. 500us): who held the CPU, which softirqs and IRQs ran (root).
    #[arg(long, value_name = "THRESHOLD")]
    pub trace_on_spike: Option<String>,
    /// Do not sample the kernel's counters per window (softirqs, interrupts, ksoftirqd, context switches, steal).
    #[arg(long)]
    pub no_counters: bool,
}

impl EvidenceArgs {
    /// The options (the probe fills in its window, threads and streams).
    pub fn options(&self) -> anyhow::Result<rtlab_lab::evidence::EvidenceOptions> {
        let mut o = rtlab_lab::evidence::EvidenceOptions::new(1_000_000_000, "");
        o.counters = !self.no_counters;
        if let Some(t) = &self.trace_on_spike {
            let ns = rtlab_core::units::parse_duration(t)
                .map_err(|e| anyhow::anyhow!("--trace-on-spike {e}"))?
                .0;
            if ns <= 0 {
                anyhow::bail!("--trace-on-spike {t}: must be above zero");
            }
            o.trace_on_spike_ns = Some(ns);
        }
        Ok(o)
    }
}

/// Where a probe's result goes (every measuring command).
#[derive(Args, Debug, Clone, Default)]
pub struct OutputArgs {
    /// Write the result document (JSON); - for stdout.
    #[arg(long)]
    pub json: Option<String>,
    /// Print nothing but errors (the JSON still goes where --json says).
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// A measuring command's gates: its exit status by verdict, as `rtlab run --gate` gives a run's.
#[derive(Args, Debug, Clone, Default)]
pub struct GateArgs {
    /// Exit 1 when a stream's metric is above the limit: STREAM:METRIC<=VALUE, e.g. '*:max<=1ms',
    /// 'all:missed<=0', '*:lost<=0.1%' (metrics p99_9, max, missed, lost; streams by name or glob,
    /// as `rtlab run --gate`). Repeatable.
    #[arg(long, value_name = "STREAM:METRIC<=VALUE")]
    pub gate: Vec<String>,
}

impl GateArgs {
    /// The gates, checked before anything is measured.
    pub fn parse(&self) -> anyhow::Result<Vec<rtlab_core::gate::Gate>> {
        self.gate
            .iter()
            .map(|g| rtlab_core::gate::Gate::parse_probe_flag(g).map_err(|e| anyhow::anyhow!(e)))
            .collect()
    }
}

impl OutputArgs {
    /// Nothing but errors on the terminal: asked for, or the JSON goes to stdout.
    pub fn is_quiet(&self) -> bool {
        self.quiet || self.json.as_deref() == Some("-")
    }
}

/// How long a periodic probe measures, what it counts as missed, and how it holds the CPU
/// awake (`rtlab timer`, `rtlab cyclic`): one definition; a command words the help of what
/// it counts (clap's `mut_arg`: the timer's `--count` also answers to cyclictest's `--loops`).
#[derive(Args, Debug, Clone, Default)]
pub struct MeasureArgs {
    /// How long to measure [30s unless --count is given].
    #[arg(long, short = 'D')]
    pub duration: Option<String>,
    /// Cycles (slots) per thread.
    #[arg(long, short = 'l')]
    pub count: Option<i64>,
    /// Response times above this are missed deadlines [the interval].
    #[arg(long)]
    pub deadline: Option<String>,
    /// Width of a max-over-time window [1s].
    #[arg(long)]
    pub window: Option<String>,
    /// Hold /dev/cpu_dma_latency at this many us during the run (0 = no deep C-states).
    #[arg(long, num_args = 0..=1, default_missing_value = "0", value_name = "US")]
    pub cpu_dma_latency: Option<i64>,
}

impl MeasureArgs {
    /// Put the flags given into the probe's table.
    pub fn fill(&self, t: &mut rtlab_lab::config::FlagTable) {
        t.str("duration", &self.duration)
            .int("count", self.count)
            .str("deadline", &self.deadline)
            .str("window", &self.window)
            .int("cpu_dma_latency", self.cpu_dma_latency);
    }
}

/// Where a DDS participant discovers (`rtlab observe`, `rtlab pubsub`'s DDS transports): one
/// definition; a command words the help for what it does with them (clap's `mut_arg`).
#[derive(Args, Debug, Clone, Default)]
pub struct DdsNetworkArgs {
    /// The DDS domain id (ROS_DOMAIN_ID) [0].
    #[arg(long)]
    pub domain: Option<i64>,
    /// The interface (name or address) to discover on [loopback only].
    #[arg(long, value_name = "IF|ADDR")]
    pub interface: Option<String>,
    /// Unicast discovery peers (none: multicast on --interface).
    #[arg(long, value_delimiter = ',', value_name = "ADDR")]
    pub peer: Vec<String>,
}

impl DdsNetworkArgs {
    /// Put the flags given into the probe's table.
    pub fn fill(&self, t: &mut rtlab_lab::config::FlagTable) {
        t.int("domain", self.domain).str("interface", &self.interface).list("peer", &self.peer);
    }
}
