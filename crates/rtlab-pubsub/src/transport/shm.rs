//! `shm`: iceoryx2 (0.10) shared memory, inter-process, zero copy inside the library.
//!
//! One iceoryx2 node per transport (signal handling disabled: rtlab owns Ctrl-C). A topic
//! is a publish-subscribe service of `[u8]` slices with rtlab's 16-byte header (sequence,
//! send stamp) as the samples' user header (a message of `len` bytes: the header and a
//! payload of `len - 16`), plus an event service `<topic>/ev` used
//! only for the blocking wait: the publisher notifies after each send; a blocking
//! subscriber sleeps in the listener's `timed_wait`. Busy-poll spins on `receive`; a
//! transport opened for busy-poll ([`ShmTransport::busy_poll`]) opens no event ports at all:
//! no notification per message, as iceoryx2's own benchmark (a blocking wait there spins).
//! The publisher keeps its next sample loaned and written ahead: right after a send it loans
//! the next one and copies the payload into it from its preallocated buffer, so a
//! publish writes only the 16-byte header into shared memory and sends — the body is built
//! in place before the send, as a zero-copy application does and as iceoryx2's own
//! benchmark does (it loans and fills its next sample before it waits). A publish of
//! another length than the one loaned ahead loans and writes at publish time. Subscribers
//! read the header in place in shared memory and never the payload (a message's length is
//! iceoryx2's own header's). Neither side asks a sample for its payload slice on the way:
//! iceoryx2 0.10 locks the port's mutex for that. iceoryx2 removes its files (/dev/shm/iox2_*, /tmp/iceoryx2)
//! when the last port, service and node are dropped. Never prints.

use crate::transport::*;
use iceoryx2::prelude::*;
use std::time::Duration;

const NAME: &str = "shm";
/// Largest message offered (shared memory is reserved per subscriber and queued sample).
pub const MAX_MESSAGE: usize = 64 << 20;
/// Subscriber buffer used for keep-all (bounded; a reliable publisher waits when full).
pub const KEEP_ALL_DEPTH: usize = 1024;
const MAX_SUBSCRIBERS: usize = 16;

type Svc = ipc_threadsafe::Service;

/// rtlab's 16-byte header (sequence, send stamp) as the sample's user header: a publish
/// writes it and a take reads it with no lock and without touching the payload (iceoryx2
/// 0.10's `payload()`/`payload_mut()` of a slice lock the port's mutex; examples/shm_ladder.rs
/// counts them). A message of `len` bytes is this header and a payload of `len - 16`.
type Hdr = u128;

fn pack(seq: u64, stamp_ns: i64) -> Hdr {
    u128::from(seq) | (u128::from(stamp_ns as u64) << 64)
}

fn unpack(h: Hdr) -> (u64, i64) {
    (h as u64, (h >> 64) as u64 as i64)
}

fn lib(what: &'static str) -> impl Fn(String) -> TransportError {
    move |why| TransportError::Library { transport: NAME, what, why }
}

pub struct ShmTransport {
    node: Node<Svc>,
    /// Every receiver busy-polls: no event service, no notification per message.
    busy_poll: bool,
    /// The subscribers per topic the services are made for (one publisher), or None: room
    /// for any run by hand.
    sized: Option<usize>,
}

impl ShmTransport {
    pub fn new() -> Result<Self, TransportError> {
        // iceoryx2 logs to stderr by default (e.g. "no config file was loaded"): errors only
        set_log_level(LogLevel::Error);
        let node = NodeBuilder::new()
            .signal_handling_mode(SignalHandlingMode::Disabled)
            .create::<Svc>()
            .map_err(|e| lib("create node")(format!("{e:?}")))?;
        Ok(ShmTransport { node, busy_poll: false, sized: None })
    }

    /// For receivers that all busy-poll: publishers send no notification, subscribers open
    /// no listener (a wait spins on `receive`). Every process on the topic must say the same:
    /// a blocking subscriber would see a message only when its wait slice ends.
    pub fn busy_poll(mut self) -> Self {
        self.busy_poll = true;
        self
    }

    /// Services made for `subscribers` subscribers and one publisher per topic, as an
    /// application sizes its own: iceoryx2 visits every subscriber slot on each send and
    /// every publisher slot on each receive, so room for a run by hand (16 + 2) costs a 64 B
    /// round trip ~50 ns here (examples/shm_ladder.rs). Every process on a topic must give
    /// the same sizes, or the service does not open.
    pub fn sized_for(mut self, subscribers: usize) -> Self {
        self.sized = Some(subscribers.max(1));
        self
    }

    /// (publishers, subscribers) per service.
    fn ports(&self) -> (usize, usize) {
        match self.sized {
            Some(n) => (1, n),
            None => (2, MAX_SUBSCRIBERS),
        }
    }

    fn service(
        &self,
        topic: &str,
        qos: &Qos,
    ) -> Result<
        iceoryx2::service::port_factory::publish_subscribe::PortFactory<Svc, [u8], Hdr>,
        TransportError,
    > {
        let name = ServiceName::new(topic).map_err(|e| lib("service name")(format!("{e:?}")))?;
        let depth = qos.history.depth(KEEP_ALL_DEPTH);
        let (publishers, subscribers) = self.ports();
        let history = match qos.durability {
            Durability::Volatile => 0,
            Durability::TransientLocal => depth,
        };
        self.node
            .service_builder(&name)
            .publish_subscribe::<[u8]>()
            .user_header::<Hdr>()
            .max_publishers(publishers)
            .max_subscribers(subscribers)
            .max_nodes(subscribers + 4)
            .subscriber_max_buffer_size(depth)
            .history_size(history)
            .enable_safe_overflow(qos.reliability == Reliability::BestEffort)
            .open_or_create()
            .map_err(|e| lib("open the publish-subscribe service")(format!("{e:?}")))
    }

    /// The topic's event service, or none for a transport opened for busy-poll.
    fn event_unless_busy_poll(
        &self,
        topic: &str,
    ) -> Result<Option<iceoryx2::service::port_factory::event::PortFactory<Svc>>, TransportError>
    {
        if self.busy_poll {
            Ok(None)
        } else {
            self.event(topic).map(Some)
        }
    }

    fn event(
        &self,
        topic: &str,
    ) -> Result<iceoryx2::service::port_factory::event::PortFactory<Svc>, TransportError> {
        let name = ServiceName::new(&format!("{topic}/ev"))
            .map_err(|e| lib("service name")(format!("{e:?}")))?;
        let (_, subscribers) = self.ports();
        self.node
            .service_builder(&name)
            .event()
            .max_notifiers(4)
            .max_listeners(subscribers)
            .max_nodes(subscribers + 4)
            .open_or_create()
            .map_err(|e| lib("open the event service")(format!("{e:?}")))
    }
}

impl Transport for ShmTransport {
    fn about(&self) -> About {
        About { name: NAME, max_message: MAX_MESSAGE }
    }
    fn map_qos(&self, qos: &Qos) -> Result<QosMapping, TransportError> {
        let reliability = match qos.reliability {
            Reliability::Reliable => {
                item(qos.reliability, "enable_safe_overflow(false) + BackpressureStrategy::RetryUntilDelivered (publisher waits, no loss)", Fidelity::Exact)
            }
            Reliability::BestEffort => item(qos.reliability, "enable_safe_overflow(true): a full subscriber buffer drops its oldest sample", Fidelity::Exact),
        };
        let history = match qos.history {
            History::KeepLast(n) => item(
                qos.history,
                format!("subscriber buffer_size {n} (oldest replaced when full and best effort)"),
                Fidelity::Exact,
            ),
            History::KeepAll => item(
                qos.history,
                format!("subscriber buffer_size {KEEP_ALL_DEPTH} (bounded)"),
                Fidelity::Closest,
            ),
        };
        let durability = match qos.durability {
            Durability::Volatile => item(qos.durability, "history_size 0", Fidelity::Exact),
            Durability::TransientLocal => item(
                qos.durability,
                format!("history_size {} (late subscribers get the last samples while the publisher lives)", qos.history.depth(KEEP_ALL_DEPTH)),
                Fidelity::Exact,
            ),
        };
        Ok(QosMapping { reliability, history, durability })
    }
    fn publisher(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Publisher> {
        self.check(qos, max_len)?;
        let svc = self.service(topic, qos)?;
        let publisher = svc
            .publisher_builder()
            .initial_max_slice_len(max_len - HEADER_LEN)
            .max_loaned_samples(2)
            .backpressure_strategy(match qos.reliability {
                Reliability::Reliable => BackpressureStrategy::RetryUntilDelivered,
                Reliability::BestEffort => BackpressureStrategy::DiscardData,
            })
            .create()
            .map_err(|e| lib("create publisher")(format!("{e:?}")))?;
        let ev = self.event_unless_busy_poll(topic)?;
        let notifier = ev
            .as_ref()
            .map(|ev| ev.notifier_builder().create())
            .transpose()
            .map_err(|e| lib("create notifier")(format!("{e:?}")))?;
        Ok(Box::new(ShmPublisher {
            publisher,
            notifier,
            next: None,
            buf: vec![0u8; max_len - HEADER_LEN].into_boxed_slice(),
            _svc: svc,
            _ev: ev,
        }))
    }
    fn subscriber(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Subscriber> {
        self.check(qos, max_len)?;
        let svc = self.service(topic, qos)?;
        let subscriber = svc
            .subscriber_builder()
            .buffer_size(qos.history.depth(KEEP_ALL_DEPTH))
            .create()
            .map_err(|e| lib("create subscriber")(format!("{e:?}")))?;
        let ev = self.event_unless_busy_poll(topic)?;
        let listener = ev
            .as_ref()
            .map(|ev| ev.listener_builder().create())
            .transpose()
            .map_err(|e| lib("create listener")(format!("{e:?}")))?;
        Ok(Box::new(ShmSubscriber { subscriber, listener, _svc: svc, _ev: ev }))
    }
    fn notes(&self) -> Vec<String> {
        let (publishers, subscribers) = self.ports();
        let wait = if self.busy_poll {
            "busy-poll: no event service, no notification per message"
        } else {
            "blocking wait = event service listener, notified after each send"
        };
        vec![format!("shm: iceoryx2 0.10 ipc_threadsafe service made for {publishers} publisher(s) and {subscribers} subscriber(s) per topic; {wait}")]
    }
}

type Sample = iceoryx2::sample_mut::SampleMut<Svc, [u8], Hdr>;

/// A sample loaned ahead, its payload written, and the message's length (kept, not asked of
/// the sample: asking locks).
struct Loaned {
    sample: Sample,
    len: usize,
}

struct ShmPublisher {
    publisher: iceoryx2::port::publisher::Publisher<Svc, [u8], Hdr>,
    notifier: Option<iceoryx2::port::notifier::Notifier<Svc>>,
    /// The next sample, loaned and its body written after the last send.
    next: Option<Loaned>,
    buf: Box<[u8]>,
    _svc: iceoryx2::service::port_factory::publish_subscribe::PortFactory<Svc, [u8], Hdr>,
    _ev: Option<iceoryx2::service::port_factory::event::PortFactory<Svc>>,
}

impl ShmPublisher {
    /// A loaned sample for a message of `len` bytes, its payload (all but the header)
    /// written; the header is written at publish.
    fn loan(&self, len: usize) -> Result<Loaned, TransportError> {
        let body = len - HEADER_LEN;
        let sample =
            self.publisher.loan_slice_uninit(body).map_err(|e| lib("loan")(format!("{e:?}")))?;
        Ok(Loaned { sample: sample.write_from_slice(&self.buf[..body]), len })
    }
}

impl Publisher for ShmPublisher {
    fn publish(&mut self, seq: u64, stamp_ns: i64, len: usize) -> Result<(), TransportError> {
        check_len(NAME, self.buf.len() + HEADER_LEN, len)?;
        let mut next = match self.next.take() {
            Some(l) if l.len == len => l,
            other => {
                // give the one loaned ahead back before loaning another
                drop(other);
                self.loan(len)?
            }
        };
        *next.sample.user_header_mut() = pack(seq, stamp_ns);
        next.sample.send().map_err(|e| lib("send")(format!("{e:?}")))?;
        if let Some(n) = &self.notifier {
            n.notify().map_err(|e| lib("notify")(format!("{e:?}")))?;
        }
        // the next message's body, written while the subscribers take this one; a loan that
        // fails here is retried (and its error returned) at the next publish
        self.next = self.loan(len).ok();
        Ok(())
    }
}

struct ShmSubscriber {
    subscriber: iceoryx2::port::subscriber::Subscriber<Svc, [u8], Hdr>,
    listener: Option<iceoryx2::port::listener::Listener<Svc>>,
    _svc: iceoryx2::service::port_factory::publish_subscribe::PortFactory<Svc, [u8], Hdr>,
    _ev: Option<iceoryx2::service::port_factory::event::PortFactory<Svc>>,
}

impl Subscriber for ShmSubscriber {
    fn try_take(&mut self) -> Result<Option<Received>, TransportError> {
        match self.subscriber.receive().map_err(|e| lib("receive")(format!("{e:?}")))? {
            Some(s) => {
                let (seq, stamp_ns) = unpack(*s.user_header());
                let len = s.header().number_of_elements() as usize + HEADER_LEN;
                Ok(Some(Received { seq, stamp_ns, len }))
            }
            None => Ok(None),
        }
    }
    fn wait_take(&mut self, timeout_ns: i64) -> Result<Option<Received>, TransportError> {
        if let Some(r) = self.try_take()? {
            return Ok(Some(r));
        }
        if timeout_ns <= 0 {
            // iceoryx2's timed_wait(0) waits without end (a socket's receive timeout of 0)
            return Ok(None);
        }
        let Some(listener) = &self.listener else {
            // opened for busy-poll: nobody notifies, so a wait spins
            return self.take(WaitStyle::BusyPoll, timeout_ns);
        };
        listener
            .timed_wait(|_| {}, Duration::from_nanos(timeout_ns.max(0) as u64))
            .map_err(|e| lib("wait")(format!("{e:?}")))?;
        self.try_take()
    }
}
