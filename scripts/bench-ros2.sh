#!/usr/bin/env bash
# What ROS 2's layers cost (issue 24), in one run: the same closed-loop round trip (reliable,
# keep-last 1, blocking waits, two processes on one host) at 64 B and 64 KiB through
#   ros2    rtlab through rcl and the installation's RMW (rcl_publish, rcl wait set, rcl_take);
#   fastdds3 rtlab driving the RMW's own Fast DDS directly (--fastdds-lib ros2: the same
#           library, so ros2 - fastdds3 is rcl + the RMW + the type support alone);
#   fastdds rtlab driving Debian's Fast DDS 2.9 (another version: for the record);
#   rclpy   two rclpy nodes of the same installation and RMW (scripts/ros2-rclpy-pingpong.py):
#           rcl with a client library's executor and Python on top, the anchor.
# Each row: p50 / p99 / p99.9 / mean in us and the round trips counted; then ros2 - fastdds3
# and rclpy - ros2 per figure. Rounds alternate the three so that the machine's drift hits all.
# Usage: bash scripts/bench-ros2.sh [ROUNDS=2] [COUNT=5000]   (RTLAB=..., ROS2_PYTHON=...)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
count=${2:-5000}
rtlab=${RTLAB:-./target/release/rtlab}
python=${ROS2_PYTHON:-/opt/rtlab/ros2/bin/python}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
[ -x "$rtlab" ] || cargo build --release --locked -p rtlab
[ -x "$python" ] || { echo "bench-ros2: error: no ROS 2 python at $python (scripts/setup.sh installs it)" >&2; exit 2; }

stats() { # JSON FILE (rtlab document or the rclpy line) -> "p50 p99 p99.9 mean count"
  python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = d["streams"][0]["stats"] if "streams" in d else d
f = lambda k: "%.1f" % (s[k] / 1e3) if s.get(k) is not None else "-"
print(f("p50_ns"), f("p99_ns"), f("p99_9_ns"), f("mean_ns"), s["count"])
PY
}

rtlab_row() { # TRANSPORT SIZE EXTRA...
  "$rtlab" pubsub --transport "$1" "${@:3}" --mode roundtrip --schedule closed-loop --payload "$2" \
    --count "$count" --reliability reliable --history keep-last:1 --quiet --json "$out/r.json" \
    >/dev/null 2>"$out/err.txt" || { echo "- - - - 0 ($(head -c 100 "$out/err.txt"))"; return; }
  stats "$out/r.json"
}

rclpy_row() { # SIZE
  local domain=$((150 + RANDOM % 50)) topic="bench_$$_$RANDOM"
  "$python" scripts/ros2-rclpy-pingpong.py pong --domain "$domain" --topic "$topic" --seconds 600 &
  local pong=$!
  "$python" scripts/ros2-rclpy-pingpong.py ping --domain "$domain" --topic "$topic" \
    --size "$1" --count "$count" > "$out/p.json" 2>"$out/err.txt" || true
  kill -INT "$pong" 2>/dev/null || true
  wait "$pong" 2>/dev/null || true
  if [ -s "$out/p.json" ]; then stats "$out/p.json"; else echo "- - - - 0"; fi
}

echo "bench-ros2: $(date -u +%F) $(uname -r), $(nproc) CPUs; $rounds rounds of $count closed-loop round trips"
"$rtlab" pubsub --transport ros2 --count 10 --rate 100hz 2>/dev/null | grep -m1 'note: ros2: ROS 2' || true
printf '%-8s %-8s %3s %8s %8s %8s %8s %7s\n' size who round p50 p99 p99.9 mean count
for size in 64 65536; do
  for r in $(seq "$rounds"); do
    ros=$(rtlab_row ros2 "$size"); f3=$(rtlab_row fastdds "$size" --fastdds-lib ros2)
    fdds=$(rtlab_row fastdds "$size"); py=$(rclpy_row "$size")
    for w in ros2 fastdds3 fastdds rclpy; do
      case $w in ros2) v=$ros ;; fastdds3) v=$f3 ;; fastdds) v=$fdds ;; rclpy) v=$py ;; esac
      # shellcheck disable=SC2086
      printf '%-8s %-8s %3s %8s %8s %8s %8s %7s\n' "$size" "$w" "$r" $v
    done
    python3 - "$ros" "$f3" "$py" <<'PY'
import sys
row = lambda s: s.split()[:4]
r, f, p = (row(a) for a in sys.argv[1:4])
d = lambda a, b: " ".join("%8.1f" % (float(x) - float(y)) if "-" not in (x, y) else "       -" for x, y in zip(a, b))
print("         ros2 - fastdds3   %s" % d(r, f))
print("         rclpy - ros2      %s" % d(p, r))
PY
  done
done
