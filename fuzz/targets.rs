#![allow(dead_code)]
//! The bodies of rtlab's fuzz targets: everything another machine or program writes that
//! rtlab reads. Each takes arbitrary bytes and must never panic, hang or allocate without
//! bound; where the code under test promises an invariant (the UDP accounting's identities,
//! a message that reads back as written) the target asserts it.
//!
//! Shared by the libFuzzer targets (`fuzz/fuzz_targets/*.rs`, `cargo +nightly fuzz run NAME`)
//! and by the replay of the committed corpora as ordinary tests
//! (`crates/rtlab/tests/fuzz_corpus.rs`), so a corpus file is a regression test forever.

use rtlab_engines::udp::{reflect::Reflector, track::Tracker, wire};

/// A target's body.
pub type Target = fn(&[u8]);

/// The targets by name (the corpus directories' names).
pub const TARGETS: &[(&str, Target)] = &[
    ("udp_wire", udp_wire),
    ("udp_reflector", udp_reflector),
    ("udp_tracker", udp_tracker),
    ("pubsub_header", pubsub_header),
    ("ros_msg", ros_msg),
    ("ros_graph", ros_graph),
    ("far_lines", far_lines),
    ("role_events", role_events),
    ("scenario", scenario),
    ("store_url", store_url),
    ("run_report", run_report),
    ("trace_ring", trace_ring),
];

/// A datagram at the UDP probe's parser: a header that parses writes back the same bytes.
pub fn udp_wire(data: &[u8]) {
    if let Ok(h) = wire::parse(data) {
        if h.form == wire::Form::Full {
            let mut b = data.to_vec();
            wire::write(&mut b, h.kind, h.run_id, h.seq, h.send_ns);
            assert_eq!(wire::parse(&b), Ok(h), "a parsed header writes back as itself");
        }
    }
}

/// Datagrams at the reflector: it answers in place or ignores, and its counters add up.
pub fn udp_reflector(data: &[u8]) {
    let mut r = Reflector::new(Some(3));
    let mut buf = [0u8; 2048];
    let mut n = 0u64;
    // datagrams separated by 0xFF bytes (any split of the input is as good)
    for d in data.split(|&b| b == 0xff).take(4096) {
        let len = d.len().min(buf.len());
        buf[..len].copy_from_slice(&d[..len]);
        let _ = r.handle(&mut buf, len);
        n += 1;
        // a length beyond the buffer is malformed, never a panic
        let too_long = buf.len() + 1;
        let _ = r.handle(&mut buf, too_long);
        n += 1;
    }
    assert_eq!(r.counts.received, n);
}

/// A run of the UDP probe's accounting driven by arbitrary events: sends, replies (right
/// or forged), malformed datagrams, time passing, failed sends; at the end every identity
/// the tracker documents holds.
pub fn udp_tracker(data: &[u8]) {
    const RUN: u64 = 0x1234_5678_9abc_def0;
    const PAYLOAD: usize = 64;
    let mut t = Tracker::new(8, 50_000, 10_000, RUN, PAYLOAD);
    let mut now: i64 = 1_000_000;
    let mut sent: Vec<(u64, i64)> = Vec::new();
    let mut bytes = data.iter().copied();
    let mut take = || bytes.next();
    while let Some(op) = take() {
        let arg = take().unwrap_or(0) as i64;
        match op % 8 {
            0 | 1 => {
                let seq = t.on_send(now);
                if sent.len() < 100_000 {
                    sent.push((seq, now));
                }
            }
            2 | 3 => {
                // a reply to one of the sends, `arg`-th from the end, after a delay
                if let Some(&(seq, at)) = sent.iter().rev().nth((arg % 16) as usize) {
                    let h = wire::Header {
                        form: wire::Form::Full,
                        kind: wire::Kind::Reply,
                        run_id: RUN,
                        seq,
                        send_ns: at,
                    };
                    t.on_reply(&h, PAYLOAD, now.max(at));
                }
            }
            4 => {
                // forged: another run, a wrong length, a sequence not sent, a wrong stamp
                let seq = t.next_seq().saturating_sub((arg % 4) as u64);
                let h = wire::Header {
                    form: if arg & 1 == 0 { wire::Form::Full } else { wire::Form::Short },
                    kind: if arg & 2 == 0 { wire::Kind::Reply } else { wire::Kind::Request },
                    run_id: if arg & 4 == 0 { RUN } else { !RUN },
                    seq: if arg & 8 == 0 { seq } else { u64::MAX - seq },
                    send_ns: now - arg,
                };
                t.on_reply(&h, if arg & 16 == 0 { PAYLOAD } else { PAYLOAD + 1 }, now);
            }
            5 => {
                t.on_malformed();
            }
            6 => {
                now += arg * 1000;
                t.expire(now);
            }
            _ => {
                if let Some(&(seq, _)) = sent.iter().rev().nth((arg % 4) as usize) {
                    t.send_failed(seq);
                }
            }
        }
    }
    t.finish();
    let c = t.counts;
    assert_eq!(c.sent, c.samples + c.lost, "sent = samples + lost: {c:?}");
    assert!(c.missed <= c.samples && c.out_of_order <= c.samples, "{c:?}");
    assert!(c.late - c.stale <= c.lost, "a late reply answers a request counted lost: {c:?}");
    assert!(c.foreign <= c.malformed && c.send_errors <= c.lost, "{c:?}");
}

/// A pub/sub message's rtlab header (sequence, stamp).
pub fn pubsub_header(data: &[u8]) {
    if let Some((seq, stamp)) = rtlab_pubsub::transport::decode_header(data) {
        let mut b = vec![0u8; data.len()];
        rtlab_pubsub::transport::encode_header(&mut b, seq, stamp);
        assert_eq!(rtlab_pubsub::transport::decode_header(&b), Some((seq, stamp)));
    }
}

/// The CDR head of a ROS 2 message (`rtlab observe`, `--transport ros2`).
pub fn ros_msg(data: &[u8]) {
    let _ = rtlab_pubsub::ros_msg::decode(data);
}

/// A `ros_discovery_info` sample (ParticipantEntitiesInfo) from another machine.
pub fn ros_graph(data: &[u8]) {
    let _ = rtlab_pubsub::observe::ros_graph::decode(data);
}

/// What the far side's pipes carry, read as both sides read it: bounded lines, each parsed
/// as a message either way.
pub fn far_lines(data: &[u8]) {
    use rtlab_core::lines::{BoundedLines, Line};
    use rtlab_lab::far::protocol::{parse, FromFar, ToFar};
    for l in BoundedLines::new(data, 4096) {
        if let Line::Text(l) = l {
            let _ = parse::<ToFar>(&l);
            let _ = parse::<FromFar>(&l);
        }
    }
}

/// A role process's event lines (a subscriber process, a role started by the agent).
pub fn role_events(data: &[u8]) {
    use rtlab_core::lines::{BoundedLines, Line};
    for l in BoundedLines::new(data, 4096) {
        if let Line::Text(l) = l {
            let _ = rtlab_pubsub::engine::parse_event(&l);
        }
    }
}

/// A scenario file (the user's, or one handed over by another machine with a run).
pub fn scenario(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = rtlab_lab::scenario::Scenario::parse("fuzz.toml", text, 1.0);
}

/// A store's location (`--db`, `--to`, `RTLAB_DB`): whatever reads as
/// `SCHEME://USER:PASSWORD@...` is shown, and fails to parse, the same whatever its password
/// (so the password is never in what is shown or said).
pub fn store_url(data: &[u8]) {
    use rtlab_store::url::{redact, Location};
    let Ok(text) = std::str::from_utf8(data) else { return };
    let parsed = Location::parse(text);
    let shown = redact(text);
    let Some((scheme, rest)) = text.split_once("://") else { return };
    let is_scheme = scheme.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    let Some((auth, _)) = rest.rsplit_once('@') else { return };
    let Some((_, pw)) = auth.split_once(':') else { return };
    // a password of letters and digits that appears nowhere else: swap it for another
    if !is_scheme
        || pw.is_empty()
        || !pw.chars().all(|c| c.is_ascii_alphanumeric())
        || text.matches(pw).count() != 1
    {
        return;
    }
    let other = text.replacen(pw, &"Q".repeat(pw.len()), 1);
    assert_eq!(shown, redact(&other), "what is shown depends on the password");
    if let (Err(a), Err(b)) = (&parsed, &Location::parse(&other)) {
        assert_eq!(a, b, "the error depends on the password");
    }
}

/// A run from another machine (a pushed run as `rtlab export --format json` writes it: its
/// documents, host names, statistics): rendered in the terminal and as HTML (whose every
/// stored value is escaped), and compared with itself (no regression, by definition).
pub fn run_report(data: &[u8]) {
    use rtlab_report::compare::{compare, CompareConfig, Metric};
    let Ok(run) = serde_json::from_slice::<rtlab_core::run::Run>(data) else { return };
    let _ = rtlab_report::render_terminal(std::slice::from_ref(&run), false);
    let html = rtlab_report::render_html(std::slice::from_ref(&run));
    assert!(!html.contains("<script"), "a stored value reached the page unescaped");
    let c = compare(
        &run,
        &run,
        CompareConfig { metric: Metric::P99, threshold_pct: Some(1.0), alpha: 0.01 },
    );
    assert_eq!(c.regressions(), 0, "a run compared with itself");
}

/// A trace ring as a traced process leaves it (any process of the application writes its
/// own): opened, read to its end and decoded, never a panic and never a read outside the
/// ring. The first byte's low bit chooses: the bytes as the whole file's start (the header's
/// checks), or a valid header with the bytes as head and tail (8 bytes each) and slots.
pub fn trace_ring(data: &[u8]) {
    use rtlab_pubsub::trace::ring::{Ring, HEADER, MAGIC, MIN_SLOTS, SLOT, VERSION};
    let mut b = vec![0u8; HEADER + MIN_SLOTS as usize * SLOT];
    match data.split_first() {
        Some((f, rest)) if f & 1 == 1 => {
            b[..8].copy_from_slice(MAGIC);
            b[8..12].copy_from_slice(&VERSION.to_ne_bytes());
            b[12..16].copy_from_slice(&(SLOT as u32).to_ne_bytes());
            b[16..24].copy_from_slice(&MIN_SLOTS.to_ne_bytes());
            let (head, rest) = rest.split_at(rest.len().min(8));
            b[64..64 + head.len()].copy_from_slice(head);
            let (tail, rest) = rest.split_at(rest.len().min(8));
            b[128..128 + tail.len()].copy_from_slice(tail);
            let n = rest.len().min(b.len() - HEADER);
            b[HEADER..HEADER + n].copy_from_slice(&rest[..n]);
        }
        _ => {
            let n = data.len().min(b.len());
            b[..n].copy_from_slice(&data[..n]);
        }
    }
    let path = std::env::temp_dir().join(format!("rtlab-fuzz-ring-{}", std::process::id()));
    std::fs::write(&path, &b).expect("a temporary file");
    if let Ok(mut ring) = Ring::open(&path) {
        let mut out = Vec::new();
        for _ in 0..4 {
            match ring.read(&mut out, 1 << 20) {
                Ok(got) => assert!(got.records <= MIN_SLOTS, "more records than slots"),
                Err(_) => break,
            }
        }
        for r in &out {
            let _ = rtlab_pubsub::trace::event::decode(r);
        }
    }
    let _ = std::fs::remove_file(&path);
}
