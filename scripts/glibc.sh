#!/usr/bin/env bash
# Build rtlab for glibc 2.31 and every later one (Debian 11, Ubuntu 20.04: the ROS 1 Noetic
# and ROS 2 Foxy robots) on this Debian 12 machine: a Debian 11 root made by debootstrap
# (with libc6-dev) is the sysroot of gcc, which compiles the C the crates build and links
# every binary (scripts/sysroot-cc). The Rust toolchain is this machine's: its standard
# library asks for glibc 2.17. C++ is left to the machine's g++: only the Fast DDS shims,
# loaded by `--transport fastdds` when the machine has Fast DDS, are C++.
#
# Usage: bash scripts/glibc.sh --install      make the root (root), then exit
#        bash scripts/glibc.sh --check        say what is missing (exit 2) or "ready" (0)
#        bash scripts/glibc.sh --env          the exports, for eval "$(bash scripts/glibc.sh --env)"
#        bash scripts/glibc.sh CMD...         run CMD with them, e.g.
#            bash scripts/glibc.sh cargo build --release -p rtlab --target x86_64-unknown-linux-gnu
#
# Give such a build a target directory of its own (--target does: target/x86_64-unknown-
# linux-gnu/): Cyclone DDS's CMake cache from a native build in the same directory keeps the
# machine's headers (OpenSSL's) and the build fails. CI builds a fresh clone this way only.
#
# The root: RTLAB_SYSROOT (default /var/cache/rtlab/debian-11), from this machine's Debian
# mirror; the tests also run rtlab inside it (crates/rtlab/tests/glibc_cli.rs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sysroot=${RTLAB_SYSROOT:-/var/cache/rtlab/debian-11}
# shellcheck source=pins.sh
. "$here/pins.sh"

missing() {
  local m=()
  mapfile -t m < <(apt_missing debootstrap)
  [ -e "$sysroot/usr/lib/x86_64-linux-gnu/libc_nonshared.a" ] ||
    m+=("the Debian 11 root at $sysroot (--install makes it)")
  echo "${m[*]}"
}

install() {
  if [ -z "$(missing)" ]; then
    echo "glibc: ready (Debian 11 root at $sysroot)"
    return
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "glibc: error: missing $(missing) and not root to make it" >&2
    exit 2
  fi
  apt_install_pinned debootstrap
  local t=$SECONDS tmp="$sysroot.new"
  # iproute2: `ip` for the namespaces of the tests run inside the root
  debootstrap_root glibc bullseye "$tmp" libc6-dev,iproute2
  relative_links "$tmp"   # the linker prefixes the sysroot to absolute links
  rm -rf "$sysroot"
  mv "$tmp" "$sysroot"
  echo "glibc: Debian 11 root (glibc $(ls "$sysroot"/usr/lib/x86_64-linux-gnu/libc-*.so | grep -o '[0-9][0-9.]*[0-9]' | tail -n 1)) made at $sysroot in $((SECONDS - t)) s"
}

env_lines() {
  local t=x86_64_unknown_linux_gnu
  echo "export RTLAB_SYSROOT=$sysroot"
  echo "export CC_$t=$here/sysroot-cc"
  echo "export CARGO_TARGET_${t^^}_LINKER=$here/sysroot-cc"
}

case "${1:-}" in
  --install) install; exit 0 ;;
  --check)
    m=$(missing)
    if [ -n "$m" ]; then echo "missing: $m (run: bash scripts/glibc.sh --install, as root)"; exit 2; fi
    echo "ready"; exit 0 ;;
  --env) env_lines; exit 0 ;;
  "" | -*) echo "glibc: error: expected --install, --check, --env or a command (see the usage at the top of $0)" >&2; exit 2 ;;
esac
m=$(missing)
if [ -n "$m" ]; then
  echo "glibc: error: missing $m (run: bash scripts/glibc.sh --install, as root)" >&2
  exit 2
fi
eval "$(env_lines)"
exec "$@"
