#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_multiport.sh - pboxd with two data ports on one L2 segment, as a box
# with two NIC ports on one switch: the workers' side is a Linux bridge
# (the switch) with both box veths on it. Chunks are balanced over the
# (port, lcore) endpoints, workers send each chunk to its port's address,
# both ports carry a fair share of the traffic, and every sum is exact.
# Then the same transfer through one port, for the throughput comparison
# written to docs/performance.md.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
topo_up
second_port_up

SIZE=${MULTIPORT_BYTES:-16M}
ITERS=${MULTIPORT_ITERS:-3}

# run_case NAME: 4 workers allreduce SIZE ITERS times with 2 keys; prints
# rank 0's last line (size, time, algbw) into $WORKDIR/NAME.res
run_case() {
	workers 4 "$1" "$WORKDIR/$1" --minbytes "$SIZE" --maxbytes "$SIZE" --iters "$ITERS" --keys 2 --check
	wait_workers 180 || { tail -5 "$WORKDIR/$1".*.log; die "$1: workers failed"; }
	grep -E '^ +[0-9]+ ' "$WORKDIR/$1.0.log" | tail -1 | tee "$WORKDIR/$1.res"
}

EXTRA_VDEV="net_af_packet1,iface=$IF_BE" box_start af_packet --ip 1:$BOX_IP2/24
ctl status | sed -n '1,4p'
ctl --json status | python3 -c '
import json, sys
s = json.load(sys.stdin)
assert len(s["ports"]) == 2, s["ports"]
' || die "expected 2 data ports"
run_case two
ctl stats | sed -n '1,4p'
ctl --json stats | python3 -c '
import json, sys
s = json.load(sys.stdin)
ps = s["ports"]
rx = [p["ipackets"] for p in ps]
tot = sum(rx)
print("rx packets per port:", rx)
# two keys of equal size, chunks balanced by bytes over both ports
assert all(r > 0.3 * tot for r in rx), rx
bad = {k: v for k, v in s["drops"].items() if v and k not in ("not_ip", "not_mine", "not_udp")}
assert not bad, bad
' || die "traffic not spread over both ports"
box_stop || die "pboxd exited non-zero"

box_start af_packet
run_case one
box_stop || die "pboxd exited non-zero"
python3 - "$WORKDIR/two.res" "$WORKDIR/one.res" <<'PY'
import sys
t2 = float(open(sys.argv[1]).read().split()[3]); t1 = float(open(sys.argv[2]).read().split()[3])
print("multiport: exact; time per allreduce (us): 2 ports %.0f, 1 port %.0f (1 port / 2 ports = %.2fx)" % (t2, t1, t1 / t2))
PY
