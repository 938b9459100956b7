//! What `rtla timerlat top` printed, parsed: the table per CPU (IRQ and thread latency), the
//! auto-analysis of rtla >= 6.3, whether the threshold stopped it, the trace it saved.

use serde::{Deserialize, Serialize};

/// One CPU's row of the table (all values in ns; None where rtla printed `-`: no sample).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimerlatCpu {
    pub cpu: usize,
    /// Timer IRQs seen (the `#COUNT` column).
    pub count: u64,
    pub irq_min_ns: Option<u64>,
    pub irq_avg_ns: Option<u64>,
    pub irq_max_ns: Option<u64>,
    pub thread_min_ns: Option<u64>,
    pub thread_avg_ns: Option<u64>,
    pub thread_max_ns: Option<u64>,
    /// "Ret user" columns: only with the user-space threads of newer rtla (`-u`, its default where the kernel has them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_avg_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_max_ns: Option<u64>,
}

/// What `rtla timerlat top` printed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimerlatReport {
    /// The last table printed, one row per CPU.
    pub per_cpu: Vec<TimerlatCpu>,
    /// The auto-analysis block (rtla >= 6.3, when the threshold was hit), line by line.
    pub analysis: Vec<String>,
    /// rtla said "hit stop tracing": a latency reached the threshold.
    pub stopped_by_threshold: bool,
    /// The trace file rtla said it saved.
    #[serde(default)]
    pub trace_file: Option<String>,
    /// Why the run went wrong (rtla failed or had to be killed), one line.
    #[serde(default)]
    pub error: Option<String>,
    /// Everything rtla printed on stdout.
    pub raw: String,
}

impl TimerlatReport {
    /// The CPU with the largest thread latency, and that latency.
    pub fn worst_thread(&self) -> Option<(usize, u64)> {
        self.per_cpu.iter().filter_map(|c| Some((c.cpu, c.thread_max_ns?))).max_by_key(|c| c.1)
    }
}

/// Drop terminal escapes (`ESC c`, `ESC [ ... m`) that rtla prints on a terminal.
fn strip_escapes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        // ESC [ ... letter, or a two-character escape such as ESC c
        if it.next() == Some('[') {
            for d in it.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        }
    }
    out
}

/// Four columns `cur min avg max`; `-` is no sample.
fn block(text: &str, scale: u64) -> Option<[Option<u64>; 4]> {
    let w: Vec<&str> = text.split_whitespace().take(4).collect();
    if w.len() < 4 {
        return None;
    }
    let mut v = [None; 4];
    for (i, x) in w.iter().enumerate() {
        v[i] = match *x {
            "-" => None,
            n => Some(n.parse::<u64>().ok()?.saturating_mul(scale)),
        };
    }
    Some(v)
}

/// Parse the output of `rtla timerlat top` (any version from 6.1; the table in us or, with
/// `-n`, ns). The last table printed wins (without `-q` rtla reprints it every second).
pub fn parse_top(text: &str) -> TimerlatReport {
    let clean = strip_escapes(text);
    let mut r = TimerlatReport { raw: text.to_string(), ..TimerlatReport::default() };
    let mut scale = 1000;
    let mut in_analysis = false;
    for line in clean.lines() {
        let t = line.trim();
        if let Some(rest) =
            t.strip_prefix("Saving trace to ").or_else(|| t.strip_prefix("saving trace to "))
        {
            r.trace_file = Some(rest.trim().to_string());
            continue;
        }
        if t.starts_with("## CPU") {
            in_analysis = true;
        } else if t.contains("hit stop tracing") {
            r.stopped_by_threshold = true;
            continue;
        }
        if in_analysis || t.starts_with("Max timerlat IRQ latency from idle") {
            if !t.is_empty() {
                r.analysis.push(line.trim_end().to_string());
            }
            continue;
        }
        if t.contains("IRQ Timer Latency (") {
            scale = if t.contains("Latency (ns)") { 1 } else { 1000 };
            continue;
        }
        if t.starts_with("CPU COUNT") {
            r.per_cpu.clear();
            continue;
        }
        let parts: Vec<&str> = t.split('|').collect();
        if parts.len() < 3 {
            continue;
        }
        let Some((cpu, count)) = parts[0].trim().split_once(" #") else { continue };
        let (Ok(cpu), Ok(count)) = (cpu.trim().parse::<usize>(), count.trim().parse::<u64>())
        else {
            continue;
        };
        let (Some(irq), Some(thread)) = (block(parts[1], scale), block(parts[2], scale)) else {
            continue;
        };
        let user = parts.get(3).and_then(|p| block(p, scale));
        r.per_cpu.push(TimerlatCpu {
            cpu,
            count,
            irq_min_ns: irq[1],
            irq_avg_ns: irq[2],
            irq_max_ns: irq[3],
            thread_min_ns: thread[1],
            thread_avg_ns: thread[2],
            thread_max_ns: thread[3],
            user_avg_ns: user.and_then(|u| u[2]),
            user_max_ns: user.and_then(|u| u[3]),
        });
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{DOC_61, DOC_AA};

    #[test]
    fn the_plain_table_of_rtla_6_1_is_parsed() {
        let r = parse_top(DOC_61);
        assert_eq!(r.per_cpu.len(), 24);
        assert_eq!(
            r.per_cpu[6],
            TimerlatCpu {
                cpu: 6,
                count: 58634,
                irq_min_ns: Some(0),
                irq_avg_ns: Some(1000),
                irq_max_ns: Some(12_000),
                thread_min_ns: Some(2000),
                thread_avg_ns: Some(10_000),
                thread_max_ns: Some(30_000),
                user_avg_ns: None,
                user_max_ns: None,
            }
        );
        assert_eq!(
            (r.per_cpu[23].cpu, r.per_cpu[23].count, r.per_cpu[23].irq_max_ns),
            (23, 58633, Some(10_000))
        );
        assert_eq!(r.worst_thread(), Some((6, 30_000)));
        assert!(r.stopped_by_threshold);
        assert!(r.analysis.is_empty());
        assert_eq!(r.trace_file.as_deref(), Some("timerlat_trace.txt"));
        assert_eq!(r.raw, DOC_61);
    }

    #[test]
    fn the_auto_analysis_is_parsed() {
        let r = parse_top(DOC_AA);
        assert_eq!(r.per_cpu.len(), 23);
        assert_eq!(r.per_cpu[0].cpu, 1);
        let c23 = &r.per_cpu[22];
        assert_eq!(
            (c23.cpu, c23.count, c23.irq_max_ns, c23.thread_max_ns, c23.thread_avg_ns),
            (23, 12320, Some(28_000), Some(41_000), Some(11_000))
        );
        assert_eq!(r.worst_thread(), Some((23, 41_000)));
        assert!(r.stopped_by_threshold);
        assert_eq!(r.analysis[0], "## CPU 23 hit stop tracing, analyzing it ##");
        assert!(
            r.analysis[1].starts_with("IRQ handler delay:")
                && r.analysis[1].ends_with("27.49 us (65.52 %)")
        );
        assert!(r.analysis.iter().any(|l| l.starts_with("Blocking thread:")));
        assert!(r
            .analysis
            .iter()
            .any(|l| l.trim() == "objtool:49256                       3.79 us"));
        assert!(r.analysis.iter().any(|l| l.trim() == "-> _raw_spin_unlock_irqrestore"));
        assert_eq!(
            r.analysis.last().unwrap().trim(),
            "Max timerlat IRQ latency from idle: 17.48 us in cpu 4"
        );
        assert!(!r.analysis.iter().any(|l| l.contains("Saving trace")), "{:?}", r.analysis);
        assert_eq!(r.trace_file.as_deref(), Some("timerlat_trace.txt"));
    }

    #[test]
    fn nanoseconds_dashes_user_columns_escapes_and_the_last_table() {
        // -n, a CPU without thread samples, newer rtla's "Ret user" block and ALL summary,
        // two tables (without -q), terminal escapes
        let t = "\u{1b}c\u{1b}[2;37;40m                                     Timer Latency\u{1b}[0;0;0m
  0 00:00:01   |          IRQ Timer Latency (ns)        |         Thread Timer Latency (ns)
CPU COUNT      |      cur       min       avg       max |      cur       min       avg       max
  0 #10        |      100       100       100       100 |      200       200       200       200
\u{1b}c                                     Timer Latency
  0 00:00:02   |          IRQ Timer Latency (ns)        |         Thread Timer Latency (ns)      |    Ret user Timer Latency (ns)
CPU COUNT      |      cur       min       avg       max |      cur       min       avg       max |      cur       min       avg       max
  0 #20        |     1500      1000      1200      4100 |        -         -         -         - |     3000      2500      2900      9100
  1 #20        |      900       800       950      2000 |     2500      2000      2300      7000 |     4000      3500      3900      8000
---------------|----------------------------------------|---------------------------------------|-|---------------------------------------
ALL #40     e0 |                800      1075      4100 |               2000      2300      7000 |               2500      3400      9100
";
        let r = parse_top(t);
        assert_eq!(r.per_cpu.len(), 2, "{:?}", r.per_cpu);
        let c0 = &r.per_cpu[0];
        assert_eq!((c0.count, c0.irq_min_ns, c0.irq_max_ns), (20, Some(1000), Some(4100)));
        assert_eq!((c0.thread_avg_ns, c0.thread_max_ns), (None, None));
        assert_eq!((c0.user_avg_ns, c0.user_max_ns), (Some(2900), Some(9100)));
        assert_eq!(r.per_cpu[1].thread_max_ns, Some(7000));
        assert_eq!(r.worst_thread(), Some((1, 7000)));
        assert!(!r.stopped_by_threshold);
        assert!(r.analysis.is_empty());
        assert!(parse_top("").per_cpu.is_empty());
    }
}
