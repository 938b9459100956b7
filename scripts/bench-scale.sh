#!/usr/bin/env bash
# S3's 12-hour cases at constant memory: one case of 4.32 million slots (S3: 12 h at
# 100 Hz), run faster — the timer at INTERVAL (default 50 us: 216 s) — through `rtlab run` (measured,
# stored, reported), with rtlab's resident memory sampled every second from /proc; then the
# time `rtlab report` takes for that case, the HTML report's size, and the time `rtlab runs`
# takes on a store holding 1000 runs (the case's run copied 999 times inside SQLite).
# Usage: bash scripts/bench-scale.sh [INTERVAL=50us]   (root: SCHED_FIFO 80, mlockall)
# (at 20 us this 2-vCPU VM skipped half the slots as overruns: 2.28 M samples of 4.32 M slots)
set -euo pipefail
cd "$(dirname "$0")/.."
rtlab=$(realpath "${RTLAB:-./target/release/rtlab}")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
[ -x "$rtlab" ] || cargo build --release --locked -p rtlab

interval=${1:-50us}
cat > "$dir/scale.toml" <<EOF
name = "scale"
description = "one case of 4.32 million slots: S3's 12 h at 100 Hz, as the timer at $interval"

[[probe]]
kind = "timer"
interval = "$interval"
count = ${COUNT:-4320000}
policy = "fifo"
priority = 80
EOF

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
db="$dir/scale.db"
start=$(date +%s.%N)
"$rtlab" run "$dir/scale.toml" --db "$db" --html "$dir/run.html" -q > "$dir/run.out" 2>&1 &
pid=$!
: > "$dir/rss"
while kill -0 "$pid" 2>/dev/null; do
  awk -v t="$(date +%s.%N)" -v s="$start" '/^VmRSS/ { printf "%.1f %d\n", t - s, $2 }' "/proc/$pid/status" >> "$dir/rss" 2>/dev/null || true
  sleep 1
done
wait "$pid" || { echo "bench-scale: rtlab run failed:"; cat "$dir/run.out"; exit 1; }
end=$(date +%s.%N)
python3 - "$dir/rss" "$start" "$end" <<'PY'
import sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
wall = float(sys.argv[3]) - float(sys.argv[2])
print(f"rtlab run: {wall:.1f} s wall for the case (measure + store + report)")
if rows:
    kb = [r[1] for r in rows]
    pts = sorted({0, min(10, len(kb) - 1)} | {int(f * (len(kb) - 1)) for f in (0.25, 0.5, 0.75, 1.0)})
    print("RSS (kB) at " + ", ".join(f"{rows[i][0]:.0f} s: {kb[i]:.0f}" for i in pts) + f"; max {max(kb):.0f}")
PY
run=$("$rtlab" runs --db "$db" --json | python3 -c 'import json,sys; r=json.load(sys.stdin); r=r if isinstance(r, list) else r["runs"]; print(max(x["id"] for x in r))')
"$rtlab" export "$run" --db "$db" --format json > "$dir/export.json"
python3 - "$dir/export.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def walk(x):
    if isinstance(x, dict):
        if "stats" in x and "name" in x:
            yield x
        for v in x.values():
            yield from walk(v)
    elif isinstance(x, list):
        for v in x:
            yield from walk(v)
for s in walk(d):
    if s["name"] in ("thread0", "all"):
        st = s["stats"]
        print(f"stream {s['name']}: {st['count']} samples, {st.get('overruns')} overruns, "
              f"{len(s.get('windows') or [])} windows, {len((s.get('histogram') or {}).get('buckets') or [])} histogram buckets")
PY
t0=$(date +%s.%N)
"$rtlab" report "$run" --db "$db" > "$dir/report.txt"
t1=$(date +%s.%N)
echo "terminal report: $(wc -l < "$dir/report.txt") lines, $(wc -c < "$dir/report.txt") bytes"
"$rtlab" report "$run" --db "$db" --html "$dir/report.html" > /dev/null
t2=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "rtlab report (terminal): %.2f s; with --html: %.2f s\n", b - a, c - b }'
echo "HTML report: $(stat -c %s "$dir/report.html") bytes; store: $(stat -c %s "$db") bytes"

# 1000 runs: the run copied 999 times inside SQLite, every row that belongs to it (cases,
# their parameters, documents, statistics, histograms, windows, evidence...) with new ids
python3 - "$db" "$run" <<'PY'
import sqlite3, sys
db, run = sys.argv[1], int(sys.argv[2])
c = sqlite3.connect(db)
c.execute("pragma foreign_keys = off")
tables = [r[0] for r in c.execute("select name from sqlite_master where type='table' and name not like 'sqlite_%'")]
cols = {t: [r[1] for r in c.execute(f"pragma table_info({t})")] for t in tables}
def rows(t, col, val):
    return [dict(zip(cols[t], r)) for r in c.execute(f"select * from {t} where {col} = ?", (val,))]
def insert(t, row):
    ks = list(row)
    cur = c.execute(f"insert into {t} ({','.join(ks)}) values ({','.join('?' * len(ks))})", [row[k] for k in ks])
    return cur.lastrowid
by_run = [t for t in tables if "run_id" in cols[t] and t not in ("runs", "cases")]
by_case = [t for t in tables if "case_id" in cols[t] and "run_id" not in cols[t]]
by_stream = [t for t in tables if "stream_id" in cols[t]]
for _ in range(999):
    r = rows("runs", "id", run)[0]; r["id"] = None
    new_run = insert("runs", r)
    cases = {}
    for row in rows("cases", "run_id", run):
        old = row["id"]; row["id"] = None; row["run_id"] = new_run
        cases[old] = insert("cases", row)
    for t in by_run:
        for row in rows(t, "run_id", run):
            row["run_id"] = new_run
            if row.get("case_id") is not None: row["case_id"] = cases[row["case_id"]]
            if "id" in row: row["id"] = None
            insert(t, row)
    streams = {}
    for t in by_case:
        for old_case, new_case in cases.items():
            for row in rows(t, "case_id", old_case):
                row["case_id"] = new_case
                if t == "statistics":
                    old = row["id"]; row["id"] = None
                    streams[old] = insert(t, row)
                else:
                    if "id" in row: row["id"] = None
                    insert(t, row)
    for t in by_stream:
        for old_s, new_s in streams.items():
            for row in rows(t, "stream_id", old_s):
                row["stream_id"] = new_s
                insert(t, row)
c.commit()
print(f"store: {c.execute('select count(*) from runs').fetchone()[0]} runs, {c.execute('select count(*) from cases').fetchone()[0]} cases")
PY
echo "store with 1000 runs: $(stat -c %s "$db") bytes"
for i in 1 2 3; do
  t0=$(date +%s.%N)
  "$rtlab" runs --db "$db" > "$dir/runs.txt"
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" -v n="$(wc -l < "$dir/runs.txt")" 'BEGIN { printf "rtlab runs (1000 runs, %d lines): %.3f s\n", n, b - a }'
done
t0=$(date +%s.%N)
"$rtlab" report "$run" --db "$db" > /dev/null
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" 'BEGIN { printf "rtlab report of the case in the 1000-run store: %.2f s\n", b - a }'
