//! `rtlab netns up|down|show`: two hosts on one machine (network namespaces joined by a
//! veth pair, optional bottleneck and priority path). `up` either makes everything or
//! leaves nothing; `down` removes what `up` made (and says when there was nothing).

use clap::{Args, Subcommand, ValueEnum};
use rtlab_core::units::parse_bitrate;
use rtlab_lab::netns::{self, NetnsConfig, NetnsPair, PriorityPath, Shaper};

#[derive(Args, Debug)]
pub struct NetnsArgs {
    #[command(subcommand)]
    pub command: NetnsCommand,
}

#[derive(Subcommand, Debug)]
pub enum NetnsCommand {
    /// Make namespaces NAME-a and NAME-b joined by a veth pair.
    Up(UpArgs),
    /// Remove namespaces NAME-a and NAME-b (and with them the veth pair and its qdiscs).
    Down(NameArg),
    /// Show the addresses and queueing of a pair.
    Show(NameArg),
}

#[derive(Args, Debug)]
pub struct NameArg {
    /// Prefix of the namespace and interface names.
    #[arg(long, default_value = "rtlab")]
    pub name: String,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShaperArg {
    Htb,
    Tbf,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PriorityPathArg {
    /// Everything shares one queue.
    None,
    /// An htb class served first: TOS --prio-tos (u32 filter) or SO_PRIORITY 1:10 (0x10010).
    Class,
    /// pfifo_fast band 0: SO_PRIORITY 6 or 7.
    Band,
}

impl From<ShaperArg> for Shaper {
    fn from(s: ShaperArg) -> Shaper {
        match s {
            ShaperArg::Htb => Shaper::Htb,
            ShaperArg::Tbf => Shaper::Tbf,
        }
    }
}

impl From<PriorityPathArg> for PriorityPath {
    fn from(p: PriorityPathArg) -> PriorityPath {
        match p {
            PriorityPathArg::None => PriorityPath::None,
            PriorityPathArg::Class => PriorityPath::Class,
            PriorityPathArg::Band => PriorityPath::Band,
        }
    }
}

#[derive(Args, Debug)]
pub struct UpArgs {
    /// Prefix of the namespace and interface names (NAME-a, NAME-b).
    #[arg(long, default_value = "rtlab")]
    pub name: String,
    /// Address/prefix of side a (the client).
    #[arg(long, default_value = "198.18.0.1/24")]
    pub addr_a: String,
    /// Address/prefix of side b (the reflector).
    #[arg(long, default_value = "198.18.0.2/24")]
    pub addr_b: String,
    /// IPv6 address/prefix of side a.
    #[arg(long, default_value = "fd00:7274:6c61:62::1/64")]
    pub addr6_a: String,
    /// IPv6 address/prefix of side b.
    #[arg(long, default_value = "fd00:7274:6c61:62::2/64")]
    pub addr6_b: String,
    /// IPv4 only.
    #[arg(long)]
    pub no_ipv6: bool,
    /// A bottleneck of this rate on each veth end, e.g. 100mbit.
    #[arg(long)]
    pub rate: Option<String>,
    /// How the bottleneck is made.
    #[arg(long, value_enum, default_value = "htb")]
    pub shaper: ShaperArg,
    /// Keep critical traffic apart from the rest.
    #[arg(long, value_enum, default_value = "none")]
    pub priority_path: PriorityPathArg,
    /// The TOS byte the class priority path filters on (default 0xb8, DSCP EF).
    #[arg(long, default_value = "0xb8")]
    pub prio_tos: String,
}

pub fn run(a: NetnsArgs) -> anyhow::Result<u8> {
    match a.command {
        NetnsCommand::Up(u) => up(u),
        NetnsCommand::Down(n) => {
            let removed = netns::down(&n.name)?;
            if removed.is_empty() {
                println!(
                    "rtlab netns down: no namespaces {0}-a / {0}-b: nothing to remove",
                    n.name
                );
            } else {
                println!("rtlab netns down: removed {}", removed.join(", "));
            }
            Ok(0)
        }
        NetnsCommand::Show(n) => {
            let mut found = false;
            for side in ["a", "b"] {
                let ns = format!("{}-{side}", n.name);
                if !netns::exists(&ns) {
                    continue;
                }
                found = true;
                println!("{ns}:");
                for (tool, args) in [
                    ("ip", vec!["-n", &ns, "-br", "addr"]),
                    ("tc", vec!["-n", &ns, "-s", "qdisc", "show", "dev", &ns]),
                    ("tc", vec!["-n", &ns, "-s", "class", "show", "dev", &ns]),
                ] {
                    if let Ok(o) = std::process::Command::new(tool).args(&args).output() {
                        print!("{}", String::from_utf8_lossy(&o.stdout));
                    }
                }
            }
            if !found {
                anyhow::bail!(
                    "no namespaces {0}-a / {0}-b (make them with `rtlab netns up --name {0}`)",
                    n.name
                );
            }
            Ok(0)
        }
    }
}

/// Flags -> NetnsConfig (the one place).
pub fn config_of(u: &UpArgs) -> anyhow::Result<NetnsConfig> {
    let tos = u.prio_tos.trim();
    let prio_tos = match tos.strip_prefix("0x") {
        Some(h) => u8::from_str_radix(h, 16),
        None => tos.parse::<u8>(),
    }
    .map_err(|_| anyhow::anyhow!("--prio-tos '{tos}': a byte, e.g. 0xb8 or 184"))?;
    Ok(NetnsConfig {
        name: u.name.clone(),
        addr_a: u.addr_a.clone(),
        addr_b: u.addr_b.clone(),
        addr6_a: (!u.no_ipv6).then(|| u.addr6_a.clone()),
        addr6_b: (!u.no_ipv6).then(|| u.addr6_b.clone()),
        rate_bps: u
            .rate
            .as_deref()
            .map(|r| parse_bitrate(r).map_err(|e| anyhow::anyhow!("--rate: {e}")))
            .transpose()?,
        shaper: u.shaper.into(),
        priority_path: u.priority_path.into(),
        prio_tos,
    })
}

fn up(u: UpArgs) -> anyhow::Result<u8> {
    let cfg = config_of(&u)?;
    let pair = NetnsPair::up(&cfg)?;
    println!(
        "rtlab netns up: {} ({}{}) <-> {} ({}{}) over veth {} / {}",
        pair.ns_a,
        pair.ip_a,
        v6(&pair.ip6_a),
        pair.ns_b,
        pair.ip_b,
        v6(&pair.ip6_b),
        pair.dev_a,
        pair.dev_b
    );
    match cfg.rate_bps {
        Some(r) => println!(
            "bottleneck: {r} bit/s ({}) on both veth ends",
            if cfg.shaper == Shaper::Htb { "htb" } else { "tbf" }
        ),
        None => println!("bottleneck: none"),
    }
    if let Some(h) = pair.priority_hint() {
        println!("priority path: {h}");
    }
    println!("reflector: rtlab udp reflect --netns {} --bind {}:9000", pair.ns_b, pair.ip_b);
    println!("client:    rtlab udp ping --netns {} --to {}:9000", pair.ns_a, pair.ip_b);
    println!("remove:    rtlab netns down --name {}", cfg.name);
    pair.keep();
    Ok(0)
}

fn v6(ip: &Option<String>) -> String {
    ip.as_deref().map(|i| format!(", {i}")).unwrap_or_default()
}
