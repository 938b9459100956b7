#!/usr/bin/env bash
# rtlab monitor's own cost, in one run (BENCHMARKS.md "rtlab monitor"): its CPU and resident
# memory while it watches 1, 10 and 50 topics at 100 Hz (one rclpy process publishing them
# all, std_msgs/Header) with its canary at 100 Hz (SCHED_FIFO 80 on the last CPU), each for
# SECONDS once every topic is ok; and the time of a scrape of /metrics (the median of 50).
# Usage: bash scripts/bench-monitor.sh [SECONDS=60]   (root: the canary's priority; ROS 2 from
# scripts/setup.sh: ROS2=/opt/rtlab/ros2 by default; RTLAB: the binary, a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
rtlab=${RTLAB:-./target/release/rtlab}
ros2=${ROS2:-/opt/rtlab/ros2}
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$dir"' EXIT
[ -x "$rtlab" ] || cargo build --release --locked -p rtlab
cpu=$(($(nproc) - 1))
port=19464
domain=$((70 + $$ % 30))
cat > "$dir/pub.py" <<'EOF'
import sys, rclpy
from std_msgs.msg import Header
n, rate = int(sys.argv[1]), float(sys.argv[2])
rclpy.init()
node = rclpy.create_node("bench_publisher")
pubs = [node.create_publisher(Header, f"/bench_{i}", 10) for i in range(n)]
def tick():
    m = Header()
    m.stamp = node.get_clock().now().to_msg()
    for p in pubs:
        p.publish(m)
node.create_timer(1.0 / rate, tick)
rclpy.spin(node)
EOF
metric() { curl -s "http://127.0.0.1:$port/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
echo "rtlab monitor's cost: $(uname -r), $(nproc) CPUs, $secs s per row, $("$rtlab" --version)"
printf '%-8s %-12s %-10s %-12s %s\n' topics "CPU (%)" "RSS (MiB)" "scrape (ms)" "canary misses"
for n in 1 10 50; do
  ROS_DOMAIN_ID=$domain "$ros2/bin/python" "$dir/pub.py" "$n" 100 > /dev/null 2>&1 &
  pub=$!
  pids+=("$pub")
  {
    printf "interval = '1s'\nlisten = '127.0.0.1:%s'\nstate = '%s'\ndb = '%s'\ndomain = %s\n" "$port" "$dir/state" "$dir/r.db" "$domain"
    printf "[canary]\nrate = '100hz'\npriority = 80\ncpu = %s\n" "$cpu"
    for i in $(seq 0 $((n - 1))); do printf "[[topic]]\nname = '/bench_%s'\nrate = '100hz'\n" "$i"; done
  } > "$dir/m.toml"
  "$rtlab" monitor --config "$dir/m.toml" > /dev/null 2> "$dir/err" &
  mon=$!
  pids+=("$mon")
  for _ in $(seq 1 120); do
    ok=$(curl -s "http://127.0.0.1:$port/metrics" | grep -c 'rtlab_topic_state=\"ok\"} 1' || true)
    [ "$ok" = "$n" ] && break
    sleep 0.5
  done
  [ "$ok" = "$n" ] || { echo "bench-monitor: only $ok of $n topics ok after 60 s" >&2; exit 1; }
  c0=$(metric rtlab_monitor_cpu_seconds_total)
  m0=$(metric 'rtlab_canary_misses_total{cpu="'"$cpu"'"}')
  t0=$(date +%s.%N)
  sleep "$secs"
  c1=$(metric rtlab_monitor_cpu_seconds_total)
  m1=$(metric 'rtlab_canary_misses_total{cpu="'"$cpu"'"}')
  t1=$(date +%s.%N)
  rss=$(metric rtlab_monitor_resident_memory_bytes)
  scrape=$(for _ in $(seq 1 50); do curl -s -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$port/metrics"; done | sort -n | sed -n 25p)
  awk -v n="$n" -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v rss="$rss" -v s="$scrape" \
    -v m0="$m0" -v m1="$m1" 'BEGIN { printf "%-8s %-12.2f %-10.1f %-12.2f %d\n", n,
      (c1 - c0) * 100 / (t1 - t0), rss / 1048576, s * 1000, m1 - m0 }'
  kill "$mon" "$pub"
  wait "$mon" "$pub" 2>/dev/null || true
done
