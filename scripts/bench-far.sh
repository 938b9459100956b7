#!/usr/bin/env bash
# S3 through a far side: the DDS round trip (Cyclone DDS, best effort, keep-last 1, every
# 10 ms, 64 B and 500 B) over loopback, then through the veth link of two network namespaces
# (`rtlab netns up --rate 100mbit`, the pong in NAME-b through `rtlab agent`, the ping in
# NAME-a) with 0, 40 and 80 Mbit/s of iperf3 UDP traffic on the same link in the same
# direction as the pings (NAME-a -> NAME-b), without and with a priority path; and S1's UDP
# probe (1 ms periodic, 500 B) in the same conditions, with and without SO_PRIORITY 0x10010.
#
# The priority path: `rtlab netns up --priority-path class` makes htb class 1:10 (served
# first) selected by TOS 0xb8 or SO_PRIORITY 0x10010. rtlab does not mark Cyclone's sockets,
# so this script adds on BOTH veth ends one more u32 filter (prio 3) sending IPv4 UDP whose
# destination port is in the RTPS port block of the DDS domain into 1:10. The domain is pinned
# to 124: its block is 7400 + 250*124 = 38400 .. 38649, and 38400 = 0x9600 is 256-aligned, so
# `match ip dport 38400 0xff00` (38400 .. 38655) covers it and nothing of iperf3 (port 5299,
# client port pinned to 5300 with --cport). Class 1:10's packet counters are read before and
# after each DDS row on both ends: the table's "1:10 pkts a/b" column is the proof.
#
# Configurations alternate: for each traffic rate, the link without and then with the
# priority path (namespaces made anew each time), payloads 64 and 500 in turn inside.
# Rows: lo 64/500, then for 0/40/80 Mbit x {none, class}: dds 64, dds 500 (each at 100 Hz,
# then 1 kHz), udp (none: no marking; class: no marking, then --so-priority 0x10010).
#
# Usage: bash scripts/bench-far.sh [ROUND_TRIPS per DDS row, default 3000 (30 s at 10 ms)]
#   env: UDP_COUNT (UDP pings per row, default 20000 = 20 s at 1 ms), KHZ_COUNT (round trips
#   of the extra 1 kHz DDS row per payload and condition, default 10000 = 10 s: more samples
#   per minute, not S3's period; 0 leaves those rows out),
#   RT (the pubsub measuring threads' flags, default "--policy fifo -p 80"; udp ping is
#   SCHED_FIFO 80 by default), NO_DMA=1 (do not hold /dev/cpu_dma_latency),
#   NAME (namespace prefix, default rtfar), RTLAB (binary), KEEP=DIR (keep the JSON files).
# Prints a Markdown table per payload for BENCHMARKS.md. Run as root. ~14 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-3000}
udp_count=${UDP_COUNT:-20000}
khz_count=${KHZ_COUNT:-10000}
name=${NAME:-rtfar}
domain=124
rt=${RT:---policy fifo -p 80}
rtlab=${RTLAB:-./target/release/rtlab}
[ -x "$rtlab" ] || cargo build --release -p rtlab >/dev/null
[ "$(id -u)" = 0 ] || { echo "bench-far: run as root (namespaces, tc)" >&2; exit 2; }
command -v iperf3 >/dev/null || { echo "bench-far: iperf3 missing (Debian package iperf3)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "bench-far: python3 missing" >&2; exit 2; }
out=$(mktemp -d)
pids=()
stop_load() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
cleanup() {
  stop_load
  "$rtlab" netns down --name "$name" >/dev/null 2>&1 || true
  [ -z "${dma_pid:-}" ] || kill "$dma_pid" 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$out"/* "$KEEP"/ 2>/dev/null || true; fi
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# /dev/cpu_dma_latency held at 0 for the whole run by this script (every row alike, DDS and
# UDP, near and far: the request is machine-wide); the kernel drops it when the holder ends
if [ -z "${NO_DMA:-}" ]; then
  python3 -c 'import os, signal, struct
fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY); os.write(fd, struct.pack("i", 0)); signal.pause()' &
  dma_pid=$!
fi
"$rtlab" netns down --name "$name" >/dev/null 2>&1 || true

dds=(--transport dds --mode roundtrip --reliability best-effort --history keep-last:1 --domain "$domain" -q)
rows="$out/rows.tsv" # label payload rate file class10_before class10_after
: >"$rows"

class10() { # packets sent by class 1:10 on side a and side b ("-" when there is no 1:10)
  local s v
  for s in a b; do
    v=$(tc -n "$name-$s" -s class show dev "$name-$s" classid 1:10 2>/dev/null |
      awk '/Sent/ {print $4; exit}')
    printf '%s ' "${v:--}"
  done
}

dds_row() { # label payload rate [far args...]
  local label=$1 payload=$2 rate=$3; shift 3
  local f="$out/$(echo "$label.$payload.$rate" | tr ' /' '__').json" before after n
  n=$count
  [ "$rate" != 1khz ] || n=$khz_count
  before=$([ $# -gt 0 ] && class10 || echo "- - ")
  # shellcheck disable=SC2086
  if ! "$rtlab" pubsub "${dds[@]}" --payload "$payload" --rate "$rate" --count "$n" $rt "$@" \
    --json "$f" 2>"$f.err"; then
    echo "bench-far: FAILED: rtlab pubsub ${dds[*]} --payload $payload --rate $rate --count $n $rt $* :" >&2
    cat "$f.err" >&2
  fi
  after=$([ $# -gt 0 ] && class10 || echo "- - ")
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "dds $payload" "$rate" "$f" "$before" "$after" >>"$rows"
}

udp_row() { # label [udp args...]
  local label=$1; shift
  local f="$out/$(echo "udp.$label" | tr ' /' '__').json" before after
  before=$(class10)
  if ! "$rtlab" udp ping --netns "$name-a" --far "netns:$name-b" --period 1ms --payload 500 \
    --count "$udp_count" -q "$@" --json "$f" 2>"$f.err"; then
    echo "bench-far: FAILED: rtlab udp ping --netns $name-a --far netns:$name-b $* :" >&2
    cat "$f.err" >&2
  fi
  after=$(class10)
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "udp 500" "1khz" "$f" "$before" "$after" >>"$rows"
}

echo "bench-far: $(date -u '+%F %T') UTC, $(uptime | sed 's/.*load average/load average/')" >&2
# a. loopback: no far side, the same DDS configuration
for p in 64 500; do
  dds_row "lo" "$p" 100hz
  [ "$khz_count" = 0 ] || dds_row "lo" "$p" 1khz
done

# b./c. the link, 100 Mbit/s htb bottleneck on each veth end, traffic a -> b
for mbit in 0 40 80; do
  for path in none class; do
    "$rtlab" netns up --name "$name" --rate 100mbit --priority-path "$path" >/dev/null
    if [ "$path" = class ]; then
      for s in a b; do # DDS (RTPS ports of domain 124) into the priority class
        tc -n "$name-$s" filter add dev "$name-$s" parent 1: protocol ip prio 3 u32 \
          match ip protocol 17 0xff match ip dport 38400 0xff00 flowid 1:10
      done
    fi
    if [ "$mbit" -gt 0 ]; then
      ip netns exec "$name-b" iperf3 -s -p 5299 >/dev/null 2>&1 &
      pids+=($!)
      sleep 1
      ip netns exec "$name-a" iperf3 -c 198.18.0.2 -p 5299 --cport 5300 -u -b "${mbit}M" \
        -t 86400 >/dev/null 2>&1 &
      pids+=($!)
      sleep 2
    fi
    label="link $mbit Mbit, prio $path"
    for p in 64 500; do
      dds_row "$label" "$p" 100hz --netns "$name-a" --far "netns:$name-b"
      [ "$khz_count" = 0 ] || dds_row "$label" "$p" 1khz --netns "$name-a" --far "netns:$name-b"
    done
    udp_row "$label, no mark"
    [ "$path" = none ] || udp_row "$label, SO_PRIORITY 0x10010" --so-priority 0x10010
    if [ "$mbit" -gt 0 ]; then # the load really crossed the link: side a's bottleneck counters
      tc -n "$name-a" -s class show dev "$name-a" | awk -v l="$label" \
        '/^class/ {c=$3} /Sent/ {d=$7; sub(",", "", d); printf "bench-far: %s: class %s sent %s bytes %s pkts, dropped %s\n", l, c, $2, $4, d}' >&2
    fi
    stop_load
    "$rtlab" netns down --name "$name" >/dev/null
  done
done
echo "bench-far: done $(date -u '+%F %T') UTC, $(uptime | sed 's/.*load average/load average/')" >&2

python3 - "$rows" <<'PY'
import json, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
def stats(path):
    try:
        doc = json.load(open(path))
    except Exception as e:
        return None
    # the round-trip stream: pubsub's rtt stream, udp's ping stream (metric "rtt")
    st = [s for s in doc["streams"] if s.get("metric") == "rtt"]
    s = st[0]["stats"]
    us = lambda k: "-" if s.get(k) is None else f"{s[k] / 1000:.0f}"
    return dict(n=s["count"], min=us("min_ns"), mean=us("mean_ns"), p50=us("p50_ns"), p99=us("p99_ns"), p999=us("p99_9_ns"),
                max=us("max_ns"), lost=s.get("lost", "-"), late=s.get("late", 0),
                skipped=s.get("overruns", "-"), missed=s.get("missed", "-"))
def delta(b, a):
    b, a = b.split(), a.split()
    if not b or b[0] == "-" or a[0] == "-":
        return "-"
    return "/".join(str(int(y) - int(x)) for x, y in zip(b, a))
groups = {}
for label, what, rate, f, b, a in rows:
    groups.setdefault(what, []).append((label, rate, f, b, a))
for what, rs in groups.items():
    print(f"\n{what} B round trip")
    print("| path | rate | round trips | min us | mean us | p50 us | p99 us | p99.9 us | max us | lost | skipped | missed | 1:10 pkts a/b |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, rate, f, b, a in rs:
        s = stats(f)
        if s is None:
            print(f"| {label} | {rate} | FAILED | | | | | | | | | | |")
            continue
        lost = f"{s['lost']} (+{s['late']} late)" if s["late"] else s["lost"]
        print(f"| {label} | {rate} | {s['n']} | {s['min']} | {s['mean']} | {s['p50']} | {s['p99']} | {s['p999']} | {s['max']} | {lost} | {s['skipped']} | {s['missed']} | {delta(b, a)} |")
print("\n(round trips = samples; lost = no reply within 500 ms; skipped = slots passed before the sender was ready\n"
      "(overruns, not sent); missed = round trips above the period; 1:10 pkts a/b = packets class 1:10 sent\n"
      "on side a / side b during the row, - where there is no class 1:10)")
PY
