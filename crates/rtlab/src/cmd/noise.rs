//! `rtlab noise`: flags -> the noise probe's configuration (the same struct as a scenario's
//! `kind = "noise"`), run, print what was stolen per CPU and the gaps' distribution, write
//! JSON.

use super::stop_flag;
use crate::args::{EvidenceArgs, RtArgs};
use crate::document::{check_writable, write_json};
use clap::Args;
use rtlab_core::units::{format_duration_exact, Nanos};
use rtlab_lab::config::{from_table, FlagTable};
use rtlab_lab::probes::noise::{self, NoiseProbeConfig};
use rtlab_report::summary;
use std::io::IsTerminal;

#[derive(Args, Debug)]
#[command(
    mut_arg("cpus", |a| a.help(
        "CPUs to measure (e.g. 1 or 2-3): one busy thread pinned on each [every online CPU]"
    )),
    mut_arg("policy", |a| a.help("Scheduling policy of the busy threads [fifo]")),
)]
pub struct NoiseArgs {
    /// A gap between two clock reads above this is noise [1us].
    #[arg(long)]
    pub threshold: Option<String>,
    /// How long to measure [10s].
    #[arg(long, short = 'D')]
    pub duration: Option<String>,
    /// Width of a window: stolen time, longest gap and gap count per window [1s].
    #[arg(long)]
    pub window: Option<String>,
    /// Hold /dev/cpu_dma_latency at this many us during the run (0 = no deep C-states).
    #[arg(long, num_args = 0..=1, default_missing_value = "0", value_name = "US")]
    pub cpu_dma_latency: Option<i64>,
    /// The kernel's own noise tracer instead of the busy loop, where the kernel has it:
    /// osnoise (its workload thread per CPU; the kernel attributes each noise to an IRQ,
    /// softirq, thread or NMI) or hwlat (the hardware latency detector: one thread spinning
    /// with interrupts off half of each --window, a window on each CPU in turn; what it sees is
    /// what the kernel did not take: SMIs, firmware, the hypervisor). Run in a tracefs instance
    /// of rtlab's own; every tracefs setting written back after.
    #[arg(long)]
    pub tracer: Option<String>,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub evidence: EvidenceArgs,
    #[command(flatten)]
    pub out: crate::args::OutputArgs,
    #[command(flatten)]
    pub gates: crate::args::GateArgs,
}

impl NoiseArgs {
    /// The flags given, as the probe's table (every default lives in the configuration).
    pub fn table(&self) -> toml::Table {
        let mut t = FlagTable::default();
        t.str("threshold", &self.threshold)
            .str("duration", &self.duration)
            .str("window", &self.window)
            .int("cpu_dma_latency", self.cpu_dma_latency)
            .str("tracer", &self.tracer);
        self.rt.fill(&mut t);
        t.take()
    }
}

pub fn run(a: NoiseArgs) -> anyhow::Result<u8> {
    let cfg: NoiseProbeConfig =
        from_table(&a.table()).map_err(|e| anyhow::anyhow!(e.cli_text()))?;
    let profile = super::command_profile(&a.rt)?;
    let base = super::rt_base(profile.as_ref(), noise::default_rt());
    let engine = cfg.engine(&cfg.rt.over(&base)).map_err(|e| anyhow::anyhow!(e.cli_text()))?;
    if let Some(p) = &a.out.json {
        check_writable(p, "--json")?;
    }
    let stop = stop_flag()?;
    let quiet = a.out.is_quiet();
    let gates = a.gates.parse()?;
    let headline = if cfg.tracer.is_some() {
        format!(
            "rtlab noise: CPU{} {}, the kernel's {} tracer, noise above {}, {}",
            if engine.cpus.len() == 1 { "" } else { "s" },
            rtlab_lab::host::cpu_list(&engine.cpus),
            cfg.tracer.map(|t| t.name()).unwrap_or_default(),
            format_duration_exact(Nanos(engine.threshold_ns)),
            format_duration_exact(Nanos(engine.duration_ns)),
        )
    } else {
        format!(
            "rtlab noise: CPU{} {}, gaps above {}, {}, {} {}",
            if engine.cpus.len() == 1 { "" } else { "s" },
            rtlab_lab::host::cpu_list(&engine.cpus),
            format_duration_exact(Nanos(engine.threshold_ns)),
            format_duration_exact(Nanos(engine.duration_ns)),
            engine.rt.policy,
            engine.rt.priority
        )
    };
    let mut say = super::Say::new("noise", 0, quiet, |_| headline.clone());
    let command = super::probe_command(
        Some("rtlab noise"),
        profile.as_ref(),
        base,
        stop,
        a.evidence.options()?,
    );
    // the probe by kind: the document is all this command shows
    let doc = command.measure("noise", &a.table(), &mut say).map_err(super::lab_error)?;
    if let Some(p) = &a.out.json {
        write_json(&doc, p)?;
    }
    if !quiet {
        let color = std::io::stdout().is_terminal();
        print!("{}", summary::noise::render(&doc, color));
        for s in doc.streams.iter().filter(|s| s.metric == "noise_gap") {
            if let Some(a) = s.labels.get("attribution").filter(|a| !a.is_empty()) {
                println!("{}: the kernel's attribution (osnoise): {a}", s.name);
            }
            if s.labels.get("tracer").is_some_and(|t| t == "hwlat") {
                let l = |k: &str| s.labels.get(k).map(String::as_str).unwrap_or("?");
                println!(
                    "{}: hwlat: {} samples, {} gaps above the threshold counted in them, {} NMIs ({} ns), spinning {} us of each {} us window, mode {}",
                    s.name,
                    l("samples"),
                    l("count"),
                    l("nmi_count"),
                    l("nmi_total_ns"),
                    l("width_us"),
                    l("window_us"),
                    l("mode")
                );
            }
        }
        for w in &doc.warnings {
            eprintln!("warning: {}", w.message);
        }
    }
    super::print_evidence(doc.evidence.as_ref(), &doc.streams, quiet);
    Ok(super::judge(&doc, &gates, quiet))
}
