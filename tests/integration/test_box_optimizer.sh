#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_box_optimizer.sh - PS mode from Python: pbox.torch.BoxOptimizer
# against torch.optim, on the real pboxd (DPDK net_af_packet).
#
#  1. box_optimizer_check.py bad, world 1: wrong inputs (unknown
#     optimizer, out-of-range hyperparameters, flags the box does not run,
#     push before ps_init, wrong buffers, a hyperparameter changed after
#     construction, stale gradients with overlap=True) raise named errors;
#     a torch.optim.Adam state_dict loads into a BoxOptimizer (one key of
#     4522 floats) and back; 16-bit parameters step as torch rounds them.
#  2. 4 ranks (plain processes: BoxOptimizer needs no process group), each
#     from its own random init and on its own data, train an MLP with two
#     param groups for 50 steps with SGD (momentum, Nesterov, weight decay,
#     a per-step lr schedule), Adam (L2 weight decay, StepLR), AdamW and
#     SGD with overlap=True; a state_dict/load_state_dict round trip at
#     step 40. The same again under 5% packet loss each way (lib.sh
#     loss_rules).
#  3. box_optimizer_check.py compare: every rank started from rank 0's
#     weights and ends with the same bits; weights and optimizer state
#     match a torch.optim reference on the ranks' averaged gradients within
#     rtol 1e-5, atol 1e-6 (why: the docstring of box_optimizer_check.py);
#     overlap=True gives the bits of overlap=False; the lossy run the bits
#     of the lossless one.
# Needs torch for /usr/bin/python3 and nft; skips (77) without.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
need_root "$0"
need_torch
command -v nft >/dev/null || { log "SKIP: needs nft (nftables) for the loss run"; exit 77; }
use_python_package
CHECK=tests/integration/box_optimizer_check.py
WORLD=4

topo_up
box_start af_packet

# the reference needs no box: it runs while the box is busy with the rest
timeout -k 5 120 "$PY" "$CHECK" reference "$WORKDIR/ref.pt" > "$WORKDIR/ref.log" 2>&1 &
REF_PID=$!; PIDS+=($REF_PID)

# a failure here is reported at the end: the training runs still go
BAD=ok
timeout -k 5 60 ip netns exec "$NS_WK" "$PY" "$CHECK" bad "$CONTROL" > "$WORKDIR/bad.log" 2>&1 ||
	BAD=failed
if [ $BAD = ok ]; then tail -1 "$WORKDIR/bad.log"; else cat "$WORKDIR/bad.log"; fi

# train NAME: WORLD ranks of `box_optimizer_check.py rank` into $WORKDIR/NAME
train() {
	local name=$1 start=$SECONDS pids=() rc=0 r p
	mkdir -p "$WORKDIR/$name"
	for r in $(seq 0 $((WORLD - 1))); do
		worker_ns
		# not through in_wk: $! must be the process itself, for its PID
		timeout -k 5 120 ip netns exec "$WORKER_NS" env RANK=$r WORLD_SIZE=$WORLD \
			PBOX_CONTROL="$CONTROL" PBOX_JOB="bo-$name-$TAG" \
			"$PY" "$CHECK" rank "$WORKDIR/$name/rank$r.pt" > "$WORKDIR/$name/rank$r.log" 2>&1 &
		pids+=($!); PIDS+=($!)
	done
	for p in "${pids[@]}"; do
		wait "$p" || rc=1
	done
	if [ $rc != 0 ]; then
		for r in $(seq 0 $((WORLD - 1))); do
			echo "== rank $r"; tail -15 "$WORKDIR/$name/rank$r.log"
		done
		die "$name: a rank failed"
	fi
	sed 's/^/    /' "$WORKDIR/$name/rank0.log"
	echo "$name: $WORLD ranks done in $((SECONDS - start)) s"
}

train lossless
loss_rules 5
train loss5
loss_rules 0

wait $REF_PID || { cat "$WORKDIR/ref.log"; die "the torch.optim reference failed"; }
timeout 60 "$PY" "$CHECK" compare "$WORKDIR/ref.pt" "$WORKDIR/lossless" "$WORKDIR/loss5" ||
	die "BoxOptimizer differs from torch.optim, between ranks or between runs"
[ $BAD = ok ] || die "world-1 checks failed (see above)"

box_stop || die "pboxd exited non-zero"
echo "box_optimizer: SGD, Adam, AdamW on the box match torch.optim; ranks identical; exact under 5% loss"
