//! The words of a fleet's store (`rtlab serve`): which runs a page shows ([`RunFilter`]), a
//! case's value run after run ([`TrendPoint`]). The store answers them with queries; the
//! dashboard renders them.

use crate::run::RunSummary;
use serde::{Deserialize, Serialize};

/// The filters of the runs page; an empty field matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunFilter {
    pub host: String,
    pub kernel: String,
    pub scenario: String,
    /// Runs started on or after this date or time (RFC 3339 prefix, UTC: `2026-11-01`).
    pub since: String,
    /// Runs started on or before this date or time (RFC 3339 prefix, UTC).
    pub until: String,
}

impl RunFilter {
    /// Whether a run of this host, kernel, scenario and start passes every filter (host,
    /// kernel, scenario: exact; dates: by the started_at text, which is RFC 3339 UTC and so
    /// orders as time does, compared on the filter's length). The store's queries say the
    /// same in SQL.
    pub fn matches(&self, host: &str, kernel: &str, scenario: &str, started_at: &str) -> bool {
        let day = |n: usize| started_at.get(..n).unwrap_or(started_at).to_string();
        (self.host.is_empty() || host == self.host)
            && (self.kernel.is_empty() || kernel == self.kernel)
            && (self.scenario.is_empty() || scenario == self.scenario)
            && (self.since.is_empty() || day(self.since.len()) >= self.since)
            && (self.until.is_empty() || day(self.until.len()) <= self.until)
    }
}

/// One page of the runs that pass a filter, newest first.
#[derive(Clone, Debug, PartialEq)]
pub struct RunsPage {
    pub runs: Vec<RunSummary>,
    /// The run just older than the page's last (for its "compare with the run before").
    pub older: Option<RunSummary>,
    /// How many runs pass the filter, and how many the store holds.
    pub matching: usize,
    pub total: usize,
    /// How many newer runs that pass were skipped before this page.
    pub offset: usize,
}

/// One run's value of a case: its headline stream's (`all`, else the first) p50, p99.9, max
/// and missed deadlines, with the run's host, kernel and the case's profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrendPoint {
    pub run: i64,
    pub started_at: String,
    pub host: String,
    pub kernel: String,
    pub profile: String,
    pub stream: String,
    pub p50_ns: Option<i64>,
    pub p99_9_ns: Option<i64>,
    pub max_ns: Option<i64>,
    pub missed: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_match_exact_names_and_date_prefixes() {
        let r = |f: &RunFilter| f.matches("bot1", "6.1.0-rt", "quick", "2026-11-25T10:20:30Z");
        assert!(r(&RunFilter::default()));
        let f = |h: &str, k: &str, s: &str, a: &str, b: &str| RunFilter {
            host: h.into(),
            kernel: k.into(),
            scenario: s.into(),
            since: a.into(),
            until: b.into(),
        };
        assert!(r(&f("bot1", "6.1.0-rt", "quick", "2026-11-25", "2026-11-25")));
        assert!(r(&f("", "", "", "2026-11", "2026-11-25T10")));
        assert!(!r(&f("bot", "", "", "", "")));
        assert!(!r(&f("", "6.1.0", "", "", "")));
        assert!(!r(&f("", "", "quick2", "", "")));
        assert!(!r(&f("", "", "", "2026-11-26", "")));
        assert!(!r(&f("", "", "", "", "2026-11-24")));
    }
}
