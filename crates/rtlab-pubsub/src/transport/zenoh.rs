//! `zenoh`: Zenoh 1.10 over explicit endpoints — no router needed, multicast scouting off
//! (peers learn of each other only over the links they open themselves, plus Zenoh's gossip
//! over those links).
//!
//! Mode ([`ZenohTransport::with_mode`]): `peer` (the default) listens and connects; `client`
//! only connects (to a router or a peer) and never listens. Endpoints are any Zenoh locator
//! (`tcp/198.18.0.1:7447`, `tcp/[fe80::1%veth0]:7447`, ...). A peer given no listen
//! endpoint listens on `tcp/127.0.0.1:0` (loopback, an ephemeral port: Zenoh's own default
//! would be every interface).
//!
//! One session per transport (opened after the caller set its scheduling policy, so the
//! session's runtime threads inherit it). A topic is a key expression; a publisher is a
//! declared publisher, a subscriber a declared subscriber with a bounded channel handler
//! (`RingChannel` for keep-last N, `FifoChannel` for keep-all). The header is read from the
//! received payload through its reader (no copy of the payload on rtlab's side).
//!
//! Publishing copies nothing and allocates nothing on rtlab's side: the publisher owns one
//! message buffer behind an `Arc`, writes the header into it, and hands Zenoh a slice of it
//! (`ZSlice` over the shared buffer: a reference count, not a copy). Zenoh serializes the
//! message into its link's batch before `put` returns, so by the next publish the buffer is
//! rtlab's alone again; only when Zenoh still holds it (a subscriber of the same session
//! has not dropped its sample yet) does the publisher start a fresh buffer (one copy).
//! Publishers are `express` (sent at once, not batched), as Zenoh's own z_ping/z_pong
//! are. Never prints.

use crate::transport::*;
use ::zenoh::handlers::{FifoChannel, FifoChannelHandler, RingChannel, RingChannelHandler};
use ::zenoh::qos::CongestionControl;
use ::zenoh::sample::Sample;
use ::zenoh::Wait;
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;
use zenoh_buffers::{ZBuf, ZSlice, ZSliceBuffer};

const NAME: &str = "zenoh";
/// Largest message offered (Zenoh fragments; its own limit is 1 GiB).
pub const MAX_MESSAGE: usize = 64 << 20;
/// Channel depth used for keep-all.
pub const KEEP_ALL_DEPTH: usize = 1024;

fn lib(what: &'static str) -> impl Fn(String) -> TransportError {
    move |why| TransportError::Library { transport: NAME, what, why }
}

/// One Zenoh session.
pub struct ZenohTransport {
    session: ::zenoh::Session,
    mode: &'static str,
    listen: Vec<String>,
    connect: Vec<String>,
}

impl ZenohTransport {
    /// A peer that listens on `listen` and connects to `connect` (e.g. `tcp/127.0.0.1:7447`).
    pub fn new(listen: &[String], connect: &[String]) -> Result<Self, TransportError> {
        Self::with_mode(listen, connect, None)
    }

    /// A session in `mode` (`peer`, the default, or `client`) that listens on `listen` (a
    /// peer given none: `tcp/127.0.0.1:0`; a client: must be none) and connects to
    /// `connect` (a client: at least one, since scouting is off).
    pub fn with_mode(
        listen: &[String],
        connect: &[String],
        mode: Option<&str>,
    ) -> Result<Self, TransportError> {
        let bad = |what: &'static str, why: String| TransportError::Library {
            transport: NAME,
            what,
            why,
        };
        let mode = match mode.unwrap_or("peer") {
            "peer" => "peer",
            "client" => "client",
            other => {
                return Err(bad("mode", format!("unknown zenoh mode {other:?} (peer or client)")))
            }
        };
        let listen: Vec<String> = match (mode, listen.is_empty()) {
            ("client", false) => {
                return Err(bad(
                    "listen",
                    format!("a zenoh client does not listen, listen endpoints {listen:?} given"),
                ))
            }
            ("client", true) => Vec::new(),
            // a peer listens somewhere in any case: keep it on loopback (Zenoh's default is
            // every interface)
            (_, true) => vec!["tcp/127.0.0.1:0".into()],
            (_, false) => listen.to_vec(),
        };
        if mode == "client" && connect.is_empty() {
            return Err(bad(
                "connect",
                "a zenoh client needs a connect endpoint (multicast scouting is off)".into(),
            ));
        }
        let mut c = ::zenoh::Config::default();
        let set = |c: &mut ::zenoh::Config, k: &str, v: String| {
            c.insert_json5(k, &v).map_err(|e| lib("configure")(format!("{k}: {e}")))
        };
        set(&mut c, "mode", format!("\"{mode}\""))?;
        set(&mut c, "listen/endpoints", serde_json::to_string(&listen).unwrap_or_default())?;
        set(&mut c, "connect/endpoints", serde_json::to_string(connect).unwrap_or_default())?;
        set(&mut c, "scouting/multicast/enabled", "false".into())?;
        let session = ::zenoh::open(c).wait().map_err(|e| lib("open session")(e.to_string()))?;
        Ok(ZenohTransport { session, mode, listen, connect: connect.to_vec() })
    }
}

impl Transport for ZenohTransport {
    fn about(&self) -> About {
        About { name: NAME, max_message: MAX_MESSAGE }
    }
    fn map_qos(&self, qos: &Qos) -> Result<QosMapping, TransportError> {
        let reliability = match qos.reliability {
            Reliability::Reliable => item(qos.reliability, "TCP link + CongestionControl::Block (queues wait, never drop)", Fidelity::Exact),
            Reliability::BestEffort => item(
                qos.reliability,
                "CongestionControl::Drop (queues drop under congestion; the TCP link itself still retransmits)",
                Fidelity::Closest,
            ),
        };
        let history = match qos.history {
            History::KeepLast(n) => item(
                qos.history,
                format!("subscriber RingChannel({n}) (oldest replaced)"),
                Fidelity::Exact,
            ),
            History::KeepAll => item(
                qos.history,
                format!(
                    "subscriber FifoChannel({KEEP_ALL_DEPTH}) (bounded; delivery waits when full)"
                ),
                Fidelity::Closest,
            ),
        };
        let durability = match qos.durability {
            Durability::Volatile => item(qos.durability, "plain publisher (no cache for late joiners)", Fidelity::Exact),
            Durability::TransientLocal => {
                return Err(TransportError::QosUnsupported {
                    transport: NAME,
                    setting: "--durability",
                    asked: qos.durability.to_string(),
                    why: "needs zenoh-ext's advanced publisher cache, not built into rtlab (use volatile)".into(),
                })
            }
        };
        Ok(QosMapping { reliability, history, durability })
    }
    fn publisher(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Publisher> {
        self.check(qos, max_len)?;
        let publisher = self.declare_publisher(topic, qos)?;
        Ok(Box::new(ZenohPublisher { publisher, buf: Arc::new(vec![0u8; max_len]) }))
    }
    fn subscriber(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Subscriber> {
        self.check(qos, max_len)?;
        let b = self.session.declare_subscriber(topic.to_string());
        let rx = match qos.history {
            History::KeepLast(n) => Rx::Ring(
                b.with(RingChannel::new(n as usize))
                    .wait()
                    .map_err(|e| lib("declare subscriber")(e.to_string()))?,
            ),
            History::KeepAll => Rx::Fifo(
                b.with(FifoChannel::new(KEEP_ALL_DEPTH))
                    .wait()
                    .map_err(|e| lib("declare subscriber")(e.to_string()))?,
            ),
        };
        Ok(Box::new(ZenohSubscriber { rx }))
    }
    fn callback_echo(
        &self,
        topic_in: &str,
        topic_out: &str,
        qos: &Qos,
        max_len: usize,
    ) -> Result<Option<Box<dyn CallbackEcho>>, TransportError> {
        self.check(qos, max_len)?;
        let pong = self.declare_publisher(topic_out, qos)?;
        let tally = Arc::new(EchoTally::default());
        let t2 = tally.clone();
        // as Zenoh's own z_pong: the ping's payload put back as it came (a reference, no copy)
        let subscriber = self
            .session
            .declare_subscriber(topic_in.to_string())
            .callback(move |s: Sample| {
                let p = s.payload();
                if t2.stopped() {
                    return;
                }
                // not ours to echo: shorter than a header, or longer than the case's messages
                if p.len() < HEADER_LEN || p.len() > max_len {
                    return t2.skip();
                }
                if let Err(e) = pong.put(p.clone()).wait() {
                    t2.fail(lib("put")(e.to_string()).to_string());
                }
            })
            .wait()
            .map_err(|e| lib("declare subscriber")(e.to_string()))?;
        Ok(Some(Box::new(Answering { _ports: subscriber, tally })))
    }
    fn notes(&self) -> Vec<String> {
        vec![
            format!(
                "zenoh: {} mode, listen {:?}, connect {:?}, multicast scouting off",
                self.mode, self.listen, self.connect
            ),
            "zenoh: express publishers (no batching); put() hands Zenoh a slice of the publisher's own buffer (no copy)".into(),
        ]
    }
}

impl ZenohTransport {
    /// An express publisher on `topic` whose congestion control follows `qos`'s reliability.
    fn declare_publisher(
        &self,
        topic: &str,
        qos: &Qos,
    ) -> Result<::zenoh::pubsub::Publisher<'static>, TransportError> {
        self.session
            .declare_publisher(topic.to_string())
            .congestion_control(match qos.reliability {
                Reliability::Reliable => CongestionControl::Block,
                Reliability::BestEffort => CongestionControl::Drop,
            })
            .express(true)
            .wait()
            .map_err(|e| lib("declare publisher")(e.to_string()))
    }
}

struct ZenohPublisher {
    publisher: ::zenoh::pubsub::Publisher<'static>,
    /// The message buffer, shared with Zenoh only while a `put` holds it.
    buf: Arc<Vec<u8>>,
}

impl ZenohPublisher {
    /// The buffer to write the next message into: the same one when Zenoh let go of it
    /// (always, once `put` returned, unless a same-session subscriber still holds a
    /// sample), else a fresh copy.
    fn writable(&mut self) -> &mut Vec<u8> {
        if Arc::get_mut(&mut self.buf).is_none() {
            self.buf = Arc::new(self.buf.as_ref().clone());
        }
        Arc::get_mut(&mut self.buf).expect("a buffer just made is unshared")
    }
}

impl Publisher for ZenohPublisher {
    fn publish(&mut self, seq: u64, stamp_ns: i64, len: usize) -> Result<(), TransportError> {
        check_len(NAME, self.buf.len(), len)?;
        encode_header(self.writable(), seq, stamp_ns);
        let shared: Arc<dyn ZSliceBuffer> = self.buf.clone();
        let slice = ZSlice::new(shared, 0, len)
            .map_err(|_| lib("put")(format!("message of {len} bytes beyond its buffer")))?;
        self.publisher
            .put(::zenoh::bytes::ZBytes::from(ZBuf::from(slice)))
            .wait()
            .map_err(|e| lib("put")(e.to_string()))
    }
}

enum Rx {
    Ring(::zenoh::pubsub::Subscriber<RingChannelHandler<Sample>>),
    Fifo(::zenoh::pubsub::Subscriber<FifoChannelHandler<Sample>>),
}

struct ZenohSubscriber {
    rx: Rx,
}

fn received(s: Sample) -> Option<Received> {
    let p = s.payload();
    let mut h = [0u8; HEADER_LEN];
    p.reader().read_exact(&mut h).ok()?;
    decode_header(&h).map(|(seq, stamp_ns)| Received { seq, stamp_ns, len: p.len() })
}

impl Subscriber for ZenohSubscriber {
    fn try_take(&mut self) -> Result<Option<Received>, TransportError> {
        let s = match &self.rx {
            Rx::Ring(r) => r.try_recv(),
            Rx::Fifo(r) => r.try_recv(),
        }
        .map_err(|e| lib("receive")(e.to_string()))?;
        Ok(s.and_then(received))
    }
    fn wait_take(&mut self, timeout_ns: i64) -> Result<Option<Received>, TransportError> {
        let d = Duration::from_nanos(timeout_ns.max(0) as u64);
        let s = match &self.rx {
            Rx::Ring(r) => r.recv_timeout(d),
            Rx::Fifo(r) => r.recv_timeout(d),
        }
        .map_err(|e| lib("receive")(e.to_string()))?;
        Ok(s.and_then(received))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_is_peer_or_client() {
        let e = ZenohTransport::with_mode(&[], &[], Some("router")).err().unwrap().to_string();
        assert!(e.contains("\"router\""), "{e}");
        let e = ZenohTransport::with_mode(&[], &[], Some("client")).err().unwrap().to_string();
        assert!(e.contains("connect"), "{e}");
        let l = vec!["tcp/127.0.0.1:0".to_string()];
        let e = ZenohTransport::with_mode(&l, &l, Some("client")).err().unwrap().to_string();
        assert!(e.contains("does not listen"), "{e}");
        let t = ZenohTransport::with_mode(&[], &[], None).unwrap();
        assert!(t.notes()[0].starts_with("zenoh: peer mode, listen [\"tcp/127.0.0.1:0\"]"));
    }

    /// The publisher writes every message into the same buffer (no copy, no allocation)
    /// when the subscriber is in another session, as in every rtlab case.
    #[test]
    fn publish_reuses_one_buffer() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let ep = vec![format!("tcp/127.0.0.1:{port}")];
        let a = ZenohTransport::new(&ep, &[]).unwrap();
        let b = ZenohTransport::new(&[], &ep).unwrap();
        let qos = Qos { reliability: Reliability::Reliable, ..Qos::default() };
        let mut sub = b.subscriber("rtlab/reuse", &qos, 1 << 17).unwrap();
        let publisher = a
            .session
            .declare_publisher("rtlab/reuse")
            .congestion_control(CongestionControl::Block)
            .express(true)
            .wait()
            .unwrap();
        let mut p = ZenohPublisher { publisher, buf: Arc::new(vec![0u8; 1 << 17]) };
        let first = Arc::as_ptr(&p.buf);
        // matching takes a moment: publish until the first message arrives (bounded)
        let mut got = None;
        for i in 0..200u64 {
            p.publish(i, 1, 4096).unwrap();
            got = sub.wait_take(20_000_000).unwrap();
            if got.is_some() {
                break;
            }
        }
        assert!(got.is_some(), "no message through zenoh on loopback in 200 tries");
        // small messages and ones Zenoh fragments (its batches are 64 KiB)
        for i in 1000..1050u64 {
            let len = if i % 2 == 0 { 64 + (i as usize % 100) } else { 1 << 17 };
            p.publish(i, 2, len).unwrap();
            // 10 s: a loaded machine (CI's tests beside a build) stalled a fragmented message
            // past 2 s once; the test is that nothing is lost, not how fast
            let r =
                sub.wait_take(10_000_000_000).unwrap().expect("message lost on a reliable link");
            assert_eq!((r.seq, r.len), (i, len));
        }
        assert_eq!(Arc::as_ptr(&p.buf), first, "a publish started a fresh buffer (a copy)");
        assert_eq!(Arc::strong_count(&p.buf), 1);
    }
}
