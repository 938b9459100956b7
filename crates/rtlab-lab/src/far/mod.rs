//! The far side: a second host (another computer over ssh, or a network namespace of this
//! one) that runs the reflector, the pong, the subscribers, a load and a profile of a run,
//! through `rtlab agent`.
//!
//! - [`protocol`]: the versioned line protocol between the near rtlab and the agent;
//! - [`agent`]: the agent (`rtlab agent`), which always puts its host back;
//! - [`link`]: the near side's end: starts the agent, checks versions, keeps the link alive,
//!   sends requests and routes role events.
//!
//! Contract: `--far ssh:[USER@]HOST[:PORT]` runs `rtlab agent` there through OpenSSH (ssh does
//! the authentication and encryption; rtlab opens no listening port of its own; `RTLAB_SSH`
//! replaces the `ssh` command, e.g. `ssh -F my_config`, and `RTLAB_FAR_BIN` the remote
//! `rtlab`); `--far netns:NAME` runs this binary's agent in that network namespace (or the
//! binary `RTLAB_FAR_BIN` names: an aarch64 rtlab under qemu-user, say). Across
//! hosts only round trips are valid: [`FarSpec::same_clock`] says when one-way latencies are.

pub mod agent;
pub mod clock;
pub mod link;
pub mod protocol;
pub mod roles;
pub mod run;
pub mod tracer;

use serde::{Deserialize, Serialize};

/// Where the far side runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum FarSpec {
    /// Another computer, reached by OpenSSH.
    Ssh { user: Option<String>, host: String, port: Option<u16> },
    /// A network namespace of this machine (`ip netns`).
    Netns(String),
    /// In a scenario: side b of the two namespaces made for the case (the near side in a),
    /// so the probe, its far side and a traffic load cross the same veth link.
    Pair,
}

impl FarSpec {
    /// `ssh:[USER@]HOST[:PORT]` or `netns:NAME`.
    pub fn parse(s: &str) -> Result<FarSpec, String> {
        let bad = || format!("'{s}': expected ssh:[USER@]HOST[:PORT], netns:NAME or pair");
        if s == "pair" {
            return Ok(FarSpec::Pair);
        }
        if let Some(name) = s.strip_prefix("netns:") {
            let ok = !name.is_empty()
                && name.len() <= 64
                && name.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
                && !name.starts_with('.');
            return if ok { Ok(FarSpec::Netns(name.into())) } else { Err(bad()) };
        }
        let rest = s.strip_prefix("ssh:").ok_or_else(bad)?;
        let (user, hostport) = match rest.rsplit_once('@') {
            Some((u, h)) if !u.is_empty() => (Some(u.to_string()), h),
            Some(_) => return Err(bad()),
            None => (None, rest),
        };
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or_else(bad)?;
            let port = match after.strip_prefix(':') {
                Some(p) => Some(p.parse::<u16>().map_err(|_| bad())?),
                None if after.is_empty() => None,
                None => return Err(bad()),
            };
            (h.to_string(), port)
        } else {
            match hostport.split_once(':') {
                Some((h, p)) => (h.to_string(), Some(p.parse::<u16>().map_err(|_| bad())?)),
                None => (hostport.to_string(), None),
            }
        };
        let host_ok = !host.is_empty()
            && !host.starts_with('-')
            && host.chars().all(|c| c.is_ascii_alphanumeric() || "._-:".contains(c));
        if !host_ok || port == Some(0) {
            return Err(bad());
        }
        Ok(FarSpec::Ssh { user, host, port })
    }

    /// Whether the far side reads the same clock as this process: a namespace of this
    /// machine does; another computer does not (unless the user states its clocks are
    /// synchronised).
    pub fn same_clock(&self) -> bool {
        matches!(self, FarSpec::Netns(_) | FarSpec::Pair)
    }
}

impl std::fmt::Display for FarSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FarSpec::Netns(n) => write!(f, "netns:{n}"),
            FarSpec::Pair => write!(f, "pair"),
            FarSpec::Ssh { user, host, port } => {
                write!(f, "ssh:")?;
                if let Some(u) = user {
                    write!(f, "{u}@")?;
                }
                if host.contains(':') {
                    write!(f, "[{host}]")?;
                } else {
                    write!(f, "{host}")?;
                }
                if let Some(p) = port {
                    write!(f, ":{p}")?;
                }
                Ok(())
            }
        }
    }
}

impl From<FarSpec> for String {
    fn from(f: FarSpec) -> String {
        f.to_string()
    }
}

impl TryFrom<String> for FarSpec {
    type Error = String;
    fn try_from(s: String) -> Result<FarSpec, String> {
        FarSpec::parse(&s)
    }
}

/// How one-way latencies across the link may be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Clocks {
    /// Both ends on one machine: one clock.
    OneHost,
    /// Two hosts whose clocks the user stated are synchronised (`--synced-clocks`).
    StatedSynchronised,
    /// Two hosts, clocks not known to agree: round trips only.
    RoundTripsOnly,
    /// Two hosts, the far clock's offset measured over the link (`rtlab trace --far`):
    /// one-way figures across them carry its uncertainty.
    MeasuredOffset,
}

impl Clocks {
    pub fn of(far: &FarSpec, synced_clocks: bool) -> Clocks {
        if far.same_clock() {
            Clocks::OneHost
        } else if synced_clocks {
            Clocks::StatedSynchronised
        } else {
            Clocks::RoundTripsOnly
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn far_specs_parse_and_print_back() {
        for s in [
            "netns:rtlab-b",
            "ssh:robot2",
            "ssh:root@robot2:2222",
            "ssh:[fd00::2]:22",
            "ssh:10.0.0.2",
        ] {
            let f = FarSpec::parse(s).unwrap();
            assert_eq!(f.to_string(), s);
        }
        assert_eq!(
            FarSpec::parse("ssh:me@h:22").unwrap(),
            FarSpec::Ssh { user: Some("me".into()), host: "h".into(), port: Some(22) }
        );
        for bad in [
            "robot2",
            "ssh:",
            "ssh:@h",
            "ssh:h:0",
            "ssh:h:x",
            "ssh:-oProxyCommand=x",
            "netns:",
            "netns:a/b",
            "tcp:h",
        ] {
            let e = FarSpec::parse(bad).unwrap_err();
            assert!(
                e.contains("expected ssh:[USER@]HOST[:PORT], netns:NAME or pair"),
                "{bad}: {e}"
            );
        }
        assert!(FarSpec::parse("netns:x").unwrap().same_clock());
        assert_eq!(Clocks::of(&FarSpec::parse("ssh:h").unwrap(), false), Clocks::RoundTripsOnly);
    }
}
