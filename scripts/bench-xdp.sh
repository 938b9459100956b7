#!/usr/bin/env bash
# BENCHMARKS.md "Socket vs XDP": rtlab's UDP round trip through the kernel's socket path and
# through AF_XDP (`--xdp`, copy mode) on a veth pair between two namespaces, idle and with
# 80 Mbit/s of UDP traffic (iperf3) on the same link, p50 / p99.9 / max in one run; then the
# same link's wire-to-wire span (`--timestamps software`'s ping.wire against an XDP
# reflector that spins) beside the AF_XDP anchor, xdpsock in l2fwd mode (scripts/xdp-anchor.sh).
#
# Usage: bash scripts/bench-xdp.sh [COUNT=10000]
#   env: RTLAB (the binary, default target/release/rtlab), BPF_EXAMPLES_REPO (a clone of
#   xdp-project/bpf-examples for the anchor; without it the anchor rows are skipped, said).
# Needs root, iperf3, and what xdp-anchor.sh needs for the anchor. Makes the namespace pair
# bx-a / bx-b for the run (rtlab netns up) and removes it on exit.
set -euo pipefail

count=${1:-10000}
here=$(cd "$(dirname "$0")/.." && pwd)
rtlab=${RTLAB:-$here/target/release/rtlab}
[ -x "$rtlab" ] || { echo "bench-xdp: error: no rtlab at $rtlab (cargo build --release -p rtlab)" >&2; exit 2; }
command -v iperf3 >/dev/null || { echo "bench-xdp: error: iperf3 is not installed (apt-get install iperf3)" >&2; exit 2; }
name=bx
out=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$rtlab" netns down --name "$name" >/dev/null 2>&1 || true
  rm -rf "$out"
}
trap cleanup EXIT

"$rtlab" netns up --name "$name" --no-ipv6 >/dev/null
a="$name-a" b="$name-b"

stats() { # JSON STREAM -> "p50 p99.9 max count lost" (us)
  python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = next(x for x in d["streams"] if x["name"] == sys.argv[2])["stats"]
us = lambda k: "%.1f" % (s[k] / 1e3) if s.get(k) is not None else "-"
print(us("p50_ns"), us("p99_9_ns"), us("max_ns"), s["count"], s.get("lost", 0))
PY
}

reflector() { # PORT EXTRA... (runs until killed)
  "$rtlab" udp reflect --netns "$b" --bind "198.18.0.2:$1" "${@:2}" -q >/dev/null 2>&1 &
  pids+=($!)
  sleep 1
}

ping_row() { # LABEL PORT STREAM PING-ARGS...
  local j="$out/p.json"
  "$rtlab" udp ping --netns "$a" --to "198.18.0.2:$2" "${@:4}" -q --json "$j" >/dev/null
  read -r p50 p999 max n lost < <(stats "$j" "$3")
  echo "| $1 | $p50 | $p999 | $max | $n | $lost |"
}

traffic() { # start 80 Mbit/s of UDP from a to b for the rest of the run
  ip netns exec "$b" iperf3 -s -p 5201 >/dev/null 2>&1 &
  pids+=($!)
  sleep 0.5
  ip netns exec "$a" iperf3 -c 198.18.0.2 -p 5201 -u -b 80M -l 1200 -t 3600 >/dev/null 2>&1 &
  pids+=($!)
  sleep 1
}

echo "rtlab $("$rtlab" --version | head -1), $(uname -r), $(nproc) CPUs, $(date -u +%FT%TZ), $count per row"
echo
echo "| case | p50 us | p99.9 us | max us | samples | lost |"
echo "|---|---|---|---|---|---|"
reflector 9000
reflector 9001 --xdp
for load in idle 80mbit; do
  [ "$load" = 80mbit ] && traffic
  ping_row "socket, periodic 1 ms, 500 B, $load" 9000 ping --count "$count"
  ping_row "xdp, periodic 1 ms, 500 B, $load" 9001 ping --xdp --count "$count"
  ping_row "socket, pingpong, 64 B, $load" 9000 ping --mode pingpong --payload 64 --count "$count"
  ping_row "xdp, pingpong, 64 B, $load" 9001 ping --xdp --mode pingpong --payload 64 --count "$count"
done
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()

echo
echo "The wire-to-wire span beside the anchor (idle; the reflector spins in both):"
echo
echo "| case | p50 us | p99.9 us | max us | samples | lost |"
echo "|---|---|---|---|---|---|"
# SCHED_OTHER as xdpsock: a spinning SCHED_FIFO thread is throttled 50 ms of every second (sched_rt_runtime_us)
reflector 9002 --xdp --busy-poll 50 --policy other
for size in 64 500; do
  ping_row "rtlab ping.wire (socket ping, xdp reflector busy-poll), $size B" 9002 ping.wire \
    --timestamps software --payload "$size" --count "$count"
done
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()
"$rtlab" netns down --name "$name" >/dev/null
if [ -n "${BPF_EXAMPLES_REPO:-}${BPF_EXAMPLES_DIR:-}" ]; then
  bash "$here/scripts/xdp-anchor.sh" "$count" | sed -n '/^| anchor/,$p'
else
  echo "(anchor skipped: give BPF_EXAMPLES_REPO, a clone of xdp-project/bpf-examples)"
fi
