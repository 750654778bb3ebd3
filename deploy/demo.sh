#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# demo.sh - `make demo`: a real pboxd on DPDK (net_af_packet on a veth, no
# hugepages) in its own network namespace, 4 worker processes in another,
# allreduce rounds with progress, throughput, and whether every sum was
# exact. Then, if /usr/bin/python3 has torch (Debian's python3-torch), a
# second part: `torchrun --nproc_per_node 4 examples/train_ddp.py --backend
# pbox`, PyTorch DDP on torch.distributed's "pbox" backend through the same
# box (DEMO_TORCH=0 skips it); then a third: `torchrun ... examples/train_box_optimizer.py`, training
# with the optimizer on the box (PS mode, Adam). Stops everything it
# started and removes what it created.
set -u
cd "$(dirname "$0")/.."
. tests/integration/lib.sh
# lib.sh made $WORKDIR; topo_up's EXIT trap removes it, this one until then
trap 'rm -rf "$WORKDIR"' EXIT
need_root "make demo" demo
[ -x "$BUILD/pboxd" ] || die "$BUILD/pboxd missing: run make first"
echo "pbox demo: creating namespaces $NS_BOX (box) and $NS_WK (4 workers)"
topo_up
box_start af_packet
sed 's/^/  /' "$BOX_LOG"
echo
echo "pbox demo: 4 workers, allreduce of float32 buffers 4 KiB .. 16 MiB, 5 rounds each, every sum checked"
workers 4 demo "$WORKDIR/demo" --minbytes 4K --maxbytes 16M --iters 5 --warmup 1 --keys 2 --check
# progress: follow rank 0's table as it is written
tail -n +1 -f "$WORKDIR/demo.0.log" --pid "${WK_PIDS[0]}" 2>/dev/null &
TAIL=$!; PIDS+=($TAIL)
rc=0
wait_workers 300 || rc=1
kill $TAIL 2>/dev/null; wait $TAIL 2>/dev/null
echo
if [ $rc -eq 0 ]; then
	echo "pbox demo: every sum exact on all 4 workers"
else
	echo "pbox demo: FAILED - see below"
	for r in 0 1 2 3; do tail -3 "$WORKDIR/demo.$r.log" | sed "s/^/  rank $r: /"; done
fi
echo
echo "pbox demo: box counters (pboxctl stats)"
ctl stats | sed 's/^/  /'

PY=/usr/bin/python3
# waited CMD...: CMD in the background, waited for. timeout runs its command
# in a process group of its own, which a Ctrl-C does not reach, and bash
# takes the INT trap only once a foreground command has ended (a Ctrl-C
# waited for the torch part to end, up to its 180 s); `wait` returns at
# once, and topo_down stops the timeout (in PIDS meanwhile), which passes
# SIGTERM on to its whole group: torchrun and its ranks.
waited() {
	"$@" &
	local p=$! q rest=()
	PIDS+=($p)
	wait $p
	local wrc=$?
	for q in "${PIDS[@]}"; do [ "$q" = "$p" ] || rest+=("$q"); done
	PIDS=("${rest[@]}")
	return $wrc
}
# torch_part NAME PORT WHAT SCRIPT ARGS...: torchrun SCRIPT on 4 ranks in the
# workers' namespace through the box, rank 0's step lines, then WHAT
# finished or the log's tail; rc=1 if it failed.
# (--redirects 1 --tee 1 work around torch 1.13's torchrun on Python 3.11,
# docs/pytorch.md)
torch_part() {
	local name=$1 port=$2 what=$3; shift 3
	waited timeout -k 5 180 ip netns exec "$NS_WK" env PBOX_CONTROL="$CONTROL" PBOX_JOB="demo-$name" \
		PBOX_LIB="$(pwd)/$BUILD/libpbox.so" PYTHONPATH="$(pwd)/python" \
		$PY -m torch.distributed.run --nproc_per_node 4 --master_addr 127.0.0.1 \
		--master_port "$port" --redirects 1 --tee 1 --log_dir "$WORKDIR/torchrun-$name" \
		"$@" > "$WORKDIR/$name.log" 2>&1
	local trc=$?
	grep -E '^\[default0\]:(step|done)' "$WORKDIR/$name.log" | sed 's/^\[default0\]:/  rank 0: /'
	if [ $trc -eq 0 ]; then
		echo "pbox demo: $what finished"
	else
		echo "pbox demo: $name part FAILED (rc $trc):"; tail -15 "$WORKDIR/$name.log" | sed 's/^/  /'
		rc=1
	fi
}
if [ $rc -eq 0 ] && [ "${DEMO_TORCH:-1}" != 0 ] && waited timeout 60 $PY -c 'import torch, numpy' 2>/dev/null; then
	echo
	echo "pbox demo, part 2: PyTorch DDP, 4 ranks (torchrun), on the backend \"pbox\" (no hook)"
	echo "  torchrun --nproc_per_node 4 examples/train_ddp.py --backend pbox --steps 20"
	torch_part ddp 29500 "DDP training on the pbox backend" examples/train_ddp.py --backend pbox \
		--seed 7 --steps 20
	echo
	echo "pbox demo, part 3: PS mode, the optimizer on the box (pbox.torch.BoxOptimizer, Adam), 4 ranks"
	echo "  torchrun --nproc_per_node 4 examples/train_box_optimizer.py --optimizer adam --steps 20"
	torch_part ps 29501 "training with the optimizer on the box" \
		examples/train_box_optimizer.py --optimizer adam --seed 7 --steps 20
elif [ $rc -eq 0 ] && [ "${DEMO_TORCH:-1}" != 0 ]; then
	echo
	echo "pbox demo: parts 2 and 3 skipped: $PY cannot import torch and numpy" \
	     "(apt-get install python3-torch python3-numpy)"
fi
box_stop
echo "pbox demo: stopped pboxd, removing namespaces"
exit $rc
