//! `ros2`: through ROS 2 itself — rcl and the installation's RMW — as a ROS 2 node does.
//!
//! A publisher is an rcl publisher of `sensor_msgs/msg/CompressedImage` (its C type support,
//! `rosidl_typesupport_c`, which dispatches to the RMW's), and publishing is `rcl_publish` of
//! a C message made at creation (rtlab's mapping, docs/ros2.md: `header.stamp` = the send
//! stamp, `data` = sequence number + payload). A receiver waits in an rcl wait set
//! (`rcl_wait`) and takes with `rcl_take`: what every ROS 2 executor (rclcpp's, rclpy's)
//! does underneath before it runs a callback. So a sample through `ros2` is S2's "publish
//! call -> the callback's first line" without a client library's executor bookkeeping, and
//! `ros2` against `fastdds` on the same case is what rcl, the RMW and the type support add
//! (the report's "ROS 2 layer" rows).
//!
//! The installation comes from the machine ([`install`]: `--ros2-prefix`,
//! `AMENT_PREFIX_PATH`, `/opt/ros/*`, then the one scripts/setup.sh installs) and is loaded
//! at run time ([`load`]): the rtlab binary does not link ROS 2 and runs where there is
//! none; `ros2` there is one line naming where it looked. One installation and one RMW per
//! process; the RMW's Fast DDS (3.2 in the package registry's ROS 2) and rtlab's `fastdds`
//! (Debian's 2.9) never meet in one process ([`crate::dl::claim_fast_dds`]).
//!
//! Network: ROS 2's own. rtlab sets the discovery range the way it runs every transport:
//! `LOCALHOST` on one host (rtlab's loopback default; `ROS_LOCALHOST_ONLY=1` on Humble),
//! `SUBNET` with `--interface` or a far side (ROS 2's default: multicast discovery), and
//! `--peer` as `ROS_STATIC_PEERS` (Jazzy and later); which interfaces the RMW uses is the
//! RMW's configuration (`FASTDDS_DEFAULT_PROFILES_FILE`, `CYCLONEDDS_URI`, ...), left as the
//! user has it and recorded in the notes. One network configuration per process.
//!
//! Contract as every transport ([`crate::transport`]); rtlab allocates nothing per message:
//! the publisher's message is made at creation (its data sequence sized for the largest
//! message), a take reuses one message (the type support may resize its data sequence:
//! ROS 2's allocation, said in the notes). Nothing here prints; the loaded libraries are
//! called through rtlab-bindings' safe wrappers ([`rtlab_bindings::rcl`]: no `unsafe` here).

pub mod elf;
pub mod install;
pub mod load;

/// rcl's C API as rtlab declares it (rtlab-bindings').
pub use crate::ros2_facts::{Ros2Facts, Ros2Network};
pub use rtlab_bindings::rcl::ffi;

use crate::ros2_facts::Abi;
use crate::transport::*;
use ffi::QosProfile;
use install::Installation;
use rtlab_bindings::rcl::{self, PortSpec, Taken};
use rtlab_bindings::Failed;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

const NAME: &str = "ros2";
/// The largest message offered (S2 sent 16 MB through ROS 2; tested at this size through
/// the probe, tests/ros2.rs).
pub const MAX_MESSAGE: usize = 16 << 20;
/// ROS 2's domain ids (`ROS_DOMAIN_ID`): 0..=232 on every DDS RMW (the RTPS port mapping).
pub const MAX_DOMAIN: u32 = 232;
/// How long a reliable publisher waits for acknowledgements when it is deleted.
const DRAIN_NS: i64 = 2_000_000_000;
/// `header.frame_id` and `format` of the messages rtlab sends.
const TAG: &str = crate::ros_msg::TAG;

fn bad(what: &'static str, why: String) -> TransportError {
    TransportError::Library { transport: NAME, what, why }
}

/// A failed rcl call, said as this transport's.
fn ours(e: Failed) -> TransportError {
    bad(e.what, e.why)
}

/// The environment variables of an RMW's own configuration, recorded when set.
const RMW_ENV: [&str; 8] = [
    "FASTDDS_DEFAULT_PROFILES_FILE",
    "FASTRTPS_DEFAULT_PROFILES_FILE",
    "RMW_FASTRTPS_USE_QOS_FROM_XML",
    "RMW_FASTRTPS_PUBLICATION_MODE",
    "FASTDDS_BUILTIN_TRANSPORTS",
    "CYCLONEDDS_URI",
    "ZENOH_CONFIG_OVERRIDE",
    "ZENOH_SESSION_CONFIG_URI",
];

/// The discovery configuration this process set (one per process).
static NETWORK: Mutex<Option<Ros2Network>> = Mutex::new(None);

/// Set the discovery variables rcl reads at `rcl_init`, once per process.
fn set_network(net: &Ros2Network, abi: Abi) -> Result<(), TransportError> {
    let mut held = NETWORK.lock().unwrap_or_else(|e| e.into_inner());
    let mut net = net.clone();
    // the interface is this process's own business (waited for in `open`), not rcl's
    net.interface = None;
    if let Some(h) = held.as_ref() {
        if *h != net {
            return Err(bad(
                "network",
                format!(
                    "this process already runs ROS 2 with discovery {} {:?}; {} {:?} cannot be set beside it (rcl reads it from the environment: one per process)",
                    h.range, h.static_peers, net.range, net.static_peers
                ),
            ));
        }
        return Ok(());
    }
    if !abi.has_discovery_range() && !net.static_peers.is_empty() {
        return Err(bad(
            "network",
            "--peer: ROS 2 humble has no static peers (ROS_STATIC_PEERS came with Iron); configure them in the RMW (FASTDDS_DEFAULT_PROFILES_FILE, CYCLONEDDS_URI)".into(),
        ));
    }
    // rcl reads these at rcl_init; set before any context exists in this process
    std::env::set_var("ROS_AUTOMATIC_DISCOVERY_RANGE", &net.range);
    std::env::set_var("ROS_LOCALHOST_ONLY", if net.range == "LOCALHOST" { "1" } else { "0" });
    if net.static_peers.is_empty() {
        std::env::remove_var("ROS_STATIC_PEERS");
    } else {
        std::env::set_var("ROS_STATIC_PEERS", net.static_peers.join(";"));
    }
    *held = Some(net);
    Ok(())
}

/// How long a node on a link waits for the link's interface to be running.
pub const LINK_WAIT_NS: i64 = 10_000_000_000;

/// Wait (at most `limit_ns`) until the interface `interface` names (a name, or one of its
/// IPv4 addresses) is running; how long it waited, or the one-line error. Fast DDS 3.2 under
/// rmw_fastrtps_cpp leaves out an interface that is not running when its participant starts,
/// as 2.9 does (seen here: a ros2 pong started right after a veth pair was made never
/// answered). An interface not found here (`all`, a name of another namespace) is not waited
/// for. The waiting itself: [`crate::transport::cyclonedds::wait_running`].
fn wait_running(interface: &str, limit_ns: i64) -> Result<i64, TransportError> {
    let addr: Option<std::net::Ipv4Addr> = interface.parse().ok();
    let names = |n: &str| {
        n == interface || addr.is_some_and(|a| rtlab_sys::net::interface_ipv4(n).contains(&a))
    };
    crate::transport::cyclonedds::wait_running(&names, limit_ns).map_err(|name| {
        bad(
            "interface",
            format!(
                "interface {name} is not running (no carrier: `ip link` shows NO-CARRIER or state DOWN) after {} s: the RMW's DDS leaves out an interface that is not running when its participant starts; bring the link up first",
                limit_ns / 1_000_000_000
            ),
        )
    })
}

/// A ROS 2 node of this process.
pub struct Ros2Transport {
    node: Arc<rcl::Node>,
    loaded: &'static load::Loaded,
    domain: u32,
    net: Ros2Network,
}

static NODES: AtomicU32 = AtomicU32::new(0);

impl Ros2Transport {
    /// A node in `domain` of the installation `inst` (see [`install::find`]), discovering
    /// as `net` says.
    pub fn open(
        inst: &Installation,
        domain: u32,
        net: &Ros2Network,
    ) -> Result<Self, TransportError> {
        if domain > MAX_DOMAIN {
            return Err(bad(
                "domain",
                format!("domain id {domain} above {MAX_DOMAIN} (ROS_DOMAIN_ID)"),
            ));
        }
        set_network(net, inst.abi)?;
        if let Some(i) = &net.interface {
            wait_running(i, LINK_WAIT_NS)?;
        }
        let loaded = load::load(inst).map_err(|e| bad("installation", e))?;
        let name =
            format!("rtlab_{}_{}", std::process::id(), NODES.fetch_add(1, Ordering::Relaxed));
        let node = rcl::Node::open(&loaded.api, domain, &name).map_err(ours)?;
        Ok(Ros2Transport { node: Arc::new(node), loaded, domain, net: net.clone() })
    }

    /// What this node runs on (recorded with results).
    pub fn facts(&self) -> Ros2Facts {
        Ros2Facts::of(&self.loaded.installation, &self.net)
    }

    /// The node's name (`rtlab_<pid>_<n>`, namespace `/`).
    pub fn node_name(&self) -> &str {
        self.node.name()
    }

    /// How a port on `topic` with `qos` and messages up to `max_len` bytes is made.
    fn port<'a>(
        topic: &'a str,
        qos: &'a Qos,
        max_len: usize,
    ) -> PortSpec<'a, impl FnOnce(&mut QosProfile) + 'a> {
        PortSpec {
            topic,
            qos: move |q: &mut QosProfile| native_qos(q, qos),
            tag: TAG,
            data_capacity: max_len - 8,
        }
    }
}

fn native_qos(q: &mut QosProfile, asked: &Qos) {
    let (history, depth) = match asked.history {
        History::KeepLast(n) => (ffi::HISTORY_KEEP_LAST, n as usize),
        History::KeepAll => (ffi::HISTORY_KEEP_ALL, 0),
    };
    q.history = history;
    q.depth = depth;
    q.reliability = match asked.reliability {
        Reliability::Reliable => ffi::RELIABILITY_RELIABLE,
        Reliability::BestEffort => ffi::RELIABILITY_BEST_EFFORT,
    };
    q.durability = match asked.durability {
        Durability::Volatile => ffi::DURABILITY_VOLATILE,
        Durability::TransientLocal => ffi::DURABILITY_TRANSIENT_LOCAL,
    };
}

impl Transport for Ros2Transport {
    fn about(&self) -> About {
        About { name: NAME, max_message: MAX_MESSAGE }
    }
    fn map_qos(&self, qos: &Qos) -> Result<QosMapping, TransportError> {
        Ok(exact_dds_mapping(
            qos,
            &DdsQosNames {
                reliable: "RMW_QOS_POLICY_RELIABILITY_RELIABLE",
                best_effort: "RMW_QOS_POLICY_RELIABILITY_BEST_EFFORT",
                keep_last: "RMW_QOS_POLICY_HISTORY_KEEP_LAST depth {n}",
                keep_all: "RMW_QOS_POLICY_HISTORY_KEEP_ALL",
                volatile: "RMW_QOS_POLICY_DURABILITY_VOLATILE",
                transient_local: "RMW_QOS_POLICY_DURABILITY_TRANSIENT_LOCAL",
            },
        ))
    }
    fn publisher(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Publisher> {
        check_len(NAME, MAX_MESSAGE, max_len)?;
        let drain = (qos.reliability == Reliability::Reliable).then_some(DRAIN_NS);
        let p = rcl::Publisher::create(&self.node, Self::port(topic, qos, max_len), drain);
        Ok(Box::new(Ros2Publisher { p: p.map_err(ours)? }))
    }
    fn subscriber(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Subscriber> {
        check_len(NAME, MAX_MESSAGE, max_len)?;
        let s = rcl::Subscription::create(&self.node, Self::port(topic, qos, max_len));
        Ok(Box::new(Ros2Subscriber { s: s.map_err(ours)? }))
    }
    fn notes(&self) -> Vec<String> {
        let l = self.loaded;
        let i = &l.installation;
        let mut notes = vec![
            format!(
                "ros2: {} from {} (found by {}){}; the RMW says it is {}",
                i.describe(),
                i.prefix.display(),
                i.found_by,
                if i.abi == Abi::Unchecked { ", rcl ABI not checked by rtlab (RTLAB_ROS2_ABI_UNCHECKED)" } else { "" },
                l.identifier
            ),
            format!(
                "ros2: through rcl as a ROS 2 node: rcl_publish of sensor_msgs/msg/CompressedImage (C type support), each receiver waits in an rcl wait set (rcl_wait) and takes with rcl_take, what every executor does underneath; node /{}, domain {}, discovery {}{}",
                self.node.name(),
                self.domain,
                self.net.range,
                if self.net.static_peers.is_empty() { String::new() } else { format!(", static peers {}", self.net.static_peers.join(";")) }
            ),
            "ros2: a take deserializes into one C message kept for the subscriber; the type support frees and allocates its data sequence for each message (ROS 2's allocation, as a C node's; rtlab's side allocates nothing)".into(),
        ];
        let set: Vec<String> = RMW_ENV
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| format!("{k}={v}")))
            .collect();
        if !set.is_empty() {
            notes.push(format!(
                "ros2: the RMW's own configuration from the environment: {}",
                set.join(", ")
            ));
        }
        notes
    }
    fn labels(&self) -> Vec<(&'static str, String)> {
        self.facts().labels()
    }
    fn ros2_facts(&self) -> Option<Ros2Facts> {
        Some(self.facts())
    }
    /// The threads of the middleware under the RMW (Fast DDS's, Cyclone DDS's).
    fn thread_names(&self) -> &'static [&'static str] {
        match self.loaded.installation.middleware.as_ref().map(|m| m.name.as_str()) {
            Some("Fast DDS") => crate::transport::fastdds::THREADS,
            Some("Cyclone DDS") => crate::transport::cyclonedds::THREADS,
            _ => &[],
        }
    }
}

struct Ros2Publisher {
    p: rcl::Publisher,
}

impl Publisher for Ros2Publisher {
    #[inline]
    fn publish(&mut self, seq: u64, stamp_ns: i64, len: usize) -> Result<(), TransportError> {
        let capacity = self.p.capacity();
        if len < HEADER_LEN || len - 8 > capacity {
            return Err(TransportError::MessageTooLarge {
                transport: NAME,
                max: capacity + 8,
                asked: len,
            });
        }
        self.p.publish(seq, stamp_ns, len - 8).map_err(ours)
    }
    fn matched(&self) -> Option<usize> {
        self.p.matched()
    }
    fn wait_acknowledged(&self, timeout_ns: i64) -> Option<bool> {
        self.p.wait_acknowledged(timeout_ns)
    }
}

struct Ros2Subscriber {
    s: rcl::Subscription,
}

impl Subscriber for Ros2Subscriber {
    #[inline]
    fn try_take(&mut self) -> Result<Option<Received>, TransportError> {
        match self.s.take().map_err(ours)? {
            Taken::Message { seq, stamp_ns, data_len } => {
                Ok(Some(Received { seq, stamp_ns, len: data_len + 8 }))
            }
            Taken::Short => Err(TransportError::Malformed {
                transport: NAME,
                why: crate::ros_msg::Malformed::NoSequence.reason(),
            }),
            Taken::Nothing => Ok(None),
        }
    }
    fn wait_take(&mut self, timeout_ns: i64) -> Result<Option<Received>, TransportError> {
        if let Some(r) = self.try_take()? {
            return Ok(Some(r));
        }
        if self.s.wait(timeout_ns).map_err(ours)? {
            self.try_take()
        } else {
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_host_is_localhost_and_a_link_the_subnet() {
        assert_eq!(Ros2Network::of(None, &[]).range, "LOCALHOST");
        assert_eq!(Ros2Network::of(Some("eth0"), &[]).range, "SUBNET");
        let n = Ros2Network::of(None, &["10.0.0.2".into()]);
        assert_eq!((n.range.as_str(), n.static_peers.len()), ("SUBNET", 1));
    }

    #[test]
    fn the_qos_asked_is_written_into_rmw_words() {
        let mut q = QosProfile {
            history: 0,
            depth: 0,
            reliability: 0,
            durability: 0,
            deadline: ffi::RmwTime::default(),
            lifespan: ffi::RmwTime::default(),
            liveliness: 0,
            liveliness_lease_duration: ffi::RmwTime::default(),
            avoid_ros_namespace_conventions: false,
        };
        native_qos(
            &mut q,
            &Qos {
                reliability: Reliability::Reliable,
                history: History::KeepLast(7),
                durability: Durability::TransientLocal,
            },
        );
        assert_eq!((q.history, q.depth, q.reliability, q.durability), (1, 7, 1, 1));
        native_qos(&mut q, &Qos::default());
        assert_eq!((q.history, q.depth, q.reliability, q.durability), (1, 5, 2, 2));
        native_qos(&mut q, &Qos { history: History::KeepAll, ..Qos::default() });
        assert_eq!(q.history, 2);
    }
}
