//! The command line: flags only. Turning flags into configs happens in `cmd/`.

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(name = "rtlab", version, about = "Measure, explain and improve the real-time behaviour of robot communications on Linux", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Timer wake-up latency (like cyclictest), ROS-style timer error and cycle jitter.
    Timer(TimerArgs),
    /// UDP round trips to a reflector (S1): `udp reflect` and `udp ping`.
    Udp(crate::cmd::udp::UdpArgs),
    /// Two hosts on one machine: network namespaces joined by veth.
    Netns(crate::cmd::netns::NetnsArgs),
    /// Message latency through real middleware transports (S2, S3).
    Pubsub(crate::cmd::pubsub::PubsubArgs),
    /// The loads on their own (stress-ng, iperf3, a command).
    Load(crate::cmd::load::LoadArgs),
    /// Check, apply, show and restore real-time profiles.
    Tune(crate::cmd::tune::TuneArgs),
    /// Run a scenario or a preset (`rtlab run quick` is the main job).
    Run(crate::cmd::run::RunArgs),
    /// List the stored runs.
    Runs(crate::cmd::runs::RunsArgs),
    /// Render stored runs in the terminal or as one HTML file.
    Report(crate::cmd::report::ReportArgs),
    /// Compare two stored runs case by case; exit 1 on a regression beyond a threshold.
    Compare(crate::cmd::compare::CompareArgs),
    /// Export stored runs to JSON or CSV.
    Export(crate::cmd::export::ExportArgs),
    /// A cyclic job (S2's control loop): wake-up latency, job duration, response time.
    Cyclic(crate::cmd::cyclic::CyclicArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(crate::cmd::gen::CompletionsArgs),
    /// Print the man page (roff) generated from this command line.
    Man(crate::cmd::gen::ManArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyArg {
    Fifo,
    Rr,
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
    /// Scheduling policy of the measuring threads [timer, udp, cyclic: fifo; pubsub: other].
    #[arg(long, value_enum)]
    pub policy: Option<PolicyArg>,
    /// Priority (fifo/rr: 1-99 [80], other: 0). A comma list gives one per thread (timer).
    #[arg(long, short = 'p', value_delimiter = ',')]
    pub priority: Vec<i32>,
    /// CPUs to pin to (e.g. 0,1 or 2-3); threads take them in turn. Default: not pinned.
    #[arg(long)]
    pub cpus: Option<String>,
    /// Do not lock memory (mlockall is on by default).
    #[arg(long)]
    pub no_mlockall: bool,
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

#[derive(Args, Debug)]
pub struct TimerArgs {
    /// Number of measuring threads [1].
    #[arg(long, short = 't')]
    pub threads: Option<i64>,
    /// Interval with a unit (250us, 1ms) [1ms]. A comma list gives one per thread.
    #[arg(long, short = 'i', value_delimiter = ',')]
    pub interval: Vec<String>,
    /// Added to the interval of each further thread (cyclictest -d), e.g. 500us.
    #[arg(long, short = 'd')]
    pub distance: Option<String>,
    /// How the timer waits [abs]: abs (clock_nanosleep TIMER_ABSTIME on a grid) or rel
    /// (relative sleeps to the expected time, like a ROS timer; signed error).
    #[arg(long, value_parser = ["abs", "rel"])]
    pub mode: Option<String>,
    #[command(flatten)]
    pub rt: RtArgs,
    /// How long to measure (e.g. 30s, 5m) [30s unless --loops is given].
    #[arg(long, short = 'D')]
    pub duration: Option<String>,
    /// How many slots per thread (skipped slots count: the run ends on time).
    #[arg(long, short = 'l', alias = "count")]
    pub loops: Option<i64>,
    /// Samples above this are missed deadlines [the thread's interval].
    #[arg(long)]
    pub deadline: Option<String>,
    /// Width of a max-over-time window [1s].
    #[arg(long)]
    pub window: Option<String>,
    /// Hold /dev/cpu_dma_latency at this many us during the run (0 = no deep C-states).
    #[arg(long, num_args = 0..=1, default_missing_value = "0", value_name = "US")]
    pub cpu_dma_latency: Option<i64>,
    /// Write the result document (JSON); - for stdout.
    #[arg(long)]
    pub json: Option<String>,
    /// Write a cyclictest -h format histogram (1 us bins) to this file.
    #[arg(long)]
    pub histogram_file: Option<String>,
    /// Range of the cyclictest-format histogram (its -h N, as a duration) [1000us].
    #[arg(long)]
    pub histogram_max: Option<String>,
    /// Stream every raw sample (CSV: stream,index,at_ns,value_ns) to this file.
    #[arg(long)]
    pub raw_file: Option<String>,
    /// Print a terminal histogram of each thread.
    #[arg(long)]
    pub histogram: bool,
    /// Print nothing but errors (the JSON still goes where --json says).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    #[command(flatten)]
    pub evidence: EvidenceArgs,
}

impl TimerArgs {
    /// The flags given, as the probe's table (every default lives in the configuration).
    pub fn table(&self) -> toml::Table {
        let mut t = rtlab_lab::config::FlagTable::default();
        t.int("threads", self.threads)
            .list("interval", &self.interval)
            .str("distance", &self.distance)
            .str("mode", &self.mode)
            .str("duration", &self.duration)
            .int("count", self.loops)
            .str("deadline", &self.deadline)
            .str("window", &self.window)
            .int("cpu_dma_latency", self.cpu_dma_latency)
            .str("histogram_max", &self.histogram_max);
        self.rt.fill(&mut t);
        t.take()
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
            let ns = crate::cmd::duration_flag("--trace-on-spike", t)?;
            if ns <= 0 {
                anyhow::bail!("--trace-on-spike {t}: must be above zero");
            }
            o.trace_on_spike_ns = Some(ns);
        }
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    //! The CLI and scenarios give one set of defaults: no flag carries a default of its own
    //! (the probe's configuration holds them all), and a probe's configuration from no flags
    //! equals the one a scenario's `[[probe]]` table with no keys gives.
    use super::{Cli, Command};
    use clap::Parser;

    fn table_of(args: &[&str]) -> toml::Table {
        let cli = Cli::try_parse_from(std::iter::once("rtlab").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        match cli.command {
            Command::Timer(a) => a.table(),
            Command::Cyclic(a) => a.table(),
            Command::Pubsub(a) => a.table(),
            Command::Udp(u) => match u.command {
                crate::cmd::udp::UdpCommand::Ping(p) => p.table(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn no_flag_has_a_default_of_its_own() {
        for args in [&["timer"][..], &["cyclic"], &["pubsub"], &["udp", "ping", "--pair"]] {
            assert!(table_of(args).is_empty(), "{args:?} gave {:?}", table_of(args));
        }
    }

    #[test]
    fn cli_and_scenario_defaults_are_the_same_for_every_probe() {
        for kind in rtlab_lab::probe::PROBES {
            let cli: &[&str] = match kind.kind {
                "timer" => &["timer", "--loops", "100"],
                "cyclic" => &["cyclic", "--count", "100"],
                "pubsub" => &["pubsub", "--count", "100"],
                "udp" => &["udp", "ping", "--pair", "--count", "100"],
                other => panic!("a new probe ({other}): add its flags here"),
            };
            let from_flags = (kind.parse)(&table_of(cli)).unwrap().config();
            let text = format!("name = \"d\"\ncount = 100\n[[probe]]\nkind = \"{}\"\n", kind.kind);
            let s = rtlab_lab::scenario::Scenario::parse("d.toml", &text, 1.0).unwrap();
            let from_scenario = s.cases()[0].config.config();
            assert_eq!(from_flags, from_scenario, "{}", kind.kind);
        }
    }
}
