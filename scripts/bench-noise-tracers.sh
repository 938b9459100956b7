#!/usr/bin/env bash
# rtlab noise --tracer osnoise beside rtla osnoise top: two readers of the same kernel tracer,
# same CPU, threshold and duration, one after the other, ROUNDS times; then rtlab noise
# --tracer hwlat once (rtla 6.1 has no `hwnoise`: nothing to set beside it). Prints, per
# round and tool, the max single noise, the total noise (% of the runtime) and the counts of
# HW, NMI, IRQ, softirq and thread interference, with the ratios rtlab/rtla.
# Usage (root, a kernel with osnoise and hwlat, e.g. inside the PREEMPT_RT VM):
#   bash scripts/rt-vm.sh --append "isolcpus=1 nohz_full=1 rcu_nocbs=1" -- \
#     env RTLAB=$PWD/target/release/rtlab bash $PWD/scripts/bench-noise-tracers.sh 30 1
# Args: [SECONDS] [CPU]; env RTLAB, ROUNDS (default 2).
set -euo pipefail
secs=${1:-30}
cpu=${2:-1}
rounds=${ROUNDS:-2}
rtlab=${RTLAB:-./target/release/rtlab}
out=$(mktemp -d)
for r in $(seq "$rounds"); do
    "$rtlab" noise --tracer osnoise --cpus "$cpu" --duration "${secs}s" --threshold 1us -q \
        --json "$out/rtlab-$r.json"
    rtla osnoise top -c "$cpu" -d "${secs}s" -T 1 -q >"$out/rtla-$r.txt" 2>&1
done
"$rtlab" noise --tracer hwlat --cpus "$cpu" --duration "${secs}s" --threshold 1us -q \
    --json "$out/hwlat.json"
python3 - "$out" "$rounds" "$cpu" <<'PY'
import json, re, sys
out, rounds, cpu = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def rtla(path):
    # the last table row of CPU `cpu`: CPU Period Runtime Noise %CPU-Aval MaxNoise MaxSingle
    # HW NMI IRQ Softirq Thread (us)
    text = re.sub(r"\x1b\[[0-9;]*[a-zA-Z]", "", open(path).read())
    rows = [l.split() for l in text.splitlines() if l.split()[:1] == [cpu]]
    w = rows[-1]
    runtime, noise, max_single = float(w[2]), float(w[3]), float(w[6])
    return max_single, 100 * noise / runtime, [int(x) for x in w[7:12]], runtime / 1e6
def rtlab(path):
    s = json.load(open(path))["streams"][0]["labels"]
    runtime, noise = int(s["measured_ns"]), int(s["stolen_ns"])
    counts = [int(s[f"interference_{k}"]) for k in ["hw", "nmi", "irq", "sirq", "thread"]]
    return int(s["max_single_ns"]) / 1e3, 100 * noise / runtime, counts, runtime / 1e9
print("| round | tool | runtime s | max single us | noise % | HW | NMI | IRQ | softirq | thread |")
print("|---|---|---|---|---|---|---|---|---|---|")
ratio = lambda a, b: f"{a / b:.2f}" if b else "-"
for r in range(1, rounds + 1):
    a, b = rtlab(f"{out}/rtlab-{r}.json"), rtla(f"{out}/rtla-{r}.txt")
    for name, (m, p, c, t) in [("rtlab noise --tracer osnoise", a), ("rtla osnoise top", b)]:
        print(f"| {r} | {name} | {t:.1f} | {m:.0f} | {p:.2f} | " + " | ".join(map(str, c)) + " |")
    print(f"| {r} | ratio rtlab/rtla | {ratio(a[3], b[3])} | {ratio(a[0], b[0])} | {ratio(a[1], b[1])} | "
          + " | ".join(ratio(x, y) for x, y in zip(a[2], b[2])) + " |")
d = json.load(open(f"{out}/hwlat.json"))
g, st = d["streams"][0], d["streams"][1]
l = g["labels"]
print()
print("| hwlat | samples | count | max gap us | mean gap us | stolen us (inner+outer) | measured s | nmi | width/window us | mode |")
print("|---|---|---|---|---|---|---|---|---|---|")
mx = (g["stats"]["max_ns"] or 0) / 1e3
mean = (g["stats"].get("mean_ns") or 0) / 1e3
print(f"| cpu{cpu} | {l['samples']} | {l['count']} | {mx:.0f} | {mean:.0f} | {int(l['stolen_ns']) / 1e3:.0f} | "
      f"{int(l['measured_ns']) / 1e9:.1f} | {l['nmi_count']} | {l['width_us']}/{l['window_us']} | {l['mode']} |")
PY
echo "(raw: $out)"
