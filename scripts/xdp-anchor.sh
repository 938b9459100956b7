#!/usr/bin/env bash
# The anchor of rtlab's XDP round trip (`udp ping --xdp` / `udp reflect --xdp`): the AF_XDP
# sample of xdp-project/bpf-examples, AF_XDP-example/xdpsock (the kernel's samples/bpf/xdpsock
# until it moved there), built against the system's libxdp and libbpf, unmodified, in its
# l2fwd mode as the reflector on a veth pair between two network namespaces.
#
#   The reflector: `xdpsock -i VETH_B -q 0 -l -N -c` in namespace B (libxdp's default XSK
#        program attached in the driver, native XDP on veth, one AF_XDP socket on queue 0 in
#        copy mode, need-wakeup on). l2fwd takes every frame of the queue from the rx ring,
#        swaps the two MAC addresses (nothing else: IP addresses, ports and payload stay as
#        they came), puts it on the tx ring of the same socket and kicks tx with sendto(2).
#        Its loop spins on the rings (one CPU at 100 % while it runs), as rtlab's reflector
#        does with --busy-poll; XDPSOCK_OPTS changes the flags (-S generic, -p poll(2), -B).
#   The round trip: xdpsock has no latency mode and no pinger, and a MAC-only reflection is
#        no answer to any pinger's socket (its addresses and ports are not swapped: the
#        sender's kernel drops it; rtlab's ping, which also wants the payload's kind byte
#        turned into a reply, cannot use it either). So namespace A sends UDP datagrams of
#        PAYLOAD bytes (the frame of rtlab's datagram of that payload: 42 + PAYLOAD bytes)
#        from a kernel socket every PERIOD_US, a sequence number in the first 4 payload
#        bytes, and tcpdump on A's veth stamps each datagram twice: leaving A (the tx tap,
#        before veth_xmit) and coming back reflected (the rx tap). The round trip is the
#        difference of the two kernel stamps (ns): veth A->B, B's XDP program, the copy into
#        the UMEM, xdpsock's turnaround, its copy-mode tx, veth B->A. It leaves out what
#        the pinger's own end costs: rtlab's `udp ping --xdp` round trip adds A's AF_XDP tx
#        (a sendto kick, a copy) and rx (A's XDP program, a copy, the wake-up or spin, the
#        parse) around the same path, so it is at least the anchor's, and the difference is
#        the pinger's end. Open loop (one datagram per period), where rtlab's pingpong sends
#        the next request when the reply is in; the period keeps one datagram in flight.
#
# Usage: BPF_EXAMPLES_REPO=/path/to/bpf-examples bash scripts/xdp-anchor.sh [COUNT=2000]
#   The source comes from the user: BPF_EXAMPLES_REPO, a clone of bpf-examples (git clone
#   https://github.com/xdp-project/bpf-examples; BPF_EXAMPLES_REF, default HEAD, is read with
#   git archive; submodules are not needed), or BPF_EXAMPLES_DIR, a checkout's directory
#   (its AF_XDP-example/ and headers/); without either, one line and exit 2.
#   env: PAYLOADS (UDP payload bytes, default "64 500"), PERIOD_US (default 1000: COUNT
#   datagrams take COUNT ms per payload), ANCHOR_DIR (the build, default
#   /var/tmp/rtlab-xdp-anchor, never inside this repository), XDPSOCK_OPTS (default "-N -c"),
#   CPU_REFLECT / CPU_SEND (the CPUs of xdpsock and of the sender, default 1 and 0; empty:
#   not pinned), NAME (namespace prefix, default anc-xdp), PORT (default 9300), KEEP=DIR
#   (keep the captures, SIZE.pcap, and xdpsock's logs).
#   Needs root, clang, gcc, pkg-config, tcpdump, iproute2 and the headers of libxdp, libbpf
#   and libcap (Debian 12: apt-get install clang gcc pkg-config tcpdump libxdp-dev
#   libbpf-dev libcap-dev). Where RLIMIT_MEMLOCK cannot be raised (no CAP_SYS_RESOURCE, as
#   in some containers) the build links xdpsock with a wrapper of setrlimit(2) that keeps
#   the hard limit instead of failing: since 5.11 the kernel charges BPF memory to the
#   memory cgroup, and UMEM pinning needs no limit with CAP_IPC_LOCK.
# Namespaces NAME-a-PID and NAME-b-PID with a single-queue veth pair (198.19.0.1/24 in A,
# 198.19.0.2/24 in B; one queue, so every datagram reaches the socket's queue 0; IPv6 off and
# a static neighbour entry in A, as B answers no ARP while xdpsock holds the queue) are made
# for the run and removed on exit, with the processes this script started.
# Prints a Markdown table: per payload, datagrams, lost, min / p50 / p99 / p99.9 / max (us,
# nearest rank; with fewer than 1000 datagrams p99.9 is the maximum).
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-2000}
payloads=${PAYLOADS:-64 500}
period_us=${PERIOD_US:-1000}
dir=${ANCHOR_DIR:-/var/tmp/rtlab-xdp-anchor}
xopts=${XDPSOCK_OPTS:--N -c}
cpu_reflect=${CPU_REFLECT-1}
cpu_send=${CPU_SEND-0}
name=${NAME:-anc-xdp}
port=${PORT:-9300}
me=xdp-anchor

[ "$(id -u)" = 0 ] || { echo "$me: run as root (namespaces, XDP)" >&2; exit 2; }
for t in clang gcc pkg-config tcpdump ip taskset stdbuf git; do
  command -v "$t" >/dev/null || { echo "$me: $t missing (Debian 12: apt-get install clang gcc pkg-config tcpdump libxdp-dev libbpf-dev libcap-dev)" >&2; exit 2; }
done
for p in libxdp libbpf libcap; do
  pkg-config --exists "$p" || { echo "$me: pkg-config finds no $p (Debian 12: apt-get install libxdp-dev libbpf-dev libcap-dev)" >&2; exit 2; }
done

# --- the source, then the build (under $dir, never here) -----------------------------------
fresh() { rm -rf "$dir/src" "$dir/build" && mkdir -p "$dir/src" "$dir/build"; }
if [ -n "${BPF_EXAMPLES_DIR:-}" ] && [ -d "$BPF_EXAMPLES_DIR/AF_XDP-example" ]; then
  fresh
  cp -r "$BPF_EXAMPLES_DIR/AF_XDP-example" "$BPF_EXAMPLES_DIR/headers" "$dir/src/"
  origin="$BPF_EXAMPLES_DIR"
elif [ -n "${BPF_EXAMPLES_REPO:-}" ] && git -C "$BPF_EXAMPLES_REPO" rev-parse --git-dir >/dev/null 2>&1; then
  ref=${BPF_EXAMPLES_REF:-HEAD}
  fresh
  git -C "$BPF_EXAMPLES_REPO" archive "$ref" AF_XDP-example headers | tar -x -C "$dir/src"
  origin="bpf-examples $(git -C "$BPF_EXAMPLES_REPO" rev-parse --short=12 "$ref^{commit}")"
else
  echo "$me: error: no bpf-examples source: set BPF_EXAMPLES_REPO to a clone of https://github.com/xdp-project/bpf-examples (or BPF_EXAMPLES_DIR to a checkout)" >&2
  exit 2
fi
s="$dir/src"
b="$dir/build"
cat > "$b/memlock_shim.c" <<'EOF'
/* Linked with -Wl,--wrap=setrlimit: where raising RLIMIT_MEMLOCK is refused (EPERM: no
 * CAP_SYS_RESOURCE), the soft limit goes to the hard one and the call succeeds. */
#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>
int __real_setrlimit(int resource, const struct rlimit *rl);
int __wrap_setrlimit(int resource, const struct rlimit *rl)
{
	struct rlimit cur;
	int r = __real_setrlimit(resource, rl);

	if (r && errno == EPERM && resource == RLIMIT_MEMLOCK &&
	    getrlimit(RLIMIT_MEMLOCK, &cur) == 0) {
		cur.rlim_cur = cur.rlim_max;
		if (__real_setrlimit(RLIMIT_MEMLOCK, &cur) == 0) {
			fprintf(stderr, "note: RLIMIT_MEMLOCK kept at its hard limit (raising it: EPERM)\n");
			return 0;
		}
		errno = EPERM;
	}
	return r;
}
EOF
# the sender: COUNT datagrams of PAYLOAD bytes to DST:PORT on an absolute PERIOD_US grid,
# the sequence number (u32, big-endian) in the first 4 bytes
cat > "$b/anc-send.c" <<'EOF'
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: anc-send DST PORT PAYLOAD COUNT PERIOD_US\n");
		return 2;
	}
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[2])) };
	size_t n = strtoul(argv[3], NULL, 10);
	long count = atol(argv[4]), period = atol(argv[5]) * 1000L;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	unsigned char *buf = calloc(1, n < 4 ? 4 : n);
	if (n < 4 || period <= 0 || inet_pton(AF_INET, argv[1], &a.sin_addr) != 1 || fd < 0 ||
	    !buf || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		perror("anc-send: setup");
		return 1;
	}
	for (size_t i = 4; i < n; i++)
		buf[i] = i % 251;
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	for (long k = 0; k < count; k++) {
		uint32_t seq = htonl((uint32_t)k);
		memcpy(buf, &seq, 4);
		if (send(fd, buf, n, 0) < 0 && errno != ECONNREFUSED) {
			perror("anc-send: send");
			return 1;
		}
		t.tv_nsec += period;
		while (t.tv_nsec >= 1000000000L) {
			t.tv_nsec -= 1000000000L;
			t.tv_sec++;
		}
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR)
			;
	}
	return 0;
}
EOF
multiarch=$(gcc -print-multiarch 2>/dev/null || true)
arch_inc=()
[ -z "$multiarch" ] || [ ! -d "/usr/include/$multiarch" ] || arch_inc=(-I"/usr/include/$multiarch")
# xdpsock loads its own xdpsock_kern.o (from its working directory) only with -M or -F;
# otherwise libxdp's default XSK program
clang -O2 -g -target bpf -Wall -I"$s/headers" "${arch_inc[@]}" -c "$s/AF_XDP-example/xdpsock_kern.c" -o "$b/xdpsock_kern.o"
# shellcheck disable=SC2046
gcc -O2 -g -Wall -I"$s/headers" $(pkg-config --cflags libxdp libbpf) -o "$b/xdpsock" \
  "$s/AF_XDP-example/xdpsock.c" "$b/memlock_shim.c" -Wl,--wrap=setrlimit \
  $(pkg-config --libs libxdp libbpf) -lpthread
gcc -O2 -Wall -o "$b/anc-send" "$b/anc-send.c"

# --- the namespaces ------------------------------------------------------------------------
na="$name-a-$$"
nb="$name-b-$$"
va="ancxa$$"
vb="ancxb$$"
out=$(mktemp -d)
pids=()
stop() { # PIDS...: TERM (xdpsock and tcpdump end cleanly on it), KILL after 3 s
  local p i
  for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "$@"; do
    for i in $(seq 1 60); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
}
cleanup() {
  [ "${#pids[@]}" = 0 ] || stop "${pids[@]}"
  ip netns del "$na" 2>/dev/null || true
  ip netns del "$nb" 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$out"/* "$KEEP"/ 2>/dev/null || true; fi
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
pin() { if [ -n "$1" ]; then echo taskset -c "$1"; fi; }
wait_for() { # FILE PATTERN SECONDS
  local i
  for i in $(seq 1 $(($3 * 20))); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}
for n in "$na" "$nb"; do
  if ip netns list | grep -qw "$n"; then echo "$me: namespace $n exists" >&2; exit 2; fi
done
ip netns add "$na"
ip netns add "$nb"
for n in "$na" "$nb"; do
  ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 net.ipv4.ip_forward=0
  ip -n "$n" link set lo up
done
ip link add "$va" netns "$na" numtxqueues 1 numrxqueues 1 type veth peer name "$vb" netns "$nb" numtxqueues 1 numrxqueues 1
ip -n "$na" addr add 198.19.0.1/24 dev "$va"
ip -n "$nb" addr add 198.19.0.2/24 dev "$vb"
ip -n "$na" link set "$va" up
ip -n "$nb" link set "$vb" up
mac_a=$(ip netns exec "$na" cat "/sys/class/net/$va/address")
mac_b=$(ip netns exec "$nb" cat "/sys/class/net/$vb/address")
ip -n "$na" neigh replace 198.19.0.2 lladdr "$mac_b" dev "$va" nud permanent

# --- one payload: xdpsock in B, tcpdump and the sender in A ---------------------------------
# writes "n lost min p50 p99 p99.9 max" (us) to $out/stats; xdpsock's log: $out/xdpsock-SIZE.log
# (in this shell, not a subshell: the EXIT trap knows its processes)
run_one() { # PAYLOAD
  local size=$1 xlog="$out/xdpsock-$1.log" tlog="$out/tcpdump-$1.log" pcap="$out/$1.pcap" xp tp
  # shellcheck disable=SC2046,SC2086
  (cd "$b" && exec ip netns exec "$nb" $(pin "$cpu_reflect") stdbuf -oL ./xdpsock -i "$vb" -q 0 -l $xopts) > "$xlog" 2>&1 &
  xp=$!
  pids+=("$xp")
  # its stats thread starts after the socket is in the map, and prints every second (its
  # stdout line-buffered by stdbuf)
  wait_for "$xlog" "sock0@" 10 || { echo "$me: xdpsock did not start:" >&2; tail -5 "$xlog" >&2; exit 1; }
  # (-c: it ends itself once it holds every datagram twice; its kernel ring hands packets
  # over in blocks retired after at most 1 s, so it is given 2 s after the last send)
  ip netns exec "$na" tcpdump -i "$va" -nn -s 64 --time-stamp-precision=nano -c $((2 * count)) \
    -w "$pcap" "udp and dst port $port" > "$tlog" 2>&1 &
  tp=$!
  pids+=("$tp")
  wait_for "$tlog" "listening on" 10 || { echo "$me: tcpdump did not start:" >&2; tail -3 "$tlog" >&2; exit 1; }
  # shellcheck disable=SC2046
  ip netns exec "$na" $(pin "$cpu_send") "$b/anc-send" 198.19.0.2 "$port" "$size" "$count" "$period_us"
  local i
  for i in $(seq 1 40); do kill -0 "$tp" 2>/dev/null || break; sleep 0.05; done
  stop "$tp" "$xp"
  pids=()
  # pair each datagram leaving A (source MAC A) with its reflection (source MAC B) by the
  # sequence number: IP bytes 28..31, the last two words of tcpdump's 0x0010 line
  tcpdump -r "$pcap" -nn -e -tt -x --time-stamp-precision=nano 2>/dev/null | awk -v ma="$mac_a" -v mb="$mac_b" -v sent="$count" '
    /^[0-9]+\.[0-9]+ / { split($1, t, "."); if (base == "") base = t[1]; ts = (t[1] - base) * 1e9 + t[2]; src = $2; next }
    $1 == "0x0010:" {
      k = $8 $9
      if (src == ma) out[k] = ts
      else if (src == mb && (k in out)) { print ts - out[k]; delete out[k] }
    }' | sort -n | awk -v sent="$count" '
    { v[NR] = $1 }
    function at(p,  i) { i = int(p * NR); if (i < p * NR) i++; if (i < 1) i = 1; return v[i] / 1000 }
    END {
      if (NR == 0) { print 0, sent, "-", "-", "-", "-", "-"; exit }
      printf "%d %d %.1f %.1f %.1f %.1f %.1f\n", NR, sent - NR, v[1] / 1000, at(0.5), at(0.99), at(0.999), v[NR] / 1000
    }' > "$out/stats"
}

echo
echo "xdpsock l2fwd ($origin; xdpsock $xopts, CPU ${cpu_reflect:-any}) in $nb, datagrams from $na every ${period_us} us (CPU ${cpu_send:-any}); round trip at $na's veth (tcpdump stamps):"
echo
echo "| anchor | payload B | frame B | datagrams | lost | min us | p50 us | p99 us | p99.9 us | max us |"
echo "|---|---|---|---|---|---|---|---|---|---|"
status=0
for size in $payloads; do
  run_one "$size"
  read -r n lost mn p50 p99 p999 mx < "$out/stats"
  echo "| xdpsock l2fwd | $size | $((size + 42)) | $n | $lost | $mn | $p50 | $p99 | $p999 | $mx |"
  if [ "$n" = 0 ]; then
    echo "$me: no datagram came back at payload $size; xdpsock said:" >&2
    tail -8 "$out/xdpsock-$size.log" >&2
    status=1
  fi
done
exit "$status"
