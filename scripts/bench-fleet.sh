#!/usr/bin/env bash
# The fleet's store (issue 26): a PostgreSQL store of RUNS runs (default 10000) of a real
# 14-case run (140 000 cases), then
#   - the dashboard's pages served from it (`rtlab serve`): the runs page, a case's trend of
#     its newest 1000 runs, the trend index, two hosts side by side; wall time of each HTTP
#     request (curl), 5 in a row; the same pages from a SQLite store of the same runs;
#   - `rtlab runs` and `rtlab report` on SQLite and PostgreSQL side by side;
#   - S3's 4.32 M-sample case (the timer at 50 us, 4 320 000 slots, through `rtlab run`)
#     pushed from SQLite into PostgreSQL, as stored (histogram, windows, evidence), then with
#     its 4.32 M raw samples (measured by `rtlab timer --raw-file` at the same rate).
# PostgreSQL 15 (Debian's) in a throw-away cluster in a temporary directory, initdb's
# defaults (fsync on), scram-sha-256 password auth on 127.0.0.1; as root it runs as nobody.
# Usage: bash scripts/bench-fleet.sh [RUNS=10000]      (SKIP_RAW=1: no 4.32 M-sample case)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10000}
profile=${PROFILE:-release}   # PROFILE=debug: the debug build (say so with the figures)
flag=--release; [ "$profile" = debug ] && flag=
cargo build $flag --locked -p rtlab -p rtlab-store --example fleet --bin rtlab
rtlab=$(realpath "./target/$profile/rtlab")
fleet=$(realpath "./target/$profile/examples/fleet")
bin=/usr/lib/postgresql/15/bin
[ -x "$bin/initdb" ] || { echo "bench-fleet: PostgreSQL 15 is not installed ($bin; scripts/setup.sh installs it)"; exit 2; }
command -v curl >/dev/null || { echo "bench-fleet: curl is needed"; exit 2; }

dir=$(mktemp -d)
as=()
if [ "$(id -u)" = 0 ]; then chown nobody "$dir"; as=(setpriv --reuid=65534 --regid=65534 --clear-groups); fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
pw=bench-$RANDOM$RANDOM
serve_pid=
cleanup() {
  [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null || true
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
printf '%s' "$pw" > "$dir/pw"; chmod 644 "$dir/pw"
(cd "$dir" && "${as[@]}" "$bin/initdb" -D "$dir/data" -U rtlab --auth-local=trust --auth-host=scram-sha-256 --pwfile="$dir/pw" >/dev/null)
(cd "$dir" && "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -o "-p $port -c listen_addresses=127.0.0.1 -k $dir" -w -l "$dir/log" start >/dev/null)
psql() { (cd "$dir" && "${as[@]}" "$bin/psql" -h "$dir" -p "$port" -U rtlab -At "$@"); }
(cd "$dir" && "${as[@]}" "$bin/createdb" -h "$dir" -p "$port" -U rtlab fleet)
(cd "$dir" && "${as[@]}" "$bin/createdb" -h "$dir" -p "$port" -U rtlab scale)
url="postgres://rtlab:$pw@127.0.0.1:$port/fleet"
shown="postgres://rtlab:***@127.0.0.1:$port"

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# rtlab $("$rtlab" --version | cut -d' ' -f2) ($rtlab), PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1"

# one real run of 14 timer cases (0.3 s each)
{
  echo 'name = "fleet"'
  echo 'description = "14 timer cases: the run every host of the benchmark fleet stores"'
  for i in $(seq 1 14); do
    printf '\n[[probe]]\nkind = "timer"\ninterval = "%dus"\nduration = "300ms"\n' $((100 * i))
  done
} > "$dir/fleet.toml"
"$rtlab" run "$dir/fleet.toml" --db "$dir/one.db" --html "$dir/one.html" -q >/dev/null 2>"$dir/run.err" \
  || { cat "$dir/run.err"; exit 1; }
cases=$("$rtlab" runs --db "$dir/one.db" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["cases"])')
echo "the run: $cases cases"

# the fleet: RUNS copies, 8 hosts; filling is setup (synchronous_commit off while it lasts)
psql -d fleet -c "ALTER DATABASE fleet SET synchronous_commit = off" >/dev/null
"$fleet" copy "$dir/one.db" 1 "$url" "$runs" 2>/dev/null
psql -d fleet -c "ALTER DATABASE fleet RESET synchronous_commit" >/dev/null
psql -d fleet -c "VACUUM ANALYZE" >/dev/null
"$fleet" copy "$dir/one.db" 1 "$dir/fleet.db" "$runs" 2>/dev/null
echo "PostgreSQL: $(psql -d fleet -c 'SELECT COUNT(*) FROM runs') runs, $(psql -d fleet -c 'SELECT COUNT(*) FROM cases') cases, $(psql -d fleet -c "SELECT pg_size_pretty(pg_database_size('fleet'))"); SQLite: $(du -h "$dir/fleet.db" | cut -f1)"
case=$(psql -d fleet -c "SELECT name FROM cases ORDER BY id LIMIT 1")

ms() { # label, then the command: wall ms of 5 runs in a row
  local label=$1; shift
  local out=""
  for _ in 1 2 3 4 5; do
    local s e
    s=$(date +%s%N); "$@" >/dev/null; e=$(date +%s%N)
    out="$out $(( (e - s) / 1000000 ))"
  done
  printf '| %s |%s |\n' "$label" "$out"
}
enc() { python3 -c 'import sys,urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }

pages() { # store, its label
  local log="$dir/serve.out"
  : > "$log"
  "$rtlab" serve --db "$1" --listen 127.0.0.1:0 > "$log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 100); do grep -q "serving" "$log" && break; sleep 0.1; done
  local base
  base=$(grep -o 'http://[0-9.:]*' "$log" | head -1)
  local get=(curl -sf -o /dev/null)
  echo "### the dashboard on $2 ($runs runs): ms per request, 5 in a row"
  echo "| page | ms |"
  echo "|---|---|"
  ms "/ (runs page: newest 100)" "${get[@]}" "$base/"
  ms "/?host=robot-03&offset=500" "${get[@]}" "$base/?host=robot-03&offset=500"
  ms "/trend (the case names)" "${get[@]}" "$base/trend"
  ms "/trend?case=... (newest 1000 runs)" "${get[@]}" "$base/trend?case=$(enc "$case")"
  ms "/trend?case=...&host=robot-03 (its 1000 newest)" "${get[@]}" "$base/trend?case=$(enc "$case")&host=robot-03"
  ms "/hosts?a=robot-00&b=robot-07" "${get[@]}" "$base/hosts?a=robot-00&b=robot-07"
  ms "/run/$runs (one run's report)" "${get[@]}" "$base/run/$runs"
  printf 'sizes: runs page %s B, trend %s B\n' "$(curl -sf "$base/" | wc -c)" "$(curl -sf "$base/trend?case=$(enc "$case")" | wc -c)"
  kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true; serve_pid=
}
pages "$dir/fleet.db" SQLite
pages "$url" PostgreSQL

echo "### commands ($runs runs): ms, 5 in a row"
echo "| command | SQLite | PostgreSQL |"
echo "|---|---|---|"
for c in "runs" "report $runs" "export $runs --format json"; do
  # shellcheck disable=SC2086
  a=$(ms x "$rtlab" $c --db "$dir/fleet.db" | cut -d'|' -f3)
  # shellcheck disable=SC2086
  b=$(ms x "$rtlab" $c --db "$url" | cut -d'|' -f3)
  echo "| rtlab $c |$a|$b|"
done

rm -f "$dir/fleet.db"  # disk: ~0.3 MB a run
[ "${SKIP_RAW:-0}" = 1 ] && exit 0
# S3's 4.32 M-sample case, measured for real at 50 us (216 s), then pushed
count=${COUNT:-4320000}
cat > "$dir/scale.toml" <<TOML
name = "scale"
description = "one case of $count slots: S3's 12 h at 100 Hz, as the timer at 50 us"

[[probe]]
kind = "timer"
interval = "50us"
count = $count
policy = "fifo"
priority = 80
TOML
"$rtlab" run "$dir/scale.toml" --db "$dir/scale.db" --html "$dir/scale.html" -q >/dev/null 2>&1
samples=$(python3 - "$dir/scale.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print(c.execute("SELECT MAX(count) FROM statistics").fetchone()[0])
PY
)
echo "### push of the $count-slot case ($samples samples in its largest stream)"
t() { local s e; s=$(date +%s%N); /usr/bin/time -f '%M' -o "$dir/rss" "$@" >/dev/null; e=$(date +%s%N); echo "$(( (e - s) / 1000000 )) ms, max RSS $(cat "$dir/rss") kB"; }
echo "- as stored (histogram, windows, evidence): $(t "$rtlab" push --db "$dir/scale.db" --to "${url%/fleet}/scale")"
"$rtlab" timer --interval 50us --loops "$count" --policy fifo --priority 80 --raw-file "$dir/raw.csv" -q >/dev/null 2>&1 || true
rows=$(tail -n +2 "$dir/raw.csv" | grep -c . || true)  # the first line is the header
"$fleet" attach-raw "$dir/scale.db" 1 "$dir/raw.csv" "$dir/raw.db" >/dev/null
echo "- with its raw samples ($rows rows, $(du -h "$dir/raw.db" | cut -f1) as SQLite): $(t "$rtlab" push --db "$dir/raw.db" --to "${url%/fleet}/scale")"
echo "  stored there: $(psql -d scale -c 'SELECT COUNT(*) FROM raw_samples') raw samples"
echo "(the URL: $shown)"
