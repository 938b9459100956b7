//! Scenario files: a matrix of probes x loads x profiles x parameters, validated with the
//! file, line and field of every error before anything runs, and expanded into cases.
//!
//! Contract: [`Scenario::parse`] either returns a scenario whose every value was checked
//! (units parse, values in range, names known) or the first error as one line
//! `FILE:LINE: FIELD: what is wrong (what is accepted)`. [`Scenario::cases`] is pure and
//! deterministic: the same file always gives the same cases in the same order.
//!
//! The format (TOML):
//! ```toml
//! name = "my-scenario"
//! duration = "10s"            # per case, unless a probe says otherwise (or `count`)
//! trace_on_spike = "2ms"      # arm ftrace per case; explain its first sample above this
//! counters = true             # kernel counters per window (default true)
//! repetitions = 1
//! loads = ["idle", "cpu"]      # built-in loads or [load.NAME] tables
//! profiles = ["no-rt", "rt-normal"]
//!
//! [[probe]]
//! kind = "timer"               # timer | udp | pubsub
//! interval = ["1ms", "10ms"]   # a list is a matrix axis
//!
//! [load.cpu]
//! kind = "cpu"                 # cpu | mem | io | hdd | stress | traffic | command
//! workers = 2
//! method = "fft"
//! ```

use crate::run::Published;
use crate::units::{parse_bitrate, parse_duration, parse_size, period_of_rate};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use toml::Spanned;

/// A scalar that may be written as a string or a number (`payload = 500` or `"4kb"`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Scalar {
    Int(i64),
    Str(String),
}

impl Scalar {
    fn text(&self) -> String {
        match self {
            Scalar::Int(i) => i.to_string(),
            Scalar::Str(s) => s.clone(),
        }
    }
}

/// One value or a list of them (a list is a matrix axis).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum OneOrMany {
    Many(Vec<Scalar>),
    One(Scalar),
}

impl OneOrMany {
    fn items(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.text()],
            OneOrMany::Many(v) => v.iter().map(Scalar::text).collect(),
        }
    }
}

type Axis = Option<Spanned<OneOrMany>>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    name: Spanned<String>,
    description: Option<String>,
    duration: Option<Spanned<String>>,
    count: Option<Spanned<i64>>,
    repetitions: Option<Spanned<i64>>,
    deadline: Option<Spanned<String>>,
    trace_on_spike: Option<Spanned<String>>,
    counters: Option<bool>,
    loads: Option<Spanned<Vec<String>>>,
    profiles: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    probe: Vec<ProbeSpec>,
    #[serde(default)]
    load: BTreeMap<String, Spanned<LoadFileSpec>>,
    #[serde(default)]
    published: Vec<Spanned<PublishedSpec>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProbeSpec {
    kind: Spanned<String>,
    duration: Option<Spanned<String>>,
    count: Option<Spanned<i64>>,
    repetitions: Option<Spanned<i64>>,
    deadline: Option<Spanned<String>>,
    trace_on_spike: Option<Spanned<String>>,
    counters: Option<bool>,
    loads: Option<Spanned<Vec<String>>>,
    profiles: Option<Spanned<Vec<String>>>,
    // timer
    interval: Axis,
    mode: Axis,
    /// Overrides the profile's policy for the probe threads (S4 compares rr and fifo).
    policy: Axis,
    threads: Axis,
    distance: Option<Spanned<String>>,
    // udp and pubsub
    period: Axis,
    payload: Axis,
    loss_timeout: Option<Spanned<String>>,
    so_priority: Axis,
    // pubsub
    transport: Axis,
    rate: Axis,
    subscribers: Axis,
    reliability: Axis,
    history: Axis,
    durability: Axis,
    wait: Axis,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadFileSpec {
    kind: Spanned<String>,
    workers: Option<Spanned<i64>>,
    method: Option<String>,
    rate: Option<Spanned<String>>,
    direction: Option<Spanned<String>>,
    protocol: Option<Spanned<String>>,
    command: Option<Vec<String>>,
    cpu: Option<i64>,
    vm: Option<i64>,
    io: Option<i64>,
    hdd: Option<i64>,
    /// Percent of each CPU worker's time busy (stress-ng --cpu-load), S4's 80 %.
    cpu_load: Option<i64>,
    /// For kind = "combined": names of other loads (built in or defined) run together.
    parts: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PublishedSpec {
    /// Which cases: every key must equal the case's probe/load/profile/param of that name.
    #[serde(rename = "match")]
    matches: BTreeMap<String, Scalar>,
    source: String,
    label: String,
    min_us: Option<f64>,
    avg_us: Option<f64>,
    max_us: Option<f64>,
    median_us: Option<f64>,
    missed: Option<u64>,
    lost: Option<u64>,
    of: Option<u64>,
}

/// A load as the runner starts it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LoadSpec {
    Idle,
    /// stress-ng workers: cpu (with a method), vm, io, hdd — S2's `-c 4 --cpu-method fft`,
    /// S3's 8/8/8/8.
    Stress {
        cpu: u32,
        cpu_method: Option<String>,
        cpu_load: Option<u8>,
        vm: u32,
        io: u32,
        hdd: u32,
    },
    /// iperf3 traffic at a bit rate; `direction` tx (from the probe's side) or rx (towards it).
    Traffic {
        bits_per_second: u64,
        direction: String,
        protocol: String,
    },
    /// A user command, started and stopped like the others.
    Command {
        argv: Vec<String>,
    },
    /// Several loads at once (S3: "load + 40 Mbps").
    Combined {
        parts: Vec<LoadSpec>,
    },
}

/// Built-in loads by name.
pub fn builtin_load(name: &str) -> Option<LoadSpec> {
    let stress = |cpu, vm, io, hdd, m: Option<&str>| LoadSpec::Stress {
        cpu,
        cpu_method: m.map(str::to_string),
        cpu_load: None,
        vm,
        io,
        hdd,
    };
    Some(match name {
        "idle" => LoadSpec::Idle,
        "cpu" => stress(0, 0, 0, 0, Some("fft")), // 0 = one worker per online CPU
        "stress" => stress(8, 8, 8, 8, None),
        "tx" => LoadSpec::Traffic {
            bits_per_second: 100_000_000,
            direction: "tx".into(),
            protocol: "udp".into(),
        },
        "rx" => LoadSpec::Traffic {
            bits_per_second: 100_000_000,
            direction: "rx".into(),
            protocol: "udp".into(),
        },
        _ => return None,
    })
}

/// Built-in profile names (DESIGN.md "profile").
pub const PROFILES: &[&str] =
    &["no-rt", "rt-normal", "rt-affinities", "rt-isolation", "rt-kthreads"];
/// Probe kinds.
pub const PROBES: &[&str] = &["timer", "udp", "pubsub"];
/// Pub/sub transports (DESIGN.md "transport").
pub const TRANSPORTS: &[&str] = &["intra", "shm", "zenoh", "dds", "udp"];

/// One cell of the matrix, one repetition: everything the runner needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseSpec {
    pub index: u32,
    pub name: String,
    pub probe: String,
    pub load: String,
    pub load_spec: LoadSpec,
    pub profile: String,
    /// Matrix parameters, as written (units kept): interval, mode, payload, transport...
    pub params: BTreeMap<String, String>,
    pub repetition: u32,
    pub duration_ns: Option<i64>,
    pub count: Option<u64>,
    pub deadline_ns: Option<i64>,
    /// Arm ftrace for this case and explain its first sample above this (root).
    pub trace_on_spike_ns: Option<i64>,
    /// Sample the kernel counters per window.
    pub counters: bool,
    pub published: Option<Published>,
}

impl CaseSpec {
    /// How long the case is expected to measure, for progress and ETA.
    pub fn planned_ns(&self) -> i64 {
        if let Some(d) = self.duration_ns {
            return d;
        }
        let per = ["interval", "period"]
            .iter()
            .find_map(|k| self.params.get(*k).and_then(|v| parse_duration(v).ok()))
            .or_else(|| self.params.get("rate").and_then(|r| period_of_rate(r).ok()))
            .map(|n| n.0)
            .unwrap_or(1_000_000);
        self.count.map(|c| c as i64 * per).unwrap_or(0)
    }
}

/// A validated scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    /// Where it came from (file path or `preset NAME`), used in error messages.
    pub origin: String,
    pub text: String,
    cases: Vec<CaseSpec>,
}

/// An error in a scenario: origin, line, field, message — printed as one line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{origin}:{line}: {field}: {message}")]
pub struct ScenarioError {
    pub origin: String,
    pub line: usize,
    pub field: String,
    pub message: String,
}

struct Ctx<'a> {
    origin: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn line_of(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())].bytes().filter(|&b| b == b'\n').count() + 1
    }
    fn err(
        &self,
        span: std::ops::Range<usize>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> ScenarioError {
        ScenarioError {
            origin: self.origin.into(),
            line: self.line_of(span.start),
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Which fields each probe kind takes.
fn allowed(kind: &str) -> &'static [&'static str] {
    match kind {
        "timer" => &["interval", "mode", "threads", "distance", "policy"],
        "udp" => &["period", "payload", "loss_timeout", "so_priority", "mode"],
        "pubsub" => &[
            "transport",
            "payload",
            "rate",
            "period",
            "subscribers",
            "reliability",
            "history",
            "durability",
            "wait",
            "mode",
            "loss_timeout",
        ],
        _ => &[],
    }
}

fn scale_ns(ns: i64, scale: f64) -> i64 {
    ((ns as f64 * scale).round() as i64).max(1)
}

impl Scenario {
    /// Parse and validate. `origin` names the file (or preset) in errors. `scale`
    /// multiplies every duration and count (`--scale`; 1.0 = as written).
    pub fn parse(origin: &str, text: &str, scale: f64) -> Result<Scenario, ScenarioError> {
        let ctx = Ctx { origin, text };
        let file: FileSpec = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let msg = e.message().to_string();
            // toml names the unknown or mistyped key in its message
            let field = msg.split('`').nth(1).unwrap_or("(file)").to_string();
            ctx.err(span, field, msg.replace('\n', " "))
        })?;
        if !(scale > 0.0 && scale.is_finite()) {
            return Err(ScenarioError {
                origin: origin.into(),
                line: 0,
                field: "--scale".into(),
                message: format!("{scale} must be above zero"),
            });
        }
        let name = file.name.get_ref().trim().to_string();
        if name.is_empty() {
            return Err(ctx.err(file.name.span(), "name", "must not be empty"));
        }
        if file.probe.is_empty() {
            return Err(ctx.err(0..0, "probe", "no [[probe]] table: a scenario needs at least one probe (kind = \"timer\" | \"udp\" | \"pubsub\")"));
        }

        // loads: built-ins and [load.NAME] tables
        let mut loads: BTreeMap<String, LoadSpec> = BTreeMap::new();
        for (lname, spec) in &file.load {
            if spec.get_ref().kind.get_ref() != "combined" {
                loads.insert(lname.clone(), load_of(&ctx, lname, spec)?);
            }
        }
        for (lname, spec) in &file.load {
            if spec.get_ref().kind.get_ref() == "combined" {
                let mut parts = Vec::new();
                for part in spec.get_ref().parts.iter().flatten() {
                    let p = loads.get(part).cloned().or_else(|| builtin_load(part)).ok_or_else(|| {
                        ctx.err(spec.span(), format!("load.{lname}.parts"), format!("unknown load '{part}' (a combined load joins built-in or non-combined loads)"))
                    })?;
                    parts.push(p);
                }
                if parts.len() < 2 {
                    return Err(ctx.err(
                        spec.span(),
                        format!("load.{lname}.parts"),
                        "a combined load needs parts = [at least two load names]",
                    ));
                }
                loads.insert(lname.clone(), LoadSpec::Combined { parts });
            }
        }
        let load_spec = |names: &Spanned<Vec<String>>,
                         field: &str|
         -> Result<Vec<(String, LoadSpec)>, ScenarioError> {
            let mut out = Vec::new();
            for n in names.get_ref() {
                let spec = loads.get(n).cloned().or_else(|| builtin_load(n)).ok_or_else(|| {
                    ctx.err(names.span(), field, format!("unknown load '{n}' (built in: idle, cpu, stress, tx, rx; or define [load.{n}])"))
                })?;
                out.push((n.clone(), spec));
            }
            if out.is_empty() {
                return Err(ctx.err(names.span(), field, "empty list"));
            }
            Ok(out)
        };
        let profile_list =
            |names: &Spanned<Vec<String>>, field: &str| -> Result<Vec<String>, ScenarioError> {
                for n in names.get_ref() {
                    if !PROFILES.contains(&n.as_str()) {
                        return Err(ctx.err(
                            names.span(),
                            field,
                            format!("unknown profile '{n}' (accepted: {})", PROFILES.join(", ")),
                        ));
                    }
                }
                if names.get_ref().is_empty() {
                    return Err(ctx.err(names.span(), field, "empty list"));
                }
                Ok(names.get_ref().clone())
            };
        let top_loads = match &file.loads {
            Some(l) => load_spec(l, "loads")?,
            None => vec![("idle".to_string(), LoadSpec::Idle)],
        };
        let top_profiles = match &file.profiles {
            Some(p) => profile_list(p, "profiles")?,
            None => vec!["no-rt".to_string()],
        };
        let top_duration = file.duration.as_ref().map(|d| dur(&ctx, d, "duration")).transpose()?;
        let top_count = file.count.as_ref().map(|c| positive(&ctx, c, "count")).transpose()?;
        let top_reps = file
            .repetitions
            .as_ref()
            .map(|c| positive(&ctx, c, "repetitions"))
            .transpose()?
            .unwrap_or(1);
        let top_deadline = file.deadline.as_ref().map(|d| dur(&ctx, d, "deadline")).transpose()?;
        let top_spike =
            file.trace_on_spike.as_ref().map(|d| dur(&ctx, d, "trace_on_spike")).transpose()?;

        let mut published = Vec::new();
        for p in &file.published {
            let s = p.get_ref();
            for k in s.matches.keys() {
                if !["probe", "load", "profile"].contains(&k.as_str())
                    && !PROBES.iter().any(|pk| allowed(pk).contains(&k.as_str()))
                {
                    return Err(ctx.err(
                        p.span(),
                        format!("published.match.{k}"),
                        "not a probe, load, profile or parameter name",
                    ));
                }
            }
            published.push(s);
        }

        let mut cases = Vec::new();
        for (pi, p) in file.probe.iter().enumerate() {
            let field = |f: &str| format!("probe[{pi}].{f}");
            let kind = p.kind.get_ref().as_str();
            if !PROBES.contains(&kind) {
                return Err(ctx.err(
                    p.kind.span(),
                    field("kind"),
                    format!("unknown probe '{kind}' (accepted: {})", PROBES.join(", ")),
                ));
            }
            // fields that do not belong to this kind
            let present: [(&str, Option<std::ops::Range<usize>>); 19] = [
                ("policy", p.policy.as_ref().map(|s| s.span())),
                ("interval", p.interval.as_ref().map(|s| s.span())),
                ("mode", p.mode.as_ref().map(|s| s.span())),
                ("threads", p.threads.as_ref().map(|s| s.span())),
                ("distance", p.distance.as_ref().map(|s| s.span())),
                ("period", p.period.as_ref().map(|s| s.span())),
                ("payload", p.payload.as_ref().map(|s| s.span())),
                ("loss_timeout", p.loss_timeout.as_ref().map(|s| s.span())),
                ("so_priority", p.so_priority.as_ref().map(|s| s.span())),
                ("transport", p.transport.as_ref().map(|s| s.span())),
                ("rate", p.rate.as_ref().map(|s| s.span())),
                ("subscribers", p.subscribers.as_ref().map(|s| s.span())),
                ("reliability", p.reliability.as_ref().map(|s| s.span())),
                ("history", p.history.as_ref().map(|s| s.span())),
                ("durability", p.durability.as_ref().map(|s| s.span())),
                ("wait", p.wait.as_ref().map(|s| s.span())),
                ("duration", None),
                ("count", None),
                ("deadline", None),
            ];
            for (f, span) in present.iter() {
                if let Some(span) = span {
                    if !allowed(kind).contains(f) {
                        return Err(ctx.err(
                            span.clone(),
                            field(f),
                            format!(
                                "not a parameter of the {kind} probe (accepted: {})",
                                allowed(kind).join(", ")
                            ),
                        ));
                    }
                }
            }
            // the axes, each value checked
            let mut axes: Vec<(&str, Vec<String>)> = Vec::new();
            let mut axis = |name: &'static str,
                            a: &Axis,
                            check: &dyn Fn(&str) -> Result<(), String>|
             -> Result<(), ScenarioError> {
                if let Some(a) = a {
                    let items = a.get_ref().items();
                    if items.is_empty() {
                        return Err(ctx.err(a.span(), field(name), "empty list"));
                    }
                    for v in &items {
                        check(v).map_err(|m| ctx.err(a.span(), field(name), m))?;
                    }
                    axes.push((name, items));
                }
                Ok(())
            };
            let duration_ok = |v: &str| {
                parse_duration(v).map_err(|e| e.to_string()).and_then(|n| {
                    if n.0 > 0 {
                        Ok(())
                    } else {
                        Err(format!("'{v}' must be above zero"))
                    }
                })
            };
            let one_of = |list: &'static [&'static str]| {
                move |v: &str| {
                    if list.contains(&v) {
                        Ok(())
                    } else {
                        Err(format!("'{v}' is not one of {}", list.join(", ")))
                    }
                }
            };
            let int_in = |lo: i64, hi: i64| {
                move |v: &str| match v.parse::<i64>() {
                    Ok(n) if (lo..=hi).contains(&n) => Ok(()),
                    _ => Err(format!("'{v}' is not a whole number in {lo}..={hi}")),
                }
            };
            match kind {
                "timer" => {
                    axis("interval", &p.interval, &duration_ok)?;
                    axis("mode", &p.mode, &one_of(&["abs", "rel"]))?;
                    axis("threads", &p.threads, &int_in(1, 64))?;
                    axis("policy", &p.policy, &one_of(&["fifo", "rr", "other"]))?;
                }
                "udp" => {
                    axis("period", &p.period, &duration_ok)?;
                    axis("mode", &p.mode, &one_of(&["periodic", "pingpong"]))?;
                    axis("payload", &p.payload, &|v: &str| match parse_size(v) {
                        Ok(n) if (16..=65507).contains(&n) => Ok(()),
                        Ok(n) => Err(format!("{n} bytes is outside a UDP datagram's 16..=65507")),
                        Err(e) => Err(e.to_string()),
                    })?;
                    axis("so_priority", &p.so_priority, &int_in(0, 6))?;
                }
                _ => {
                    axis("transport", &p.transport, &one_of(TRANSPORTS))?;
                    axis("mode", &p.mode, &one_of(&["oneway", "roundtrip"]))?;
                    axis("payload", &p.payload, &|v: &str| match parse_size(v) {
                        Ok(n) if (16..=64 * 1024 * 1024).contains(&n) => Ok(()),
                        Ok(n) => Err(format!("{n} bytes is outside 16 B..64 MiB")),
                        Err(e) => Err(e.to_string()),
                    })?;
                    axis("rate", &p.rate, &|v: &str| {
                        period_of_rate(v).map(|_| ()).map_err(|e| e.to_string())
                    })?;
                    axis("period", &p.period, &duration_ok)?;
                    axis("subscribers", &p.subscribers, &int_in(1, 64))?;
                    axis("reliability", &p.reliability, &one_of(&["reliable", "best-effort"]))?;
                    axis("history", &p.history, &|v: &str| {
                        if v == "keep-all"
                            || v.strip_prefix("keep-last:")
                                .is_some_and(|n| n.parse::<u32>().is_ok_and(|n| n > 0))
                        {
                            Ok(())
                        } else {
                            Err(format!("'{v}' is not keep-last:N or keep-all"))
                        }
                    })?;
                    axis("durability", &p.durability, &one_of(&["volatile", "transient-local"]))?;
                    axis("wait", &p.wait, &one_of(&["blocking", "busy-poll"]))?;
                    if p.transport.is_none() {
                        return Err(ctx.err(
                            p.kind.span(),
                            field("transport"),
                            format!(
                                "a pubsub probe needs transport = one or a list of {}",
                                TRANSPORTS.join(", ")
                            ),
                        ));
                    }
                }
            }
            if let Some(d) = &p.distance {
                dur(&ctx, d, &field("distance"))?;
                axes.push(("distance", vec![d.get_ref().clone()]));
            }
            if let Some(l) = &p.loss_timeout {
                dur(&ctx, l, &field("loss_timeout"))?;
                axes.push(("loss_timeout", vec![l.get_ref().clone()]));
            }
            let p_loads = match &p.loads {
                Some(l) => load_spec(l, &field("loads"))?,
                None => top_loads.clone(),
            };
            let p_profiles = match &p.profiles {
                Some(l) => profile_list(l, &field("profiles"))?,
                None => top_profiles.clone(),
            };
            let duration = p
                .duration
                .as_ref()
                .map(|d| dur(&ctx, d, &field("duration")))
                .transpose()?
                .or(top_duration);
            let count = p
                .count
                .as_ref()
                .map(|c| positive(&ctx, c, &field("count")))
                .transpose()?
                .or(top_count);
            if duration.is_none() && count.is_none() {
                return Err(ctx.err(
                    p.kind.span(),
                    field("duration"),
                    "no duration or count for this probe (set one here or at the top)",
                ));
            }
            let reps = p
                .repetitions
                .as_ref()
                .map(|c| positive(&ctx, c, &field("repetitions")))
                .transpose()?
                .unwrap_or(top_reps);
            let deadline = p
                .deadline
                .as_ref()
                .map(|d| dur(&ctx, d, &field("deadline")))
                .transpose()?
                .or(top_deadline);
            let trace_on_spike = p
                .trace_on_spike
                .as_ref()
                .map(|d| dur(&ctx, d, &field("trace_on_spike")))
                .transpose()?
                .or(top_spike);
            let counters = p.counters.or(file.counters).unwrap_or(true);

            // the matrix: parameter axes (in file order) x loads x profiles x repetitions
            let mut combos: Vec<BTreeMap<String, String>> = vec![BTreeMap::new()];
            for (name, values) in &axes {
                let mut next = Vec::new();
                for c in &combos {
                    for v in values {
                        let mut c = c.clone();
                        c.insert(name.to_string(), v.clone());
                        next.push(c);
                    }
                }
                combos = next;
            }
            for params in &combos {
                for (lname, lspec) in &p_loads {
                    for profile in &p_profiles {
                        for rep in 1..=reps as u32 {
                            let label: Vec<String> = axes
                                .iter()
                                .filter(|(_, v)| v.len() > 1)
                                .map(|(k, _)| format!("{k}={}", params[*k]))
                                .collect();
                            let mut name = format!("{kind}/{lname}/{profile}");
                            if !label.is_empty() {
                                name.push('/');
                                name.push_str(&label.join(","));
                            }
                            if reps > 1 {
                                name.push_str(&format!("#{rep}"));
                            }
                            let mut case = CaseSpec {
                                index: cases.len() as u32,
                                name,
                                probe: kind.to_string(),
                                load: lname.clone(),
                                load_spec: lspec.clone(),
                                profile: profile.clone(),
                                params: params.clone(),
                                repetition: rep,
                                duration_ns: duration.map(|d| scale_ns(d, scale)),
                                count: count.map(|c| ((c as f64 * scale).round() as u64).max(1)),
                                deadline_ns: deadline,
                                trace_on_spike_ns: trace_on_spike,
                                counters,
                                published: None,
                            };
                            case.published =
                                published.iter().find(|p| matches_case(p, &case)).map(|p| {
                                    Published {
                                        source: p.source.clone(),
                                        label: p.label.clone(),
                                        min_us: p.min_us,
                                        avg_us: p.avg_us,
                                        max_us: p.max_us,
                                        median_us: p.median_us,
                                        missed: p.missed,
                                        lost: p.lost,
                                        of: p.of,
                                    }
                                });
                            cases.push(case);
                        }
                    }
                }
            }
        }
        // names must be unique: two probe tables of one kind with the same axes would clash
        let mut seen = std::collections::BTreeSet::new();
        for c in &mut cases {
            if !seen.insert(c.name.clone()) {
                let mut k = 2;
                while !seen.insert(format!("{}~{k}", c.name)) {
                    k += 1;
                }
                c.name = format!("{}~{k}", c.name);
            }
        }
        Ok(Scenario {
            name,
            description: file.description.unwrap_or_default(),
            origin: origin.into(),
            text: text.into(),
            cases,
        })
    }

    pub fn cases(&self) -> &[CaseSpec] {
        &self.cases
    }

    /// Planned measuring time of the whole scenario.
    pub fn planned_ns(&self) -> i64 {
        self.cases.iter().map(CaseSpec::planned_ns).sum()
    }
}

fn matches_case(p: &PublishedSpec, c: &CaseSpec) -> bool {
    p.matches.iter().all(|(k, v)| {
        let v = v.text();
        match k.as_str() {
            "probe" => c.probe == v,
            "load" => c.load == v,
            "profile" => c.profile == v,
            other => c.params.get(other) == Some(&v),
        }
    })
}

fn dur(ctx: &Ctx, v: &Spanned<String>, field: &str) -> Result<i64, ScenarioError> {
    let n = parse_duration(v.get_ref()).map_err(|e| ctx.err(v.span(), field, e.to_string()))?;
    if n.0 <= 0 {
        return Err(ctx.err(v.span(), field, format!("'{}' must be above zero", v.get_ref())));
    }
    Ok(n.0)
}

fn positive(ctx: &Ctx, v: &Spanned<i64>, field: &str) -> Result<u64, ScenarioError> {
    match *v.get_ref() {
        n if n > 0 => Ok(n as u64),
        n => Err(ctx.err(v.span(), field, format!("{n} must be at least 1"))),
    }
}

fn load_of(ctx: &Ctx, name: &str, spec: &Spanned<LoadFileSpec>) -> Result<LoadSpec, ScenarioError> {
    let s = spec.get_ref();
    let field = |f: &str| format!("load.{name}.{f}");
    let workers = |w: &Option<Spanned<i64>>| -> Result<u32, ScenarioError> {
        match w {
            None => Ok(0),
            Some(w) if (0..=1024).contains(w.get_ref()) => Ok(*w.get_ref() as u32),
            Some(w) => Err(ctx.err(
                w.span(),
                field("workers"),
                format!("{} is not in 0..=1024 (0 = one per CPU)", w.get_ref()),
            )),
        }
    };
    let n = |v: Option<i64>, f: &str| -> Result<u32, ScenarioError> {
        match v {
            None => Ok(0),
            Some(v) if (0..=1024).contains(&v) => Ok(v as u32),
            Some(v) => Err(ctx.err(spec.span(), field(f), format!("{v} is not in 0..=1024"))),
        }
    };
    let cpu_load = match s.cpu_load {
        None => None,
        Some(p) if (1..=100).contains(&p) => Some(p as u8),
        Some(p) => {
            return Err(ctx.err(
                spec.span(),
                field("cpu_load"),
                format!("{p} is not a percentage in 1..=100"),
            ))
        }
    };
    Ok(match s.kind.get_ref().as_str() {
        "idle" => LoadSpec::Idle,
        "cpu" => LoadSpec::Stress { cpu: workers(&s.workers)?, cpu_method: s.method.clone().or(Some("fft".into())), cpu_load, vm: 0, io: 0, hdd: 0 },
        "mem" => LoadSpec::Stress { cpu: 0, cpu_method: None, cpu_load: None, vm: workers(&s.workers)?.max(1), io: 0, hdd: 0 },
        "io" => LoadSpec::Stress { cpu: 0, cpu_method: None, cpu_load: None, vm: 0, io: workers(&s.workers)?.max(1), hdd: 0 },
        "hdd" => LoadSpec::Stress { cpu: 0, cpu_method: None, cpu_load: None, vm: 0, io: 0, hdd: workers(&s.workers)?.max(1) },
        "stress" => LoadSpec::Stress { cpu: n(s.cpu, "cpu")?, cpu_method: s.method.clone(), cpu_load, vm: n(s.vm, "vm")?, io: n(s.io, "io")?, hdd: n(s.hdd, "hdd")? },
        "traffic" => {
            let rate = s.rate.as_ref().ok_or_else(|| ctx.err(spec.span(), field("rate"), "a traffic load needs rate (e.g. \"100mbit\")"))?;
            let bps = parse_bitrate(rate.get_ref()).map_err(|e| ctx.err(rate.span(), field("rate"), e.to_string()))?;
            let direction = s.direction.as_ref().map(|d| d.get_ref().clone()).unwrap_or_else(|| "tx".into());
            if !["tx", "rx"].contains(&direction.as_str()) {
                let span = s.direction.as_ref().map(|d| d.span()).unwrap_or(spec.span());
                return Err(ctx.err(span, field("direction"), format!("'{direction}' is not tx or rx")));
            }
            let protocol = s.protocol.as_ref().map(|d| d.get_ref().clone()).unwrap_or_else(|| "udp".into());
            if !["udp", "tcp"].contains(&protocol.as_str()) {
                let span = s.protocol.as_ref().map(|d| d.span()).unwrap_or(spec.span());
                return Err(ctx.err(span, field("protocol"), format!("'{protocol}' is not udp or tcp")));
            }
            LoadSpec::Traffic { bits_per_second: bps, direction, protocol }
        }
        "command" => match &s.command {
            Some(argv) if !argv.is_empty() => LoadSpec::Command { argv: argv.clone() },
            _ => return Err(ctx.err(spec.span(), field("command"), "a command load needs command = [\"prog\", \"arg\", ...]")),
        },
        other => {
            return Err(ctx.err(s.kind.span(), field("kind"), format!("unknown load kind '{other}' (accepted: idle, cpu, mem, io, hdd, stress, traffic, command, combined)")))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "t"
duration = "2s"
loads = ["idle", "cpu"]
profiles = ["no-rt", "rt-normal"]

[[probe]]
kind = "timer"
interval = ["1ms", "10ms"]
mode = "rel"

[[probe]]
kind = "udp"
payload = 500
period = "1ms"
loads = ["idle", "tx40"]
count = 1000

[load.tx40]
kind = "traffic"
rate = "40mbit"

[[published]]
match = { probe = "timer", load = "cpu", profile = "rt-normal", interval = "1ms" }
source = "S4"
label = "80 % / RT"
min_us = 7.0
avg_us = 56.0
max_us = 464.0
"#;

    #[test]
    fn a_matrix_expands_in_order_with_names() {
        let s = Scenario::parse("t.toml", GOOD, 1.0).unwrap();
        let names: Vec<_> = s.cases().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "timer/idle/no-rt/interval=1ms",
                "timer/idle/rt-normal/interval=1ms",
                "timer/cpu/no-rt/interval=1ms",
                "timer/cpu/rt-normal/interval=1ms",
                "timer/idle/no-rt/interval=10ms",
                "timer/idle/rt-normal/interval=10ms",
                "timer/cpu/no-rt/interval=10ms",
                "timer/cpu/rt-normal/interval=10ms",
                "udp/idle/no-rt",
                "udp/idle/rt-normal",
                "udp/tx40/no-rt",
                "udp/tx40/rt-normal",
            ]
        );
        let c = &s.cases()[3];
        assert_eq!(c.params["mode"], "rel");
        assert_eq!(c.duration_ns, Some(2_000_000_000));
        assert_eq!(c.published.as_ref().unwrap().max_us, Some(464.0));
        assert!(s.cases()[7].published.is_none());
        let u = &s.cases()[10];
        assert_eq!(
            u.load_spec,
            LoadSpec::Traffic {
                bits_per_second: 40_000_000,
                direction: "tx".into(),
                protocol: "udp".into()
            }
        );
        assert_eq!(u.count, Some(1000));
        assert_eq!(u.planned_ns(), 2_000_000_000, "duration wins over count for planning");
    }

    #[test]
    fn scale_shortens_durations_and_counts() {
        let s = Scenario::parse("t.toml", GOOD, 0.5).unwrap();
        assert_eq!(s.cases()[0].duration_ns, Some(1_000_000_000));
        assert_eq!(s.cases()[8].count, Some(500));
    }

    fn err(text: &str) -> String {
        Scenario::parse("s.toml", text, 1.0).unwrap_err().to_string()
    }

    #[test]
    fn spike_tracing_and_counters_are_set_at_the_top_or_per_probe() {
        let t = "name = \"x\"\nduration = \"1s\"\ntrace_on_spike = \"2ms\"\n[[probe]]\nkind = \"timer\"\n[[probe]]\nkind = \"udp\"\ntrace_on_spike = \"500us\"\ncounters = false\n";
        let s = Scenario::parse("s.toml", t, 1.0).unwrap();
        let (timer, udp) = (&s.cases()[0], &s.cases()[1]);
        assert_eq!((timer.trace_on_spike_ns, timer.counters), (Some(2_000_000), true));
        assert_eq!((udp.trace_on_spike_ns, udp.counters), (Some(500_000), false));
        let e = err("name = \"x\"\nduration = \"1s\"\n[[probe]]\nkind = \"timer\"\ntrace_on_spike = \"0s\"\n");
        assert!(e.starts_with("s.toml:5: probe[0].trace_on_spike: '0s' must be above zero"), "{e}");
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let e = err(
            "name = \"x\"\nduration = \"1s\"\n[[probe]]\nkind = \"timer\"\ninterval = \"fast\"\n",
        );
        assert!(e.starts_with("s.toml:5: probe[0].interval: invalid duration 'fast'"), "{e}");
        let e = err("name = \"x\"\nduration = \"1s\"\n[[probe]]\nkind = \"timer\"\nbogus = 1\n");
        assert!(e.starts_with("s.toml:5: bogus: unknown field"), "{e}");
        let e = err("name = \"x\"\nduration = 5\n[[probe]]\nkind = \"timer\"\n");
        assert!(e.starts_with("s.toml:2: "), "{e}");
        let e =
            err("name = \"x\"\nduration = \"1s\"\n[[probe]]\nkind = \"udp\"\npayload = 70000\n");
        assert!(e.starts_with("s.toml:5: probe[0].payload: 70000 bytes is outside"), "{e}");
        let e = err(
            "name = \"x\"\nduration = \"1s\"\n[[probe]]\nkind = \"timer\"\ntransport = \"dds\"\n",
        );
        assert!(
            e.starts_with("s.toml:5: probe[0].transport: not a parameter of the timer probe"),
            "{e}"
        );
        let e = err("name = \"x\"\nduration = \"1s\"\nprofiles = [\"turbo\"]\n[[probe]]\nkind = \"timer\"\n");
        assert!(e.starts_with("s.toml:3: profiles: unknown profile 'turbo'"), "{e}");
        let e = err(
            "name = \"x\"\nduration = \"1s\"\nloads = [\"heavy\"]\n[[probe]]\nkind = \"timer\"\n",
        );
        assert!(e.starts_with("s.toml:3: loads: unknown load 'heavy'"), "{e}");
        let e = err("name = \"x\"\n[[probe]]\nkind = \"timer\"\n");
        assert!(e.contains("probe[0].duration: no duration or count"), "{e}");
        let e = err(
            "name = \"x\"\nduration = \"1s\"\n[[probe]]\nkind = \"pubsub\"\ntransport = \"ros1\"\n",
        );
        assert!(e.starts_with("s.toml:5: probe[0].transport: 'ros1' is not one of"), "{e}");
        let e = err("name = \"x\"\ncount = 0\n[[probe]]\nkind = \"timer\"\n");
        assert!(e.starts_with("s.toml:2: count: 0 must be at least 1"), "{e}");
        let e = err("name = \"x\"\nduration = \"1s\"\n[[probe]]\nkind = \"timer\"\n[load.l]\nkind = \"traffic\"\nrate = \"fast\"\n");
        assert!(e.starts_with("s.toml:7: load.l.rate:"), "{e}");
        let e = err("name = = \"x\"\n");
        assert!(e.starts_with("s.toml:1: "), "{e}");
        assert_eq!(e.lines().count(), 1, "one line: {e}");
    }
}

/// The scenarios shipped inside rtlab: (name, TOML text).
pub const PRESETS: &[(&str, &str)] = &[
    ("quick", include_str!("../presets/quick.toml")),
    ("s1-udp-linux", include_str!("../presets/s1-udp-linux.toml")),
    ("s2-ros2-rt", include_str!("../presets/s2-ros2-rt.toml")),
    ("s3-ros2-rtt", include_str!("../presets/s3-ros2-rtt.toml")),
    ("s4-timer", include_str!("../presets/s4-timer.toml")),
];

/// A preset by name.
pub fn preset(name: &str) -> Option<&'static str> {
    PRESETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

#[cfg(test)]
mod preset_tests {
    use super::*;

    #[test]
    fn every_preset_parses_and_has_cases() {
        for (name, text) in PRESETS {
            let s = Scenario::parse(&format!("preset {name}"), text, 1.0)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(&s.name, name);
            assert!(!s.cases().is_empty());
        }
    }

    #[test]
    fn presets_carry_the_studies_figures() {
        let s1 = Scenario::parse("s1", preset("s1-udp-linux").unwrap(), 0.01).unwrap();
        let udp: Vec<_> = s1.cases().iter().filter(|c| c.probe == "udp").collect();
        assert_eq!(udp.len(), 16, "4 profiles x 4 loads");
        assert!(udp.iter().all(|c| c.published.as_ref().is_some_and(|p| p.of == Some(600000))));
        assert_eq!(udp[0].count, Some(6000), "--scale 0.01 of 600,000 packets");
        let worst = udp.iter().find(|c| c.profile == "no-rt" && c.load == "stress").unwrap();
        assert_eq!(worst.published.as_ref().unwrap().max_us, Some(46742.0));

        let s4 = Scenario::parse("s4", preset("s4-timer").unwrap(), 1.0).unwrap();
        assert_eq!(s4.cases().len(), 12, "2 intervals x (normal + rr + fifo) x 2 loads");
        assert!(
            s4.cases().iter().all(|c| c.published.is_some()),
            "every S4 case has its published row"
        );
        let s3 = Scenario::parse("s3", preset("s3-ros2-rtt").unwrap(), 1.0).unwrap();
        assert!(s3.cases().iter().filter(|c| c.published.is_some()).count() >= 11);
        let q = Scenario::parse("quick", preset("quick").unwrap(), 1.0).unwrap();
        let secs = q.planned_ns() / 1_000_000_000;
        assert!((60..=240).contains(&secs), "quick measures {secs} s");
    }
}
