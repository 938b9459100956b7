# Sourced by scripts/setup.sh, rt-vm.sh, container.sh, glibc.sh, service-vm.sh, aarch64.sh,
# arm64-vm.sh and fuzz.sh: what they install from a registry, at the version scripts/pins.txt
# names (see its head for what happens when Debian's mirror moves), and what more than one of
# them uses (the mirror, a debootstrap'ed root, apt for arm64, the RT VM's kernel, waiting for
# a VM and its exit code).

PINS_FILE="$(dirname "${BASH_SOURCE[0]}")/pins.txt"

# pin REGISTRY NAME: the version pins.txt names (exit 1, saying so, when it names none)
pin() {
  local v
  v=$(awk -v r="$1" -v n="$2" '$1 == r && $2 == n { print $3 }' "$PINS_FILE")
  if [ -z "$v" ]; then
    echo "pins: error: scripts/pins.txt names no version of $1 $2" >&2
    return 1
  fi
  echo "$v"
}

# apt_missing PKG...: the packages not installed
apt_missing() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

# apt_install_pinned PKG...: install the missing ones at their pinned version (the mirror's
# version, said, where it no longer has the pinned one); a different installed version is said
apt_install_pinned() {
  local p v have cand specs=() need
  mapfile -t need < <(apt_missing "$@")
  for p in "$@"; do
    v=$(pin debian "$p") || return 1
    # (one line per architecture where a package is installed for two: arm64 beside amd64)
    have=$(dpkg-query -W -f='${Version}\n' "$p" 2>/dev/null | sort -u | paste -sd, || true)
    if [ -n "$have" ] && [ "$have" != "$v" ] && [[ " ${need[*]} " != *" $p "* ]]; then
      echo "pins: debian $p: $have installed, $v pinned (left as it is)"
    fi
  done
  ((${#need[@]})) || return 0
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  for p in "${need[@]}"; do
    v=$(pin debian "$p")
    if apt-cache madison "$p" 2>/dev/null | awk -F'|' '{ gsub(/ /, "", $2); print $2 }' | grep -qxF "$v"; then
      specs+=("$p=$v")
    else
      cand=$(apt-cache policy "$p" 2>/dev/null | sed -n 's/^ *Candidate: //p')
      echo "pins: pin moved: debian $p $v pinned, the mirror has only ${cand:-nothing}: installing that (update scripts/pins.txt once the tests pass with it)"
      specs+=("$p")
    fi
  done
  apt-get install -y -qq --no-install-recommends "${specs[@]}" >/dev/null
}

# debian_mirror: the Debian mirror apt uses here (deb822 or one-line sources), else Debian's
# own (debootstrap's roots come from it)
debian_mirror() {
  local m
  m=$(grep -hs -m1 -E '^URIs: .*debian' /etc/apt/sources.list.d/debian.sources | awk '{ print $2 }' || true)
  [ -n "$m" ] || m=$(grep -hs -m1 -E '^deb [^ ]+/debian ' /etc/apt/sources.list | awk '{ print $2 }' || true)
  echo "${m:-http://deb.debian.org/debian}"
}

# debootstrap_root WHO SUITE DIR INCLUDES: a minbase root of Debian SUITE with the packages
# INCLUDES (comma-separated) at DIR (made anew), from debian_mirror; on failure the log's
# end, DIR removed, and exit 2 with "WHO: error: ..."
debootstrap_root() {
  local who=$1 suite=$2 dir=$3 include=$4
  rm -rf "$dir"
  mkdir -p "$(dirname "$dir")"
  if ! debootstrap --variant=minbase --include="$include" "$suite" "$dir" "$(debian_mirror)" \
      > "$dir.log" 2>&1; then
    echo "$who: error: debootstrap of Debian $suite from $(debian_mirror) failed; its log:" >&2
    tail -n 20 "$dir.log" >&2
    rm -rf "$dir" "$dir.log"
    exit 2
  fi
  rm -f "$dir.log"
}

# relative_links ROOT: the root's absolute symbolic links under usr/lib and lib
# (/lib64/ld-linux-x86-64.so.2 -> /lib/...) made relative, so that a linker using ROOT as its sysroot, which prefixes the
# sysroot to them, follows them inside it
relative_links() {
  local root=$1 l t
  while IFS= read -r l; do
    t=$(readlink "$l")
    case "$t" in
      /*) ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$root$t")" "$l" ;;
    esac
  done < <(find "$root/usr/lib" "$root/usr/lib64" "$root/lib" -type l 2>/dev/null)
}

# apt_arm64 TOOL DIR ARGS...: apt-get or apt-cache for arm64 with its lists, cache and (empty)
# status in DIR, so that this machine's apt is left as it is; on this machine's sources, or on
# DIR/sources.list when there is one (another Debian release)
apt_arm64() {
  local tool=$1 a=$2 src=()
  shift 2
  mkdir -p "$a/lists/partial" "$a/cache/archives/partial"
  touch "$a/status"
  [ -e "$a/sources.list" ] &&
    src=(-o "Dir::Etc::SourceList=$a/sources.list" -o Dir::Etc::SourceParts=/nonexistent)
  "$tool" -qq "${src[@]}" -o "Dir::State::Lists=$a/lists" -o "Dir::Cache=$a/cache" \
    -o "Dir::State::status=$a/status" -o APT::Architecture=arm64 -o APT::Architectures::=arm64 \
    -o APT::Sandbox::User=root -o APT::Install-Recommends=false "$@"
}

# qemu_wait PID START TIMEOUT: wait for the QEMU of PID to end, killing it once TIMEOUT
# seconds have passed since START (a $SECONDS value)
qemu_wait() {
  local pid=$1 start=$2 timeout=$3
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS - start >= timeout)); then
      kill -KILL "$pid" 2>/dev/null
      break
    fi
    sleep 1
  done
  wait "$pid" 2>/dev/null || true
}

# vm_exit WHO LAST START TIMEOUT CONSOLE: end a VM script with the exit code its guest said
# (LAST: the guest's "WHO: exit N" line, or nothing), else 124 (out of time) or 125 (stopped
# before saying it), each said with the end of the CONSOLE log; then "WHO: exit code N after
# S s" on stderr
vm_exit() {
  local who=$1 last=$2 start=$3 timeout=$4 console=$5 rc=124
  if [ -n "$last" ]; then
    rc=${last##* }
  elif ((SECONDS - start >= timeout)); then
    echo "$who: error: the guest did not finish within $timeout s; its console's end:" >&2
    tail -n 30 "$console" >&2
  else
    rc=125
    echo "$who: error: the guest stopped before the command said its exit code; its console's end:" >&2
    tail -n 30 "$console" >&2
  fi
  echo "$who: exit code $rc after $((SECONDS - start)) s" >&2
  exit "$rc"
}

# rt_kernel: the PREEMPT_RT kernel rt-vm.sh and service-vm.sh boot: RT_VM_KERNEL, else the
# newest in /boot (nothing when there is none)
rt_kernel() {
  if [ -n "${RT_VM_KERNEL:-}" ]; then echo "$RT_VM_KERNEL"; return; fi
  ls -1 /boot/vmlinuz-*-rt-* 2>/dev/null | sort -V | tail -n 1
}

# Where rt-vm.sh keeps, per kernel, whether a KVM guest boots here: "kvm|tcg KERNEL"
RT_VM_ACCEL_CACHE=/var/cache/rtlab/rt-vm-accel

# rt_vm_cached_accel KERNEL: kvm or tcg as rt-vm.sh found for KERNEL (nothing when not tried)
rt_vm_cached_accel() {
  [ -r "$RT_VM_ACCEL_CACHE" ] && [ "$(cut -d' ' -f2 "$RT_VM_ACCEL_CACHE")" = "$1" ] &&
    cut -d' ' -f1 "$RT_VM_ACCEL_CACHE" || true
}
