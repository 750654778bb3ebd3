#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run.sh - issue 17's checks that need a GPU (docs/gpu.md "Running
# tests/gpu/run.sh on a GPU host"). On a machine without one it prints
# "SKIP: no GPU (nvidia-smi -L lists none)" and exits 0.
#
#   sudo bash tests/gpu/run.sh          (BUILD=build, STEPS=30, WORLD=min(4, GPUs))
#
#  1. build: make all gpu (libpbox, pboxd, the GPU library
#     $BUILD/libpbox-gpu.so.1 and its kernel test, from gpu/).
#  2. the kernels against their CPU references on the device:
#     $BUILD/tests/gpu/kernels, built by `make gpu` (gpu/ owns it).
#  3. bench/gpu_stage on the real library: the staging cost per bucket,
#     each stage's GB/s and the share of copy time hidden (in-process box,
#     no root).
#  4. DDP on CUDA tensors (examples/train_ddp.py --device cuda, same seed)
#     through pboxd on the test topology of tests/integration (root:
#     namespaces, veth, DPDK net_af_packet): the pbox fp32 hook, the pbox
#     backend and the bf16 hook against NCCL and Gloo on the same GPUs
#     (tests/gpu/compare.py says what must agree and how closely).
# Exits 1 at the first failure, naming it.
set -u
cd "$(dirname "$0")/../.."

if ! command -v nvidia-smi > /dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
	echo "SKIP: no GPU (nvidia-smi -L lists none)"
	exit 0
fi
NGPU=$(nvidia-smi -L | grep -c '^GPU ')
BUILD=${BUILD:-build}
STEPS=${STEPS:-30}
WORLD=${WORLD:-$((NGPU < 4 ? NGPU : 4))}
[ "$WORLD" -ge 2 ] || WORLD=2     # one GPU: two ranks share it (no NCCL run then)
log() { printf '%s\n' "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }
log "gpu/run.sh: $NGPU GPU(s): $(nvidia-smi -L | head -4 | tr '\n' ';')"

# ---- 1. build --------------------------------------------------------------
make -j"$(nproc)" all gpu BUILD="$BUILD" > "/tmp/pbox-gpu-build.log" 2>&1 ||
	{ tail -30 /tmp/pbox-gpu-build.log; die "make all gpu failed (log: /tmp/pbox-gpu-build.log)"; }
export PBOX_GPU_LIB=${PBOX_GPU_LIB:-$(pwd)/$BUILD/libpbox-gpu.so.1}
[ -e "$PBOX_GPU_LIB" ] || die "no GPU library at $PBOX_GPU_LIB after make gpu"

# ---- 2. kernels vs CPU references (gpu/'s program) ----------------------------
# the kernels against their CPU references (gpu/, make gpu)
if [ -x "$BUILD/tests/gpu/kernels" ]; then
	log "--- 2. $BUILD/tests/gpu/kernels"
	"$BUILD/tests/gpu/kernels" || die "gpu/kernels: the device kernels differ from their CPU references"
else
	log "--- 2. $BUILD/tests/gpu/kernels is not built (make gpu did not make it): not run"
fi

# ---- 3. the staging pipeline's figures ----------------------------------------
log "--- 3. bench/gpu_stage on $PBOX_GPU_LIB"
"$BUILD/bench/gpu_stage" --world 2 1M 16M 64M || die "bench/gpu_stage failed"
"$BUILD/bench/gpu_stage" --world 2 --dtype f32 --wire bf16 16M 64M || die "bench/gpu_stage (bf16 wire) failed"

# ---- 4. DDP on CUDA tensors through the box vs NCCL and Gloo --------------------
[ "$(id -u)" = 0 ] || die "step 4 needs root (the box runs in the test topology's namespaces): sudo bash $0"
. tests/integration/lib.sh
need_torch
"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' ||
	die "$PY's torch sees no CUDA device (a CPU-only torch?): install a CUDA build of torch"
use_python_package
topo_up
box_start af_packet
PORT=29600
run_ddp() {   # run_ddp NAME ARGS...: WORLD ranks of train_ddp.py --device cuda
	local name=$1; shift
	PORT=$((PORT + 1))
	log "--- 4. $name: $*"
	timeout -k 5 300 ip netns exec "$NS_WK" env PBOX_CONTROL="$CONTROL" PBOX_JOB="gpu-$name" \
		PBOX_LIB="$PBOX_LIB" PBOX_GPU_LIB="$PBOX_GPU_LIB" PYTHONPATH="$PYTHONPATH" \
		"$PY" -m torch.distributed.run --nproc_per_node "$WORLD" --master_addr 127.0.0.1 \
		--master_port $PORT --redirects 1 --tee 1 --log_dir "$WORKDIR/tr-$name" \
		examples/train_ddp.py --device cuda --seed 7 --steps "$STEPS" \
		--out "$WORKDIR/$name.json" "$@" > "$WORKDIR/$name.log" 2>&1 ||
		{ tail -40 "$WORKDIR/$name.log"; die "$name: torchrun failed"; }
	grep -E 'done:' "$WORKDIR/$name.log" | sed 's/^/    /' >&2
}
run_ddp gloo
[ "$WORLD" -le "$NGPU" ] && run_ddp nccl --backend nccl
run_ddp pbox --pbox
run_ddp pbox-backend --backend pbox
run_ddp pbox-bf16 --pbox --hook bf16
timeout 60 "$PY" tests/gpu/compare.py "$WORKDIR" || die "DDP on CUDA through the box differs"
no_bad_drops
box_stop || die "pboxd exited non-zero"
echo "gpu: kernels, staging figures and DDP on CUDA through the box (vs NCCL and Gloo) passed"
