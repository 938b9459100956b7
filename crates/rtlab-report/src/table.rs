//! Text tables for the terminal: columns aligned, two spaces apart.

use std::fmt::Write as _;

/// Align a table: the first two columns left, the others right, two spaces apart.
pub fn align(rows: &[Vec<String>]) -> String {
    align_left(rows, &[0, 1])
}

/// Align a table: the columns in `left` left-aligned, the others right, two spaces apart.
pub fn align_left(rows: &[Vec<String>], left: &[usize]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|c| rows.iter().filter_map(|r| r.get(c)).map(|v| v.chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, v) in r.iter().enumerate() {
            let pad = widths[c] - v.chars().count();
            if c > 0 {
                line.push_str("  ");
            }
            if left.contains(&c) {
                let _ = write!(line, "{v}{}", " ".repeat(pad));
            } else {
                let _ = write!(line, "{}{v}", " ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
