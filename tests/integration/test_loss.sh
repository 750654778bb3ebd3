#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_loss.sh - exact sums under random packet loss in both directions
# (1%, 5%, 20%; nftables "numgen random" drop on the data path only:
# lib.sh loss_rules), with retransmissions counted on both sides.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
command -v nft >/dev/null || { echo "SKIP: needs nft (nftables)"; exit 77; }
topo_up
box_start af_packet
for pct in 1 5 20; do
	loss_rules $pct
	max=4M; [ $pct -ge 20 ] && max=1M
	workers 4 "loss$pct" "$WORKDIR/l$pct" --minbytes 4 --maxbytes $max --iters 2 --keys 2 --check
	wait_workers 240 || { tail -n 5 "$WORKDIR"/l$pct.*.log; die "allreduce failed at ${pct}% loss"; }
	worst=$(awk '!/^#/ && NF >= 5 && $4 > m { m = $4 } END { printf "%.2f", m / 1e6 }' "$WORKDIR"/l$pct.*.log)
	echo "${pct}% loss each way: exact, slowest size ${worst} s per call; $(grep -E "^# (packets|round)" "$WORKDIR/l$pct.0.log" | tr "\n" " ")"
	grep -q "retransmits [1-9]" "$WORKDIR/l$pct.0.log" || die "no retransmissions counted at ${pct}% loss"
done
ctl --json stats | python3 -c '
import json, sys
l = json.load(sys.stdin)["lcores"][0]
print("box: retx", l["retx"], "dup_open", l["dup_open"], "dup_done", l["dup_done"])
assert l["retx"] > 0 and l["dup_done"] > 0, l
' || die "box counters do not show the retransmissions"
box_stop || die "pboxd exited non-zero"
echo "loss: exact at 1%, 5%, 20%"
