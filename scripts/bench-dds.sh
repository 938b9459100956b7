#!/usr/bin/env bash
# The three DDS implementations side by side (issue 15), in one run: rtlab's cyclonedds,
# fastdds and rustdds at 64 B, 4 KiB, 64 KiB and 1 MiB, round trip (closed loop) and one way
# (100 Hz), receivers blocking and busy-polling, with two vendors' own benchmarks beside:
#
#   Cyclone DDS: `ddsperf ping` against `ddsperf pong` (closed loop, two processes, rtlab's
#        loopback-only configuration; RTT/2 statistics per second, doubled here; the first
#        second, with discovery, left out). Blocking rows: ddsperf's waitset mode; busy-poll
#        rows: its listener mode (ddsperf cannot spin; the pong answers from Cyclone's receive
#        thread, its fastest).
#   Fast DDS: its Benchmark example as Debian ships it (libfastrtps-doc:
#        /usr/share/doc/libfastrtps-dev/examples/dds/Benchmark), built against Debian's
#        libraries under $ANCHOR_DIR: a closed loop of two processes (the publisher's listener
#        answers each echo with the next message, reliable, builtin transports = UDPv4 + shared
#        memory, as rtlab's fastdds) that counts round trips for `-time` ms: mean RTT =
#        time / count. Its sizes are fixed: "none" (a 4-byte index), "small" (16 KiB + index),
#        "medium" (512 KiB + index); rtlab's rows at 64 B, 16 KiB and 512 KiB stand beside them.
#   RustDDS has no benchmark of its own.
#
# rtlab runs as root so that rustdds gets its private network namespace (loopback only);
# busy-poll rows on a 2-CPU machine carry rtlab's `busy-poll-starves-middleware` warning
# (two spinners leave the middleware's own threads no CPU): they are printed with it.
# Usage: bash scripts/bench-dds.sh [ROUNDS=2]   (ONLY=roundtrip,oneway,fastdds-anchor)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
rtlab=${RTLAB:-./target/release/rtlab}
anchors=${ANCHOR_DIR:-/var/tmp/rtlab-anchors}
only=",${ONLY:-roundtrip,oneway,fastdds-anchor},"
want() { [[ "$only" == *",$1,"* ]]; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
[ -x "$rtlab" ] || cargo build --release --locked -p rtlab
command -v ddsperf >/dev/null || { echo "bench-dds: error: no ddsperf (apt-get install cyclonedds-tools)" >&2; exit 2; }

# rtlab's p50 / p99 / mean (us), count, lost and warning codes of one case
rtlab_case() { # TRANSPORT MODE SIZE WAIT COUNT EXTRA...
  local j="$out/r.json"
  local sched=(--schedule closed-loop)
  [ "$2" = oneway ] && sched=(--rate 100hz)
  if ! "$rtlab" pubsub --transport "$1" --mode "$2" "${sched[@]}" --payload "$3" --wait "$4" \
    --count "$5" --reliability reliable --history keep-last:1 "${@:6}" --quiet --json "$j" \
    >/dev/null 2>"$out/err.txt"; then
    # a size the transport does not carry (rustdds: 64 KiB) or a failed case: said, not measured
    echo "- - - 0 0 $(head -c 120 "$out/err.txt" | tr ' \n' '_ ')"
    return
  fi
  python3 - "$j" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = d["streams"][0]["stats"]
w = ",".join(x["code"] for x in d.get("warnings", [])) or "-"
print("%.1f %.1f %.1f %d %d %s" % (s["p50_ns"] / 1e3, s["p99_ns"] / 1e3, s["mean_ns"] / 1e3, s["count"], s["lost"], w))
PY
}

# shellcheck source=scripts/ddsperf-rtt.sh
. scripts/ddsperf-rtt.sh  # the working directory is the repository (cd above)
anchor_ddsperf() { # SIZE waitset|listener -> "p50 p99 mean" RTT us
  ddsperf_rtt "$1" "$2" 6 "$out" 1
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

if want roundtrip; then
  echo
  echo "Round trip, closed loop (reliable, keep-last 1); ddsperf beside cyclonedds (RTT us)"
  echo
  echo "| transport | size B | wait | round | p50 us | p99 us | mean us | ddsperf p50 / p99 / mean us | warnings |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for size in 64 4096 65536 1048576; do
    count=5000
    [ "$size" = 1048576 ] && count=500
    for wait in blocking busy-poll; do
      for r in $(seq 1 "$rounds"); do
        for t in cyclonedds fastdds rustdds; do
          read -r p50 p99 mean n lost w < <(rtlab_case "$t" roundtrip "$size" "$wait" "$count")
          a="-"
          if [ "$t" = cyclonedds ]; then
            mode=waitset
            [ "$wait" = busy-poll ] && mode=listener
            read -r a50 a99 amean < <(anchor_ddsperf "$size" "$mode")
            a="$a50 / $a99 / $amean ($mode)"
          fi
          echo "| $t | $size | $wait | $r | $p50 | $p99 | $mean | $a | $w |"
          [ "$lost" = 0 ] || echo "  ($t: $lost of $((n + lost)) lost)"
        done
      done
    done
  done
fi

if want oneway; then
  echo
  echo "One way, 100 Hz, 500 messages (reliable, keep-last 1; us)"
  echo
  echo "| transport | size B | wait | p50 us | p99 us | mean us | warnings |"
  echo "|---|---|---|---|---|---|---|"
  for size in 64 4096 65536 1048576; do
    for wait in blocking busy-poll; do
      for t in cyclonedds fastdds rustdds; do
        read -r p50 p99 mean n lost w < <(rtlab_case "$t" oneway "$size" "$wait" 500)
        echo "| $t | $size | $wait | $p50 | $p99 | $mean | $w |"
        [ "$lost" = 0 ] || echo "  ($t: $lost of $((n + lost)) lost)"
      done
    done
  done
fi

want fastdds-anchor || exit 0
src=/usr/share/doc/libfastrtps-dev/examples/dds/Benchmark
if [ ! -d "$src" ]; then
  if [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libfastrtps-doc >/dev/null
  else
    echo "fastdds anchor: skipped: no $src (apt-get install libfastrtps-doc)"
    exit 0
  fi
fi
fb="$anchors/fastdds-benchmark"
if [ ! -x "$fb/build/DDSBenchmark" ]; then
  rm -rf "$fb" && mkdir -p "$fb" && cp -r "$src"/. "$fb/"
  find "$fb" -name '*.gz' -exec gunzip -f {} +
  (cd "$fb" && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build -j2 >/dev/null)
fi
# the example discovers by multicast on every interface: it runs in a network namespace of
# its own (lo and a veth pair, both ends up, nothing leaves it), removed at the end
ns=rtlab-fbench
ip netns del "$ns" 2>/dev/null || true
ip netns add "$ns"
trap 'ip netns del "$ns" 2>/dev/null || true; rm -rf "$out"' EXIT
ip -n "$ns" link set lo up
ip -n "$ns" link add fb0 type veth peer name fb1
ip -n "$ns" addr add 198.18.9.1/24 dev fb0
ip -n "$ns" link set fb0 up
ip -n "$ns" link set fb1 up
ip -n "$ns" route add 224.0.0.0/4 dev fb0
# the example's shared memory (data sharing, SHM transport) stays in /dev/shm when `timeout`
# kills it: what it made there is removed after each run (files held by no process only)
fastdds_shm() { ls /dev/shm 2>/dev/null | grep -E '^(sem\.)?(fast_datasharing_|fastrtps_)' || true; }
shm_before="$(fastdds_shm)"
clean_fastdds_shm() {
  local f
  for f in $(fastdds_shm); do
    grep -qxF "$f" <<<"$shm_before" && continue
    fuser -s "/dev/shm/$f" 2>/dev/null || rm -f "/dev/shm/$f"
  done
}
anchor_fastdds() { # none|small|medium -> mean RTT us
  local topic="rtlab_bench_$RANDOM"
  timeout 30 ip netns exec "$ns" "$fb/build/DDSBenchmark" subscriber udp -topic "$topic" -domain 78 -size "$1" > "$out/fsub.txt" 2>&1 &
  local sub=$!
  sleep 1
  timeout 30 ip netns exec "$ns" "$fb/build/DDSBenchmark" publisher udp -topic "$topic" -domain 78 -size "$1" -time 5000 > "$out/fpub.txt" 2>&1 || true
  kill "$sub" 2>/dev/null || true
  wait "$sub" 2>/dev/null || true
  clean_fastdds_shm
  # "-": no COUNT line (here, on 2026-11-24, the example never matched itself: see BENCHMARKS.md)
  awk '/^COUNT:/ { c = $2 } END { if (c > 0) printf "%.1f", 5000 * 1000 / c; else printf "-" }' "$out/fpub.txt"
}
echo
echo "Fast DDS beside its own Benchmark example (closed loop, reliable; mean RTT us)"
echo
echo "| size | round | rtlab fastdds blocking p50 / mean us | DDSBenchmark mean us | mean ratio |"
echo "|---|---|---|---|---|"
for pair in "64:none" "16384:small" "524288:medium"; do
  size=${pair%%:*}
  kind=${pair##*:}
  for r in $(seq 1 "$rounds"); do
    read -r p50 p99 mean n lost w < <(rtlab_case fastdds roundtrip "$size" blocking 3000)
    a=$(anchor_fastdds "$kind")
    ratio=$(awk -v x="$mean" -v y="$a" 'BEGIN { if (y + 0 > 0) printf "%.2f", x / y; else printf "-" }')
    echo "| $size B (DDSBenchmark $kind) | $r | $p50 / $mean | $a | $ratio |"
  done
done
