//! The graph of a DDS domain, from DDS's own built-in topics (DCPSParticipant,
//! DCPSPublication, DCPSSubscription): who is there, which topics with which type names, and
//! the QoS every writer offers and every reader requests. ROS 2 names are derived from the
//! DDS names (`rt/joint_states` is `/joint_states`, `sensor_msgs::msg::dds_::JointState_` is
//! `sensor_msgs/msg/JointState`). ROS 2's nodes come from the topic ROS 2 announces them on
//! (`ros_discovery_info`, decoded by [`crate::observe::ros_graph`]): each endpoint a node owns is
//! named with it, and every node is listed with what it publishes, subscribes and serves,
//! as `ros2 node list` and `ros2 node info` show it.
//!
//! Contract: [`discover`] joins the domain with a participant of its own (the same network
//! configuration as the `dds` transport: loopback unless an interface is given), waits for
//! discovery, reads the built-in topics and `ros_discovery_info` once, and leaves; its own
//! participant and endpoints are left out. Nothing is written on any topic. Endpoints of a
//! participant that announces no node (not ROS 2) have none. Like [`crate::transport::cyclonedds`], this
//! module reads Cyclone through rtlab-bindings' safe wrappers ([`rtlab_bindings::cyclonedds`]'s
//! built-in topic readers). Never prints.

use crate::observe::ros_graph::{self, ParticipantEntitiesInfo, ServiceSide};
use crate::transport::cyclonedds::{CycloneDdsTransport, DdsNetwork};
use crate::transport::{Durability, History, Qos, Reliability, TransportError};
use rtlab_bindings::cyclonedds::{self, Builtin, BuiltinEndpoint, BuiltinReader, Policies};
use rtlab_bindings::Failed;
use rtlab_core::graph::{ros_topic, ros_type, Endpoint, EndpointQos, Graph, Node, NodeTopic};
use std::collections::HashMap;
use std::time::Duration;

/// Name the endpoints and list the nodes from what ROS 2 participants announced (the
/// last sample of each participant still in the graph; others are gone).
pub fn attach_nodes(g: &mut Graph, infos: &[ParticipantEntitiesInfo]) {
    let mut owner: HashMap<String, usize> = HashMap::new();
    let mut nodes: Vec<(Node, Vec<String>)> = Vec::new();
    for info in infos {
        let participant = ros_graph::gid_hex(&info.gid);
        if !g.participants.contains(&participant) {
            continue;
        }
        for n in &info.nodes {
            let gids: Vec<String> =
                n.writers.iter().chain(n.readers.iter()).map(ros_graph::gid_hex).collect();
            for g in &gids {
                owner.entry(g.clone()).or_insert(nodes.len());
            }
            nodes.push((
                Node {
                    full_name: n.full_name(),
                    namespace: n.namespace.clone(),
                    name: n.name.clone(),
                    participant: participant.clone(),
                    publishers: Vec::new(),
                    subscribers: Vec::new(),
                    service_servers: Vec::new(),
                    service_clients: Vec::new(),
                    unseen: 0,
                },
                gids,
            ));
        }
    }
    let mut seen = vec![0usize; nodes.len()];
    for (list, is_writer) in [(&mut g.writers, true), (&mut g.readers, false)] {
        for e in list.iter_mut() {
            let Some(&i) = owner.get(&e.guid) else { continue };
            let node = &mut nodes[i].0;
            e.node = Some(node.full_name.clone());
            seen[i] += 1;
            let (target, entry) = match ros_graph::service_of(&e.topic, is_writer) {
                Some((name, side)) => (
                    match side {
                        ServiceSide::Server => &mut node.service_servers,
                        ServiceSide::Client => &mut node.service_clients,
                    },
                    NodeTopic {
                        name,
                        type_name: ros_graph::service_type(&e.type_name)
                            .unwrap_or_else(|| e.type_name.clone()),
                    },
                ),
                None => {
                    // as `ros2 node info`: a topic outside ROS 2's naming (a node's raw
                    // DDS topic; ros2-client lists ros_discovery_info) is not listed
                    let Some(name) = ros_topic(&e.topic) else { continue };
                    (
                        if is_writer { &mut node.publishers } else { &mut node.subscribers },
                        NodeTopic {
                            name,
                            type_name: ros_type(&e.type_name)
                                .unwrap_or_else(|| e.type_name.clone()),
                        },
                    )
                }
            };
            if !target.contains(&entry) {
                target.push(entry);
            }
        }
    }
    g.nodes = nodes
        .into_iter()
        .zip(seen)
        .map(|((mut n, gids), seen)| {
            n.unseen = gids.len().saturating_sub(seen);
            for l in [
                &mut n.publishers,
                &mut n.subscribers,
                &mut n.service_servers,
                &mut n.service_clients,
            ] {
                l.sort();
            }
            n
        })
        .collect();
    g.nodes.sort_by(|a, b| a.full_name.cmp(&b.full_name));
}

fn hex(g: &[u8; 16]) -> String {
    g.iter().map(|b| format!("{b:02x}")).collect()
}

fn qos_of(p: &Policies) -> EndpointQos {
    EndpointQos {
        reliability: if p.reliable { "reliable" } else { "best-effort" }.into(),
        durability: match p.durability {
            cyclonedds::Durability::TransientLocal => "transient-local",
            cyclonedds::Durability::Transient => "transient",
            cyclonedds::Durability::Persistent => "persistent",
            cyclonedds::Durability::Volatile => "volatile",
        }
        .into(),
        history: if p.keep_all { "keep-all".into() } else { format!("keep-last:{}", p.depth) },
        deadline_ns: p.deadline_ns,
    }
}

/// A failed Cyclone call of discovery, said as the `cyclonedds` transport's.
fn lib(e: Failed) -> TransportError {
    TransportError::Library { transport: "cyclonedds", what: e.what, why: e.why }
}

/// The largest `ros_discovery_info` sample read (a participant with thousands of
/// endpoints); a larger one is skipped with a note.
const MAX_ROS_SAMPLE: usize = 1 << 20;

/// How long after the discovery wait a ROS 2 participant's `ros_discovery_info` may still
/// take to arrive: a transient-local writer sends its last sample to a new reader after a
/// heartbeat, and Fast DDS's heartbeat period is 3 s.
const ROS_LATE_NS: i64 = 4_000_000_000;

/// The `ros_discovery_info` samples a reader takes: the last of each participant (a
/// participant writes its whole state anew at each change), and what could not be read.
struct RosNodes {
    reader: crate::transport::cyclonedds::RawReader,
    buf: Vec<u8>,
    last: Vec<ParticipantEntitiesInfo>,
    failed: usize,
    first_error: Option<String>,
}

impl RosNodes {
    fn new(reader: crate::transport::cyclonedds::RawReader) -> RosNodes {
        RosNodes {
            reader,
            buf: vec![0u8; MAX_ROS_SAMPLE],
            last: Vec::new(),
            failed: 0,
            first_error: None,
        }
    }

    /// Take every sample the reader holds now.
    fn take(&mut self) -> Result<(), TransportError> {
        // bounded: a participant writes one sample per change; a domain that keeps
        // writing cannot hold this loop
        for _ in 0..100_000 {
            let Some((size, got)) = self.reader.try_take_bytes(&mut self.buf)? else { break };
            if size == 0 {
                continue; // a dispose, no data
            }
            let decoded = if got < size {
                Err(format!("a sample of {size} bytes, above the {MAX_ROS_SAMPLE} rtlab reads"))
            } else {
                ros_graph::decode(&self.buf[..got]).map_err(|e| e.to_string())
            };
            match decoded {
                Ok(info) => match self.last.iter_mut().find(|l| l.gid == info.gid) {
                    Some(l) => *l = info,
                    None => self.last.push(info),
                },
                Err(e) => {
                    self.failed += 1;
                    self.first_error.get_or_insert(e);
                }
            }
        }
        Ok(())
    }

    /// Whether a sample came from every participant in `from`.
    fn heard(&self, from: &[&str]) -> bool {
        from.iter().all(|p| self.last.iter().any(|l| ros_graph::gid_hex(&l.gid) == *p))
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if let Some(e) = &self.first_error {
            notes.push(format!(
                "{} {} sample(s) not read, their nodes not shown; the first: {e}",
                self.failed,
                ros_graph::TOPIC
            ));
        }
        notes
    }
}

/// Join `domain` on `net`, wait `wait` for discovery, and read who is there.
pub fn discover(domain: u32, net: &DdsNetwork, wait: Duration) -> Result<Graph, TransportError> {
    let t = CycloneDdsTransport::with_network(domain, net)?;
    let p = t.participant();
    let own = p.guid();
    let mut readers = Vec::new();
    for which in [Builtin::Participants, Builtin::Publications, Builtin::Subscriptions] {
        readers.push(BuiltinReader::create(p, which).map_err(lib)?);
    }
    // ROS 2's nodes: every RMW writes ros_discovery_info reliable and transient-local, so
    // a reader that asks for the same gets each participant's last sample when it matches;
    // keep-all, because the topic is keyless (one instance for all participants)
    let ros = t.raw_reader(
        ros_graph::TOPIC,
        ros_graph::TYPE_NAME,
        true,
        &Qos {
            reliability: Reliability::Reliable,
            history: History::KeepAll,
            durability: Durability::TransientLocal,
        },
    )?;
    let mut ros = RosNodes::new(ros);
    std::thread::sleep(wait);
    let mut g = Graph { domain, ..Default::default() };
    let own_hex = hex(&own);
    readers[0]
        .take_participants(|key| {
            let k = hex(&key);
            if k != own_hex && !g.participants.contains(&k) {
                g.participants.push(k);
            }
        })
        .map_err(lib)?;
    let endpoint = |s: BuiltinEndpoint| Endpoint {
        guid: hex(&s.guid),
        participant: hex(&s.participant),
        topic: s.topic,
        type_name: s.type_name,
        qos: qos_of(&s.policies),
        node: None,
    };
    let mut writers = Vec::new();
    readers[1].take_endpoints(|s| writers.push(endpoint(s))).map_err(lib)?;
    let mut subs = Vec::new();
    readers[2].take_endpoints(|s| subs.push(endpoint(s))).map_err(lib)?;
    // our own built-in readers are readers of the domain too: not the user's graph
    g.writers = writers.into_iter().filter(|e| e.participant != own_hex).collect();
    g.readers = subs.into_iter().filter(|e| e.participant != own_hex).collect();
    g.participants.sort();
    // ROS 2's participants: those with a ros_discovery_info writer; wait (bounded) until
    // each has sent its nodes
    let mut ros_participants: Vec<&str> = g
        .writers
        .iter()
        .filter(|w| w.topic == ros_graph::TOPIC)
        .map(|w| w.participant.as_str())
        .collect();
    ros_participants.sort_unstable();
    ros_participants.dedup();
    ros.take()?;
    let until = rtlab_sys::clock::monotonic_ns() + ROS_LATE_NS;
    while !ros.heard(&ros_participants) && rtlab_sys::clock::monotonic_ns() < until {
        std::thread::sleep(Duration::from_millis(20));
        ros.take()?;
    }
    let mut notes = ros.notes();
    let silent = ros_participants.iter().filter(|p| !ros.heard(&[p])).count();
    if silent > 0 {
        notes.push(format!(
            "{silent} ROS 2 participant(s) sent no {} within {} s of discovery: their endpoints show no node (a longer --wait may help)",
            ros_graph::TOPIC,
            ROS_LATE_NS / 1_000_000_000
        ));
    }
    attach_nodes(&mut g, &ros.last);
    g.notes = notes;
    drop(readers);
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

    fn gid(participant: u8, entity: u8) -> ros_graph::Gid {
        let mut g = [0u8; 16];
        g[0] = participant;
        g[15] = entity;
        g
    }

    fn endpoint(participant: u8, entity: u8, topic: &str, type_name: &str) -> Endpoint {
        Endpoint {
            guid: ros_graph::gid_hex(&gid(participant, entity)),
            participant: ros_graph::gid_hex(&gid(participant, 0xc1)),
            topic: topic.into(),
            type_name: type_name.into(),
            qos: EndpointQos {
                reliability: "reliable".into(),
                durability: "volatile".into(),
                history: "keep-last:1".into(),
                deadline_ns: None,
            },
            node: None,
        }
    }

    /// Participant 1 is ROS 2 (a talker in `/` and a listener in `/robot1`), participant 2
    /// is not (ddsperf); participant 3 announced nodes but is gone from the graph.
    #[test]
    fn endpoints_are_named_with_their_node_and_nodes_listed() {
        const IMG: &str = "sensor_msgs::msg::dds_::CompressedImage_";
        const SRV_REQ: &str = "rcl_interfaces::srv::dds_::GetParameters_Request_";
        const SRV_REP: &str = "rcl_interfaces::srv::dds_::GetParameters_Response_";
        let mut g = Graph {
            domain: 0,
            participants: vec![
                ros_graph::gid_hex(&gid(1, 0xc1)),
                ros_graph::gid_hex(&gid(2, 0xc1)),
            ],
            writers: vec![
                endpoint(1, 0x03, "rt/chatter", IMG),
                endpoint(1, 0x13, "rr/talker/get_parametersReply", SRV_REP),
                endpoint(1, 0x23, "rq/talker/get_parametersRequest", SRV_REQ),
                endpoint(1, 0x33, "ros_discovery_info", ros_graph::TYPE_NAME),
                endpoint(2, 0x03, "DDSPerfRDataKS", "KeyedSeq"),
            ],
            readers: vec![
                endpoint(1, 0x04, "rq/talker/get_parametersRequest", SRV_REQ),
                endpoint(1, 0x14, "rt/chatter", IMG),
                endpoint(1, 0x24, "rr/talker/get_parametersReply", SRV_REP),
                endpoint(2, 0x04, "DDSPerfRDataKS", "KeyedSeq"),
            ],
            ..Default::default()
        };
        let node =
            |ns: &str, name: &str, readers: Vec<_>, writers: Vec<_>| ros_graph::NodeEntitiesInfo {
                namespace: ns.into(),
                name: name.into(),
                readers,
                writers,
            };
        let infos = vec![
            ParticipantEntitiesInfo {
                gid: gid(1, 0xc1),
                gid_size: 16,
                nodes: vec![
                    // the talker also lists an endpoint discovery has not shown (0x43)
                    // and its participant's ros_discovery_info writer, as ros2-client does
                    node(
                        "/",
                        "talker",
                        vec![gid(1, 0x04)],
                        vec![gid(1, 0x03), gid(1, 0x13), gid(1, 0x43), gid(1, 0x33)],
                    ),
                    node(
                        "/robot1",
                        "listener",
                        vec![gid(1, 0x14), gid(1, 0x24)],
                        vec![gid(1, 0x23)],
                    ),
                ],
            },
            ParticipantEntitiesInfo {
                gid: gid(3, 0xc1),
                gid_size: 24,
                nodes: vec![node("/", "gone", vec![], vec![])],
            },
        ];
        attach_nodes(&mut g, &infos);
        let names: Vec<&str> = g.nodes.iter().map(|n| n.full_name.as_str()).collect();
        assert_eq!(names, ["/robot1/listener", "/talker"]);
        let of = |l: &[Endpoint]| l.iter().map(|e| e.node.clone()).collect::<Vec<_>>();
        let talker = Some("/talker".to_string());
        let listener = Some("/robot1/listener".to_string());
        assert_eq!(
            of(&g.writers),
            [talker.clone(), talker.clone(), listener.clone(), talker.clone(), None],
            "ddsperf's writer is no node's"
        );
        assert_eq!(of(&g.readers), [talker, listener.clone(), listener, None]);
        let t = |name: &str, ty: &str| NodeTopic { name: name.into(), type_name: ty.into() };
        let talker = &g.nodes[1];
        assert_eq!((talker.namespace.as_str(), talker.name.as_str()), ("/", "talker"));
        assert_eq!(talker.participant, ros_graph::gid_hex(&gid(1, 0xc1)));
        // ros_discovery_info is not a ROS 2 topic: not listed (ros2 node info does not)
        assert_eq!(talker.publishers, [t("/chatter", "sensor_msgs/msg/CompressedImage")]);
        assert!(talker.subscribers.is_empty());
        // its reader of the request and writer of the reply: one service server
        assert_eq!(
            talker.service_servers,
            [t("/talker/get_parameters", "rcl_interfaces/srv/GetParameters")]
        );
        assert!(talker.service_clients.is_empty());
        assert_eq!(talker.unseen, 1);
        let listener = &g.nodes[0];
        assert_eq!(listener.namespace, "/robot1");
        assert_eq!(listener.subscribers, [t("/chatter", "sensor_msgs/msg/CompressedImage")]);
        assert_eq!(
            listener.service_clients,
            [t("/talker/get_parameters", "rcl_interfaces/srv/GetParameters")]
        );
        assert_eq!(listener.unseen, 0);
        // the JSON: a node on ROS 2 endpoints, none on the others; nodes by name
        let v = serde_json::to_value(&g).unwrap();
        assert_eq!(v["writers"][0]["node"], "/talker");
        assert!(v["writers"][4].get("node").is_none());
        assert_eq!(v["nodes"][1]["publishers"][0]["type"], "sensor_msgs/msg/CompressedImage");
        assert_eq!(v["nodes"][1]["full_name"], "/talker");
        // a graph written before nodes existed still reads
        let old: Graph = serde_json::from_str(
            r#"{"domain":0,"participants":[],"writers":[{"guid":"a","participant":"b","topic":"t","type_name":"T","qos":{"reliability":"reliable","durability":"volatile","history":"keep-last:1"}}],"readers":[]}"#,
        )
        .unwrap();
        assert_eq!(old.writers[0].node, None);
        assert!(old.nodes.is_empty());
    }
}
