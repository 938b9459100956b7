#!/usr/bin/env bash
# rtlab as a systemd service on a cgroup-v2 machine: QEMU boots Debian's own kernel (the
# PREEMPT_RT one scripts/rt-vm.sh installs, with its initrd) on a Debian 12 root with
# systemd as PID 1 (debootstrap'ed from this machine's mirror), your rtlab binary as
# /usr/local/bin/rtlab and contrib/systemd/rtlab-run@.service installed as a robot would have
# them. At boot, a unit of the test runs your script as root; its output and exit code come
# back, then the guest powers off. The service tests (crates/rtlab/tests/service_vm.rs) use it.
#
# Usage: bash scripts/service-vm.sh --install   install debootstrap and QEMU (the versions
#                                               scripts/pins.txt names) and make the root
#                                               (root, a minute or two), then exit
#        bash scripts/service-vm.sh --check     say what is missing (exit 2) or "ready" (0)
#        bash scripts/service-vm.sh --bin RTLAB [--cpus N] [--timeout SECONDS] -- SCRIPT
#
# SCRIPT is a shell script's text, run by /bin/sh in the guest once it has booted. The root:
# RTLAB_SERVICE_ROOT (default /var/cache/rtlab/debian-12-systemd); each boot writes a disk
# image made from a copy of it (about 700 MB in a temporary directory, removed after). The
# guest has no network device (lo only). The kernel and the acceleration as rt-vm.sh's
# (RT_VM_KERNEL; RT_VM_ACCEL, else rt-vm.sh's cached answer): under TCG a boot takes about
# a minute and timings are not real.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ROOT=${RTLAB_SERVICE_ROOT:-/var/cache/rtlab/debian-12-systemd}
PACKAGES=(debootstrap qemu-system-x86)
# shellcheck source=pins.sh
. "$here/pins.sh"

missing() {
  local m=()
  mapfile -t m < <(apt_missing "${PACKAGES[@]}")
  [ -n "$(rt_kernel)" ] || m+=("Debian's PREEMPT_RT kernel (bash scripts/rt-vm.sh --install)")
  [ -x "$ROOT/lib/systemd/systemd" ] || m+=("the Debian 12 root with systemd at $ROOT")
  echo "${m[*]}"
}

install_all() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "service-vm: error: missing $(missing) and not root to install them" >&2
    exit 2
  fi
  apt_install_pinned "${PACKAGES[@]}"
  [ -n "$(rt_kernel)" ] || bash "$here/rt-vm.sh" --install
  if [ ! -x "$ROOT/lib/systemd/systemd" ]; then
    local t=$SECONDS part="$ROOT.part"
    # systemd as init, ip(8) for rtlab's namespaces, ps and kmod; no stress-ng or iperf3:
    # the cases that load the machine say what they lack
    debootstrap_root service-vm bookworm "$part" systemd-sysv,iproute2,procps,kmod,udev
    echo rtlab-service-vm > "$part/etc/hostname"
    printf '/dev/vda / ext4 rw,relatime 0 1\n' > "$part/etc/fstab"
    # nothing on the consoles but the test: no login prompts
    ln -sf /dev/null "$part/etc/systemd/system/getty@.service"
    ln -sf /dev/null "$part/etc/systemd/system/serial-getty@.service"
    rm -rf "$part/var/cache/apt/archives/"*.deb
    mv "$part" "$ROOT"
    echo "service-vm: the Debian 12 root with systemd made at $ROOT in $((SECONDS - t)) s"
  fi
  local m
  m=$(missing)
  if [ -n "$m" ]; then
    echo "service-vm: error: still missing after install: $m" >&2
    exit 2
  fi
  echo "service-vm: ready ($(rt_kernel), $ROOT)"
}

bin="" cpus=2 timeout=900
case "${1:-}" in
  --install) install_all; exit 0 ;;
  --check)
    m=$(missing)
    if [ -n "$m" ]; then echo "missing: $m (run: bash scripts/service-vm.sh --install, as root)"; exit 2; fi
    echo "ready: $(rt_kernel), $ROOT"; exit 0 ;;
  --bin) bin=${2:?service-vm: error: --bin needs the rtlab binary}; shift 2 ;;
  *) echo "service-vm: error: expected --install, --check or --bin RTLAB (see the usage at the top of $0)" >&2; exit 2 ;;
esac
while (($#)) && [ "$1" != -- ]; do
  case "$1" in
    --cpus) cpus=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    *) echo "service-vm: error: unknown argument '$1' (see the usage at the top of $0)" >&2; exit 2 ;;
  esac
done
if (($# != 2)); then
  echo "service-vm: error: no script to run: --bin RTLAB [OPTIONS] -- SCRIPT" >&2
  exit 2
fi
script=$2
[ -x "$bin" ] || { echo "service-vm: error: --bin $bin: not an executable file" >&2; exit 2; }
m=$(missing)
[ -z "$m" ] || { echo "service-vm: error: missing: $m (bash scripts/service-vm.sh --install)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "service-vm: error: not root (the disk image keeps the root's owners)" >&2; exit 2; }

k=$(rt_kernel)
v=$(basename "$k"); v=${v#vmlinuz-}
initrd=/boot/initrd.img-$v
[ -r "$initrd" ] || { echo "service-vm: error: no initrd for $k at $initrd" >&2; exit 2; }
[ -d "/lib/modules/$v" ] || { echo "service-vm: error: no modules for $k at /lib/modules/$v" >&2; exit 2; }
work=$(mktemp -d /var/tmp/rtlab-service-vm.XXXXXX)
qpid=""
cleanup() { [ -n "$qpid" ] && kill -KILL "$qpid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# the guest's root: the made root, the kernel's modules (veth, sch_*), rtlab and its unit
stage=$work/root
cp -a "$ROOT" "$stage"
mkdir -p "$stage/lib/modules"
cp -a "/lib/modules/$v" "$stage/lib/modules/"
install -m 0755 "$bin" "$stage/usr/local/bin/rtlab"
install -m 0644 "$here/../contrib/systemd/rtlab-run@.service" "$stage/etc/systemd/system/"
mkdir -p "$stage/usr/local/lib/rtlab-vm"
printf '%s\n' "$script" > "$stage/usr/local/lib/rtlab-vm/test.sh"
# the test's unit: the script's output on the second serial port, its exit code last, then
# the guest powers off at once whatever the script did (sysrq: the disk is thrown away)
cat > "$stage/etc/systemd/system/rtlab-vm-test.service" <<'EOF'
[Unit]
Description=rtlab's service test (scripts/service-vm.sh)
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/bin/sh -c 'sh /usr/local/lib/rtlab-vm/test.sh > /dev/ttyS1 2>&1; echo "service-vm: exit $?" > /dev/ttyS1; echo o > /proc/sysrq-trigger'
[Install]
WantedBy=multi-user.target
EOF
ln -s ../rtlab-vm-test.service "$stage/etc/systemd/system/multi-user.target.wants/rtlab-vm-test.service"
mkfs.ext4 -q -F -L rtlab-vm -d "$stage" "$work/disk.img" 3G
rm -rf "$stage"

accel=${RT_VM_ACCEL:-auto}
if [ "$accel" = auto ]; then
  accel=$(rt_vm_cached_accel "$k")
  accel=${accel:-tcg}
fi
echo "service-vm: $(basename "$k"), $accel, $cpus CPUs, systemd on Debian 12" >&2
start=$SECONDS
qemu-system-x86_64 -machine q35 -accel "$accel" -cpu max -smp "$cpus" -m 2G \
  -kernel "$k" -initrd "$initrd" \
  -append "root=/dev/vda rw console=ttyS0 panic=-1 systemd.show_status=0" \
  -drive "file=$work/disk.img,format=raw,if=virtio" -nic none -display none -no-reboot \
  -serial "file:$work/console.log" -serial "file:$work/out.log" &
qpid=$!
qemu_wait "$qpid" "$start" "$timeout"
qpid=""
tr -d '\r' < "$work/out.log" | grep -v '^service-vm: exit ' || true
last=$(tr -d '\r' < "$work/out.log" | grep -o '^service-vm: exit [0-9]*' | tail -n 1 || true)
vm_exit service-vm "$last" "$start" "$timeout" "$work/console.log"
