//! `intra`: publisher and subscribers in one process, zero-copy hand-off.
//!
//! The publisher owns a preallocated pool of message slots (`Arc<Slot>`, each `max_len`
//! bytes). It writes a message once into a free slot (one nobody else holds:
//! `Arc::get_mut` succeeds) and passes the same `Arc` to every subscriber's bounded queue
//! (`std::sync::mpsc::sync_channel`, an array preallocated at creation): a reference count
//! increment, no copy, no allocation. A subscriber reads the header in place and drops its
//! reference, which returns the slot to the pool. The pool and the per-publisher copy of
//! the subscriber list are resized only when a subscriber joins (not in steady state).
//! Never prints; owns no file.

use crate::transport::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{
    sync_channel, Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError,
};
use std::sync::{Arc, Mutex};

const NAME: &str = "intra";
/// Queue depth used for keep-all (bounded: the publisher waits when full if reliable).
pub const KEEP_ALL_DEPTH: usize = 1024;

struct Slot {
    buf: Box<[u8]>,
    len: usize,
}

#[derive(Default)]
struct Topic {
    generation: AtomicU64,
    subscribers: Mutex<Vec<SyncSender<Arc<Slot>>>>,
}

/// The in-process bus: topics by name.
#[derive(Default)]
pub struct IntraTransport {
    topics: Mutex<HashMap<String, Arc<Topic>>>,
}

impl IntraTransport {
    pub fn new() -> Self {
        Self::default()
    }
    fn topic(&self, name: &str) -> Arc<Topic> {
        let mut t = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        t.entry(name.to_string()).or_default().clone()
    }
}

impl Transport for IntraTransport {
    fn about(&self) -> About {
        About { name: NAME, max_message: usize::MAX / 2 }
    }
    fn map_qos(&self, qos: &Qos) -> Result<QosMapping, TransportError> {
        let reliability = match qos.reliability {
            Reliability::Reliable => item(
                qos.reliability,
                "publisher waits while a subscriber queue is full (no loss)",
                Fidelity::Exact,
            ),
            Reliability::BestEffort => item(
                qos.reliability,
                "message dropped for a subscriber whose queue is full",
                Fidelity::Exact,
            ),
        };
        let history = match qos.history {
            History::KeepLast(n) => item(
                qos.history,
                format!("subscriber queue of {n} messages; when full the newest is dropped (best effort) or the publisher waits (reliable), not the oldest replaced"),
                Fidelity::Closest,
            ),
            History::KeepAll => item(qos.history, format!("subscriber queue of {KEEP_ALL_DEPTH} messages (bounded)"), Fidelity::Closest),
        };
        let durability = match qos.durability {
            Durability::Volatile => {
                item(qos.durability, "late subscribers get only new messages", Fidelity::Exact)
            }
            Durability::TransientLocal => return Err(TransportError::QosUnsupported {
                transport: NAME,
                setting: "--durability",
                asked: qos.durability.to_string(),
                why: "the in-process hand-off keeps no history for late subscribers (use volatile)"
                    .into(),
            }),
        };
        Ok(QosMapping { reliability, history, durability })
    }
    fn publisher(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Publisher> {
        self.map_qos(qos)?;
        check_len(NAME, self.max_message(), max_len)?;
        let depth = qos.history.depth(KEEP_ALL_DEPTH);
        Ok(Box::new(IntraPublisher {
            topic: self.topic(topic),
            seen_generation: u64::MAX,
            senders: Vec::new(),
            pool: Vec::new(),
            cursor: 0,
            depth,
            max_len,
            reliable: qos.reliability == Reliability::Reliable,
        }))
    }
    fn subscriber(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Subscriber> {
        self.map_qos(qos)?;
        check_len(NAME, self.max_message(), max_len)?;
        let (tx, rx) = sync_channel(qos.history.depth(KEEP_ALL_DEPTH));
        let t = self.topic(topic);
        t.subscribers.lock().unwrap_or_else(|e| e.into_inner()).push(tx);
        t.generation.fetch_add(1, Ordering::AcqRel);
        Ok(Box::new(IntraSubscriber { rx }))
    }
    fn notes(&self) -> Vec<String> {
        vec!["intra: one preallocated slot per message passed by Arc to every subscriber (zero copy)".into()]
    }
}

struct IntraPublisher {
    topic: Arc<Topic>,
    seen_generation: u64,
    senders: Vec<SyncSender<Arc<Slot>>>,
    pool: Vec<Arc<Slot>>,
    cursor: usize,
    depth: usize,
    max_len: usize,
    reliable: bool,
}

impl IntraPublisher {
    /// Pick up new subscribers (only when one joined) and grow the pool to match.
    fn refresh(&mut self) {
        let g = self.topic.generation.load(Ordering::Acquire);
        if g == self.seen_generation {
            return;
        }
        self.seen_generation = g;
        self.senders = self.topic.subscribers.lock().unwrap_or_else(|e| e.into_inner()).clone();
        // every subscriber may hold `depth` queued slots plus the one it is reading
        let want = (self.depth + 1) * self.senders.len().max(1) + 2;
        while self.pool.len() < want {
            self.pool
                .push(Arc::new(Slot { buf: vec![0u8; self.max_len].into_boxed_slice(), len: 0 }));
        }
    }

    fn free_slot(&mut self) -> Option<usize> {
        let n = self.pool.len();
        for k in 0..n {
            let i = (self.cursor + k) % n;
            if Arc::get_mut(&mut self.pool[i]).is_some() {
                self.cursor = (i + 1) % n;
                return Some(i);
            }
        }
        None
    }
}

impl Publisher for IntraPublisher {
    fn publish(&mut self, seq: u64, stamp_ns: i64, len: usize) -> Result<(), TransportError> {
        check_len(NAME, self.max_len, len)?;
        self.refresh();
        let i = loop {
            match self.free_slot() {
                Some(i) => break i,
                // every slot is still held by a subscriber
                None if self.reliable => std::thread::yield_now(),
                None => return Ok(()),
            }
        };
        let slot = Arc::get_mut(&mut self.pool[i]).expect("free slot");
        encode_header(&mut slot.buf, seq, stamp_ns);
        slot.len = len;
        for tx in &self.senders {
            let msg = self.pool[i].clone();
            if self.reliable {
                let _ = tx.send(msg); // Err: that subscriber is gone
            } else {
                match tx.try_send(msg) {
                    Ok(()) | Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {}
                }
            }
        }
        Ok(())
    }
}

struct IntraSubscriber {
    rx: Receiver<Arc<Slot>>,
}

fn received(s: &Slot) -> Received {
    let (seq, stamp_ns) = decode_header(&s.buf[..s.len]).unwrap_or((0, 0));
    Received { seq, stamp_ns, len: s.len }
}

impl Subscriber for IntraSubscriber {
    fn try_take(&mut self) -> Result<Option<Received>, TransportError> {
        match self.rx.try_recv() {
            Ok(s) => Ok(Some(received(&s))),
            Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => Ok(None),
        }
    }
    fn wait_take(&mut self, timeout_ns: i64) -> Result<Option<Received>, TransportError> {
        match self.rx.recv_timeout(std::time::Duration::from_nanos(timeout_ns.max(0) as u64)) {
            Ok(s) => Ok(Some(received(&s))),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => {
                // no publisher yet/anymore: wait out the time so callers do not spin
                std::thread::sleep(std::time::Duration::from_nanos(
                    timeout_ns.clamp(0, 1_000_000) as u64
                ));
                Ok(None)
            }
        }
    }
}
