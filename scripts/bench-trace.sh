#!/usr/bin/env bash
# rtlab trace's cost, in one run (BENCHMARKS.md "rtlab trace"):
#  1. a tracepoint's cost (ns per call) in a stand-in application that calls rcl's and the RMW's
#     tracepoints back to back (crates/rtlab/tests/support/tracepoints.c): with no definition
#     (a no-op: the floor), with the ROS 2 installation's libtracetools (LTTng's tracepoints,
#     no session), and under rtlab trace (the interposer: a record, then the installation's
#     function when there is one);
#  2. the highest rate traced without a drop: the stand-in spreading its calls evenly at
#     rising rates under rtlab trace with the default ring (65536 slots), the drops counted;
#  3. an application's own latency with and without rtlab trace: the three-node rclpy pipeline
#     of the tests (100 Hz, the sink's own end-to-end: Header stamp before the source's
#     publish -> the sink's clock in its callback), in a namespace of its own.
# Usage: bash scripts/bench-trace.sh [MESSAGES=1000]   (root: the namespace; ROS 2 from
# scripts/setup.sh: ROS2=/opt/rtlab/ros2 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}
rtlab=${RTLAB:-./target/release/rtlab}
ros2=${ROS2:-/opt/rtlab/ros2}
dir=$(mktemp -d)
ns=bench-trace
trap '"$rtlab" netns down --name $ns >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
[ -x "$rtlab" ] || cargo build --release --locked -p rtlab
src=crates/rtlab/tests/support/tracepoints.c
cc -O2 -o "$dir/plain" "$src" -ldl
libs="$ros2/lib:$(ls -d "$ros2"/lib/python3*/site-packages/ros_tracetools.libs | head -n 1)"
cc -O2 -o "$dir/lttng" "$src" -ldl -L"$ros2/lib" -Wl,--no-as-needed -ltracetools -Wl,--disable-new-dtags -Wl,-rpath,"$libs"
calls=2000000
per() { cut -d' ' -f4 "$1"; }
"$dir/plain" $calls "$dir/a"
"$dir/lttng" $calls "$dir/b"
"$rtlab" trace -q --slots 16777216 -- "$dir/plain" $calls "$dir/c" 2>/dev/null
"$rtlab" trace -q --slots 16777216 -- "$dir/lttng" $calls "$dir/d" 2>/dev/null
echo "| the stand-in's tracepoints ($calls x rcl_publish + rmw_publish, back to back) | ns per call |"
echo "|---|---|"
echo "| no definition (a no-op through a function pointer: the floor) | $(per "$dir/a") |"
echo "| the installation's libtracetools (LTTng-UST tracepoints, no session) | $(per "$dir/b") |"
echo "| rtlab trace: the interposer's record alone | $(per "$dir/c") |"
echo "| rtlab trace: the interposer's record, then libtracetools' | $(per "$dir/d") |"
echo
echo "| rate (rcl_publish + rmw_publish pairs / s, for 1 s) | events | read (analysed + counted beyond the 4 million kept) | dropped |"
echo "|---|---|---|---|"
for rate in 250000 1000000 2000000 4000000; do
  "$rtlab" trace -q --json "$dir/r.json" -- "$dir/plain" $rate "$dir/r" 1 2>/dev/null
  python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["config"]["trace"]; p=t["processes"][0]; print("| %s | %d | %d | %d |" % (sys.argv[2], 2 * int(sys.argv[2]) + 3, p["events"] + t["not_kept"], p["dropped"]))' "$dir/r.json" "$rate"
done
echo
"$rtlab" netns up --name $ns --no-ipv6 >/dev/null
py="$ros2/bin/python"
pipe=crates/rtlab/tests/support/rclpy_pipeline.py
cat > "$dir/pipeline.sh" <<SH
#!/bin/sh
export ROS_DOMAIN_ID=97
ip netns exec $ns-a $py $pipe sink --input /filtered --count $n --seconds 120 > "\$1" & S=\$!
ip netns exec $ns-a $py $pipe relay --input /scan --output /filtered --seconds 120 > /dev/null & R=\$!
sleep 3
ip netns exec $ns-a $py $pipe source --rate 100 --count $n > /dev/null
wait \$S; kill -INT \$R; wait
SH
sh "$dir/pipeline.sh" "$dir/without.json"
"$rtlab" trace -q --json "$dir/t.json" -- sh "$dir/pipeline.sh" "$dir/with.json" 2>/dev/null
python3 - "$dir/without.json" "$dir/with.json" "$dir/t.json" <<'PY'
import json, sys
def e2e(p):
    d = json.loads(open(p).read().splitlines()[-1]); v = sorted(d["e2e_ns"])
    q = lambda f: v[min(len(v) - 1, int(f * len(v)))] / 1000
    return len(v), q(0.5), q(0.99), v[-1] / 1000
t = json.load(open(sys.argv[3]))
c = t["config"]["trace"]["chains"][0]["end_to_end"]
print("| the pipeline's own end to end (us) | messages | p50 | p99 | max |")
print("|---|---|---|---|---|")
for name, p in [("without rtlab trace", sys.argv[1]), ("under rtlab trace", sys.argv[2])]:
    n, a, b, m = e2e(p)
    print(f"| {name} | {n} | {a:.1f} | {b:.1f} | {m:.1f} |")
print(f"| rtlab trace's chain /scan -> /filtered (rcl_publish -> rmw_take) | {c['count']} | {c['p50_ns']/1000:.1f} | {c['p99_ns']/1000:.1f} | {c['max_ns']/1000:.1f} |")
PY
