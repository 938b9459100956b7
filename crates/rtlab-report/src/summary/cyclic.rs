//! `rtlab cyclic`'s tables: response time, wake-up latency and job duration per thread.

use crate::render::{stats_table, Row};
use rtlab_core::schema::ResultDocument;
use std::fmt::Write as _;

/// The three tables of a cyclic run, each after its title and followed by an empty line.
pub fn render(doc: &ResultDocument, color: bool) -> String {
    let mut text = String::new();
    for (title, suffix) in [
        ("response time (job end - slot)", ""),
        ("wake-up latency (woke - slot)", ".wakeup"),
        ("job duration (job end - woke)", ".job"),
    ] {
        let rows: Vec<Row> = doc
            .streams
            .iter()
            .filter(|s| {
                let base = s.name.strip_suffix(suffix).filter(|_| !suffix.is_empty());
                match base {
                    Some(b) => !b.contains('.'),
                    None => suffix.is_empty() && !s.name.contains('.'),
                }
            })
            .map(|s| Row { label: s.name.clone(), summary: &s.stats })
            .collect();
        let _ = writeln!(text, "{title}");
        text.push_str(&stats_table(&rows, color));
        text.push('\n');
    }
    text
}
