//! `rtlab monitor`'s configuration file (TOML), read at the start and at each SIGHUP.
//!
//! Contract: [`MonitorConfig::load`] reads and checks the whole file, or says in one line
//! what is wrong and where (`FILE: key: why`); a monitor keeps its running configuration when
//! a reload fails. Durations and rates are written as everywhere in rtlab (`10s`, `100hz`).

use crate::config::{Dur, Rate};
use rtlab_core::rt::Policy;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The timer canary: a thread woken at a low rate at the application's priority on its CPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CanaryConfig {
    /// false: no canary (a monitor of topics alone).
    pub enabled: bool,
    pub rate: Rate,
    pub policy: Policy,
    pub priority: i32,
    /// The CPU it runs on (None: any).
    pub cpu: Option<usize>,
    /// A wake-up later than this is a miss (default: the period).
    pub deadline: Option<Dur>,
}

impl Default for CanaryConfig {
    fn default() -> Self {
        CanaryConfig {
            enabled: true,
            rate: Rate { text: "100hz".into(), period_ns: 10_000_000 },
            policy: Policy::Fifo,
            priority: 80,
            cpu: None,
            deadline: None,
        }
    }
}

impl CanaryConfig {
    pub fn deadline_ns(&self) -> i64 {
        self.deadline.map_or(self.rate.period_ns, |d| d.0)
    }
}

/// A watched topic.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicConfig {
    /// Its ROS 2 name (`/scan`).
    pub name: String,
    /// Its expected rate (default: from its writers' Deadline QoS, one message a deadline;
    /// with neither, no rate is checked: only stale and lost).
    #[serde(default)]
    pub rate: Option<Rate>,
    /// How far below the rate an interval may fall and still be ok (a fraction: 0.1 is 10 %).
    #[serde(default = "default_tolerance")]
    pub tolerance: f64,
    /// No message for this long is stale (default: three periods).
    #[serde(default)]
    pub stale: Option<Dur>,
    /// The message starts with a std_msgs/Header and the publisher's clock agrees with this
    /// one: a delay above this is late (default: the delay is not read).
    #[serde(default)]
    pub header_delay: Option<Dur>,
}

fn default_tolerance() -> f64 {
    0.1
}

impl TopicConfig {
    /// No message for this long is stale: as given, else three periods of `period_ns` (the
    /// rate's, or the writers' deadline), else 3 s.
    pub fn stale_ns_with(&self, period_ns: Option<i64>) -> i64 {
        self.stale.map_or(3 * period_ns.unwrap_or(1_000_000_000), |d| d.0)
    }
    /// [`TopicConfig::stale_ns_with`] the configured rate.
    pub fn stale_ns(&self) -> i64 {
        self.stale_ns_with(self.rate.as_ref().map(|r| r.period_ns))
    }
    /// The DDS topic of a ROS 2 name (`/scan` -> `rt/scan`).
    pub fn dds_topic(&self) -> String {
        format!("rt{}", self.name)
    }
}

/// A chain of topics through the application, traced in its running processes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainConfig {
    /// Its topics, first to last (`["/scan", "/filtered", "/cmd_vel"]`).
    pub topics: Vec<String>,
    /// The processes to probe: each whose command line contains one of these.
    pub processes: Vec<String>,
    /// A message later than this end to end is a miss.
    #[serde(default)]
    pub deadline: Option<Dur>,
}

impl ChainConfig {
    /// `/scan,/filtered`: the label of its metrics.
    pub fn name(&self) -> String {
        self.topics.join(",")
    }
}

/// The whole file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MonitorConfig {
    /// The interval of the verdicts, the maxima and the worst cases.
    pub interval: Dur,
    /// Where /metrics is served; an address that is not loopback needs `token`.
    pub listen: String,
    pub token: Option<String>,
    /// Where the worst cases are kept (`worst.jsonl`, the newest 1000).
    pub state: String,
    /// The store the intervals go to (a SQLite file or postgres://).
    pub db: String,
    /// How often the intervals so far are stored (one case `monitor/intervals` each).
    pub store_every: Dur,
    /// How long its stored runs are kept (older ones of this file are removed as new ones
    /// are stored).
    pub keep: Dur,
    /// The file it was read from (not a key).
    #[serde(skip)]
    pub source: String,
    /// A canary's interval maximum above this is a worst case too (besides the day's highest).
    pub limit: Option<Dur>,
    /// Arm the kernel tracer: a canary wake-up later than this is traced and explained (the
    /// first 8 of each arming; it is armed again after each explained spike).
    pub trace_on_spike: Option<Dur>,
    /// The DDS domain of the topics (ROS_DOMAIN_ID).
    pub domain: u32,
    /// The interface to read the topics on (default: loopback only).
    pub interface: Option<String>,
    /// Unicast discovery peers.
    pub peer: Vec<String>,
    /// The timer canary (on unless `enabled = false`).
    pub canary: CanaryConfig,
    #[serde(rename = "topic")]
    pub topics: Vec<TopicConfig>,
    /// Chains traced in the application's running processes (uprobes: root).
    #[serde(rename = "chain")]
    pub chains: Vec<ChainConfig>,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            interval: Dur::s(10),
            listen: "127.0.0.1:9464".into(),
            token: None,
            state: "/var/lib/rtlab/monitor".into(),
            db: "/var/lib/rtlab/results/rtlab.db".into(),
            store_every: Dur::s(3600),
            keep: Dur::s(30 * 24 * 3600),
            source: String::new(),
            limit: None,
            trace_on_spike: None,
            domain: 0,
            interface: None,
            peer: Vec::new(),
            canary: CanaryConfig::default(),
            topics: Vec::new(),
            chains: Vec::new(),
        }
    }
}

impl MonitorConfig {
    /// Read and check `path`; one line naming the file and the key when it is wrong.
    pub fn load(path: &Path) -> Result<MonitorConfig, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut c: MonitorConfig = toml::from_str(&text).map_err(|e| {
            let m = e.message().trim().to_string();
            let line = e.span().map(|s| text[..s.start].lines().count().max(1));
            match line {
                Some(l) => format!("{}:{l}: {m}", path.display()),
                None => format!("{}: {m}", path.display()),
            }
        })?;
        c.check().map_err(|(key, why)| format!("{}: {key}: {why}", path.display()))?;
        c.source = path.display().to_string();
        Ok(c)
    }

    /// The file's sense beyond its types: (key, why).
    pub fn check(&self) -> Result<(), (String, String)> {
        let bad = |k: &str, w: String| Err((k.to_string(), w));
        if self.interval.0 < 100_000_000 {
            return bad("interval", format!("{} ns: at least 100ms", self.interval.0));
        }
        if self.trace_on_spike.is_some() && !self.canary.enabled {
            return bad("trace_on_spike", "traces the canary's spikes: enable the canary".into());
        }
        if self.keep.0 < self.store_every.0 {
            return bad("keep", "shorter than store_every".into());
        }
        if self.store_every.0 < self.interval.0 {
            return bad("store_every", "shorter than the interval".into());
        }
        let addr: std::net::SocketAddr = match self.listen.parse() {
            Ok(a) => a,
            Err(_) => return bad("listen", format!("'{}': expected ADDR:PORT", self.listen)),
        };
        if !addr.ip().is_loopback() && self.token.as_deref().map_or(true, str::is_empty) {
            return bad(
                "listen",
                format!(
                    "{}: not a loopback address; another address only with a token",
                    self.listen
                ),
            );
        }
        if self.canary.enabled {
            let c = &self.canary;
            if c.rate.period_ns < 100_000 {
                return bad(
                    "canary.rate",
                    format!("{}: at most 10 kHz (a canary, not a load)", c.rate.text),
                );
            }
            if c.policy.is_realtime() && !(1..=99).contains(&c.priority) {
                return bad("canary.priority", format!("{}: 1 to 99", c.priority));
            }
        }
        for (i, t) in self.topics.iter().enumerate() {
            let k = |f: &str| format!("topic[{i}].{f}");
            if !t.name.starts_with('/') || t.name.len() < 2 || t.name.contains(char::is_whitespace)
            {
                return bad(&k("name"), format!("'{}': a ROS 2 name (/scan)", t.name));
            }
            if self.topics[..i].iter().any(|o| o.name == t.name) {
                return bad(&k("name"), format!("'{}' is watched twice", t.name));
            }
            if !(0.0..1.0).contains(&t.tolerance) {
                return bad(
                    &k("tolerance"),
                    format!("{}: a fraction from 0 to below 1", t.tolerance),
                );
            }
        }
        for (i, c) in self.chains.iter().enumerate() {
            let ok =
                c.topics.len() >= 2 && c.topics.iter().all(|t| t.starts_with('/') && t.len() > 1);
            if !ok {
                return bad(
                    &format!("chain[{i}].topics"),
                    "two topics or more, each a ROS 2 name".into(),
                );
            }
            if c.processes.is_empty() || c.processes.iter().any(|p| p.trim().is_empty()) {
                return bad(
                    &format!("chain[{i}].processes"),
                    "a part of each command line to probe".into(),
                );
            }
        }
        if !self.canary.enabled && self.topics.is_empty() && self.chains.is_empty() {
            return bad("topic", "nothing to watch: no canary and no topic".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<MonitorConfig, String> {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.toml");
        std::fs::write(&p, text).unwrap();
        MonitorConfig::load(&p).map_err(|e| e.replace(&p.display().to_string(), "FILE"))
    }

    #[test]
    fn a_file_is_read_whole_or_refused_in_one_line() {
        let c = load(
            "interval = '1s'\n[canary]\nrate = '1khz'\ncpu = 1\n\n[[topic]]\nname = '/scan'\nrate = '100hz'\ntolerance = 0.2\n",
        )
        .unwrap();
        assert_eq!(c.interval.0, 1_000_000_000);
        let can = &c.canary;
        assert_eq!(
            (can.rate.period_ns, can.cpu, can.deadline_ns()),
            (1_000_000, Some(1), 1_000_000)
        );
        assert_eq!(c.topics[0].stale_ns(), 30_000_000);
        let no_rate = load("[[topic]]\nname = '/a'\n").unwrap();
        assert_eq!(no_rate.topics[0].rate, None, "the writers' deadline, or no rate");
        assert_eq!(no_rate.topics[0].stale_ns_with(Some(5_000_000)), 15_000_000);
        assert_eq!(no_rate.topics[0].stale_ns(), 3_000_000_000);
        assert_eq!(c.topics[0].dds_topic(), "rt/scan");
        assert!(load("").is_ok(), "every key has a default (the canary alone)");
        for (text, want) in [
            ("interval = '1ms'", "FILE: interval: "),
            ("listen = '0.0.0.0:9464'", "FILE: listen: 0.0.0.0:9464: not a loopback"),
            ("listen = 'x'", "FILE: listen: 'x'"),
            ("[canary]\nrate = '100khz'", "FILE: canary.rate"),
            ("[canary]\npriority = 0", "FILE: canary.priority"),
            ("[[topic]]\nname = 'scan'\nrate = '1hz'", "FILE: topic[0].name"),
            ("[[topic]]\nname = '/a'\nrate = '1hz'\ntolerance = 1.5", "FILE: topic[0].tolerance"),
            (
                "[[topic]]\nname = '/a'\nrate = '1hz'\n[[topic]]\nname = '/a'\nrate = '1hz'",
                "watched twice",
            ),
            ("colour = 'red'", "FILE:1: unknown field `colour`"),
            ("[canary]\nenabled = false", "FILE: topic: nothing to watch"),
            ("[[chain]]\ntopics = ['/a']\nprocesses = ['x']", "FILE: chain[0].topics"),
            ("[[chain]]\ntopics = ['/a', '/b']\nprocesses = []", "FILE: chain[0].processes"),
            ("[[topic]]\nname = '/a'\nrate = 5", "FILE:"),
        ] {
            let e = load(text).unwrap_err();
            assert!(e.starts_with(want) || e.contains(want), "{text}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        assert!(load("listen = '0.0.0.0:9464'\ntoken = 's3cret'").is_ok());
    }
}
