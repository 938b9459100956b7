//! Scenario files: a matrix of probes x loads x profiles x parameters, validated with the
//! file, line and field of every error before anything runs, and expanded into cases.
//!
//! Contract: [`Scenario::parse`] either returns a scenario whose every case was read into
//! its probe's typed configuration (the same struct, defaults and validation as the
//! probe's flags: [`crate::probe::PROBES`]) or the first error as one line
//! `FILE:LINE: FIELD: what is wrong (what is accepted)`. The number of cases is computed
//! before anything is expanded and bounded ([`MAX_CASES`], `max_cases = N` raises it), so
//! no file can make parsing hang. The same file always gives the same cases in the same order.
//!
//! The format (TOML):
//! ```toml
//! name = "my-scenario"
//! duration = "10s"            # per case, unless a probe says otherwise (or `count`)
//! trace_on_spike = "2ms"      # arm ftrace per case; explain its first samples above this
//! counters = true             # kernel counters per window (default true)
//! repetitions = 1             # 1..=1000
//! loads = ["idle", "cpu"]      # built-in loads or [load.NAME] tables
//! profiles = ["no-rt", "rt-normal", "./my-profile.toml"]
//!
//! [[probe]]
//! kind = "timer"               # timer | udp | pubsub | cyclic
//! interval = ["1ms", "10ms"]   # a list is a matrix axis; every key is a field of the
//!                              # probe's configuration (the same names as its flags)
//!
//! [load.cpu]
//! kind = "cpu"                 # cpu | mem | io | hdd | stress | traffic | command | combined
//! workers = 2
//! method = "fft"
//! cpu_load = 80                # percent busy per worker (S4)
//! ```

use crate::probe::{self, Probe};
use rtlab_core::run::Published;
use rtlab_core::units::parse_bitrate;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use toml::Spanned;

/// Cases one run may hold unless the file raises it (`max_cases = N`).
pub const MAX_CASES: u64 = 10_000;
/// Repetitions of a probe's matrix, at most.
pub const MAX_REPETITIONS: i64 = 1000;
/// A scaled case keeps at least this many slots (`--scale` never makes a case meaningless).
pub const MIN_SLOTS: u64 = 100;

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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    name: Spanned<String>,
    description: Option<String>,
    duration: Option<Spanned<toml::Value>>,
    count: Option<Spanned<toml::Value>>,
    repetitions: Option<Spanned<i64>>,
    deadline: Option<Spanned<toml::Value>>,
    trace_on_spike: Option<Spanned<String>>,
    counters: Option<bool>,
    max_cases: Option<Spanned<i64>>,
    /// The far side of every probe that has one (a probe's own `far` wins).
    far: Option<Spanned<String>>,
    loads: Option<Spanned<Vec<String>>>,
    profiles: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    probe: Vec<Spanned<BTreeMap<String, Spanned<toml::Value>>>>,
    #[serde(default)]
    load: BTreeMap<String, Spanned<LoadFileSpec>>,
    #[serde(default)]
    published: Vec<Spanned<PublishedSpec>>,
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
    cpu_load: Option<Spanned<i64>>,
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

/// Keys of a `[[probe]]` table that belong to the scenario, not to the probe's configuration.
const CASE_KEYS: &[&str] =
    &["kind", "repetitions", "trace_on_spike", "counters", "loads", "profiles"];
/// Keys a probe inherits from the top of the file when it does not set them.
const INHERITED: &[&str] = &["duration", "count", "deadline"];

/// One cell of the matrix, one repetition: everything the runner needs.
#[derive(Clone, Debug)]
pub struct CaseSpec {
    pub index: u32,
    pub name: String,
    pub probe: String,
    /// The probe, configured (the same typed configuration as its flags give).
    pub config: Arc<dyn Probe>,
    pub load: String,
    pub load_spec: LoadSpec,
    /// The profile as written (a built-in name or a file path).
    pub profile: String,
    /// The profile, resolved.
    pub profile_spec: rtlab_tune::profile::NamedProfile,
    /// Matrix parameters as written (units kept): what names the case and what
    /// `[[published]]` matches.
    pub params: BTreeMap<String, String>,
    pub repetition: u32,
    /// Arm ftrace for this case and explain its first samples above this (root).
    pub trace_on_spike_ns: Option<i64>,
    /// Sample the kernel counters per window.
    pub counters: bool,
    pub published: Option<Published>,
    /// Said when `--scale` hit a floor.
    pub scale_note: Option<String>,
}

impl CaseSpec {
    /// How long the case is expected to measure, for progress and ETA (slots, not samples).
    pub fn planned_ns(&self) -> i64 {
        self.config.plan().estimate_ns()
    }

    /// The case's length as the dry run shows it.
    pub fn length(&self) -> String {
        use rtlab_core::units::{format_duration_exact, Nanos};
        let p = self.config.plan();
        let one = match (p.duration_ns, p.count) {
            (Some(d), Some(c)) => format!("{} or {c} slots", format_duration_exact(Nanos(d))),
            (Some(d), None) => format_duration_exact(Nanos(d)),
            (None, Some(c)) => format!("{c} slots"),
            (None, None) => String::new(),
        };
        if p.sweep > 1 {
            format!("{one} x {} sweep cases", p.sweep)
        } else {
            one
        }
    }
}

/// A validated scenario.
#[derive(Clone, Debug)]
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

/// The text of a scalar value as written (`"1ms"` -> `1ms`, `500` -> `500`).
fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Where a scenario file is: its directory resolves relative profile paths.
fn base_dir(origin: &str) -> std::path::PathBuf {
    std::path::Path::new(origin)
        .parent()
        .filter(|p| !p.as_os_str().is_empty() && !origin.starts_with("preset "))
        .map(|p| p.to_path_buf())
        .unwrap_or_else(|| ".".into())
}

impl Scenario {
    /// Parse and validate. `origin` names the file (or preset) in errors. `scale`
    /// multiplies every duration and count (`--scale`; 1.0 = as written), keeping each case
    /// at [`MIN_SLOTS`] slots or more.
    pub fn parse(origin: &str, text: &str, scale: f64) -> Result<Scenario, ScenarioError> {
        Self::parse_with_far(origin, text, scale, None)
    }

    /// [`Scenario::parse`], with the far side of every probe that has one set to `far`
    /// (`rtlab run --far`), over the file's own top-level `far`. The scenario's kept text
    /// says so (a `far` line first, the file's own commented out), so that a resumed run
    /// has the same far side.
    pub fn parse_with_far(
        origin: &str,
        text: &str,
        scale: f64,
        far: Option<&crate::far::FarSpec>,
    ) -> Result<Scenario, ScenarioError> {
        let mut s = Self::parse_inner(origin, text, scale, far)?;
        if let Some(f) = far {
            // top-level keys come before the first table header
            let mut top = true;
            let kept: Vec<String> = text
                .lines()
                .map(|l| {
                    let t = l.trim_start();
                    top &= !t.starts_with('[');
                    let key = t.split('=').next().unwrap_or("").trim();
                    if top && key == "far" && !t.starts_with('#') {
                        format!("# {l}  (overridden by rtlab run --far)")
                    } else {
                        l.to_string()
                    }
                })
                .collect();
            s.text = format!("far = \"{f}\"  # rtlab run --far\n{}\n", kept.join("\n"));
        }
        Ok(s)
    }

    fn parse_inner(
        origin: &str,
        text: &str,
        scale: f64,
        far_override: Option<&crate::far::FarSpec>,
    ) -> Result<Scenario, ScenarioError> {
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
            return Err(ctx.err(
                0..0,
                "probe",
                format!(
                    "no [[probe]] table: a scenario needs at least one probe (kind = {})",
                    probe::kind_names()
                ),
            ));
        }
        let top_far = match &file.far {
            _ if far_override.is_some() => far_override.cloned(),
            None => None,
            Some(f) => Some(
                crate::far::FarSpec::parse(f.get_ref()).map_err(|e| ctx.err(f.span(), "far", e))?,
            ),
        };
        let max_cases = match &file.max_cases {
            None => MAX_CASES,
            Some(m) if *m.get_ref() >= 1 => *m.get_ref() as u64,
            Some(m) => return Err(ctx.err(m.span(), "max_cases", "must be at least 1")),
        };

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
        let load_list = |names: &[String],
                         span: std::ops::Range<usize>,
                         field: &str|
         -> Result<Vec<(String, LoadSpec)>, ScenarioError> {
            let mut out = Vec::new();
            for n in names {
                let spec = loads.get(n).cloned().or_else(|| builtin_load(n)).ok_or_else(|| {
                    ctx.err(span.clone(), field, format!("unknown load '{n}' (built in: idle, cpu, stress, tx, rx; or define [load.{n}])"))
                })?;
                out.push((n.clone(), spec));
            }
            if out.is_empty() {
                return Err(ctx.err(span, field, "empty list"));
            }
            Ok(out)
        };
        let dir = base_dir(origin);
        let mut resolved: BTreeMap<String, rtlab_tune::profile::NamedProfile> = BTreeMap::new();
        let mut profile_list = |names: &[String],
                                span: std::ops::Range<usize>,
                                field: &str|
         -> Result<Vec<String>, ScenarioError> {
            if names.is_empty() {
                return Err(ctx.err(span, field, "empty list"));
            }
            for n in names {
                if !resolved.contains_key(n) {
                    let p = rtlab_tune::profile::resolve(n, &dir)
                        .map_err(|m| ctx.err(span.clone(), field, m.to_string()))?;
                    resolved.insert(n.clone(), p);
                }
            }
            Ok(names.to_vec())
        };
        let top_loads = match &file.loads {
            Some(l) => load_list(l.get_ref(), l.span(), "loads")?,
            None => vec![("idle".to_string(), LoadSpec::Idle)],
        };
        let top_profiles = match &file.profiles {
            Some(p) => profile_list(p.get_ref(), p.span(), "profiles")?,
            None => profile_list(&["no-rt".to_string()], 0..0, "profiles")?,
        };
        let repetitions = |r: &Spanned<i64>, field: &str| -> Result<u32, ScenarioError> {
            match *r.get_ref() {
                n if (1..=MAX_REPETITIONS).contains(&n) => Ok(n as u32),
                n => Err(ctx.err(r.span(), field, format!("{n} is not in 1..={MAX_REPETITIONS}"))),
            }
        };
        let top_reps = file
            .repetitions
            .as_ref()
            .map(|r| repetitions(r, "repetitions"))
            .transpose()?
            .unwrap_or(1);
        let spike = |v: &Spanned<String>, field: &str| -> Result<i64, ScenarioError> {
            match rtlab_core::units::parse_duration(v.get_ref()) {
                Ok(n) if n.0 > 0 => Ok(n.0),
                Ok(_) => {
                    Err(ctx.err(v.span(), field, format!("'{}' must be above zero", v.get_ref())))
                }
                Err(e) => Err(ctx.err(v.span(), field, e.to_string())),
            }
        };
        let top_spike =
            file.trace_on_spike.as_ref().map(|v| spike(v, "trace_on_spike")).transpose()?;
        let top: BTreeMap<&str, &Spanned<toml::Value>> = [
            ("duration", file.duration.as_ref()),
            ("count", file.count.as_ref()),
            ("deadline", file.deadline.as_ref()),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect();

        let mut published = Vec::new();
        for p in &file.published {
            published.push(p.get_ref());
        }

        // first pass: the shape of every probe's matrix, and the number of cases, bounded
        struct Shape<'f> {
            kind: &'static probe::ProbeKind,
            scalars: toml::Table,
            axes: Vec<(String, Vec<toml::Value>, std::ops::Range<usize>)>,
            spans: BTreeMap<String, std::ops::Range<usize>>,
            /// Keys taken from the top of the file (errors name them there).
            inherited: Vec<String>,
            loads: Vec<(String, LoadSpec)>,
            profiles: Vec<String>,
            reps: u32,
            spike: Option<i64>,
            counters: bool,
            table: &'f Spanned<BTreeMap<String, Spanned<toml::Value>>>,
        }
        let mut shapes = Vec::new();
        let mut total: u64 = 0;
        let mut factors_of_largest = String::new();
        let mut largest = 0u64;
        for (pi, t) in file.probe.iter().enumerate() {
            let field = |f: &str| format!("probe[{pi}].{f}");
            let map = t.get_ref();
            let kind_v = map.get("kind").ok_or_else(|| {
                ctx.err(
                    t.span(),
                    field("kind"),
                    format!("missing (accepted: {})", probe::kind_names()),
                )
            })?;
            let kind_name = value_text(kind_v.get_ref());
            let kind = probe::kind(&kind_name).ok_or_else(|| {
                ctx.err(
                    kind_v.span(),
                    field("kind"),
                    format!("unknown probe '{kind_name}' (accepted: {})", probe::kind_names()),
                )
            })?;
            let reps = match map.get("repetitions") {
                Some(v) => match v.get_ref() {
                    toml::Value::Integer(n) => {
                        repetitions(&Spanned::new(v.span(), *n), &field("repetitions"))?
                    }
                    _ => {
                        return Err(ctx.err(
                            v.span(),
                            field("repetitions"),
                            "expected a whole number",
                        ))
                    }
                },
                None => top_reps,
            };
            let spike_ns = match map.get("trace_on_spike") {
                Some(v) => Some(spike(
                    &Spanned::new(v.span(), value_text(v.get_ref())),
                    &field("trace_on_spike"),
                )?),
                None => top_spike,
            };
            let counters = match map.get("counters") {
                Some(v) => v.get_ref().as_bool().ok_or_else(|| {
                    ctx.err(v.span(), field("counters"), "expected true or false")
                })?,
                None => file.counters.unwrap_or(true),
            };
            let string_list =
                |v: &Spanned<toml::Value>, f: &str| -> Result<Vec<String>, ScenarioError> {
                    match v.get_ref() {
                        toml::Value::Array(a) => Ok(a.iter().map(value_text).collect()),
                        toml::Value::String(s) => Ok(vec![s.clone()]),
                        _ => Err(ctx.err(v.span(), field(f), "expected a list of names")),
                    }
                };
            let probe_loads = match map.get("loads") {
                Some(v) => load_list(&string_list(v, "loads")?, v.span(), &field("loads"))?,
                None => top_loads.clone(),
            };
            let probe_profiles = match map.get("profiles") {
                Some(v) => {
                    profile_list(&string_list(v, "profiles")?, v.span(), &field("profiles"))?
                }
                None => top_profiles.clone(),
            };
            let mut scalars = toml::Table::new();
            let mut axes = Vec::new();
            let mut spans = BTreeMap::new();
            for (k, v) in map {
                if CASE_KEYS.contains(&k.as_str()) {
                    continue;
                }
                spans.insert(k.clone(), v.span());
                match v.get_ref() {
                    toml::Value::Array(items) => {
                        if items.is_empty() {
                            return Err(ctx.err(v.span(), field(k), "empty list"));
                        }
                        axes.push((k.clone(), items.clone(), v.span()));
                    }
                    other => {
                        scalars.insert(k.clone(), other.clone());
                    }
                }
            }
            let mut inherited = Vec::new();
            for k in INHERITED {
                if !map.contains_key(*k) {
                    if let Some(v) = top.get(k) {
                        scalars.insert(k.to_string(), v.get_ref().clone());
                        spans.insert(k.to_string(), v.span());
                        inherited.push(k.to_string());
                    }
                }
            }
            if !scalars.contains_key("duration")
                && !scalars.contains_key("count")
                && !axes.iter().any(|(k, _, _)| k == "duration" || k == "count")
            {
                return Err(ctx.err(
                    t.span(),
                    field("duration"),
                    "no duration or count: give one here or at the top of the file",
                ));
            }
            let mut n: u64 = reps as u64;
            let mut factors = vec![format!("repetitions {reps}")];
            for (k, items, _) in &axes {
                n = n.saturating_mul(items.len() as u64);
                factors.push(format!("{k} {}", items.len()));
            }
            n = n
                .saturating_mul(probe_loads.len() as u64)
                .saturating_mul(probe_profiles.len() as u64);
            factors.push(format!("loads {}", probe_loads.len()));
            factors.push(format!("profiles {}", probe_profiles.len()));
            if n > largest {
                largest = n;
                factors_of_largest = format!("probe[{pi}]: {}", factors.join(" x "));
            }
            total = total.saturating_add(n);
            shapes.push(Shape {
                kind,
                scalars,
                axes,
                spans,
                inherited,
                loads: probe_loads,
                profiles: probe_profiles,
                reps,
                spike: spike_ns,
                counters,
                table: t,
            });
        }
        if total > max_cases {
            let span = file.probe.first().map(|t| t.span()).unwrap_or(0..0);
            return Err(ctx.err(span, "probe", format!(
                "{total} cases is above the limit of {max_cases} per run (largest: {factors_of_largest}); split the scenario, or raise the limit with max_cases = N at the top of the file"
            )));
        }

        // second pass: every case read into its probe's configuration
        let online = rtlab_sys::cpus::online_cpus(std::path::Path::new("/")).0;
        let mut cases: Vec<CaseSpec> = Vec::new();
        for (pi, sh) in shapes.iter().enumerate() {
            let field = |f: &str| format!("probe[{pi}].{f}");
            let combos: u64 = sh.axes.iter().map(|(_, v, _)| v.len() as u64).product();
            for combo in 0..combos {
                let mut table = sh.scalars.clone();
                let mut rest = combo;
                let mut label = Vec::new();
                for (k, items, _) in &sh.axes {
                    let v = &items[(rest % items.len() as u64) as usize];
                    rest /= items.len() as u64;
                    table.insert(k.clone(), v.clone());
                    label.push(format!("{k}={}", value_text(v)));
                }
                let mut config = (sh.kind.parse)(&table).map_err(|e| {
                    let span = sh.spans.get(&e.field).cloned().unwrap_or(sh.table.span());
                    let of_kind = format!("of the {} probe", sh.kind.kind);
                    let name = if sh.inherited.contains(&e.field) {
                        e.field.clone()
                    } else {
                        field(&e.field)
                    };
                    ctx.err(span, name, e.message.replace("of the probe", &of_kind))
                })?;
                if let Some(f) = &top_far {
                    config.set_far(f);
                }
                let scale_note = if scale != 1.0 { config.scale(scale, MIN_SLOTS) } else { None };
                let config: Arc<dyn Probe> = Arc::from(config);
                let params: BTreeMap<String, String> =
                    table.iter().map(|(k, v)| (k.clone(), value_text(v))).collect();
                // the probe's real-time fields over each profile: a priority the policy
                // cannot take is said here, before anything runs
                for profile in &sh.profiles {
                    let rt = config.rt(&resolved[profile].profile.rt_settings(&online, None));
                    if let Err(m) = rt.check() {
                        let key = ["priority", "priorities", "policy"]
                            .into_iter()
                            .find(|k| sh.spans.contains_key(*k))
                            .unwrap_or("priority");
                        let span = sh.spans.get(key).cloned().unwrap_or(sh.table.span());
                        return Err(ctx.err(span, field(key), format!("{m} (profile {profile})")));
                    }
                }
                for (lname, lspec) in &sh.loads {
                    for profile in &sh.profiles {
                        for rep in 1..=sh.reps {
                            let mut name = format!("{}/{lname}/{profile}", sh.kind.kind);
                            if !label.is_empty() {
                                name.push('/');
                                name.push_str(&label.join(","));
                            }
                            if sh.reps > 1 {
                                name.push_str(&format!("#{rep}"));
                            }
                            let mut case = CaseSpec {
                                index: cases.len() as u32,
                                name,
                                probe: sh.kind.kind.to_string(),
                                config: config.clone(),
                                load: lname.clone(),
                                load_spec: lspec.clone(),
                                profile: profile.clone(),
                                profile_spec: resolved[profile].clone(),
                                params: params.clone(),
                                repetition: rep,
                                trace_on_spike_ns: sh.spike,
                                counters: sh.counters,
                                published: None,
                                scale_note: scale_note.clone(),
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
        // the old order: loads and profiles inside each parameter combination
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

    /// Keep only the cases whose name matches `pattern` (a substring, or a glob with `*`).
    pub fn retain_matching(&mut self, pattern: &str) {
        self.cases.retain(|c| glob_match(pattern, &c.name));
    }

    /// Drop the cases whose index is in `done` (a resumed run).
    pub fn skip_indices(&mut self, done: &std::collections::BTreeSet<u32>) {
        self.cases.retain(|c| !done.contains(&c.index));
    }

    /// Planned measuring time of the whole scenario.
    pub fn planned_ns(&self) -> i64 {
        self.cases.iter().map(CaseSpec::planned_ns).sum()
    }
}

/// `*` matches any run of characters; a pattern without `*` matches as a substring.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    if !pattern.contains('*') {
        return name.contains(pattern);
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    let mut rest = name;
    for (i, p) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(p) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return p.is_empty() || rest.ends_with(p);
        } else {
            match rest.find(p) {
                Some(at) => rest = &rest[at + p.len()..],
                None => return false,
            }
        }
    }
    true
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
    let cpu_load = match &s.cpu_load {
        None => None,
        Some(p) if (1..=100).contains(p.get_ref()) => Some(*p.get_ref() as u8),
        Some(p) => {
            return Err(ctx.err(
                p.span(),
                field("cpu_load"),
                format!("{} is not a percentage in 1..=100", p.get_ref()),
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
        assert_eq!(c.config.plan().duration_ns, Some(2_000_000_000));
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
        assert_eq!(u.config.plan().count, Some(1000));
        // the engine ends at the first limit reached: 1000 slots of 1 ms before 2 s
        assert_eq!(u.planned_ns(), 1_000_000_000, "the first limit reached ends the case");
    }

    #[test]
    fn scale_shortens_durations_and_counts() {
        let s = Scenario::parse("t.toml", GOOD, 0.5).unwrap();
        assert_eq!(s.cases()[0].config.plan().duration_ns, Some(1_000_000_000));
        assert_eq!(s.cases()[8].config.plan().count, Some(500));
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
        assert!(
            e.starts_with(
                "s.toml:5: probe[0].bogus: not a parameter of the timer probe (accepted: "
            ),
            "{e}"
        );
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
        // the profile registry's own words, the same as `rtlab tune apply turbo`
        assert!(e.starts_with("s.toml:3: profiles: profile 'turbo' does not exist"), "{e}");
        let e = err(
            "name = \"x\"\nduration = \"1s\"\nloads = [\"heavy\"]\n[[probe]]\nkind = \"timer\"\n",
        );
        assert!(e.starts_with("s.toml:3: loads: unknown load 'heavy'"), "{e}");
        let e = err("name = \"x\"\n[[probe]]\nkind = \"timer\"\n");
        assert!(e.contains("probe[0].duration: no duration or count"), "{e}");
        let e = err(
            "name = \"x\"\nduration = \"1s\"\n[[probe]]\nkind = \"pubsub\"\ntransport = \"ros1\"\n",
        );
        assert!(
            e.starts_with("s.toml:5: probe[0].transport: 'ros1' is not one of the accepted values"),
            "{e}"
        );
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
    fn run_far_overrides_the_file_and_is_kept_for_a_resume() {
        let far = crate::far::FarSpec::parse("ssh:robot2").unwrap();
        let s = Scenario::parse_with_far("s1", preset("s1-udp-linux").unwrap(), 0.01, Some(&far))
            .unwrap();
        let udp = s.cases().iter().find(|c| c.config.kind() == "udp").unwrap();
        assert_eq!(udp.config.far(), Some(&far));
        assert!(!udp.config.needs_pair(), "a far computer needs no namespaces here");
        assert!(s.text.starts_with("far = \"ssh:robot2\""), "{}", &s.text[..80]);
        assert!(s.text.contains("# far = \"pair\"  (overridden by rtlab run --far)"));
        // the kept text reads back as the same scenario (a resumed run)
        let again = Scenario::parse("run 1", &s.text, 0.01).unwrap();
        assert_eq!(again.cases().len(), s.cases().len());
        let udp = again.cases().iter().find(|c| c.config.kind() == "udp").unwrap();
        assert_eq!(udp.config.far(), Some(&far));
        // the preset itself: the far side in the case's pair
        let p = Scenario::parse("s3", preset("s3-ros2-rtt").unwrap(), 1.0).unwrap();
        assert!(p.cases().iter().all(|c| c.config.far() == Some(&crate::far::FarSpec::Pair)));
        assert!(p.cases().iter().all(|c| c.config.needs_pair()));
    }

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
        assert_eq!(udp[0].config.plan().count, Some(6000), "--scale 0.01 of 600,000 packets");
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
        // the three DDS implementations, each case beside the study's DDS1 (DDS2, DDS3 in the label)
        for t in ["cyclonedds", "fastdds", "rustdds"] {
            let idle = s3
                .cases()
                .iter()
                .find(|c| {
                    c.params.get("transport").map(String::as_str) == Some(t)
                        && c.load == "idle"
                        && c.profile == "no-rt"
                })
                .unwrap_or_else(|| panic!("s3 has no idle no-rt case on {t}"));
            let p = idle.published.as_ref().expect("its published row");
            assert_eq!(p.min_us, Some(827.0));
            assert!(p.label.contains("DDS2 1059/1237/4216") && p.source.contains("does not name"));
        }
        let q = Scenario::parse("quick", preset("quick").unwrap(), 1.0).unwrap();
        let secs = q.planned_ns() / 1_000_000_000;
        assert!((60..=240).contains(&secs), "quick measures {secs} s");
    }
}
