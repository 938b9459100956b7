//! What load to run ([`LoadConfig`]) and the exact command lines it becomes.
//!
//! Contract: [`command_of`] and the iperf3 server line are pure functions of the config and
//! the time limit (and stress-ng's directory); the limit is passed to stress-ng (`--timeout`) and iperf3 (client `-t`,
//! server `--one-off --idle-timeout`), never to a user command. Options as in stress-ng(1)
//! 0.15 and iperf3(1) 3.12 (Debian 12).

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Which way traffic flows, seen from this host (the measuring side).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// This host sends (S1 tx-traffic).
    Tx,
    /// This host receives (S1 rx-traffic).
    Rx,
}

/// iperf3 traffic.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrafficConfig {
    /// `udp` or `tcp`.
    pub protocol: String,
    /// Target bit rate (bits per second).
    pub bitrate_bps: u64,
    /// Which way the traffic flows, seen from this host.
    pub direction: Direction,
    /// The iperf3 server's network namespace (None: this namespace).
    pub netns: Option<String>,
    /// The iperf3 client's network namespace (None: this namespace), e.g. side a of a netns
    /// pair whose side b holds the server.
    #[serde(default)]
    pub client_netns: Option<String>,
    /// Address of the server (127.0.0.1 over loopback, or the netns peer's address).
    pub peer: String,
    /// The server's TCP/UDP port.
    pub port: u16,
    /// Which ends run here: both (default), or one, the other end being on the far host.
    #[serde(default)]
    pub side: TrafficSide,
}

/// Which ends of an iperf3 traffic load this host runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrafficSide {
    /// The server and the client (two namespaces of this machine, or loopback).
    #[default]
    Both,
    /// The server only (the far side of a run; the client is on the near host).
    Server,
    /// The client only (the server runs on the far host, at `peer`).
    Client,
}

/// What load to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LoadConfig {
    /// stress-ng workers: `cpu`, `vm` (mem), `io`, `hdd` counts; `cpu_method` (S2: fft).
    Stress {
        cpu: u32,
        vm: u32,
        io: u32,
        hdd: u32,
        cpu_method: Option<String>,
        /// Percent of each CPU worker's time spent busy (stress-ng `--cpu-load`, 1..=100;
        /// None: 100). Needs `cpu > 0`.
        #[serde(default)]
        cpu_load: Option<u8>,
    },
    /// iperf3 traffic: a server and a client.
    Traffic(TrafficConfig),
    /// A user command (argv).
    Command { argv: Vec<String> },
}

impl LoadConfig {
    /// S2's CPU load: `stress-ng -c 4 --cpu-method fft`.
    pub fn s2_cpu() -> LoadConfig {
        LoadConfig::Stress {
            cpu: 4,
            vm: 0,
            io: 0,
            hdd: 0,
            cpu_method: Some("fft".into()),
            cpu_load: None,
        }
    }

    /// S3's load: 8 CPU, 8 VM, 8 I/O, 8 HDD workers.
    pub fn s3_mix() -> LoadConfig {
        LoadConfig::Stress { cpu: 8, vm: 8, io: 8, hdd: 8, cpu_method: None, cpu_load: None }
    }

    /// A short name (`cpu`, `mem`, `io`, `hdd`, `mix`, `udp-tx`, `tcp-rx`, `cmd`).
    pub fn name(&self) -> String {
        match self {
            LoadConfig::Stress { cpu, vm, io, hdd, .. } => {
                match (*cpu > 0, *vm > 0, *io > 0, *hdd > 0) {
                    (true, false, false, false) => "cpu".into(),
                    (false, true, false, false) => "mem".into(),
                    (false, false, true, false) => "io".into(),
                    (false, false, false, true) => "hdd".into(),
                    _ => "mix".into(),
                }
            }
            LoadConfig::Traffic(t) => {
                format!("{}-{}", t.protocol, if t.direction == Direction::Tx { "tx" } else { "rx" })
            }
            LoadConfig::Command { .. } => "cmd".into(),
        }
    }

    /// Checks what the tools would refuse (or silently misread) before anything starts.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            LoadConfig::Stress { cpu, vm, io, hdd, cpu_load, .. } => {
                if [cpu, vm, io, hdd].iter().all(|n| **n == 0) {
                    return Err("a stress load needs at least one worker".into());
                }
                if let Some(p) = cpu_load {
                    if *p == 0 || *p > 100 {
                        return Err(format!("cpu_load {p}: give 1 to 100 (percent)"));
                    }
                    if *cpu == 0 {
                        return Err(format!("cpu_load {p}: needs cpu workers (cpu > 0)"));
                    }
                }
                Ok(())
            }
            LoadConfig::Traffic(t) => {
                if t.protocol != "udp" && t.protocol != "tcp" {
                    return Err(format!("protocol '{}': use udp or tcp", t.protocol));
                }
                Ok(())
            }
            LoadConfig::Command { argv } => {
                if argv.is_empty() {
                    return Err("an empty command".into());
                }
                Ok(())
            }
        }
    }

    /// The CPU load asked for, in percent of each CPU worker (None: not a CPU stress load
    /// with `cpu_load`).
    pub fn cpu_load(&self) -> Option<u8> {
        match self {
            LoadConfig::Stress { cpu_load, .. } => *cpu_load,
            _ => None,
        }
    }
}

/// A time limit in whole seconds as the tools take it: rounded up, at least 1.
pub fn tool_seconds(d: Duration) -> u64 {
    (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
}

pub(crate) fn netns_prefix(ns: &Option<String>) -> Vec<String> {
    match ns {
        Some(n) => vec!["ip".into(), "netns".into(), "exec".into(), n.clone()],
        None => vec![],
    }
}

/// The argv a load runs (the iperf3 client only, for traffic), with its time limit; stress-ng
/// keeps its files (`--hdd`, `--io`) in `temp`.
pub fn command_of(
    cfg: &LoadConfig,
    max_duration: Option<Duration>,
    temp: &std::path::Path,
) -> Vec<String> {
    match cfg {
        LoadConfig::Stress { cpu, vm, io, hdd, cpu_method, cpu_load } => {
            let mut v = vec!["stress-ng".to_string()];
            for (flag, n) in [("--cpu", cpu), ("--vm", vm), ("--io", io), ("--hdd", hdd)] {
                if *n > 0 {
                    v.push(flag.into());
                    v.push(n.to_string());
                }
            }
            if let (Some(m), true) = (cpu_method, *cpu > 0) {
                v.push("--cpu-method".into());
                v.push(m.clone());
            }
            if let (Some(p), true) = (cpu_load, *cpu > 0) {
                v.push("--cpu-load".into());
                v.push(p.to_string());
            }
            if *hdd > 0 || *io > 0 {
                v.push("--temp-path".into());
                v.push(temp.display().to_string());
            }
            if let Some(d) = max_duration {
                v.push("--timeout".into());
                v.push(format!("{}s", tool_seconds(d)));
            }
            v
        }
        LoadConfig::Traffic(t) => {
            let mut v = netns_prefix(&t.client_netns);
            v.extend([
                "iperf3".to_string(),
                "-c".into(),
                t.peer.clone(),
                "-p".into(),
                t.port.to_string(),
                "-t".into(),
                max_duration.map(|d| tool_seconds(d).to_string()).unwrap_or_else(|| "0".into()),
                "--json".into(),
            ]);
            if t.protocol == "udp" {
                v.push("-u".into());
            }
            v.push("-b".into());
            v.push(t.bitrate_bps.to_string());
            if t.direction == Direction::Rx {
                v.push("-R".into());
            }
            v
        }
        LoadConfig::Command { argv } => argv.clone(),
    }
}

/// The iperf3 server's argv: one client, then exit; with a limit, also exit when no client
/// came within it.
pub(crate) fn server_command(t: &TrafficConfig, max_duration: Option<Duration>) -> Vec<String> {
    let mut v = netns_prefix(&t.netns);
    v.extend(["iperf3", "-s", "--one-off", "-p"].map(String::from));
    v.push(t.port.to_string());
    if t.netns.is_none() {
        v.extend(["-B".to_string(), t.peer.clone()]);
    }
    if let Some(d) = max_duration {
        v.push("--idle-timeout".into());
        v.push(tool_seconds(d).to_string());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// stress-ng's directory in these commands.
    const TEMP: &str = "/scratch";

    fn udp_rx() -> TrafficConfig {
        TrafficConfig {
            side: Default::default(),
            protocol: "udp".into(),
            bitrate_bps: 100_000_000,
            direction: Direction::Rx,
            netns: None,
            client_netns: None,
            peer: "127.0.0.1".into(),
            port: 5201,
        }
    }

    #[test]
    fn commands_are_the_studies() {
        assert_eq!(
            command_of(&LoadConfig::s2_cpu(), None, TEMP.as_ref()).join(" "),
            "stress-ng --cpu 4 --cpu-method fft"
        );
        let s3 = command_of(&LoadConfig::s3_mix(), None, TEMP.as_ref()).join(" ");
        assert!(s3.starts_with("stress-ng --cpu 8 --vm 8 --io 8 --hdd 8 --temp-path"), "{s3}");
        assert_eq!(LoadConfig::s3_mix().name(), "mix");
        let t = LoadConfig::Traffic(udp_rx());
        assert_eq!(
            command_of(&t, None, TEMP.as_ref()).join(" "),
            "iperf3 -c 127.0.0.1 -p 5201 -t 0 --json -u -b 100000000 -R"
        );
        assert_eq!(t.name(), "udp-rx");
    }

    #[test]
    fn the_cpu_load_reaches_stress_ng() {
        let c = LoadConfig::Stress {
            cpu: 2,
            vm: 0,
            io: 0,
            hdd: 0,
            cpu_method: None,
            cpu_load: Some(80),
        };
        assert_eq!(
            command_of(&c, None, TEMP.as_ref()).join(" "),
            "stress-ng --cpu 2 --cpu-load 80"
        );
        assert_eq!(c.cpu_load(), Some(80));
        assert!(c.validate().is_ok());
        let bad = |cpu, p| {
            LoadConfig::Stress { cpu, vm: 1, io: 0, hdd: 0, cpu_method: None, cpu_load: Some(p) }
                .validate()
                .unwrap_err()
        };
        assert!(bad(1, 0).contains("1 to 100"));
        assert!(bad(1, 101).contains("1 to 100"));
        assert!(bad(0, 50).contains("needs cpu workers"));
    }

    #[test]
    fn the_time_limit_reaches_the_tools() {
        let d = Some(Duration::from_millis(2500));
        assert_eq!(
            command_of(&LoadConfig::s2_cpu(), d, TEMP.as_ref()).join(" "),
            "stress-ng --cpu 4 --cpu-method fft --timeout 3s"
        );
        let t = udp_rx();
        assert_eq!(
            command_of(&LoadConfig::Traffic(t.clone()), d, TEMP.as_ref()).join(" "),
            "iperf3 -c 127.0.0.1 -p 5201 -t 3 --json -u -b 100000000 -R"
        );
        assert_eq!(
            server_command(&t, d).join(" "),
            "iperf3 -s --one-off -p 5201 -B 127.0.0.1 --idle-timeout 3"
        );
        let ns = TrafficConfig { netns: Some("b".into()), client_netns: Some("a".into()), ..t };
        assert_eq!(
            server_command(&ns, None).join(" "),
            "ip netns exec b iperf3 -s --one-off -p 5201"
        );
        assert!(command_of(&LoadConfig::Traffic(ns), d, TEMP.as_ref())
            .join(" ")
            .starts_with("ip netns exec a "));
        let cmd = LoadConfig::Command { argv: vec!["sleep".into(), "9".into()] };
        assert_eq!(command_of(&cmd, d, TEMP.as_ref()), vec!["sleep", "9"]);
        assert_eq!(tool_seconds(Duration::from_millis(1)), 1);
        assert_eq!(tool_seconds(Duration::ZERO), 1);
        assert_eq!(tool_seconds(Duration::from_secs(60)), 60);
    }

    #[test]
    fn an_old_stored_stress_load_still_reads() {
        let c: LoadConfig = serde_json::from_str(
            r#"{"kind":"stress","cpu":1,"vm":0,"io":0,"hdd":0,"cpu_method":null}"#,
        )
        .unwrap();
        assert_eq!(c.cpu_load(), None);
    }
}
