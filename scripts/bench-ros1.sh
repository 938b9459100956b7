#!/usr/bin/env bash
# ROS 1 (`--transport ros1`: roscpp, TCPROS) beside ROS 2 (`ros2`: rcl and its RMW) and Cyclone
# DDS (`cyclonedds`), in one run: round trips at 100 Hz (a pong process answering), 64 B and
# 64 KiB, reliable, keep-last 100, SCHED_FIFO 80, SECONDS per case; the transports alternate.
# Prints a Markdown table for BENCHMARKS.md.
# Usage: bash scripts/bench-ros1.sh [SECONDS per case, default 20]   (root; RTLAB: the binary,
# a release build; ROS 2 from scripts/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
rtlab=${RTLAB:-./target/release/rtlab}
[ -x "$rtlab" ] || cargo build --release --locked -p rtlab >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for size in 64 64KiB; do
  for t in ros1 ros2 cyclonedds; do
    extra=()
    [ "$t" = ros1 ] && extra=(--tcp-nodelay)
    "$rtlab" pubsub --transport "$t" "${extra[@]}" --mode roundtrip --rate 100hz --payload "$size" \
      --duration "${secs}s" --reliability reliable --history keep-last:100 --policy fifo --priority 80 \
      -q --json "$out/$t.$size.json"
  done
done
python3 - "$out" "$secs" <<'PY'
import json, sys
out, secs = sys.argv[1], sys.argv[2]
print("| payload | transport | round trips | lost | min us | p50 us | p99 us | max us | p50 / cyclonedds | p99 / cyclonedds |")
print("|---|---|---|---|---|---|---|---|---|---|")
for size in ["64", "64KiB"]:
    st = {}
    for t in ["ros1", "ros2", "cyclonedds"]:
        d = json.load(open(f"{out}/{t}.{size}.json"))
        s = next(x for x in d["streams"] if x["metric"] == "rtt")["stats"]
        st[t] = s
    base = st["cyclonedds"]
    for t in ["ros1", "ros2", "cyclonedds"]:
        s = st[t]
        us = lambda k: s[k] / 1000
        r = lambda k: f"{s[k] / base[k]:.2f}" if base[k] else "n/a"
        print(f"| {size} | {t} | {s['count']} | {s['lost']} | {us('min_ns'):.1f} | {us('p50_ns'):.1f} | {us('p99_ns'):.1f} | {us('max_ns'):.1f} | {r('p50_ns')} | {r('p99_ns')} |")
print(f"\n({secs} s per case, round trips at 100 Hz through a pong process, reliable keep-last 100, FIFO 80; ros1 with --tcp-nodelay)")
PY
