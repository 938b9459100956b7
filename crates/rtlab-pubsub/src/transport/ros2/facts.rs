//! What a run through `ros2` used, recorded with its results: the installation, its RMW and
//! middleware, and how its nodes discover each other ([`Ros2Network`]).

use super::install::{Abi, Installation};
use serde::{Deserialize, Serialize};

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
