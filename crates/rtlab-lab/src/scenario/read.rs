//! Reading a scenario file into its cases, step by step: the TOML into [`FileSpec`], the
//! top-level settings ([`Top`]), each `[[probe]]` table's matrix ([`Shape`], first pass: the
//! number of cases is known and bounded before anything is expanded), then every case read
//! into its probe's typed configuration (second pass) and named uniquely.
//!
//! Contract: the first error is one [`ScenarioError`] naming the file, line and field; the
//! same text always gives the same cases in the same order. Reads files (relative profile
//! paths) and nothing else; never prints.

use super::file::Ctx;
use super::file::{FileSpec, LoadFileSpec, PublishedSpec};
use super::spec::{
    builtin_load, CaseSpec, LoadSpec, Scenario, ScenarioError, MAX_CASES, MAX_REPETITIONS,
    MIN_SLOTS,
};
use crate::probe::{Probe, ProbeKind};
use crate::registry;
use rtlab_core::run::Published;
use rtlab_core::units::parse_bitrate;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use toml::Spanned;

/// Keys of a `[[probe]]` table that belong to the scenario, not to the probe's configuration.
const CASE_KEYS: &[&str] =
    &["kind", "repetitions", "trace_on_spike", "counters", "loads", "profiles"];
/// Keys a probe inherits from the top of the file when it does not set them.
const INHERITED: &[&str] = &["duration", "count", "deadline"];

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

/// The top of the file, as every probe inherits it.
struct Top<'f> {
    far: Option<crate::far::FarSpec>,
    max_cases: u64,
    loads: Vec<(String, LoadSpec)>,
    profiles: Vec<String>,
    reps: u32,
    spike: Option<i64>,
    counters: bool,
    /// `duration`, `count`, `deadline` as written at the top.
    inherited: BTreeMap<&'static str, &'f Spanned<toml::Value>>,
}

/// One `[[probe]]` table's matrix (first pass).
struct Shape<'f> {
    kind: &'static ProbeKind,
    scalars: toml::Table,
    axes: Vec<(String, Vec<toml::Value>, Range<usize>)>,
    spans: BTreeMap<String, Range<usize>>,
    /// Keys taken from the top of the file (errors name them there).
    inherited: Vec<String>,
    loads: Vec<(String, LoadSpec)>,
    profiles: Vec<String>,
    reps: u32,
    spike: Option<i64>,
    counters: bool,
    table: &'f Spanned<BTreeMap<String, Spanned<toml::Value>>>,
    /// Cases this table makes, and the factors in words (for the limit's message).
    cases: u64,
    factors: String,
}

/// What the reading knows across steps: the file, its named loads, the profiles resolved.
struct Reader<'a> {
    ctx: Ctx<'a>,
    loads: BTreeMap<String, LoadSpec>,
    dir: std::path::PathBuf,
    resolved: BTreeMap<String, rtlab_tune::profile::NamedProfile>,
}

/// [`Scenario::parse_with_far`]'s reading (without the kept text's `far` line).
pub(super) fn read(
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
                registry::kind_names()
            ),
        ));
    }
    let mut r =
        Reader { ctx, loads: BTreeMap::new(), dir: base_dir(origin), resolved: BTreeMap::new() };
    let top = r.top(&file, far_override)?;
    let shapes = file
        .probe
        .iter()
        .enumerate()
        .map(|(pi, t)| r.shape(pi, t, &top))
        .collect::<Result<Vec<_>, _>>()?;
    r.check_total(&file, &shapes, top.max_cases)?;
    let published: Vec<&PublishedSpec> = file.published.iter().map(|p| p.get_ref()).collect();
    let online = rtlab_sys::cpus::online_cpus(std::path::Path::new("/")).0;
    let mut cases: Vec<CaseSpec> = Vec::new();
    for (pi, sh) in shapes.iter().enumerate() {
        r.expand(pi, sh, &top, scale, &published, &online, &mut cases)?;
    }
    unique_names(&mut cases);
    let gates = super::gates::read_gates(&r.ctx, &file.gate, &cases)?;
    Ok(Scenario {
        name,
        description: file.description.unwrap_or_default(),
        origin: origin.into(),
        text: text.into(),
        cases,
        gates,
    })
}

/// Two probe tables of one kind with the same axes would give two cases one name: the later
/// ones get `~2`, `~3`...
fn unique_names(cases: &mut [CaseSpec]) {
    let mut seen = std::collections::BTreeSet::new();
    for c in cases {
        if !seen.insert(c.name.clone()) {
            let mut k = 2;
            while !seen.insert(format!("{}~{k}", c.name)) {
                k += 1;
            }
            c.name = format!("{}~{k}", c.name);
        }
    }
}

impl<'a> Reader<'a> {
    /// `[load.NAME]` tables: the plain ones, then the combined ones (whose parts are
    /// built-in or plain loads).
    fn named_loads(&mut self, file: &FileSpec) -> Result<(), ScenarioError> {
        let ctx = &self.ctx;
        for (lname, spec) in &file.load {
            if spec.get_ref().kind.get_ref() != "combined" {
                self.loads.insert(lname.clone(), load_of(ctx, lname, spec)?);
            }
        }
        for (lname, spec) in &file.load {
            if spec.get_ref().kind.get_ref() != "combined" {
                continue;
            }
            let mut parts = Vec::new();
            for part in spec.get_ref().parts.iter().flatten() {
                let p = self.loads.get(part).cloned().or_else(|| builtin_load(part)).ok_or_else(|| {
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
            self.loads.insert(lname.clone(), LoadSpec::Combined { parts });
        }
        Ok(())
    }

    /// Loads by name: defined or built in; an empty list is an error.
    fn load_list(
        &self,
        names: &[String],
        span: Range<usize>,
        field: &str,
    ) -> Result<Vec<(String, LoadSpec)>, ScenarioError> {
        let mut out = Vec::new();
        for n in names {
            let spec = self.loads.get(n).cloned().or_else(|| builtin_load(n)).ok_or_else(|| {
                self.ctx.err(span.clone(), field, format!("unknown load '{n}' (built in: idle, cpu, stress, tx, rx; or define [load.{n}])"))
            })?;
            out.push((n.clone(), spec));
        }
        if out.is_empty() {
            return Err(self.ctx.err(span, field, "empty list"));
        }
        Ok(out)
    }

    /// Profiles by name, each resolved once (a built-in name or a file beside the scenario).
    fn profile_list(
        &mut self,
        names: &[String],
        span: Range<usize>,
        field: &str,
    ) -> Result<Vec<String>, ScenarioError> {
        if names.is_empty() {
            return Err(self.ctx.err(span, field, "empty list"));
        }
        for n in names {
            if !self.resolved.contains_key(n) {
                let p = rtlab_tune::profile::resolve(n, &self.dir)
                    .map_err(|m| self.ctx.err(span.clone(), field, m.to_string()))?;
                self.resolved.insert(n.clone(), p);
            }
        }
        Ok(names.to_vec())
    }

    fn repetitions(&self, r: &Spanned<i64>, field: &str) -> Result<u32, ScenarioError> {
        match *r.get_ref() {
            n if (1..=MAX_REPETITIONS).contains(&n) => Ok(n as u32),
            n => Err(self.ctx.err(r.span(), field, format!("{n} is not in 1..={MAX_REPETITIONS}"))),
        }
    }

    fn spike(&self, v: &Spanned<String>, field: &str) -> Result<i64, ScenarioError> {
        match rtlab_core::units::parse_duration(v.get_ref()) {
            Ok(n) if n.0 > 0 => Ok(n.0),
            Ok(_) => {
                Err(self.ctx.err(v.span(), field, format!("'{}' must be above zero", v.get_ref())))
            }
            Err(e) => Err(self.ctx.err(v.span(), field, e.to_string())),
        }
    }

    /// The top-level settings every probe inherits.
    fn top<'f>(
        &mut self,
        file: &'f FileSpec,
        far_override: Option<&crate::far::FarSpec>,
    ) -> Result<Top<'f>, ScenarioError> {
        let far = match &file.far {
            _ if far_override.is_some() => far_override.cloned(),
            None => None,
            Some(f) => Some(
                crate::far::FarSpec::parse(f.get_ref())
                    .map_err(|e| self.ctx.err(f.span(), "far", e))?,
            ),
        };
        let max_cases = match &file.max_cases {
            None => MAX_CASES,
            Some(m) if *m.get_ref() >= 1 => *m.get_ref() as u64,
            Some(m) => return Err(self.ctx.err(m.span(), "max_cases", "must be at least 1")),
        };
        self.named_loads(file)?;
        let loads = match &file.loads {
            Some(l) => self.load_list(l.get_ref(), l.span(), "loads")?,
            None => vec![("idle".to_string(), LoadSpec::Idle)],
        };
        let profiles = match &file.profiles {
            Some(p) => self.profile_list(p.get_ref(), p.span(), "profiles")?,
            None => self.profile_list(&["no-rt".to_string()], 0..0, "profiles")?,
        };
        let reps = file
            .repetitions
            .as_ref()
            .map(|r| self.repetitions(r, "repetitions"))
            .transpose()?
            .unwrap_or(1);
        let spike =
            file.trace_on_spike.as_ref().map(|v| self.spike(v, "trace_on_spike")).transpose()?;
        let inherited = [
            ("duration", file.duration.as_ref()),
            ("count", file.count.as_ref()),
            ("deadline", file.deadline.as_ref()),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect();
        Ok(Top {
            far,
            max_cases,
            loads,
            profiles,
            reps,
            spike,
            counters: file.counters.unwrap_or(true),
            inherited,
        })
    }

    /// The scenario's own keys of probe table `pi` (kind, repetitions, trace_on_spike,
    /// counters, loads, profiles), each over the top's.
    #[allow(clippy::type_complexity)]
    fn case_keys(
        &mut self,
        pi: usize,
        t: &Spanned<BTreeMap<String, Spanned<toml::Value>>>,
        top: &Top,
    ) -> Result<
        (&'static ProbeKind, u32, Option<i64>, bool, Vec<(String, LoadSpec)>, Vec<String>),
        ScenarioError,
    > {
        let field = |f: &str| format!("probe[{pi}].{f}");
        let map = t.get_ref();
        let kind_v = map.get("kind").ok_or_else(|| {
            self.ctx.err(
                t.span(),
                field("kind"),
                format!("missing (accepted: {})", registry::kind_names()),
            )
        })?;
        let kind_name = value_text(kind_v.get_ref());
        let kind = registry::kind(&kind_name).ok_or_else(|| {
            self.ctx.err(
                kind_v.span(),
                field("kind"),
                format!("unknown probe '{kind_name}' (accepted: {})", registry::kind_names()),
            )
        })?;
        let reps = match map.get("repetitions") {
            Some(v) => match v.get_ref() {
                toml::Value::Integer(n) => {
                    self.repetitions(&Spanned::new(v.span(), *n), &field("repetitions"))?
                }
                _ => {
                    return Err(self.ctx.err(
                        v.span(),
                        field("repetitions"),
                        "expected a whole number",
                    ))
                }
            },
            None => top.reps,
        };
        let spike = match map.get("trace_on_spike") {
            Some(v) => Some(self.spike(
                &Spanned::new(v.span(), value_text(v.get_ref())),
                &field("trace_on_spike"),
            )?),
            None => top.spike,
        };
        let counters = match map.get("counters") {
            Some(v) => v.get_ref().as_bool().ok_or_else(|| {
                self.ctx.err(v.span(), field("counters"), "expected true or false")
            })?,
            None => top.counters,
        };
        let string_list =
            |v: &Spanned<toml::Value>, f: &str| -> Result<Vec<String>, ScenarioError> {
                match v.get_ref() {
                    toml::Value::Array(a) => Ok(a.iter().map(value_text).collect()),
                    toml::Value::String(s) => Ok(vec![s.clone()]),
                    _ => Err(self.ctx.err(v.span(), field(f), "expected a list of names")),
                }
            };
        let loads = match map.get("loads") {
            Some(v) => self.load_list(&string_list(v, "loads")?, v.span(), &field("loads"))?,
            None => top.loads.clone(),
        };
        let profiles = match map.get("profiles") {
            Some(v) => {
                let names = string_list(v, "profiles")?;
                self.profile_list(&names, v.span(), &field("profiles"))?
            }
            None => top.profiles.clone(),
        };
        Ok((kind, reps, spike, counters, loads, profiles))
    }

    /// First pass over probe table `pi`: its scalars and axes (a list is an axis), what it
    /// inherits, and how many cases it makes.
    fn shape<'f>(
        &mut self,
        pi: usize,
        t: &'f Spanned<BTreeMap<String, Spanned<toml::Value>>>,
        top: &Top,
    ) -> Result<Shape<'f>, ScenarioError> {
        let field = |f: &str| format!("probe[{pi}].{f}");
        let (kind, reps, spike, counters, loads, profiles) = self.case_keys(pi, t, top)?;
        let map = t.get_ref();
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
                        return Err(self.ctx.err(v.span(), field(k), "empty list"));
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
                if let Some(v) = top.inherited.get(k) {
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
            return Err(self.ctx.err(
                t.span(),
                field("duration"),
                "no duration or count: give one here or at the top of the file",
            ));
        }
        let mut cases: u64 = reps as u64;
        let mut factors = vec![format!("repetitions {reps}")];
        for (k, items, _) in &axes {
            cases = cases.saturating_mul(items.len() as u64);
            factors.push(format!("{k} {}", items.len()));
        }
        cases = cases.saturating_mul(loads.len() as u64).saturating_mul(profiles.len() as u64);
        factors.push(format!("loads {}", loads.len()));
        factors.push(format!("profiles {}", profiles.len()));
        Ok(Shape {
            kind,
            scalars,
            axes,
            spans,
            inherited,
            loads,
            profiles,
            reps,
            spike,
            counters,
            table: t,
            cases,
            factors: format!("probe[{pi}]: {}", factors.join(" x ")),
        })
    }

    /// Every table's cases together stay under the limit (known before any is expanded).
    fn check_total(
        &self,
        file: &FileSpec,
        shapes: &[Shape],
        max_cases: u64,
    ) -> Result<(), ScenarioError> {
        let total = shapes.iter().fold(0u64, |t, s| t.saturating_add(s.cases));
        if total <= max_cases {
            return Ok(());
        }
        // the first table with the most cases names the factors
        let largest = shapes.iter().fold(None::<&Shape>, |best, s| match best {
            Some(b) if b.cases >= s.cases => Some(b),
            _ => Some(s),
        });
        let factors = largest.map(|s| s.factors.as_str()).unwrap_or("");
        let span = file.probe.first().map(|t| t.span()).unwrap_or(0..0);
        Err(self.ctx.err(span, "probe", format!(
            "{total} cases is above the limit of {max_cases} per run (largest: {factors}); split the scenario, or raise the limit with max_cases = N at the top of the file"
        )))
    }

    /// Second pass over table `pi`: each combination of its axes read into the probe's
    /// configuration (checked against each profile's real-time settings), then one case per
    /// load, profile and repetition.
    #[allow(clippy::too_many_arguments)]
    fn expand(
        &self,
        pi: usize,
        sh: &Shape,
        top: &Top,
        scale: f64,
        published: &[&PublishedSpec],
        online: &[usize],
        cases: &mut Vec<CaseSpec>,
    ) -> Result<(), ScenarioError> {
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
            let mut config = self.configure(pi, sh, &table)?;
            if let Some(f) = &top.far {
                config.set_far(f);
            }
            let scale_note = if scale != 1.0 { config.scale(scale, MIN_SLOTS) } else { None };
            let config: Arc<dyn Probe> = Arc::from(config);
            self.check_rt(pi, sh, config.as_ref(), online)?;
            let params: BTreeMap<String, String> =
                table.iter().map(|(k, v)| (k.clone(), value_text(v))).collect();
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
                            profile_spec: self.resolved[profile].clone(),
                            params: params.clone(),
                            repetition: rep,
                            trace_on_spike_ns: sh.spike,
                            counters: sh.counters,
                            published: None,
                            scale_note: scale_note.clone(),
                        };
                        case.published = published
                            .iter()
                            .find(|p| matches_case(p, &case))
                            .map(|p| published_of(p));
                        cases.push(case);
                    }
                }
            }
        }
        Ok(())
    }

    /// One combination's table read into its probe's configuration; an error names the key
    /// where it was written (the probe table, or the top of the file for inherited keys).
    fn configure(
        &self,
        pi: usize,
        sh: &Shape,
        table: &toml::Table,
    ) -> Result<Box<dyn Probe>, ScenarioError> {
        (sh.kind.parse)(table).map_err(|e| {
            let span = sh.spans.get(&e.field).cloned().unwrap_or(sh.table.span());
            let of_kind = format!("of the {} probe", sh.kind.kind);
            let name = if sh.inherited.contains(&e.field) {
                e.field.clone()
            } else {
                format!("probe[{pi}].{}", e.field)
            };
            self.ctx.err(span, name, e.message.replace("of the probe", &of_kind))
        })
    }

    /// The probe's real-time fields over each profile: a priority the policy cannot take is
    /// said here, before anything runs.
    fn check_rt(
        &self,
        pi: usize,
        sh: &Shape,
        config: &dyn Probe,
        online: &[usize],
    ) -> Result<(), ScenarioError> {
        for profile in &sh.profiles {
            let rt = config.rt(&self.resolved[profile].profile.rt_settings(online, None));
            if let Err(m) = rt.check() {
                let key = ["priority", "priorities", "policy"]
                    .into_iter()
                    .find(|k| sh.spans.contains_key(*k))
                    .unwrap_or("priority");
                let span = sh.spans.get(key).cloned().unwrap_or(sh.table.span());
                return Err(self.ctx.err(
                    span,
                    format!("probe[{pi}].{key}"),
                    format!("{m} (profile {profile})"),
                ));
            }
        }
        Ok(())
    }
}

/// A `[[published]]` entry as the case carries it.
fn published_of(p: &PublishedSpec) -> Published {
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
