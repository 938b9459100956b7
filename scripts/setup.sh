#!/usr/bin/env bash
# Set up rtlab on a fresh Debian machine (as root): the Debian packages rtlab drives or
# builds against (at the versions scripts/pins.txt names), then the release build (linked for
# glibc 2.31 and later through scripts/glibc.sh).
# `--deps-only` installs the packages and stops. `--target aarch64` builds rtlab for 64-bit ARM
# instead (a robot's Jetson, Raspberry Pi, i.MX 8: scripts/aarch64.sh, Debian's cross
# toolchain) at target/aarch64-unknown-linux-gnu/release/rtlab.
set -euo pipefail
cd "$(dirname "$0")/.."

deps_only=0 target=""
while (($#)); do
  case "$1" in
    --deps-only) deps_only=1; shift ;;
    --target)
      case "${2:-}" in
        aarch64 | aarch64-unknown-linux-gnu) target=aarch64 ;;
        x86_64 | x86-64 | x86_64-unknown-linux-gnu) target="" ;;
        *) echo "rtlab setup: error: --target '${2:-}': expected aarch64 or x86_64" >&2; exit 2 ;;
      esac
      shift 2 ;;
    *) echo "rtlab setup: error: unknown argument '$1' (expected --deps-only or --target aarch64)" >&2; exit 2 ;;
  esac
done

PACKAGES=(
  build-essential pkg-config cmake libclang-dev   # C parts of the middleware crates (Cyclone DDS)
  iproute2                                        # ip netns, veth, tc: two hosts on one machine
  procps util-linux                               # kill, setpriv (tests)
  tcpdump                                         # VLAN priority (PCP) seen on the wire (RT-kernel tests)
  rt-tests                                        # cyclictest: the anchor of the timer probe
  stress-ng iperf3                                # loads
  sockperf cyclonedds-tools                       # anchors of the udp and dds probes
  libfastrtps-dev libfastcdr-dev                  # the fastdds transport (eProsima Fast DDS 2.9, ROS 2's default DDS), built against Debian's
  trace-cmd rtla                                  # spike evidence (rtla: timerlat, where the kernel has it)
  chromium                                        # HTML report test (headless screenshot)
  openssh-server openssh-client                   # the far side over ssh (tests start a throw-away sshd)
  postgresql                                      # the team store (tests start a throw-away server: initdb + pg_ctl)
  prometheus                                      # rtlab monitor's /metrics scraped by a real Prometheus (tests start one)
  libroscpp-dev python3-rosmaster                 # ROS 1 itself (Debian's roscpp 1.15 and its master): rtlab timer --mode roscpp*,
  libstd-msgs-dev python3-rospy python3-std-msgs  # pubsub --transport ros1 (std_msgs), and the rospy peer of the tests
  python3 python3-venv libpython3.11              # ROS 2 from the package registry (below): its venv, and the
                                                  # libpython its wheels' libraries name
)

# shellcheck source=pins.sh
. scripts/pins.sh
mapfile -t need < <(apt_missing "${PACKAGES[@]}")
if ((${#need[@]})) && [ "$(id -u)" -ne 0 ]; then
  echo "rtlab setup: error: missing Debian packages (${need[*]}) and not root to install them" >&2
  exit 2
fi
apt_install_pinned "${PACKAGES[@]}"   # the missing ones, at the versions scripts/pins.txt names
if ((${#need[@]})); then
  # Installing openssh-server starts and enables the system sshd; rtlab's tests start their
  # own and need no system service, so one that this script brought is turned off again
  # (an sshd that was installed before is left as it was).
  if [[ " ${need[*]} " == *" openssh-server "* ]]; then
    if [ -d /run/systemd/system ]; then
      systemctl disable --now ssh.service >/dev/null 2>&1 || true
      systemctl disable --now ssh.socket >/dev/null 2>&1 || true
    else
      service ssh stop >/dev/null 2>&1 || true
      if command -v systemctl >/dev/null; then
        systemctl disable ssh.service >/dev/null 2>&1 || true  # offline: links and rc.d
      else
        update-rc.d ssh disable >/dev/null 2>&1 || true
      fi
    fi
    echo "rtlab setup: openssh-server installed, its system service stopped and disabled"
  fi
  # The same for postgresql: its package creates and starts a system cluster; rtlab's tests
  # start their own server in a temporary directory.
  if [[ " ${need[*]} " == *" postgresql "* ]]; then
    if [ -d /run/systemd/system ]; then
      systemctl disable --now postgresql.service >/dev/null 2>&1 || true
    else
      service postgresql stop >/dev/null 2>&1 || true
      if command -v systemctl >/dev/null; then
        systemctl disable postgresql.service >/dev/null 2>&1 || true
      else
        update-rc.d postgresql disable >/dev/null 2>&1 || true
      fi
    fi
    echo "rtlab setup: postgresql installed, its system service stopped and disabled"
  fi
fi

# ROS 2 itself (rcl 10.1 "kilted", rmw_fastrtps_cpp with Fast DDS 3.2, rclpy, std_msgs,
# sensor_msgs) from the package registry's wheels, pinned in scripts/ros2-requirements.txt, in
# a venv at a fixed place: the ROS 2 installation the `ros2` transport uses when the machine has
# no other (docs/ros2.md: --ros2-prefix, AMENT_PREFIX_PATH, /opt/ros/*, then this one), and the
# rclpy nodes of the tests. Kept when it already holds exactly those wheels.
ROS2_VENV=/opt/rtlab/ros2
ros2_wanted=$(grep -E '^[A-Za-z]' scripts/ros2-requirements.txt | sort)
ros2_have=$([ -x "$ROS2_VENV/bin/pip" ] && "$ROS2_VENV/bin/pip" freeze 2>/dev/null | sort || true)
# (pip freeze lists some wheels under a second name too: only what the file pins is compared)
if [ -n "$(comm -23 <(echo "$ros2_wanted") <(echo "$ros2_have"))" ]; then
  if [ "$(id -u)" -ne 0 ] && [ ! -w "$(dirname "$ROS2_VENV")" ]; then
    echo "rtlab setup: error: $ROS2_VENV (ROS 2 from the package registry) is missing and not root to install it" >&2
    exit 2
  fi
  rm -rf "$ROS2_VENV"
  mkdir -p "$(dirname "$ROS2_VENV")"
  /usr/bin/python3 -m venv "$ROS2_VENV"
  "$ROS2_VENV/bin/pip" install -q --disable-pip-version-check -r scripts/ros2-requirements.txt
  echo "rtlab setup: ROS 2 (rcl $("$ROS2_VENV/bin/pip" show ros-rcl 2>/dev/null | sed -n 's/^Version: //p'), rmw_fastrtps_cpp, rclpy) installed in $ROS2_VENV"
fi

[ "$deps_only" = 1 ] && exit 0

# glibc_said BINARY: the newest glibc symbol version BINARY asks for
glibc_said() { readelf -V --wide "$1" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n 1; }

if [ "$target" = aarch64 ]; then
  # the cross toolchain, the arm64 Fast DDS and a Debian 11 arm64 root to link against
  if ! bash scripts/aarch64.sh --check >/dev/null; then
    if [ "$(id -u)" -ne 0 ]; then
      echo "rtlab setup: error: $(bash scripts/aarch64.sh --check) and not root to install it" >&2
      exit 2
    fi
    bash scripts/aarch64.sh --install
  fi
  bash scripts/aarch64.sh cargo build --release --locked -p rtlab --target aarch64-unknown-linux-gnu
  bin=target/aarch64-unknown-linux-gnu/release/rtlab
  echo "rtlab setup: built $bin for aarch64 ($(du -h "$bin" | cut -f1)), linked against Debian 11's glibc 2.31 (asks for glibc $(glibc_said "$bin") at most): copy it to the robot (here it runs under qemu-user: behaviour, not latency)"
  exit 0
fi
# the release binary runs on glibc 2.31 and every later one (Debian 11, Ubuntu 20.04 and up):
# linked against a debootstrap'ed Debian 11 root; without one (not root to make it), against
# this machine's glibc, said
# (built under target/x86_64-unknown-linux-gnu/: the C builds' caches there are the Debian
# 11 root's, never a native build's, then copied to target/release/rtlab)
if bash scripts/glibc.sh --check >/dev/null || { [ "$(id -u)" -eq 0 ] && bash scripts/glibc.sh --install; }; then
  bash scripts/glibc.sh cargo build --release --locked -p rtlab --target x86_64-unknown-linux-gnu
  mkdir -p target/release
  install -m 755 target/x86_64-unknown-linux-gnu/release/rtlab target/release/rtlab
  runs_on="glibc 2.31 and later"
else
  cargo build --release --locked -p rtlab
  runs_on="this machine's glibc and later (not root: no Debian 11 root to link against, scripts/glibc.sh)"
fi
echo "rtlab setup: built target/release/rtlab for x86-64 ($(du -h target/release/rtlab | cut -f1)), runs on $runs_on (asks for glibc $(glibc_said target/release/rtlab))"

# shell completions and the man page, generated from the command line itself
if [ "$(id -u)" -eq 0 ]; then
  mkdir -p /usr/share/bash-completion/completions /usr/local/share/man/man1
  ./target/release/rtlab completions bash > /usr/share/bash-completion/completions/rtlab
  ./target/release/rtlab man > /usr/local/share/man/man1/rtlab.1
  echo "rtlab setup: bash completion and man page (man rtlab) installed"
fi
