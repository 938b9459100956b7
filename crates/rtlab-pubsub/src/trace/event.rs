//! The events of a trace ring (`rtlab-bindings/trace/ring.h`), decoded from the reader's raw
//! records.
//!
//! Contract: [`decode`] turns one raw record into one [`Event`] or one line why not (an
//! unknown kind); it never panics on any bytes.

use rtlab_bindings::trace::RawRecord;

/// Which tracepoint an event records (ring.h `enum rtlab_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    RclInit,
    NodeInit,
    RmwPublisherInit,
    PublisherInit,
    RmwSubscriptionInit,
    SubscriptionInit,
    RclPublish,
    RmwPublish,
    RmwTake,
    RclTake,
    TimerInit,
    CallbackStart,
    CallbackEnd,
    RclcppSubscriptionInit,
    RclcppSubscriptionCallback,
    RclcppTimerCallback,
    RclcppTimerLinkNode,
    RclcppPublish,
    RclcppTake,
    RclcppCallbackRegister,
}

impl Kind {
    pub fn from_id(id: u16) -> Option<Kind> {
        use Kind::*;
        const ALL: [Kind; 20] = [
            RclInit,
            NodeInit,
            RmwPublisherInit,
            PublisherInit,
            RmwSubscriptionInit,
            SubscriptionInit,
            RclPublish,
            RmwPublish,
            RmwTake,
            RclTake,
            TimerInit,
            CallbackStart,
            CallbackEnd,
            RclcppSubscriptionInit,
            RclcppSubscriptionCallback,
            RclcppTimerCallback,
            RclcppTimerLinkNode,
            RclcppPublish,
            RclcppTake,
            RclcppCallbackRegister,
        ];
        ALL.get(usize::from(id).checked_sub(1)?).copied()
    }
}

/// One tracepoint hit in one process (as the far side sends it too).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Event {
    pub kind: Kind,
    /// The CPU it ran on (None: not known).
    pub cpu: Option<u16>,
    /// ring.h's flags: bit 0 taken (rmw_take) or intra-process (callback_start).
    pub flags: u16,
    pub tid: u32,
    /// CLOCK_MONOTONIC, ns.
    pub time_ns: i64,
    /// The tracepoint's arguments (ring.h says which is which).
    pub args: [u64; 4],
    /// Its names (node name and namespace, topic, function symbol), if it has any.
    pub names: Vec<String>,
}

/// Decode one raw record.
pub fn decode(r: &RawRecord) -> Result<Event, String> {
    let w = &r.words;
    let id = (w[1] & 0xffff) as u16;
    let kind = Kind::from_id(id).ok_or_else(|| format!("an event of unknown kind {id}"))?;
    let cpu = ((w[1] >> 32) & 0xffff) as u16;
    let names = if r.text.is_empty() {
        Vec::new()
    } else {
        r.text.split(|&b| b == 0).take(2).map(|s| String::from_utf8_lossy(s).into_owned()).collect()
    };
    Ok(Event {
        kind,
        cpu: (cpu != u16::MAX).then_some(cpu),
        flags: (w[1] >> 48) as u16,
        tid: (w[2] & 0xffff_ffff) as u32,
        time_ns: w[3] as i64,
        args: [w[4], w[5], w[6], w[7]],
        names,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_fields_where_ring_h_puts_them() {
        let r = RawRecord {
            words: [1, 2 | 2 << 16 | 3 << 32 | 1 << 48, 77, 1000, 10, 20, 30, 40],
            text: b"talker\0/ns\0\0\0".to_vec(),
        };
        let e = decode(&r).unwrap();
        assert_eq!(e.kind, Kind::NodeInit);
        assert_eq!(e.cpu, Some(3));
        assert_eq!(e.flags, 1);
        assert_eq!(e.tid, 77);
        assert_eq!(e.time_ns, 1000);
        assert_eq!(e.args, [10, 20, 30, 40]);
        assert_eq!(e.names, ["talker", "/ns"]);
    }

    #[test]
    fn an_unknown_kind_is_one_line_and_any_bytes_decode_or_refuse() {
        let mut r = RawRecord { words: [0; 8], text: Vec::new() };
        assert!(decode(&r).unwrap_err().contains("unknown kind 0"));
        r.words[1] = 21;
        assert!(decode(&r).is_err());
        // a crude fuzz: every kind id, arbitrary words and bytes
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let text: Vec<u8> =
                x.to_ne_bytes().iter().cycle().take((x % 120) as usize).copied().collect();
            let r = RawRecord { words: [x, x.rotate_left(7), x >> 3, x, x, x, x, x], text };
            let _ = decode(&r);
        }
    }
}
