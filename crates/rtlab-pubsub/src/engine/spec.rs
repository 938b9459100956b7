//! The transports a case runs over, as the CLI names them ([`TransportKind`]), and how a
//! process opens one ([`TransportSpec`], serialized to role processes as it is).
//!
//! Plain data and one call into [`crate::open`]: nothing here starts a thread or a process.

use crate::transport::{Transport, TransportError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The transports, named as on the CLI. `dds` is read as `cyclonedds` (its name before
/// there were three DDS implementations; results stored then say `dds`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    Intra,
    Udp,
    Shm,
    Zenoh,
    #[serde(rename = "cyclonedds", alias = "dds")]
    CycloneDds,
    #[serde(rename = "fastdds")]
    FastDds,
    #[serde(rename = "rustdds")]
    RustDds,
    /// ROS 2 itself: rcl and the installation's RMW ([`crate::transport::ros2`]).
    #[serde(rename = "ros2")]
    Ros2,
    /// ROS 1 itself: roscpp ([`crate::transport::ros1`]).
    #[serde(rename = "ros1")]
    Ros1,
}

impl TransportKind {
    pub const ALL: [TransportKind; 9] = [
        TransportKind::Intra,
        TransportKind::Udp,
        TransportKind::Shm,
        TransportKind::Zenoh,
        TransportKind::CycloneDds,
        TransportKind::FastDds,
        TransportKind::RustDds,
        TransportKind::Ros2,
        TransportKind::Ros1,
    ];
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Intra => "intra",
            TransportKind::Udp => "udp",
            TransportKind::Shm => "shm",
            TransportKind::Zenoh => "zenoh",
            TransportKind::CycloneDds => "cyclonedds",
            TransportKind::FastDds => "fastdds",
            TransportKind::RustDds => "rustdds",
            TransportKind::Ros2 => "ros2",
            TransportKind::Ros1 => "ros1",
        }
    }
    pub fn parse(s: &str) -> Option<TransportKind> {
        let s = if s == "dds" { "cyclonedds" } else { s };
        Self::ALL.into_iter().find(|k| k.name() == s)
    }
    /// A DDS implementation, or ROS 2 itself (`ros2`, whose DDS RMWs speak the same RTPS
    /// and ROS 2 naming): they speak to each other, and to ROS 2 nodes; they take a domain,
    /// an interface and peers.
    pub fn is_dds(self) -> bool {
        matches!(
            self,
            TransportKind::CycloneDds
                | TransportKind::FastDds
                | TransportKind::RustDds
                | TransportKind::Ros2
        )
    }
    /// Where a callback echo ([`crate::transport::EchoStyle::Callback`]) answers through this
    /// transport, in words (recorded with the results); None: the library offers no callback
    /// rtlab can answer from (iceoryx2 0.10's subscriber has none; rustdds delivers through
    /// polling or async streams; rcl has no executor, and rtlab drives no rclcpp; intra, udp
    /// are rtlab's own threads).
    pub fn callback_echo(self) -> Option<&'static str> {
        match self {
            TransportKind::Zenoh => Some(
                "the pong answers from its Zenoh subscriber's callback, in Zenoh's receive task: \
                 the ping's payload put back as received (no copy, no channel: the history QoS has no queue there)",
            ),
            TransportKind::CycloneDds => Some(
                "the pong answers from its reader's data-available listener, in Cyclone DDS's delivery thread \
                 (Cyclone runs one reader's listener one call at a time)",
            ),
            TransportKind::FastDds => Some(
                "the pong answers from its DataReaderListener::on_data_available, in Fast DDS's receive thread",
            ),
            _ => None,
        }
    }
}

/// How a process opens its transport (serialized to role processes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransportSpec {
    pub kind: TransportKind,
    /// zenoh: endpoints this process listens on (e.g. `tcp/127.0.0.1:7447`).
    pub listen: Vec<String>,
    /// zenoh: endpoints this process connects to.
    pub connect: Vec<String>,
    /// dds: the domain id (None: [`crate::default_dds_domain`]).
    #[serde(default)]
    pub domain: Option<u32>,
    /// dds: the network interface (name like `eth0`, or one of its addresses) discovery and
    /// data use; None: loopback only (`lo`). udp: the address this process binds (None:
    /// 127.0.0.1).
    #[serde(default)]
    pub interface: Option<String>,
    /// dds: unicast discovery peers (addresses); none with an `interface`: multicast
    /// discovery on it. udp: the other process's rendezvous address (`IP:PORT`).
    #[serde(default)]
    pub peers: Vec<String>,
    /// zenoh: `peer` (default) or `client` (connect to a router or peer only).
    #[serde(default)]
    pub zenoh_mode: Option<String>,
    /// shm: every receiver busy-polls (`--wait busy-poll`): no wake-up notification per
    /// message and no listener, as iceoryx2's own benchmark.
    #[serde(default)]
    pub busy_poll: bool,
    /// fastdds: its shared-memory transport (default, off, or another segment size).
    #[serde(default)]
    pub fastdds_shm: crate::transport::fastdds::Shm,
    /// shm: the subscribers a topic's iceoryx2 service is made for (one publisher each);
    /// None: room for any run by hand (2 publishers, 16 subscribers). Every process of a
    /// run gives the same, or the service does not open. Set for the role processes only,
    /// and never written when None: a result's `config.probe.transport` is as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shm_subscribers: Option<usize>,
    /// fastdds: which Fast DDS library (Debian's 2.9, or the ROS 2 installation's).
    #[serde(default)]
    pub fastdds_lib: crate::transport::fastdds::FastDdsLib,
    /// ros2: the installation (`--ros2-prefix`; None: found as [`crate::transport::ros2::install`]
    /// says). The probe resolves it once, so that its role processes load the same one.
    #[serde(default)]
    pub ros2_prefix: Option<String>,
    /// ros2: the RMW (`--rmw`; None: `RMW_IMPLEMENTATION`, else the installation's default).
    #[serde(default)]
    pub rmw: Option<String>,
    /// ros2: how the probe found `ros2_prefix` when it resolved it (recorded as found).
    #[serde(default)]
    pub ros2_found_by: Option<String>,
    /// ros1: the master (None: the user's `ROS_MASTER_URI`, else one rtlab starts); the
    /// probe fills it for its role processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ros1_master: Option<String>,
    /// ros1: subscribers ask TCP_NODELAY of their publishers (`--tcp-nodelay`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tcp_nodelay: bool,
    /// ros1: best-effort subscribers ask for UDPROS first (`--udpros`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub udpros: bool,
}

impl TransportSpec {
    pub fn new(kind: TransportKind) -> Self {
        TransportSpec {
            kind,
            listen: Vec::new(),
            connect: Vec::new(),
            domain: None,
            interface: None,
            peers: Vec::new(),
            zenoh_mode: None,
            busy_poll: false,
            fastdds_shm: crate::transport::fastdds::Shm::Default,
            shm_subscribers: None,
            fastdds_lib: crate::transport::fastdds::FastDdsLib::Debian,
            ros2_prefix: None,
            rmw: None,
            ros2_found_by: None,
            ros1_master: None,
            tcp_nodelay: false,
            udpros: false,
        }
    }
}

/// Open a transport in this process.
pub fn open_transport(spec: &TransportSpec) -> Result<Arc<dyn Transport>, TransportError> {
    crate::open(spec)
}

/// The DDS implementations, as the CLI names them.
pub fn dds_names() -> String {
    let names: Vec<&str> =
        TransportKind::ALL.iter().filter(|k| k.is_dds()).map(|k| k.name()).collect();
    names.join(", ")
}
