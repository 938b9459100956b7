# Cyclone DDS's own round trip, the anchor of the Cyclone rows: sourced by bench-anchors.sh
# and bench-dds.sh (not run by itself).
#
# ddsperf_rtt SIZE MODE SECONDS OUTDIR [DECIMALS]
#   runs `ddsperf pong MODE` and `ddsperf ping size SIZE MODE` for SECONDS on loopback only
#   (no multicast, unicast discovery to 127.0.0.1, domain 77), MODE waitset or listener,
#   their output in OUTDIR/pong.txt and OUTDIR/ping.txt; prints "p50 p99 mean" of the round
#   trip in us (2x ddsperf's one-way figures: the median over its per-second lines of the
#   p50 and the p99, the count-weighted mean; the first second, which includes discovery,
#   left out), DECIMALS places (3), or "- - -" when ddsperf printed no statistics line.

ddsperf_cfg='<CycloneDDS><Domain id="any"><General><Interfaces><NetworkInterface name="lo"/></Interfaces><AllowMulticast>false</AllowMulticast></General><Discovery><ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>100</MaxAutoParticipantIndex><Peers><Peer address="127.0.0.1"/></Peers></Discovery></Domain></CycloneDDS>'

ddsperf_rtt() {
  local size=$1 mode=$2 secs=$3 dir=$4 decimals=${5:-3}
  CYCLONEDDS_URI="$ddsperf_cfg" timeout 20 ddsperf -i 77 -D $((secs + 2)) pong "$mode" > "$dir/pong.txt" 2>&1 &
  local pong=$!
  sleep 1
  CYCLONEDDS_URI="$ddsperf_cfg" timeout 20 ddsperf -i 77 -D "$secs" ping size "$size" "$mode" > "$dir/ping.txt" 2>&1 || true
  kill "$pong" 2>/dev/null || true
  wait "$pong" 2>/dev/null || true
  python3 - "$dir/ping.txt" "$decimals" <<'PY'
import re, statistics, sys
rows = []
for l in open(sys.argv[1]):
    m = re.search(r"mean ([0-9.]+)us .*50% ([0-9.]+)us .*99% ([0-9.]+)us .*cnt (\d+)", l)
    if m:
        rows.append(tuple(float(x) for x in m.groups()))
rows = rows[1:] or rows  # the first second includes discovery
if not rows:
    print("- - -"); sys.exit()
n = sum(r[3] for r in rows)
mean = sum(r[0] * r[3] for r in rows) / n
f = "%%.%df" % int(sys.argv[2])
print(" ".join(f % v for v in (2 * statistics.median(r[1] for r in rows), 2 * statistics.median(r[2] for r in rows), 2 * mean)))
PY
}
