#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_loss.sh - exact sums under random packet loss in both directions
# (1%, 5%, 20%; nftables "numgen random" drop on the data path only:
# lib.sh loss_rules), with retransmissions counted on both sides; then
# 16 MiB at 20% loss must take at most 4x its lossless time (median of 3
# calls each, measured side by side: box NACKs and WAITs, client RACK,
# docs/protocol.md "Recovery").
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
print("box: retx", l["retx"], "dup_open", l["dup_open"], "dup_done", l["dup_done"],
      "waits", l["waits"], "nacks", l["nacks"])
assert l["retx"] > 0 and l["dup_done"] > 0 and l["waits"] > 0 and l["nacks"] > 0, l
' || die "box counters do not show the retransmissions, WAITs and NACKs"
# 16 MiB: lossless, then 20% each way; median us per call is column 4
median_of() { grep -v '^#' "$1" | awk 'NF >= 5 { print $4 }' | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
for pct in 0 20; do
	loss_rules $pct
	workers 4 "big$pct" "$WORKDIR/big$pct" --minbytes 16M --maxbytes 16M --iters 3 --check
	wait_workers 240 || { tail -n 5 "$WORKDIR"/big$pct.*.log; die "16 MiB failed at ${pct}% loss"; }
	grep -E "^# recovery" "$WORKDIR/big$pct.0.log"
done
t0=$(median_of "$WORKDIR/big0.0.log"); t20=$(median_of "$WORKDIR/big20.0.log")
ratio=$(awk -v a="$t20" -v b="$t0" 'BEGIN { printf "%.2f", a / b }')
echo "16 MiB, 4 ranks: $(awk -v t="$t0" 'BEGIN { printf "%.3f", t / 1e6 }') s lossless, $(awk -v t="$t20" 'BEGIN { printf "%.3f", t / 1e6 }') s at 20% loss each way: ${ratio}x"
awk -v r="$ratio" 'BEGIN { exit !(r <= 4) }' || die "16 MiB at 20% loss took ${ratio}x its lossless time (at most 4x)"
box_stop || die "pboxd exited non-zero"
echo "loss: exact at 1%, 5%, 20%"
