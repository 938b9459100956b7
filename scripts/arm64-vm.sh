#!/usr/bin/env bash
# Boot Debian's arm64 PREEMPT_RT kernel (linux-image-rt-arm64: the same 6.1 RT kernel as
# rt-vm.sh's, built for arm64) in qemu-system-aarch64 on a small Debian 12 arm64 root, run a
# command inside, and return its output and exit code: the aarch64 side of the RT-kernel
# suite (tests/rt_kernel.rs). The guest has 2 CPUs (a Cortex-A72, as a Raspberry Pi 4),
# 3 GiB, your kernel command line, cgroup v2 and tracefs mounted, and two virtio NICs joined
# by a QEMU hub (what one sends, the other receives), as rt-vm.sh's.
#
# Usage: bash scripts/arm64-vm.sh [--append "KERNEL ARGS"] [--cpus N] [--timeout SECONDS]
#                                 [--file PATH]... -- CMD...
#        bash scripts/arm64-vm.sh --install      fetch the kernel and make the root (root)
#        bash scripts/arm64-vm.sh --check        say what is missing (exit 2) or "ready" (0)
#
# --file PATH copies a file of this machine (an aarch64 rtlab, a test binary) into the guest
# at the same path. The root is the guest's initramfs: it lives in the guest's memory and is
# thrown away with it. Under emulation (TCG: an x86-64 machine has no arm64 KVM) a boot
# takes about a minute and timings are not real: test behaviour there, not latency.
#
# The kernel and the root: /var/cache/rtlab/arm64-vm (RTLAB_ARM64_VM). Both are Debian's arm64
# packages, fetched by apt from this machine's mirror with their signatures checked and
# unpacked (no package's scripts run: the guest's init is this script's).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=pins.sh
. "$here/pins.sh"
cache=${RTLAB_ARM64_VM:-/var/cache/rtlab/arm64-vm}

append="" cpus=2 timeout=1500 mode=run files=()
while (($#)); do
  case "$1" in
    --append) append="$2"; shift 2 ;;
    --cpus) cpus="$2"; shift 2 ;;
    --timeout) timeout="$2"; shift 2 ;;
    --file) files+=("$2"); shift 2 ;;
    --install) mode=install; shift ;;
    --check) mode=check; shift ;;
    --) shift; break ;;
    *) echo "arm64-vm: error: unknown argument '$1' (see the usage at the top of $0)" >&2; exit 2 ;;
  esac
done
if [ "$mode" = run ] && (($# == 0)); then
  echo "arm64-vm: error: no command to run: arm64-vm.sh [options] -- CMD..." >&2
  exit 2
fi

PACKAGES=(qemu-system-arm cpio)
# the guest's root: what the RT-kernel suite's guest tests and rtlab run there
ROOT_PACKAGES=(bash dash coreutils util-linux mount iproute2 procps kmod grep sed findutils
  libc-bin tcpdump rtla trace-cmd libfastrtps2.9)

missing() {
  local m=()
  mapfile -t m < <(apt_missing "${PACKAGES[@]}")
  ls "$cache"/root/boot/vmlinuz-*-rt-arm64 >/dev/null 2>&1 || m+=("the arm64 RT kernel and root in $cache (--install)")
  echo "${m[*]}"
}

install() {
  if [ -z "$(missing)" ]; then
    echo "arm64-vm: ready ($cache)"
    return
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "arm64-vm: error: missing $(missing) and not root to install it" >&2
    exit 2
  fi
  apt_install_pinned "${PACKAGES[@]}"
  local t=$SECONDS a tmp="$cache.new" kv kpin kernel=linux-image-rt-arm64
  a=$(mktemp -d)
  apt_arm64 apt-get "$a" update > "$a/log" 2>&1 || true
  # the kernel at its pinned version (the mirror's, said, when it moved on), and the root's
  # packages with everything they depend on
  kpin=$(pin debian linux-image-rt-arm64)
  if apt_arm64 apt-cache "$a" madison "$kernel" |
    awk -F'|' '{ gsub(/ /, "", $2); print $2 }' | grep -qxF "$kpin"; then
    kernel="$kernel=$kpin"
  else
    echo "pins: pin moved: debian linux-image-rt-arm64 $kpin pinned, not on the mirror: fetching its current one (update scripts/pins.txt once the tests pass with it)"
  fi
  if ! apt_arm64 apt-get "$a" install -y --download-only "$kernel" \
      "${ROOT_PACKAGES[@]}" >> "$a/log" 2>&1; then
    echo "arm64-vm: error: fetching Debian 12's arm64 kernel and root packages from $(debian_mirror) failed:" >&2
    tail -n 20 "$a/log" >&2
    rm -rf "$a"
    exit 2
  fi
  rm -rf "$tmp"
  mkdir -p "$tmp/root"
  local d
  for d in "$a"/cache/archives/*.deb; do dpkg-deb -x "$d" "$tmp/root"; done
  rm -rf "$a"
  kv=$(basename "$(ls "$tmp"/root/boot/vmlinuz-*-rt-arm64)" | sed 's/^vmlinuz-//')
  # only the modules the guest loads (the NICs' drivers, qdiscs, VLANs, veth, BPF
  # classifiers) and what they need: the rest would be 300 MB of the guest's memory
  local mods="$tmp/root/lib/modules/$kv/kernel"
  find "$mods/drivers" -mindepth 1 -maxdepth 1 ! -name net ! -name virtio ! -name char \
    ! -name block -exec rm -rf {} +
  rm -rf "$mods/sound" "$mods/fs" "$tmp/root/usr/share/"{doc,man,locale,info} \
    "$tmp/root/usr/lib/linux-image-$kv" "$tmp/root/boot/System.map-$kv"
  # module dependencies (depmod reads arm64 modules as any other)
  depmod -b "$tmp/root" "$kv"
  # what a root needs beyond its packages' files (no package script ran)
  mkdir -p "$tmp/root"/{proc,sys,dev,tmp,run,var/tmp,etc}
  # root, and tcpdump's own user (it drops to it)
  printf 'root:x:0:0:root:/root:/bin/bash\ntcpdump:x:100:101::/nonexistent:/usr/sbin/nologin\n' \
    > "$tmp/root/etc/passwd"
  printf 'root:x:0:\ntcpdump:x:101:\n' > "$tmp/root/etc/group"
  echo "rtlab-arm64" > "$tmp/root/etc/hostname"
  printf '127.0.0.1 localhost\n::1 localhost\n' > "$tmp/root/etc/hosts"
  rm -rf "$cache"
  mv "$tmp" "$cache"
  echo "arm64-vm: kernel $kv and a Debian 12 arm64 root ($(du -sh "$cache/root" | cut -f1)) in $cache in $((SECONDS - t)) s"
}

case "$mode" in
  install) install; exit 0 ;;
  check)
    m=$(missing)
    if [ -n "$m" ]; then echo "arm64-vm: missing: $m (bash scripts/arm64-vm.sh --install)"; exit 2; fi
    echo "arm64-vm: ready ($cache)"; exit 0 ;;
esac
m=$(missing)
if [ -n "$m" ]; then
  echo "arm64-vm: error: missing $m (bash scripts/arm64-vm.sh --install, as root)" >&2
  exit 2
fi
for f in "${files[@]}"; do
  [ -f "$f" ] || { echo "arm64-vm: error: --file $f: no such file" >&2; exit 2; }
done

work=$(mktemp -d /var/tmp/rtlab-arm64-vm.XXXXXX)
qpid=""
cleanup() { [ -n "$qpid" ] && kill -KILL "$qpid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# the initramfs: the root, the files asked for (at their own paths), and the init
kernel=$(ls "$cache"/root/boot/vmlinuz-*-rt-arm64)
extra="$work/extra"
mkdir -p "$extra/sbin"
for f in "${files[@]}"; do
  mkdir -p "$extra$(dirname "$(realpath "$f")")"
  cp "$f" "$extra$(realpath "$f")"
done
printf '%s\n' "$(printf '%q ' "$@")" > "$extra/rtlab-vm-cmd"
cat > "$extra/sbin/vm-init" <<'EOF'
#!/bin/bash
# PID 1 of arm64-vm.sh's guest: mount what a system has, load the NICs' drivers, run the
# command, say its exit code, power off
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm /sys/fs/cgroup /root
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tracefs tracefs /sys/kernel/tracing
mount -t debugfs debugfs /sys/kernel/debug
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
echo 1 > /proc/sys/kernel/printk
cat /etc/hostname > /proc/sys/kernel/hostname
modprobe -a virtio_pci virtio_net
ip link set lo up
echo arm64-vm-booted
cd /tmp
# one console for both streams: the command's stderr is kept apart and follows its stdout
# (as rt-vm.sh returns them: a test harness's "... ok" stays on its line)
bash -c "$(cat /rtlab-vm-cmd)" 2>/tmp/.vm-stderr
rc=$?
echo arm64-vm-stderr
cat /tmp/.vm-stderr
echo "arm64-vm: exit $rc"
echo o > /proc/sysrq-trigger
sleep 30
EOF
chmod 755 "$extra/sbin/vm-init"
(cd "$cache/root" && find . | cpio -o -H newc --quiet) > "$work/initrd"
(cd "$extra" && find . -mindepth 1 | cpio -o -H newc --quiet) >> "$work/initrd"

echo "arm64-vm: $(basename "$kernel"), tcg, $cpus CPUs, 3G, append '$append'" >&2
start=$SECONDS
# two virtio NICs on one QEMU hub: a link inside the guest through real drivers
qemu-system-aarch64 -machine virt -accel tcg -cpu cortex-a72 -smp "$cpus" -m 3G \
  -kernel "$kernel" -initrd "$work/initrd" \
  -append "rdinit=/sbin/vm-init console=ttyAMA0 quiet panic=-1 $append" \
  -netdev hubport,id=rtnet0,hubid=0 -device virtio-net-pci,netdev=rtnet0 \
  -netdev hubport,id=rtnet1,hubid=0 -device virtio-net-pci,netdev=rtnet1 \
  -display none -no-reboot -serial "file:$work/console.log" 2> >(grep -v "is not connected to host network" >&2) &
qpid=$!
qemu_wait "$qpid" "$start" "$timeout"
qpid=""
# the command's output: the console from the init's first line on, without the kernel's
# messages (the power-off's); its stdout to ours, its stderr to ours
out=$(tr -d '\r' < "$work/console.log" | sed -n '/^arm64-vm-booted$/,$p' | sed 1d |
  grep -v -E '^\[ *[0-9]+\.[0-9]+\] ' || true)
if [ -n "$out" ]; then
  printf '%s\n' "$out" | sed '/^arm64-vm-stderr$/,$d'
  printf '%s\n' "$out" | sed -n '/^arm64-vm-stderr$/,$p' | sed 1d | grep -v '^arm64-vm: exit ' >&2 || true
fi
last=$(printf '%s\n' "$out" | grep -o '^arm64-vm: exit [0-9]*' | tail -n 1 || true)
vm_exit arm64-vm "$last" "$start" "$timeout" "$work/console.log"
