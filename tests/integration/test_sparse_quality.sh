#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_sparse_quality.sh - the reduced training-quality check of sparse
# gradients against the real pboxd (make test; the full suite of four
# tasks against PowerSGD is make sparse-quality, bench/sparse_quality):
# sparse_quality_check.py on 4 ranks over the box: bad TopkState/TopkSGD
# arguments refused at construction, the MLP task's top-k 1% run (TopkSGD,
# the defaults) within 10% of the dense run's held-out loss after STEPS
# steps, and a checkpointed sparse run resumed from its state_dict (with
# the residuals and momentum) giving the same losses bit for bit as the
# run that did not stop; other shapes drop the state with a warning.
# Needs torch for /usr/bin/python3; skips (77) without.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
need_root "$0"
need_torch numpy
use_python_package

topo_up
box_start af_packet
timeout -k 5 150 ip netns exec "$NS_WK" env PBOX_CONTROL="$CONTROL" PBOX_JOB=sparseq \
	PBOX_LIB="$PBOX_LIB" PYTHONPATH="$PYTHONPATH" \
	"$PY" tests/integration/sparse_quality_check.py --steps "${STEPS:-150}" --world 4 \
	> "$WORKDIR/check.log" 2>&1 & 
PIDS+=($!)
wait $! || { grep -v Warning "$WORKDIR/check.log" | tail -30; die "sparse_quality_check.py failed"; }
grep -v 'Warning\|warnings.warn' "$WORKDIR/check.log"
box_stop || die "pboxd exited non-zero"
echo "sparse quality: bad input refused, top-k 1% within 10% of dense, resume exact"
