#!/usr/bin/env bash
# rtlab in a container, as ROS 2 robots run it: a Debian 12 image made without a registry
# pull (debootstrap from this machine's Debian mirror, `podman import`), and a run of a
# command in it with an rtlab binary of yours mounted as /usr/local/bin/rtlab. The
# container tests (crates/rtlab/tests/container_cli.rs) run rtlab there privileged, with only
# CAP_SYS_NICE, and with podman's default capabilities.
#
# Usage: bash scripts/container.sh --install   install podman, runc and debootstrap (at the
#                                              versions scripts/pins.txt names) and build
#                                              the image (root), then exit
#        bash scripts/container.sh --check     say what is missing (exit 2) or "ready" (0)
#        bash scripts/container.sh --bin RTLAB [PODMAN RUN OPTIONS...] -- CMD...
#
# The image: localhost/rtlab-debian:12 (minbase, with iproute2: `ip` for rtlab's namespaces;
# no stress-ng or iperf3, so the cases that load the machine say what they lack). A run is
# `podman run --rm` with runc (crun refuses cgroup-v1 hosts with a controller on v2), no
# network (lo only), and rlimits set below the machine's (podman's defaults are above
# what a host without CAP_SYS_RESOURCE may give); the options you add come after those.
set -euo pipefail

IMAGE=localhost/rtlab-debian:12
PACKAGES=(podman runc debootstrap)
# shellcheck source=pins.sh
. "$(dirname "$0")/pins.sh"

image_present() { podman image exists "$IMAGE" 2>/dev/null; }

missing() {
  local m=()
  mapfile -t m < <(apt_missing "${PACKAGES[@]}")
  command -v podman >/dev/null && ! image_present && m+=("the image $IMAGE (--install builds it)")
  echo "${m[*]}"
}

install() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "container: error: missing $(missing) and not root to install them" >&2
    exit 2
  fi
  apt_install_pinned "${PACKAGES[@]}"
  if ! image_present; then
    local t=$SECONDS
    root=$(mktemp -d /var/tmp/rtlab-debian-12.XXXXXX)
    trap 'rm -rf "${root:-}"' EXIT
    debootstrap_root container bookworm "$root" iproute2
    tar -C "$root" -c . | podman import -q - "$IMAGE" >/dev/null
    echo "container: $IMAGE built from debootstrap's Debian 12 in $((SECONDS - t)) s"
  fi
  local m
  m=$(missing)
  if [ -n "$m" ]; then
    echo "container: error: still missing after install: $m" >&2
    exit 2
  fi
  echo "container: ready ($(podman --version), $IMAGE)"
}

case "${1:-}" in
  --install) install; exit 0 ;;
  --check)
    m=$(missing)
    if [ -n "$m" ]; then echo "missing: $m (run: bash scripts/container.sh --install, as root)"; exit 2; fi
    echo "ready"; exit 0 ;;
  --bin) bin=${2:?container: error: --bin needs the rtlab binary to mount}; shift 2 ;;
  *) echo "container: error: expected --install, --check or --bin RTLAB (see the usage at the top of $0)" >&2; exit 2 ;;
esac
[ -x "$bin" ] || { echo "container: error: --bin $bin: not an executable file" >&2; exit 2; }
opts=()
while (($#)) && [ "$1" != -- ]; do opts+=("$1"); shift; done
if (($# < 2)); then
  echo "container: error: no command to run: --bin RTLAB [OPTIONS] -- CMD..." >&2
  exit 2
fi
shift
exec podman --runtime runc run --rm --network none -w /tmp \
  --ulimit nofile=1024:1024 --ulimit nproc=8192:8192 \
  -v "$(realpath "$bin")":/usr/local/bin/rtlab:ro "${opts[@]}" "$IMAGE" "$@"
