#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_xdp_fleet.sh - a fleet of two boxes over the xdp transport through
# one interface (docs/transports.md "A fleet over xdp"): each worker in
# its own namespace (lib.sh WK_HOSTS) with one data interface, eth0, on
# the bridge both boxes' data ports are on, so its two clients (one per
# box, client/ops/fleet.c) bind two AF_XDP sockets on queue 0 of eth0,
# sharing one UMEM and one XDP program (client/transport/xdp_share.c).
# Before the share, the second socket failed pbox_connect ("queue 0 of
# eth0 already has an AF_XDP socket").
#  1. 4 ranks of restart_prog, dense and PS: the fleet's digests equal
#     one box's bit for bit, both boxes summed contributions;
#  2. pbox-perf over the fleet, 4 ranks, 4 B to 16 MiB, 4 keys in
#     flight, every sum checked (MTU 1500; jumbo frames on xdp:
#     test_xdp.sh);
#  3. two clients of one process, one per box (two jobs), leaving and
#     joining the share in every order (tests/integration/xdp_pair_prog.c:
#     its maker closes while the other runs on, comes back, the other
#     closes), 2 ranks, every sum exact;
#  4. a fleet worker killed -9 leaves nothing: its eth0 has no XDP
#     program within 2 s.
# Skipped (77) where one xdp socket does not work (no AF_XDP, no XDP on
# veth).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
need_root "$0"
export PBOX_TRANSPORT=xdp WK_HOSTS=1
topo_up
build_prog restart_prog
build_prog xdp_pair_prog
box_start af_packet --box-id box1

# box 2: data port 198.18.0.5 on br0 (pboxd's, no kernel address),
# management 198.18.1.5 on br1
NS_B2=pbox-h$TAG-b2
HOST_NS+=("$NS_B2")
ip netns add "$NS_B2" || die "cannot create namespace $NS_B2"
ip -n "$NS_B2" link set lo up
ip link add "b2d$TAG" type veth peer name "b2x$TAG" &&
	ip link set "b2d$TAG" netns "$NS_B2" && ip link set "b2x$TAG" netns "$NS_WK" &&
	ip -n "$NS_WK" link set "b2x$TAG" master br0 up && ip -n "$NS_B2" link set "b2d$TAG" up &&
	ip netns exec "$NS_B2" sysctl -qw net.ipv6.conf."b2d$TAG".disable_ipv6=1 ||
	die "cannot plug box 2's data port"
plug_host "$NS_B2" mgmt br1 198.18.1.5
ip netns exec "$NS_B2" "$BUILD/pboxd" -l 0-1 --no-huge -m 512 --no-pci --no-shconf \
	--file-prefix=pboxr$TAG --vdev="net_af_packet0,iface=b2d$TAG" \
	--log-level=lib.eal:error -- --ip "0:198.18.0.5/24" --control 0.0.0.0:7470 \
	--rpc-socket "$WORKDIR/pboxd2.sock" --idle-sleep-us "${PBOX_IDLE_SLEEP_US:-20}" \
	--box-id box2 > "$WORKDIR/pboxd2.log" 2>&1 &
BOX2_PID=$!; PIDS+=($BOX2_PID)
for _ in $(seq 200); do
	grep -q 'pboxd: ready' "$WORKDIR/pboxd2.log" 2>/dev/null && break
	kill -0 $BOX2_PID 2>/dev/null || break
	sleep 0.1
done
grep -q 'pboxd: ready' "$WORKDIR/pboxd2.log" || { cat "$WORKDIR/pboxd2.log"; die "box 2 not ready"; }
BOXES=$CONTROL,198.18.1.5:7470

pushes() { # pushes SOCKET: contributions the box summed so far
	"$BUILD/pboxctl" --socket "$1" --json stats | python3 -c \
		'import json,sys; print(sum(l["pushes"] for l in json.load(sys.stdin)["lcores"]))'
}

# four worker hosts, one eth0 each
HOSTS=()
for r in 0 1 2 3; do new_host; HOSTS+=("$NEW_HOST"); done

# xdp itself must work here (one box, one socket: test_xdp.sh's ground),
# else there is nothing to share: skipped, saying why
out=$(ip netns exec "${HOSTS[0]}" timeout 60 "$BUILD/pbox-perf" --control "$CONTROL" --job probe \
	--rank 0 --world 1 --minbytes 4 --maxbytes 4 --iters 1 --warmup 0 2>&1) || {
	log "SKIP: the xdp transport does not work here (one socket, one box): $out"; exit 77; }

# run TAG MODE CONTROL: 4 ranks to the end; the one digest they agree on
run() {
	local tag=$1 mode=$2 control=$3 pids=() rc=0
	for r in 0 1 2 3; do
		ip netns exec "${HOSTS[$r]}" timeout 120 "$WORKDIR/restart_prog" "$control" "$tag" $r 4 \
			"$mode" 6 262144 "$WORKDIR/$tag.$r.step" > "$WORKDIR/$tag.$r.log" 2>&1 &
		pids+=($!); PIDS+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	[ $rc = 0 ] || die "$tag ($mode over $control): $(tail -n 3 "$WORKDIR"/$tag.*.log)"
	one_digest "$tag" 4
}

# ---- 1. two boxes through one interface against one box ----
for mode in dense ps; do
	run "one-$mode" "$mode" "$CONTROL"; ONE=$DIGEST
	before1=$(pushes "$PBOX_SOCKET"); before2=$(pushes "$WORKDIR/pboxd2.sock")
	run "two-$mode" "$mode" "$BOXES"; TWO=$DIGEST
	[ "$TWO" = "$ONE" ] || die "$mode over 2 boxes on xdp: digest $TWO, one box $ONE"
	n1=$(( $(pushes "$PBOX_SOCKET") - before1 )); n2=$(( $(pushes "$WORKDIR/pboxd2.sock") - before2 ))
	[ "$n1" -gt 0 ] && [ "$n2" -gt 0 ] || die "$mode: a box summed nothing ($n1, $n2)"
	log "$mode over xdp: 2 boxes through one eth0 equal to one ($ONE); contributions box 1: $n1, box 2: $n2"
done

# ---- 2. pbox-perf over the fleet, every sum checked ----
pids=()
for r in 0 1 2 3; do
	ip netns exec "${HOSTS[$r]}" timeout 120 "$BUILD/pbox-perf" --control "$BOXES" --job perf \
		--rank $r --world 4 --minbytes 4 --maxbytes 16M --stepfactor 16 --iters 2 --keys 4 \
		--check > "$WORKDIR/perf.$r.log" 2>&1 &
	pids+=($!); PIDS+=($!)
done
for r in 0 1 2 3; do
	wait "${pids[$r]}" || die "pbox-perf rank $r over the fleet: $(tail -n 3 "$WORKDIR/perf.$r.log")"
done
grep -q "^# transport: xdp on eth0 queue 0.*(box 1 of 2); box 2 of 2: xdp on eth0 queue 0.*UMEM shared with 1 other socket" "$WORKDIR/perf.0.log" ||
	die "pbox-perf over the fleet not on xdp: $(grep '^# transport' "$WORKDIR/perf.0.log")"
log "pbox-perf over 2 boxes on xdp: exact, 4 B to 16 MiB, 4 keys ($(grep '^# transport:' "$WORKDIR/perf.0.log"))"

# ---- 3. clients leaving and joining the share in every order ----
pids=()
for r in 0 1; do
	ip netns exec "${HOSTS[$r]}" timeout 120 "$WORKDIR/xdp_pair_prog" "$CONTROL" 198.18.1.5:7470 \
		pair $r 2 > "$WORKDIR/pair.$r.log" 2>&1 &
	pids+=($!); PIDS+=($!)
done
for r in 0 1; do
	wait "${pids[$r]}" && grep -q "^ok" "$WORKDIR/pair.$r.log" ||
		die "clients leaving and joining, rank $r: $(tail -n 3 "$WORKDIR/pair.$r.log")"
done
grep -q "^client b: xdp on eth0 queue 0 .*UMEM shared with 1 other socket" "$WORKDIR/pair.0.log" ||
	die "client b did not share client a's UMEM: $(grep '^client' "$WORKDIR/pair.0.log")"
log "leaving and joining in every order: exact ($(grep '^client' "$WORKDIR/pair.0.log" | tr '\n' ' '))"

# ---- 4. kill -9 leaves nothing ----
h=${HOSTS[0]}
# (no timeout(1) in between: $! must be pbox-perf itself; 300 calls of
# 16 MiB bound it to a minute if the kill did not come)
ip netns exec "$h" "$BUILD/pbox-perf" --control "$BOXES" --job killed --rank 0 --world 1 \
	--minbytes 16M --maxbytes 16M --iters 300 > "$WORKDIR/killed.log" 2>&1 &
p=$!; PIDS+=($p)
for _ in $(seq 100); do grep -q "^# transport: xdp" "$WORKDIR/killed.log" && break; sleep 0.1; done
ip -n "$h" link show eth0 | grep -q "prog/xdp" || die "no XDP program on eth0 during the run: $(cat "$WORKDIR/killed.log")"
kill -9 $p; wait $p 2>/dev/null
for _ in $(seq 20); do ip -n "$h" link show eth0 | grep -q "prog/xdp" || break; sleep 0.1; done
ip -n "$h" link show eth0 | grep -q "prog/xdp" && die "eth0 kept an XDP program after kill -9"
log "kill -9: eth0's XDP program went with the process"

kill -TERM $BOX2_PID; wait $BOX2_PID
box_stop || die "pboxd did not stop cleanly"
log "PASS test_xdp_fleet"
