//! The evidence on a terminal: each spike explained (the first only, from a document
//! without `spikes`), then the worst windows of the headline stream with what the kernel did
//! in each, then the notes.
//!
//! Contract: pure; returns the text, never prints.

use rtlab_core::evidence::{Evidence, ExplainedSpike, WindowCounters};
use rtlab_core::schema::Stream;
use rtlab_core::units::{us_1, Nanos};
use std::fmt::Write as _;

/// The stream whose worst windows are shown: the probe's headline (its first stream: thread0,
/// ping, the first subscriber) when the counters follow its grid.
fn worst_stream<'a>(streams: &'a [Stream], c: &WindowCounters) -> Option<&'a Stream> {
    streams.iter().find(|s| {
        s.windows.width_ns == c.width_ns
            && (c.start_monotonic_ns.is_none() || s.start_monotonic_ns == c.start_monotonic_ns)
    })
}

/// The terminal text: each spike explained (the first only, from a document without
/// `spikes`) and its explanation, then the worst windows with what the kernel did in each.
pub fn render(ev: &Evidence, streams: &[Stream]) -> String {
    let mut out = String::new();
    if let Some(sp) = &ev.spike {
        let _ = writeln!(out, "\nspike evidence (--trace-on-spike {} us)", us_1(sp.threshold_ns));
        let first = match (sp.index, sp.at_ns, sp.value_ns) {
            (Some(index), Some(at_ns), Some(value_ns)) => vec![ExplainedSpike {
                stream: sp.stream.clone(),
                index,
                at_ns,
                value_ns,
                trace_file: sp.trace_file.clone(),
                attribution: sp.attribution.clone(),
            }],
            _ => Vec::new(),
        };
        let all = if sp.spikes.is_empty() { &first } else { &sp.spikes };
        if all.is_empty() {
            let _ = writeln!(out, "  no sample above the threshold: nothing to explain");
        }
        for (n, s) in all.iter().enumerate() {
            let of = s.stream.as_deref().map(|s| format!("{s} ")).unwrap_or_default();
            let nth = if all.len() > 1 {
                format!("spike {} of {}: ", n + 1, all.len())
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "  {nth}{of}sample {} at {} after start: {} us",
                s.index,
                Nanos(s.at_ns),
                us_1(s.value_ns)
            );
            for l in &s.attribution {
                let _ = writeln!(out, "  - {l}");
            }
            if let Some(f) = &s.trace_file {
                let _ = writeln!(out, "  trace saved: {f}");
            }
        }
    }
    if let Some(c) = &ev.counters {
        if let Some(s) = worst_stream(streams, c) {
            let worst = c.worst(&s.windows, 3);
            if !worst.is_empty() {
                let _ = writeln!(
                    out,
                    "\nworst windows of {} ({} each) and what the kernel did in them",
                    s.name,
                    Nanos(c.width_ns)
                );
                for (i, max, k) in worst {
                    let what = k
                        .map(|k| k.describe())
                        .unwrap_or_else(|| "no counters for this window".into());
                    let _ = writeln!(
                        out,
                        "  window {i} (from {}): max {} us; {what}",
                        Nanos(i as i64 * c.width_ns),
                        us_1(max)
                    );
                }
            }
        }
    }
    for n in &ev.notes {
        let _ = writeln!(out, "  note: {n}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::evidence::{KernelCounters, SpikeEvidence};
    use rtlab_core::testing::stream;

    #[test]
    fn the_worst_windows_are_shown_with_their_counters() {
        let s = vec![stream("ping", vec![Some(5_000), Some(90_000), Some(7_000)], Some(10))];
        let k =
            |n| KernelCounters { net_rx: vec![n, 0], context_switches: n, ..Default::default() };
        let ev = Evidence {
            counters: Some(WindowCounters {
                width_ns: 1_000,
                start_monotonic_ns: Some(10),
                resolution_ns: 125,
                windows: vec![k(1), k(40), k(2)],
                last_partial: false,
            }),
            spike: Some(SpikeEvidence {
                threshold_ns: 50_000,
                index: Some(1),
                at_ns: Some(1_000),
                value_ns: Some(90_000),
                attribution: vec!["preempted by pid 9 (x, kernel prio 9) for 80 us".into()],
                ..Default::default()
            }),
            notes: vec!["no timerlat".into()],
        };
        let t = render(&ev, &s);
        assert!(t.contains("sample 1 at 1.0us after start: 90.0 us"), "{t}");
        assert!(t.contains("  - preempted by pid 9"), "{t}");
        assert!(t.contains("window 1 (from 1.0us): max 90.0 us; NET_RX 40 (CPU 0: 40)"), "{t}");
        let first = t.find("window 1 ").unwrap();
        assert!(
            first < t.find("window 2 ").unwrap()
                && t.find("window 2 ").unwrap() < t.find("window 0 ").unwrap(),
            "worst first: {t}"
        );
        assert!(t.contains("note: no timerlat"));
    }

    #[test]
    fn every_explained_spike_is_shown_in_order() {
        let spike = |index, who: &str| ExplainedSpike {
            stream: Some("thread0".into()),
            index,
            at_ns: index as i64 * 1_000_000,
            value_ns: 9_400_000,
            trace_file: Some(format!("/tmp/s-{index}.trace")),
            attribution: vec![who.into()],
        };
        let spikes =
            vec![spike(3, "no task ran on CPU 1"), spike(40, "preempted by pid 7 (rtlab-hog")];
        let ev = Evidence {
            spike: Some(SpikeEvidence {
                threshold_ns: 5_000_000,
                index: Some(3),
                at_ns: Some(3_000_000),
                value_ns: Some(9_400_000),
                attribution: vec!["no task ran on CPU 1".into()],
                spikes,
                ..Default::default()
            }),
            ..Default::default()
        };
        let t = render(&ev, &[]);
        let a = t.find("spike 1 of 2: thread0 sample 3 at 3.00ms").unwrap_or_else(|| panic!("{t}"));
        let b =
            t.find("spike 2 of 2: thread0 sample 40 at 40.00ms").unwrap_or_else(|| panic!("{t}"));
        assert!(
            a < t.find("  - no task ran").unwrap() && b < t.find("  - preempted by pid 7").unwrap(),
            "{t}"
        );
        assert!(t.contains("trace saved: /tmp/s-40.trace"), "{t}");
    }

    #[test]
    fn no_spike_says_so() {
        let ev = Evidence {
            spike: Some(SpikeEvidence { threshold_ns: 1_000, ..Default::default() }),
            ..Default::default()
        };
        assert!(render(&ev, &[]).contains("no sample above the threshold"));
    }
}
