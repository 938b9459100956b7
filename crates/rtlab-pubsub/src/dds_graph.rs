//! The graph of a DDS domain, from DDS's own built-in topics (DCPSParticipant,
//! DCPSPublication, DCPSSubscription): who is there, which topics with which type names, and
//! the QoS every writer offers and every reader requests. ROS 2 names are derived from the
//! DDS names (`rt/joint_states` is `/joint_states`, `sensor_msgs::msg::dds_::JointState_` is
//! `sensor_msgs/msg/JointState`).
//!
//! Contract: [`discover`] joins the domain with a participant of its own (the same network
//! configuration as the `dds` transport: loopback unless an interface is given), waits for
//! discovery, reads the built-in topics once, and leaves; its own participant and endpoints
//! are left out. Nothing is sent on any user topic. Like [`crate::dds`], this module calls
//! Cyclone's C API (`unsafe`, each block with its `// SAFETY:`). Never prints.
#![allow(unsafe_code)]

use crate::dds::{DdsNetwork, DdsTransport};
use crate::transport::TransportError;
use cyclors::*;
use serde::{Deserialize, Serialize};
use std::ffi::CStr;
use std::time::Duration;

/// The QoS an endpoint offers (writer) or requests (reader), as far as rtlab reads it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointQos {
    /// `reliable` or `best-effort`.
    pub reliability: String,
    /// `volatile`, `transient-local`, `transient` or `persistent`.
    pub durability: String,
    /// `keep-last:N` or `keep-all`.
    pub history: String,
}

/// A writer or a reader.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// The endpoint's GUID (hex).
    pub guid: String,
    /// Its participant's GUID (hex).
    pub participant: String,
    /// The DDS topic name (`rt/chatter`).
    pub topic: String,
    /// The DDS type name (`std_msgs::msg::dds_::String_`).
    pub type_name: String,
    pub qos: EndpointQos,
}

/// What a domain holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Graph {
    pub domain: u32,
    /// Participants' GUIDs (hex), this observer's own excluded.
    pub participants: Vec<String>,
    pub writers: Vec<Endpoint>,
    pub readers: Vec<Endpoint>,
}

/// A topic of the graph with its writers and readers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topic {
    pub topic: String,
    /// The ROS 2 name (`/chatter`) when the DDS name follows ROS 2's mapping.
    pub ros_name: Option<String>,
    pub type_name: String,
    /// The ROS 2 type (`std_msgs/msg/String`) when the type name follows ROS 2's mapping.
    pub ros_type: Option<String>,
    pub writers: usize,
    pub readers: usize,
}

/// `rt/a/b` -> `/a/b` (ROS 2's topic prefix; `rq/` and `rr/` are services' requests and replies).
pub fn ros_topic(dds: &str) -> Option<String> {
    dds.strip_prefix("rt/").map(|t| format!("/{t}"))
}

/// `pkg::msg::dds_::Type_` -> `pkg/msg/Type`.
pub fn ros_type(dds: &str) -> Option<String> {
    let parts: Vec<&str> = dds.split("::").collect();
    match parts.as_slice() {
        [pkg, kind, "dds_", ty] if ty.ends_with('_') => {
            Some(format!("{pkg}/{kind}/{}", &ty[..ty.len() - 1]))
        }
        _ => None,
    }
}

impl Graph {
    /// One entry per (topic, type), sorted by topic.
    pub fn topics(&self) -> Vec<Topic> {
        let mut out: Vec<Topic> = Vec::new();
        for (e, is_writer) in
            self.writers.iter().map(|e| (e, true)).chain(self.readers.iter().map(|e| (e, false)))
        {
            let t = match out.iter_mut().find(|t| t.topic == e.topic && t.type_name == e.type_name)
            {
                Some(t) => t,
                None => {
                    out.push(Topic {
                        topic: e.topic.clone(),
                        ros_name: ros_topic(&e.topic),
                        type_name: e.type_name.clone(),
                        ros_type: ros_type(&e.type_name),
                        writers: 0,
                        readers: 0,
                    });
                    out.last_mut().expect("pushed")
                }
            };
            if is_writer {
                t.writers += 1;
            } else {
                t.readers += 1;
            }
        }
        out.sort_by(|a, b| a.topic.cmp(&b.topic).then(a.type_name.cmp(&b.type_name)));
        out
    }
}

fn hex(g: &dds_guid_t) -> String {
    g.v.iter().map(|b| format!("{b:02x}")).collect()
}

fn qos_of(q: *const dds_qos_t) -> EndpointQos {
    let mut rel: dds_reliability_kind_t = dds_reliability_kind_DDS_RELIABILITY_BEST_EFFORT;
    let mut blocking: dds_duration_t = 0;
    let mut dur: dds_durability_kind_t = dds_durability_kind_DDS_DURABILITY_VOLATILE;
    let mut hist: dds_history_kind_t = dds_history_kind_DDS_HISTORY_KEEP_LAST;
    let mut depth: i32 = 1;
    if !q.is_null() {
        // SAFETY: q is a QoS owned by the sample being read (valid until the loan is
        // returned); the out-pointers are locals; an unset policy leaves them untouched.
        unsafe {
            dds_qget_reliability(q, &mut rel, &mut blocking);
            dds_qget_durability(q, &mut dur);
            dds_qget_history(q, &mut hist, &mut depth);
        }
    }
    EndpointQos {
        reliability: if rel == dds_reliability_kind_DDS_RELIABILITY_RELIABLE {
            "reliable"
        } else {
            "best-effort"
        }
        .into(),
        durability: match dur {
            x if x == dds_durability_kind_DDS_DURABILITY_TRANSIENT_LOCAL => "transient-local",
            x if x == dds_durability_kind_DDS_DURABILITY_TRANSIENT => "transient",
            x if x == dds_durability_kind_DDS_DURABILITY_PERSISTENT => "persistent",
            _ => "volatile",
        }
        .into(),
        history: if hist == dds_history_kind_DDS_HISTORY_KEEP_ALL {
            "keep-all".into()
        } else {
            format!("keep-last:{depth}")
        },
    }
}

fn cstr(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: a non-null, NUL-terminated string owned by the loaned sample.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

const BATCH: usize = 256;

/// Take every sample of built-in reader `reader`, handing each valid one to `f`.
fn take_all<T>(reader: dds_entity_t, mut f: impl FnMut(&T)) -> Result<(), TransportError> {
    loop {
        let mut bufs: [*mut std::os::raw::c_void; BATCH] = [std::ptr::null_mut(); BATCH];
        // SAFETY: an all-zero sample info is a valid (unread) value of this plain C struct.
        let mut infos: [dds_sample_info_t; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: bufs holds BATCH null pointers (Cyclone lends the samples) and infos BATCH
        // entries; the loan is returned below before the next take.
        let n =
            unsafe { dds_take(reader, bufs.as_mut_ptr(), infos.as_mut_ptr(), BATCH, BATCH as u32) };
        if n < 0 {
            return Err(TransportError::Library {
                transport: "cyclonedds",
                what: "read the built-in topics",
                why: format!("code {n}"),
            });
        }
        for i in 0..n as usize {
            if infos[i].valid_data && !bufs[i].is_null() {
                // SAFETY: a valid sample of this built-in topic is a T (the reader's type),
                // lent until dds_return_loan.
                f(unsafe { &*(bufs[i] as *const T) });
            }
        }
        if n > 0 {
            // SAFETY: returns exactly the loan dds_take made.
            unsafe { dds_return_loan(reader, bufs.as_mut_ptr(), n) };
        }
        if (n as usize) < BATCH {
            return Ok(());
        }
    }
}

/// Join `domain` on `net`, wait `wait` for discovery, and read who is there.
pub fn discover(domain: u32, net: &DdsNetwork, wait: Duration) -> Result<Graph, TransportError> {
    let t = DdsTransport::with_network(domain, net)?;
    let p = t.participant();
    let mut own = dds_guid_t { v: [0; 16] };
    // SAFETY: p is our live participant; own is a local out-value.
    unsafe { dds_get_guid(p, &mut own) };
    let mut readers = Vec::new();
    for topic in [
        DDS_BUILTIN_TOPIC_DCPSPARTICIPANT,
        DDS_BUILTIN_TOPIC_DCPSPUBLICATION,
        DDS_BUILTIN_TOPIC_DCPSSUBSCRIPTION,
    ] {
        // SAFETY: a reader of a built-in topic under our participant, default QoS.
        let r = unsafe { dds_create_reader(p, topic, std::ptr::null(), std::ptr::null()) };
        if r < 0 {
            return Err(TransportError::Library {
                transport: "cyclonedds",
                what: "create a built-in topic reader",
                why: format!("code {r}"),
            });
        }
        readers.push(r);
    }
    std::thread::sleep(wait);
    let mut g = Graph { domain, ..Default::default() };
    let own_hex = hex(&own);
    take_all::<dds_builtintopic_participant>(readers[0], |s| {
        let k = hex(&s.key);
        if k != own_hex && !g.participants.contains(&k) {
            g.participants.push(k);
        }
    })?;
    let endpoint = |s: &dds_builtintopic_endpoint| Endpoint {
        guid: hex(&s.key),
        participant: hex(&s.participant_key),
        topic: cstr(s.topic_name),
        type_name: cstr(s.type_name),
        qos: qos_of(s.qos),
    };
    let mut writers = Vec::new();
    take_all::<dds_builtintopic_endpoint>(readers[1], |s| writers.push(endpoint(s)))?;
    let mut subs = Vec::new();
    take_all::<dds_builtintopic_endpoint>(readers[2], |s| subs.push(endpoint(s)))?;
    // our own built-in readers are readers of the domain too: not the user's graph
    g.writers = writers.into_iter().filter(|e| e.participant != own_hex).collect();
    g.readers = subs.into_iter().filter(|e| e.participant != own_hex).collect();
    g.participants.sort();
    for r in readers {
        // SAFETY: each reader is ours and deleted once.
        unsafe { dds_delete(r) };
    }
    drop(t);
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ros_names_from_dds_names() {
        assert_eq!(ros_topic("rt/joint_states").as_deref(), Some("/joint_states"));
        assert_eq!(ros_topic("rq/add_two_intsRequest"), None);
        assert_eq!(
            ros_type("sensor_msgs::msg::dds_::JointState_").as_deref(),
            Some("sensor_msgs/msg/JointState")
        );
        assert_eq!(ros_type("DDSPerfRDataKS"), None);
    }
}
