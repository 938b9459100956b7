"""A real ROS 1 node as rtlab's peer in the tests: rospy (Debian's python3-rospy 1.15, run by
/usr/bin/python3), on the master ROS_MASTER_URI names, at ROS_IP.

It speaks rtlab's ros1 mapping (docs/pubsub.md): std_msgs/UInt8MultiArray whose data is
rtlab's message: the sequence number (u64, little endian), the send stamp (i64 ns,
CLOCK_REALTIME: rtlab's roles by hand stamp and compare on the wall clock), then the payload; a sequence number with bit 63 set is a warm-up message
rtlab does not measure.

    rospy_peer.py pub  --topic T --rate HZ --count N [--size BYTES]
    rospy_peer.py sub  --topic T --count N [--seconds S] [--idle S]
    rospy_peer.py pong --topic T [--seconds S] [--idle S]  (T_ping -> T_pong, unchanged)

Prints `{"ready": ROLE}` once its topics are advertised and subscribed, then one summary
line: pub `{"published":N,"matched":bool}`, sub `{"received":..,"first_seq":..,"last_seq":..,
"in_order":..,"duplicates":..,"warmup":..,"max_stamp_age_ns":..}`, pong `{"echoed":N}`. A
publisher first waits (20 s at most) for a subscriber, then sends warm-up messages for 1 s,
then `--count` messages on the grid of `--rate`, then waits 1 s. SIGINT ends any role early
with its summary. A pong ends by itself `--idle` seconds (3) after the last ping, once a
measured one (not a warm-up) came; a sub after its last sequence number (`--count` - 1), or
`--idle` seconds after the last measured message (a publisher that skipped its last slots
sends fewer).
"""

import argparse
import json
import struct
import time

WARMUP_BIT = 1 << 63
END_SEQ = (1 << 64) - 1


def main():
    p = argparse.ArgumentParser(prog="rospy_peer.py")
    p.add_argument("role", choices=["pub", "sub", "pong"])
    p.add_argument("--topic", required=True)
    p.add_argument("--rate", type=float, default=50.0)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--idle", type=float, default=3.0)
    a = p.parse_args()
    import rospy
    from std_msgs.msg import UInt8MultiArray

    rospy.init_node(f"rospy_{a.role}", anonymous=True, disable_signals=True)
    out = lambda d: print(json.dumps(d), flush=True)
    now = time.time_ns
    try:
        if a.role == "pub":
            pub = rospy.Publisher(a.topic, UInt8MultiArray, queue_size=100)
            out({"ready": "pub"})
            payload = bytes(max(a.size - 16, 0))
            send = lambda seq: pub.publish(
                UInt8MultiArray(data=struct.pack("<Qq", seq, now()) + payload))
            st = {"published": 0, "matched": False}
            try:
                end = time.monotonic() + 20
                while pub.get_num_connections() == 0 and time.monotonic() < end:
                    time.sleep(0.01)
                st["matched"] = pub.get_num_connections() > 0
                end, w = time.monotonic() + 1.0, 0
                while time.monotonic() < end:
                    send(WARMUP_BIT | w)
                    w += 1
                    time.sleep(0.02)
                t0 = time.monotonic()
                for seq in range(a.count):
                    d = t0 + seq / a.rate - time.monotonic()
                    if d > 0:
                        time.sleep(d)
                    send(seq)
                    st["published"] += 1
                time.sleep(1.0)
            except KeyboardInterrupt:
                pass
            out(st)
        elif a.role == "sub":
            st = {"received": 0, "first_seq": None, "last_seq": None, "in_order": True,
                  "duplicates": 0, "warmup": 0, "max_stamp_age_ns": 0}
            seen, last = set(), [time.monotonic()]

            def take(m):
                data = bytes(m.data)
                if len(data) < 16:
                    return
                seq, stamp = struct.unpack("<Qq", data[:16])
                if seq == END_SEQ:
                    return
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
                st["max_stamp_age_ns"] = max(st["max_stamp_age_ns"], now() - stamp)
                last[0] = time.monotonic()

            rospy.Subscriber(a.topic, UInt8MultiArray, take, queue_size=None)
            out({"ready": "sub"})
            end = time.monotonic() + a.seconds
            try:
                while time.monotonic() < end and (
                        st["last_seq"] is None or st["last_seq"] < a.count - 1) and not (
                        st["last_seq"] is not None and time.monotonic() - last[0] > a.idle):
                    time.sleep(0.05)
            except KeyboardInterrupt:
                pass
            out(st)
        else:
            pub = rospy.Publisher(a.topic + "_pong", UInt8MultiArray, queue_size=100)
            echoed, measured, last = [0], [0], [time.monotonic()]

            def echo(m):
                pub.publish(m)
                echoed[0] += 1
                last[0] = time.monotonic()
                data = bytes(m.data)
                if len(data) >= 8 and not struct.unpack("<Q", data[:8])[0] & WARMUP_BIT:
                    measured[0] += 1

            rospy.Subscriber(a.topic + "_ping", UInt8MultiArray, echo, queue_size=None)
            out({"ready": "pong"})
            end = time.monotonic() + a.seconds
            try:
                while time.monotonic() < end and not (
                        measured[0] > 0 and time.monotonic() - last[0] > a.idle):
                    time.sleep(0.05)
            except KeyboardInterrupt:
                pass
            out({"echoed": echoed[0], "measured": measured[0]})
    finally:
        rospy.signal_shutdown("done")


if __name__ == "__main__":
    main()
