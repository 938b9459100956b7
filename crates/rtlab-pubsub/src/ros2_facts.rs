//! What a run through `ros2` used, recorded with its results: the installation, its RMW and
//! middleware, its rcl ABI, and how its nodes discover each other ([`Ros2Network`]).
//!
//! Contract: data only, importing no transport: the transports' contract
//! ([`crate::transport::Transport::ros2_facts`]) and the engine name it; the `ros2`
//! transport fills it ([`Ros2Facts::of`], beside the installation it reads).

use serde::{Deserialize, Serialize};

/// The rcl ABIs whose structure layouts and function signatures rtlab's declarations
/// (`super::ffi`) were checked against: the headers of each, and a test that compiles
/// against the installed headers (tests/ros2.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Abi {
    /// rcl 5.3 (Humble Hawksbill, 2022-2027).
    Humble,
    /// rcl 9.2 (Jazzy Jalisco, 2024-2029).
    Jazzy,
    /// rcl 10.x (Kilted Kaiju, 2025-2026, and Rolling after it).
    Kilted,
    /// Another rcl, tried because the user said so (`RTLAB_ROS2_ABI_UNCHECKED=1`).
    Unchecked,
}

impl Abi {
    /// The ABI of an rcl version (`5.3.7`), or None when rtlab has not checked it.
    pub fn of_rcl(version: &str) -> Option<Abi> {
        let mut it = version.split('.').map(|p| p.parse::<u32>().ok());
        match (it.next().flatten(), it.next().flatten()) {
            (Some(5), Some(_)) => Some(Abi::Humble),
            (Some(9), Some(_)) => Some(Abi::Jazzy),
            (Some(10), Some(_)) => Some(Abi::Kilted),
            _ => None,
        }
    }
    /// The distribution an rcl version was released in (when `ROS_DISTRO` does not say).
    pub fn distro_of_rcl(version: &str) -> Option<&'static str> {
        let mut it = version.split('.').map(|p| p.parse::<u32>().ok());
        match (it.next().flatten(), it.next().flatten()) {
            (Some(5), Some(3)) => Some("humble"),
            (Some(6), Some(0)) => Some("iron"),
            (Some(9), Some(2)) => Some("jazzy"),
            (Some(10), Some(1)) => Some("kilted"),
            _ => None,
        }
    }
    /// Humble has no discovery range (`ROS_LOCALHOST_ONLY` instead) and no static peers.
    pub fn has_discovery_range(self) -> bool {
        self != Abi::Humble
    }
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
    /// The labels of streams through it (`rmw`, `ros_distro`).
    pub fn labels(&self) -> Vec<(&'static str, String)> {
        vec![("rmw", self.rmw.clone()), ("ros_distro", self.distro.clone())]
    }
}
