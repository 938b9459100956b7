#!/usr/bin/env bash
# Coverage-guided fuzzing of what other machines and programs write (fuzz/targets.rs):
# every target for SECONDS (default 30) with libFuzzer, from a copy of its committed corpus.
# Needs the nightly toolchain (`rustup toolchain install nightly`) and cargo-fuzz (installed
# from crates.io at the version scripts/pins.txt names when another or none is there).
# Limits: an input of at most 64 KiB, no single allocation over 256 MB and no more than 2 GB
# in all (an unbounded allocation is a failure), 10 s an input. A crash leaves its input in
# fuzz/artifacts/NAME/ and exits 1: add it to fuzz/corpus/NAME/ once fixed (the corpus is
# replayed by crates/rtlab/tests/fuzz_corpus.rs).
# Usage: bash scripts/fuzz.sh [SECONDS] [TARGET...]     KEEP=1: the new inputs go into fuzz/corpus
#        bash scripts/fuzz.sh --build                  install cargo-fuzz and build the targets, then stop
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0
if [ "${1:-}" = --build ]; then
  build_only=1
  shift
fi
secs=${1:-30}
shift || true
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "fuzz: skipped: no nightly toolchain (rustup toolchain install nightly --profile minimal)"
  exit 0
fi
# shellcheck source=pins.sh
. scripts/pins.sh
want=$(pin crates cargo-fuzz)
have=$(cargo +nightly fuzz --version 2>/dev/null | grep -o '[0-9][0-9.]*' | head -n 1 || true)
if [ "$have" != "$want" ]; then
  echo "fuzz: installing cargo-fuzz $want from crates.io (scripts/pins.txt)${have:+, replacing $have}"
  cargo install cargo-fuzz --version "$want" --locked -q --force
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
# no sanitizer: rtlab's own code is safe Rust, and the C/C++ middleware its crates build is
# not instrumented; coverage guidance and the limits above still apply
cargo +nightly fuzz build -O -s none >/dev/null
if [ "$build_only" = 1 ]; then
  echo "fuzz: built ${#targets[@]} targets"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=()
for t in "${targets[@]}"; do
  mkdir -p "$work/$t"
  cp -r "fuzz/corpus/$t/." "$work/$t/"
  dir="$work/$t"
  [ "${KEEP:-0}" = 1 ] && dir="fuzz/corpus/$t"
  if cargo +nightly fuzz run -O -s none "$t" "$dir" -- -max_total_time="$secs" -max_len=65536 \
      -malloc_limit_mb=256 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 > "$work/$t.log" 2>&1; then
    echo "fuzz: $t: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t.log" | grep -o '[0-9]*$') inputs in ${secs} s, no failure ($(ls "$dir" | wc -l) in its corpus)"
  else
    echo "fuzz: $t: FAILED:"
    grep -a -E "panicked|ERROR|SUMMARY|Test unit written|out-of-memory|malloc" "$work/$t.log" | head -20
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]} (inputs in fuzz/artifacts/)"
  exit 1
fi
