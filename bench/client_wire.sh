#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# client_wire.sh - one client against the wire limit of its path (issue 5,
# "client at line rate"). In the test topology (tests/integration/lib.sh:
# pboxd on net_af_packet on a veth, the worker in its own namespace):
#   1. pbox-perf as a job of one rank, SIZE per call: every byte goes to the
#      box and comes back, so the client's send rate is SIZE / time;
#   2. pbox-perf --blast to the box's data port for SECONDS: datagrams of
#      pbox's size (1448 B) as fast as the kernel takes them, batched the
#      same way (the box drops them: bad magic). The box's port counters
#      say how many arrived;
#   3. the same blast with UDP GSO (32 datagrams per send; the worker's
#      veth is set to gso_max_segs 1 so the kernel cuts them before the
#      veth, as a NIC without USO would);
#   4. pbox-perf again with --udp-offload (GSO sends, GRO receives) on that
#      same setting.
#   5. one client with each window of WINDOWS (default "32 64 128 256 512"
#      segments in flight) beside the measured round trip: the window the
#      bandwidth-delay product asks for.
# Prints each rate and pbox's share of the blast. Median of REPS runs.
# usage: bench/client_wire.sh [SIZE (default 64M)] [SECONDS (default 3)] [REPS (default 3)]
set -u
cd "$(dirname "$0")/.."
. tests/integration/lib.sh
need_root "$0"
SIZE=${1:-64M}; SECS=${2:-3}; REPS=${3:-3}
topo_up
box_start af_packet

rx_packets() { ctl --json stats | python3 -c 'import json,sys; print(sum(p["ipackets"] for p in json.load(sys.stdin)["ports"]))'; }
median() { python3 -c 'import sys, statistics; print("%.3f" % statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }

# one_client JOB [pbox-perf options]: algbw (GB/s) of one rank alone
one_client() {
	local job=$1; shift
	local out
	out=$(in_wk "$BUILD/pbox-perf" --control "$CONTROL" --job "$job" --rank 0 --world 1 \
		--minbytes "$SIZE" --maxbytes "$SIZE" --iters 5 --warmup 1 "$@") || die "pbox-perf failed: $out"
	echo "$out" | awk '!/^#/ && NF >= 5 { print $5 }' | tail -1
}

pbox=(); blast=(); arrived=(); gso=(); gso_arrived=(); pbox_gso=()
for i in $(seq "$REPS"); do
	pbox+=("$(one_client wire$i)")
	ip -n "$NS_WK" link set dev "$IF_WD" gso_max_segs 1
	pbox_gso+=("$(one_client wireo$i --udp-offload)")
	ip -n "$NS_WK" link set dev "$IF_WD" gso_max_segs 65535
	for mode in plain gso; do
		flag=; [ $mode = gso ] && flag=--blast-gso
		[ $mode = gso ] && ip -n "$NS_WK" link set dev "$IF_WD" gso_max_segs 1
		before=$(rx_packets)
		b=$(in_wk "$BUILD/pbox-perf" --blast "$BOX_IP:47000" --blast-seconds "$SECS" $flag) || die "blast failed"
		sleep 0.3
		got=$(( $(rx_packets) - before ))
		sent_gbs=$(echo "$b" | sed -n 's/.*, \([0-9.]*\) GB\/s.*/\1/p')
		arr_gbs=$(python3 -c "print('%.3f' % ($got * 1448 / $SECS / 1e9))")
		[ $mode = gso ] && ip -n "$NS_WK" link set dev "$IF_WD" gso_max_segs 65535
		if [ $mode = plain ]; then blast+=("$sent_gbs"); arrived+=("$arr_gbs"); else gso+=("$sent_gbs"); gso_arrived+=("$arr_gbs"); fi
	done
	echo "run $i: pbox ${pbox[-1]} GB/s each way (${pbox_gso[-1]} with --udp-offload); blast sent ${blast[-1]} arrived ${arrived[-1]} GB/s; GSO blast sent ${gso[-1]} arrived ${gso_arrived[-1]} GB/s"
done
P=$(median "${pbox[@]}"); B=$(median "${blast[@]}"); A=$(median "${arrived[@]}")
G=$(median "${gso[@]}"); GA=$(median "${gso_arrived[@]}"); PG=$(median "${pbox_gso[@]}")
echo "median of $REPS: pbox one client $SIZE: $P GB/s sent (and as much received)"
echo "median of $REPS: pbox one client $SIZE with --udp-offload: $PG GB/s"
echo "median of $REPS: raw UDP blast: $B GB/s sent, $A GB/s reached the box"
echo "median of $REPS: raw UDP blast with GSO: $G GB/s sent, $GA GB/s reached the box"
python3 -c "print('pbox / blast (arrived): %.2f; pbox --udp-offload / GSO blast (arrived): %.2f; offload gain %.2fx' % ($P / $A if $A else 0, $PG / $GA if $GA else 0, $PG / $P if $P else 0))"
for w in ${WINDOWS:-32 64 128 256 512}; do
	r=(); rt=
	for i in $(seq "$REPS"); do
		out=$(in_wk "$BUILD/pbox-perf" --control "$CONTROL" --job win$w.$i --rank 0 --world 1 \
			--minbytes "$SIZE" --maxbytes "$SIZE" --iters 5 --warmup 1 --window "$w") || die "pbox-perf failed"
		r+=("$(echo "$out" | awk '!/^#/ && NF >= 5 { print $5 }' | tail -1)")
		rt="$rt $(echo "$out" | sed -n 's/# round trip srtt \([0-9]*\) us.*/\1/p')"
	done
	echo "window $w: $(median "${r[@]}") GB/s (median of $REPS; srtt us:$rt)"
done
box_stop || die "pboxd exited non-zero"
