#!/usr/bin/env bash
# rtlab noise beside oslat (rt-tests) on the same CPU, same duration, SCHED_FIFO 80, one
# after the other, ROUNDS times: the max, the counts of noise at or above 2/5/10/20/100 us
# and 1 ms, and the total noise between 2 us and 1 ms from each tool's histogram.
# Usage: bash scripts/bench-noise.sh [SECONDS] [CPU]   (root; env RTLAB, ROUNDS)
# (The kernel's tracers, --tracer osnoise|hwlat, beside rtla: scripts/bench-noise-tracers.sh.)
set -euo pipefail
secs=${1:-30}
cpu=${2:-1}
rounds=${ROUNDS:-2}
rtlab=${RTLAB:-./target/release/rtlab}
out=$(mktemp -d)
for r in $(seq "$rounds"); do
    oslat --cpu-list "$cpu" --duration "$secs" -f 80 -b 1024 -q --json="$out/oslat-$r.json" >/dev/null
    "$rtlab" noise --cpus "$cpu" --duration "${secs}s" --threshold 1us --priority 80 -q \
        --json "$out/rtlab-$r.json"
done
python3 - "$out" "$rounds" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
marks = [2, 5, 10, 20, 100, 1000]
def oslat(path):
    t = json.load(open(path))["thread"]["0"]
    # bucket key k holds latencies in [k-1, k) us (oslat: us = floor + 1); the last (1024)
    # holds every one at or above 1023 us
    h = {int(k): v for k, v in t["histogram"].items()}
    at_least = [sum(v for k, v in h.items() if k - 1 >= m or (k == 1024 and m <= 1023)) for m in marks]
    total = sum((k - 0.5) * v for k, v in h.items() if 3 <= k < 1024)  # [2, 1023) us
    return t["max"], at_least, total, t["duration"]
def rtlab(path):
    d = json.load(open(path))
    s = next(s for s in d["streams"] if s["metric"] == "noise_gap")
    b = s["histogram"]["buckets"]
    at_least = [sum(x["count"] for x in b if x["low_ns"] >= m * 1000) for m in marks]
    total = sum((x["low_ns"] + x["high_ns"]) / 2e3 * x["count"] for x in b
                if 2000 <= x["low_ns"] and x["high_ns"] <= 1023000)
    return s["stats"]["max_ns"] / 1e3, at_least, total, int(s["labels"]["measured_ns"]) / 1e9, int(s["labels"]["stolen_ns"]) / 1e3
print("| round | tool | s | max us | " + " | ".join(f">= {m} us" for m in marks) + " | noise 2 us-1 ms (us) |")
print("|---" * (5 + len(marks)) + "|")
for r in range(1, rounds + 1):
    mo, ao, to, do = oslat(f"{out}/oslat-{r}.json")
    mr, ar, tr, dr, st = rtlab(f"{out}/rtlab-{r}.json")
    print(f"| {r} | oslat | {do:.1f} | {mo} | " + " | ".join(map(str, ao)) + f" | {to:.0f} |")
    print(f"| {r} | rtlab noise | {dr:.1f} | {mr:.1f} | " + " | ".join(map(str, ar)) + f" | {tr:.0f} (all gaps: {st:.0f}) |")
    print(f"| {r} | ratio rtlab/oslat | | {mr / mo:.2f} | " + " | ".join(f"{a / b:.2f}" if b else "-" for a, b in zip(ar, ao)) + f" | {tr / to:.2f} |" if to else "")
PY
echo "(raw: $out)"
