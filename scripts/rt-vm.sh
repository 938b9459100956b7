#!/usr/bin/env bash
# Boot Debian's PREEMPT_RT kernel in QEMU with this machine's own filesystem as the guest's
# root (virtme-ng), run a command inside, and return its output and exit code. The kernel
# command line is yours; the guest has 2 CPUs, 2 GiB, cgroup v2 mounted, and two virtio NICs
# joined by a QEMU hub (what one sends, the other receives: a link between two "hosts" that
# goes through real NIC drivers and their IRQs).
#
# Usage: bash scripts/rt-vm.sh [--append "KERNEL ARGS"] [--cpus N] [--memory SIZE]
#                              [--rwdir DIR] [--timeout SECONDS] -- CMD...
#        bash scripts/rt-vm.sh --install      install what it needs (root), then exit
#        bash scripts/rt-vm.sh --check        say what is missing (exit 2) or "ready" (0)
#
# Needs: Debian's linux-image-rt-amd64, qemu-system-x86, busybox-static, and virtme-ng
# (PyPI); it installs them when run as root and they are missing, at the versions
# scripts/pins.txt names. Installing the kernel
# package adds a boot entry on a real machine (the newest kernel stays the default).
# Acceleration: RT_VM_ACCEL=kvm|tcg|auto (default auto: KVM when a short KVM boot works, else
# TCG; the answer is kept in /var/cache/rtlab/rt-vm-accel). Under TCG a boot takes about a
# minute and timings are not real: test behaviour there, not latency.
# The guest sees the host's files read-only except /tmp, /var, /etc (overlays, thrown away)
# and --rwdir DIR (written through).
set -euo pipefail

append="" cpus=2 memory=2G rwdir="" timeout=1200 mode=run
while (($#)); do
  case "$1" in
    --append) append="$2"; shift 2 ;;
    --cpus) cpus="$2"; shift 2 ;;
    --memory) memory="$2"; shift 2 ;;
    --rwdir) rwdir="$2"; shift 2 ;;
    --timeout) timeout="$2"; shift 2 ;;
    --install) mode=install; shift ;;
    --check) mode=check; shift ;;
    --) shift; break ;;
    *) echo "rt-vm: error: unknown argument '$1' (see the usage at the top of $0)" >&2; exit 2 ;;
  esac
done
if [ "$mode" = run ] && (($# == 0)); then
  echo "rt-vm: error: no command to run: rt-vm.sh [options] -- CMD..." >&2
  exit 2
fi

PACKAGES=(linux-image-rt-amd64 qemu-system-x86 busybox-static)
# shellcheck source=pins.sh
. "$(dirname "$0")/pins.sh"


missing() {
  local m=()
  mapfile -t m < <(apt_missing "${PACKAGES[@]}")
  command -v vng >/dev/null || m+=("virtme-ng (PyPI)")
  [ -n "$(rt_kernel)" ] || m+=("a PREEMPT_RT kernel in /boot")
  echo "${m[*]}"
}

install() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "rt-vm: error: missing $(missing) and not root to install them" >&2
    exit 2
  fi
  apt_install_pinned "${PACKAGES[@]}"   # at the versions scripts/pins.txt names
  local vv have
  vv=$(pin pypi virtme-ng)
  have=$(vng --version 2>/dev/null | grep -o '[0-9][0-9.]*' | head -n 1 || true)
  if [ "$have" != "$vv" ]; then
    # the guest is what virtme-ng makes of this machine: the pinned one, replacing another
    [ -z "$have" ] || echo "rt-vm: virtme-ng $have installed, $vv pinned in scripts/pins.txt: installing $vv" >&2
    # Debian's own python3 has no pip until python3-pip, and wants --break-system-packages
    python3 -m pip --version >/dev/null 2>&1 || apt_install_pinned python3-pip
    python3 -m pip install -q "virtme-ng==$vv" 2>/dev/null ||
      python3 -m pip install -q --break-system-packages "virtme-ng==$vv"
    hash -r
  fi
  local m
  m=$(missing)
  if [ -n "$m" ]; then
    echo "rt-vm: error: still missing after installing: $m" >&2
    exit 2
  fi
}

case "$mode" in
  install) install; echo "rt-vm: ready: $(rt_kernel)"; exit 0 ;;
  check)
    m=$(missing)
    if [ -n "$m" ]; then echo "rt-vm: missing: $m (bash scripts/rt-vm.sh --install)"; exit 2; fi
    echo "rt-vm: ready: $(rt_kernel)"; exit 0 ;;
esac

[ -z "$(missing)" ] || install
k=$(rt_kernel)
vng_args=(-r "$k" --cpus "$cpus" --memory "$memory")
[ -n "$append" ] && vng_args+=(--append "$append")
[ -n "$rwdir" ] && vng_args+=(--rwdir "$rwdir")
# two virtio NICs on one QEMU hub: a link inside the guest through real drivers
nics="-netdev hubport,id=rtnet0,hubid=0 -device virtio-net-pci,netdev=rtnet0"
nics+=" -netdev hubport,id=rtnet1,hubid=0 -device virtio-net-pci,netdev=rtnet1"

# Run a command in its own session with a time limit; on expiry the whole session goes (vng
# and the QEMU it started: killing vng alone leaves QEMU running). Exit code 124 then.
bounded_pid=""
# Ctrl-C or a kill of this script ends the guest too (it runs in a session of its own)
trap '[ -n "$bounded_pid" ] && kill -TERM -- -"$bounded_pid" 2>/dev/null; exit 130' INT TERM
# With $booted_within set (and OUT a file): the guest must have written $boot_marker within
# that many seconds, or the session goes and the exit code is 125.
run_bounded() {
  local limit=$1 out=$2 pid waited=0 rc boot=${booted_within:-0}
  shift 2
  if [ "$out" = - ]; then setsid "$@" & else setsid "$@" >"$out" & fi
  pid=$!
  bounded_pid=$pid
  while kill -0 "$pid" 2>/dev/null; do
    if ((boot > 0 && waited >= boot * 10)); then
      if grep -qs "$boot_marker" "$out"; then boot=0; else limit=0; fi
    fi
    if ((waited >= limit * 10)); then
      kill -TERM -- -"$pid" 2>/dev/null; sleep 2; kill -KILL -- -"$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      bounded_pid=""
      if ((boot > 0)); then return 125; else return 124; fi
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  wait "$pid"; rc=$?
  bounded_pid=""
  return $rc
}

# KVM or TCG: a KVM guest may stop early in boot on a nested host that exposes almost no CPU
# features while /dev/kvm still opens; a short boot tells
accel=${RT_VM_ACCEL:-auto}
if [ "$accel" = auto ]; then
  cache=$RT_VM_ACCEL_CACHE
  accel=$(rt_vm_cached_accel "$k")
  if [ -z "$accel" ]; then
    accel=tcg
    if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
      echo "rt-vm: trying KVM (a short boot, at most 40 s; the answer is kept in $cache)" >&2
      probe=$(mktemp)
      run_bounded 40 "$probe" vng -r "$k" --cpus 1 --memory 512M -- echo rt-vm-kvm-ok 2>/dev/null || true
      grep -q rt-vm-kvm-ok "$probe" && accel=kvm
      rm -f "$probe"
    fi
    mkdir -p "$(dirname "$cache")" 2>/dev/null && echo "$accel $k" > "$cache" 2>/dev/null || true
  fi
fi
[ "$accel" = tcg ] && vng_args+=(--disable-kvm)

cmd=$(printf '%q ' "$@")
echo "rt-vm: $(basename "$k"), ${accel}, ${cpus} CPUs, ${memory}, append '${append}'" >&2
start=$SECONDS
# The guest says it booted before the command runs; one that says nothing within
# RT_VM_BOOT_WAIT s (default 300; a TCG boot takes 30-60 s) hung in boot — seen once in CI
# here, QEMU idle for 25 min — and is booted once more. The command's output is shown when
# the guest is done.
boot_marker=rt-vm-booted
log=$(mktemp)
set +e
for attempt in 1 2; do
  : >"$log"
  t=$SECONDS
  # vng returns the command's exit code; QEMU's note that the hub has no host network is noise
  booted_within=${RT_VM_BOOT_WAIT:-300} run_bounded "$timeout" "$log" \
    vng "${vng_args[@]}" --qemu-opts="$nics" -- "echo $boot_marker; $cmd" \
    2> >(grep -v "is not connected to host network" >&2)
  rc=$?
  # a guest that never printed its boot marker never ran the command, so nothing of it is
  # lost by booting once more: a hung boot (125), or one that ended early (virtme-ng's 255,
  # "QEMU ended without the command's exit code": seen once, the 8-CPU TCG guest after 11 s)
  if [ $attempt = 2 ] || [ $rc -eq 0 ] || grep -qs "$boot_marker" "$log"; then break; fi
  if [ $rc -eq 125 ]; then
    echo "rt-vm: the guest printed nothing in ${RT_VM_BOOT_WAIT:-300} s (a hung boot): booting it again" >&2
  else
    echo "rt-vm: the guest ended (exit $rc) after $((SECONDS - t)) s before it ran the command (a failed boot): booting it again" >&2
  fi
done
set -e
tr -d '\r' <"$log" | grep -v -x "$boot_marker" || true
rm -f "$log"
if [ $rc -eq 124 ]; then
  echo "rt-vm: error: the guest did not finish within ${timeout} s" >&2
elif [ $rc -eq 125 ]; then
  echo "rt-vm: error: the guest hung in boot twice (nothing printed in ${RT_VM_BOOT_WAIT:-300} s)" >&2
fi
echo "rt-vm: exit code $rc after $((SECONDS - start)) s" >&2
exit $rc
