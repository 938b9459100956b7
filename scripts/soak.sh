#!/usr/bin/env bash
# S3's long test under faults: a DDS round trip across the far side (an rtlab agent in the
# case's netns pair), under stress-ng (8 CPU, 8 VM, 8 I/O, 8 HDD) and 40 Mbit/s of iperf3
# traffic across the same link, with the rt-kthreads profile — while things go wrong the way
# they do on a robot. By default 4,320,000 round trips at 1 kHz (72 minutes: S3's 12-hour
# count in a sixth of its time).
#
# Usage: bash scripts/soak.sh [--minutes M] [--rate HZ] [--transport T] [--out DIR]
#                             [--rtlab BIN]
#   --minutes M    the long case's length (default 72); the two short cases after it take
#                  40 s each
#   --rate HZ      round trips a second (default 1000)
#   --transport T  cyclonedds (default), fastdds, rustdds or ros2
#   --out DIR      where the scenario, the store, the logs and soak.json go (default: a new
#                  directory under $TMPDIR)
#   --rtlab BIN    the rtlab binary (default: rtlab on PATH, else target/release/rtlab)
#
# The faults, on a schedule it prints and stores (DIR/faults.json), in CLOCK_MONOTONIC time:
#   case 1 (the long case), from its agent's start + 3 s of set-up, D its length:
#     at 0.10 D  the veth link down for 2 s (from the far side), then up
#     at 0.25 D  the far side (agent and its role processes) stopped 3 s (SIGSTOP), continued
#     at 0.40 D  CLOCK_REALTIME stepped +50 ms; at 0.45 D stepped back -50 ms
#     at 0.60 D  the stress-ng and iperf3 loads killed from outside (kill -9)
#     at 0.70 D  the store's filesystem (a 64 MiB tmpfs) filled; freed 5 s after the case's
#                end: the case waits in memory and is written when space returns
#   case 2: the far agent killed (kill -9) 8 s in: the case ends there, saying so
#   case 3: SIGTERM to `rtlab run` 8 s in; then `rtlab run --resume` finishes the run
# The script keeps its schedule under the load at SCHED_FIFO 10 (below every rtlab thread of
# the rt-kthreads profile; rtlab itself is started at SCHED_OTHER).
# Then it checks, and exits 1 when one check fails (2: it could not run): for every case,
# published = samples + late + lost with duplicates apart and nothing received that was not
# sent; every fault in the result in the window where it happened (rtlab's own warning
# against this schedule); the store holds every case; `rtlab tune show` applies nothing; no
# rtlab, stress-ng or iperf3 process and no rtlab namespace left; the RSS of rtlab and of the
# agent after the first minute (flat: at most 10 % + 8 MiB above its value at 1 min, checked
# when the case is longer than 2 minutes). A line per fault: messages lost in its windows,
# time to recover (the first full window after it), the max before and after.
# Needs root, python3, iproute2, stress-ng, iperf3, and the rtlab binary.
set -euo pipefail

minutes=72 rate=1000 transport=cyclonedds out="" rtlab=""
while (($#)); do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --transport) transport="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --rtlab) rtlab="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "soak: error: unknown argument '$1' (see the usage at the top of $0)" >&2; exit 2 ;;
  esac
done

die() { echo "soak: error: $*" >&2; exit 2; }
[[ "$minutes" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--minutes '$minutes': a positive number of minutes"
[[ "$rate" =~ ^[1-9][0-9]*$ ]] && ((rate <= 10000)) || die "--rate '$rate': 1 to 10000 round trips a second"
case "$transport" in cyclonedds|fastdds|rustdds|ros2) ;; *) die "--transport '$transport': cyclonedds, fastdds, rustdds or ros2" ;; esac
[ "$(id -u)" -eq 0 ] || die "needs root (namespaces, profiles, the clock, a tmpfs)"
for t in python3 ip stress-ng iperf3 mount chrt; do
  command -v "$t" >/dev/null || die "'$t' is not installed (apt-get install python3 iproute2 stress-ng iperf3)"
done
if [ -z "$rtlab" ]; then
  rtlab="$(command -v rtlab || true)"
  [ -n "$rtlab" ] || rtlab="$(cd "$(dirname "$0")/.." && pwd)/target/release/rtlab"
fi
[ -x "$rtlab" ] || die "no rtlab binary at '$rtlab' (cargo build --release, or --rtlab BIN)"
rtlab="$(cd "$(dirname "$rtlab")" && pwd)/$(basename "$rtlab")"
if pgrep -x stress-ng >/dev/null || pgrep -x iperf3 >/dev/null || pgrep -f ' agent --keepalive' >/dev/null; then
  die "stress-ng, iperf3 or an rtlab agent already runs here: the soak must start on a quiet machine"
fi

[ -n "$out" ] || out="$(mktemp -d "${TMPDIR:-/tmp}/rtlab-soak.XXXXXX")"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
store_dir="$out/store"
mkdir -p "$store_dir"
db="$store_dir/soak.db"

mono() { python3 -c 'import time; print(time.monotonic_ns())'; }
# step CLOCK_REALTIME by $1 ms (what a late NTP/chrony step does)
step_clock() {
  python3 -c "import time,sys; time.clock_settime_ns(time.CLOCK_REALTIME, time.clock_gettime_ns(time.CLOCK_REALTIME) + int(float(sys.argv[1]) * 1e6))" "$1"
}

# everything changed here is undone on every way out
stepped=0 mounted=0 stopped_pids="" filler=""
cleanup() {
  set +e
  [ -n "$stopped_pids" ] && kill -CONT $stopped_pids 2>/dev/null
  if ((stepped != 0)); then step_clock "$((-stepped))"; stepped=0; fi
  [ -n "$filler" ] && rm -f "$filler"
  if ((mounted)); then
    # the store is copied out before its tmpfs goes
    cp -a "$store_dir/." "$out/store-kept/" 2>/dev/null
    umount "$store_dir" && mounted=0
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mount -t tmpfs -o size=64m rtlab-soak "$store_dir"
mounted=1
mkdir -p "$out/store-kept"

long=$(python3 -c "print(int(round(float('$minutes') * 60 * $rate)))")
short=$((rate * 40))
period_us=$((1000000 / rate))
cat >"$out/soak.toml" <<EOF
# Written by scripts/soak.sh: S3's long case under faults (see the script's header).
name = "soak"
description = "S3's long test under faults: $transport round trip every ${period_us} us across the far side (netns pair), stress + 40 Mbit/s, rt-kthreads; $long round trips, then two cases of $short"
profiles = ["rt-kthreads"]
loads = ["stress-tx40"]
far = "pair"

[load.tx40]
kind = "traffic"
rate = "40mbit"
direction = "tx"

[load.stress-tx40]
kind = "combined"
parts = ["stress", "tx40"]

[[probe]]
kind = "pubsub"
transport = "$transport"
mode = "roundtrip"
period = "${period_us}us"
payload = 500
reliability = "best-effort"
history = "keep-last:1"
loss_timeout = "500ms"
deadline = "10ms"
count = $long

[[probe]]
kind = "pubsub"
transport = "$transport"
mode = "roundtrip"
period = "${period_us}us"
payload = 501
reliability = "best-effort"
history = "keep-last:1"
loss_timeout = "500ms"
deadline = "10ms"
count = $short

[[probe]]
kind = "pubsub"
transport = "$transport"
mode = "roundtrip"
period = "${period_us}us"
payload = 502
reliability = "best-effort"
history = "keep-last:1"
loss_timeout = "500ms"
deadline = "10ms"
count = $short
EOF

faults="$out/faults.jsonl"
: >"$faults"
# note FAULT CASE FROM_NS [TO_NS]: one line of the schedule, printed and stored
note() {
  printf '{"fault":"%s","case":%s,"from_ns":%s,"to_ns":%s}\n' "$1" "$2" "$3" "${4:-null}" >>"$faults"
  echo "soak: $(date -u +%H:%M:%S) case $2: $1" >&2
}

# the pid of a far agent of rtlab run $1 (its child) that is not one of the others
new_agent() {
  local p run=$1; shift
  for p in $(pgrep -P "$run" -f ' agent --keepalive' || true); do
    case " $* " in *" $p "*) ;; *) echo "$p"; return 0 ;; esac
  done
  return 1
}
wait_agent() { # wait_agent RUN_PID SEEN...: the next agent's pid, or "" when rtlab ended
  local run=$1; shift
  while kill -0 "$run" 2>/dev/null; do
    new_agent "$run" "$@" && return 0
    sleep 0.1
  done
  echo ""
}
# the agent and what it started (its role processes), for SIGSTOP
far_pids() { echo "$1 $(pgrep -P "$1" | tr '\n' ' ')"; }
sleep_until() { # sleep_until MONO_NS
  local now; now=$(mono)
  (($1 > now)) && sleep "$(python3 -c "print(($1 - $now) / 1e9)")"
  return 0
}

# the schedule is kept under the load: this shell and what it starts from here at FIFO 10
chrt -f -p 10 $$ || die "chrt -f -p 10: cannot keep the schedule at a real-time priority"
echo "soak: $rtlab, $transport, $rate Hz: case 1 $long round trips ($minutes min), cases 2 and 3 $short; out $out" >&2
chrt -o 0 "$rtlab" run "$out/soak.toml" --wait --db "$db" --html "$out/soak.html" >"$out/run.out" 2>"$out/run.err" &
run=$!

settle=3000000000
D=$((long * 1000000000 / rate))
a1=$(wait_agent "$run")
[ -n "$a1" ] || { cat "$out/run.err" >&2; die "rtlab ended before case 1's far agent started (its output above)"; }
t0=$(($(mono) + settle))
# the link: side b's end of the pair, from the far side
ns_b=$(ip netns identify "$a1")
dev_b=$(ip -n "$ns_b" -o link show type veth | awk -F': ' '{print $2}' | cut -d@ -f1 | head -n1)
[ -n "$dev_b" ] || die "no veth in the far side's namespace '$ns_b'"

sleep_until $((t0 + D / 10))
f=$(mono); ip -n "$ns_b" link set "$dev_b" down; sleep 2; ip -n "$ns_b" link set "$dev_b" up; g=$(mono)
note link-down 1 "$f" "$g"

sleep_until $((t0 + D / 4))
stopped_pids=$(far_pids "$a1")
f=$(mono); kill -STOP $stopped_pids; sleep 3; kill -CONT $stopped_pids; g=$(mono); stopped_pids=""
note far-side-stopped 1 "$f" "$g"

sleep_until $((t0 + D * 4 / 10))
step_clock 50; stepped=50; f=$(mono)
note wall-clock-stepped+50ms 1 "$f"
sleep_until $((t0 + D * 45 / 100))
step_clock -50; stepped=0; f=$(mono)
note wall-clock-stepped-50ms 1 "$f"

sleep_until $((t0 + D * 6 / 10))
# this run's loads only (each in a process group of its own), as an operator's kill would
f=$(mono)
killed=0
for p in $(pgrep -P "$run" -x stress-ng; pgrep -P "$run" -x iperf3); do
  g=$(ps -o pgid= -p "$p" | tr -d ' ')
  [ -n "$g" ] && kill -9 -- "-$g" 2>/dev/null && killed=$((killed + 1))
done
((killed > 0)) || die "case 1 runs no stress-ng or iperf3 of its own to kill (its loads did not start?)"
note loads-killed 1 "$f"

sleep_until $((t0 + D * 7 / 10))
filler="$store_dir/filler"
f=$(mono); dd if=/dev/zero of="$filler" bs=1M status=none 2>/dev/null || true
note store-full 1 "$f"
while kill -0 "$a1" 2>/dev/null; do sleep 0.2; done
sleep 5
rm -f "$filler"; filler=""; g=$(mono)
note store-freed 1 "$f" "$g"

a2=$(wait_agent "$run" "$a1")
[ -n "$a2" ] || die "rtlab ended before case 2's far agent started (see $out/run.err)"
sleep $((settle / 1000000000 + 5))
f=$(mono); kill -9 "$a2" 2>/dev/null || true
note agent-killed 2 "$f"

a3=$(wait_agent "$run" "$a1" "$a2")
[ -n "$a3" ] || die "rtlab ended before case 3's far agent started (see $out/run.err)"
sleep $((settle / 1000000000 + 5))
f=$(mono); kill -TERM "$run"
note rtlab-sigterm 3 "$f"
wait "$run" && status=0 || status=$?
echo "soak: rtlab run ended with $status after SIGTERM; resuming" >&2
run_id=$(python3 - "$out/run.err" "$out/run.out" <<'EOF'
import re, sys
t = open(sys.argv[1]).read() + open(sys.argv[2]).read()
m = re.findall(r"--resume (\d+)", t)
print(m[-1] if m else "")
EOF
)
[ -n "$run_id" ] || die "rtlab did not say how to resume the run (see $out/run.err)"
chrt -o 0 "$rtlab" run --resume "$run_id" --db "$db" --html "$out/soak.html" >"$out/resume.out" 2>"$out/resume.err" \
  && resumed=0 || resumed=$?

"$rtlab" export "$run_id" --db "$db" --format json -o "$out/export.json"
"$rtlab" tune show >"$out/tune-show.txt" 2>&1 || true
sleep 1
left=$( (pgrep -a -x stress-ng; pgrep -a -x iperf3; pgrep -a -f ' agent --keepalive'; ip netns list | grep '^rtlab' ) 2>/dev/null || true)

python3 - "$out" "$run_id" "$resumed" "$minutes" "$rate" "$left" <<'EOF'
import json, sys, os
out, run_id, resumed, minutes, rate, left = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
faults = [json.loads(l) for l in open(os.path.join(out, "faults.jsonl"))]
exp = json.load(open(os.path.join(out, "export.json")))
run = exp
cases = run["cases"]
fails = []
def check(ok, what):
    if not ok:
        fails.append(what)
    return ok
summary = {"run": run_id, "rate": rate, "minutes": minutes, "cases": [], "faults": []}

def doc_of(c):
    return c.get("document") or c.get("result") or {}

check(resumed == 0, f"rtlab run --resume {run_id} exited {resumed}")
check(len(cases) == 3, f"the store holds {len(cases)} cases, not 3")
for i, c in enumerate(cases, 1):
    d = doc_of(c)
    row = {"case": i, "name": c.get("name"), "status": c.get("status"), "streams": []}
    for s in d.get("streams", []):
        st, lab = s.get("stats", {}), s.get("labels", {})
        # the receivers' streams (what was sent and what came back); not the sender's lateness
        if "published" not in lab or st.get("lost") is None:
            continue
        pub = int(lab["published"])
        n, late, lost = st.get("count", 0), st.get("late") or 0, st.get("lost") or 0
        dup = st.get("duplicates") or 0
        missed = st.get("missed") or 0
        row["streams"].append({"stream": s["name"], "published": pub, "on_time": n - missed, "missed": missed,
                               "late": late, "lost": lost, "duplicates": dup})
        check(pub == n + late + lost, f"case {i} {s['name']}: published {pub} != samples {n} + late {late} + lost {lost}")
        check(n + late <= pub, f"case {i} {s['name']}: received {n + late} of {pub} published")
    summary["cases"].append(row)

def windows_of(d):
    s = next((s for s in d.get("streams", []) if "published" in s.get("labels", {})), None)
    return s

warn = lambda d, code: [w for w in d.get("warnings", []) if w.get("code") == code]
import re
def window_in(w):
    m = re.search(r"\(window (\d+)\)", w["message"])
    return int(m.group(1)) if m else None

if cases:
    d1 = doc_of(cases[0])
    s = windows_of(d1)
    start, width = (s or {}).get("start_monotonic_ns"), ((s or {}).get("windows") or {}).get("width_ns")
    counts = ((s or {}).get("windows") or {}).get("count", [])
    maxes = ((s or {}).get("windows") or {}).get("max_ns", [])
    per_window = rate * (width or 1) / 1e9
    codes = {"link-down": "link-down", "far-side-stopped": "far-side-stopped",
             "wall-clock-stepped+50ms": "wall-clock-stepped", "wall-clock-stepped-50ms": "wall-clock-stepped",
             "loads-killed": "load-ended"}
    for f in [f for f in faults if f["case"] == 1]:
        row = dict(f)
        if f["fault"] in codes and start and width:
            w_exp = (f["from_ns"] - start) // width
            seen = [window_in(w) for w in warn(d1, codes[f["fault"]])]
            row["window"] = w_exp
            row["rtlab_windows"] = seen
            check(any(x is not None and abs(x - w_exp) <= 1 for x in seen),
                  f"{f['fault']} at window {w_exp}: rtlab said {seen or 'nothing'}")
            end_w = ((f["to_ns"] or f["from_ns"]) - start) // width
            lost = sum(max(0, per_window - counts[k]) for k in range(w_exp, min(end_w + 2, len(counts))))
            rec = next((k for k in range(end_w + 1, len(counts)) if counts[k] >= 0.99 * per_window), None)
            row["lost_in_windows"] = round(lost)
            row["recovered_after_s"] = None if rec is None else round((rec - end_w) * width / 1e9, 1)
            before = [m for m in maxes[max(0, w_exp - 10):w_exp] if m is not None]
            after = [m for m in maxes[end_w + 1:end_w + 11] if m is not None]
            row["max_before_us"] = max(before) / 1e3 if before else None
            row["max_after_us"] = max(after) / 1e3 if after else None
        summary["faults"].append(row)
    check(any(st["lost"] > 0 for st in summary["cases"][0]["streams"]), "case 1 lost nothing though its link was down 2 s")
    # the store's fault: the case was kept and written
    err = open(os.path.join(out, "run.err")).read()
    kept = [l for l in err.splitlines() if "not stored (" in l and "kept in memory" in l]
    summary["store_full_said"] = kept[:1]
    check(bool(kept), "rtlab did not say that the full store kept a case waiting in memory")
    waited = warn(d1, "store-waited")
    summary["store_waited"] = [w["message"] for w in waited]
    check(len(waited) == 1, f"case 1 has {len(waited)} store-waited warnings, not 1")
    # memory: flat after the first minute
    rss = (d1.get("cost") or {}).get("rss", [])
    for p in ("rtlab", "agent"):
        mine = [r for r in rss if r["process"] == p]
        after = [r for r in mine if r["at_ms"] >= 60000]
        base = after[0]["rss_kib"] if after else (mine[0]["rss_kib"] if mine else None)
        top = max((r["rss_kib"] for r in (after or mine)), default=None)
        summary[f"rss_{p}_kib"] = {"at_1min": base, "max_after": top, "samples": len(mine)}
        check(len(mine) > 0, f"no RSS sample of {p} in case 1")
        if minutes > 2 and base:
            check(top <= base * 1.1 + 8192, f"{p}'s RSS grew from {base} KiB at 1 min to {top} KiB")
if len(cases) >= 2:
    d2 = doc_of(cases[1])
    ended = warn(d2, "far-side-ended")
    check(len(ended) == 1, f"case 2 (agent killed) has {len(ended)} far-side-ended warnings")
    summary["case2_said"] = [w["message"] for w in ended]
if len(cases) >= 3:
    check(any(st["published"] > 0 for st in summary["cases"][2]["streams"]), "case 3 has no round trip after --resume")
tune = open(os.path.join(out, "tune-show.txt")).read()
summary["tune_show"] = tune.strip()
check(tune.startswith("nothing applied by rtlab"), f"rtlab tune show is not empty: {tune.strip()[:300]}")
summary["left"] = left
check(left.strip() == "", f"left running: {left.strip()}")
summary["failed"] = fails
json.dump(summary, open(os.path.join(out, "soak.json"), "w"), indent=1)
for f in summary["faults"]:
    print("soak: case {case} {fault}: window {w} (rtlab: {rw}), lost {l}, recovered after {r} s, max before {b} us, after {a} us".format(
        case=f["case"], fault=f["fault"], w=f.get("window"), rw=f.get("rtlab_windows"), l=f.get("lost_in_windows"),
        r=f.get("recovered_after_s"), b=f.get("max_before_us"), a=f.get("max_after_us")))
for c in summary["cases"]:
    for s in c["streams"]:
        print(f"soak: case {c['case']} {s['stream']}: published {s['published']} = on time {s['on_time']} + missed {s['missed']} + late {s['late']} + lost {s['lost']} (duplicates {s['duplicates']} apart)")
for p in ("rtlab", "agent"):
    print(f"soak: RSS {p}: {summary.get('rss_' + p + '_kib')}")
for f in fails:
    print(f"soak: FAILED: {f}", file=sys.stderr)
print(f"soak: {'FAILED' if fails else 'passed'}: {out}/soak.json")
sys.exit(1 if fails else 0)
EOF
