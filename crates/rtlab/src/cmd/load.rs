//! `rtlab load cpu|mem|io|hdd|mix|traffic|cmd`: run one load on its own for a while and
//! report what it achieved (CPU busy from /proc/stat, bit rate from iperf3). The tools get
//! a time limit of `--duration` plus a margin (`max_duration_for`), and every process of the
//! load dies with rtlab, also after `kill -9` (see rtlab-load).

use super::{duration_flag, stop_flag};
use clap::{Args, Subcommand, ValueEnum};
use rtlab_lab::load::{
    max_duration_for, Direction, LoadConfig, LoadReport, RunningLoad, TrafficConfig,
};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct LoadArgs {
    #[command(subcommand)]
    pub kind: LoadKind,
    /// How long the load runs (e.g. 10s, 5m).
    #[arg(long, short = 'D', default_value = "10s", global = true)]
    pub duration: String,
    /// Write what the load achieved as JSON (- for stdout).
    #[arg(long, global = true)]
    pub json: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum LoadKind {
    /// stress-ng CPU workers (S2: -c 4 --cpu-method fft).
    Cpu {
        /// stress-ng CPU workers (--cpu N).
        #[arg(long, short = 'w', default_value_t = 4)]
        workers: u32,
        /// stress-ng --cpu-method.
        #[arg(long, default_value = "fft")]
        method: String,
        /// Percent of each worker's time spent busy (stress-ng --cpu-load; default: 100).
        #[arg(long, value_name = "PERCENT")]
        cpu_load: Option<u8>,
    },
    /// stress-ng VM (memory) workers.
    Mem {
        /// stress-ng VM workers (--vm N).
        #[arg(long, short = 'w', default_value_t = 2)]
        workers: u32,
    },
    /// stress-ng I/O (sync) workers.
    Io {
        /// stress-ng I/O workers (--io N).
        #[arg(long, short = 'w', default_value_t = 2)]
        workers: u32,
    },
    /// stress-ng HDD (write) workers.
    Hdd {
        /// stress-ng HDD workers (--hdd N).
        #[arg(long, short = 'w', default_value_t = 2)]
        workers: u32,
    },
    /// S3's load: N CPU + N VM + N I/O + N HDD workers (S3: 8 each on the PC).
    Mix {
        /// Workers of each kind (N CPU + N VM + N I/O + N HDD).
        #[arg(long, short = 'w', default_value_t = 8)]
        workers: u32,
        /// Percent of each CPU worker's time spent busy (stress-ng --cpu-load; default: 100).
        #[arg(long, value_name = "PERCENT")]
        cpu_load: Option<u8>,
    },
    /// iperf3 traffic at a bit rate, over loopback or into a netns peer.
    Traffic {
        /// Bit rate with a unit (100mbit, 1gbit).
        #[arg(long, default_value = "100mbit")]
        rate: String,
        /// iperf3's protocol (udp: at the rate exactly; tcp: as much as the rate allows).
        #[arg(long, value_enum, default_value = "udp")]
        protocol: ProtocolArg,
        /// tx: this host sends; rx: this host receives.
        #[arg(long, value_enum, default_value = "tx")]
        direction: DirectionArg,
        /// Run the iperf3 server in this network namespace (see `rtlab netns up`).
        #[arg(long)]
        netns: Option<String>,
        /// The server's address (default 127.0.0.1; with --netns the peer's address).
        #[arg(long)]
        peer: Option<String>,
        /// The iperf3 server's port.
        #[arg(long, default_value_t = 5201)]
        port: u16,
    },
    /// A command of yours, e.g. `rtlab load cmd -- make -j2`.
    Cmd {
        /// The command and its arguments, after `--`: started in a process group of its own
        /// and stopped with it (SIGTERM, SIGKILL to what is left 2 s later).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        argv: Vec<String>,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum ProtocolArg {
    Udp,
    Tcp,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum DirectionArg {
    Tx,
    Rx,
}

/// Flags -> LoadConfig (the one place).
pub fn config_of(k: &LoadKind) -> anyhow::Result<LoadConfig> {
    let workers = |n: u32, flag: &str| -> anyhow::Result<u32> {
        if n == 0 || n > 1024 {
            anyhow::bail!("{flag} {n}: give 1 to 1024 workers");
        }
        Ok(n)
    };
    let cpu_load = |p: &Option<u8>| -> anyhow::Result<Option<u8>> {
        match p {
            Some(n) if *n == 0 || *n > 100 => {
                anyhow::bail!("--cpu-load {n}: give 1 to 100 (percent)")
            }
            _ => Ok(*p),
        }
    };
    Ok(match k {
        LoadKind::Cpu { workers: w, method, cpu_load: p } => LoadConfig::Stress {
            cpu: workers(*w, "--workers")?,
            vm: 0,
            io: 0,
            hdd: 0,
            cpu_method: Some(method.clone()),
            cpu_load: cpu_load(p)?,
        },
        LoadKind::Mem { workers: w } => LoadConfig::Stress {
            cpu: 0,
            vm: workers(*w, "--workers")?,
            io: 0,
            hdd: 0,
            cpu_method: None,
            cpu_load: None,
        },
        LoadKind::Io { workers: w } => LoadConfig::Stress {
            cpu: 0,
            vm: 0,
            io: workers(*w, "--workers")?,
            hdd: 0,
            cpu_method: None,
            cpu_load: None,
        },
        LoadKind::Hdd { workers: w } => LoadConfig::Stress {
            cpu: 0,
            vm: 0,
            io: 0,
            hdd: workers(*w, "--workers")?,
            cpu_method: None,
            cpu_load: None,
        },
        LoadKind::Mix { workers: w, cpu_load: p } => {
            let n = workers(*w, "--workers")?;
            let cpu_load = cpu_load(p)?;
            LoadConfig::Stress { cpu: n, vm: n, io: n, hdd: n, cpu_method: None, cpu_load }
        }
        LoadKind::Traffic { rate, protocol, direction, netns, peer, port } => {
            let bps = rtlab_core::units::parse_bitrate(rate)
                .map_err(|e| anyhow::anyhow!("--rate {rate}: {e}"))?;
            if bps == 0 {
                anyhow::bail!("--rate {rate}: must be above zero");
            }
            if netns.is_some() && peer.is_none() {
                anyhow::bail!(
                    "--netns {}: give --peer ADDR, the address of the peer inside it",
                    netns.as_deref().unwrap_or("")
                );
            }
            let peer = peer.clone().unwrap_or_else(|| "127.0.0.1".into());
            if peer.parse::<std::net::IpAddr>().is_err() {
                anyhow::bail!("--peer {peer}: not an IP address");
            }
            if *port == 0 {
                anyhow::bail!("--port 0: give a port number");
            }
            LoadConfig::Traffic(TrafficConfig {
                side: Default::default(),
                protocol: match protocol {
                    ProtocolArg::Udp => "udp".into(),
                    ProtocolArg::Tcp => "tcp".into(),
                },
                bitrate_bps: bps,
                direction: match direction {
                    DirectionArg::Tx => Direction::Tx,
                    DirectionArg::Rx => Direction::Rx,
                },
                netns: netns.clone(),
                client_netns: None,
                peer,
                port: *port,
            })
        }
        LoadKind::Cmd { argv } => LoadConfig::Command { argv: argv.clone() },
    })
}

pub fn run(a: LoadArgs) -> anyhow::Result<u8> {
    let cfg = config_of(&a.kind)?;
    let ns = duration_flag("--duration", &a.duration)?;
    if ns <= 0 {
        anyhow::bail!("--duration {}: must be above zero", a.duration);
    }
    if let Some(p) = &a.json {
        crate::document::check_writable(p, "--json")?;
    }
    let quiet = a.json.as_deref() == Some("-");
    let stop = stop_flag()?;
    // the tools' own time limit: the second guard, should rtlab die without stopping them
    let max_duration = max_duration_for(Duration::from_nanos(ns as u64));
    let mut load = RunningLoad::start(&cfg, Some(max_duration))?;
    if !quiet {
        println!("rtlab load {}: `{}` for {}", cfg.name(), load.command().join(" "), a.duration);
    }
    let end = Instant::now() + Duration::from_nanos(ns as u64);
    let mut died = None;
    while Instant::now() < end && !stop.load(Ordering::Relaxed) {
        if let Err(e) = load.check_alive() {
            died = Some(e);
            break;
        }
        std::thread::sleep(
            Duration::from_millis(100).min(end.saturating_duration_since(Instant::now())),
        );
    }
    let report = load.stop();
    if let Some(p) = &a.json {
        let doc = serde_json::json!({ "schema_version": 1, "kind": "load", "config": cfg, "load": report, "interrupted": stop.load(Ordering::Relaxed) });
        crate::document::write_text(&(serde_json::to_string_pretty(&doc)? + "\n"), p)
            .map_err(|e| anyhow::anyhow!("--json {p}: {e}"))?;
    }
    if !quiet {
        print_report(&report);
    }
    if let Some(e) = died {
        return Err(e.into());
    }
    Ok(0)
}

fn print_report(r: &LoadReport) {
    let per: Vec<String> = r
        .cpu_busy_percent_per_cpu
        .iter()
        .enumerate()
        .map(|(i, p)| format!("cpu{i} {p:.1}"))
        .collect();
    println!(
        "ran {:.1} s; CPU busy {:.1} % ({}){}",
        r.ran_ns as f64 / 1e9,
        r.cpu_busy_percent,
        per.join(", "),
        r.cpu_load_percent.map(|p| format!("; asked {p} % per CPU worker")).unwrap_or_default()
    );
    if let Some(b) = r.bitrate_bps {
        println!(
            "bit rate {:.1} Mbit/s{}",
            b / 1e6,
            r.lost_percent.map(|l| format!(", {l:.2} % datagrams lost")).unwrap_or_default()
        );
    } else if r.name.starts_with("udp") || r.name.starts_with("tcp") {
        println!("bit rate: iperf3 gave no summary");
    }
}
