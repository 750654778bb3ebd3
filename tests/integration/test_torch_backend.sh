#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_torch_backend.sh - torch.distributed's "pbox" backend against the
# real pboxd on DPDK net_af_packet, 4 ranks under torchrun, with no PBOX_JOB
# (the job and its join secret come from the c10d store):
#  1. every collective the box runs, exact against each rank's own
#     reference, and the ops that go to Gloo (torch_backend_check.py
#     --part coll), lossless and then with 5% of the pbox packets dropped
#     each way;
#  2. DDP with no hook (conv, embedding, layernorm, an unused parameter,
#     no_sync) and a sharded reduce_scatter/all_gather SGD against DDP on
#     Gloo in the same processes (--part train);
#  3. the box saw the job's broadcast, allgather and reduce_scatter keys
#     (pboxctl job show) and dropped nothing well-formed.
# Needs torch for /usr/bin/python3 (Debian: python3-torch); skips (77) without.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
torch_test_up "$0"

PORT=29600
# trun NAME ARGS...: torchrun 4 ranks of torch_backend_check.py in the
# workers' namespace (--redirects 1 --tee 1: see test_pytorch.sh).
trun() {
	local name=$1; shift
	PORT=$((PORT + 1))
	log "--- $name: $*"
	timeout -k 5 240 ip netns exec "$NS_WK" env -u PBOX_JOB -u TORCHELASTIC_RUN_ID \
		PBOX_CONTROL="$CONTROL" PBOX_LIB="$PBOX_LIB" PYTHONPATH="$PYTHONPATH" \
		"$PY" -m torch.distributed.run --nproc_per_node 4 --master_addr 127.0.0.1 \
		--master_port $PORT --redirects 1 --tee 1 --log_dir "$WORKDIR/tr-$name" \
		tests/integration/torch_backend_check.py "$@" > "$WORKDIR/$name.log" 2>&1
	local rc=$?
	grep -E 'backend (coll|train):|FAIL|diff|retransmits|memory:' "$WORKDIR/$name.log" | sort -u | sed 's/^/    /' >&2
	if [ $rc -ne 0 ] || ! grep -q 'backend [a-z]*: [0-9]* passed, 0 failed' "$WORKDIR/$name.log"; then
		grep -E "^[A-Za-z_.]*(Error|Exception)" "$WORKDIR/$name.log" | sort | uniq -c | head
		tail -40 "$WORKDIR/$name.log"
		for f in $(find "$WORKDIR/tr-$name" -name 'std*.log' 2>/dev/null); do
			echo "== $f"; tail -30 "$f"
		done
		die "$name: torchrun rc=$rc"
	fi
}

trun coll --part coll --steps 2
# the job was named by rank 0 through the store (no PBOX_JOB was set)
grep -q "job 'pg-[0-9a-f]\{16\}'" "$WORKDIR/tr-coll"/*/attempt_0/0/stdout.log ||
	die "rank 0 did not report a pg-* job made through the store"
loss_rules 5
trun coll-loss --part coll --steps 1
loss_rules 0
trun train --part train --steps 12

no_bad_drops
box_stop || die "pboxd exited non-zero"
echo "torch backend: collectives exact, DDP and sharded training match Gloo"
