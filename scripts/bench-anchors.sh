#!/usr/bin/env bash
# rtlab's closed-loop pub/sub round trip beside the middleware's own ping-pong benchmark, in
# one run, alternating rtlab and the anchor ROUNDS times per case, at 64 B and 64 KiB.
#
#   shm busy-poll: iceoryx2's own benchmark (its repository's benchmarks/publish-subscribe),
#        built against the iceoryx2 0.10 crate from the registry: two threads pinned to CPUs 0
#        and 1, busy loop, one process; it prints the mean of RTT/2. rtlab: `pubsub --transport
#        shm --mode roundtrip --schedule closed-loop --wait busy-poll --in-process --cpus 0,1
#        --history keep-last:1` (the pinger thread on CPU 0, the echo thread on CPU 1,
#        SCHED_OTHER, a subscriber buffer of one sample, best effort: the anchor's settings).
#        At 64 KiB the anchor runs twice: as it ships (true zero copy: nothing is written into
#        a sample) and with --send-copy (its echo fills each sample before it waits); rtlab's
#        publisher and echo each write the message body into their next sample after a send.
#   shm floor: core-to-core-latency (crates.io 1.2.0, installed under $ANCHOR_DIR): a cache
#        line's handoff between CPUs 0 and 1, one way; two handoffs are the floor of a round
#        trip through shared memory, and every shm busy-poll row says its multiple of it.
#   shm blocking: iceoryx2 has no blocking publish-subscribe benchmark; its event benchmark
#        (benchmarks/event: two threads waking each other through notifier and listener,
#        blocking waits, no payload), the floor of a blocking round trip through iceoryx2.
#
#   dds: Cyclone's own `ddsperf ping` (closed loop: the next ping when the pong is in) against
#        `ddsperf pong`, two processes, on rtlab's loopback-only configuration; it prints RTT/2
#        statistics per second (the table doubles the cnt-weighted mean and the median of the
#        per-second p50s and p99s). Blocking: ddsperf in waitset mode. Busy-poll: ddsperf cannot
#        spin; its listener mode (the pong answers from Cyclone's receive thread) is its fastest.
#        rtlab: `pubsub --transport dds --mode roundtrip --schedule closed-loop` (its pong a
#        separate process).
#
#   zenoh: Zenoh's own z_ping/z_pong are not on the registry (the zenoh crate ships no
#        examples): a minimal ping/pong on the zenoh 1.10 API with their settings (peer mode,
#        express publishers, CongestionControl::Block, the pong republishing from its
#        subscriber callback, the ping blocking on its subscriber; busy-poll rows: the ping
#        spins on try_recv), written below and built under $ANCHOR_DIR; two processes over
#        tcp/127.0.0.1. rtlab: `pubsub --transport zenoh --mode roundtrip --schedule
#        closed-loop` (its pong a separate process).
#
#   Each zenoh and busy-poll dds table runs twice: rtlab's pong answering from a thread of its
#   own (--echo thread, the default), then from the middleware's callback (--echo callback),
#   as the anchors' pongs do: the rows say `echo callback`.
#
# The timer's anchor (cyclictest) is scripts/bench-timer.sh.
# Usage: bash scripts/bench-anchors.sh [ROUNDS=3]   (ONLY=shm,zenoh,dds: the tables to run)
# The iceoryx2 benchmarks' source comes from the user: IOX2_REPO, a clone of iceoryx2
#   (git clone https://github.com/eclipse-iceoryx/iceoryx2 /path/to/iceoryx2; its HEAD's
#   benchmarks/ are read), or IOX2_BENCH_DIR, a benchmarks/ directory; without either, one
#   line and exit 2. It is built under $ANCHOR_DIR (default /var/tmp/rtlab-anchors), never
#   inside this repository.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
rtlab=${RTLAB:-./target/release/rtlab}
anchors=${ANCHOR_DIR:-/var/tmp/rtlab-anchors}
repo=${IOX2_REPO:-}
only=",${ONLY:-shm,zenoh,dds},"
want() { [[ "$only" == *",$1,"* ]]; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
[ -x "$rtlab" ] || cargo build --release --locked -p rtlab

# --- the iceoryx2 anchor (the shm table only) ------------------------------------------------
if want shm; then
iox="$anchors/iox2-bench"
mkdir -p "$iox/src/bin"
rm -f "$iox/src/main.rs"
if [ -n "${IOX2_BENCH_DIR:-}" ]; then
  cp "$IOX2_BENCH_DIR/publish-subscribe/src/main.rs" "$iox/src/bin/iox2-pubsub.rs"
  cp "$IOX2_BENCH_DIR/event/src/main.rs" "$iox/src/bin/iox2-event.rs"
elif [ -n "$repo" ] && [ -d "$repo" ]; then
  git -C "$repo" show HEAD:benchmarks/publish-subscribe/src/main.rs > "$iox/src/bin/iox2-pubsub.rs"
  git -C "$repo" show HEAD:benchmarks/event/src/main.rs > "$iox/src/bin/iox2-event.rs"
else
  echo "bench-anchors: error: no iceoryx2 benchmark source: set IOX2_REPO to a clone of https://github.com/eclipse-iceoryx/iceoryx2 (or IOX2_BENCH_DIR to its benchmarks/)" >&2
  exit 2
fi
cat > "$iox/Cargo.toml" <<'EOF'
[package]
name = "iox2-bench"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
iceoryx2 = "=0.10.0"
iceoryx2-bb-loggers = { version = "=0.10.0", features = ["std", "console"] }
iceoryx2-bb-posix = "=0.10.0"
iceoryx2-bb-container = "=0.10.0"
clap = { version = "4", features = ["derive"] }

[profile.release]
debug = false

[workspace]
EOF
(cd "$iox" && cargo build --release -q 2>&1 | tail -3)
fi

# the mean round trip (us) of an iceoryx2 benchmark: it prints "Latency: N ns" = total / (2 x
# iterations)
iox_mean() { # BINARY ITERATIONS ARGS...
  local o
  o=$("$iox/target/release/$1" --bench-ipc -i "$2" "${@:3}" | grep "ipc_threadsafe")
  echo "$o" | sed -E 's/.*Latency: ([0-9]+) ns.*/\1/' | awk '{ printf "%.3f", 2 * $1 / 1000 }'
}
anchor_shm() { iox_mean iox2-pubsub 1000000 -p "$@"; } # SIZE [--send-copy]
# (it runs its ipc and ipc_threadsafe setups one after the other, each wake-up a blocking wait)
anchor_event() { iox_mean iox2-event 20000; }

# rtlab's p50 / p99 / mean round trip (us) of a closed-loop case; its kernel-counter sampler
# off (--no-counters), as the anchors sample nothing: on 2 CPUs its /proc reads take the
# middleware's CPU (BENCHMARKS.md "One run of every table, three rounds", from 2026-11-26 on)
rtlab_case() { # TRANSPORT SIZE WAIT COUNT EXTRA...
  local j="$out/r.json"
  "$rtlab" pubsub --transport "$1" --mode roundtrip --schedule closed-loop --payload "$2" \
    --wait "$3" --count "$4" --no-counters "${@:5}" --quiet --json "$j" >/dev/null
  python3 - "$j" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["streams"][0]["stats"]
print("%.3f %.3f %.3f %d %d" % (s["p50_ns"] / 1e3, s["p99_ns"] / 1e3, s["mean_ns"] / 1e3, s["count"], s["lost"]))
PY
}

# one table: rtlab's closed loop with receivers waiting WAIT beside an anchor that prints
# "p50 p99 mean" (RTT us), per size and round; ANCHOR is a command with SIZE in it
compare() { # TRANSPORT WAIT "ANCHOR COLUMN" "ANCHOR" COUNT RTLAB-EXTRA...
  local t=$1 wait=$2 column=$3 anchor=$4 count=$5 size r p50 p99 mean n lost a50 a99 amean
  shift 5
  local echo=""
  [[ " $* " == *" --echo callback "* ]] && echo=", echo callback"
  echo
  echo "| case | round | rtlab p50 us | rtlab p99 us | rtlab mean us | $column | p50 ratio | p99 ratio |"
  echo "|---|---|---|---|---|---|---|---|"
  for size in 64 65536; do
    for r in $(seq 1 "$rounds"); do
      read -r p50 p99 mean n lost < <(rtlab_case "$t" "$size" "$wait" "$count" "$@")
      read -r a50 a99 amean < <(${anchor//SIZE/$size})
      echo "| $t $wait${echo} ${size} B closed loop | $r | $p50 | $p99 | $mean | $a50 / $a99 / $amean" \
        "| $(awk -v x="$p50" -v y="$a50" 'BEGIN { printf "%.2f", x / y }')" \
        "| $(awk -v x="$p99" -v y="$a99" 'BEGIN { printf "%.2f", x / y }') |"
      [ "$lost" = 0 ] || echo "  (rtlab: $lost of $((n + lost)) lost)"
    done
  done
}

# The floor of a shared-memory round trip: a cache line handed from CPU 0 to CPU 1 and back.
# core-to-core-latency (crates.io, installed under $ANCHOR_DIR) pins two threads and prints
# RTT/2 per pair: bench 1 CAS on one shared line, bench 2 one writer and one reader on two
# lines (a message and its answer, as a ping-pong through shared memory). Prints the mean
# one-way ns of bench $1 between CPUs 0 and 1.
c2c="$anchors/c2c/bin/core-to-core-latency"
handoff_ns() { # BENCH -> one-way ns
  "$c2c" 5000 300 --bench "$1" --cores 0,1 --csv 2>/dev/null |
    tr ',' '\n' | awk 'NF { s += $1; n++ } END { if (n) printf "%.1f", s / n; else print "nan" }'
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
if want shm; then
[ -x "$c2c" ] || cargo install -q --locked --root "$anchors/c2c" core-to-core-latency@1.2.0
cas=$(handoff_ns 1)
rw=$(handoff_ns 2)
floor=$(awk -v x="$rw" 'BEGIN { printf "%.3f", 2 * x / 1000 }')
echo "floor (core-to-core-latency, CPUs 0-1, one way): CAS one line ${cas} ns, one writer / one reader on two lines ${rw} ns: a round trip's floor ${floor} us (two handoffs)"
echo
echo "| case | round | rtlab p50 us | rtlab p99 us | rtlab mean us | anchor mean us | mean ratio | rtlab mean / floor |"
echo "|---|---|---|---|---|---|---|---|"
for size in 64 65536; do
  variants=("")
  [ "$size" = 65536 ] && variants=("" "--send-copy")
  for v in "${variants[@]}"; do
    for r in $(seq 1 "$rounds"); do
      read -r p50 p99 mean n lost < <(rtlab_case shm "$size" busy-poll 200000 --in-process --cpus 0,1 --history keep-last:1)
      # shellcheck disable=SC2086
      a=$(anchor_shm "$size" $v)
      ratio=$(awk -v x="$mean" -v y="$a" 'BEGIN { printf "%.2f", x / y }')
      echo "| shm busy-poll ${size} B closed loop (anchor ${v:-zero copy}) | $r | $p50 | $p99 | $mean | $a | $ratio | $(awk -v x="$mean" -v y="$floor" 'BEGIN { printf "%.1f", x / y }') |"
      [ "$lost" = 0 ] || echo "  (rtlab: $lost of $((n + lost)) lost)"
    done
  done
done
# blocking: iceoryx2 has no blocking publish-subscribe benchmark; its event benchmark (two
# threads waking each other through notifier/listener, blocking waits, no payload) is the
# floor of any blocking round trip through iceoryx2, and rtlab's blocking wait is that
# listener
for size in 64 65536; do
  for r in $(seq 1 "$rounds"); do
    read -r p50 p99 mean n lost < <(rtlab_case shm "$size" blocking 20000 --in-process --cpus 0,1)
    a=$(anchor_event)
    ratio=$(awk -v x="$mean" -v y="$a" 'BEGIN { printf "%.2f", x / y }')
    echo "| shm blocking ${size} B closed loop (anchor: iceoryx2 event round trip) | $r | $p50 | $p99 | $mean | $a | $ratio | - |"
    [ "$lost" = 0 ] || echo "  (rtlab: $lost of $((n + lost)) lost)"
  done
done
fi

# --- Zenoh: a minimal ping/pong with z_ping/z_pong's settings ---------------------------------
if want zenoh; then
zp="$anchors/zenoh-pingpong"
mkdir -p "$zp/src"
cat > "$zp/Cargo.toml" <<'EOF'
[package]
name = "zenoh-pingpong"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
zenoh = { version = "=1.10.2", default-features = false, features = ["transport_tcp"] }

[profile.release]
debug = false

[workspace]
EOF
cat > "$zp/src/main.rs" <<'EOF'
// A minimal Zenoh ping/pong with the settings of Zenoh's own z_ping/z_pong examples (peer
// mode, express publishers, CongestionControl::Block, the pong republishing in its subscriber
// callback, the ping blocking on a FIFO subscriber): rtlab's anchor where the examples are not
// on the registry. Usage: pong ENDPOINT SECONDS | ping ENDPOINT SIZE COUNT [busy-poll]
// (busy-poll: the ping spins on try_recv instead of blocking in recv; not in z_ping)
use std::time::{Duration, Instant};
use zenoh::{bytes::ZBytes, qos::CongestionControl, Config, Wait};

fn config(listen: bool, endpoint: &str) -> Config {
    let mut c = Config::default();
    c.insert_json5("mode", "\"peer\"").unwrap();
    c.insert_json5("scouting/multicast/enabled", "false").unwrap();
    let key = if listen { "listen/endpoints" } else { "connect/endpoints" };
    c.insert_json5(key, &format!("[\"{endpoint}\"]")).unwrap();
    c
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    match a[1].as_str() {
        "pong" => {
            let s = zenoh::open(config(true, &a[2])).wait().unwrap();
            let p = s
                .declare_publisher("rtlab_anchor/pong")
                .congestion_control(CongestionControl::Block)
                .express(true)
                .wait()
                .unwrap();
            let _sub = s
                .declare_subscriber("rtlab_anchor/ping")
                .callback(move |sample| p.put(sample.payload().clone()).wait().unwrap())
                .wait()
                .unwrap();
            std::thread::sleep(Duration::from_secs(a[3].parse().unwrap()));
        }
        _ => {
            let (size, n): (usize, usize) = (a[3].parse().unwrap(), a[4].parse().unwrap());
            let busy = a.get(5).map(String::as_str) == Some("busy-poll");
            let s = zenoh::open(config(false, &a[2])).wait().unwrap();
            let sub = s.declare_subscriber("rtlab_anchor/pong").wait().unwrap();
            let p = s
                .declare_publisher("rtlab_anchor/ping")
                .congestion_control(CongestionControl::Block)
                .express(true)
                .wait()
                .unwrap();
            let data = ZBytes::from(vec![0u8; size]);
            // warm up: until a pong comes back (the link and the routes are up)
            loop {
                p.put(data.clone()).wait().unwrap();
                if sub.recv_timeout(Duration::from_millis(100)).ok().flatten().is_some() {
                    break;
                }
            }
            while sub.try_recv().ok().flatten().is_some() {}
            let mut rtt = Vec::with_capacity(n);
            for _ in 0..n {
                let t = Instant::now();
                p.put(data.clone()).wait().unwrap();
                if busy {
                    while sub.try_recv().unwrap().is_none() {}
                } else {
                    sub.recv().unwrap();
                }
                rtt.push(t.elapsed().as_nanos() as u64);
            }
            let mean = rtt.iter().sum::<u64>() as f64 / n as f64;
            rtt.sort_unstable();
            let q = |f: f64| rtt[((n as f64 - 1.0) * f) as usize] as f64 / 1e3;
            println!("{:.3} {:.3} {:.3}", q(0.5), q(0.99), mean / 1e3);
        }
    }
}
EOF
(cd "$zp" && cargo build --release -q 2>&1 | tail -3)
anchor_zenoh() { # SIZE COUNT [busy-poll] -> "p50 p99 mean" RTT us
  local port=$((17000 + RANDOM % 1000))
  "$zp/target/release/zenoh-pingpong" pong "tcp/127.0.0.1:$port" 60 &
  local pong=$!
  sleep 1
  timeout 60 "$zp/target/release/zenoh-pingpong" ping "tcp/127.0.0.1:$port" "$@"
  kill "$pong" 2>/dev/null || true
  wait "$pong" 2>/dev/null || true
}
compare zenoh blocking "zenoh ping/pong p50 / p99 / mean us" "anchor_zenoh SIZE 10000" 10000
compare zenoh busy-poll "zenoh ping/pong, ping spinning: p50 / p99 / mean us" "anchor_zenoh SIZE 10000 busy-poll" 10000
# the anchor's pong answers from its subscriber's callback: so does rtlab's with --echo callback
compare zenoh blocking "zenoh ping/pong p50 / p99 / mean us" "anchor_zenoh SIZE 10000" 10000 --echo callback
compare zenoh busy-poll "zenoh ping/pong, ping spinning: p50 / p99 / mean us" "anchor_zenoh SIZE 10000 busy-poll" 10000 --echo callback
fi

# --- Cyclone DDS: ddsperf ping/pong ----------------------------------------------------------
want dds || exit 0
if ! command -v ddsperf >/dev/null; then
  echo "dds: skipped: no ddsperf (apt-get install cyclonedds-tools)"
  exit 0
fi
# shellcheck source=scripts/ddsperf-rtt.sh
. scripts/ddsperf-rtt.sh  # the working directory is the repository (cd above)
anchor_dds() { # SIZE [waitset|listener] -> "p50 p99 mean" RTT us
  ddsperf_rtt "$1" "${2:-waitset}" 10 "$out"
}
compare dds blocking "ddsperf (waitset) p50 / p99 / mean us (RTT)" "anchor_dds SIZE" 20000 --reliability reliable --history keep-last:1
# ddsperf cannot busy-poll: its fastest mode, listener (the pong answers from Cyclone's receive
# thread, no wake-up of another thread), is the anchor for rtlab's busy-poll
compare dds busy-poll "ddsperf (listener) p50 / p99 / mean us (RTT)" "anchor_dds SIZE listener" 20000 --reliability reliable --history keep-last:1
# ... and rtlab's pong answering from Cyclone's listener as ddsperf's does (--echo callback)
compare dds busy-poll "ddsperf (listener) p50 / p99 / mean us (RTT)" "anchor_dds SIZE listener" 20000 --reliability reliable --history keep-last:1 --echo callback
