//! Loads: stress-ng (cpu, mem, io, hdd, S3's mix), iperf3 traffic (UDP or TCP, a bit rate,
//! tx or rx, over loopback or into a network-namespace peer), or a user command — started
//! before a measurement window, checked alive during it, stopped after it, with the
//! achieved CPU use (from /proc/stat) and bit rate (from iperf3 --json) recorded.
//!
//! Contract: every process of a load runs in its own process group, and the whole group is
//! killed when the [`RunningLoad`] is stopped or dropped (also on panic). A missing tool
//! is a [`LoadError::MissingTool`] naming the Debian package. Nothing here prints.

use serde::{Deserialize, Serialize};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
    pub direction: Direction,
    /// The iperf3 server's network namespace (None: this namespace).
    pub netns: Option<String>,
    /// The iperf3 client's network namespace (None: this namespace), e.g. side a of a netns
    /// pair whose side b holds the server.
    #[serde(default)]
    pub client_netns: Option<String>,
    /// Address of the server (127.0.0.1 over loopback, or the netns peer's address).
    pub peer: String,
    pub port: u16,
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
    },
    Traffic(TrafficConfig),
    /// A user command (argv).
    Command {
        argv: Vec<String>,
    },
}

impl LoadConfig {
    /// S2's CPU load: `stress-ng -c 4 --cpu-method fft`.
    pub fn s2_cpu() -> LoadConfig {
        LoadConfig::Stress { cpu: 4, vm: 0, io: 0, hdd: 0, cpu_method: Some("fft".into()) }
    }
    /// S3's load: 8 CPU, 8 VM, 8 I/O, 8 HDD workers.
    pub fn s3_mix() -> LoadConfig {
        LoadConfig::Stress { cpu: 8, vm: 8, io: 8, hdd: 8, cpu_method: None }
    }

    /// A short name (`cpu`, `mix`, `traffic-udp-tx`, `cmd`).
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
}

/// Errors of loads.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{tool} is not installed (Debian package: {package}; apt install {package})")]
    MissingTool { tool: String, package: String },
    #[error("starting {what}: {source}")]
    Start { what: String, source: std::io::Error },
    #[error("the {what} load ended early ({status}){stderr}")]
    Died { what: String, status: String, stderr: String },
    #[error("{0}")]
    Invalid(String),
}

/// Find `tool` on PATH.
pub fn which(tool: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(tool)).find(|p| p.is_file())
}

fn need(tool: &str, package: &str) -> Result<(), LoadError> {
    if which(tool).is_none() {
        return Err(LoadError::MissingTool { tool: tool.into(), package: package.into() });
    }
    Ok(())
}

/// CPU time counters of /proc/stat (jiffies): total and busy, for all CPUs and per CPU.
#[derive(Clone, Debug, Default)]
pub struct CpuTimes {
    pub all: (u64, u64),
    pub per_cpu: Vec<(u64, u64)>,
}

impl CpuTimes {
    /// Read /proc/stat under `root`.
    pub fn read(root: &std::path::Path) -> CpuTimes {
        let text = std::fs::read_to_string(root.join("proc/stat")).unwrap_or_default();
        let mut t = CpuTimes::default();
        for l in text.lines().filter(|l| l.starts_with("cpu")) {
            let mut w = l.split_whitespace();
            let name = w.next().unwrap_or("");
            let v: Vec<u64> = w.map(|x| x.parse().unwrap_or(0)).collect();
            // user nice system idle iowait irq softirq steal (guest counted in user)
            let total: u64 = v.iter().take(8).sum();
            let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            if name == "cpu" {
                t.all = (total, total - idle);
            } else {
                t.per_cpu.push((total, total - idle));
            }
        }
        t
    }

    /// Busy percent between `self` (earlier) and `later`: (all CPUs, per CPU).
    pub fn busy_percent(&self, later: &CpuTimes) -> (f64, Vec<f64>) {
        let pct = |a: (u64, u64), b: (u64, u64)| {
            let dt = b.0.saturating_sub(a.0);
            if dt == 0 {
                0.0
            } else {
                (b.1.saturating_sub(a.1)) as f64 * 100.0 / dt as f64
            }
        };
        (
            pct(self.all, later.all),
            self.per_cpu.iter().zip(&later.per_cpu).map(|(a, b)| pct(*a, *b)).collect(),
        )
    }
}

/// What a load achieved (recorded with the result).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    pub name: String,
    pub command: Vec<String>,
    pub ran_ns: i64,
    /// Busy CPU over all CPUs during the load (percent, from /proc/stat; includes everything else running).
    pub cpu_busy_percent: f64,
    pub cpu_busy_percent_per_cpu: Vec<f64>,
    /// Bit rate iperf3 measured (bits per second), for traffic.
    pub bitrate_bps: Option<f64>,
    /// UDP datagrams lost (percent), for UDP traffic.
    pub lost_percent: Option<f64>,
    /// Alive until stopped (false: it ended early; see `ended`).
    pub alive_until_stop: bool,
    pub ended: Option<String>,
}

/// A load that runs; stop it (or drop it) to end every process it started.
pub struct RunningLoad {
    name: String,
    command: Vec<String>,
    children: Vec<(String, Child)>,
    started: Instant,
    cpu0: CpuTimes,
    died: Option<String>,
    iperf_client: Option<usize>,
    udp: bool,
}

fn spawn(argv: &[String], what: &str, capture_stdout: bool) -> Result<Child, LoadError> {
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..]).stdin(Stdio::null()).stderr(Stdio::piped()).process_group(0);
    c.stdout(if capture_stdout { Stdio::piped() } else { Stdio::null() });
    c.spawn().map_err(|e| LoadError::Start { what: what.into(), source: e })
}

fn netns_prefix(ns: &Option<String>) -> Vec<String> {
    match ns {
        Some(n) => vec!["ip".into(), "netns".into(), "exec".into(), n.clone()],
        None => vec![],
    }
}

/// The argv a load runs (the iperf3 client only, for traffic).
pub fn command_of(cfg: &LoadConfig) -> Vec<String> {
    match cfg {
        LoadConfig::Stress { cpu, vm, io, hdd, cpu_method } => {
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
            if *hdd > 0 || *io > 0 {
                v.push("--temp-path".into());
                v.push(std::env::temp_dir().display().to_string());
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
                "0".into(),
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

impl RunningLoad {
    /// Start a load (checks the tool is there first).
    pub fn start(cfg: &LoadConfig) -> Result<RunningLoad, LoadError> {
        let cpu0 = CpuTimes::read(std::path::Path::new("/"));
        let mut children = Vec::new();
        let command = command_of(cfg);
        let mut iperf_client = None;
        let mut udp = false;
        match cfg {
            LoadConfig::Stress { cpu, vm, io, hdd, .. } => {
                if cpu + vm + io + hdd == 0 {
                    return Err(LoadError::Invalid(
                        "a stress load needs at least one worker".into(),
                    ));
                }
                need("stress-ng", "stress-ng")?;
                children.push(("stress-ng".to_string(), spawn(&command, "stress-ng", false)?));
            }
            LoadConfig::Traffic(t) => {
                need("iperf3", "iperf3")?;
                if t.protocol != "udp" && t.protocol != "tcp" {
                    return Err(LoadError::Invalid(format!(
                        "protocol '{}': use udp or tcp",
                        t.protocol
                    )));
                }
                udp = t.protocol == "udp";
                let mut server = netns_prefix(&t.netns);
                server.extend(["iperf3", "-s", "-1", "-p"].map(String::from));
                server.push(t.port.to_string());
                if t.netns.is_some() {
                    need("ip", "iproute2")?;
                } else {
                    server.extend(["-B".to_string(), t.peer.clone()]);
                }
                children
                    .push(("iperf3 server".to_string(), spawn(&server, "iperf3 server", false)?));
                wait_listening(t, &mut children[0].1)?;
                children
                    .push(("iperf3 client".to_string(), spawn(&command, "iperf3 client", true)?));
                iperf_client = Some(1);
            }
            LoadConfig::Command { argv } => {
                if argv.is_empty() {
                    return Err(LoadError::Invalid("an empty command".into()));
                }
                children.push((argv[0].clone(), spawn(argv, &argv[0], false)?));
            }
        }
        let mut l = RunningLoad {
            name: cfg.name(),
            command,
            children,
            started: Instant::now(),
            cpu0,
            died: None,
            iperf_client,
            udp,
        };
        // a tool that refuses its arguments dies at once: say so now, not after the window
        std::thread::sleep(Duration::from_millis(150));
        l.check_alive()?;
        Ok(l)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Err if any process of the load has ended.
    pub fn check_alive(&mut self) -> Result<(), LoadError> {
        for (what, c) in self.children.iter_mut() {
            if let Ok(Some(st)) = c.try_wait() {
                let mut stderr = String::new();
                if let Some(mut e) = c.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut stderr);
                }
                let stderr = stderr
                    .lines()
                    .rfind(|l: &&str| !l.trim().is_empty())
                    .map(|l| format!(": {}", l.trim()))
                    .unwrap_or_default();
                let err = LoadError::Died { what: what.clone(), status: st.to_string(), stderr };
                self.died = Some(err.to_string());
                return Err(err);
            }
        }
        Ok(())
    }

    /// Stop every process (SIGTERM to the group, SIGKILL after 2 s) and report.
    pub fn stop(mut self) -> LoadReport {
        let alive = self.check_alive().is_ok();
        let cpu1 = CpuTimes::read(std::path::Path::new("/"));
        let ran_ns = self.started.elapsed().as_nanos() as i64;
        // the client first, so that iperf3 prints its --json summary
        let order: Vec<usize> = match self.iperf_client {
            Some(i) => {
                std::iter::once(i).chain((0..self.children.len()).filter(|&j| j != i)).collect()
            }
            None => (0..self.children.len()).collect(),
        };
        let mut iperf_json = None;
        for i in order {
            let (_, c) = &mut self.children[i];
            terminate(c);
            if Some(i) == self.iperf_client {
                if let Some(mut out) = c.stdout.take() {
                    use std::io::Read;
                    let mut s = String::new();
                    let _ = out.read_to_string(&mut s);
                    iperf_json = Some(s);
                }
            }
        }
        let (all, per) = self.cpu0.busy_percent(&cpu1);
        let (bitrate, lost) =
            iperf_json.as_deref().map(|j| parse_iperf(j, self.udp)).unwrap_or((None, None));
        LoadReport {
            name: self.name.clone(),
            command: self.command.clone(),
            ran_ns,
            cpu_busy_percent: all,
            cpu_busy_percent_per_cpu: per,
            bitrate_bps: bitrate,
            lost_percent: lost,
            alive_until_stop: alive,
            ended: self.died.clone(),
        }
    }
}

fn terminate(c: &mut Child) {
    let pgid = c.id() as i32;
    if let Ok(None) = c.try_wait() {
        let _ = rtlab_sys::tune_sys::kill_group(pgid, 15);
        let end = Instant::now() + Duration::from_secs(2);
        while Instant::now() < end {
            if let Ok(Some(_)) = c.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    // what is left of the group (workers of stress-ng) goes too
    let _ = rtlab_sys::tune_sys::kill_group(pgid, 9);
    let _ = c.kill();
    let _ = c.wait();
}

impl Drop for RunningLoad {
    fn drop(&mut self) {
        for (_, c) in self.children.iter_mut() {
            terminate(c);
        }
    }
}

fn wait_listening(t: &TrafficConfig, server: &mut Child) -> Result<(), LoadError> {
    let end = Instant::now() + Duration::from_secs(3);
    while Instant::now() < end {
        if let Ok(Some(st)) = server.try_wait() {
            let mut stderr = String::new();
            if let Some(mut e) = server.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut stderr);
            }
            return Err(LoadError::Died {
                what: "iperf3 server".into(),
                status: st.to_string(),
                stderr: format!(": {}", stderr.trim()),
            });
        }
        if t.netns.is_none() {
            // a probe connection would count as iperf3's one client (-s -1): look at /proc/net/tcp instead
            if port_listening(t.port) {
                return Ok(());
            }
        } else {
            // another namespace's sockets are not in our /proc/net/tcp; give the server time
            std::thread::sleep(Duration::from_millis(300));
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// A TCP socket of this namespace listens on `port` (/proc/net/tcp and tcp6, state 0A).
pub fn port_listening(port: u16) -> bool {
    let hex = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).unwrap_or_default().lines().skip(1).any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.get(1).is_some_and(|a| a.ends_with(&hex)) && w.get(3) == Some(&"0A")
        })
    })
}

/// (bits per second, lost percent) from iperf3's --json output: from the per-interval
/// figures measured on this side (an interrupted reverse run leaves `end.sum` empty), else
/// from `end`.
pub fn parse_iperf(json: &str, udp: bool) -> (Option<f64>, Option<f64>) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else { return (None, None) };
    let (mut bytes, mut secs, mut lost, mut packets) = (0.0, 0.0, 0.0, 0.0);
    for i in v["intervals"].as_array().map(|a| a.as_slice()).unwrap_or(&[]) {
        bytes += i["sum"]["bytes"].as_f64().unwrap_or(0.0);
        secs += i["sum"]["seconds"].as_f64().unwrap_or(0.0);
        lost += i["sum"]["lost_packets"].as_f64().unwrap_or(0.0);
        packets += i["sum"]["packets"].as_f64().unwrap_or(0.0);
    }
    if secs > 0.0 {
        let lost_pct =
            (udp && packets + lost > 0.0).then(|| lost * 100.0 / (packets + lost).max(packets));
        return (Some(bytes * 8.0 / secs), if udp { lost_pct.or(Some(0.0)) } else { None });
    }
    let end = &v["end"];
    let bps = if udp {
        end["sum"]["bits_per_second"].as_f64()
    } else {
        end["sum_received"]["bits_per_second"]
            .as_f64()
            .or(end["sum_sent"]["bits_per_second"].as_f64())
    };
    let lost = if udp { end["sum"]["lost_percent"].as_f64() } else { None };
    (bps, lost)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_the_studies() {
        assert_eq!(
            command_of(&LoadConfig::s2_cpu()).join(" "),
            "stress-ng --cpu 4 --cpu-method fft"
        );
        let s3 = command_of(&LoadConfig::s3_mix()).join(" ");
        assert!(s3.starts_with("stress-ng --cpu 8 --vm 8 --io 8 --hdd 8 --temp-path"), "{s3}");
        assert_eq!(LoadConfig::s3_mix().name(), "mix");
        let t = LoadConfig::Traffic(TrafficConfig {
            protocol: "udp".into(),
            bitrate_bps: 100_000_000,
            direction: Direction::Rx,
            netns: None,
            client_netns: None,
            peer: "127.0.0.1".into(),
            port: 5201,
        });
        assert_eq!(
            command_of(&t).join(" "),
            "iperf3 -c 127.0.0.1 -p 5201 -t 0 --json -u -b 100000000 -R"
        );
        assert_eq!(t.name(), "udp-rx");
    }

    #[test]
    fn cpu_times_give_percentages() {
        let a = CpuTimes { all: (1000, 100), per_cpu: vec![(500, 0), (500, 100)] };
        let b = CpuTimes { all: (2000, 600), per_cpu: vec![(1000, 500), (1000, 100)] };
        let (all, per) = a.busy_percent(&b);
        assert_eq!(all, 50.0);
        assert_eq!(per, vec![100.0, 0.0]);
    }

    #[test]
    fn iperf_json_is_read() {
        let j = r#"{"end":{"sum":{"bits_per_second":1.0e7,"lost_percent":0.5},"sum_sent":{"bits_per_second":2.0e7},"sum_received":{"bits_per_second":1.9e7}}}"#;
        assert_eq!(parse_iperf(j, true), (Some(1.0e7), Some(0.5)));
        assert_eq!(parse_iperf(j, false), (Some(1.9e7), None));
        assert_eq!(parse_iperf("not json", true), (None, None));
        let j = r#"{"intervals":[{"sum":{"bytes":1000,"seconds":1.0,"packets":9,"lost_packets":1}},{"sum":{"bytes":3000,"seconds":1.0,"packets":10,"lost_packets":0}}],"end":{"sum":{"bytes":0,"bits_per_second":0}}}"#;
        assert_eq!(parse_iperf(j, true), (Some(16000.0), Some(5.0)));
    }

    #[test]
    fn a_missing_tool_names_its_package() {
        let e = need("rtlab-no-such-tool", "rtlab-pkg").unwrap_err().to_string();
        assert!(e.contains("rtlab-pkg") && e.contains("not installed"), "{e}");
    }
}
