#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# auto_mtu.sh - what the automatic MTU is worth: pboxd at MTU 9000 on a
# jumbo veth, 4 workers with default options (pbox_opts.mtu 0: they find
# 9000) against the same workers held to 1500 (the default before the
# automatic MTU), REPS interleaved runs each, 1 MiB and 64 MiB f32; prints
# the median time per call. Root (namespaces, veth, DPDK).
#   bash bench/auto_mtu.sh [REPS]
set -u
cd "$(dirname "$0")/.."
. tests/integration/lib.sh
need_root "$0" "bench"
REPS=${1:-3}
topo_up
BOX_MTU=9000 box_start af_packet > /dev/null
run() { # run NAME ARGS...: one 4-rank job, prints "size seconds" lines
	local name=$1; shift
	workers 4 "$name" "$WORKDIR/$name" --minbytes 1M --maxbytes 64M --stepfactor 64 --iters 5 --warmup 1 "$@"
	wait_workers 300 || { tail -n 3 "$WORKDIR/$name".*.log; die "$name failed"; }
	awk '/^ *[0-9]/ && NF >= 7 {print $1, $4 / 1e6}' "$WORKDIR/$name.0.log"
}
for r in $(seq "$REPS"); do
	run "auto$r" | sed 's/^/auto /'
	run "m1500$r" --mtu 1500 | sed 's/^/1500 /'
done > "$WORKDIR/all.txt"
head -40 "$WORKDIR/auto1.0.log" | grep -E "^#|size" | head -5
python3 - "$WORKDIR/all.txt" <<'PY'
import collections, statistics, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    kind, size, sec = line.split()
    t[(kind, int(size))].append(float(sec))
for size in sorted({s for _, s in t}):
    a, b = statistics.median(t[("auto", size)]), statistics.median(t[("1500", size)])
    print(f"{size:>10} B: default options (automatic MTU 9000) {a * 1e3:8.2f} ms, "
          f"MTU 1500 {b * 1e3:8.2f} ms, ratio {b / a:.2f}x  ({len(t[('auto', size)])} runs each)")
PY
box_stop
