//! What the two DDS transports over C libraries share (`cyclonedds`, [`crate::transport::cyclonedds`], and
//! `fastdds`, [`crate::transport::fastdds`]): the publisher and subscriber of rtlab's message
//! ([`crate::ros_msg`]: a stock `sensor_msgs/msg/CompressedImage`) over each library's
//! writer and reader of serialized samples ([`SampleWriter`], [`SampleReader`]), and the
//! words of their network notes ([`network_note`]).
//!
//! Contract: publishing encodes into one buffer made at creation and hands it to the writer;
//! taking copies the first [`ros_msg::HEAD`] bytes of a sample into one buffer made at
//! creation and decodes sequence, stamp and length from there. Nothing here allocates, locks
//! or logs per message (what the library does is said in each transport's notes). Never
//! prints.

use crate::ros_msg;
use crate::transport::{check_len, EchoState, Publisher, Received, Subscriber, TransportError};
use std::sync::Arc;

/// Which network a DDS domain uses (see `cyclonedds.rs`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DdsNetwork {
    /// Interface name (`eth0`) or one of its addresses; None: loopback only.
    pub interface: Option<String>,
    /// Unicast discovery peers (addresses or host names, optionally `:PORT`); empty with an
    /// interface: multicast discovery.
    pub peers: Vec<String>,
}

/// A DDS library's writer of serialized samples.
pub(crate) trait SampleWriter: Send {
    /// The transport's name (for errors).
    const TRANSPORT: &'static str;
    /// Write one serialized sample (the 4-byte encapsulation header first).
    fn write_sample(&mut self, sample: &[u8]) -> Result<(), TransportError>;
    /// [`Publisher::matched`].
    fn matched_now(&self) -> Option<usize>;
    /// [`Publisher::wait_acknowledged`].
    fn wait_acked(&self, timeout_ns: i64) -> Option<bool>;
}

/// A publisher of messages up to `max_len` bytes through writer `W`.
pub(crate) struct DdsPublisher<W> {
    w: W,
    buf: Box<[u8]>,
    max_len: usize,
}

impl<W: SampleWriter> DdsPublisher<W> {
    pub(crate) fn new(w: W, max_len: usize) -> Self {
        let mut buf = vec![0u8; ros_msg::serialized_size(max_len)].into_boxed_slice();
        ros_msg::init(&mut buf);
        DdsPublisher { w, buf, max_len }
    }
}

impl<W: SampleWriter> Publisher for DdsPublisher<W> {
    #[inline]
    fn publish(&mut self, seq: u64, stamp_ns: i64, len: usize) -> Result<(), TransportError> {
        check_len(W::TRANSPORT, self.max_len, len)?;
        let size = ros_msg::encode(&mut self.buf, seq, stamp_ns, len);
        self.w.write_sample(&self.buf[..size])
    }
    fn matched(&self) -> Option<usize> {
        self.w.matched_now()
    }
    fn wait_acknowledged(&self, timeout_ns: i64) -> Option<bool> {
        self.w.wait_acked(timeout_ns)
    }
}

/// A DDS library's reader of serialized samples.
pub(crate) trait SampleReader: Send {
    /// The transport's name (for errors).
    const TRANSPORT: &'static str;
    /// Take the next sample, copying its first `head.len()` bytes into `head`: how many were
    /// copied; None when there was nothing, or a sample without data (a dispose). Never
    /// blocks.
    fn take_head(&mut self, head: &mut [u8]) -> Result<Option<usize>, TransportError>;
    /// Wait at most `timeout_ns` for a sample.
    fn wait(&mut self, timeout_ns: i64) -> Result<(), TransportError>;
}

/// A subscriber of messages through reader `R`.
pub(crate) struct DdsSubscriber<R> {
    r: R,
    /// The first bytes of each sample (sequence and stamp are read from there).
    head: [u8; ros_msg::HEAD],
}

impl<R: SampleReader> DdsSubscriber<R> {
    pub(crate) fn new(r: R) -> Self {
        DdsSubscriber { r, head: [0u8; ros_msg::HEAD] }
    }
}

impl<R: SampleReader> Subscriber for DdsSubscriber<R> {
    #[inline]
    fn try_take(&mut self) -> Result<Option<Received>, TransportError> {
        let Some(got) = self.r.take_head(&mut self.head)? else { return Ok(None) };
        received(R::TRANSPORT, &self.head[..got]).map(Some)
    }
    fn wait_take(&mut self, timeout_ns: i64) -> Result<Option<Received>, TransportError> {
        if let Some(r) = self.try_take()? {
            return Ok(Some(r));
        }
        self.r.wait(timeout_ns)?;
        self.try_take()
    }
}

/// What the first bytes of a sample (`head`) say: sequence, stamp and length, or malformed.
#[inline]
pub(crate) fn received(transport: &'static str, head: &[u8]) -> Result<Received, TransportError> {
    match ros_msg::decode(head) {
        Ok(d) => Ok(Received { seq: d.seq, stamp_ns: d.stamp_ns, len: d.len }),
        Err(m) => Err(TransportError::Malformed { transport, why: m.reason() }),
    }
}

/// What a take inside a data-available callback found.
pub(crate) enum Head {
    /// A sample with data: this many of its first bytes copied.
    Data(usize),
    /// A sample without data (a dispose or unregister).
    NoData,
    Nothing,
}

/// The data-available callback of a DDS callback echo: every sample there taken (`take`: its
/// first bytes into the buffer given), decoded and answered through `state`; a sample without
/// data is not ours to echo.
pub(crate) fn answering<T>(
    transport: &'static str,
    state: Arc<EchoState>,
    take: impl Fn(&T, &mut [u8]) -> Result<Head, TransportError> + Send + Sync + 'static,
) -> impl Fn(&T) + Send + Sync + 'static {
    move |t: &T| {
        let mut head = [0u8; ros_msg::HEAD];
        state.on_data(&mut || match take(t, &mut head)? {
            Head::Data(got) => received(transport, &head[..got]).map(Some),
            Head::NoData => Err(TransportError::Malformed { transport, why: "no data" }),
            Head::Nothing => Ok(None),
        });
    }
}

/// What a DDS transport's network configuration is, in words (for its notes): `loopback`
/// without an interface; else the interface as the library is told it (`iface`), then how
/// discovery goes: by multicast (`multicast`, in the library's words) without peers, or by
/// unicast to the peers.
pub(crate) fn network_note(
    net: &DdsNetwork,
    loopback: &str,
    iface: impl FnOnce(&str) -> String,
    multicast: &str,
) -> String {
    match net.interface.as_deref() {
        None => loopback.into(),
        Some(i) => {
            let iface = iface(i);
            if net.peers.is_empty() {
                format!("{iface}, {multicast}")
            } else {
                format!("{iface}, no multicast, unicast discovery peers {}", net.peers.join(", "))
            }
        }
    }
}
