#!/usr/bin/env bash
# Build rtlab for aarch64 (64-bit ARM: NVIDIA Jetson, Raspberry Pi 4/5, NXP i.MX 8, Rockchip)
# on this x86-64 Debian 12 machine, and run what it built here under qemu-user.
#
# The toolchain is Debian's: rustc-web and cargo-web (Rust 1.96) with the arm64 standard
# library (libstd-rust-web-dev:arm64; the rustup toolchain here has no aarch64 target and
# cannot fetch one), gcc/g++-aarch64-linux-gnu for the C and C++ the crates build, and Debian's
# arm64 Fast DDS 2.9 (libfastrtps-dev:arm64) for the fastdds transport's shim. Everything is
# linked against Debian 11's arm64 C library (glibc 2.31: what runs on Debian 11 and Ubuntu
# 20.04 arm64 runs on every later one, JetPack 5 and 6 and Raspberry Pi OS included) through
# scripts/sysroot-cc: its packages (libc6, libc6-dev, linux-libc-dev, libcrypt, libgcc-s1)
# fetched by apt from this machine's Debian mirror, their signatures checked against Debian's
# keyring, and unpacked into a directory (a sysroot, not a root to run). qemu-user-static, registered with the kernel's
# binfmt_misc, runs aarch64 programs here: emulation shows behaviour, never latency.
#
# Usage: bash scripts/aarch64.sh --install      install the toolchain and make the root (root)
#        bash scripts/aarch64.sh --check        say what is missing (exit 2) or "ready" (0)
#        bash scripts/aarch64.sh --env          the exports, for eval "$(bash scripts/aarch64.sh --env)"
#        bash scripts/aarch64.sh CMD...         run CMD with them, e.g.
#            bash scripts/aarch64.sh cargo build --release --locked -p rtlab --target aarch64-unknown-linux-gnu
# scripts/setup.sh --target aarch64 runs that build and says the binary's size and glibc.
#
# The sysroot: RTLAB_SYSROOT_ARM64 (default /var/cache/rtlab/debian-11-arm64). Under qemu-user the programs take this machine's arm64 libraries (multiarch,
# /usr/lib/aarch64-linux-gnu: Debian 12's glibc, and Fast DDS for the fastdds transport).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sysroot=${RTLAB_SYSROOT_ARM64:-/var/cache/rtlab/debian-11-arm64}
# shellcheck source=pins.sh
. "$here/pins.sh"

PACKAGES=(
  rustc-web cargo-web libstd-rust-web-dev:arm64       # Rust 1.96 and its arm64 standard library
  gcc-aarch64-linux-gnu g++-aarch64-linux-gnu         # the C and C++ of the crates (Cyclone DDS, the Fast DDS shim)
  libfastrtps-dev:arm64 libfastcdr-dev:arm64          # the fastdds transport's shim, against Debian's arm64 Fast DDS 2.9
  qemu-user-static                                    # aarch64 programs run here (binfmt_misc)
)
# Debian 11's arm64 C library: the sysroot every aarch64 binary is linked against
SYSROOT_PACKAGES=(libc6 libc6-dev linux-libc-dev libcrypt1 libcrypt-dev libgcc-s1)
BINFMT=/proc/sys/fs/binfmt_misc

binfmt_ready() { [ -r "$BINFMT/qemu-aarch64" ] && grep -qx enabled "$BINFMT/qemu-aarch64"; }

missing() {
  local m=()
  mapfile -t m < <(apt_missing "${PACKAGES[@]}")
  binfmt_ready || m+=("qemu-aarch64 registered in binfmt_misc (--install registers it)")
  [ -e "$sysroot/usr/lib/aarch64-linux-gnu/libc_nonshared.a" ] ||
    m+=("the Debian 11 arm64 sysroot at $sysroot (--install makes it)")
  echo "${m[*]}"
}

# qemu-user for aarch64 in binfmt_misc, as Debian's qemu-user-static describes it
# (/usr/lib/binfmt.d/qemu-aarch64.conf: the F flag opens the interpreter now, so that it also
# runs in namespaces and chroots); systemd-binfmt does it at boot on a machine that runs systemd
register_binfmt() {
  binfmt_ready && return
  [ -e "$BINFMT/register" ] || mount -t binfmt_misc binfmt_misc "$BINFMT"
  [ -e "$BINFMT/qemu-aarch64" ] && echo -1 > "$BINFMT/qemu-aarch64"
  grep -v '^#' /usr/lib/binfmt.d/qemu-aarch64.conf > "$BINFMT/register"
  echo "aarch64: qemu-aarch64 registered in binfmt_misc (aarch64 programs run here under emulation)"
}

install() {
  if [ -z "$(missing)" ]; then
    echo "aarch64: ready (Debian 11 arm64 sysroot at $sysroot)"
    return
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "aarch64: error: missing $(missing) and not root to install it" >&2
    exit 2
  fi
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
    echo "aarch64: dpkg --add-architecture arm64 (apt now installs arm64 packages beside this machine's)"
  fi
  apt_install_pinned "${PACKAGES[@]}"
  register_binfmt
  [ -e "$sysroot/usr/lib/aarch64-linux-gnu/libc_nonshared.a" ] || make_sysroot
}

# the sysroot: SYSROOT_PACKAGES of Debian 11 (bullseye) for arm64, through an apt of its own
# (its lists and cache in a temporary directory: this machine's apt is left as it is)
make_sysroot() {
  local t=$SECONDS tmp="$sysroot.new" a d
  a=$(mktemp -d)
  mkdir -p "$a/debs"
  echo "deb [arch=arm64] $(debian_mirror) bullseye main" > "$a/sources.list"
  if ! apt_arm64 apt-get "$a" update > "$a/log" 2>&1 ||
    ! (cd "$a/debs" && apt_arm64 apt-get "$a" download "${SYSROOT_PACKAGES[@]}") >> "$a/log" 2>&1; then
    echo "aarch64: error: fetching Debian 11's arm64 ${SYSROOT_PACKAGES[*]} from $(debian_mirror) failed:" >&2
    tail -n 20 "$a/log" >&2
    rm -rf "$a"
    exit 2
  fi
  rm -rf "$tmp"
  mkdir -p "$tmp"
  for d in "$a"/debs/*.deb; do dpkg-deb -x "$d" "$tmp"; done
  rm -rf "$a"
  relative_links "$tmp"   # the linker prefixes the sysroot to absolute links
  rm -rf "$sysroot"
  mv "$tmp" "$sysroot"
  echo "aarch64: Debian 11's arm64 C library (glibc $(glibc_of "$sysroot")) unpacked at $sysroot in $((SECONDS - t)) s"
}

glibc_of() { find "$1" -name 'libc-*.so' -printf '%f\n' | sed 's/^libc-\(.*\)\.so$/\1/' | sort -V | tail -n 1; }

env_lines() {
  local t=aarch64_unknown_linux_gnu
  # the build's host programs (build scripts, procedural macros) with this machine's own
  # compiler and linker, also where scripts/glibc.sh's exports are in force
  echo "unset CC_x86_64_unknown_linux_gnu CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER"
  echo "export RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc"
  echo "export RTLAB_SYSROOT=$sysroot RTLAB_SYSROOT_GCC=aarch64-linux-gnu-gcc"
  echo "export CC_$t=$here/sysroot-cc CXX_$t=aarch64-linux-gnu-g++ AR_$t=aarch64-linux-gnu-ar"
  echo "export CARGO_TARGET_${t^^}_LINKER=$here/sysroot-cc"
}

case "${1:-}" in
  --install) install; exit 0 ;;
  --check)
    m=$(missing)
    if [ -n "$m" ]; then echo "missing: $m (run: bash scripts/aarch64.sh --install, as root)"; exit 2; fi
    echo "ready"; exit 0 ;;
  --env) env_lines; exit 0 ;;
  "" | -*) echo "aarch64: error: expected --install, --check, --env or a command (see the usage at the top of $0)" >&2; exit 2 ;;
esac
m=$(missing)
if [ -n "$m" ]; then
  echo "aarch64: error: missing $m (run: bash scripts/aarch64.sh --install, as root)" >&2
  exit 2
fi
eval "$(env_lines)"
exec "$@"
