//! The datagram format of the UDP probe, and its parser.
//!
//! Every datagram rtlab sends starts with a header; the rest of the datagram (up to the
//! `--payload` size) is filler. The payload size is the whole UDP payload, 16 B to
//! 65507 B (the largest IPv4 UDP payload; larger than the MTU means IP fragments).
//! Two forms, chosen by the size (all integers big-endian):
//!
//! Full form, datagrams of 32 B or more:
//!
//! | bytes  | field                                                       |
//! |--------|-------------------------------------------------------------|
//! | 0..4   | magic `RTLB`                                                |
//! | 4      | version (1)                                                 |
//! | 5      | kind: 1 request, 2 reply, 3 hello, 4 hello reply            |
//! | 6..8   | reserved, 0                                                 |
//! | 8..16  | run id (random per `udp ping` run)                          |
//! | 16..24 | sequence number (u64, 0 for the first request of a run)    |
//! | 24..32 | send stamp: client CLOCK_MONOTONIC at send, ns (i64)        |
//!
//! Short form, datagrams of 16 to 31 B (room for the u64 sequence number is kept; the
//! run id and the stamp are cut to what fits):
//!
//! | bytes  | field                                                       |
//! |--------|-------------------------------------------------------------|
//! | 0..2   | magic `Rt`                                                  |
//! | 2      | version (high nibble, 1) and kind (low nibble)              |
//! | 3      | run id, low 8 bits                                          |
//! | 4..12  | sequence number (u64)                                       |
//! | 12..16 | send stamp, low 32 bits                                     |
//!
//! Contract: [`parse`] never panics and never reads past the slice, whatever the bytes
//! (locked by a property test); it accepts only the two forms above, of the size their
//! form allows, with a known version and kind and zero reserved bits. [`to_reply`]
//! changes only the kind byte, so a reply is never longer than its request. Nothing here
//! allocates.

/// The smallest datagram rtlab sends (the short form).
pub const MIN_LEN: usize = 16;
/// The largest UDP payload over IPv4 (65535 - 20 IP - 8 UDP).
pub const MAX_LEN: usize = 65_507;
/// Datagrams of this size or more use the full form.
pub const FULL_LEN: usize = 32;
/// The format version written and accepted.
pub const VERSION: u8 = 1;
const MAGIC: [u8; 4] = *b"RTLB";
const SHORT_MAGIC: [u8; 2] = *b"Rt";

/// What a datagram is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A measured request from `udp ping`.
    Request = 1,
    /// The reflector's answer to a request.
    Reply = 2,
    /// A pre-flight check before a run (answered, never counted in the run).
    Hello = 3,
    /// The answer to a hello.
    HelloReply = 4,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        match v {
            1 => Some(Kind::Request),
            2 => Some(Kind::Reply),
            3 => Some(Kind::Hello),
            4 => Some(Kind::HelloReply),
            _ => None,
        }
    }

    /// The answer to this kind (None: not something a reflector answers).
    pub fn answer(self) -> Option<Kind> {
        match self {
            Kind::Request => Some(Kind::Reply),
            Kind::Hello => Some(Kind::HelloReply),
            _ => None,
        }
    }
}

/// Which form a datagram has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    Full,
    Short,
}

/// A parsed header. In the short form `run_id` holds only the low 8 bits and
/// `send_ns` only the low 32 bits (use [`Header::is_run`] and [`Header::stamp_is`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub form: Form,
    pub kind: Kind,
    pub run_id: u64,
    pub seq: u64,
    pub send_ns: i64,
}

impl Header {
    /// Whether the header carries `run_id` (as far as its form keeps it).
    pub fn is_run(&self, run_id: u64) -> bool {
        match self.form {
            Form::Full => self.run_id == run_id,
            Form::Short => self.run_id == run_id & 0xff,
        }
    }

    /// Whether the header carries the send stamp `t_ns` (as far as its form keeps it).
    pub fn stamp_is(&self, t_ns: i64) -> bool {
        match self.form {
            Form::Full => self.send_ns == t_ns,
            Form::Short => self.send_ns == (t_ns as u64 & 0xffff_ffff) as i64,
        }
    }
}

/// Why a datagram is not one of ours.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("shorter than {MIN_LEN} bytes")]
    TooShort,
    #[error("longer than {MAX_LEN} bytes")]
    TooLong,
    #[error("not an rtlab datagram (magic)")]
    BadMagic,
    #[error("unknown version {0}")]
    BadVersion(u8),
    #[error("unknown kind {0}")]
    BadKind(u8),
    #[error("reserved bits set")]
    Reserved,
    #[error("short form in a datagram of {0} bytes (the full form is used from {FULL_LEN} bytes)")]
    WrongForm(usize),
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// Parse the header of a received datagram (`b` is exactly the datagram).
pub fn parse(b: &[u8]) -> Result<Header, ParseError> {
    if b.len() < MIN_LEN {
        return Err(ParseError::TooShort);
    }
    if b.len() > MAX_LEN {
        return Err(ParseError::TooLong);
    }
    if b[..4] == MAGIC {
        if b.len() < FULL_LEN {
            return Err(ParseError::TooShort);
        }
        if b[4] != VERSION {
            return Err(ParseError::BadVersion(b[4]));
        }
        let kind = Kind::from_u8(b[5]).ok_or(ParseError::BadKind(b[5]))?;
        if b[6] != 0 || b[7] != 0 {
            return Err(ParseError::Reserved);
        }
        return Ok(Header {
            form: Form::Full,
            kind,
            run_id: u64_at(b, 8),
            seq: u64_at(b, 16),
            send_ns: u64_at(b, 24) as i64,
        });
    }
    if b[..2] == SHORT_MAGIC {
        if b.len() >= FULL_LEN {
            return Err(ParseError::WrongForm(b.len()));
        }
        let version = b[2] >> 4;
        if version != VERSION {
            return Err(ParseError::BadVersion(version));
        }
        let kind = Kind::from_u8(b[2] & 0x0f).ok_or(ParseError::BadKind(b[2] & 0x0f))?;
        let mut stamp = [0u8; 4];
        stamp.copy_from_slice(&b[12..16]);
        return Ok(Header {
            form: Form::Short,
            kind,
            run_id: b[3] as u64,
            seq: u64_at(b, 4),
            send_ns: u32::from_be_bytes(stamp) as i64,
        });
    }
    Err(ParseError::BadMagic)
}

/// Write a header for a datagram of `buf.len()` bytes (its form follows from the length)
/// at the start of `buf`; the rest of `buf` is left as it is (the filler).
/// Panics if `buf` is shorter than [`MIN_LEN`] (a configuration error, checked before any run).
pub fn write(buf: &mut [u8], kind: Kind, run_id: u64, seq: u64, send_ns: i64) {
    assert!(buf.len() >= MIN_LEN, "datagram of {} bytes is below the minimum {MIN_LEN}", buf.len());
    if buf.len() >= FULL_LEN {
        buf[..4].copy_from_slice(&MAGIC);
        buf[4] = VERSION;
        buf[5] = kind as u8;
        buf[6] = 0;
        buf[7] = 0;
        buf[8..16].copy_from_slice(&run_id.to_be_bytes());
        buf[16..24].copy_from_slice(&seq.to_be_bytes());
        buf[24..32].copy_from_slice(&send_ns.to_be_bytes());
    } else {
        buf[..2].copy_from_slice(&SHORT_MAGIC);
        buf[2] = (VERSION << 4) | kind as u8;
        buf[3] = run_id as u8;
        buf[4..12].copy_from_slice(&seq.to_be_bytes());
        buf[12..16].copy_from_slice(&((send_ns as u64 & 0xffff_ffff) as u32).to_be_bytes());
    }
}

/// Fill `buf` after the header with a fixed pattern (done once, before a run).
pub fn fill(buf: &mut [u8]) {
    let start = if buf.len() >= FULL_LEN { FULL_LEN } else { MIN_LEN };
    for (i, b) in buf.iter_mut().enumerate().skip(start) {
        *b = (i % 251) as u8;
    }
}

/// Turn a parsed datagram into its answer in place: only the kind changes, so the answer
/// has exactly the request's length. Returns the new kind, or None (left untouched) when
/// the kind is not one a reflector answers.
pub fn to_reply(buf: &mut [u8], h: &Header) -> Option<Kind> {
    let answer = h.kind.answer()?;
    match h.form {
        Form::Full => buf[5] = answer as u8,
        Form::Short => buf[2] = (VERSION << 4) | answer as u8,
    }
    Some(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_form_layout_is_the_documented_one() {
        let mut b = vec![0xeeu8; 40];
        write(&mut b, Kind::Request, 0x0102030405060708, 9, 10);
        assert_eq!(&b[..8], b"RTLB\x01\x01\x00\x00");
        assert_eq!(&b[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&b[16..24], &9u64.to_be_bytes());
        assert_eq!(&b[24..32], &10i64.to_be_bytes());
        assert_eq!(b[32], 0xee, "the filler is not touched");
        let h = parse(&b).unwrap();
        assert_eq!(
            (h.form, h.kind, h.run_id, h.seq, h.send_ns),
            (Form::Full, Kind::Request, 0x0102030405060708, 9, 10)
        );
    }

    #[test]
    fn short_form_keeps_the_full_sequence_number() {
        let mut b = [0u8; 16];
        write(&mut b, Kind::Request, 0xabcd, u64::MAX - 1, 0x1_2345_6789);
        assert_eq!(&b[..4], &[b'R', b't', 0x11, 0xcd]);
        let h = parse(&b).unwrap();
        assert_eq!(h.form, Form::Short);
        assert_eq!(h.seq, u64::MAX - 1);
        assert!(h.is_run(0xabcd) && !h.is_run(0xabce));
        assert!(h.stamp_is(0x1_2345_6789) && !h.stamp_is(0x1_2345_6788));
    }

    #[test]
    fn reply_changes_only_the_kind() {
        for len in [16, 31, 32, 500] {
            let mut b = vec![0u8; len];
            write(&mut b, Kind::Request, 7, 8, 9);
            fill(&mut b);
            let before = b.clone();
            let h = parse(&b).unwrap();
            assert_eq!(to_reply(&mut b, &h), Some(Kind::Reply));
            let diff: Vec<_> = (0..len).filter(|&i| b[i] != before[i]).collect();
            assert_eq!(diff.len(), 1, "len {len}: {diff:?}");
            let r = parse(&b).unwrap();
            assert_eq!((r.kind, r.seq), (Kind::Reply, 8));
            // a reply is not answered again
            assert_eq!(to_reply(&mut b, &r), None);
        }
    }

    #[test]
    fn what_is_refused() {
        let mut b = vec![0u8; 64];
        write(&mut b, Kind::Request, 1, 2, 3);
        assert_eq!(parse(&b[..15]), Err(ParseError::TooShort));
        assert_eq!(
            parse(&b[..20]),
            Err(ParseError::TooShort),
            "full magic, too short for the full form"
        );
        let mut v = b.clone();
        v[4] = 2;
        assert_eq!(parse(&v), Err(ParseError::BadVersion(2)));
        let mut v = b.clone();
        v[5] = 9;
        assert_eq!(parse(&v), Err(ParseError::BadKind(9)));
        let mut v = b.clone();
        v[7] = 1;
        assert_eq!(parse(&v), Err(ParseError::Reserved));
        let mut s = [0u8; 16];
        write(&mut s, Kind::Request, 1, 2, 3);
        let mut long = vec![0u8; 40];
        long[..16].copy_from_slice(&s);
        assert_eq!(parse(&long), Err(ParseError::WrongForm(40)));
        assert_eq!(parse(&vec![0u8; MAX_LEN + 1]), Err(ParseError::TooLong));
        assert_eq!(parse(b"GET / HTTP/1.1\r\n\r\n"), Err(ParseError::BadMagic));
    }
}
