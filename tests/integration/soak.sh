#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# soak.sh - many allreduce rounds under 2% random loss each way for
# SOAK_SECONDS (default 600; `make soak`), jobs started and ended over and
# over under the same name; every sum checked exact, pboxd's resident memory
# sampled after the first job and at the end: drift above SOAK_MAX_DRIFT_KB
# (default 8192) fails. test_soak.sh runs a short one in `make test`.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
SECS=${SOAK_SECONDS:-600}
MAXDRIFT=${SOAK_MAX_DRIFT_KB:-8192}
topo_up
box_start af_packet
in_wk nft -f - <<NFT || die "cannot install the nftables loss rules"
table inet pboxsoak {
	chain out { type filter hook output priority 0; ip daddr $BOX_IP udp dport 47000-47999 numgen random mod 100 < 2 drop; }
	chain in { type filter hook input priority 0; ip saddr $BOX_IP udp sport 47000-47999 numgen random mod 100 < 2 drop; }
}
NFT
rss() { awk '/VmRSS/ {print $2}' /proc/$BOX_PID/status; }
start=$SECONDS; runs=0; first=
while [ $((SECONDS - start)) -lt "$SECS" ] || [ $runs -lt 2 ]; do
	workers 4 soak "$WORKDIR/soak" --minbytes 4 --maxbytes 2M --iters 3 --keys 3 --check
	wait_workers 300 || { tail -n 3 "$WORKDIR"/soak.*.log; die "soak run $runs failed"; }
	runs=$((runs + 1))
	for _ in $(seq 50); do ctl --json jobs | grep -q '"soak"' || break; sleep 0.1; done
	[ -n "$first" ] || first=$(rss)
done
last=$(rss)
drift=$((last - first))
ctl --json stats | python3 -c '
import json, sys
l = json.load(sys.stdin)["lcores"]
print("box: completes", sum(x["completes"] for x in l), "retx", sum(x["retx"] for x in l),
      "dup_done", sum(x["dup_done"] for x in l))'
echo "soak: $runs jobs in $((SECONDS - start))s, all exact; pboxd RSS ${first} kB -> ${last} kB (drift ${drift} kB)"
[ "$drift" -le "$MAXDRIFT" ] || die "pboxd memory grew by ${drift} kB"
box_stop || die "pboxd exited non-zero"
