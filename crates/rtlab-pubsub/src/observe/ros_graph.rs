//! ROS 2's own announcement of its graph: the DDS topic `ros_discovery_info`, on which every
//! ROS 2 participant (one per process, every RMW) publishes which nodes it holds and which
//! DDS writers and readers belong to each node. This file decodes one sample of it
//! (`rmw_dds_common/msg/ParticipantEntitiesInfo`) from its serialized bytes, and names the
//! services behind the `rq/` and `rr/` topics, as `ros2 node info` shows them.
//!
//! The message (rmw_dds_common's msg/ParticipantEntitiesInfo.msg and NodeEntitiesInfo.msg):
//! `Gid gid` (the participant), then `NodeEntitiesInfo[]`, each `string node_namespace`,
//! `string node_name`, `Gid[] reader_gid_seq`, `Gid[] writer_gid_seq`. A `Gid` is a fixed
//! array: 24 bytes up to Humble (`char[24] data`, the 16-byte DDS GUID and 8 zero bytes),
//! 16 bytes from Iron on (`uint8[16] data`); [`decode`] tells them apart from the bytes.
//!
//! Contract: pure functions. [`decode`] reads plain CDR (XCDR1, and XCDR2 without
//! delimiters, which lay this type out the same) in either byte order; any input gives a
//! value or an [`DecodeError`] naming the byte and what was wrong there — never a panic,
//! and never an allocation larger than the input justifies. Imports nothing of this crate
//! (the graph in [`crate::observe::dds_graph`] uses it, not the other way). Never prints.
#![forbid(unsafe_code)]

/// The DDS topic every ROS 2 participant announces its nodes on.
pub const TOPIC: &str = "ros_discovery_info";
/// Its DDS type name.
pub const TYPE_NAME: &str = "rmw_dds_common::msg::dds_::ParticipantEntitiesInfo_";

/// A DDS GUID as ROS 2 carries it (the 16 significant bytes: prefix 12 + entity id 4).
pub type Gid = [u8; 16];

/// One sample of `ros_discovery_info`: a participant and its nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParticipantEntitiesInfo {
    /// The participant's GUID.
    pub gid: Gid,
    /// How many bytes a Gid took in this sample: 24 (Humble and before) or 16 (Iron on).
    pub gid_size: usize,
    pub nodes: Vec<NodeEntitiesInfo>,
}

/// A node and the DDS endpoints it owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeEntitiesInfo {
    /// `/` or `/robot1` (ROS 2 namespaces start with `/`).
    pub namespace: String,
    pub name: String,
    pub readers: Vec<Gid>,
    pub writers: Vec<Gid>,
}

impl NodeEntitiesInfo {
    /// The name `ros2 node list` shows: `/talker`, `/robot1/talker`.
    pub fn full_name(&self) -> String {
        full_name(&self.namespace, &self.name)
    }
}

/// `/` + `talker` -> `/talker`; `/robot1` + `talker` -> `/robot1/talker`.
pub fn full_name(namespace: &str, name: &str) -> String {
    let ns = namespace.trim_end_matches('/');
    if ns.starts_with('/') || ns.is_empty() {
        format!("{ns}/{name}")
    } else {
        format!("/{ns}/{name}")
    }
}

/// A GUID as the graph writes it (lower-case hex, 32 digits).
pub fn gid_hex(g: &Gid) -> String {
    g.iter().map(|b| format!("{b:02x}")).collect()
}

/// A sample that is not a ParticipantEntitiesInfo rtlab can read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{TOPIC} sample of {len} bytes, byte {at}: {what}")]
pub struct DecodeError {
    /// The sample's serialized size (the 4-byte encapsulation header included).
    pub len: usize,
    /// Where it went wrong, from the sample's first byte.
    pub at: usize,
    pub what: String,
}

/// Decode one serialized sample (the 4-byte encapsulation header first). The Gid size is
/// the one with which the whole sample reads to its end; when both do (possible only for
/// contrived input), 24 when every Gid's last 8 bytes are zero (how Humble pads), else 16.
pub fn decode(sample: &[u8]) -> Result<ParticipantEntitiesInfo, DecodeError> {
    let err = |at: usize, what: String| DecodeError { len: sample.len(), at, what };
    if sample.len() < 4 {
        return Err(err(0, "shorter than the 4-byte encapsulation header".into()));
    }
    let kind = u16::from_be_bytes([sample[0], sample[1]]);
    // 0x0000/0x0001 CDR (XCDR1), 0x0006/0x0007 PLAIN_CDR2: big / little endian; this type
    // has nothing wider than 4 bytes, so both align alike
    let le = match kind {
        0x0000 | 0x0006 => false,
        0x0001 | 0x0007 => true,
        other => {
            return Err(err(
                0,
                format!("encapsulation 0x{other:04x}: only plain CDR is read (0x0000, 0x0001, 0x0006, 0x0007)"),
            ))
        }
    };
    // the options' last two bits: padding bytes at the end of the payload
    let pad = (sample[3] & 3) as usize;
    let body_end = sample.len() - pad;
    if body_end < 4 {
        return Err(err(3, format!("{pad} padding bytes in a payload of {}", sample.len() - 4)));
    }
    let body = &sample[4..body_end];
    let read = |gid_size| Cdr { b: body, at: 0, le, gid_size, tails_zero: true }.participant();
    match (read(16), read(24)) {
        (Ok((a, _)), Err(_)) => Ok(a),
        (Err(_), Ok((b, _))) => Ok(b),
        (Ok((a, _)), Ok((b, zero))) => Ok(if zero { b } else { a }),
        // both: the byte where today's 16-byte reading failed, and the other's reason
        (Err((at16, what16)), Err((at24, what24))) => Err(err(
            at16 + 4,
            format!(
                "{what16} (read with 16-byte Gids; with 24-byte Gids, byte {}: {what24})",
                at24 + 4
            ),
        )),
    }
}

/// A cursor over a CDR body (alignment counts from the body's first byte).
struct Cdr<'a> {
    b: &'a [u8],
    at: usize,
    le: bool,
    gid_size: usize,
    /// Every Gid's bytes past the 16th were zero.
    tails_zero: bool,
}

type Failed = (usize, String);

impl Cdr<'_> {
    fn left(&self) -> usize {
        self.b.len() - self.at
    }

    fn bytes(&mut self, n: usize, what: &str) -> Result<&[u8], Failed> {
        if n > self.left() {
            return Err((self.at, format!("{what}: {n} bytes, only {} left", self.left())));
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn u32(&mut self, what: &str) -> Result<u32, Failed> {
        let aligned = self.at.div_ceil(4) * 4;
        if aligned > self.b.len() {
            return Err((self.at, format!("{what}: the sample ends")));
        }
        self.at = aligned;
        let le = self.le;
        let b = self.bytes(4, what)?;
        let a = [b[0], b[1], b[2], b[3]];
        Ok(if le { u32::from_le_bytes(a) } else { u32::from_be_bytes(a) })
    }

    /// A sequence's length, refused when `n` elements of at least `min` bytes each cannot
    /// fit in what is left (so nothing is allocated for a length the bytes do not hold).
    fn count(&mut self, min: usize, what: &str) -> Result<usize, Failed> {
        let at = self.at;
        let n = self.u32(what)? as usize;
        if n.saturating_mul(min) > self.left() {
            return Err((
                at,
                format!("{what}: {n} elements cannot fit in the {} bytes left", self.left()),
            ));
        }
        Ok(n)
    }

    fn string(&mut self, what: &str) -> Result<String, Failed> {
        let at = self.at;
        let n = self.u32(what)? as usize;
        if n == 0 {
            // not valid CDR (the length counts the NUL) but harmless: an empty string
            return Ok(String::new());
        }
        let s = self.bytes(n, what)?;
        let Some((0, text)) = s.split_last() else {
            return Err((at, format!("{what}: a string of {n} bytes without its closing NUL")));
        };
        String::from_utf8(text.to_vec()).map_err(|_| (at + 4, format!("{what}: not UTF-8")))
    }

    fn gid(&mut self, what: &str) -> Result<Gid, Failed> {
        let size = self.gid_size;
        let b = self.bytes(size, what)?;
        let mut g = [0u8; 16];
        g.copy_from_slice(&b[..16]);
        if b[16..].iter().any(|&x| x != 0) {
            self.tails_zero = false;
        }
        Ok(g)
    }

    fn gids(&mut self, what: &str) -> Result<Vec<Gid>, Failed> {
        let n = self.count(self.gid_size, what)?;
        (0..n).map(|_| self.gid(what)).collect()
    }

    /// The whole body; Ok with whether every Gid's tail was zero.
    fn participant(mut self) -> Result<(ParticipantEntitiesInfo, bool), Failed> {
        let gid = self.gid("gid")?;
        // a node is at least four 4-byte lengths
        let n = self.count(16, "node_entities_info_seq")?;
        let mut nodes = Vec::with_capacity(n);
        for _ in 0..n {
            nodes.push(NodeEntitiesInfo {
                namespace: self.string("node_namespace")?,
                name: self.string("node_name")?,
                readers: self.gids("reader_gid_seq")?,
                writers: self.gids("writer_gid_seq")?,
            });
        }
        if self.left() > 0 {
            return Err((self.at, format!("{} bytes after the message's end", self.left())));
        }
        Ok((ParticipantEntitiesInfo { gid, gid_size: self.gid_size, nodes }, self.tails_zero))
    }
}

/// Which side of a service an endpoint is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceSide {
    Server,
    Client,
}

/// The service behind a DDS endpoint, as ROS 2 maps services: a server reads
/// `rq/<name>Request` and writes `rr/<name>Reply`, a client the other way round. Gives the
/// service's ROS 2 name (`/talker/get_parameters`) and which side, or None for a topic that
/// is no service's.
pub fn service_of(dds_topic: &str, is_writer: bool) -> Option<(String, ServiceSide)> {
    let (name, request) = if let Some(t) = dds_topic.strip_prefix("rq/") {
        (t.strip_suffix("Request")?, true)
    } else if let Some(t) = dds_topic.strip_prefix("rr/") {
        (t.strip_suffix("Reply")?, false)
    } else {
        return None;
    };
    let side = if request != is_writer { ServiceSide::Server } else { ServiceSide::Client };
    Some((format!("/{name}"), side))
}

/// `rcl_interfaces::srv::dds_::GetParameters_Request_` (or `_Response_`) ->
/// `rcl_interfaces/srv/GetParameters`.
pub fn service_type(dds_type: &str) -> Option<String> {
    let parts: Vec<&str> = dds_type.split("::").collect();
    match parts.as_slice() {
        [pkg, "srv", "dds_", ty] => {
            let ty = ty.strip_suffix("_Request_").or_else(|| ty.strip_suffix("_Response_"))?;
            Some(format!("{pkg}/srv/{ty}"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CDR writer for hand-made samples: every field written by hand, in the message's
    /// order, with the alignment CDR asks for.
    struct W {
        b: Vec<u8>,
        le: bool,
    }

    impl W {
        fn new(le: bool) -> W {
            // encapsulation: CDR_BE 00 00 / CDR_LE 00 01, options 00 00
            W { b: vec![0, le as u8, 0, 0], le }
        }
        fn body_len(&self) -> usize {
            self.b.len() - 4
        }
        fn u32(&mut self, v: u32) -> &mut Self {
            while !self.body_len().is_multiple_of(4) {
                self.b.push(0);
            }
            self.b.extend_from_slice(&if self.le { v.to_le_bytes() } else { v.to_be_bytes() });
            self
        }
        fn string(&mut self, s: &str) -> &mut Self {
            self.u32(s.len() as u32 + 1);
            self.b.extend_from_slice(s.as_bytes());
            self.b.push(0);
            self
        }
        fn gid(&mut self, g: &Gid, size: usize) -> &mut Self {
            self.b.extend_from_slice(g);
            self.b.extend(std::iter::repeat_n(0, size - 16));
            self
        }
        fn gids(&mut self, gs: &[Gid], size: usize) -> &mut Self {
            self.u32(gs.len() as u32);
            for g in gs {
                self.gid(g, size);
            }
            self
        }
    }

    fn guid(last: u8) -> Gid {
        let mut g = [0x01, 0x0f, 0xbe, 0x9f, 0xaa, 0xbb, 0, 0, 0, 0, 0, 0, 0, 0, 0x03, 0];
        g[15] = last;
        g
    }

    /// A participant with two nodes: `/talker` (one reader, two writers) and
    /// `/robot1/listener` (one reader, no writer).
    fn sample(le: bool, size: usize) -> Vec<u8> {
        let mut w = W::new(le);
        w.gid(&guid(0xc1), size).u32(2);
        w.string("/")
            .string("talker")
            .gids(&[guid(0x04)], size)
            .gids(&[guid(0x03), guid(0x13)], size);
        w.string("/robot1").string("listener").gids(&[guid(0x24)], size).gids(&[], size);
        w.b
    }

    fn expected(size: usize) -> ParticipantEntitiesInfo {
        ParticipantEntitiesInfo {
            gid: guid(0xc1),
            gid_size: size,
            nodes: vec![
                NodeEntitiesInfo {
                    namespace: "/".into(),
                    name: "talker".into(),
                    readers: vec![guid(0x04)],
                    writers: vec![guid(0x03), guid(0x13)],
                },
                NodeEntitiesInfo {
                    namespace: "/robot1".into(),
                    name: "listener".into(),
                    readers: vec![guid(0x24)],
                    writers: vec![],
                },
            ],
        }
    }

    #[test]
    fn both_gid_sizes_in_both_byte_orders() {
        for le in [true, false] {
            for size in [16, 24] {
                let s = sample(le, size);
                assert_eq!(decode(&s), Ok(expected(size)), "le {le}, Gid {size}");
            }
        }
    }

    #[test]
    fn a_participant_without_nodes_in_both_gid_sizes() {
        for size in [16, 24] {
            let mut w = W::new(true);
            w.gid(&guid(0xc1), size).u32(0);
            let d = decode(&w.b).unwrap();
            assert_eq!((d.gid_size, d.nodes.len()), (size, 0));
        }
    }

    /// Bytes as written out by hand, not by the test writer: a Humble participant (24-byte
    /// Gid), big endian, one node `/n` with one writer and no reader.
    #[test]
    fn a_literal_humble_sample() {
        #[rustfmt::skip]
        let s: Vec<u8> = [
            &[0x00, 0x00, 0x00, 0x00][..],                       // CDR_BE, options
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0, 0, 1, 0xc1], // gid
            &[0; 8],                                             // Humble's padding
            &[0, 0, 0, 1],                                       // one node
            &[0, 0, 0, 2, b'/', 0],                              // namespace "/"
            &[0, 0],                                             // align
            &[0, 0, 0, 2, b'n', 0],                              // name "n"
            &[0, 0],                                             // align
            &[0, 0, 0, 0],                                       // no reader
            &[0, 0, 0, 1],                                       // one writer
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0, 0, 1, 0x03],
            &[0; 8],
        ]
        .concat();
        let d = decode(&s).unwrap();
        assert_eq!(d.gid_size, 24);
        assert_eq!(gid_hex(&d.gid), "0102030405060708090a0b0c000001c1");
        assert_eq!(d.nodes.len(), 1);
        assert_eq!(d.nodes[0].full_name(), "/n");
        assert_eq!(gid_hex(&d.nodes[0].writers[0]), "0102030405060708090a0b0c00000103");
        assert!(d.nodes[0].readers.is_empty());
    }

    /// A sample as an rclpy node (ROS 2 Kilted, rmw_fastrtps_cpp, Fast DDS 3.2) wrote it:
    /// node `/talker_x` with a publisher, a subscription and its parameter services.
    const RCLPY_KILTED: &[&str] = &[
        "00010000010fbe9f9c187c4900000000000001c101000000020000002f0000000900000074616c6b65725f7800000000",
        "08000000010fbe9f9c187c490000000000000504010fbe9f9c187c490000000000000704010fbe9f9c187c4900000000",
        "00000904010fbe9f9c187c490000000000000b04010fbe9f9c187c490000000000000d04010fbe9f9c187c4900000000",
        "00000f04010fbe9f9c187c490000000000001104010fbe9f9c187c4900000000000014040a000000010fbe9f9c187c49",
        "0000000000000303010fbe9f9c187c490000000000000403010fbe9f9c187c490000000000000603010fbe9f9c187c49",
        "0000000000000803010fbe9f9c187c490000000000000a03010fbe9f9c187c490000000000000c03010fbe9f9c187c49",
        "0000000000000e03010fbe9f9c187c490000000000001003010fbe9f9c187c490000000000001203010fbe9f9c187c49",
        "0000000000001303",
    ];

    fn unhex(lines: &[&str]) -> Vec<u8> {
        let h: String = lines.concat();
        (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn a_sample_of_a_real_rclpy_node() {
        let d = decode(&unhex(RCLPY_KILTED)).unwrap();
        assert_eq!(d.gid_size, 16);
        assert_eq!(gid_hex(&d.gid), "010fbe9f9c187c4900000000000001c1");
        assert_eq!(d.nodes.len(), 1);
        let n = &d.nodes[0];
        assert_eq!((n.namespace.as_str(), n.name.as_str()), ("/", "talker_x"));
        assert_eq!(n.full_name(), "/talker_x");
        // 7 parameter services' requests + the subscription; their replies + /chat_pong,
        // /rosout, /parameter_events
        assert_eq!((n.readers.len(), n.writers.len()), (8, 10));
        assert!(n.readers.iter().chain(&n.writers).all(|g| g[..12] == d.gid[..12]));
    }

    #[test]
    fn xcdr2_plain_and_its_padding_bits_read_the_same() {
        let mut s = sample(true, 16);
        s[1] = 0x07; // PLAIN_CDR2 little endian
        s.extend_from_slice(&[0, 0]);
        s[3] = 2; // two padding bytes at the end
        assert_eq!(decode(&s), Ok(expected(16)));
    }

    #[test]
    fn malformed_input_is_an_error_never_a_panic() {
        let good = sample(true, 16);
        // every truncation
        for n in 0..good.len() {
            assert!(decode(&good[..n]).is_err(), "truncated to {n} bytes");
        }
        // every single byte changed to a few values: an error or a value, never a panic
        for i in 0..good.len() {
            for v in [0x00, 0x7f, 0x80, 0xff] {
                let mut s = good.clone();
                s[i] = v;
                let _ = decode(&s);
            }
        }
        // a trailing extra byte
        let mut s = good.clone();
        s.extend_from_slice(&[0, 0, 0, 0]);
        assert!(decode(&s).unwrap_err().what.contains("after the message's end"));
        // another encapsulation
        let mut s = good.clone();
        s[1] = 0x03; // PL_CDR
        assert!(decode(&s).unwrap_err().what.contains("encapsulation 0x0003"));
        // a huge sequence length allocates nothing and says so
        let mut w = W::new(true);
        w.gid(&guid(1), 16).u32(u32::MAX);
        let e = decode(&w.b).unwrap_err();
        assert!(e.what.contains("cannot fit"), "{e}");
        assert!(e.to_string().starts_with("ros_discovery_info sample of 24 bytes, byte 20"), "{e}");
        // a string without its NUL, and one that is not UTF-8
        let mut w = W::new(true);
        w.gid(&guid(1), 16).u32(1).u32(2);
        w.b.extend_from_slice(b"/x");
        w.u32(0).u32(0).u32(0);
        assert!(decode(&w.b).unwrap_err().what.contains("closing NUL"));
        let mut w = W::new(true);
        w.gid(&guid(1), 16).u32(1).u32(2);
        w.b.extend_from_slice(&[0xc3, 0]);
        w.string("n").u32(0).u32(0);
        assert!(decode(&w.b).unwrap_err().what.contains("not UTF-8"));
        // padding bits larger than the payload
        assert!(decode(&[0, 1, 0, 3, 0]).is_err());
    }

    #[test]
    fn node_names_and_services() {
        assert_eq!(full_name("/", "talker"), "/talker");
        assert_eq!(full_name("/robot1", "talker"), "/robot1/talker");
        assert_eq!(full_name("robot1/", "talker"), "/robot1/talker");
        assert_eq!(full_name("", "talker"), "/talker");
        assert_eq!(
            service_of("rq/talker/get_parametersRequest", false),
            Some(("/talker/get_parameters".into(), ServiceSide::Server))
        );
        assert_eq!(
            service_of("rr/talker/get_parametersReply", true),
            Some(("/talker/get_parameters".into(), ServiceSide::Server))
        );
        assert_eq!(
            service_of("rq/add_two_intsRequest", true),
            Some(("/add_two_ints".into(), ServiceSide::Client))
        );
        assert_eq!(
            service_of("rr/add_two_intsReply", false),
            Some(("/add_two_ints".into(), ServiceSide::Client))
        );
        assert_eq!(service_of("rt/chatter", true), None);
        assert_eq!(service_of("rq/odd", true), None);
        assert_eq!(
            service_type("rcl_interfaces::srv::dds_::GetParameters_Response_").as_deref(),
            Some("rcl_interfaces/srv/GetParameters")
        );
        assert_eq!(service_type("std_msgs::msg::dds_::String_"), None);
    }
}
