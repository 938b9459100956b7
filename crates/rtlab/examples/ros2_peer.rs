//! A ROS 2 node that is not rtlab: the independent peer of rtlab's tests, built on the
//! `ros2-client` crate (RustDDS: its own DDS and ROS 2 stack, not Cyclone). It speaks the
//! stock `sensor_msgs/msg/CompressedImage` with rtlab's mapping (docs/ros2.md): header.stamp
//! = send stamp (CLOCK_REALTIME, as ROS time is), data = sequence number (u64, little endian)
//! + payload.
//!
//! ```text
//! ros2_peer pub  --domain D --topic T --rate HZ --count N [--size BYTES] [--warmup S]
//! ros2_peer pong --domain D --topic T [--seconds S]      (T_ping -> T_pong, unchanged)
//! ros2_peer sub  --domain D --topic T --count N [--seconds S]
//! ```
//! A publisher first waits (20 s at most) for a matched subscription, then sends warm-up
//! messages (sequence with bit 63 set, which rtlab does not measure) for `--warmup` seconds:
//! RustDDS announces its endpoints to a participant it meets after their creation at about
//! one a second, so the far reader may learn of this writer seconds after the writer
//! matched it.
//! Common: `--reliability reliable|best-effort` (default reliable), `--depth N` (keep-last,
//! default 10, as ROS 2's default profile), volatile.
//! RustDDS discovers by multicast on the non-loopback interfaces: run it in a network
//! namespace with a veth (the tests do), rtlab beside with `--interface`.
//!
//! Prints JSON lines on stdout: `{"ready":...}` once its endpoints exist, then one summary
//! line: pub `{"published":N,"first_stamp_ns":..,"last_stamp_ns":..}`, sub `{"received":..,
//! "first_seq":..,"last_seq":..,"in_order":..,"duplicates":..,"warmup":..,"max_stamp_age_ns":..}`,
//! pong `{"echoed":..}`. Exit 2 on bad arguments, 1 on a DDS failure.

use ros2_client::rustdds::{self, policy, QosPolicies, QosPolicyBuilder};
use ros2_client::{
    Context, ContextOptions, MessageTypeName, Name, Node, NodeName, NodeOptions, Publisher,
};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Time {
    sec: i32,
    nanosec: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Header {
    stamp: Time,
    frame_id: String,
}

/// sensor_msgs/msg/CompressedImage.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct CompressedImage {
    header: Header,
    format: String,
    data: Vec<u8>,
}

const WARMUP_BIT: u64 = 1 << 63;

struct Args {
    role: String,
    domain: u16,
    topic: String,
    rate_hz: f64,
    count: u64,
    size: usize,
    seconds: f64,
    reliable: bool,
    depth: i32,
    warmup: f64,
}

fn usage(why: &str) -> ! {
    eprintln!("ros2_peer: {why} (usage: ros2_peer pub|pong|sub --domain D --topic T ...)");
    std::process::exit(2)
}

fn number<T: std::str::FromStr>(flag: &str, v: &str) -> T {
    v.parse().unwrap_or_else(|_| usage(&format!("{flag} {v}: not a number")))
}

fn parse() -> Args {
    let mut it = std::env::args().skip(1);
    let role = it.next().unwrap_or_else(|| usage("no role"));
    if !["pub", "pong", "sub"].contains(&role.as_str()) {
        usage(&format!("role '{role}'"));
    }
    let mut a = Args {
        role,
        domain: 0,
        topic: "rtlab".into(),
        rate_hz: 100.0,
        count: 100,
        size: 64,
        seconds: 30.0,
        reliable: true,
        depth: 10,
        warmup: 0.0,
    };
    while let Some(flag) = it.next() {
        let v = it.next().unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        match flag.as_str() {
            "--domain" => a.domain = number(&flag, &v),
            "--topic" => a.topic = v.clone(),
            "--rate" => a.rate_hz = number(&flag, &v),
            "--count" => a.count = number(&flag, &v),
            "--size" => a.size = number(&flag, &v),
            "--seconds" => a.seconds = number(&flag, &v),
            "--reliability" => a.reliable = v == "reliable",
            "--depth" => a.depth = number(&flag, &v),
            "--warmup" => a.warmup = number(&flag, &v),
            _ => usage(&format!("unknown flag {flag}")),
        }
    }
    a
}

fn qos(reliable: bool, depth: i32) -> QosPolicies {
    let reliability = if reliable {
        policy::Reliability::Reliable { max_blocking_time: rustdds::Duration::from_millis(100) }
    } else {
        policy::Reliability::BestEffort
    };
    QosPolicyBuilder::new()
        .history(policy::History::KeepLast { depth })
        .reliability(reliability)
        .durability(policy::Durability::Volatile)
        .build()
}

fn realtime_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

fn fail(what: &str, e: impl std::fmt::Debug) -> ! {
    eprintln!("ros2_peer: {what}: {e:?}");
    std::process::exit(1)
}

fn topic(node: &mut Node, name: &str, q: &QosPolicies) -> ros2_client::rustdds::Topic {
    let n = Name::new("/", name).unwrap_or_else(|e| fail("topic name", e));
    node.create_topic(&n, MessageTypeName::new("sensor_msgs", "CompressedImage"), q)
        .unwrap_or_else(|e| fail("create topic", e))
}

/// Message `seq` of `size` bytes in rtlab's terms (data = sequence + `size - 16` zeros).
fn message(seq: u64, stamp: i64, size: usize) -> CompressedImage {
    let mut data = vec![0u8; size.max(16) - 8];
    data[..8].copy_from_slice(&seq.to_le_bytes());
    CompressedImage {
        header: Header {
            stamp: Time {
                sec: stamp.div_euclid(1_000_000_000) as i32,
                nanosec: stamp.rem_euclid(1_000_000_000) as u32,
            },
            frame_id: "ros2_peer".into(),
        },
        format: "rtlab".into(),
        data,
    }
}

/// Wait until a subscription of another node matches `p` (at most `limit`).
fn wait_for_subscriber(p: &Publisher<CompressedImage>, node: &Node, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if p.get_subscription_count(node) > 0 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Start the node's spinner (it keeps the node's view of the graph current), after the
/// node's own endpoints exist: RustDDS announces endpoints to a new participant about one a
/// second, in creation order, and the spinner adds a dozen parameter services; created
/// first, the measured endpoints are found within seconds instead of after all of those.
fn spin(node: &mut Node) {
    let spinner = node.spinner().unwrap_or_else(|e| fail("spinner", e));
    std::thread::spawn(move || futures::executor::block_on(spinner.spin()));
}

fn main() {
    let a = parse();
    let ctx = Context::with_options(ContextOptions::new().domain_id(a.domain))
        .unwrap_or_else(|e| fail("context", e));
    let mut node = ctx
        .new_node(
            NodeName::new("/", &format!("rtlab_peer_{}", a.role))
                .unwrap_or_else(|e| fail("node name", e)),
            NodeOptions::new().enable_rosout(false),
        )
        .unwrap_or_else(|e| fail("node", e));
    let q = qos(a.reliable, a.depth);
    let end = Instant::now() + Duration::from_secs_f64(a.seconds);
    match a.role.as_str() {
        "pub" => {
            let t = topic(&mut node, &a.topic, &q);
            let p = node
                .create_publisher::<CompressedImage>(&t, None)
                .unwrap_or_else(|e| fail("publisher", e));
            spin(&mut node);
            println!("{{\"ready\":\"pub\"}}");
            let matched = wait_for_subscriber(&p, &node, Duration::from_secs(20));
            let period = Duration::from_secs_f64(1.0 / a.rate_hz);
            let warmup = (a.warmup * a.rate_hz) as u64;
            let t0 = Instant::now();
            let (mut first, mut last) = (0i64, 0i64);
            for k in 0..warmup + a.count {
                let due = t0 + period * k as u32;
                if let Some(d) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(d);
                }
                let seq = if k < warmup { WARMUP_BIT | k } else { k - warmup };
                let stamp = realtime_ns();
                p.publish(message(seq, stamp, a.size)).unwrap_or_else(|e| fail("publish", e));
                if k == warmup {
                    first = stamp;
                }
                last = stamp;
            }
            // reliable: let the last messages be acknowledged before the node goes
            std::thread::sleep(Duration::from_millis(500));
            println!(
                "{{\"published\":{},\"matched\":{matched},\"first_stamp_ns\":{first},\"last_stamp_ns\":{last}}}",
                a.count
            );
        }
        "pong" => {
            let ti = topic(&mut node, &format!("{}_ping", a.topic), &q);
            let to = topic(&mut node, &format!("{}_pong", a.topic), &q);
            let s = node
                .create_subscription::<CompressedImage>(&ti, None)
                .unwrap_or_else(|e| fail("subscription", e));
            let p = node
                .create_publisher::<CompressedImage>(&to, None)
                .unwrap_or_else(|e| fail("publisher", e));
            spin(&mut node);
            println!("{{\"ready\":\"pong\"}}");
            let mut echoed = 0u64;
            while Instant::now() < end {
                match s.take() {
                    Ok(Some((m, _))) => {
                        p.publish(m).unwrap_or_else(|e| fail("publish", e));
                        echoed += 1;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_micros(200)),
                    Err(e) => fail("take", e),
                }
            }
            println!("{{\"echoed\":{echoed}}}");
        }
        _ => {
            let t = topic(&mut node, &a.topic, &q);
            let s = node
                .create_subscription::<CompressedImage>(&t, None)
                .unwrap_or_else(|e| fail("subscription", e));
            spin(&mut node);
            println!("{{\"ready\":\"sub\"}}");
            let (mut received, mut warmup, mut duplicates) = (0u64, 0u64, 0u64);
            let (mut first, mut last): (Option<u64>, Option<u64>) = (None, None);
            let (mut in_order, mut max_age) = (true, i64::MIN);
            while Instant::now() < end && last.is_none_or(|l| l + 1 < a.count) {
                match s.take() {
                    Ok(Some((m, _))) => {
                        let now = realtime_ns();
                        let Some(seq) =
                            m.data.get(..8).map(|b| u64::from_le_bytes(b.try_into().unwrap()))
                        else {
                            continue;
                        };
                        if seq & WARMUP_BIT != 0 {
                            warmup += 1;
                            continue;
                        }
                        match last {
                            Some(l) if seq == l => duplicates += 1,
                            Some(l) if seq < l => in_order = false,
                            _ => {}
                        }
                        if last.is_some_and(|l| seq <= l) {
                            continue;
                        }
                        first.get_or_insert(seq);
                        last = Some(seq);
                        received += 1;
                        let stamp = m.header.stamp.sec as i64 * 1_000_000_000
                            + m.header.stamp.nanosec as i64;
                        max_age = max_age.max(now - stamp);
                    }
                    Ok(None) => std::thread::sleep(Duration::from_micros(200)),
                    Err(e) => fail("take", e),
                }
            }
            let opt = |v: Option<u64>| v.map_or("null".to_string(), |v| v.to_string());
            println!(
                "{{\"received\":{received},\"first_seq\":{},\"last_seq\":{},\"in_order\":{in_order},\"duplicates\":{duplicates},\"warmup\":{warmup},\"max_stamp_age_ns\":{}}}",
                opt(first),
                opt(last),
                if received > 0 { max_age.to_string() } else { "null".into() }
            );
        }
    }
}
