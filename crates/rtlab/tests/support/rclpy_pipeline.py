"""A three-node ROS 2 pipeline in rclpy, the application `rtlab trace` traces in the tests:
a source publishes std_msgs/msg/Header on /scan at --rate; a relay takes each and publishes
it unchanged on its output; a sink takes the last topic. Relays chain: /scan -> /filtered
-> /cmd_vel is a source, two relays and a sink.

    rclpy_pipeline.py source --rate HZ --count N [--topic /scan]
    rclpy_pipeline.py relay  --input /scan --output /filtered [--seconds S]
    rclpy_pipeline.py sink   --input /filtered --count N [--seconds S]

Every message is a Header: frame_id = its sequence number, stamp = CLOCK_MONOTONIC right
before the source's publish (one clock on one host). The sink stamps CLOCK_MONOTONIC in its
callback's first line. Prints `{"ready": ROLE}` once its endpoints exist; then one summary:
source `{"published": N}`, relay `{"relayed": N}`, sink `{"received": N, "first_stamp_ns":
.., "e2e_ns": [..]}` (e2e: the sink's stamp - the header's, per message in arrival order,
with `"seqs": [..]`). A source first waits (20 s at most) for a matched subscription and
sends nothing before it. SIGINT ends any role early with its summary. Reliable, keep-last 1000
(10 s at 100 Hz: a node starved on a loaded machine loses nothing), volatile; each node spins a SingleThreadedExecutor.
"""

import argparse
import json
import os
import signal
import sys
import time


def main():
    p = argparse.ArgumentParser(prog="rclpy_pipeline.py")
    p.add_argument("role", choices=["source", "relay", "sink"])
    p.add_argument("--rate", type=float, default=100.0)
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--topic", default="/scan")
    p.add_argument("--input", default="/scan")
    p.add_argument("--output", default="/filtered")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--deadline-ms", type=float, default=0.0, help="the source's Deadline QoS (0: none)")
    a = p.parse_args()

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy, HistoryPolicy, DurabilityPolicy
    from std_msgs.msg import Header

    qos = QoSProfile(
        reliability=ReliabilityPolicy.RELIABLE,
        history=HistoryPolicy.KEEP_LAST,
        depth=1000,
        durability=DurabilityPolicy.VOLATILE,
    )
    if a.deadline_ms > 0:
        from rclpy.duration import Duration

        qos.deadline = Duration(nanoseconds=int(a.deadline_ms * 1e6))
    rclpy.init()
    node = rclpy.create_node(f"pipeline_{a.role}" + ("_" + a.output.strip("/") if a.role == "relay" else ""))
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    stop = {"now": False}

    def on_int(*_):
        stop["now"] = True

    signal.signal(signal.SIGINT, on_int)
    signal.signal(signal.SIGTERM, on_int)
    mono = lambda: time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    out = {}
    if a.role == "source":
        pub = node.create_publisher(Header, a.topic, qos)
        print(json.dumps({"ready": "source"}), flush=True)
        end = time.monotonic() + 20
        while pub.get_subscription_count() == 0 and time.monotonic() < end and not stop["now"]:
            time.sleep(0.01)
        time.sleep(0.5)  # the whole pipeline matched, not only its first hop
        period = 1.0 / a.rate
        nxt = time.monotonic()
        sent = 0
        while sent < a.count and not stop["now"]:
            m = Header()
            m.frame_id = str(sent)
            t = mono()
            m.stamp.sec, m.stamp.nanosec = divmod(t, 1_000_000_000)
            pub.publish(m)
            sent += 1
            nxt += period
            d = nxt - time.monotonic()
            if d > 0:
                time.sleep(d)
        time.sleep(0.5)
        out = {"published": sent}
    elif a.role == "relay":
        pub = node.create_publisher(Header, a.output, qos)
        n = {"relayed": 0}

        def relay(m):
            pub.publish(m)
            n["relayed"] += 1

        node.create_subscription(Header, a.input, relay, qos)
        print(json.dumps({"ready": "relay"}), flush=True)
        end = time.monotonic() + a.seconds
        while not stop["now"] and time.monotonic() < end:
            ex.spin_once(timeout_sec=0.05)
        out = n
    else:
        e2e, seqs = [], []

        def take(m):
            now = mono()
            e2e.append(now - (m.stamp.sec * 1_000_000_000 + m.stamp.nanosec))
            seqs.append(int(m.frame_id))

        node.create_subscription(Header, a.input, take, qos)
        print(json.dumps({"ready": "sink"}), flush=True)
        end = time.monotonic() + a.seconds
        while not stop["now"] and time.monotonic() < end and len(e2e) < a.count:
            ex.spin_once(timeout_sec=0.05)
        out = {"received": len(e2e), "e2e_ns": e2e, "seqs": seqs}
    print(json.dumps(out), flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
