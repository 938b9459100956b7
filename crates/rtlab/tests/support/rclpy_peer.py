"""A real ROS 2 node as rtlab's peer in the tests: rclpy (rcl, rmw_fastrtps_cpp, Fast DDS 3.2
from the package registry's wheels, which scripts/setup.sh installs in /opt/rtlab/ros2).

It speaks the stock sensor_msgs/msg/CompressedImage with rtlab's mapping (docs/ros2.md):
header.stamp = send stamp (ROS time: the system clock), data = sequence number (u64, little
endian) + payload; a sequence number with bit 63 set is a warm-up message rtlab does not
measure. The same command line and JSON lines as examples/ros2_peer.rs (the RustDDS node):

    rclpy_peer.py pub  --domain D --topic T --rate HZ --count N [--size BYTES] [--warmup S]
    rclpy_peer.py pong --domain D --topic T [--seconds S]      (T_ping -> T_pong, unchanged)
    rclpy_peer.py sub  --domain D --topic T --count N [--seconds S]
    rclpy_peer.py ping --domain D --topic T --rate HZ --count N [--size BYTES]
                                                               (T_ping out, T_pong back)
    common: --reliability reliable|best-effort (reliable), --depth N (keep-last, 10),
            --node NAME (the node's name; default rclpy_<role>)

Prints `{"ready": ROLE}` once its endpoints exist, then one summary line: pub
`{"published":N,"matched":bool}` (N: the measured messages it sent), pong `{"echoed":N}`, sub `{"received":..,"first_seq":..,
"last_seq":..,"in_order":..,"duplicates":..,"warmup":..,"max_stamp_age_ns":..}`, ping
`{"matched":bool,"warm":bool,"sent":N,"received":..,"first_seq":..,"last_seq":..,"in_order":..,
"duplicates":..,"stamps_echoed":bool,"warmup_sent":..,"warmup_back":..}`. A publisher
first waits (20 s at most) for a matched subscription, then sends warm-up messages for
`--warmup` seconds (default 1). A ping waits (20 s at most) until its ping publisher and its
pong subscription are matched, then sends warm-up pings (sequence bit 63) every 20 ms until
one sent after the first echo came back too (rtlab's two-stage warm-up, docs/pubsub.md; 20 s
at most), then `--count` pings on the grid of `--rate`, stamped with the system clock, and
waits 2 s for the last echoes; `stamps_echoed`: every echo carried the stamp its ping was
sent with. SIGINT ends any role early with its summary. Exit 2 on bad arguments.
"""

import argparse
import json
import os
import struct
import sys
import time

WARMUP_BIT = 1 << 63


def args():
    p = argparse.ArgumentParser(prog="rclpy_peer.py")
    p.add_argument("role", choices=["pub", "pong", "sub", "ping"])
    p.add_argument("--domain", type=int, required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--rate", type=float, default=50.0)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--reliability", choices=["reliable", "best-effort"], default="reliable")
    p.add_argument("--depth", type=int, default=10)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--node", default=None)
    return p.parse_args()


def main():
    a = args()
    # the domain through the environment, as a ROS 2 user sets it
    os.environ["ROS_DOMAIN_ID"] = str(a.domain)
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import CompressedImage

    rclpy.init()
    node = Node(a.node or f"rclpy_{a.role}")
    qos = QoSProfile(
        depth=a.depth,
        reliability=ReliabilityPolicy.RELIABLE
        if a.reliability == "reliable"
        else ReliabilityPolicy.BEST_EFFORT,
    )
    out = lambda d: print(json.dumps(d), flush=True)

    if a.role == "pong":
        pub = node.create_publisher(CompressedImage, a.topic + "_pong", qos)
        echoed = [0]

        def echo(m):
            pub.publish(m)
            echoed[0] += 1

        node.create_subscription(CompressedImage, a.topic + "_ping", echo, qos)
        out({"ready": "pong"})
        end = time.monotonic() + a.seconds
        try:
            while time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.1)
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
        out({"echoed": echoed[0]})
    elif a.role == "pub":
        pub = node.create_publisher(CompressedImage, a.topic, qos)
        out({"ready": "pub"})
        payload = bytes(max(a.size - 16, 0))

        def send(seq):
            m = CompressedImage()
            m.header.frame_id = "rclpy"
            m.format = "rclpy"
            now = time.time_ns()
            m.header.stamp.sec = now // 1_000_000_000
            m.header.stamp.nanosec = now % 1_000_000_000
            m.data = struct.pack("<Q", seq) + payload
            pub.publish(m)

        matched = False
        published = 0
        try:
            end = time.monotonic() + 20
            while pub.get_subscription_count() == 0 and time.monotonic() < end and rclpy.ok():
                time.sleep(0.01)
            matched = rclpy.ok() and pub.get_subscription_count() > 0
            # a signal shuts rclpy down (its handlers): then stop, and say what was sent
            w = 0
            end = time.monotonic() + a.warmup
            while time.monotonic() < end and rclpy.ok():
                send(WARMUP_BIT | w)
                w += 1
                time.sleep(0.02)
            period = 1.0 / a.rate
            t0 = time.monotonic()
            for seq in range(a.count):
                slot = t0 + seq * period
                d = slot - time.monotonic()
                if d > 0:
                    time.sleep(d)
                if not rclpy.ok():
                    break
                send(seq)
                published += 1
            # let a reliable writer's last samples be acknowledged before the node goes
            if rclpy.ok():
                time.sleep(1.0)
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
        out({"published": published, "matched": matched})
    elif a.role == "sub":
        st = {"received": 0, "first_seq": None, "last_seq": None, "in_order": True,
              "duplicates": 0, "warmup": 0, "max_stamp_age_ns": 0}
        seen = set()

        def take(m):
            data = bytes(m.data)
            if len(data) < 8:
                return
            (seq,) = struct.unpack("<Q", data[:8])
            if seq & WARMUP_BIT:
                st["warmup"] += 1
                return
            if seq in seen:
                st["duplicates"] += 1
                return
            seen.add(seq)
            if st["last_seq"] is not None and seq < st["last_seq"]:
                st["in_order"] = False
            st["received"] += 1
            if st["first_seq"] is None:
                st["first_seq"] = seq
            st["last_seq"] = max(seq, st["last_seq"] or 0)
            age = time.time_ns() - (m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec)
            if abs(age) > abs(st["max_stamp_age_ns"]):
                st["max_stamp_age_ns"] = age

        node.create_subscription(CompressedImage, a.topic, take, qos)
        out({"ready": "sub"})
        end = time.monotonic() + a.seconds
        try:
            while time.monotonic() < end and (
                st["last_seq"] is None or st["last_seq"] < a.count - 1
            ):
                rclpy.spin_once(node, timeout_sec=0.1)
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
        out(st)
    else:
        ping(a, node, qos, CompressedImage, out, ExternalShutdownException)
    node.destroy_node()
    # a signal already shut rclpy down
    rclpy.try_shutdown()


def ping(a, node, qos, CompressedImage, out, ExternalShutdownException):
    """The ping role: T_ping out, T_pong back; counts what came back (see the module doc)."""
    import rclpy

    pub = node.create_publisher(CompressedImage, a.topic + "_ping", qos)
    st = {"matched": False, "warm": False, "sent": 0, "received": 0, "first_seq": None,
          "last_seq": None, "in_order": True, "duplicates": 0, "stamps_echoed": True,
          "warmup_sent": 0, "warmup_back": 0}
    sent_stamp = {}
    seen = set()
    # warm-ups sent when the first one came back; warm once a later one comes back too
    warm = {"first_at": None, "current": False}

    def back(m):
        data = bytes(m.data)
        if len(data) < 8:
            return
        (seq,) = struct.unpack("<Q", data[:8])
        stamp = m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec
        if seq & WARMUP_BIT:
            st["warmup_back"] += 1
            if warm["first_at"] is None:
                warm["first_at"] = st["warmup_sent"]
            elif seq & ~WARMUP_BIT >= warm["first_at"]:
                warm["current"] = True
            return
        if seq in seen:
            st["duplicates"] += 1
            return
        seen.add(seq)
        if st["last_seq"] is not None and seq < st["last_seq"]:
            st["in_order"] = False
        st["received"] += 1
        if st["first_seq"] is None:
            st["first_seq"] = seq
        st["last_seq"] = max(seq, st["last_seq"] or 0)
        if sent_stamp.get(seq) != stamp:
            st["stamps_echoed"] = False

    sub = node.create_subscription(CompressedImage, a.topic + "_pong", back, qos)
    out({"ready": "ping"})
    payload = bytes(max(a.size - 16, 0))

    def send(seq):
        m = CompressedImage()
        m.header.frame_id = "rclpy"
        m.format = "rclpy"
        now = time.time_ns()
        m.header.stamp.sec = now // 1_000_000_000
        m.header.stamp.nanosec = now % 1_000_000_000
        m.data = struct.pack("<Q", seq) + payload
        pub.publish(m)
        return now

    def spin_until(t):
        while True:
            d = t - time.monotonic()
            if d <= 0:
                return
            rclpy.spin_once(node, timeout_sec=d)

    try:
        end = time.monotonic() + 20
        while time.monotonic() < end and (
            pub.get_subscription_count() == 0 or sub.get_publisher_count() == 0
        ):
            spin_until(time.monotonic() + 0.01)
        st["matched"] = pub.get_subscription_count() > 0 and sub.get_publisher_count() > 0
        end = time.monotonic() + 20
        while not warm["current"] and time.monotonic() < end:
            send(WARMUP_BIT | st["warmup_sent"])
            st["warmup_sent"] += 1
            spin_until(time.monotonic() + 0.02)
        st["warm"] = warm["current"]
        if st["warm"]:
            period = 1.0 / a.rate
            t0 = time.monotonic() + 0.01
            for seq in range(a.count):
                spin_until(t0 + seq * period)
                sent_stamp[seq] = send(seq)
                st["sent"] += 1
            end = time.monotonic() + 2
            while st["received"] < st["sent"] and time.monotonic() < end:
                spin_until(min(end, time.monotonic() + 0.05))
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    out(st)


if __name__ == "__main__":
    sys.exit(main())
