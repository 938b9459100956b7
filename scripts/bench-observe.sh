#!/usr/bin/env bash
# observe's cost per message and the period it reports for a 1 kHz publisher, beside the
# publisher's own send stamps, in one run: rtlab's DDS publisher by hand (1 kHz, 64 B, best
# effort) and `rtlab observe` on the same topic (both on loopback, one machine, one clock:
# `--synced-clocks` holds, so observe also reads the latency from the message's header.stamp,
# which the publisher by hand stamps on CLOCK_REALTIME).
# Usage: bash scripts/bench-observe.sh [SECONDS=30]   (root for SCHED_FIFO; RT="" to run SCHED_OTHER)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
rtlab=${RTLAB:-./target/release/rtlab}
rt=${RT:---policy fifo -p 80}
domain=123
dir=$(mktemp -d)
trap 'kill "${pub:-0}" 2>/dev/null || true; rm -rf "$dir"' EXIT
[ -x "$rtlab" ] || cargo build --release --locked -p rtlab
# the publisher runs a little longer than the observation, on either side
"$rtlab" pubsub --transport dds --role pub --topic bench_observe --domain $domain --rate 1khz \
  --payload 64 --duration $((secs + 8))s $rt -q --json "$dir/pub.json" >/dev/null 2>&1 &
pub=$!
sleep 3
# observe under a wrapper that reports its CPU time (user + system, set-up included)
python3 -c 'import resource,subprocess,sys; subprocess.run(sys.argv[2:]); r=resource.getrusage(resource.RUSAGE_CHILDREN); open(sys.argv[1],"w").write("%f" % (r.ru_utime+r.ru_stime))' \
  "$dir/cpu" "$rtlab" observe --domain $domain --topic /bench_observe --rate 1khz --duration ${secs}s --synced-clocks $rt -q \
  --json "$dir/obs.json"
wait $pub || true
python3 - "$dir/pub.json" "$dir/obs.json" "$dir/cpu" <<'PY'
import json, sys
pub = json.load(open(sys.argv[1])); obs = json.load(open(sys.argv[2])); cpu = float(open(sys.argv[3]).read())
def row(name, s):
    st = s["stats"]; us = lambda k: "%.1f" % (st[k] / 1000) if st.get(k) is not None else "-"
    return f"| {name} | {st['count']} | {us('p50_ns')} | {us('p99_ns')} | {us('p99_9_ns')} | {us('max_ns')} |"
lat = next(s for s in pub["streams"] if s["name"].endswith("send_lateness") or "lateness" in s["name"])
per = next(s for s in obs["streams"] if s["name"].endswith(".period"))
dev = next(s for s in obs["streams"] if s["name"].endswith(".deviation"))
hdr = next((s for s in obs["streams"] if s["name"].endswith(".latency")), None)
o = obs["config"]["observed"]
print("| stream | samples | p50 us | p99 us | p99.9 us | max us |")
print("|---|---|---|---|---|---|")
print(row("publisher send lateness (its own stamps vs its grid)", lat))
print(row("observe: arrival period", per))
print(row("observe: deviation from 1 ms", dev))
if hdr:
    print(row("observe: latency from header.stamp", hdr))
print(f"\npublisher: {lat['stats']['count']} sent, {lat['stats'].get('overruns') or 0} slots skipped (late past them)")
print(f"observe: received {o['received']}, gaps {o['gaps']} (missed periods {o['missed_periods']}), bursts {o['bursts']}")
print(f"observe's CPU time (user + system, set-up included): {cpu:.3f} s = {cpu / max(o['received'], 1) * 1e6:.1f} us per message")
PY
