//! `rtlab tune check | apply PROFILE | restore | show`: check the machine, apply a real-time
//! profile (journaled, always put back), restore after a crash, list what is applied.

use super::{duration_flag, stop_flag};
use clap::{Args, Subcommand};
use rtlab_host::host::{FakeHost, Host, RealHost};
use rtlab_host::journal::{pending, read_journal, restore_journal, DEFAULT_JOURNAL};
use rtlab_host::session::Session;
use rtlab_tune::check::{counts, run_checks, Status};
use rtlab_tune::profile::{self, Profile, Target};
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

pub fn host_of(h: &HostArgs) -> anyhow::Result<Box<dyn Host>> {
    Ok(match &h.root {
        Some(r) => {
            if !r.is_dir() {
                anyhow::bail!("--root {}: not a directory", r.display());
            }
            Box::new(FakeHost::new(r))
        }
        None => Box::new(RealHost::new()),
    })
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
    let mut checks = run_checks(host.as_ref());
    // measured on this machine only (a fake tree has no CPUs to measure)
    if noise_ns > 0 && h.root.is_none() {
        checks.push(rtlab_lab::probes::noise_check::row(noise_ns, &stop_flag()?)?);
    }
    let (pass, warn, fail) = counts(&checks);
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

/// The profile journal and the spike tracer's journal beside it (`<journal>.trace`).
fn journals(path: &Path) -> Vec<PathBuf> {
    let mut trace = path.as_os_str().to_owned();
    trace.push(".trace");
    let mut v = vec![path.to_path_buf(), PathBuf::from(trace)];
    // the XDP programs of dead rtlabs (the kernel detached them with their links)
    v.extend(rtlab_lab::guard::stale_xdp_journals(path));
    v
}

fn restore(force: bool, h: &HostArgs) -> anyhow::Result<u8> {
    let host = host_of(h)?;
    let mut failed = 0;
    let mut any = false;
    let paths = journals(&h.journal);
    // refuse before anything is undone: a live rtlab's journal is its profile in use
    for path in &paths {
        let st = read_journal(path).map_err(|e| anyhow::anyhow!("--journal: {e}"))?;
        if st.pending.is_empty() {
            continue;
        }
        if let Some(p) = pending(path) {
            if !force && p.alive && p.pid != std::process::id() as i32 {
                anyhow::bail!(
                    "{}: pid {} ({}) is still running and holds these {} changes; it restores them when it ends (Ctrl-C or kill {}); --force to restore now",
                    path.display(),
                    p.pid,
                    p.what,
                    p.changes,
                    p.pid
                );
            }
        }
    }
    for path in paths {
        let st = read_journal(&path).map_err(|e| anyhow::anyhow!("--journal: {e}"))?;
        if st.pending.is_empty() {
            let _ = restore_journal(host.as_ref(), &path);
            continue;
        }
        any = true;
        let r =
            restore_journal(host.as_ref(), &path).map_err(|e| anyhow::anyhow!("--journal: {e}"))?;
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
    }
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
    let mut any = false;
    for path in journals(&h.journal) {
        let st = read_journal(&path).map_err(|e| anyhow::anyhow!("--journal: {e}"))?;
        if st.pending.is_empty() {
            continue;
        }
        any = true;
        let (pid, what) = st.owner.clone().unwrap_or((0, "?".into()));
        let alive = if pending(&path).is_some_and(|p| p.alive) {
            "running"
        } else {
            "no longer running: `rtlab tune restore` puts it back"
        };
        println!(
            "applied by pid {pid} ({what}, {alive}), {} changes ({}):",
            st.pending.len(),
            path.display()
        );
        for (_, c) in &st.pending {
            println!("  {}  [{}]", c.describe(), rtlab_tune::profile::in_force(host.as_ref(), c));
        }
    }
    if !any {
        println!("nothing applied by rtlab ({} holds no pending change)", h.journal.display());
    }
    if let Ok(v) = rtlab_sys::pmqos::CpuDmaLatency::current(&host.path("/dev/cpu_dma_latency")) {
        println!("/dev/cpu_dma_latency now: {v} us");
    }
    Ok(0)
}

fn user_profiles(
    file: Option<&Path>,
) -> anyhow::Result<std::collections::BTreeMap<String, Profile>> {
    match file {
        Some(f) => profile::load_file(f).map_err(|e| anyhow::anyhow!("--file {e}")),
        None => Ok(Default::default()),
    }
}

fn list_profiles(file: Option<&Path>) -> anyhow::Result<u8> {
    let user = user_profiles(file)?;
    for name in profile::builtin_names() {
        let p = profile::builtin(name).expect("built-in");
        println!("{name:<14} {}", p.description);
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
    let user = user_profiles(a.file.as_deref())?;
    // `tune apply ./my.toml[#NAME]` reads the file as a scenario's `profiles` entry does
    let prof = if a.file.is_none() && profile::is_file_ref(&a.profile) {
        profile::resolve(&a.profile, Path::new(".")).map(|p| p.profile)
    } else {
        profile::find(&a.profile, &user)
    }
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let host = host_of(&a.host)?;
    let hold_ns = a.hold.as_deref().map(|h| duration_flag("--hold", h)).transpose()?;
    if hold_ns.is_some_and(|n| n <= 0) {
        anyhow::bail!("--hold {}: must be above zero", a.hold.as_deref().unwrap_or(""));
    }
    let target = target_of(&a, host.as_ref())?;
    let steps = profile::plan(&prof, &target, host.as_ref());
    println!("profile {}: {}", a.profile, prof.description);
    if a.dry_run {
        print_plan(&steps);
        println!("dry run: nothing changed");
        return Ok(0);
    }
    // the Ctrl-C flag first: a signal during the changes must not skip the restore
    let stop = stop_flag()?;
    let what = format!("rtlab tune apply {}", a.profile);
    let mut session = Session::begin(host.as_ref(), &a.host.journal, &what)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut tally = std::collections::BTreeMap::<&str, usize>::new();
    for st in &steps {
        let o = profile::apply_step(&mut session, st);
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
    let r = session.restore();
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

/// The profile's target from the flags, each checked on this host (or the `--root` tree).
fn target_of(a: &ApplyArgs, host: &dyn Host) -> anyhow::Result<Target> {
    let (online, text) = rtlab_sys::cpus::online_cpus(host.root());
    if let Some(c) = a.rt_cpu {
        if !online.contains(&c) {
            anyhow::bail!("--rt-cpu {c}: CPU {c} is not online (online: {text})");
        }
    }
    for &pid in &a.pid {
        if !host.exists(&format!("/proc/{pid}")) {
            anyhow::bail!("--pid {pid}: no such process");
        }
    }
    if a.netns.is_some() && a.nic.is_none() {
        anyhow::bail!(
            "--netns {}: give --nic, the interface inside that namespace",
            a.netns.as_deref().unwrap_or("")
        );
    }
    if let Some(n) = &a.nic {
        if a.netns.is_none() && !host.exists(&format!("/sys/class/net/{n}")) {
            anyhow::bail!("--nic {n}: no such interface");
        }
    }
    Ok(Target {
        rt_cpu: a.rt_cpu,
        nic: a.nic.clone(),
        netns: a.netns.clone(),
        pids: a.pid.clone(),
        keep: vec![],
    })
}

/// `--dry-run`: every step, what it will do (its alternatives, the first actions) or why not.
fn print_plan(steps: &[profile::Step]) {
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
