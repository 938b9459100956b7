"""A closed-loop round trip between two rclpy nodes: the anchor of `rtlab pubsub --transport
ros2` in scripts/bench-ros2.sh (same RMW, same message, same QoS, the client library on top).

    python ros2-rclpy-pingpong.py pong --domain D --topic T [--seconds S]
    python ros2-rclpy-pingpong.py ping --domain D --topic T --size BYTES --count N [--warmup N]

The ping stamps CLOCK_MONOTONIC right before `publish`, the pong republishes the message from
its subscription callback, the ping stamps in its callback's first line (S2's definition):
sample = pong received - ping sent, one clock, never halved. Closed loop: the next ping when
the pong is in (or 500 ms passed: lost). sensor_msgs/msg/CompressedImage, reliable keep-last 1,
volatile, as rtlab's rows of the same script. Both nodes spin a SingleThreadedExecutor
(`rclpy.spin_once`). The ping prints one JSON line: count, lost, mean, p50, p99, p99.9, max (ns).
"""

import argparse
import json
import os
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["ping", "pong"])
    p.add_argument("--domain", type=int, required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--seconds", type=float, default=120.0)
    a = p.parse_args()
    os.environ["ROS_DOMAIN_ID"] = str(a.domain)
    import rclpy
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import CompressedImage

    rclpy.init()
    node = Node("rclpy_" + a.role)
    qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
    if a.role == "pong":
        pub = node.create_publisher(CompressedImage, a.topic + "_pong", qos)
        node.create_subscription(CompressedImage, a.topic + "_ping", pub.publish, qos)
        end = time.monotonic() + a.seconds
        try:
            while time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.1)
        except (KeyboardInterrupt, Exception):
            pass  # ended by the benchmark (SIGINT, or rclpy's shutdown on a signal)
        return
    got = {}

    def on_pong(m):
        t = time.monotonic_ns()
        got[int.from_bytes(bytes(m.data[:8]), "little")] = t

    pub = node.create_publisher(CompressedImage, a.topic + "_ping", qos)
    node.create_subscription(CompressedImage, a.topic + "_pong", on_pong, qos)
    end = time.monotonic() + 30
    while pub.get_subscription_count() == 0 and time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.01)
    msg = CompressedImage()
    msg.format = "rclpy"
    payload = bytes(max(a.size - 16, 0))
    samples, lost = [], 0
    for seq in range(a.warmup + a.count):
        msg.data = seq.to_bytes(8, "little") + payload
        sent = time.monotonic_ns()
        pub.publish(msg)
        deadline = sent + 500_000_000
        while seq not in got and time.monotonic_ns() < deadline:
            rclpy.spin_once(node, timeout_sec=0.5)
        if seq < a.warmup:
            continue
        if seq in got:
            samples.append(got[seq] - sent)
        else:
            lost += 1
    samples.sort()
    # nearest rank, as rtlab's statistics (docs/words.md): the sample of rank ceil(q*n)
    q = lambda f: samples[max(1, -(-int(f * 1000) * len(samples) // 1000)) - 1] if samples else None
    print(json.dumps({
        "count": len(samples), "lost": lost,
        "mean_ns": sum(samples) // len(samples) if samples else None,
        "p50_ns": q(0.5), "p99_ns": q(0.99), "p99_9_ns": q(0.999),
        "max_ns": samples[-1] if samples else None,
    }), flush=True)


if __name__ == "__main__":
    main()
