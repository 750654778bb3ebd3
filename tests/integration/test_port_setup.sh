#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_port_setup.sh - pboxd sizes and sets up its ports as their PMDs
# need (nic/port.c, nic/port_mtu.c), or refuses to start naming what to
# change:
#   1. net_af_xdp at MTU 1967, 3000 and 3506 (the largest whose mbuf, the
#      kernel's XDP headroom and the frame fit the one-page UMEM chunk):
#      starts, reports the MTU, and 2 workers at that MTU get exact sums;
#      MTU 3507 and 3542 (the PMD's own max_mtu) are refused naming 3506.
#      (The room in 2 KiB steps made every MTU from 1967 fail in the PMD's
#      queue set-up: "Failed to create umem".)
#   2. net_af_packet's mbufs hold a whole ring frame: framesz=4096 at MTU
#      1500 and framesz=10240 at MTU 4000 start and carry exact sums (they
#      failed with "N bytes will not fit in mbuf"); a framesz whose mbufs
#      would pass 64 KiB is refused naming the largest.
#   3. net_af_packet with qpairs= above the number of data lcores is
#      refused (the kernel's fanout would hand flows to unpolled queues),
#      (net_af_xdp's queue_count= likewise: tests/unit/test_port_queues.c;
#      a veth has no combined channels, so the PMD refuses queue_count=2
#      itself).
#   4. a --vdev whose PMD refuses it is named as the cause (it was "no DPDK
#      port: bind a NIC ...").
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
topo_up

# refused VDEV MESSAGE [pboxd options...]: pboxd with that --vdev must exit
# non-zero within 20 s, logging MESSAGE on a "pboxd: error:" line; one
# that comes up is stopped (by PID) and the test fails.
refused() {
	local vdev=$1 msg=$2 log=$WORKDIR/refused.log pid rc; shift 2
	ip netns exec "$NS_BOX" "$BUILD/pboxd" ${EAL_LCORES:--l 0-1} --no-huge -m 512 --no-pci \
		--no-shconf --file-prefix=pbox$TAG --vdev="$vdev" --log-level=lib.eal:error -- \
		--ip 0:$BOX_IP/24 --control 127.0.0.1:7471 --rpc-socket "$WORKDIR/refused.sock" \
		--idle-sleep-us 20 "$@" > "$log" 2>&1 &
	pid=$!; PIDS+=($pid)
	for _ in $(seq 200); do
		kill -0 $pid 2>/dev/null || break
		if grep -q 'pboxd: ready' "$log"; then
			kill $pid; wait $pid
			cat "$log" >&2; die "pboxd started with --vdev $vdev $*"
		fi
		sleep 0.1
	done
	if kill -0 $pid 2>/dev/null; then
		kill -9 $pid; wait $pid
		cat "$log" >&2; die "pboxd neither refused nor started within 20 s (--vdev $vdev $*)"
	fi
	wait $pid; rc=$?
	[ $rc != 0 ] || { cat "$log" >&2; die "pboxd exited 0 with --vdev $vdev $*"; }
	grep -q -- "pboxd: error: .*$msg" "$log" ||
		{ cat "$log" >&2; die "pboxd's refusal (--vdev $vdev $*) does not say '$msg'"; }
	echo "refused (exit $rc): $(grep -o -- "$msg.*" "$log" | head -1)"
}

# exact MTU JOB: the box is up at MTU and reports it; it answers a ping of
# a full MTU-sized frame (not fragmented), and 2 workers at that MTU get
# exact sums
exact() {
	local mtu=$1 job=$2
	in_wk ping -q -c 1 -W 2 -M do -s $((mtu - 28)) $BOX_IP > /dev/null ||
		die "no answer to a $mtu-byte ping at MTU $mtu"
	ctl --json status | python3 -c "
import json, sys
p = json.load(sys.stdin)['ports'][0]
assert p['mtu'] == $mtu, p
" || die "status does not report MTU $mtu"
	workers 2 "$job" "$WORKDIR/$job" --minbytes 4 --maxbytes 1M --stepfactor 16 --iters 2 --check --mtu "$mtu"
	wait_workers 60 || { tail -n 5 "$WORKDIR/$job".*.log; tail -n 5 "$BOX_LOG"; die "workers failed ($job, MTU $mtu)"; }
	grep -q "^# mtu $mtu" "$WORKDIR/$job.0.log" ||
		die "workers not at MTU $mtu: $(grep '^# mtu' "$WORKDIR/$job.0.log")"
	no_bad_drops
}

# 1: net_af_xdp up to its real limit
for m in 1967 3000 3506; do
	BOX_MTU=$m box_start af_xdp
	exact $m xdp$m
	box_stop || die "pboxd exited non-zero (af_xdp, MTU $m)"
	echo "af_xdp: MTU $m exact"
done
for m in 3507 3542; do
	refused "net_af_xdp0,iface=$IF_BD" "MTU $m is above what net_af_xdp takes: 3506 .*use --mtu 3506 or less" --mtu $m
done
ip -n "$NS_BOX" link set "$IF_BD" mtu 1500 && ip -n "$NS_WK" link set "$IF_WD" mtu 1500 ||
	die "cannot reset the veth's MTU"

# 2: net_af_packet's mbufs follow framesz
VDEV_ARGS=",framesz=4096,blocksz=8192" box_start af_packet
exact 1500 pk4096
box_stop || die "pboxd exited non-zero (af_packet framesz=4096)"
echo "af_packet: framesz=4096 at MTU 1500 exact"
BOX_MTU=4000 box_start af_packet   # lib.sh: framesz=10240,blocksz=20480
exact 4000 pk10240
box_stop || die "pboxd exited non-zero (af_packet framesz=10240, MTU 4000)"
echo "af_packet: framesz=10240 at MTU 4000 exact"
refused "net_af_packet0,iface=$IF_BD,framesz=65536,blocksz=65536,framecnt=16" \
	"framesz=65536 needs mbufs of 65632 bytes.*use framesz=65424 or less"

# 3: qpairs above the data lcores (-l 0-1: one data lcore)
refused "net_af_packet0,iface=$IF_BD,qpairs=2" \
	"qpairs=N must equal the number of data lcores, 1: use qpairs=1"
# 4: a --vdev whose PMD refuses it: named, not "bind a NIC" (the veth has
# no combined channels, so net_af_xdp takes no queue_count above 1)
refused "net_af_xdp0,iface=$IF_BD,queue_count=2" "the --vdev device did not come up"
echo "port setup: ok"
