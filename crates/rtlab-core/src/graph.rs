//! The graph of a DDS domain as rtlab records and shows it (`rtlab observe`): who is there,
//! every writer and reader with its QoS and the ROS 2 node that owns it, ROS 2's nodes, and
//! the topics with their ROS 2 names where the DDS names follow ROS 2's mapping. rtlab-pubsub
//! reads it from a domain (`observe::dds_graph::discover`); rtlab-report shows it.
//!
//! Contract: data and pure mapping only.

use serde::{Deserialize, Serialize};

/// The QoS an endpoint offers (writer) or requests (reader), as far as rtlab reads it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointQos {
    /// `reliable` or `best-effort`.
    pub reliability: String,
    /// `volatile`, `transient-local`, `transient` or `persistent`.
    pub durability: String,
    /// `keep-last:N` or `keep-all`.
    pub history: String,
    /// The Deadline QoS's period, ns (absent: infinite, DDS's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ns: Option<i64>,
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
    /// The ROS 2 node that owns it (`/talker`, `/robot1/talker`), as its participant
    /// announces on `ros_discovery_info`; absent for an endpoint no node owns (not ROS 2,
    /// or the participant's own `ros_discovery_info`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// What a domain holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Graph {
    pub domain: u32,
    /// Participants' GUIDs (hex), this observer's own excluded.
    pub participants: Vec<String>,
    pub writers: Vec<Endpoint>,
    pub readers: Vec<Endpoint>,
    /// ROS 2's nodes, sorted by full name (empty when no participant is ROS 2).
    #[serde(default)]
    pub nodes: Vec<Node>,
    /// What could not be read (a `ros_discovery_info` sample that did not decode, ...).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// A ROS 2 node, as `ros2 node info` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// `/talker`, `/robot1/talker` (what `ros2 node list` prints).
    pub full_name: String,
    /// `/`, `/robot1`.
    pub namespace: String,
    pub name: String,
    /// Its participant's GUID (hex).
    pub participant: String,
    /// Topics it writes, sorted by name (ROS 2 topics only, `rt/...`, as `ros2 node info`).
    pub publishers: Vec<NodeTopic>,
    /// Topics it reads.
    pub subscribers: Vec<NodeTopic>,
    /// Services it answers (it reads `rq/<name>Request`, writes `rr/<name>Reply`).
    pub service_servers: Vec<NodeTopic>,
    /// Services it calls.
    pub service_clients: Vec<NodeTopic>,
    /// Endpoints the node announces that DDS discovery has not (yet) shown: a DDS that
    /// announces its endpoints slowly needs a longer wait.
    pub unseen: usize,
}

/// A topic or service of a node: its ROS 2 name and type where they follow ROS 2's
/// mapping, the DDS ones otherwise.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeTopic {
    pub name: String,
    #[serde(rename = "type")]
    pub type_name: String,
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
