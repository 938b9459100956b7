#!/usr/bin/env bash
# roscpp's own timer (Debian's ROS 1, `rtlab timer --mode roscpp*`) beside rtlab's `timer`,
# its model of roscpp (`roscpp-model`) and Debian's cyclictest, in one run: 1 thread, 1 ms,
# SCHED_FIFO 80 (set before ros::init, S4's order; one more roscpp case sets it after), memory
# locked, idle and under `stress-ng --cpu 2 --cpu-method fft`. The tools alternate, so that all
# see the same machine. Prints a Markdown table for BENCHMARKS.md.
# Usage: bash scripts/bench-roscpp.sh [SECONDS per case, default 30]   (root; RTLAB: the
# binary, a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
rtlab=${RTLAB:-./target/release/rtlab}
[ -x "$rtlab" ] || cargo build --release --locked -p rtlab >/dev/null
for t in cyclictest stress-ng rosmaster; do
  command -v "$t" >/dev/null || { echo "bench-roscpp: $t missing (scripts/setup.sh installs it)" >&2; exit 2; }
done
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT

one_case() { # $1 = load label
  cyclictest -t1 -p80 -i1000 -m -q -D "${secs}s" -h 20000 >"$out/$1.cyclictest" 2>/dev/null
  for m in abs roscpp roscpp-steady roscpp-model; do
    "$rtlab" timer -p 80 --mode "$m" --interval 1ms --duration "${secs}s" -q --json "$out/$1.$m.json"
  done
  "$rtlab" timer -p 80 --mode roscpp --roscpp-rt after-init --interval 1ms --duration "${secs}s" -q --json "$out/$1.after.json"
}

one_case idle
stress-ng --cpu 2 --cpu-method fft --quiet &
sleep 2
one_case load
kill %1 2>/dev/null || true
wait 2>/dev/null || true

python3 - "$out" "$secs" <<'PY'
import json, sys
sys.path.insert(0, "scripts")
from cyclictest_summary import summary
out, secs = sys.argv[1], sys.argv[2]
def cyc(path):
    return summary(path, over="")
def rt(path, name="thread0"):
    doc = json.load(open(path))
    s = next(st for st in doc["streams"] if st["name"] == name)["stats"]
    us = lambda k: s[k] / 1000
    r = dict(n=s["count"], min=us("min_ns"), avg=us("mean_ns"), p50=us("p50_ns"), p99=us("p99_ns"), max=us("max_ns"), over=s.get("overruns") or 0)
    node = (doc["config"].get("roscpp") or [None])[0]
    r["timer"] = node and (node["timer"] or {}).get("policy", "?")
    return r
print("| load | tool | samples | min us | avg us | p50 us | p99 us | max us | overruns | p50 / cyclictest | p99 / cyclictest |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
ratio = lambda a, b: f"{a / b:.2f}" if b else "n/a"
fmt = lambda v: f"{v:.1f}" if isinstance(v, float) else str(v)
for case in ["idle", "load"]:
    c = cyc(f"{out}/{case}.cyclictest")
    rows = [("cyclictest (wake-up latency)", c)]
    rows.append(("rtlab timer abs (wake-up latency)", rt(f"{out}/{case}.abs.json")))
    rows.append(("roscpp ros::Timer (timer error)", rt(f"{out}/{case}.roscpp.json")))
    rows.append(("roscpp ros::Timer: its timer thread's lateness (expiry error)", rt(f"{out}/{case}.roscpp.json", "thread0.expiry")))
    rows.append(("roscpp ros::SteadyTimer (timer error)", rt(f"{out}/{case}.roscpp-steady.json")))
    rows.append(("rtlab's model of roscpp (2014) (timer error)", rt(f"{out}/{case}.roscpp-model.json")))
    a = rt(f"{out}/{case}.after.json")
    rows.append((f"roscpp ros::Timer, RT set after ros::init (timer thread: {a['timer']})", a))
    for label, r in rows:
        rat = "" if label.startswith("cyclictest") else f"{ratio(r['p50'], c['p50'])} | {ratio(r['p99'], c['p99'])}"
        rat = rat or " | "
        print(f"| {case} | {label} | {r['n']} | {fmt(r['min'])} | {fmt(r['avg'])} | {fmt(r['p50'])} | {fmt(r['p99'])} | {fmt(r['max'])} | {r['over']} | {rat} |")
print(f"\n(cyclictest bins are 1 us, floor; rtlab is ns-exact; {secs} s per case, one after another; load = stress-ng --cpu 2 --cpu-method fft; FIFO 80 for every measuring thread, and for every roscpp thread unless set after ros::init)")
PY
