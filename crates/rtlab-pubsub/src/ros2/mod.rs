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
//! ROS 2's allocation, said in the notes). Nothing here prints; `unsafe` only around calls
//! into the loaded libraries, each with its `// SAFETY:`.
#![allow(unsafe_code)]

pub mod elf;
pub mod ffi;
pub mod install;
pub mod load;

use crate::transport::*;
use ffi::{CompressedImage, Opaque, PortOptions, QosProfile, RET_OK, RET_TAKE_FAILED, RET_TIMEOUT};
use install::{Abi, Installation};
use serde::{Deserialize, Serialize};
use std::ffi::{c_void, CString};
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

/// How ROS 2 discovers its peers here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ros2Network {
    /// `LOCALHOST` (one host) or `SUBNET` (a link).
    pub range: String,
    /// `ROS_STATIC_PEERS`.
    pub static_peers: Vec<String>,
    /// The link's interface (a name or one of its addresses), when one was given: the node
    /// starts once it is running.
    #[serde(default)]
    pub interface: Option<String>,
}

impl Ros2Network {
    /// From the transport's network fields: none = one host; an interface (or a far link)
    /// = the subnet; peers = static peers.
    pub fn of(interface: Option<&str>, peers: &[String]) -> Ros2Network {
        let range = if interface.is_none() && peers.is_empty() { "LOCALHOST" } else { "SUBNET" };
        Ros2Network {
            range: range.into(),
            static_peers: peers.to_vec(),
            interface: interface.map(String::from),
        }
    }
}

/// What a run through `ros2` used, recorded with its results (`config.ros2`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ros2Facts {
    /// `humble`, `jazzy`, `kilted`...
    pub distro: String,
    pub rcl_version: String,
    pub rmw: String,
    pub rmw_version: Option<String>,
    /// The middleware under the RMW (`Fast DDS`, `Cyclone DDS`, `Zenoh`...) and its version.
    pub middleware: Option<String>,
    pub middleware_version: Option<String>,
    pub prefix: String,
    pub found_by: String,
    pub abi: Abi,
    pub discovery: Ros2Network,
}

impl Ros2Facts {
    /// An installation and the discovery a node of it uses.
    pub fn of(i: &Installation, net: &Ros2Network) -> Ros2Facts {
        Ros2Facts {
            distro: i.distro.clone(),
            rcl_version: i.rcl_version.clone(),
            rmw: i.rmw.clone(),
            rmw_version: i.rmw_version.clone(),
            middleware: i.middleware.as_ref().map(|m| m.name.clone()),
            middleware_version: i.middleware.as_ref().and_then(|m| m.version.clone()),
            prefix: i.prefix.display().to_string(),
            found_by: i.found_by.clone(),
            abi: i.abi,
            discovery: net.clone(),
        }
    }
    /// The labels of streams through it (`rmw`, `ros_distro`).
    pub fn labels(&self) -> Vec<(&'static str, String)> {
        vec![("rmw", self.rmw.clone()), ("ros_distro", self.distro.clone())]
    }
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
/// for. The waiting itself: [`crate::dds::wait_running`].
fn wait_running(interface: &str, limit_ns: i64) -> Result<i64, TransportError> {
    let addr: Option<std::net::Ipv4Addr> = interface.parse().ok();
    let names = |n: &str| {
        n == interface || addr.is_some_and(|a| rtlab_sys::net::interface_ipv4(n).contains(&a))
    };
    crate::dds::wait_running(&names, limit_ns).map_err(|name| {
        bad(
            "interface",
            format!(
                "interface {name} is not running (no carrier: `ip link` shows NO-CARRIER or state DOWN) after {} s: the RMW's DDS leaves out an interface that is not running when its participant starts; bring the link up first",
                limit_ns / 1_000_000_000
            ),
        )
    })
}

/// rcl's context and node, shared by the transport and its ports; finalized last.
struct NodeBox {
    api: &'static ffi::Api,
    init_options: Box<ffi::InitOptions>,
    context: Box<ffi::Context>,
    node: Box<ffi::Node>,
    /// rcl's creation and destruction of entities on one node are not thread-safe.
    lock: Mutex<()>,
    name: String,
}

// SAFETY: the boxes are only touched through rcl calls made under `lock` (creation and
// destruction) or on a port's own handle; rcl_publish/rcl_take on distinct ports are
// thread-safe (rcl's documentation).
unsafe impl Send for NodeBox {}
// SAFETY: as above.
unsafe impl Sync for NodeBox {}

impl Drop for NodeBox {
    fn drop(&mut self) {
        let a = self.api;
        // SAFETY: made by rcl_node_init / rcl_init / rcl_init_options_init in `open`, finalized
        // once, after every port (ports hold an Arc to this box).
        unsafe {
            (a.node_fini)(self.node.ptr());
            (a.shutdown)(self.context.ptr());
            (a.context_fini)(self.context.ptr());
            (a.init_options_fini)(self.init_options.ptr());
        }
    }
}

/// A ROS 2 node of this process.
pub struct Ros2Transport {
    node: Arc<NodeBox>,
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
        let api = &loaded.api;
        let name =
            format!("rtlab_{}_{}", std::process::id(), NODES.fetch_add(1, Ordering::Relaxed));
        let cname = CString::new(name.clone()).expect("no NUL in a node name");
        let mut init_options = ffi::InitOptions::zeroed();
        let mut context = ffi::Context::zeroed();
        let mut node = ffi::Node::zeroed();
        // SAFETY: zeroed handles as rcl's zero-initializers make them; each pointer is a live
        // Box; the allocator is rcutils' default by value; failures leave nothing to finalize
        // but what was initialized, finalized here in reverse.
        unsafe {
            let alloc = (api.get_default_allocator)();
            if (api.init_options_init)(init_options.ptr(), alloc) != RET_OK {
                return Err(bad("init", api.last_error()));
            }
            if (api.init_options_set_domain_id)(init_options.ptr(), domain as usize) != RET_OK {
                let e = api.last_error();
                (api.init_options_fini)(init_options.ptr());
                return Err(bad("domain", e));
            }
            if (api.init)(0, std::ptr::null(), init_options.ptr(), context.ptr()) != RET_OK {
                let e = api.last_error();
                (api.init_options_fini)(init_options.ptr());
                return Err(bad("rcl_init", e));
            }
            let options = (api.node_get_default_options)();
            let ns = c"/";
            if (api.node_init)(node.ptr(), cname.as_ptr(), ns.as_ptr(), context.ptr(), &options)
                != RET_OK
            {
                let e = api.last_error();
                (api.shutdown)(context.ptr());
                (api.context_fini)(context.ptr());
                (api.init_options_fini)(init_options.ptr());
                return Err(bad("node", e));
            }
        }
        Ok(Ros2Transport {
            node: Arc::new(NodeBox {
                api,
                init_options,
                context,
                node,
                lock: Mutex::new(()),
                name,
            }),
            loaded,
            domain,
            net: net.clone(),
        })
    }

    /// What this node runs on (recorded with results).
    pub fn facts(&self) -> Ros2Facts {
        Ros2Facts::of(&self.loaded.installation, &self.net)
    }

    /// The node's name (`rtlab_<pid>_<n>`, namespace `/`).
    pub fn node_name(&self) -> &str {
        &self.node.name
    }

    fn topic(topic: &str) -> Result<CString, TransportError> {
        CString::new(topic).map_err(|_| bad("topic", format!("{topic:?} has a NUL byte")))
    }

    fn options(&self, publisher: bool, qos: &Qos) -> PortOptions {
        let api = self.node.api;
        // SAFETY: rcl's default options by value (see ffi: larger than any distribution's).
        let mut o = unsafe {
            if publisher {
                (api.publisher_get_default_options)()
            } else {
                (api.subscription_get_default_options)()
            }
        };
        native_qos(&mut o.qos, qos);
        o
    }

    /// A C message for this transport's publishers and subscribers.
    fn message(&self, data_capacity: usize) -> Result<Box<CompressedImage>, TransportError> {
        let api = self.node.api;
        // SAFETY: zeroed bytes are what the generated __init starts from (it initializes every
        // member); the Box keeps the address stable for rcl's use; strings and sequence are
        // assigned through rosidl's own functions.
        unsafe {
            let mut m: Box<CompressedImage> = Box::new(std::mem::zeroed());
            if !(api.message_init)(&mut *m) {
                return Err(bad(
                    "message",
                    "sensor_msgs__msg__CompressedImage__init failed".into(),
                ));
            }
            let tag = CString::new(TAG).expect("no NUL");
            let ok = (api.string_assign)(&mut m.header.frame_id, tag.as_ptr())
                && (api.string_assign)(&mut m.format, tag.as_ptr());
            (api.u8_sequence_fini)(&mut m.data);
            if !ok || !(api.u8_sequence_init)(&mut m.data, data_capacity) {
                (api.message_fini)(&mut *m);
                return Err(bad(
                    "message",
                    format!("no memory for a message of {data_capacity} data bytes"),
                ));
            }
            Ok(m)
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
    fn name(&self) -> &'static str {
        NAME
    }
    fn max_message(&self) -> usize {
        MAX_MESSAGE
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
    fn publisher(
        &self,
        topic: &str,
        qos: &Qos,
        max_len: usize,
    ) -> Result<Box<dyn Publisher>, TransportError> {
        check_len(NAME, MAX_MESSAGE, max_len)?;
        let name = Self::topic(topic)?;
        let options = self.options(true, qos);
        let msg = self.message(max_len - 8)?;
        let mut handle = ffi::Port::zeroed();
        let n = &self.node;
        let _g = n.lock.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: a zeroed publisher, the live node, the type support's static handle, a
        // NUL-terminated topic and options made by rcl; rcl copies what it keeps.
        let rc = unsafe {
            let ts = (n.api.type_support)();
            (n.api.publisher_init)(handle.ptr(), node_ptr(n), ts, name.as_ptr(), &options)
        };
        if rc != RET_OK {
            let e = n.api.last_error();
            drop(Message { api: n.api, msg });
            return Err(bad("publisher", format!("{topic}: {e}")));
        }
        Ok(Box::new(Ros2Publisher {
            node: n.clone(),
            handle,
            msg: Message { api: n.api, msg },
            reliable: qos.reliability == Reliability::Reliable,
        }))
    }
    fn subscriber(
        &self,
        topic: &str,
        qos: &Qos,
        max_len: usize,
    ) -> Result<Box<dyn Subscriber>, TransportError> {
        check_len(NAME, MAX_MESSAGE, max_len)?;
        let name = Self::topic(topic)?;
        let options = self.options(false, qos);
        let msg = self.message(max_len - 8)?;
        let mut handle = ffi::Port::zeroed();
        let mut wait_set = ffi::WaitSet::zeroed();
        let n = &self.node;
        let _g = n.lock.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: as the publisher; the wait set is zeroed, sized for one subscription, on
        // the node's context, with rcutils' default allocator.
        unsafe {
            let ts = (n.api.type_support)();
            if (n.api.subscription_init)(handle.ptr(), node_ptr(n), ts, name.as_ptr(), &options)
                != RET_OK
            {
                let e = n.api.last_error();
                drop(Message { api: n.api, msg });
                return Err(bad("subscription", format!("{topic}: {e}")));
            }
            let alloc = (n.api.get_default_allocator)();
            if (n.api.wait_set_init)(wait_set.ptr(), 1, 0, 0, 0, 0, 0, context_ptr(n), alloc)
                != RET_OK
            {
                let e = n.api.last_error();
                (n.api.subscription_fini)(handle.ptr(), node_ptr(n));
                drop(Message { api: n.api, msg });
                return Err(bad("wait set", e));
            }
        }
        Ok(Box::new(Ros2Subscriber {
            node: n.clone(),
            handle,
            wait_set,
            msg: Message { api: n.api, msg },
        }))
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
                self.node.name,
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
}

fn node_ptr(n: &NodeBox) -> *mut c_void {
    &*n.node as *const Opaque<2> as *mut c_void
}
fn context_ptr(n: &NodeBox) -> *mut c_void {
    &*n.context as *const Opaque<3> as *mut c_void
}

/// A C message, finalized on drop.
struct Message {
    api: &'static ffi::Api,
    msg: Box<CompressedImage>,
}

impl Drop for Message {
    fn drop(&mut self) {
        // SAFETY: initialized by `message`, finalized once.
        unsafe { (self.api.message_fini)(&mut *self.msg) };
    }
}

struct Ros2Publisher {
    node: Arc<NodeBox>,
    handle: Box<ffi::Port>,
    msg: Message,
    reliable: bool,
}

// SAFETY: the handle and message are used by the one thread that owns this publisher at a
// time; rcl_publish is thread-safe across publishers.
unsafe impl Send for Ros2Publisher {}

impl Publisher for Ros2Publisher {
    #[inline]
    fn publish(&mut self, seq: u64, stamp_ns: i64, len: usize) -> Result<(), TransportError> {
        let m = &mut *self.msg.msg;
        if len < HEADER_LEN || len - 8 > m.data.capacity {
            return Err(TransportError::MessageTooLarge {
                transport: NAME,
                max: m.data.capacity + 8,
                asked: len,
            });
        }
        m.header.stamp.sec = stamp_ns.div_euclid(1_000_000_000) as i32;
        m.header.stamp.nanosec = stamp_ns.rem_euclid(1_000_000_000) as u32;
        m.data.size = len - 8;
        // SAFETY: data holds `capacity` >= len - 8 >= 8 bytes (made by u8_sequence_init);
        // rcl_publish reads the message during the call only.
        let rc = unsafe {
            std::ptr::copy_nonoverlapping(seq.to_le_bytes().as_ptr(), m.data.data, 8);
            (self.node.api.publish)(
                self.handle.ptr(),
                m as *const CompressedImage as *const c_void,
                std::ptr::null_mut(),
            )
        };
        if rc != RET_OK {
            return Err(bad("publish", self.node.api.last_error()));
        }
        Ok(())
    }
    fn matched(&self) -> Option<usize> {
        let mut n = 0usize;
        // SAFETY: a live publisher; n is a valid out-pointer.
        let rc = unsafe {
            (self.node.api.publisher_get_subscription_count)(
                &*self.handle as *const ffi::Port as *const c_void,
                &mut n,
            )
        };
        (rc == RET_OK).then_some(n)
    }
    fn wait_acknowledged(&self, timeout_ns: i64) -> Option<bool> {
        let api = self.node.api;
        // SAFETY: a live publisher; rcl_publisher_wait_for_all_acked blocks at most the time.
        let rc = unsafe {
            (api.publisher_wait_for_all_acked)(
                &*self.handle as *const ffi::Port as *const c_void,
                timeout_ns.max(0),
            )
        };
        match rc {
            RET_OK => Some(true),
            RET_TIMEOUT => Some(false),
            // an RMW without acknowledgements (RCL_RET_UNSUPPORTED) or an error: cannot tell
            _ => {
                api.last_error();
                None
            }
        }
    }
}

impl Drop for Ros2Publisher {
    fn drop(&mut self) {
        let n = &self.node;
        // SAFETY: a publisher made by publisher_init on this node, finalized once; a reliable
        // one first waits (bounded) for its last messages to be acknowledged.
        unsafe {
            if self.reliable {
                (n.api.publisher_wait_for_all_acked)(self.handle.ptr(), DRAIN_NS);
                n.api.last_error();
            }
            let _g = n.lock.lock().unwrap_or_else(|e| e.into_inner());
            (n.api.publisher_fini)(self.handle.ptr(), node_ptr(n));
        }
    }
}

struct Ros2Subscriber {
    node: Arc<NodeBox>,
    handle: Box<ffi::Port>,
    wait_set: Box<ffi::WaitSet>,
    msg: Message,
}

// SAFETY: as the publisher: one thread at a time uses the handle, wait set and message.
unsafe impl Send for Ros2Subscriber {}

impl Subscriber for Ros2Subscriber {
    #[inline]
    fn try_take(&mut self) -> Result<Option<Received>, TransportError> {
        let api = self.node.api;
        let m = &mut *self.msg.msg;
        // SAFETY: a live subscription and a message of its type; rcl writes the message
        // during the call only; message info and allocation may be null (rcl's contract).
        let rc = unsafe {
            (api.take)(
                self.handle.ptr(),
                m as *mut CompressedImage as *mut c_void,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        match rc {
            RET_OK => {
                if m.data.size < 8 || m.data.data.is_null() {
                    return Err(TransportError::Malformed {
                        transport: NAME,
                        why: crate::ros_msg::Malformed::NoSequence.reason(),
                    });
                }
                let mut seq = [0u8; 8];
                // SAFETY: data holds size >= 8 bytes (checked above).
                unsafe { std::ptr::copy_nonoverlapping(m.data.data, seq.as_mut_ptr(), 8) };
                let s = &m.header.stamp;
                Ok(Some(Received {
                    seq: u64::from_le_bytes(seq),
                    stamp_ns: s.sec as i64 * 1_000_000_000 + s.nanosec as i64,
                    len: m.data.size + 8,
                }))
            }
            RET_TAKE_FAILED => Ok(None),
            _ => Err(bad("take", api.last_error())),
        }
    }
    fn wait_take(&mut self, timeout_ns: i64) -> Result<Option<Received>, TransportError> {
        if let Some(r) = self.try_take()? {
            return Ok(Some(r));
        }
        let api = self.node.api;
        let ws = self.wait_set.ptr();
        // SAFETY: the wait set was made for one subscription on this node's context; the
        // subscription outlives the call.
        let rc = unsafe {
            (api.wait_set_clear)(ws);
            (api.wait_set_add_subscription)(ws, self.handle.ptr(), std::ptr::null_mut());
            (api.wait)(ws, timeout_ns.max(0))
        };
        match rc {
            RET_OK => self.try_take(),
            RET_TIMEOUT => Ok(None),
            _ => Err(bad("wait", api.last_error())),
        }
    }
}

impl Drop for Ros2Subscriber {
    fn drop(&mut self) {
        let n = &self.node;
        let _g = n.lock.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: made in `subscriber`, finalized once, the wait set before its subscription.
        unsafe {
            (n.api.wait_set_fini)(self.wait_set.ptr());
            (n.api.subscription_fini)(self.handle.ptr(), node_ptr(n));
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
