//! `rtlab tune check | apply PROFILE | restore | show`: check the machine, apply a real-time
//! profile (journaled, always put back), restore after a crash, list what is applied.

use super::{duration_flag, stop_flag};
use clap::{Args, Subcommand};
use rtlab_lab::tune::{self as lab, Status, Step, DEFAULT_JOURNAL};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

#[derive(Args, Debug)]
pub struct TuneArgs {
    #[command(subcommand)]
    pub command: TuneCommand,
}

/// Where the journal and the machine are (shared by every tune subcommand).
#[derive(Args, Debug, Clone)]
pub struct HostArgs {
    /// The journal file (every change is written there before it is made).
    #[arg(long, default_value = DEFAULT_JOURNAL)]
    pub journal: PathBuf,
    /// Act on a fake sysfs/procfs tree instead of this machine (for tests).
    #[arg(long, hide = true)]
    pub root: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum TuneCommand {
    /// How far this machine is from a real-time setup, and what to do (S2 Table 3 and more).
    Check {
        /// Write the checks as JSON to FILE (- for stdout).
        #[arg(long)]
        json: Option<String>,
        /// Measure the noise on each real-time CPU (the isolated ones, else every online CPU,
        /// one at a time) for this long: the row `noise` (0: not measured).
        #[arg(long, default_value = "1s", value_name = "DURATION")]
        noise: String,
        #[command(flatten)]
        host: HostArgs,
    },
    /// Apply a profile: no-rt, rt-normal, rt-affinities, rt-isolation, rt-kthreads, or one from --file.
    Apply(ApplyArgs),
    /// Put back everything a journal holds (after a kill -9 or a power cut).
    Restore {
        /// Restore even though the process that applied the profile still runs.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        host: HostArgs,
    },
    /// List what is applied now (from the journal) and whether it is still in force.
    Show {
        #[command(flatten)]
        host: HostArgs,
    },
    /// List the profiles and what each one sets.
    Profiles {
        /// A TOML file of user profiles to list too.
        #[arg(long)]
        file: Option<PathBuf>,
    },
}

#[derive(Args, Debug)]
pub struct ApplyArgs {
    /// The profile: a built-in name, a name from --file, or a profile file (`./my.toml`,
    /// `./lab.toml#NAME` for a file of several).
    pub profile: String,
    /// A TOML file with user profiles ([profile.NAME] tables).
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// Keep the profile applied this long (e.g. 10m), then restore; Ctrl-C restores earlier.
    #[arg(long)]
    pub hold: Option<String>,
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The CPU the real-time work gets (default: the last online CPU).
    #[arg(long)]
    pub rt_cpu: Option<usize>,
    /// The network interface whose IRQs and qdisc the profile sets (default: the default route's).
    #[arg(long)]
    pub nic: Option<String>,
    /// Network namespace of --nic (a test veth).
    #[arg(long)]
    pub netns: Option<String>,
    /// Processes (all their threads) that get the profile's application policy, priority and CPUs.
    #[arg(long, value_delimiter = ',')]
    pub pid: Vec<i32>,
    #[command(flatten)]
    pub host: HostArgs,
}

fn host_of(h: &HostArgs) -> anyhow::Result<Box<dyn rtlab_lab::host::Host>> {
    lab::host_of(h.root.as_deref()).map_err(super::lab_error)
}

pub fn run(a: TuneArgs) -> anyhow::Result<u8> {
    match a.command {
        TuneCommand::Check { json, noise, host } => check(json, &noise, &host),
        TuneCommand::Apply(a) => apply(a),
        TuneCommand::Restore { force, host } => restore(force, &host),
        TuneCommand::Show { host } => show(&host),
        TuneCommand::Profiles { file } => list_profiles(file.as_deref()),
    }
}

fn check(json: Option<String>, noise: &str, h: &HostArgs) -> anyhow::Result<u8> {
    // 0 (no unit needed for nothing) skips the measurement, as documented
    let noise_ns = if noise.trim() == "0" { 0 } else { duration_flag("--noise", noise)? };
    let host = host_of(h)?;
    if let Some(p) = &json {
        crate::document::check_writable(p, "--json")?;
    }
    // measured on this machine only (a fake tree has no CPUs to measure)
    let noise_ns = if h.root.is_none() { noise_ns } else { 0 };
    let stop = if noise_ns > 0 { stop_flag()? } else { Default::default() };
    let checks = lab::check(host.as_ref(), noise_ns, &stop).map_err(super::lab_error)?;
    let (pass, warn, fail) = lab::counts(&checks);
    if let Some(p) = &json {
        let doc = serde_json::json!({
            "schema_version": 1,
            "kind": "tune-check",
            "checks": checks,
            "summary": { "pass": pass, "warn": warn, "fail": fail },
        });
        crate::document::write_text(&(serde_json::to_string_pretty(&doc)? + "\n"), p)
            .map_err(|e| anyhow::anyhow!("--json {p}: {e}"))?;
        if p == "-" {
            return Ok(0);
        }
    }
    let mut out = std::io::stdout().lock();
    for c in &checks {
        writeln!(out, "{:<5} {:<34} {}", c.status.word(), c.title, c.found)?;
        if !c.remedy.is_empty() && c.status != Status::Pass {
            writeln!(out, "      -> {}", c.remedy)?;
        }
    }
    writeln!(out, "\n{pass} pass, {warn} warn, {fail} fail")?;
    Ok(0)
}

fn restore(force: bool, h: &HostArgs) -> anyhow::Result<u8> {
    let host = host_of(h)?;
    let mut failed = 0;
    let mut each = |path: &Path, r: &lab::RestoreReport| {
        for (what, outcome) in &r.restored {
            println!("restored  {what}  [{outcome}]");
        }
        for (what, why) in &r.failed {
            eprintln!("FAILED    {what}: {why}");
        }
        if r.failed.is_empty() {
            println!("{} changes put back; journal {} removed", r.restored.len(), path.display());
        }
        failed += r.failed.len();
    };
    let any =
        lab::restore(host.as_ref(), &h.journal, force, &mut each).map_err(super::lab_error)?;
    if !any {
        println!("nothing to restore ({} holds no pending change)", h.journal.display());
    }
    if failed > 0 {
        anyhow::bail!("{failed} changes could not be put back; the journal keeps them");
    }
    Ok(0)
}

fn show(h: &HostArgs) -> anyhow::Result<u8> {
    let host = host_of(h)?;
    let (applied, dma) = lab::show(host.as_ref(), &h.journal).map_err(super::lab_error)?;
    for a in &applied {
        let alive = if a.alive {
            "running"
        } else {
            "no longer running: `rtlab tune restore` puts it back"
        };
        println!(
            "applied by pid {} ({}, {alive}), {} changes ({}):",
            a.pid,
            a.what,
            a.changes.len(),
            a.path.display()
        );
        for (change, in_force) in &a.changes {
            println!("  {change}  [{in_force}]");
        }
    }
    if applied.is_empty() {
        println!("nothing applied by rtlab ({} holds no pending change)", h.journal.display());
    }
    if let Some(v) = dma {
        println!("/dev/cpu_dma_latency now: {v} us");
    }
    Ok(0)
}

fn list_profiles(file: Option<&Path>) -> anyhow::Result<u8> {
    let user = lab::user_profiles(file).map_err(super::lab_error)?;
    for (name, description) in lab::builtins() {
        println!("{name:<14} {description}");
    }
    for (name, p) in &user {
        println!(
            "{name:<14} {} (from {})",
            p.description,
            file.map(|f| f.display().to_string()).unwrap_or_default()
        );
    }
    Ok(0)
}

fn apply(a: ApplyArgs) -> anyhow::Result<u8> {
    let user = lab::user_profiles(a.file.as_deref()).map_err(super::lab_error)?;
    let prof = lab::find_profile(&a.profile, &user, a.file.is_some()).map_err(super::lab_error)?;
    let host = host_of(&a.host)?;
    let hold_ns = a.hold.as_deref().map(|h| duration_flag("--hold", h)).transpose()?;
    if hold_ns.is_some_and(|n| n <= 0) {
        anyhow::bail!("--hold {}: must be above zero", a.hold.as_deref().unwrap_or(""));
    }
    let place = lab::Where {
        rt_cpu: a.rt_cpu,
        nic: a.nic.clone(),
        netns: a.netns.clone(),
        pids: a.pid.clone(),
    };
    let target = lab::target(place, host.as_ref()).map_err(super::lab_error)?;
    let steps = lab::plan(&prof, &target, host.as_ref());
    println!("profile {}: {}", a.profile, prof.description);
    if a.dry_run {
        print_plan(&steps);
        println!("dry run: nothing changed");
        return Ok(0);
    }
    // the Ctrl-C flag first: a signal during the changes must not skip the restore
    let stop = stop_flag()?;
    let what = format!("rtlab tune apply {}", a.profile);
    let mut applying =
        lab::Applying::begin(host.as_ref(), &a.host.journal, &what).map_err(super::lab_error)?;
    let mut tally = std::collections::BTreeMap::<&str, usize>::new();
    for st in &steps {
        let o = applying.step(st);
        *tally.entry(o.status).or_default() += 1;
        println!("  {:<7} {}", o.status, o.what);
        for d in &o.detail {
            println!("          {d}");
        }
    }
    println!("{}", tally.iter().map(|(k, v)| format!("{v} {k}")).collect::<Vec<_>>().join(", "));
    let interrupted = if stop.load(Ordering::Relaxed) {
        true
    } else {
        match hold_ns {
            Some(ns) => {
                println!(
                    "holding for {} (Ctrl-C restores now); journal: {}",
                    a.hold.as_deref().unwrap_or(""),
                    a.host.journal.display()
                );
                wait(&stop, Some(ns))
            }
            None => {
                println!("holding until Ctrl-C; journal: {}", a.host.journal.display());
                wait(&stop, None)
            }
        }
    };
    let r = applying.restore();
    println!(
        "{}restored {} changes{}",
        if interrupted { "interrupted: " } else { "" },
        r.restored.len(),
        if r.failed.is_empty() {
            String::new()
        } else {
            format!(", {} FAILED (the journal keeps them: rtlab tune restore)", r.failed.len())
        }
    );
    for (w, why) in &r.failed {
        eprintln!("  not restored: {w}: {why}");
    }
    if !r.failed.is_empty() {
        anyhow::bail!(
            "{} changes could not be put back; {} keeps them",
            r.failed.len(),
            a.host.journal.display()
        );
    }
    Ok(0)
}

/// `--dry-run`: every step, what it will do (its alternatives, the first actions) or why not.
fn print_plan(steps: &[Step]) {
    for st in steps {
        match &st.skip {
            Some(why) => println!("  skip  {} ({why})", st.what),
            None => {
                println!("  will  {}", st.what);
                for (i, (label, acts)) in st.alternatives.iter().enumerate() {
                    if !label.is_empty() {
                        println!("        {}{label}", if i == 0 { "" } else { "else " });
                    }
                    for act in acts.iter().take(6) {
                        println!("          {}", act.describe());
                    }
                    if acts.len() > 6 {
                        println!("          ... and {} more", acts.len() - 6);
                    }
                }
                if let Some(n) = &st.note {
                    println!("        ({n})");
                }
            }
        }
    }
}

/// Sleep until `ns` passes (None: forever) or the stop flag rises; true if stopped.
fn wait(stop: &std::sync::atomic::AtomicBool, ns: Option<i64>) -> bool {
    let end = ns.map(|n| std::time::Instant::now() + std::time::Duration::from_nanos(n as u64));
    loop {
        if stop.load(Ordering::Relaxed) {
            return true;
        }
        let left = end.map(|e| e.saturating_duration_since(std::time::Instant::now()));
        if left == Some(std::time::Duration::ZERO) {
            return false;
        }
        std::thread::sleep(
            left.unwrap_or(std::time::Duration::MAX).min(std::time::Duration::from_millis(50)),
        );
    }
}
