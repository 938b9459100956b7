//! A ROS 2 node of the tests in a network namespace: an rclpy script (rcl, rmw_fastrtps_cpp,
//! Fast DDS 3.2 from the venv scripts/setup.sh installs in /opt/rtlab/ros2; usually
//! tests/support/rclpy_peer.py) or the RustDDS `ros2-client` node (examples/ros2_peer.rs).
//! Its stdout lines are read by a thread (a node that prints nothing never blocks a test);
//! it is stopped on drop (SIGINT, then SIGKILL). Used by rclpy_cli.rs, observe_ros2_cli.rs,
//! ros1_cli.rs, and (the pipeline of tests/support/rclpy_pipeline.py) by trace_cli.rs,
//! trace_far.rs and monitor_cli.rs.
#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The ROS 2 venv's python (scripts/setup.sh).
pub const PYTHON: &str = "/opt/rtlab/ros2/bin/python";

/// True (with the reason printed) when not root: namespaces need it. The ROS 2 venv is a
/// dependency of the tests (scripts/setup.sh): its absence is a failure, not a skip.
pub fn skip() -> bool {
    if !crate::common::is_root() {
        rtlab_sys::test_skip::skipped(format_args!("network namespaces need root"));
        return true;
    }
    assert!(
        Path::new(PYTHON).is_file(),
        "{PYTHON} missing: scripts/setup.sh installs ROS 2 (rclpy) there"
    );
    false
}

/// tests/support/rclpy_pipeline.py: a source, relay and sink of rclpy nodes.
pub fn pipeline_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/rclpy_pipeline.py")
}

/// A node process, its stdout lines on a channel.
pub struct Node {
    pub child: Child,
    pub lines: mpsc::Receiver<String>,
}

impl Node {
    /// `program args` in namespace `ns` (ROS_DOMAIN_ID unset: the node's own default, 0).
    pub fn spawn(ns: &str, program: &Path, args: &[&str]) -> Node {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]).arg(program).args(args).env_remove("ROS_DOMAIN_ID");
        Node::start(c, &format!("{} {args:?}", program.display()))
    }

    fn start(mut c: Command, what: &str) -> Node {
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {what}: {e}"));
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Node { child, lines }
    }

    /// A node of the pipeline (`source`, `relay` or `sink` and its arguments) on ROS domain
    /// `domain`, in namespace `ns` (None: here), without waiting for anything; its pid is
    /// the node's (`ip netns exec` execs it).
    pub fn pipeline(ns: Option<&str>, domain: &str, args: &[&str]) -> Node {
        let mut c = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, PYTHON]);
                c
            }
            None => Command::new(PYTHON),
        };
        c.arg(pipeline_script()).args(args).env("ROS_DOMAIN_ID", domain);
        Node::start(c, &format!("rclpy_pipeline.py {args:?}"))
    }

    /// `python args` (a script and its arguments) in `ns`, without waiting for anything.
    pub fn python(ns: &str, args: &[&str]) -> Node {
        Node::spawn(ns, Path::new(PYTHON), args)
    }

    /// Wait (30 s at most) for the node's `{"ready": ...}` line.
    pub fn ready(self, what: &str) -> Node {
        let first = self.lines.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        assert!(first.contains("\"ready\""), "{what} not ready: '{first}'");
        self
    }

    /// rclpy_peer.py in `ns`, once it said `ready`.
    pub fn rclpy(ns: &str, args: &[&str]) -> Node {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/rclpy_peer.py");
        let mut a = vec![script.to_str().unwrap()];
        a.extend_from_slice(args);
        Node::python(ns, &a).ready(&format!("rclpy_peer.py {args:?}"))
    }

    /// The RustDDS ros2-client node (examples/ros2_peer.rs, built by `cargo test`) in `ns`,
    /// once it said `ready`.
    pub fn rustdds(ns: &str, args: &[&str]) -> Node {
        let rtlab = PathBuf::from(env!("CARGO_BIN_EXE_rtlab"));
        let p = rtlab.parent().unwrap().join("examples").join("ros2_peer");
        assert!(p.is_file(), "{} missing: `cargo test` builds the examples", p.display());
        Node::spawn(ns, &p, args).ready(&format!("ros2_peer {args:?}"))
    }

    /// Its summary line, then its exit: once it ends by itself (within `limit`), else after
    /// a SIGINT (rclpy_peer.py prints what it has).
    pub fn summary(mut self, limit: Duration) -> Value {
        let line = match self.lines.recv_timeout(limit) {
            Ok(l) => l,
            Err(_) => {
                let pid = self.child.id().to_string();
                let _ = Command::new("kill").args(["-INT", &pid]).status();
                self.lines.recv_timeout(Duration::from_secs(10)).unwrap_or_default()
            }
        };
        let end = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().unwrap().is_none() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("the node's summary: {e}: '{line}'"))
    }
}

impl Drop for Node {
    /// SIGINT first, so that the node shuts down and its Fast DDS removes its shared-memory
    /// files (a node killed outright leaves its /dev/shm/fastdds_* segments behind: seen here,
    /// hundreds after repeated runs); SIGKILL if it is still there after 5 s.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let pid = self.child.id().to_string();
            let _ = Command::new("kill").args(["-INT", &pid]).status();
            let end = Instant::now() + Duration::from_secs(5);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
