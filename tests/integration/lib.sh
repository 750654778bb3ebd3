# SPDX-License-Identifier: BSD-3-Clause
# lib.sh - test topology for pbox, shared by the integration tests and
# `make demo`. Source it, then call topo_up / box_start / ... ; topo_down
# (installed as an EXIT trap by topo_up) stops every process these
# functions started, by PID, and deletes the namespaces and links they made.
#
# Topology (a real box has a management interface for control and DPDK
# ports for data; this mirrors it with two veth pairs):
#
#   netns $NS_BOX                               netns $NS_WK (workers)
#   pboxd: DPDK net_af_packet on $IF_BD  <-veth->  $IF_WD 198.18.0.2/24
#          box data IP 198.18.0.1 (ARP/ICMP by pboxd)
#   kernel $IF_BM 198.18.1.1/24         <-veth->  $IF_WM 198.18.1.2/24
#   pboxd control: TCP 198.18.1.1:7470, Unix socket $PBOX_SOCKET
#
# Addresses are from 198.18.0.0/15 (RFC 2544 benchmarking range) and exist
# only inside the namespaces made here.
#
# PBOX_TRANSPORT=xdp (or WK_HOSTS=1) gives every worker `workers` starts
# its own namespace, as on its own host, because one AF_XDP worker owns
# its interface's queue and XDP program:
#
#   netns $NS_WK: bridge br0 198.18.0.2/24 (ports: $IF_WD toward the box's
#                 data port, one per worker), bridge br1 198.18.1.2/24
#                 (ports: $IF_WM toward the box's management, one per worker)
#   netns pbox-h$TAG-<i>: eth0 198.18.0.(10+i)/24 (data, the XDP socket),
#                 mgmt 198.18.1.(10+i)/24 (control TCP)
#
# Control stays off the XDP interface, as on the box: TCP through a veth
# with an XDP program attached stalled here now and then (a checksum-
# offloaded segment the veth hands on unfinished, we believe; see
# docs/transports.md).
#
# in_wk still runs in $NS_WK (on the bridge); loss_rules drops on the
# bridge too, so the workers' frames cross it in both modes.

BUILD=${BUILD:-build}
TAG=${PBOX_TAG:-$$}
NS_BOX=pbox-box-$TAG
NS_WK=pbox-wk-$TAG
IF_BD=pbd$TAG; IF_WD=pwd$TAG; IF_BM=pbm$TAG; IF_WM=pwm$TAG
BOX_IP=198.18.0.1
WK_IP=198.18.0.2
BOX_MGMT=198.18.1.1
CONTROL=$BOX_MGMT:7470
WORKDIR=${WORKDIR:-$(mktemp -d /tmp/pbox-test.XXXXXX)}
PBOX_SOCKET=$WORKDIR/pboxd.sock
PIDS=()
BOX_PID=
[ "${PBOX_TRANSPORT:-}" = xdp ] && WK_HOSTS=${WK_HOSTS:-1}
WK_HOSTS=${WK_HOSTS:-0}
export PBOX_TRANSPORT=${PBOX_TRANSPORT:-udp}
HOST_SEQ=0
HOST_PLUGS=0
HOST_NS=()

log() { printf '%s\n' "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

need_root() {
	if [ "$(id -u)" != 0 ]; then
		log "$1 needs root (network namespaces, veth links and DPDK). Run it as root, e.g. sudo make ${2:-test}."
		exit 2
	fi
}

topo_down() {
	local rc=$?
	for p in "${PIDS[@]}" $BOX_PID; do
		kill "$p" 2>/dev/null
	done
	for p in "${PIDS[@]}" $BOX_PID; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null
	done
	ip netns del "$NS_BOX" 2>/dev/null
	ip netns del "$NS_WK" 2>/dev/null
	for ns in "${HOST_NS[@]}"; do ip netns del "$ns" 2>/dev/null; done
	# and any host of this run made where HOST_NS did not see it (a
	# subshell): CI found pbox-h<tag>-2 namespaces left behind
	for ns in $(ip netns list 2>/dev/null | awk -v p="pbox-h$TAG-" 'index($1, p) == 1 { print $1 }'); do
		ip netns del "$ns" 2>/dev/null
	done
	# the EAL's runtime directories of this run's boxes (--file-prefix)
	rm -rf /run/dpdk/pbox"$TAG" /run/dpdk/pboxeal"$TAG" /run/dpdk/pboxr"$TAG" 2>/dev/null
	[ -n "${KEEP_WORKDIR:-}" ] || rm -rf "$WORKDIR"
	return $rc
}

topo_up() {
	trap topo_down EXIT
	trap 'exit 130' INT TERM
	ip netns add "$NS_BOX" && ip netns add "$NS_WK" || die "cannot create network namespaces"
	# DATA_LINK=existing: $IF_BD and $IF_WD are interfaces already cabled
	# together (test_verbs.sh), else a veth pair is made
	[ "${DATA_LINK:-veth}" = existing ] ||
		ip link add "$IF_BD" type veth peer name "$IF_WD" || die "cannot create veth"
	ip link add "$IF_BM" type veth peer name "$IF_WM" || die "cannot create veth"
	ip link set "$IF_BD" netns "$NS_BOX"; ip link set "$IF_BM" netns "$NS_BOX"
	ip link set "$IF_WD" netns "$NS_WK"; ip link set "$IF_WM" netns "$NS_WK"
	ip -n "$NS_BOX" link set lo up; ip -n "$NS_WK" link set lo up
	ip -n "$NS_BOX" link set "$IF_BD" up
	ip -n "$NS_BOX" addr add $BOX_MGMT/24 dev "$IF_BM"; ip -n "$NS_BOX" link set "$IF_BM" up
	ip -n "$NS_WK" addr add $WK_IP/24 dev "$IF_WD"; ip -n "$NS_WK" link set "$IF_WD" up
	ip -n "$NS_WK" addr add 198.18.1.2/24 dev "$IF_WM"; ip -n "$NS_WK" link set "$IF_WM" up
	# The box's data port belongs to DPDK: keep the kernel from answering on it.
	ip netns exec "$NS_BOX" sysctl -qw net.ipv6.conf."$IF_BD".disable_ipv6=1 2>/dev/null
	ip netns exec "$NS_WK" sysctl -qw net.ipv6.conf."$IF_WD".disable_ipv6=1 2>/dev/null
	[ "$WK_HOSTS" = 1 ] && hosts_bridge
	return 0
}

# The workers' namespace becomes a switch (br0, with $IF_WD as a port) and
# a router to the box's management network for per-worker namespaces.
hosts_bridge() {
	ip -n "$NS_WK" addr del $WK_IP/24 dev "$IF_WD" &&
	ip -n "$NS_WK" addr del 198.18.1.2/24 dev "$IF_WM" &&
	ip -n "$NS_WK" link add br0 type bridge && ip -n "$NS_WK" link add br1 type bridge &&
	ip -n "$NS_WK" link set "$IF_WD" master br0 && ip -n "$NS_WK" link set "$IF_WM" master br1 &&
	ip -n "$NS_WK" addr add $WK_IP/24 dev br0 && ip -n "$NS_WK" link set br0 up &&
	ip -n "$NS_WK" addr add 198.18.1.2/24 dev br1 && ip -n "$NS_WK" link set br1 up ||
		die "cannot make the workers' bridges"
}

# plug_host NS IFNAME BRIDGE ADDR: a veth from NS (named IFNAME there) to
# BRIDGE in $NS_WK, one queue each way, the MTU of the bridge's uplink.
plug_host() {
	local ns=$1 name=$2 br=$3 addr=$4 n=$HOST_PLUGS mtu up
	HOST_PLUGS=$((HOST_PLUGS + 1))
	up=$IF_WD; [ "$br" = br1 ] && up=$IF_WM
	mtu=$(ip -n "$NS_WK" -o link show "$up" | sed -n 's/.* mtu \([0-9]*\).*/\1/p')
	ip link add "hx$TAG.$n" numtxqueues 1 numrxqueues 1 type veth \
		peer name "hw$TAG.$n" numtxqueues 1 numrxqueues 1 &&
	ip link set "hx$TAG.$n" netns "$NS_WK" && ip link set "hw$TAG.$n" netns "$ns" &&
	ip -n "$ns" link set "hw$TAG.$n" name "$name" &&
	ip -n "$NS_WK" link set "hx$TAG.$n" mtu "$mtu" master "$br" up &&
	ip -n "$ns" link set "$name" mtu "$mtu" up &&
	ip -n "$ns" addr add "$addr/24" dev "$name" &&
	ip netns exec "$ns" sysctl -qw net.ipv6.conf."$name".disable_ipv6=1 ||
		die "cannot plug $ns into $br"
}

# new_host: a fresh namespace on both bridges for one worker, named in
# NEW_HOST (call it directly, not in $(...): it counts hosts).
new_host() {
	local i=$HOST_SEQ ns=pbox-h$TAG-$HOST_SEQ
	HOST_SEQ=$((HOST_SEQ + 1))
	ip netns add "$ns" || die "cannot create namespace $ns"
	HOST_NS+=("$ns")
	ip -n "$ns" link set lo up
	plug_host "$ns" eth0 br0 "198.18.0.$((10 + i))"
	plug_host "$ns" mgmt br1 "198.18.1.$((10 + i))"
	NEW_HOST=$ns
}

# worker_ns: the namespace for one more worker started by hand, in
# WORKER_NS: a new host with WK_HOSTS, else $NS_WK.
worker_ns() {
	WORKER_NS=$NS_WK
	[ "$WK_HOSTS" = 1 ] && { new_host; WORKER_NS=$NEW_HOST; }
	return 0
}

# second_port_up: a second data link, as a box with two NIC ports on one
# switch: veth $IF_BE (the box's, in NS_BOX) to $IF_WE, and the workers'
# address moves from their veth to a bridge $BR over both. pboxd takes it
# with EXTRA_VDEV="net_af_packet1,iface=$IF_BE" and --ip 1:$BOX_IP2/24.
second_port_up() {
	IF_BE=pbe$TAG; IF_WE=pwe$TAG; BR=pbr$TAG
	BOX_IP2=198.18.0.3
	ip link add "$IF_BE" type veth peer name "$IF_WE" || die "cannot create veth"
	ip link set "$IF_BE" netns "$NS_BOX"; ip link set "$IF_WE" netns "$NS_WK"
	ip -n "$NS_BOX" link set "$IF_BE" up
	ip netns exec "$NS_BOX" sysctl -qw net.ipv6.conf."$IF_BE".disable_ipv6=1 2>/dev/null
	ip -n "$NS_WK" addr flush dev "$IF_WD"
	ip -n "$NS_WK" link add "$BR" type bridge || die "cannot create a bridge"
	ip -n "$NS_WK" link set "$IF_WD" master "$BR"; ip -n "$NS_WK" link set "$IF_WE" master "$BR"
	ip -n "$NS_WK" link set "$IF_WE" up
	ip -n "$NS_WK" addr add $WK_IP/24 dev "$BR"; ip -n "$NS_WK" link set "$BR" up
}

# loss_rules PCT: drop PCT% of pbox data each way between the workers and
# the box (nftables numgen random), on the workers' own stack (inet) and on
# the bridge (per-worker namespaces, whose AF_XDP frames bypass netfilter
# on their hosts); loss_rules 0 removes them.
loss_rules() {
	local pct=$1
	in_wk nft -f - <<NFT || die "cannot install the nftables loss rules"
table inet pboxloss
delete table inet pboxloss
table bridge pboxloss
delete table bridge pboxloss
NFT
	[ "$pct" = 0 ] && return 0
	in_wk nft -f - <<NFT || die "cannot install the nftables loss rules"
table inet pboxloss {
	chain out { type filter hook output priority 0; ip daddr $BOX_IP udp dport 47000-47999 numgen random mod 100 < $pct drop; }
	chain in { type filter hook input priority 0; ip saddr $BOX_IP udp sport 47000-47999 numgen random mod 100 < $pct drop; }
}
table bridge pboxloss {
	chain forw { type filter hook forward priority 0; ip daddr $BOX_IP udp dport 47000-47999 numgen random mod 100 < $pct drop; ip saddr $BOX_IP udp sport 47000-47999 numgen random mod 100 < $pct drop; }
}
NFT
}

# box_start [VDEV_KIND] [extra pboxd options...]; VDEV_KIND: af_packet (default) or af_xdp.
# BOX_MTU=9000 gives the data veth and pboxd that MTU (net_af_packet with
# 10 KiB frames); workers then pass --mtu "$BOX_MTU" to pbox-perf.
# EAL_LCORES overrides "-l 0-1"; VDEV_ARGS is appended to the --vdev (e.g. ",qpairs=2");
# EXTRA_VDEV adds a second --vdev (a second data port, see test_multiport.sh).
box_start() {
	local kind=${1:-af_packet}; shift || true
	local vdev
	case $kind in
	af_packet) vdev="net_af_packet0,iface=$IF_BD${VDEV_ARGS:-}" ;;
	af_xdp) vdev="net_af_xdp0,iface=$IF_BD${VDEV_ARGS:-}" ;;
	*) die "unknown vdev kind $kind" ;;
	esac
	local mtu_opt=
	if [ -n "${BOX_MTU:-}" ]; then
		ip -n "$NS_BOX" link set "$IF_BD" mtu "$BOX_MTU" && ip -n "$NS_WK" link set "$IF_WD" mtu "$BOX_MTU" ||
			die "cannot set MTU $BOX_MTU on the data veth"
		[ "$kind" = af_packet ] && vdev="$vdev,framesz=10240,blocksz=20480,framecnt=1024"
		mtu_opt="--mtu $BOX_MTU"
	fi
	BOX_LOG=$WORKDIR/pboxd.log
	# a box started again must not be taken as ready on its predecessor's
	# line (a race compare.sh met: the shell truncates the log after the
	# wait loop may have read it)
	rm -f "$BOX_LOG"
	ip netns exec "$NS_BOX" "$BUILD/pboxd" ${EAL_LCORES:--l 0-1} --no-huge -m 512 --no-pci --no-shconf --file-prefix=pbox$TAG \
		--vdev="$vdev" ${EXTRA_VDEV:+--vdev=$EXTRA_VDEV} --log-level=lib.eal:error -- \
		--ip 0:$BOX_IP/24 --control 0.0.0.0:7470 --rpc-socket "$PBOX_SOCKET" \
		--idle-sleep-us "${PBOX_IDLE_SLEEP_US:-20}" $mtu_opt "$@" > "$BOX_LOG" 2>&1 &
	BOX_PID=$!
	for _ in $(seq 200); do
		grep -q 'pboxd: ready' "$BOX_LOG" 2>/dev/null && return 0
		kill -0 $BOX_PID 2>/dev/null || { cat "$BOX_LOG" >&2; die "pboxd exited during start-up"; }
		sleep 0.1
	done
	cat "$BOX_LOG" >&2
	die "pboxd not ready within 20 s"
}

box_stop() {
	[ -n "$BOX_PID" ] || return 0
	kill -TERM $BOX_PID 2>/dev/null
	for _ in $(seq 100); do kill -0 $BOX_PID 2>/dev/null || break; sleep 0.1; done
	if kill -0 $BOX_PID 2>/dev/null; then kill -9 $BOX_PID; die "pboxd did not stop within 10 s of SIGTERM"; fi
	wait $BOX_PID 2>/dev/null
	local rc=$?
	BOX_PID=
	return $rc
}

ctl() { "$BUILD/pboxctl" --socket "$PBOX_SOCKET" "$@"; }

# no_bad_drops: fail unless the box dropped only the kernel's chatter on the
# veth (not_ip, not_mine, not_udp: IPv6, IGMP) since it started.
no_bad_drops() {
	ctl --json stats > "$WORKDIR/stats.json" || die "pboxctl --json stats failed"
	python3 - "$WORKDIR/stats.json" <<'PY' || die "unexpected drops"
import json, sys
s = json.load(open(sys.argv[1]))
bad = {k: v for k, v in s["drops"].items() if v and k not in {"not_ip", "not_mine", "not_udp"}}
assert not bad, f"well-formed traffic dropped: {bad}"
PY
}

# need_torch [MODULE...]: PY is the interpreter with torch (and the modules
# named); the test is skipped (77) with what to install if it has not.
need_torch() {
	PY=${PYTHON:-/usr/bin/python3}
	local mods="torch${1:+, $(IFS=,; echo "$*" | sed 's/,/, /g')}"
	if ! timeout 60 "$PY" -c "import $mods" 2>/dev/null; then
		log "SKIP: $PY cannot import $mods (apt-get install python3-torch${1:+ python3-$1})"
		exit 77
	fi
}

# torch_test_up SCRIPT: the opening of a test of the Python package with
# torch: root (SCRIPT names the test), torch (else skipped, 77), the
# package of this tree, the namespaces and a pboxd on net_af_packet.
torch_test_up() {
	need_root "$1"
	need_torch
	use_python_package
	topo_up
	box_start af_packet
}

# use_python_package: the Python package of this tree over its build's
# libpbox.so (ROOT, PBOX_LIB, PYTHONPATH exported); run from the tree's root.
use_python_package() {
	[ -e "$BUILD/libpbox.so" ] || die "$BUILD/libpbox.so missing: run make first"
	ROOT=$(pwd)
	export PBOX_LIB=$ROOT/$BUILD/libpbox.so
	export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
}

# build_prog NAME [cc options...]: tests/integration/NAME.c, a worker on
# libpbox's public API, built against this build's libpbox.so into
# $WORKDIR/NAME (the test fails if it does not build)
build_prog() {
	local name=$1; shift
	cc -O2 -Iinclude -o "$WORKDIR/$name" "tests/integration/$name.c" \
		-L"$BUILD" -Wl,-rpath,"$(pwd)/$BUILD" -lpbox "$@" || die "$name does not build"
}

# one_digest TAG N: DIGEST set to the one digest ("digest X" lines) that
# ranks 0..N-1 wrote to WORKDIR/TAG.R.log, or die naming them all
one_digest() {
	local d r
	d=$(for ((r = 0; r < $2; r++)); do sed -n 's/^digest //p' "$WORKDIR/$1.$r.log"; done | sort -u)
	[ -n "$d" ] && [ "$(echo "$d" | wc -l)" = 1 ] || die "$1: the ranks' digests differ: $d"
	DIGEST=$d
}

# in_wk CMD...: run in the workers' namespace
in_wk() { ip netns exec "$NS_WK" "$@"; }

# workers N JOB OUTPREFIX pbox-perf-args... : start N pbox-perf ranks in the
# background; their PIDs are appended to WK_PIDS and PIDS.
workers() {
	local n=$1 job=$2 out=$3; shift 3
	WK_PIDS=()
	WK_OUT=$out
	for r in $(seq 0 $((n - 1))); do
		worker_ns
		local ns=$WORKER_NS
		# not through in_wk: $! must be the worker itself (ip execs it)
		ip netns exec "$ns" "$BUILD/pbox-perf" --control "$CONTROL" --job "$job" --rank "$r" --world "$n" "$@" \
			> "$out.$r.log" 2>&1 &
		WK_PIDS+=($!); PIDS+=($!)
	done
}

# wait_workers TIMEOUT_S: wait for WK_PIDS; fail if any fails or time runs out
wait_workers() {
	local limit=$1 start=$SECONDS rc=0
	for p in "${WK_PIDS[@]}"; do
		while kill -0 "$p" 2>/dev/null; do
			if [ $((SECONDS - start)) -ge "$limit" ]; then
				log "workers still running after ${limit}s"; return 124
			fi
			sleep 0.2
		done
		wait "$p" || rc=1
	done
	# rank 0 names its transport: the one asked for, never a fallback
	if [ $rc = 0 ] && [ "$PBOX_TRANSPORT" != auto ] && [ -f "${WK_OUT:-}.0.log" ] &&
		! grep -q "^# transport: $PBOX_TRANSPORT" "$WK_OUT.0.log"; then
		log "rank 0 did not use transport $PBOX_TRANSPORT: $(grep '^# transport' "$WK_OUT.0.log")"
		rc=1
	fi
	return $rc
}

# host_shm_left BEFORE: the /dev/shm names of host-local groups (pbox-h*,
# docs/architecture.md "The host level") not in BEFORE (an earlier
# listing) that no live process holds: what a job left behind. Names of
# jobs running beside (other tests) hold live pids in their owners page
# (magic, L, by, pad, then a pid per local rank) and are not listed.
host_shm_left() {
	python3 - "$1" <<'PY'
import os, struct, sys
before = set(sys.argv[1].split())
def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False
for n in sorted(os.listdir("/dev/shm")):
    if not n.startswith("pbox-h") or n in before:
        continue
    try:
        with open("/dev/shm/" + n, "rb") as f:
            page = f.read(16 + 4 * 64)
    except OSError:
        continue   # gone meanwhile
    pids = struct.unpack_from("<64i", page, 16) if len(page) == 16 + 4 * 64 else ()
    if not any(p > 0 and alive(p) for p in pids):
        print(n)
PY
}
