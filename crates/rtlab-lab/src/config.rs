//! How every probe configuration is read: one typed struct per probe (serde), filled from a
//! scenario's `[[probe]]` table and from the probe's command-line flags through the same
//! table of values, so that both get one set of defaults, one validation and the same
//! error text.
//!
//! Contract: [`from_table`] returns a configuration that passed the probe's `validate`, or
//! one [`ConfigError`] naming the field (the struct's field name, which is also the
//! scenario key and, with `_` as `-`, the flag). The CLI prints it as `--field: message`,
//! a scenario as `FILE:LINE: probe[N].field: message` — the message is the same.

use rtlab_core::rt::{Policy, RtSettings};
use rtlab_core::units::{format_duration_exact, parse_duration, parse_size, period_of_rate, Nanos};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A field that is wrong, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConfigError {
    /// The field's name as in the struct and the scenario file (`interval`, `payload`).
    pub field: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError { field: field.into(), message: message.into() }
    }

    /// The field as a command-line flag (`loss_timeout` -> `--loss-timeout`).
    pub fn flag(&self) -> String {
        format!("--{}", self.field.replace('_', "-"))
    }

    /// The error as the CLI says it: the flag, then the message (which names the value).
    pub fn cli_text(&self) -> String {
        format!("{} {}", self.flag(), self.message)
    }

    /// The same, for a command whose flag has another name than the field (`renames`:
    /// field -> flag, e.g. the timer's `count` is `--loops`, as in cyclictest).
    pub fn cli_text_as(&self, renames: &[(&str, &str)]) -> String {
        match renames.iter().find(|(f, _)| *f == self.field) {
            Some((_, flag)) => format!("{flag} {}", self.message),
            None => self.cli_text(),
        }
    }
}

/// A probe configuration: serde reads it, `validate` checks what serde cannot.
pub trait Validate {
    fn validate(&self) -> Result<(), ConfigError>;
}

/// Read and validate a configuration from a table of values (a scenario's probe table, one
/// case of its matrix, or the flags given on the command line).
pub fn from_table<C>(table: &toml::Table) -> Result<C, ConfigError>
where
    C: DeserializeOwned + Validate + Default + Serialize,
{
    let c: C = read_table(table)?;
    c.validate()?;
    Ok(c)
}

/// Read a table into `C` (no validation beyond serde's), naming the field on error.
pub fn read_table<C>(table: &toml::Table) -> Result<C, ConfigError>
where
    C: DeserializeOwned + Default + Serialize,
{
    let value = toml::Value::Table(table.clone());
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        let field = field.split(['.', '[']).next().unwrap_or("").to_string();
        let message = e.into_inner().to_string().replace('\n', " ");
        // a flattened field (the real-time fields) loses its path: the field that fails
        // alone is the one; serde names an unknown field in its message
        let field = if field.is_empty() || field == "." {
            failing_alone::<C>(table)
                .or_else(|| message.split('`').nth(1).map(str::to_string))
                .unwrap_or_else(|| "(probe)".into())
        } else {
            field
        };
        let message = if message.starts_with("unknown field") {
            format!("not a parameter of the probe (accepted: {})", fields_of::<C>().join(", "))
        } else if let Some(rest) = message.strip_prefix("unknown variant `") {
            // "unknown variant `ros3`, expected one of `intra`, `udp` in `transport`"
            let (value, rest) = rest.split_once('`').unwrap_or((rest, ""));
            let accepted = rest.split(" in `").next().unwrap_or("");
            let accepted = accepted.trim_start_matches(", expected ").trim_start_matches("one of ");
            format!(
                "'{value}' is not one of the accepted values: {}",
                accepted.replace('`', "").trim()
            )
        } else {
            // toml appends where a custom error happened: the field says it already
            let m = message.trim_end();
            m.strip_suffix(&format!(" in `{field}`")).unwrap_or(m).to_string()
        };
        ConfigError { field, message }
    })
}

/// The key of `table` that `C` refuses when given alone.
fn failing_alone<C: DeserializeOwned>(table: &toml::Table) -> Option<String> {
    table.iter().find_map(|(k, v)| {
        let one = toml::Table::from_iter([(k.clone(), v.clone())]);
        C::deserialize(toml::Value::Table(one)).is_err().then(|| k.clone())
    })
}

/// The fields a configuration takes (its every key, flattened ones included).
pub fn fields_of<C: Default + Serialize>() -> Vec<String> {
    match serde_json::to_value(C::default()) {
        Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// The table of a configuration (its every field, defaults included): what a case stores,
/// and how two configurations are compared.
pub fn to_table<C: Serialize>(c: &C) -> toml::Table {
    toml::Table::try_from(c).unwrap_or_default()
}

/// A duration with a unit (`250us`, `1ms`, `10s`); integer nanoseconds inside.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(pub i64);

impl Dur {
    pub fn ns(self) -> i64 {
        self.0
    }
    pub const fn ms(ms: i64) -> Dur {
        Dur(ms * 1_000_000)
    }
    pub const fn s(s: i64) -> Dur {
        Dur(s * 1_000_000_000)
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_duration_exact(Nanos(self.0)))
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Dur, D::Error> {
        let s = String::deserialize(d)?;
        parse_duration(&s).map(|n| Dur(n.0)).map_err(serde::de::Error::custom)
    }
}

/// A value written as a number or as text (`payload = 500` or `"4kb"`, `cpus = 1` or `"2-3"`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum NumberOrText {
    Number(i64),
    Text(String),
}

impl NumberOrText {
    /// The value as written (a number in decimal).
    pub fn text(self) -> String {
        match self {
            NumberOrText::Number(n) => n.to_string(),
            NumberOrText::Text(s) => s,
        }
    }
}

/// A size in bytes: a number or a string with a unit (`500`, `"4kb"`, `"64kib"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Size(pub u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Size, D::Error> {
        match NumberOrText::deserialize(d)? {
            NumberOrText::Number(n) if n >= 0 => Ok(Size(n as u64)),
            NumberOrText::Number(n) => Err(serde::de::Error::custom(format!("{n} is not a size"))),
            NumberOrText::Text(s) => parse_size(&s).map(Size).map_err(serde::de::Error::custom),
        }
    }
}

/// A rate (`100hz`, `1khz`), kept as its period in integer nanoseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rate {
    pub text: String,
    pub period_ns: i64,
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
        let text = String::deserialize(d)?;
        let p = period_of_rate(&text).map_err(serde::de::Error::custom)?;
        if p.0 <= 0 {
            return Err(serde::de::Error::custom(format!(
                "'{text}' is faster than one message per nanosecond"
            )));
        }
        Ok(Rate { text, period_ns: p.0 })
    }
}

/// One value or a list of them (`interval = "1ms"` or `--interval 1ms,2ms`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct List<T>(pub Vec<T>);

impl<'de, T: DeserializeOwned> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<List<T>, D::Error> {
        // through a value, so that an item's own error (a bad unit) is what is said
        let one = |v: toml::Value| T::deserialize(v).map_err(serde::de::Error::custom);
        Ok(List(match toml::Value::deserialize(d)? {
            toml::Value::Array(items) => items.into_iter().map(one).collect::<Result<_, _>>()?,
            v => vec![one(v)?],
        }))
    }
}

impl<T> List<T> {
    pub fn one(t: T) -> List<T> {
        List(vec![t])
    }
}

/// A CPU list as the kernel writes it (`1`, `0,2`, `2-3`), checked against the online CPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cpus(pub Vec<usize>);

impl Serialize for Cpus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&rtlab_host::cpu_list(&self.0))
    }
}

impl<'de> Deserialize<'de> for Cpus {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Cpus, D::Error> {
        let text = NumberOrText::deserialize(d)?.text();
        let cpus = rtlab_sys::cpus::parse_cpu_list(&text).map_err(serde::de::Error::custom)?;
        if cpus.is_empty() {
            return Err(serde::de::Error::custom(format!("'{text}': no CPU given")));
        }
        let (online, online_text) = rtlab_sys::cpus::online_cpus(std::path::Path::new("/"));
        if let Some(c) = cpus.iter().find(|c| !online.contains(c)) {
            return Err(serde::de::Error::custom(format!(
                "CPU {c} is not online (online: {online_text})"
            )));
        }
        Ok(Cpus(cpus))
    }
}

/// The real-time fields every probe takes (`--policy`, `--priority`, `--cpus`,
/// `--no-mlockall`; in a scenario `policy`, `priority`, `cpus`, `mlockall`). Unset fields
/// come from the profile of a scenario case, or from the probe's own default on the CLI.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RtFields {
    pub policy: Option<Policy>,
    pub priority: Option<i32>,
    pub cpus: Option<Cpus>,
    pub mlockall: Option<bool>,
}

impl RtFields {
    /// `base` (a profile's settings, or the probe's default) with these fields over it. A
    /// policy given without a priority takes that policy's default priority.
    pub fn over(&self, base: &RtSettings) -> RtSettings {
        let mut rt = base.clone();
        if let Some(p) = self.policy {
            if p != rt.policy {
                rt.priority = p.default_priority();
            }
            rt.policy = p;
        }
        if let Some(p) = self.priority {
            rt.priority = p;
        }
        if let Some(c) = &self.cpus {
            rt.cpus = Some(c.0.clone());
        }
        if let Some(m) = self.mlockall {
            rt.mlockall = m;
        }
        rt
    }

    /// The priority fits the policy it will run with.
    pub fn check(&self, base: &RtSettings) -> Result<(), ConfigError> {
        self.over(base).check().map_err(|m| ConfigError::new("priority", m))
    }
}

/// A duration field that must be above zero.
pub fn positive(field: &str, d: Option<Dur>) -> Result<(), ConfigError> {
    match d {
        Some(Dur(n)) if n <= 0 => Err(ConfigError::new(
            field,
            format!("{} must be above zero", format_duration_exact(Nanos(n))),
        )),
        _ => Ok(()),
    }
}

/// A count field that must be at least 1.
pub fn at_least_one(field: &str, n: Option<u64>) -> Result<(), ConfigError> {
    if n == Some(0) {
        return Err(ConfigError::new(field, "0 must be at least 1"));
    }
    Ok(())
}

/// Builds the table of values a command line gives (only the flags the user set: every
/// default lives in the configuration struct).
#[derive(Default)]
pub struct FlagTable(pub toml::Table);

impl FlagTable {
    pub fn str(&mut self, field: &str, v: &Option<String>) -> &mut Self {
        if let Some(v) = v {
            self.0.insert(field.into(), toml::Value::String(v.clone()));
        }
        self
    }
    pub fn list(&mut self, field: &str, v: &[String]) -> &mut Self {
        if !v.is_empty() {
            let items = v.iter().map(|s| toml::Value::String(s.clone())).collect();
            self.0.insert(field.into(), toml::Value::Array(items));
        }
        self
    }
    pub fn int(&mut self, field: &str, v: Option<i64>) -> &mut Self {
        if let Some(v) = v {
            self.0.insert(field.into(), toml::Value::Integer(v));
        }
        self
    }
    pub fn flag(&mut self, field: &str, set: bool, value: bool) -> &mut Self {
        if set {
            self.0.insert(field.into(), toml::Value::Boolean(value));
        }
        self
    }
    pub fn take(&mut self) -> toml::Table {
        std::mem::take(&mut self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
    #[serde(default, deny_unknown_fields)]
    struct T {
        interval: Option<Dur>,
        payload: Option<Size>,
        rate: Option<Rate>,
        list: Option<List<Dur>>,
    }
    impl Validate for T {
        fn validate(&self) -> Result<(), ConfigError> {
            positive("interval", self.interval)
        }
    }

    fn table(s: &str) -> toml::Table {
        s.parse().unwrap()
    }

    #[test]
    fn fields_parse_with_units_and_errors_name_the_field() {
        let t: T =
            from_table(&table("interval = '1ms'\npayload = '4kb'\nrate = '1khz'\nlist = '2ms'"))
                .unwrap();
        assert_eq!(t.interval, Some(Dur(1_000_000)));
        assert_eq!(t.payload, Some(Size(4000)));
        assert_eq!(t.rate.unwrap().period_ns, 1_000_000);
        assert_eq!(t.list, Some(List(vec![Dur(2_000_000)])));
        let e = from_table::<T>(&table("interval = 'fast'")).unwrap_err();
        assert_eq!(e.field, "interval");
        assert!(e.message.contains("fast"), "{e}");
        let e = from_table::<T>(&table("interval = '0s'")).unwrap_err();
        assert_eq!(e.cli_text(), "--interval 0ns must be above zero");
        let e = from_table::<T>(&table("bogus = 1")).unwrap_err();
        assert_eq!(e.field, "bogus", "{e:?}");
        let e = from_table::<T>(&table("rate = '1000000000000hz'")).unwrap_err();
        assert_eq!(e.field, "rate", "{e:?}");
    }

    #[test]
    fn rt_fields_go_over_a_base() {
        let f = RtFields { policy: Some(Policy::Other), ..Default::default() };
        let rt = f.over(&RtSettings::fifo80());
        assert_eq!((rt.policy, rt.priority, rt.mlockall), (Policy::Other, 0, true));
        let f = RtFields { priority: Some(0), ..Default::default() };
        assert!(f.check(&RtSettings::fifo80()).is_err());
    }
}
