#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# suite.sh - the full training-quality suite of sparse gradients (make
# sparse-quality): every task of tasks.py on 4 ranks for STEPS steps,
# dense, top-k 1% and 0.1% with the defaults, PowerSGD rank 1, 2 and 4 and
# top-k at PowerSGD's bytes per step; then report.py writes the table and
# the plot (OUT, default build/sparse_quality). About 10 minutes on 2 CPUs.
set -eu
cd "$(dirname "$0")"
OUT=${OUT:-../../build/sparse_quality}
STEPS=${STEPS:-300}
PY=${PY:-/usr/bin/python3}
mkdir -p "$OUT"
for t in ${TASKS:-mlp cnn embedding transformer}; do
	timeout 1200 "$PY" run.py --task "$t" --steps "$STEPS" --out "$OUT" --port "${PORT:-29711}" \
		--runs dense,topk:0.01,topk:0.001,psgd:1,psgd:2,psgd:4,topkeq:1,topkeq:2,topkeq:4
done
"$PY" report.py "$OUT"
