//! Two hosts on one machine: two network namespaces joined by a veth pair, with an
//! optional bottleneck and priority path, made with iproute2's `ip` and `tc`.
//!
//! Layout for the name `N` (default `rtlab`): namespaces `N-a` (the client side) and
//! `N-b` (the reflector side), joined by the veth ends `N-a` (in `N-a`) and `N-b` (in
//! `N-b`), with one IPv4 and one IPv6 address each (defaults 198.18.0.1/24 and
//! 198.18.0.2/24, RFC 2544's benchmarking range, and fd00:7274:6c61:62::1/64 and ::2/64,
//! added without duplicate address detection so they work at once).
//!
//! Queueing, the same on both veth ends (tc-htb(8), tc-tbf(8), tc-pfifo_fast(8)):
//! - `--rate R` puts a bottleneck of R on each end: `htb` (default; one class 1:20 of
//!   rate R that every packet goes to) or `tbf` (rate R, 100 ms of queue).
//! - `--priority-path class` (htb only): a second class 1:10 served first (htb prio 0);
//!   packets reach it by their TOS / traffic class (u32 filters on the `--prio-tos` value,
//!   default 0xb8, DSCP EF) or by SO_PRIORITY 0x10010 (htb takes a socket priority equal
//!   to a class id as that class).
//! - `--priority-path band`: the bottleneck's queue is a pfifo_fast, whose band 0 is
//!   served first; SO_PRIORITY 6 or 7 (TC_PRIO_INTERACTIVE, CONTROL) land there. Without
//!   `--rate`, pfifo_fast becomes the root qdisc.
//!
//! Contract: [`NetnsPair::up`] either makes everything or leaves nothing: the pair is a
//! guard that deletes both namespaces (and with them the veth pair and its qdiscs) when
//! dropped, including when a later step or the run using it fails; [`NetnsPair::keep`]
//! hands that duty to `rtlab netns down`. A qdisc the kernel lacks is named as such
//! (`QdiscMissing`). Names are checked before anything runs. Nothing here prints.

use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::Command;

/// How the bottleneck is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Shaper {
    Htb,
    Tbf,
}

/// How critical traffic is kept away from the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PriorityPath {
    None,
    /// An htb class served first (TOS filter or SO_PRIORITY = class id 0x10010).
    Class,
    /// pfifo_fast band 0 (SO_PRIORITY 6 or 7).
    Band,
}

/// What `netns up` makes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NetnsConfig {
    /// Prefix of the namespace and interface names (1-13 of [A-Za-z0-9_-]).
    pub name: String,
    /// Address/prefix of side a (the client).
    pub addr_a: String,
    pub addr_b: String,
    /// IPv6 address/prefix of each side (None: IPv4 only).
    pub addr6_a: Option<String>,
    pub addr6_b: Option<String>,
    /// Bottleneck rate in bit/s.
    pub rate_bps: Option<u64>,
    pub shaper: Shaper,
    pub priority_path: PriorityPath,
    /// TOS / traffic class that the `class` priority path filters on.
    pub prio_tos: u8,
}

impl Default for NetnsConfig {
    fn default() -> Self {
        NetnsConfig {
            name: "rtlab".into(),
            addr_a: "198.18.0.1/24".into(),
            addr_b: "198.18.0.2/24".into(),
            addr6_a: Some("fd00:7274:6c61:62::1/64".into()),
            addr6_b: Some("fd00:7274:6c61:62::2/64".into()),
            rate_bps: None,
            shaper: Shaper::Htb,
            priority_path: PriorityPath::None,
            prio_tos: 0xb8,
        }
    }
}

/// The htb class SO_PRIORITY value of the `class` priority path (1:10).
pub const CLASS_SO_PRIORITY: u32 = 0x0001_0010;
/// The SO_PRIORITY that pfifo_fast puts in band 0 (TC_PRIO_INTERACTIVE).
pub const BAND_SO_PRIORITY: u32 = 6;

/// Why a pair could not be made or removed.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("{0}")]
    Invalid(String),
    #[error("`{tool}` is not installed (apt-get install iproute2)")]
    ToolMissing { tool: String },
    #[error("network namespace {0} already exists: remove it with `rtlab netns down --name {1}` or choose another --name")]
    Exists(String, String),
    #[error("qdisc '{kind}' is not available in this kernel (CONFIG_NET_SCH_{upper} / module sch_{kind}): {hint}")]
    QdiscMissing { kind: String, upper: String, hint: String },
    #[error("`{cmd}` failed: {stderr}")]
    Command { cmd: String, stderr: String },
    #[error("network namespaces need root (CAP_SYS_ADMIN and CAP_NET_ADMIN): `{cmd}`: {stderr}")]
    NoPrivilege { cmd: String, stderr: String },
    #[error("netns pair {name}: {what} within {waited_ms} ms")]
    NotReady { name: String, what: String, waited_ms: u64 },
}

fn run(tool: &str, args: &[&str]) -> Result<String, NetnsError> {
    let out = Command::new(tool).args(args).output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            NetnsError::ToolMissing { tool: tool.into() }
        } else {
            NetnsError::Command { cmd: format!("{tool} {}", args.join(" ")), stderr: e.to_string() }
        }
    })?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&out.stderr).trim().replace('\n', "; ");
    let cmd = format!("{tool} {}", args.join(" "));
    if stderr.contains("Operation not permitted") || stderr.contains("Permission denied") {
        return Err(NetnsError::NoPrivilege { cmd, stderr });
    }
    Err(NetnsError::Command { cmd, stderr })
}

/// Run a tc command that makes a qdisc of `kind`; a kernel without it is named.
fn tc_qdisc(kind: &str, args: &[&str]) -> Result<(), NetnsError> {
    match run("tc", args) {
        Err(NetnsError::Command { stderr, .. })
            if stderr.contains("Specified qdisc kind is unknown")
                || stderr.contains("Unknown qdisc") =>
        {
            let hint = match kind {
                "htb" => "try --shaper tbf",
                "tbf" => "try --shaper htb",
                _ => "try --priority-path class (htb)",
            };
            Err(NetnsError::QdiscMissing {
                kind: kind.into(),
                upper: kind.to_ascii_uppercase(),
                hint: hint.into(),
            })
        }
        r => r.map(|_| ()),
    }
}

/// Whether the network namespace `ns` exists.
pub fn exists(ns: &str) -> bool {
    Path::new("/run/netns").join(ns).exists()
}

fn check_name(name: &str) -> Result<(), NetnsError> {
    let ok = !name.is_empty()
        && name.len() <= 13
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !ok {
        return Err(NetnsError::Invalid(format!("--name '{name}': 1 to 13 letters, digits, '-' or '_' (it prefixes interface names, at most 15 characters)")));
    }
    Ok(())
}

/// The IP of an `ADDR/PREFIX` (checked).
fn ip_of(flag: &str, cidr: &str, v6: bool) -> Result<String, NetnsError> {
    let bad = || {
        NetnsError::Invalid(format!(
            "{flag} '{cidr}': not an {} address with a prefix, e.g. {}",
            if v6 { "IPv6" } else { "IPv4" },
            if v6 { "fd00::1/64" } else { "198.18.0.1/24" }
        ))
    };
    let (ip, prefix) = cidr.split_once('/').ok_or_else(bad)?;
    let max = if v6 { 128 } else { 32 };
    match (ip.parse::<std::net::IpAddr>(), prefix.parse::<u8>()) {
        (Ok(a), Ok(p)) if a.is_ipv6() == v6 && p <= max => Ok(a.to_string()),
        _ => Err(bad()),
    }
}

/// A made pair; deletes itself on drop unless kept.
#[derive(Debug)]
pub struct NetnsPair {
    pub ns_a: String,
    pub ns_b: String,
    pub dev_a: String,
    pub dev_b: String,
    /// The IPs (without prefix) of each side.
    pub ip_a: String,
    pub ip_b: String,
    pub ip6_a: Option<String>,
    pub ip6_b: Option<String>,
    pub config: NetnsConfig,
    /// The tc commands that set the queueing up (for the record).
    pub qdisc_commands: Vec<String>,
    kept: bool,
}

impl NetnsPair {
    /// Make the pair, or nothing.
    pub fn up(cfg: &NetnsConfig) -> Result<NetnsPair, NetnsError> {
        check_name(&cfg.name)?;
        let ip_a = ip_of("--addr-a", &cfg.addr_a, false)?;
        let ip_b = ip_of("--addr-b", &cfg.addr_b, false)?;
        let ip6_a = cfg.addr6_a.as_deref().map(|a| ip_of("--addr6-a", a, true)).transpose()?;
        let ip6_b = cfg.addr6_b.as_deref().map(|a| ip_of("--addr6-b", a, true)).transpose()?;
        if ip_a == ip_b || (ip6_a.is_some() && ip6_a == ip6_b) {
            return Err(NetnsError::Invalid(
                "--addr-a and --addr-b: the two sides need different addresses".into(),
            ));
        }
        if ip6_a.is_some() != ip6_b.is_some() {
            return Err(NetnsError::Invalid("--addr6-a / --addr6-b: give both or neither".into()));
        }
        if matches!(cfg.rate_bps, Some(r) if r < 8_000) {
            return Err(NetnsError::Invalid("--rate: at least 8kbit".into()));
        }
        if cfg.priority_path == PriorityPath::Class
            && (cfg.rate_bps.is_none() || cfg.shaper != Shaper::Htb)
        {
            return Err(NetnsError::Invalid("--priority-path class needs --rate with --shaper htb (the classes share the bottleneck)".into()));
        }
        let ns_a = format!("{}-a", cfg.name);
        let ns_b = format!("{}-b", cfg.name);
        for ns in [&ns_a, &ns_b] {
            if exists(ns) {
                return Err(NetnsError::Exists(ns.clone(), cfg.name.clone()));
            }
        }
        run("ip", &["netns", "add", &ns_a])?;
        // from here on, the guard removes whatever was made if a step fails
        let mut pair = NetnsPair {
            ns_a: ns_a.clone(),
            ns_b: ns_b.clone(),
            dev_a: ns_a.clone(),
            dev_b: ns_b.clone(),
            ip_a,
            ip_b,
            ip6_a,
            ip6_b,
            config: cfg.clone(),
            qdisc_commands: Vec::new(),
            kept: false,
        };
        run("ip", &["netns", "add", &ns_b])?;
        // addresses usable at once: no duplicate address detection on the pair's own link (an
        // IPv6 address, the link-local one included, is otherwise tentative for a second or
        // more, and a program started meanwhile may not use it)
        for ns in [&ns_a, &ns_b] {
            let path = format!("/run/netns/{ns}");
            let _ = rtlab_sys::net::socket_in_netns(&path, || {
                for conf in ["default", "all"] {
                    let _ =
                        std::fs::write(format!("/proc/sys/net/ipv6/conf/{conf}/accept_dad"), "0");
                }
            });
        }
        run(
            "ip",
            &[
                "link",
                "add",
                &pair.dev_a,
                "netns",
                &ns_a,
                "type",
                "veth",
                "peer",
                "name",
                &pair.dev_b,
                "netns",
                &ns_b,
            ],
        )?;
        for (ns, dev, addr, addr6) in [
            (&ns_a, &pair.dev_a, &cfg.addr_a, &cfg.addr6_a),
            (&ns_b, &pair.dev_b, &cfg.addr_b, &cfg.addr6_b),
        ] {
            run("ip", &["-n", ns, "addr", "add", addr, "dev", dev])?;
            if let Some(a6) = addr6 {
                run("ip", &["-n", ns, "addr", "add", a6, "dev", dev, "nodad"])?;
            }
            run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
            run("ip", &["-n", ns, "link", "set", dev, "up"])?;
        }
        for (ns, dev) in [(ns_a.clone(), pair.dev_a.clone()), (ns_b.clone(), pair.dev_b.clone())] {
            let cmds = queueing(cfg, &ns, &dev);
            for (kind, c) in &cmds {
                let args: Vec<&str> = c.iter().map(|s| s.as_str()).collect();
                if kind.is_empty() {
                    run("tc", &args)?;
                } else {
                    tc_qdisc(kind, &args)?;
                }
                pair.qdisc_commands.push(format!("tc {}", c.join(" ")));
            }
        }
        pair.wait_ready(std::time::Duration::from_secs(10))?;
        Ok(pair)
    }

    /// Return once the pair works: both ends RUNNING (carrier, operstate up: the kernel's
    /// link watch can take a second to say so, and a program that lists interfaces before,
    /// as DDS does at start, leaves the link out), no address tentative, and a datagram from
    /// each side answered by the other (IPv4, and IPv6 where given). At most `limit`.
    pub fn wait_ready(&self, limit: std::time::Duration) -> Result<(), NetnsError> {
        let start = std::time::Instant::now();
        let not_ready = |what: String| NetnsError::NotReady {
            name: self.config.name.clone(),
            what,
            waited_ms: start.elapsed().as_millis() as u64,
        };
        let sides = [(&self.ns_a, &self.dev_a), (&self.ns_b, &self.dev_b)];
        let link_ok = |ns: &str, dev: &str| -> Result<Option<String>, NetnsError> {
            let link = run("ip", &["-n", ns, "-o", "link", "show", "dev", dev])?;
            if !(link.contains("LOWER_UP") && link.contains("state UP")) {
                return Ok(Some(format!("{dev} in {ns} not RUNNING ({})", link.trim())));
            }
            let addr = run("ip", &["-n", ns, "-o", "addr", "show", "dev", dev])?;
            if let Some(t) = addr.lines().find(|l| l.contains("tentative")) {
                return Ok(Some(format!(
                    "an address of {dev} in {ns} still tentative ({})",
                    t.trim()
                )));
            }
            Ok(None)
        };
        loop {
            let mut waiting = None;
            for (ns, dev) in sides {
                if let Some(w) = link_ok(ns, dev)? {
                    waiting = Some(w);
                    break;
                }
            }
            match waiting {
                None => break,
                Some(w) if start.elapsed() >= limit => return Err(not_ready(w)),
                Some(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
        let mut pairs = vec![(self.ip_a.as_str(), self.ip_b.as_str())];
        if let (Some(a), Some(b)) = (&self.ip6_a, &self.ip6_b) {
            pairs.push((a, b));
        }
        for (a, b) in pairs {
            let ip =
                |s: &str| s.parse::<std::net::IpAddr>().map_err(|e| not_ready(format!("{s}: {e}")));
            let (a, b) = (ip(a)?, ip(b)?);
            let left =
                limit.saturating_sub(start.elapsed()).max(std::time::Duration::from_millis(500));
            self.answers(a, b, left).map_err(not_ready)?;
        }
        Ok(())
    }

    /// A datagram from side a (`a`) to side b (`b`) and back, within `limit`.
    fn answers(
        &self,
        a: std::net::IpAddr,
        b: std::net::IpAddr,
        limit: std::time::Duration,
    ) -> Result<(), String> {
        use std::net::{SocketAddr, UdpSocket};
        let open = |ns: &str, ip: std::net::IpAddr| -> Result<UdpSocket, String> {
            rtlab_sys::net::socket_in_netns(&format!("/run/netns/{ns}"), move || {
                UdpSocket::bind(SocketAddr::new(ip, 0))
            })
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("binding {ip} in {ns}: {e}"))
        };
        let (sa, sb) = (open(&self.ns_a, a)?, open(&self.ns_b, b)?);
        let to_b = sb.local_addr().map_err(|e| e.to_string())?;
        for s in [&sa, &sb] {
            s.set_read_timeout(Some(std::time::Duration::from_millis(100)))
                .map_err(|e| e.to_string())?;
        }
        let end = std::time::Instant::now() + limit;
        let mut buf = [0u8; 16];
        while std::time::Instant::now() < end {
            let _ = sa.send_to(b"rtlab-netns-up", to_b);
            if let Ok((_, from)) = sb.recv_from(&mut buf) {
                let _ = sb.send_to(b"rtlab-netns-up", from);
                if sa.recv_from(&mut buf).is_ok() {
                    return Ok(());
                }
            }
        }
        Err(format!("{a} ({}) and {b} ({}) did not answer each other", self.ns_a, self.ns_b))
    }

    /// Leave the pair in place after this guard is gone (`rtlab netns up`); `down` removes it.
    pub fn keep(mut self) {
        self.kept = true;
    }

    /// `/run/netns/...` of side a and b.
    pub fn path_a(&self) -> String {
        format!("/run/netns/{}", self.ns_a)
    }
    pub fn path_b(&self) -> String {
        format!("/run/netns/{}", self.ns_b)
    }

    /// The qdiscs on side a's veth end, as `tc -s qdisc show` prints them.
    pub fn qdisc_stats(&self) -> String {
        run("tc", &["-n", &self.ns_a, "-s", "qdisc", "show", "dev", &self.dev_a])
            .unwrap_or_default()
    }

    /// How a probe gets onto the priority path (None: there is none).
    pub fn priority_hint(&self) -> Option<String> {
        match self.config.priority_path {
            PriorityPath::None => None,
            PriorityPath::Class => Some(format!(
                "--tos {:#04x} or --so-priority {CLASS_SO_PRIORITY:#x} (htb class 1:10)",
                self.config.prio_tos
            )),
            PriorityPath::Band => {
                Some(format!("--so-priority {BAND_SO_PRIORITY} (pfifo_fast band 0)"))
            }
        }
    }
}

impl Drop for NetnsPair {
    fn drop(&mut self) {
        if !self.kept {
            for ns in [&self.ns_a, &self.ns_b] {
                if exists(ns) {
                    let _ = run("ip", &["netns", "del", ns]);
                }
            }
        }
    }
}

/// Remove the pair `name` (both namespaces, hence the veth pair and its qdiscs).
/// Returns the namespaces removed (none: nothing was there).
pub fn down(name: &str) -> Result<Vec<String>, NetnsError> {
    check_name(name)?;
    let mut removed = Vec::new();
    for side in ["a", "b"] {
        let ns = format!("{name}-{side}");
        if exists(&ns) {
            run("ip", &["netns", "del", &ns])?;
            removed.push(ns);
        }
    }
    Ok(removed)
}

/// One tc command: the qdisc kind it makes ("" for classes and filters) and its arguments.
type TcCommand = (&'static str, Vec<String>);

/// The tc commands for one veth end: (qdisc kind made, or "" for classes and filters; args).
fn queueing(cfg: &NetnsConfig, ns: &str, dev: &str) -> Vec<TcCommand> {
    // `tc -n NS` then the words (a veth end's name holds no space: check_name)
    let tc = |kind: &'static str, words: String| -> TcCommand {
        let args = ["-n", ns].into_iter().map(String::from);
        (kind, args.chain(words.split_whitespace().map(String::from)).collect())
    };
    let band = cfg.priority_path == PriorityPath::Band;
    let mut out = Vec::new();
    match cfg.rate_bps {
        None if band => out.push(tc("pfifo_fast", format!("qdisc add dev {dev} root pfifo_fast"))),
        None => {}
        Some(r) if cfg.shaper == Shaper::Htb => htb(cfg, r, dev, &tc, &mut out),
        Some(r) => {
            // burst: 1 ms at the rate, at least two full frames
            let burst = (r / 8 / 1000).max(3028);
            out.push(tc(
                "tbf",
                format!("qdisc add dev {dev} root handle 1: tbf rate {r}bit burst {burst} latency 100ms"),
            ));
            if band {
                out.push(tc(
                    "pfifo_fast",
                    format!("qdisc add dev {dev} parent 1:1 handle 10: pfifo_fast"),
                ));
            }
        }
    }
    out
}

/// [`queueing`] with an htb shaper of `r` bit/s: a root class at the rate; the priority path
/// `class` a class of a tenth of it at prio 0 for the probe's TOS (IPv4 and IPv6 filters),
/// the rest for all else; `band` a pfifo_fast under the one class.
fn htb(
    cfg: &NetnsConfig,
    r: u64,
    dev: &str,
    tc: &dyn Fn(&'static str, String) -> TcCommand,
    out: &mut Vec<TcCommand>,
) {
    let class = |parent: &str, id: &str, rest: String| {
        tc("", format!("class add dev {dev} parent {parent} classid {id} htb {rest} quantum 3028"))
    };
    out.push(tc("htb", format!("qdisc add dev {dev} root handle 1: htb default 20")));
    out.push(class("1:", "1:1", format!("rate {r}bit ceil {r}bit")));
    match cfg.priority_path {
        PriorityPath::Class => {
            let small = (r / 10).max(8_000);
            let rest = (r - r / 10).max(8_000);
            out.push(class("1:1", "1:10", format!("rate {small}bit ceil {r}bit prio 0")));
            out.push(class("1:1", "1:20", format!("rate {rest}bit ceil {r}bit prio 1")));
            let tos = format!("{:#04x}", cfg.prio_tos);
            out.push(tc("", format!("filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip tos {tos} 0xfc flowid 1:10")));
            out.push(tc("", format!("filter add dev {dev} parent 1: protocol ipv6 prio 2 u32 match ip6 priority {tos} 0xfc flowid 1:10")));
        }
        other => {
            out.push(class("1:1", "1:20", format!("rate {r}bit ceil {r}bit")));
            if other == PriorityPath::Band {
                out.push(tc(
                    "pfifo_fast",
                    format!("qdisc add dev {dev} parent 1:20 handle 20: pfifo_fast"),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_addresses_are_checked_before_anything_runs() {
        let bad = |f: &dyn Fn(&mut NetnsConfig)| {
            let mut c = NetnsConfig { name: "rtlab-unit-x".into(), ..Default::default() };
            f(&mut c);
            NetnsPair::up(&c).unwrap_err().to_string()
        };
        assert!(bad(&|c| c.name = "a name".into()).contains("--name"));
        assert!(bad(&|c| c.name = "much-too-long-name".into()).contains("13"));
        assert!(bad(&|c| c.addr_a = "198.18.0.1".into()).contains("--addr-a"));
        assert!(bad(&|c| c.addr_b = "fd00::1/64".into()).contains("IPv4"));
        assert!(bad(&|c| c.addr6_a = Some("10.0.0.1/8".into())).contains("IPv6"));
        assert!(bad(&|c| c.addr_b = c.addr_a.clone()).contains("different"));
        assert!(bad(&|c| c.priority_path = PriorityPath::Class).contains("--rate"));
        assert!(!exists("rtlab-unit-x-a"));
    }

    #[test]
    fn queueing_commands_follow_the_options() {
        let mut c = NetnsConfig {
            rate_bps: Some(100_000_000),
            priority_path: PriorityPath::Class,
            ..Default::default()
        };
        let cmds = queueing(&c, "n-a", "n-a");
        let text: Vec<String> = cmds.iter().map(|(_, a)| a.join(" ")).collect();
        assert!(text[0].ends_with("root handle 1: htb default 20"), "{text:?}");
        assert!(text.iter().any(|t| t.contains("classid 1:10") && t.contains("prio 0")));
        assert!(text.iter().any(|t| t.contains("match ip tos 0xb8 0xfc flowid 1:10")));
        assert!(text.iter().any(|t| t.contains("match ip6 priority 0xb8 0xfc flowid 1:10")));
        c.priority_path = PriorityPath::Band;
        c.shaper = Shaper::Tbf;
        let text: Vec<String> =
            queueing(&c, "n-a", "n-a").iter().map(|(_, a)| a.join(" ")).collect();
        assert_eq!(text.len(), 2);
        assert!(text[0].contains("tbf rate 100000000bit burst 12500 latency 100ms"));
        assert!(text[1].contains("parent 1:1 handle 10: pfifo_fast"));
        c.rate_bps = None;
        assert_eq!(queueing(&c, "n", "d").len(), 1);
        c.priority_path = PriorityPath::None;
        assert!(queueing(&c, "n", "d").is_empty());
    }

    fn is_root() -> bool {
        std::fs::read_to_string("/proc/self/status")
            .map(|s| {
                s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
            })
            .unwrap_or(false)
    }

    #[test]
    fn root_an_absent_qdisc_is_named_and_a_failed_setup_leaves_nothing() {
        if !is_root() {
            rtlab_sys::test_skip::skipped(format_args!("needs root (CI runs as root)"));
            return;
        }
        let name = format!("rtq{}", std::process::id() % 100_000);
        // a step that fails after the namespaces and the veth exist: the kernel refuses a
        // multicast address on an interface
        let c = NetnsConfig {
            name: name.clone(),
            addr6_b: Some("ff02::1/64".into()),
            ..Default::default()
        };
        let e = NetnsPair::up(&c).unwrap_err().to_string();
        assert!(e.contains("ff02::1/64"), "{e}");
        assert!(
            !exists(&format!("{name}-a")) && !exists(&format!("{name}-b")),
            "the guard removed what was made"
        );
        // a qdisc kind no kernel has
        let pair =
            NetnsPair::up(&NetnsConfig { name: name.clone(), ..Default::default() }).unwrap();
        let e = tc_qdisc(
            "rtlabnosuch",
            &["-n", &pair.ns_a, "qdisc", "add", "dev", &pair.dev_a, "root", "rtlabnosuch"],
        )
        .unwrap_err();
        assert!(matches!(e, NetnsError::QdiscMissing { .. }), "{e}");
        assert!(e.to_string().contains("sch_rtlabnosuch"), "{e}");
        drop(pair);
        assert!(!exists(&format!("{name}-a")));
    }
}
