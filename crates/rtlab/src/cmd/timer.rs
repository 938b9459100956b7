//! `rtlab timer`: flags -> TimerConfig, run, print the tables, write JSON and histograms.

use super::{cpus_flag, duration_flag, stop_flag};
use crate::cli::{ModeArg, PolicyArg, TimerArgs};
use crate::document::{check_writable, new_document, write_json, write_text};
use crate::progress::Progress;
use anyhow::Context;
use rtlab_core::cyclictest::{self, ThreadFooter};
use rtlab_core::render::{stats_table, terminal_histogram, Row};
use rtlab_core::schema::ResultDocument;
use rtlab_core::units::{format_duration_exact, Nanos};
use rtlab_core::warnings::{Warn, MIN_SAMPLES_FOR_TAIL};
use rtlab_probes::timer::TimerMode;
use rtlab_probes::timer_run::{self, TimerConfig, TimerError, TimerThreadConfig};
use std::io::{IsTerminal, Write};

/// Turn the flags into a config (the one place where flags become a TimerConfig).
pub fn config_of(a: &TimerArgs) -> anyhow::Result<TimerConfig> {
    if a.threads == 0 {
        anyhow::bail!("--threads 0: at least one thread is needed");
    }
    let mut intervals = Vec::new();
    for v in &a.interval {
        let ns = duration_flag("--interval", v)?;
        if ns <= 0 {
            anyhow::bail!("--interval {v}: must be above zero");
        }
        intervals.push(ns);
    }
    if intervals.len() > 1 && intervals.len() != a.threads {
        anyhow::bail!(
            "--interval: {} values for {} threads (give one, or one per thread)",
            intervals.len(),
            a.threads
        );
    }
    let distance =
        a.distance.as_deref().map(|d| duration_flag("--distance", d)).transpose()?.unwrap_or(0);
    if a.rt.priority.len() > 1 && a.rt.priority.len() != a.threads {
        anyhow::bail!(
            "--priority: {} values for {} threads (give one, or one per thread)",
            a.rt.priority.len(),
            a.threads
        );
    }
    let cpus = a.rt.cpus.as_deref().map(cpus_flag).transpose()?;
    let deadline = a.deadline.as_deref().map(|d| duration_flag("--deadline", d)).transpose()?;
    let policy = a.rt.policy.name().to_string();
    let mut threads = Vec::new();
    for i in 0..a.threads {
        let interval_ns =
            if intervals.len() == 1 { intervals[0] + distance * i as i64 } else { intervals[i] };
        let priority = if a.rt.priority.len() == 1 { a.rt.priority[0] } else { a.rt.priority[i] };
        // other has only priority 0; the default 80 means "the default" there
        let priority =
            if a.rt.policy == PolicyArg::Other && a.rt.priority == [80] { 0 } else { priority };
        let p = rtlab_sys::sched::Policy::parse(&policy).expect("clap checked the policy");
        p.check_priority(priority).map_err(|e| anyhow::anyhow!("--priority: {e}"))?;
        threads.push(TimerThreadConfig {
            interval_ns,
            policy: policy.clone(),
            priority,
            cpu: cpus.as_ref().map(|c| c[i % c.len()]),
            deadline_ns: deadline.unwrap_or(interval_ns),
        });
    }
    let duration_ns = match (&a.duration, a.loops) {
        (Some(d), _) => {
            let ns = duration_flag("--duration", d)?;
            if ns <= 0 {
                anyhow::bail!("--duration {d}: must be above zero");
            }
            Some(ns)
        }
        (None, Some(_)) => None,
        (None, None) => Some(30_000_000_000),
    };
    if a.loops == Some(0) {
        anyhow::bail!("--loops 0: must be at least 1");
    }
    let window_ns = duration_flag("--window", &a.window)?;
    if window_ns <= 0 {
        anyhow::bail!("--window {}: must be above zero", a.window);
    }
    let histogram_us_buckets = match &a.histogram_file {
        Some(_) => {
            let ns = duration_flag("--histogram-max", &a.histogram_max)?;
            if ns < 1_000 {
                anyhow::bail!("--histogram-max {}: must be at least 1us", a.histogram_max);
            }
            Some((ns / 1_000) as usize)
        }
        None => None,
    };
    if let Some(v) = a.cpu_dma_latency {
        if v < 0 {
            anyhow::bail!("--cpu-dma-latency {v}: must be 0 or more microseconds");
        }
    }
    Ok(TimerConfig {
        mode: match a.mode {
            ModeArg::Abs => TimerMode::Abs,
            ModeArg::Rel => TimerMode::Rel,
        },
        threads,
        duration_ns,
        loops: a.loops,
        window_ns,
        mlockall: !a.rt.no_mlockall,
        cpu_dma_latency_us: a.cpu_dma_latency,
        stack_prefault_bytes: 256 * 1024,
        histogram_us_buckets,
        raw_file: a.raw_file.clone(),
    })
}

pub fn run(a: TimerArgs) -> anyhow::Result<u8> {
    let cfg = config_of(&a)?;
    for (path, flag) in
        [(&a.json, "--json"), (&a.histogram_file, "--histogram-file"), (&a.raw_file, "--raw-file")]
    {
        if let Some(p) = path {
            check_writable(p, flag)?;
        }
    }
    let mut ev_opts = a.evidence.options(cfg.window_ns, "rtlab-timer")?;
    ev_opts.cpus = cfg.threads.iter().filter_map(|t| t.cpu).collect();
    ev_opts.sources = (0..cfg.threads.len()).map(|i| format!("thread{i}")).collect();
    ev_opts.planned = cfg.duration_ns.map(|d| std::time::Duration::from_nanos(d as u64));
    let stop = stop_flag()?;
    // the tracer's tracefs changes are journaled and undone in `finish` (or on drop)
    let trace_host = rtlab_tune::host::RealHost::new();
    let evidence = crate::evidence::EvidenceRun::start(&trace_host, &ev_opts)?;
    let started = std::time::SystemTime::now();
    let env = rtlab_sys::env::detect(std::path::Path::new("/"));
    let quiet = a.quiet || a.json.as_deref() == Some("-");
    if !quiet {
        println!("{}", headline(&cfg));
    }
    let progress = Progress::new(0, "timer", quiet);
    let outcome = timer_run::run_with_spike(&cfg, stop, evidence.hook(), |done, planned| {
        progress.set_len_once(planned);
        progress.set(done);
    });
    progress.finish();
    let outcome = match outcome {
        Ok(o) => o,
        Err(TimerError::Sys(e)) => {
            return Err(anyhow::anyhow!("{e}")).context("--policy/--priority/--cpus")
        }
        Err(e) => return Err(e.into()),
    };

    let mut doc = document(&cfg, &outcome, env, started)?;
    doc.evidence = Some(evidence.finish(&doc.streams));

    // outputs that keep what was measured come first
    if let Some(path) = &a.json {
        write_json(&doc, path)?;
    }
    if let Some(path) = &a.histogram_file {
        let hists: Vec<_> =
            outcome.threads.iter().filter_map(|t| t.latency.us_histogram.as_ref()).collect();
        let footers: Vec<_> = outcome
            .threads
            .iter()
            .map(|t| {
                let s = t.latency.summary();
                ThreadFooter {
                    min_us: s.min_ns.unwrap_or(0) / 1_000,
                    avg_us: s.mean_ns.unwrap_or(0) / 1_000,
                    max_us: s.max_ns.unwrap_or(0) / 1_000,
                }
            })
            .collect();
        write_text(&cyclictest::render(&hists, &footers), path)
            .with_context(|| format!("--histogram-file {path}"))?;
    }
    if !quiet {
        let color = std::io::stdout().is_terminal();
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", environment_line(&doc))?;
        writeln!(out)?;
        let mains: Vec<_> = doc.streams.iter().filter(|s| !s.name.ends_with(".jitter")).collect();
        writeln!(out, "{} ({})", cfg.mode.metric().replace('_', " "), cfg.mode.definition())?;
        let rows: Vec<Row> =
            mains.iter().map(|s| Row { label: s.name.clone(), summary: &s.stats }).collect();
        write!(out, "{}", stats_table(&rows, color))?;
        writeln!(out)?;
        writeln!(out, "cycle jitter (P_k = t_(k+1) - t_k - T)")?;
        let jit: Vec<_> = doc.streams.iter().filter(|s| s.name.ends_with(".jitter")).collect();
        let rows: Vec<Row> =
            jit.iter().map(|s| Row { label: s.name.clone(), summary: &s.stats }).collect();
        write!(out, "{}", stats_table(&rows, color))?;
        for s in &mains {
            if let (Some(max), Some(idx), Some(at)) =
                (s.stats.max_ns, s.stats.max_index, s.stats.max_at_ns)
            {
                writeln!(
                    out,
                    "{}: max {} us at sample {} ({} after start)",
                    s.name,
                    rtlab_core::units::us_1(max),
                    idx,
                    Nanos(at)
                )?;
            }
        }
        if a.histogram {
            for s in &mains {
                writeln!(out, "\n{} histogram", s.name)?;
                write!(out, "{}", terminal_histogram(&s.histogram, 20, 40))?;
            }
        }
        for w in &doc.warnings {
            eprintln!("warning: {}", w.message);
        }
    }
    crate::evidence::print(doc.evidence.as_ref(), &doc.streams, quiet);
    Ok(0)
}

/// The result document of a timer run, with its warnings.
pub fn document(
    cfg: &TimerConfig,
    outcome: &timer_run::TimerOutcome,
    env: rtlab_core::schema::Environment,
    started: std::time::SystemTime,
) -> anyhow::Result<ResultDocument> {
    let mut doc: ResultDocument = new_document("timer", started, env, serde_json::to_value(cfg)?);
    doc.duration_ns = outcome.duration_ns;
    doc.interrupted = outcome.interrupted;
    doc.environment.memory_locked = matches!(outcome.memory_lock, Some(Ok(())));
    doc.environment.cpu_dma_latency_us =
        outcome.cpu_dma_latency.as_ref().and_then(|r| r.as_ref().ok().copied());
    doc.streams = outcome.streams(cfg);

    let mut warns = crate::document::process_warnings(
        &doc.environment,
        &outcome.memory_lock,
        cfg.threads.iter().any(|t| t.policy == "other"),
    );
    if let Some(Err(why)) = &outcome.cpu_dma_latency {
        warns.push(Warn::CpuDmaLatencyUnavailable { why: why.clone() });
    }
    let fewest = outcome.threads.iter().map(|t| t.latency.count()).min().unwrap_or(0);
    if fewest < MIN_SAMPLES_FOR_TAIL {
        warns.push(Warn::RunTooShort { samples: fewest, wanted: MIN_SAMPLES_FOR_TAIL });
    }
    if outcome.raw_dropped > 0 {
        warns.push(Warn::RawSamplesDropped { dropped: outcome.raw_dropped });
    }
    if outcome.interrupted {
        warns.push(Warn::Interrupted);
    }
    doc.warnings = warns.iter().map(|w| w.to_warning()).collect();

    Ok(doc)
}

fn headline(cfg: &TimerConfig) -> String {
    let t = &cfg.threads;
    let intervals: Vec<_> = t.iter().map(|t| format_duration_exact(Nanos(t.interval_ns))).collect();
    let length = match (cfg.duration_ns, cfg.loops) {
        (Some(d), Some(l)) => format!("{} or {l} loops", format_duration_exact(Nanos(d))),
        (Some(d), None) => format_duration_exact(Nanos(d)),
        (None, Some(l)) => format!("{l} loops"),
        (None, None) => String::new(),
    };
    format!(
        "rtlab timer: {} thread{}, {} mode, {} {}, interval {}, {}",
        t.len(),
        if t.len() == 1 { "" } else { "s" },
        cfg.mode.name(),
        t[0].policy,
        t.iter().map(|t| t.priority.to_string()).collect::<Vec<_>>().join(","),
        intervals.join(","),
        length
    )
}

fn environment_line(doc: &ResultDocument) -> String {
    let e = &doc.environment;
    format!(
        "kernel {} (preempt {}{}), HZ {}, high-res timers {}, {}, cpuidle {}, cpu_dma_latency {}, memory {}",
        e.kernel_release,
        e.preemption_model,
        if e.preempt_dynamic { ", dynamic" } else { "" },
        e.hz.map(|h| h.to_string()).unwrap_or_else(|| "?".into()),
        match e.high_res_timers {
            Some(true) => "on",
            Some(false) => "off",
            None => "?",
        },
        e.virtualization.as_deref().map(|v| format!("virtualized ({v})")).unwrap_or_else(|| "bare metal".into()),
        e.cpuidle_driver.as_deref().unwrap_or("none"),
        e.cpu_dma_latency_us.map(|v| format!("held at {v}us")).unwrap_or_else(|| "not held".into()),
        if e.memory_locked { "locked" } else { "not locked" },
    )
}
