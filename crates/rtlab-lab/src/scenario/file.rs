//! The scenario file's TOML as serde reads it (every key spanned, for errors naming the
//! line), and the built-in loads. Pure data; the reading steps are in `read.rs`.

use super::spec::ScenarioError;
use serde::Deserialize;
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
    pub(super) fn text(&self) -> String {
        match self {
            Scalar::Int(i) => i.to_string(),
            Scalar::Str(s) => s.clone(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileSpec {
    pub(super) name: Spanned<String>,
    pub(super) description: Option<String>,
    pub(super) duration: Option<Spanned<toml::Value>>,
    pub(super) count: Option<Spanned<toml::Value>>,
    pub(super) repetitions: Option<Spanned<i64>>,
    pub(super) deadline: Option<Spanned<toml::Value>>,
    pub(super) trace_on_spike: Option<Spanned<String>>,
    pub(super) counters: Option<bool>,
    pub(super) max_cases: Option<Spanned<i64>>,
    /// The far side of every probe that has one (a probe's own `far` wins).
    pub(super) far: Option<Spanned<String>>,
    pub(super) loads: Option<Spanned<Vec<String>>>,
    pub(super) profiles: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub(super) probe: Vec<Spanned<BTreeMap<String, Spanned<toml::Value>>>>,
    #[serde(default)]
    pub(super) load: BTreeMap<String, Spanned<LoadFileSpec>>,
    #[serde(default)]
    pub(super) published: Vec<Spanned<PublishedSpec>>,
    /// Limits the cases must keep (see `gates.rs`).
    #[serde(default)]
    pub(super) gate: Vec<GateTable>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LoadFileSpec {
    pub(super) kind: Spanned<String>,
    pub(super) workers: Option<Spanned<i64>>,
    pub(super) method: Option<String>,
    pub(super) rate: Option<Spanned<String>>,
    pub(super) direction: Option<Spanned<String>>,
    pub(super) protocol: Option<Spanned<String>>,
    pub(super) command: Option<Vec<String>>,
    pub(super) cpu: Option<i64>,
    pub(super) vm: Option<i64>,
    pub(super) io: Option<i64>,
    pub(super) hdd: Option<i64>,
    /// Percent of each CPU worker's time busy (stress-ng --cpu-load), S4's 80 %.
    pub(super) cpu_load: Option<Spanned<i64>>,
    /// For kind = "combined": names of other loads (built in or defined) run together.
    pub(super) parts: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PublishedSpec {
    /// Which cases: every key must equal the case's probe/load/profile/param of that name.
    #[serde(rename = "match")]
    pub(super) matches: BTreeMap<String, Scalar>,
    pub(super) source: String,
    pub(super) label: String,
    pub(super) min_us: Option<f64>,
    pub(super) avg_us: Option<f64>,
    pub(super) max_us: Option<f64>,
    pub(super) median_us: Option<f64>,
    pub(super) missed: Option<u64>,
    pub(super) lost: Option<u64>,
    pub(super) of: Option<u64>,
}

/// A `[[gate]]` table as read from the file.
pub(super) type GateTable = Spanned<BTreeMap<String, Spanned<toml::Value>>>;

/// Where in the file: its origin and text, for errors that name the line.
pub(super) struct Ctx<'a> {
    pub(super) origin: &'a str,
    pub(super) text: &'a str,
}

impl Ctx<'_> {
    fn line_of(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())].bytes().filter(|&b| b == b'\n').count() + 1
    }
    pub(super) fn err(
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
