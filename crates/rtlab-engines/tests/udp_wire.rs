//! Property tests of the UDP datagram parser and of the reflector's answer: no input
//! makes them panic, a reply is never longer than its request, and what is written
//! parses back to the same fields.

use proptest::prelude::*;
use rtlab_engines::udp::reflect::{Action, Reflector};
use rtlab_engines::udp::wire::{self, Form, Kind};

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![Just(Kind::Request), Just(Kind::Reply), Just(Kind::Hello), Just(Kind::HelloReply)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Arbitrary bytes: parse returns, never panics; the reflector never answers more than it got.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = wire::parse(&bytes);
        let mut buf = bytes.clone();
        buf.resize(bytes.len().max(1), 0);
        let mut r = Reflector::new(Some(3));
        match r.handle(&mut buf, bytes.len()) {
            Action::Answer(n) => {
                prop_assert!(n <= bytes.len());
                // only a request or a hello is answered
                let h = wire::parse(&bytes).unwrap();
                prop_assert!(matches!(h.kind, Kind::Request | Kind::Hello));
            }
            Action::Ignore => {}
        }
    }

    /// Bytes that start like our datagrams (right magic, random rest) are the hard case.
    #[test]
    fn near_miss_headers_never_panic(rest in prop::collection::vec(any::<u8>(), 0..64), full in any::<bool>()) {
        let mut b = if full { b"RTLB".to_vec() } else { b"Rt".to_vec() };
        b.extend_from_slice(&rest);
        if let Ok(h) = wire::parse(&b) {
            prop_assert!(b.len() >= wire::MIN_LEN);
            prop_assert_eq!(h.form == Form::Full, b.len() >= wire::FULL_LEN);
        }
        let mut buf = b.clone();
        let n = buf.len();
        let mut r = Reflector::new(None);
        if let Action::Answer(len) = r.handle(&mut buf, n) {
            prop_assert_eq!(len, n);
        }
    }

    /// Whatever is written parses back (the short form keeps what it documents).
    #[test]
    fn write_then_parse_round_trips(len in wire::MIN_LEN..2048usize, k in kind(), run in any::<u64>(), seq in any::<u64>(), t in any::<i64>()) {
        let mut b = vec![0u8; len];
        wire::write(&mut b, k, run, seq, t);
        wire::fill(&mut b);
        let h = wire::parse(&b).unwrap();
        prop_assert_eq!(h.kind, k);
        prop_assert_eq!(h.seq, seq);
        prop_assert!(h.is_run(run));
        prop_assert!(h.stamp_is(t));
        if len >= wire::FULL_LEN {
            prop_assert_eq!((h.run_id, h.send_ns), (run, t));
        }
    }

    /// A request's answer has its exact length and fields, and only the kind changed.
    #[test]
    fn answers_keep_length_and_fields(len in prop_oneof![wire::MIN_LEN..64usize, Just(wire::MAX_LEN)], run in any::<u64>(), seq in any::<u64>(), t in any::<i64>()) {
        let mut b = vec![0u8; len];
        wire::write(&mut b, Kind::Request, run, seq, t);
        wire::fill(&mut b);
        let before = b.clone();
        let mut r = Reflector::new(None);
        prop_assert_eq!(r.handle(&mut b, len), Action::Answer(len));
        let h = wire::parse(&b).unwrap();
        prop_assert_eq!((h.kind, h.seq), (Kind::Reply, seq));
        prop_assert_eq!(before.iter().zip(&b).filter(|(x, y)| x != y).count(), 1);
    }

    /// One flipped byte in a valid header: parse still returns (and a valid result keeps its length rules).
    #[test]
    fn corrupted_headers_never_panic(len in wire::MIN_LEN..80usize, at in 0usize..32, x in 1u8..=255) {
        let mut b = vec![0u8; len];
        wire::write(&mut b, Kind::Request, 1, 2, 3);
        let i = at % len;
        b[i] ^= x;
        let _ = wire::parse(&b);
    }
}
