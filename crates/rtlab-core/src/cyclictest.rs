//! A 1-us linear histogram and cyclictest's `-h` text format, so that gnuplot scripts
//! written for cyclictest keep working with `rtlab timer --histogram-file`.
//!
//! Contract: `record` never allocates: the buckets and the list of overflow cycle numbers
//! are preallocated (cyclictest keeps the first 1024 overflow cycles too; the rest are
//! counted as "others"). Format (rt-tests `src/cyclictest/cyclictest.c`, `print_hist`):
//! `# Histogram`, one line per us `%06d` then per thread a tab and `%06lu`, then
//! `# Total:`, `# Min Latencies:`, `# Avg Latencies:`, `# Max Latencies:`,
//! `# Histogram Overflows:`, `# Histogram Overflow at cycle number:`, `# Thread N: ...`.
//! Negative samples (relative mode can fire early) go to bucket 0 and are counted on an
//! extra `# Histogram Underflows:` comment line, which gnuplot ignores like every `#` line.

use std::fmt::Write as _;

const MAX_OUTLIERS: usize = 1024;

/// Per-thread 1-us histogram with overflow accounting.
#[derive(Clone, Debug)]
pub struct UsHistogram {
    buckets: Box<[u64]>,
    overflow: u64,
    underflow: u64,
    outliers: Vec<u64>,
}

impl UsHistogram {
    /// `buckets` = number of 1-us bins (cyclictest's `-h N`).
    pub fn new(buckets: usize) -> Self {
        UsHistogram {
            buckets: vec![0; buckets.max(1)].into_boxed_slice(),
            overflow: 0,
            underflow: 0,
            outliers: Vec::with_capacity(MAX_OUTLIERS),
        }
    }

    #[inline]
    pub fn record(&mut self, cycle: u64, v_ns: i64) {
        if v_ns < 0 {
            self.underflow += 1;
            self.buckets[0] += 1;
            return;
        }
        let us = (v_ns / 1_000) as usize;
        if us < self.buckets.len() {
            self.buckets[us] += 1;
        } else {
            self.overflow += 1;
            if self.outliers.len() < MAX_OUTLIERS {
                self.outliers.push(cycle); // within preallocated capacity: no allocation
            }
        }
    }
}

/// Per-thread figures for the footer, in microseconds as cyclictest prints them.
pub struct ThreadFooter {
    pub min_us: i64,
    pub avg_us: i64,
    pub max_us: i64,
}

/// Render cyclictest's `-h` output for several threads.
pub fn render(hists: &[&UsHistogram], footers: &[ThreadFooter]) -> String {
    let mut s = String::new();
    let n = hists.iter().map(|h| h.buckets.len()).max().unwrap_or(0);
    s.push_str("# Histogram\n");
    for i in 0..n {
        let _ = write!(s, "{i:06}");
        for (j, h) in hists.iter().enumerate() {
            let sep = if j == 0 { ' ' } else { '\t' };
            let _ = write!(s, "{sep}{:06}", h.buckets.get(i).copied().unwrap_or(0));
        }
        s.push('\n');
    }
    s.push_str("# Total:");
    for h in hists {
        let total: u64 = h.buckets.iter().sum::<u64>();
        let _ = write!(s, " {total:09}");
    }
    s.push('\n');
    for (label, pick) in [
        ("Min", (|f: &ThreadFooter| f.min_us) as fn(&ThreadFooter) -> i64),
        ("Avg", |f| f.avg_us),
        ("Max", |f| f.max_us),
    ] {
        let _ = write!(s, "# {label} Latencies:");
        for f in footers {
            let _ = write!(s, " {:05}", pick(f));
        }
        s.push('\n');
    }
    s.push_str("# Histogram Overflows:");
    for h in hists {
        let _ = write!(s, " {:05}", h.overflow);
    }
    s.push('\n');
    if hists.iter().any(|h| h.underflow > 0) {
        s.push_str("# Histogram Underflows:");
        for h in hists {
            let _ = write!(s, " {:05}", h.underflow);
        }
        s.push('\n');
    }
    s.push_str("# Histogram Overflow at cycle number:\n");
    for (i, h) in hists.iter().enumerate() {
        let _ = write!(s, "# Thread {i}:");
        for c in &h.outliers {
            let _ = write!(s, " {c:05}");
        }
        if (h.outliers.len() as u64) < h.overflow {
            let _ = write!(s, " # {:05} others", h.overflow - h.outliers.len() as u64);
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_cyclictests_format() {
        let mut a = UsHistogram::new(4);
        let mut b = UsHistogram::new(4);
        a.record(0, 1_500);
        a.record(1, 1_999);
        a.record(2, 9_000); // overflow at cycle 2
        b.record(0, 3_000);
        let out = render(
            &[&a, &b],
            &[
                ThreadFooter { min_us: 1, avg_us: 4, max_us: 9 },
                ThreadFooter { min_us: 3, avg_us: 3, max_us: 3 },
            ],
        );
        let expect = "# Histogram\n000000 000000\t000000\n000001 000002\t000000\n000002 000000\t000000\n000003 000000\t000001\n\
# Total: 000000002 000000001\n# Min Latencies: 00001 00003\n# Avg Latencies: 00004 00003\n# Max Latencies: 00009 00003\n\
# Histogram Overflows: 00001 00000\n# Histogram Overflow at cycle number:\n# Thread 0: 00002\n# Thread 1:\n";
        assert_eq!(out, expect);
    }

    #[test]
    fn many_overflows_are_summarised_as_others() {
        let mut a = UsHistogram::new(1);
        for c in 0..(MAX_OUTLIERS as u64 + 5) {
            a.record(c, 5_000);
        }
        a.record(0, -10);
        let out = render(&[&a], &[ThreadFooter { min_us: 0, avg_us: 5, max_us: 5 }]);
        assert!(out.contains("# 00005 others"));
        assert!(out.contains("# Histogram Underflows: 00001"));
        assert!(out.contains(&format!("# Histogram Overflows: {:05}", MAX_OUTLIERS + 5)));
    }
}
