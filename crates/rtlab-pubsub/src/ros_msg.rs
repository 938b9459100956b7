//! The probe message on ROS 2 wires: a stock `sensor_msgs/msg/CompressedImage`, so that a
//! ROS 2 node with no extra package can be the peer (relay it, publish it, echo it).
//!
//! ```text
//! sensor_msgs/msg/CompressedImage          rtlab
//!   std_msgs/Header header
//!     builtin_interfaces/Time stamp        send stamp (sec, nanosec)
//!     string frame_id                      "rtlab" (kept as received by an echo)
//!   string format                          "rtlab"
//!   uint8[] data                           8 bytes: sequence number (u64, little endian),
//!                                          then the payload (zeros)
//! ```
//! A message of `len` bytes in rtlab's terms (its 16-byte header, sequence + stamp,
//! included) carries `len - 8` data bytes. The stamp is the probe's clock: CLOCK_MONOTONIC on
//! one host, CLOCK_REALTIME (ROS time, as a ROS 2 node stamps) when the clocks of two hosts
//! or of a ROS 2 peer are compared. The DDS type name is [`TYPE_NAME`], the serialization
//! plain CDR (XCDR1; both byte orders are read; XCDR2 of this type has the same layout, as
//! none of its members is aligned to 8).
//!
//! Pure functions, no allocation after the publisher's buffer is made.

use crate::transport::HEADER_LEN;

/// The DDS type name of `sensor_msgs/msg/CompressedImage` (ROS 2's mangling).
pub const TYPE_NAME: &str = "sensor_msgs::msg::dds_::CompressedImage_";
/// The ROS 2 name of the type.
pub const ROS_TYPE: &str = "sensor_msgs/msg/CompressedImage";
/// `header.frame_id` and `format` of the messages rtlab sends.
pub const TAG: &str = "rtlab";
/// Bytes of a serialized message before its payload, encapsulation header included:
/// 4 + stamp 8 + frame_id (4 + 6, padded to 12) + format (12) + data length 4 + sequence 8.
pub const PREFIX: usize = 48;
/// Bytes a subscriber copies out to read a message's sequence and stamp (frame_id and
/// format of other publishers may be longer than rtlab's own).
pub const HEAD: usize = 256;

const CDR_LE: [u8; 4] = [0x00, 0x01, 0x00, 0x00];

/// Serialized size of a message of `len` bytes in rtlab's terms (`len >= HEADER_LEN`).
pub fn serialized_size(len: usize) -> usize {
    PREFIX + (len - HEADER_LEN)
}

/// Fill the constant part of a publisher's buffer (at least [`PREFIX`] bytes).
pub fn init(buf: &mut [u8]) {
    buf[..4].copy_from_slice(&CDR_LE);
    let mut at = 12; // after encapsulation + stamp
    for _ in 0..2 {
        buf[at..at + 4].copy_from_slice(&((TAG.len() + 1) as u32).to_le_bytes());
        buf[at + 4..at + 4 + TAG.len()].copy_from_slice(TAG.as_bytes());
        buf[at + 4 + TAG.len()..at + 12].fill(0); // NUL and padding
        at += 12;
    }
}

/// Write sequence, stamp and length into a buffer made by [`init`]; returns the serialized
/// size to send (`len >= HEADER_LEN`, buffer large enough).
#[inline]
pub fn encode(buf: &mut [u8], seq: u64, stamp_ns: i64, len: usize) -> usize {
    buf[4..8].copy_from_slice(&(stamp_ns.div_euclid(1_000_000_000) as i32).to_le_bytes());
    buf[8..12].copy_from_slice(&(stamp_ns.rem_euclid(1_000_000_000) as u32).to_le_bytes());
    buf[36..40].copy_from_slice(&((len - HEADER_LEN + 8) as u32).to_le_bytes());
    buf[40..48].copy_from_slice(&seq.to_le_bytes());
    serialized_size(len)
}

/// What a received message carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    pub seq: u64,
    pub stamp_ns: i64,
    /// rtlab's length: data bytes + 8.
    pub len: usize,
}

/// Why a message is not one rtlab can read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// Not plain CDR (the encapsulation identifier).
    Encapsulation(u16),
    /// Ends (or the bytes copied out end) inside the header, strings or data length.
    Truncated,
    /// `data` is shorter than the 8-byte sequence number.
    NoSequence,
}

impl Malformed {
    /// In words (static: counted on the receive path, never formatted there).
    pub fn reason(self) -> &'static str {
        match self {
            Malformed::Encapsulation(_) => "its encapsulation is not plain CDR",
            Malformed::Truncated => "it ends inside its header, strings or data length",
            Malformed::NoSequence => {
                "its data holds no 8-byte sequence number (not an rtlab message)"
            }
        }
    }
}

/// Read sequence, stamp and length from the first bytes of a serialized message
/// (encapsulation header included; `head` may be cut after the sequence number).
pub fn decode(head: &[u8]) -> Result<Decoded, Malformed> {
    if head.len() < 4 {
        return Err(Malformed::Truncated);
    }
    let enc = u16::from_be_bytes([head[0], head[1]]);
    // 0x0000/0x0001: CDR BE/LE; 0x0006/0x0007: XCDR2 plain BE/LE (the same layout here)
    let le = match enc {
        0x0001 | 0x0007 => true,
        0x0000 | 0x0006 => false,
        e => return Err(Malformed::Encapsulation(e)),
    };
    let body = &head[4..];
    let u32_at = |at: usize| -> Result<u32, Malformed> {
        let b: [u8; 4] = body.get(at..at + 4).ok_or(Malformed::Truncated)?.try_into().unwrap();
        Ok(if le { u32::from_le_bytes(b) } else { u32::from_be_bytes(b) })
    };
    let sec = u32_at(0)? as i32;
    let nanosec = u32_at(4)?;
    let mut at = 8;
    for _ in 0..2 {
        // frame_id, then format: length (NUL included), bytes, padding to 4
        let n = u32_at(at)? as usize;
        at = (at + 4).checked_add(n).ok_or(Malformed::Truncated)?;
        at = at.checked_add(3).ok_or(Malformed::Truncated)? & !3;
    }
    let data_len = u32_at(at)? as usize;
    if data_len < 8 {
        return Err(Malformed::NoSequence);
    }
    let seq: [u8; 8] = body.get(at + 4..at + 12).ok_or(Malformed::Truncated)?.try_into().unwrap();
    Ok(Decoded {
        seq: u64::from_le_bytes(seq),
        stamp_ns: sec as i64 * 1_000_000_000 + nanosec as i64,
        len: data_len + 8,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(len: usize, seq: u64, stamp: i64) -> Vec<u8> {
        let mut b = vec![0xAAu8; serialized_size(len)];
        init(&mut b);
        let n = encode(&mut b, seq, stamp, len);
        b.truncate(n);
        b
    }

    #[test]
    fn round_trip_and_the_layout_a_ros_2_node_reads() {
        let b = message(64, 42, 1_700_000_000_123_456_789);
        assert_eq!(b.len(), 64 + 32);
        // encapsulation, stamp, frame_id "rtlab", format "rtlab", data length, sequence
        assert_eq!(&b[..4], &[0, 1, 0, 0]);
        assert_eq!(i32::from_le_bytes(b[4..8].try_into().unwrap()), 1_700_000_000);
        assert_eq!(u32::from_le_bytes(b[8..12].try_into().unwrap()), 123_456_789);
        assert_eq!(&b[12..24], b"\x06\0\0\0rtlab\0\0\0");
        assert_eq!(&b[24..36], b"\x06\0\0\0rtlab\0\0\0");
        assert_eq!(u32::from_le_bytes(b[36..40].try_into().unwrap()) as usize, 64 - 8);
        assert_eq!(u64::from_le_bytes(b[40..48].try_into().unwrap()), 42);
        assert!(b[48..].iter().all(|x| *x == 0xAA), "payload bytes are not touched");
        let d = decode(&b).unwrap();
        assert_eq!(d, Decoded { seq: 42, stamp_ns: 1_700_000_000_123_456_789, len: 64 });
        // only the head is needed
        assert_eq!(decode(&b[..PREFIX]).unwrap(), d);
        // negative stamps (monotonic clocks never are, but the split must hold)
        assert_eq!(decode(&message(16, 1, -1)).unwrap().stamp_ns, -1);
    }

    #[test]
    fn other_publishers_big_endian_and_longer_strings() {
        // a ROS 2 node's message: big endian, frame_id "base_link", format "jpeg"
        let mut b = vec![0x00, 0x00, 0x00, 0x00];
        b.extend(7i32.to_be_bytes());
        b.extend(500u32.to_be_bytes());
        b.extend(10u32.to_be_bytes());
        b.extend(b"base_link\0\0\0"); // 10 bytes + 2 padding
        b.extend(5u32.to_be_bytes());
        b.extend(b"jpeg\0\0\0\0");
        b.extend(12u32.to_be_bytes());
        b.extend(9u64.to_le_bytes()); // the sequence is little endian in data, always
        b.extend([1, 2, 3, 4]);
        assert_eq!(decode(&b).unwrap(), Decoded { seq: 9, stamp_ns: 7_000_000_500, len: 20 });
    }

    #[test]
    fn malformed_messages_are_named_not_misread() {
        let good = message(32, 5, 1);
        assert_eq!(decode(&good[..3]), Err(Malformed::Truncated));
        assert_eq!(decode(&good[..40]), Err(Malformed::Truncated));
        let mut b = good.clone();
        b[1] = 0x03; // PL_CDR
        assert_eq!(decode(&b), Err(Malformed::Encapsulation(3)));
        let mut b = good.clone();
        b[36..40].copy_from_slice(&4u32.to_le_bytes()); // data of 4 bytes: no sequence
        assert_eq!(decode(&b), Err(Malformed::NoSequence));
        let mut b = good;
        b[12..16].copy_from_slice(&u32::MAX.to_le_bytes()); // a frame_id longer than anything
        assert_eq!(decode(&b), Err(Malformed::Truncated));
        assert!(Malformed::NoSequence.reason().contains("sequence"));
    }
}
