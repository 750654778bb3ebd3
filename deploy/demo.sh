#!/usr/bin/env bash
# demo.sh - `make demo`: a real pboxd on DPDK (net_af_packet on a veth, no
# hugepages) in its own network namespace, 4 worker processes in another,
# allreduce rounds with progress, throughput, and whether every sum was
# exact. Stops everything it started and removes what it created.
set -u
cd "$(dirname "$0")/.."
. tests/integration/lib.sh
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
box_stop
echo "pbox demo: stopped pboxd, removing namespaces"
exit $rc
