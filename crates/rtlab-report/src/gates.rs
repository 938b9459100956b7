//! A run's gates and their verdicts: a tally line, the table in the terminal report and the
//! HTML section.
//!
//! Contract: every stored verdict is shown (kept ones too); nothing when the run has no
//! gates. Pure text; the HTML escapes every value.

use crate::svg::esc;
use crate::table::align_left;
use rtlab_core::gate::{GateVerdict, Outcome};
use rtlab_core::run::Run;
use std::fmt::Write as _;

/// `2 kept, 1 broken` (the outcomes present, in a fixed order).
pub fn tally(verdicts: &[GateVerdict]) -> String {
    let order = [
        Outcome::Kept,
        Outcome::Broken,
        Outcome::Failed,
        Outcome::Unmatched,
        Outcome::Skipped,
        Outcome::NoCase,
    ];
    order
        .iter()
        .filter_map(|o| {
            let n = verdicts.iter().filter(|v| v.outcome == *o).count();
            (n > 0).then(|| format!("{n} {}", o.name()))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn row(v: &GateVerdict) -> [String; 6] {
    let value = match (&v.value, v.outcome) {
        (Some(x), _) => x.clone(),
        (None, _) => v.message.clone(),
    };
    [
        v.outcome.name().to_uppercase(),
        format!("{} {}", v.origin, v.gate),
        v.case.clone().unwrap_or_else(|| "-".into()),
        v.stream.clone().unwrap_or_else(|| "-".into()),
        format!("{} <= {}", v.metric.name(), v.limit),
        value,
    ]
}

/// The terminal report's gates of a run (empty when it has none).
pub fn gates_text(run: &Run) -> String {
    if run.gates.is_empty() {
        return String::new();
    }
    let mut out = format!("\nGates ({})\n", tally(&run.gates));
    let mut rows =
        vec![["verdict", "gate", "case", "stream", "limit", "value"].map(str::to_string).to_vec()];
    rows.extend(run.gates.iter().map(|v| row(v).to_vec()));
    out.push_str(&align_left(&rows, &[0, 1, 2, 3, 4, 5]));
    out
}

/// The HTML report's gates of a run (empty when it has none).
pub fn gates_html(run: &Run) -> String {
    if run.gates.is_empty() {
        return String::new();
    }
    let mut o = format!("<h2>Gates ({})</h2>\n<div class=\"tablebox\"><table class=\"gates\"><tr><th>verdict</th><th>gate</th><th>case</th><th>stream</th><th>limit</th><th>value</th></tr>\n", esc(&tally(&run.gates)));
    for v in &run.gates {
        let r = row(v);
        let _ = write!(o, "<tr class=\"{}\">", v.outcome.name());
        for cell in r {
            let _ = write!(o, "<td>{}</td>", esc(&cell));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table></div>\n");
    o
}
