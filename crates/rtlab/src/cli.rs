//! The command line: flags only. Turning flags into configs happens in `cmd/`.

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "rtlab", version, about = "Measure, explain and improve the real-time behaviour of robot communications on Linux", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Timer wake-up latency (like cyclictest), ROS-style timer error and cycle jitter.
    #[command(after_help = crate::examples::TIMER)]
    Timer(crate::cmd::timer::TimerArgs),
    /// UDP round trips to a reflector (S1): `udp reflect` and `udp ping`.
    #[command(after_help = crate::examples::UDP)]
    Udp(crate::cmd::udp::UdpArgs),
    /// Two hosts on one machine: network namespaces joined by veth.
    #[command(after_help = crate::examples::NETNS)]
    Netns(crate::cmd::netns::NetnsArgs),
    /// Message latency through real middleware transports (S2, S3).
    #[command(after_help = crate::examples::PUBSUB)]
    Pubsub(Box<crate::cmd::pubsub::PubsubArgs>),
    /// The loads on their own (stress-ng, iperf3, a command).
    #[command(after_help = crate::examples::LOAD)]
    Load(crate::cmd::load::LoadArgs),
    /// Check, apply, show and restore real-time profiles.
    #[command(after_help = crate::examples::TUNE)]
    Tune(crate::cmd::tune::TuneArgs),
    /// Run a scenario or a preset (`rtlab run quick` is the main job).
    #[command(after_help = crate::examples::RUN)]
    Run(crate::cmd::run::RunArgs),
    /// List the stored runs.
    #[command(after_help = crate::examples::RUNS)]
    Runs(crate::cmd::runs::RunsArgs),
    /// Render stored runs in the terminal or as one HTML file.
    #[command(after_help = crate::examples::REPORT)]
    Report(crate::cmd::report::ReportArgs),
    /// Compare two stored runs case by case; exit 1 on a regression beyond a threshold.
    #[command(after_help = crate::examples::COMPARE)]
    Compare(crate::cmd::compare::CompareArgs),
    /// A read-only web dashboard over a store: runs, reports, trends, two runs or two hosts side by side.
    #[command(after_help = crate::examples::SERVE)]
    Serve(crate::cmd::serve::ServeArgs),
    /// Export stored runs to JSON or CSV.
    #[command(after_help = crate::examples::EXPORT)]
    Export(crate::cmd::export::ExportArgs),
    /// Copy runs of the local store into a team's store (PostgreSQL); a run is stored once.
    #[command(after_help = crate::examples::PUSH)]
    Push(crate::cmd::push::PushArgs),
    /// A cyclic job (S2's control loop): wake-up latency, job duration, response time.
    #[command(after_help = crate::examples::CYCLIC)]
    Cyclic(crate::cmd::cyclic::CyclicArgs),
    /// What the machine steals from a busy thread, per CPU: noise gaps, stolen time per window.
    #[command(after_help = crate::examples::NOISE)]
    Noise(crate::cmd::noise::NoiseArgs),
    /// The graph of a live DDS / ROS 2 domain: participants, topics, types, QoS.
    #[command(after_help = crate::examples::OBSERVE)]
    Observe(crate::cmd::observe::ObserveArgs),
    /// A ROS 2 application's own messages, without rebuilding it: graph, edges, chains.
    #[command(after_help = crate::examples::TRACE)]
    Trace(crate::cmd::trace::TraceArgs),
    /// Always on: a timer canary, the topics' verdicts, each new worst case explained, OpenMetrics at /metrics.
    #[command(after_help = crate::examples::MONITOR)]
    Monitor(crate::cmd::monitor::MonitorArgs),
    /// The far side of a run, over ssh or in a network namespace (started by `--far`; not
    /// for a person to type, so not listed).
    #[command(hide = true)]
    Agent(crate::cmd::agent::AgentArgs),
    /// One roscpp node with one timer, in a process of its own (started by `rtlab timer --mode
    /// roscpp*`; not for a person to type, so not listed).
    #[command(hide = true)]
    RoscppNode(crate::cmd::roscpp_node::RoscppNodeArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(after_help = crate::examples::COMPLETIONS)]
    Completions(crate::cmd::gen::CompletionsArgs),
    /// Print the man page (roff) generated from this command line.
    #[command(after_help = crate::examples::MAN)]
    Man(crate::cmd::gen::ManArgs),
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
            Command::Timer(a) => a.table().unwrap(),
            Command::Cyclic(a) => a.table(),
            Command::Noise(a) => a.table(),
            Command::Pubsub(a) => a.table(),
            Command::Observe(a) => a.table(),
            Command::Trace(a) => a.table(),
            Command::Udp(u) => match u.command {
                crate::cmd::udp::UdpCommand::Ping(p) => p.table(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn no_flag_has_a_default_of_its_own() {
        for args in [
            &["timer"][..],
            &["cyclic"],
            &["noise"],
            &["pubsub"],
            &["udp", "ping", "--pair"],
            &["observe"],
        ] {
            assert!(table_of(args).is_empty(), "{args:?} gave {:?}", table_of(args));
        }
    }

    #[test]
    fn cli_and_scenario_defaults_are_the_same_for_every_probe() {
        for kind in rtlab_lab::registry::PROBES {
            let cli: &[&str] = match kind.kind {
                "timer" => &["timer", "--loops", "100"],
                "cyclic" => &["cyclic", "--count", "100"],
                "pubsub" => &["pubsub", "--count", "100"],
                "udp" => &["udp", "ping", "--pair", "--count", "100"],
                "observe" => &["observe", "--topic", "/x", "--duration", "10s"],
                "noise" => &["noise", "--duration", "10s"],
                "trace" => &["trace", "--duration", "10s", "--", "true"],
                other => panic!("a new probe ({other}): add its flags here"),
            };
            let from_flags = (kind.parse)(&table_of(cli)).unwrap().config();
            let text = if kind.kind == "noise" {
                "name = \"d\"\nduration = \"10s\"\n[[probe]]\nkind = \"noise\"\n".to_string()
            } else if kind.kind == "trace" {
                "name = \"d\"\nduration = \"10s\"\n[[probe]]\nkind = \"trace\"\ncommand = \"true\"\n"
                    .to_string()
            } else if kind.kind == "observe" {
                "name = \"d\"\nduration = \"10s\"\n[[probe]]\nkind = \"observe\"\ntopic = \"/x\"\n"
                    .to_string()
            } else {
                format!("name = \"d\"\ncount = 100\n[[probe]]\nkind = \"{}\"\n", kind.kind)
            };
            let s = rtlab_lab::scenario::Scenario::parse("d.toml", &text, 1.0).unwrap();
            let from_scenario = s.cases()[0].config.config();
            assert_eq!(from_flags, from_scenario, "{}", kind.kind);
        }
    }
}
