#!/usr/bin/env bash
# rtlab timer and rtlab cyclic vs Debian's cyclictest on the same configuration, in one run:
# 1 thread, SCHED_FIFO 80, 1 ms interval, mlockall, /dev/cpu_dma_latency held at 0 (cyclictest's
# default; rtlab's --cpu-dma-latency 0), idle and under `stress-ng --cpu 2 --cpu-method fft`.
# The two tools alternate, ROUNDS times per load, so that both see the same machine.
# rtlab cyclic runs a 200 us calibrated job per cycle (WORK=...): its wake-up latency is the
# like-for-like figure, its response time (job end - slot) what a control loop sees.
# Prints a Markdown table for BENCHMARKS.md.
# Usage: bash scripts/bench-timer.sh [SECONDS per case, default 30]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
rtlab=${RTLAB:-./target/release/rtlab}
[ -x "$rtlab" ] || cargo build --release -p rtlab >/dev/null
command -v cyclictest >/dev/null || { echo "bench-timer: cyclictest missing (Debian package rt-tests)" >&2; exit 2; }
command -v stress-ng >/dev/null || { echo "bench-timer: stress-ng missing (Debian package stress-ng)" >&2; exit 2; }
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT

rounds=${ROUNDS:-2}
one_case() { # $1 = label
  for r in $(seq "$rounds"); do
    cyclictest -t1 -p80 -i1000 -m -q -D "${secs}s" -h 20000 >"$out/$1.$r.cyclictest" 2>/dev/null
    "$rtlab" timer -t 1 -p 80 --interval 1ms --duration "${secs}s" --cpu-dma-latency 0 -q --json "$out/$1.$r.rtlab.json"
    "$rtlab" cyclic -t 1 -p 80 --interval 1ms --work "${WORK:-200us}" --duration "${secs}s" --cpu-dma-latency 0 -q --json "$out/$1.$r.cyclic.json"
  done
}

one_case idle
stress-ng --cpu 2 --cpu-method fft --quiet &
sleep 2
one_case load
kill %1 2>/dev/null || true
wait 2>/dev/null || true

python3 - "$out" "$secs" "$rounds" <<'PY'
import json, sys
sys.path.insert(0, "scripts")
from cyclictest_summary import summary
out, secs, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
def cyc(path):
    return summary(path)
def rt(path, stream=0):
    s = json.load(open(path))["streams"][stream]["stats"]
    us = lambda k: s[k] / 1000
    return dict(n=s["count"], min=us("min_ns"), avg=us("mean_ns"), p50=us("p50_ns"), p99=us("p99_ns"), max=us("max_ns"))
print(f"| load | tool | samples | min us | avg us | p50 us | p99 us | max us | p50 ratio rtlab/cyclictest | p99 ratio |")
print("|---|---|---|---|---|---|---|---|---|---|")
ratio = lambda a, b: f"{a / b:.2f}" if b else "n/a"
for case in ["idle", "load"]:
    for k in range(1, rounds + 1):
        c, r = cyc(f"{out}/{case}.{k}.cyclictest"), rt(f"{out}/{case}.{k}.rtlab.json")
        print(f"| {case} #{k} | cyclictest | {c['n']} | {c['min']} | {c['avg']} | {c['p50']} | {c['p99']} | {c['max']} | | |")
        print(f"| {case} #{k} | rtlab timer | {r['n']} | {r['min']:.1f} | {r['avg']:.1f} | {r['p50']:.1f} | {r['p99']:.1f} | {r['max']:.1f} | {ratio(r['p50'], c['p50'])} | {ratio(r['p99'], c['p99'])} |")
        doc = json.load(open(f"{out}/{case}.{k}.cyclic.json"))
        names = [st["name"] for st in doc["streams"]]
        w = rt(f"{out}/{case}.{k}.cyclic.json", names.index("thread0.wakeup"))
        print(f"| {case} #{k} | rtlab cyclic, wake-up | {w['n']} | {w['min']:.1f} | {w['avg']:.1f} | {w['p50']:.1f} | {w['p99']:.1f} | {w['max']:.1f} | {ratio(w['p50'], c['p50'])} | {ratio(w['p99'], c['p99'])} |")
        j = rt(f"{out}/{case}.{k}.cyclic.json", names.index("thread0"))
        print(f"| {case} #{k} | rtlab cyclic, response | {j['n']} | {j['min']:.1f} | {j['avg']:.1f} | {j['p50']:.1f} | {j['p99']:.1f} | {j['max']:.1f} | | |")
print(f"\n(cyclictest bins are 1 us, floor; rtlab is ns-exact; {secs} s per run, tools alternating; load = stress-ng --cpu 2 --cpu-method fft)")
PY
