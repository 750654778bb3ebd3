#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_sparse.sh - sparse keys against the real pboxd (docs/protocol.md
# "Sparse keys"): 4 pbox-perf ranks call pbox_allreduce_sparse at 1% and
# 30% density (index and bitmap records) and pbox_allreduce_topk at 1%
# with error feedback; every element of every sum is checked (--check
# replays every rank's entries and selections), without loss and at 5%
# loss each way; hierarchical top-k (two hosts of two ranks) is exact too,
# its non-leaders send under 40% of the leader's bytes and nothing is
# left in /dev/shm; the box drops nothing as bad_sparse, and a sparse call
# moves a small fraction of the dense call's bytes.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
command -v nft >/dev/null || { echo "SKIP: needs nft (nftables)"; exit 77; }
topo_up
box_start af_packet
run() { # run NAME PCT pbox-perf-args...
	local name=$1 pct=$2; shift 2
	loss_rules "$pct"
	workers 4 "$name" "$WORKDIR/$name" --iters 3 --warmup 1 --check "$@"
	wait_workers 240 || { tail -n 5 "$WORKDIR/$name".*.log; die "$name failed at ${pct}% loss"; }
	grep -v '^#' "$WORKDIR/$name.0.log" | awk 'NF >= 7 && $7 != 0 { exit 1 }' ||
		die "$name: wrong elements"
	echo "$name (${pct}% loss): exact; $(grep -E '^# bytes' "$WORKDIR/$name.0.log")"
}
run sp1 0 --sparse 0.01 --minbytes 64K --maxbytes 4M --stepfactor 8
run sp30 0 --sparse 0.3 --minbytes 1M --maxbytes 1M
run topk 0 --topk 0.01 --minbytes 64K --maxbytes 4M --stepfactor 8
run sp1loss 5 --sparse 0.01 --minbytes 4M --maxbytes 4M
run topkloss 5 --topk 0.01 --minbytes 4M --maxbytes 4M
# hierarchical: two "hosts" of two ranks (shared memory within the
# namespace's host), the leaders' selections replayed by --check
run topkhier 0 --topk 0.01 --topk-local 2 --minbytes 64K --maxbytes 4M --stepfactor 8
run topkhierloss 5 --topk 0.01 --topk-local 2 --minbytes 4M --maxbytes 4M
lead=$(sed -n 's/^# bytes: sent \([0-9]*\) .*/\1/p' "$WORKDIR/topkhier.0.log")
other=$(sed -n 's/^# bytes: sent \([0-9]*\) .*/\1/p' "$WORKDIR/topkhier.1.log")
echo "hierarchical: leader rank 0 sent $lead bytes, rank 1 $other (empty contributions)"
# (an empty contribution is an 8-byte record per segment; at MTU 1500 and
# 1% a leader's record is about 30 bytes: docs/performance.md)
[ -n "$lead" ] && [ -n "$other" ] && [ "$((other * 5))" -lt "$((lead * 2))" ] ||
	die "hierarchical top-k: rank 1 sent $other bytes against the leader's $lead (expected under 40%)"
ls /dev/shm | grep -q '^pbox-' && die "hierarchical top-k left $(ls /dev/shm | grep '^pbox-' | head -3) in /dev/shm"
loss_rules 0
# bytes: a 4 MiB top-k call at 1% against the dense call of the same size
workers 4 dense "$WORKDIR/dense" --iters 3 --warmup 1 --minbytes 4M --maxbytes 4M
wait_workers 240 || die "dense 4 MiB failed"
workers 4 topkb "$WORKDIR/topkb" --iters 3 --warmup 1 --minbytes 4M --maxbytes 4M --topk 0.01
wait_workers 240 || die "top-k 4 MiB failed"
sent() { sed -n 's/^# bytes: sent \([0-9]*\) .*/\1/p' "$1"; }
d=$(sent "$WORKDIR/dense.0.log"); s=$(sent "$WORKDIR/topkb.0.log")
ratio=$(awk -v s="$s" -v d="$d" 'BEGIN { printf "%.4f", s / d }')
echo "4 MiB, 4 ranks: rank 0 sent $s bytes for top-k 1% against $d dense: $ratio"
awk -v r="$ratio" 'BEGIN { exit !(r <= 0.03) }' || die "a 1% top-k call sent $ratio of the dense call's bytes (goal <= 0.03)"
ctl --json stats | python3 -c '
import json, sys
s = json.load(sys.stdin)
d = {k: sum(l["drops"].get(k, 0) for l in s["lcores"]) for k in ("bad_sparse", "sparse_mismatch")}
print("box drops:", d)
assert d["bad_sparse"] == 0 and d["sparse_mismatch"] == 0, d
' || die "the box dropped sparse packets as malformed"
box_stop || die "pboxd exited non-zero"
echo "sparse: exact at 0% and 5% loss, flat and hierarchical"
