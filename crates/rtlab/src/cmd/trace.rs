//! `rtlab trace -- COMMAND...`: a ROS 2 application's own messages, through rtlab's
//! tracepoint interposer preloaded into every process the command starts (no rebuild, no
//! LTTng): the graph with each edge's latency and losses, the chains hop by hop, the
//! callbacks where the client library reports them, and the kernel's windows.

use clap::Args;
use rtlab_lab::config::{from_table, FlagTable};
use rtlab_lab::probes::trace::{self, TraceProbeConfig};

#[derive(Args, Debug)]
pub struct TraceArgs {
    /// Stop the application after this long [when it ends].
    #[arg(long, short = 'D')]
    pub duration: Option<String>,
    /// A chain of topics to follow, e.g. /scan,/filtered,/cmd_vel (repeatable) [every chain
    /// the graph and the timing imply].
    #[arg(long, value_name = "TOPICS")]
    pub chain: Vec<String>,
    /// A topic's or a chain's deadline, e.g. /scan=20ms or /scan,/cmd_vel=50ms (repeatable)
    /// [the publisher's median period].
    #[arg(long, value_name = "TOPIC=DURATION")]
    pub deadline: Vec<String>,
    /// Trace a process that runs already, by its pid (repeatable): its tracepoints through
    /// uprobes (root), instead of a COMMAND.
    #[arg(long, value_name = "PID", conflicts_with = "command")]
    pub pid: Vec<i64>,
    /// Trace a far side's application too, by the agent there, joined through the clock
    /// offset measured over the link: ssh:[USER@]HOST[:PORT] (rtlab there) or netns:NAME.
    #[arg(long, value_name = "SPEC")]
    pub far: Option<String>,
    /// The far side's application, one command line run there (with --far).
    #[arg(long, value_name = "COMMAND", requires = "far")]
    pub far_command: Option<String>,
    /// A process that runs on the far side already, by its pid there (repeatable; with --far).
    #[arg(long, value_name = "PID", requires = "far", conflicts_with = "far_command")]
    pub far_pid: Vec<i64>,
    /// Each process's ring, in 64-byte slots (a power of two) [65536].
    #[arg(long)]
    pub slots: Option<u64>,
    /// Width of a max-over-time window [1s].
    #[arg(long)]
    pub window: Option<String>,
    /// Write the result document as JSON (- for stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    #[command(flatten)]
    pub evidence: crate::args::EvidenceArgs,
    /// Print only errors.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// The application: a program and its arguments (a launch, a script that starts
    /// several).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

impl TraceArgs {
    /// The flags given, as the probe's table (every default lives in the configuration).
    pub fn table(&self) -> toml::Table {
        let mut t = FlagTable::default();
        t.list("command", &self.command);
        for (key, pids) in [("pid", &self.pid), ("far_pid", &self.far_pid)] {
            if !pids.is_empty() {
                let pids = pids.iter().map(|&p| toml::Value::Integer(p)).collect();
                t.0.insert(key.into(), toml::Value::Array(pids));
            }
        }
        t.str("far", &self.far).str("far_command", &self.far_command);
        t.str("duration", &self.duration)
            .list("chain", &self.chain)
            .list("deadline", &self.deadline)
            .int("slots", self.slots.map(|s| s.min(i64::MAX as u64) as i64))
            .str("window", &self.window);
        t.take()
    }
}

pub fn run(a: TraceArgs) -> anyhow::Result<u8> {
    let cfg: TraceProbeConfig =
        from_table(&a.table()).map_err(|e| anyhow::anyhow!(e.cli_text()))?;
    if let Some(p) = &a.json {
        crate::document::check_writable(p, "--json")?;
    }
    let stop = super::stop_flag()?;
    let here = if !cfg.traces_here() {
        "nothing here".to_string()
    } else if cfg.pid.0.is_empty() {
        cfg.argv().join(" ")
    } else {
        let p: Vec<String> = cfg.pid.0.iter().map(|p| format!("pid {p}")).collect();
        format!("{} (uprobes)", p.join(", "))
    };
    let there = match &cfg.far {
        Some(f) if cfg.far_pid.0.is_empty() => {
            format!("; far side {f}: {}", cfg.far_argv().join(" "))
        }
        Some(f) => {
            let p: Vec<String> = cfg.far_pid.0.iter().map(|p| format!("pid {p}")).collect();
            format!("; far side {f}: {} (uprobes)", p.join(", "))
        }
        None => String::new(),
    };
    let headline = format!(
        "rtlab trace: {here}{there}{}",
        cfg.duration
            .map(|d| format!(
                " for {}",
                rtlab_core::units::format_duration_exact(rtlab_core::units::Nanos(d.0))
            ))
            .unwrap_or_default()
    );
    let mut say = super::Say::new("trace", 0, a.quiet, |_| headline.clone());
    // no machine lock: a trace changes nothing the lock guards (its rings are its own, and
    // --pid's uprobes are journaled in a journal of their own, which refuses a second live
    // user), and the application it traces may be an rtlab that takes the lock itself
    let command = super::probe_command(
        None,
        None,
        rtlab_core::rt::RtSettings::normal(),
        stop,
        a.evidence.options()?,
    );
    let doc =
        command.run(&cfg, &mut say, |ctx| trace::measure(&cfg, ctx)).map_err(super::lab_error)?;
    if let Some(p) = &a.json {
        crate::document::write_json(&doc, p)?;
    }
    if !a.quiet && a.json.as_deref() != Some("-") {
        print!(
            "{}",
            rtlab_report::trace::render(&doc, std::io::IsTerminal::is_terminal(&std::io::stdout()))
        );
        for w in &doc.warnings {
            eprintln!("warning: {}", w.message);
        }
    }
    if !a.quiet && doc.far.is_some() && a.json.as_deref() != Some("-") {
        print!("\n{}", super::far_lines(&doc));
    }
    super::print_evidence(doc.evidence.as_ref(), &doc.streams, a.quiet);
    Ok(0)
}
