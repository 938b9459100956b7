//! `rtlab cyclic`: flags -> the cyclic probe's configuration (the same struct as a
//! scenario's `kind = "cyclic"`), run, print the response time, wake-up latency and job
//! duration per thread, write JSON.

use super::stop_flag;
use crate::args::{EvidenceArgs, MeasureArgs, RtArgs};
use crate::document::{check_writable, write_json};
use clap::Args;
use rtlab_core::units::{format_duration_exact, Nanos};
use rtlab_lab::config::{from_table, FlagTable};
use rtlab_lab::probes::cyclic::{self, CyclicProbeConfig};
use rtlab_report::summary;
use std::io::IsTerminal;

#[derive(Args, Debug)]
pub struct CyclicArgs {
    /// Period of the grid [1ms].
    #[arg(long, short = 'i')]
    pub interval: Option<String>,
    /// Calibrated computation per cycle, e.g. 200us [200us].
    #[arg(long)]
    pub work: Option<String>,
    /// A memory walk per cycle instead of computation: a buffer of this size (e.g. 4mib).
    #[arg(long, conflicts_with = "work")]
    pub walk: Option<String>,
    /// Bytes between two touches of the walk [64].
    #[arg(long, requires = "walk")]
    pub stride: Option<String>,
    /// Measuring threads [1].
    #[arg(long, short = 't')]
    pub threads: Option<i64>,
    #[command(flatten)]
    pub measure: MeasureArgs,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub evidence: EvidenceArgs,
    #[command(flatten)]
    pub out: crate::args::OutputArgs,
    #[command(flatten)]
    pub gates: crate::args::GateArgs,
}

impl CyclicArgs {
    /// The flags given, as the probe's table (every default lives in the configuration).
    pub fn table(&self) -> toml::Table {
        let mut t = FlagTable::default();
        t.str("interval", &self.interval)
            .str("work", &self.work)
            .str("walk", &self.walk)
            .str("stride", &self.stride)
            .int("threads", self.threads);
        self.measure.fill(&mut t);
        self.rt.fill(&mut t);
        t.take()
    }
}

pub fn run(a: CyclicArgs) -> anyhow::Result<u8> {
    let cfg: CyclicProbeConfig =
        from_table(&a.table()).map_err(|e| anyhow::anyhow!(e.cli_text()))?;
    let profile = super::command_profile(&a.rt)?;
    let base = super::rt_base(profile.as_ref(), cyclic::default_rt());
    let engine = cfg.engine(&cfg.rt.over(&base)).map_err(|e| anyhow::anyhow!(e.cli_text()))?;
    if let Some(p) = &a.out.json {
        check_writable(p, "--json")?;
    }
    let stop = stop_flag()?;
    let quiet = a.out.is_quiet();
    let gates = a.gates.parse()?;
    let headline = format!(
        "rtlab cyclic: {} thread{}, every {}, job {}, {} {}",
        engine.threads,
        if engine.threads == 1 { "" } else { "s" },
        format_duration_exact(Nanos(engine.interval_ns)),
        engine.work.describe(),
        engine.rt.policy,
        engine.rt.priority
    );
    let mut say = super::Say::new("cyclic", 0, quiet, |_| headline.clone());
    let command = super::probe_command(
        Some("rtlab cyclic"),
        profile.as_ref(),
        base,
        stop,
        a.evidence.options()?,
    );
    let (doc, outcome) = command
        .run(&cfg, &mut say, |ctx| cyclic::measure(&cfg, ctx).map(|(d, o, _)| (d, o)))
        .map_err(super::lab_error)?;
    if let Some(p) = &a.out.json {
        write_json(&doc, p)?;
    }
    if !quiet {
        let color = std::io::stdout().is_terminal();
        print!("{}", summary::cyclic::render(&doc, color));
        for (i, t) in outcome.threads.iter().enumerate() {
            if let Some(c) = &t.calibration {
                println!("thread{i}: calibration {c:?}");
            }
        }
        for w in &doc.warnings {
            eprintln!("warning: {}", w.message);
        }
    }
    super::print_evidence(doc.evidence.as_ref(), &doc.streams, quiet);
    super::print_cost(&doc, quiet);
    Ok(super::judge(&doc, &gates, quiet))
}
