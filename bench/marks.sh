#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# marks.sh - how often one data lcore owning two single-queue ports counts
# as congested (docs/protocol.md "Congestion"; docs/reliability.md "When
# an lcore stands"): 4 ranks allreduce SIZE in 2 keys ITERS times through
# test_multiport.sh's two-port topology; per run, rank 0's time per call
# and the box's CE-marked rounds and NACKs (pboxctl --json stats).
#
#   bench/marks.sh [--size 16M] [--iters 20] [--runs 3] [--build DIR]...
#
# Several --build DIRs (trees built with make) run alternately, one run
# each per pass, for a side-by-side comparison. Needs root.
set -u
cd "$(dirname "$0")/.."
SIZE=16M; ITERS=20; RUNS=3; BUILDS=()
while [ $# -gt 0 ]; do
	case $1 in
	--size) SIZE=${2:?}; shift ;;
	--iters) ITERS=${2:?}; shift ;;
	--runs) RUNS=${2:?}; shift ;;
	--build) BUILDS+=("${2:?}"); shift ;;
	-h|--help) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "marks.sh: unknown option $1 (--help)" >&2; exit 2 ;;
	esac
	shift
done
[[ $ITERS =~ ^[0-9]+$ && $RUNS =~ ^[0-9]+$ ]] && [ "$ITERS" -ge 1 ] && [ "$RUNS" -ge 1 ] ||
	{ echo "marks.sh: --iters and --runs must be positive numbers" >&2; exit 2; }
[ ${#BUILDS[@]} -gt 0 ] || BUILDS=(build)
for b in "${BUILDS[@]}"; do
	[ -x "$b/pboxd" ] && [ -x "$b/pbox-perf" ] || { echo "marks.sh: no pboxd/pbox-perf in $b (make all)" >&2; exit 2; }
done

# one_run BUILD: a fresh topology and box, one measurement line
one_run() (
	BUILD=$1
	. tests/integration/lib.sh
	need_root "bench/marks.sh"
	topo_up
	second_port_up
	EXTRA_VDEV="net_af_packet1,iface=$IF_BE" box_start af_packet --ip 1:$BOX_IP2/24
	workers 4 marks "$WORKDIR/m" --minbytes "$SIZE" --maxbytes "$SIZE" --iters "$ITERS" --keys 2 --check
	wait_workers 600 || { tail -n 5 "$WORKDIR"/m.*.log; die "workers failed"; }
	us=$(grep -E '^ +[0-9]+ ' "$WORKDIR/m.0.log" | tail -1 | awk '{ print $4 }')
	ctl --json stats | python3 -c '
import json, sys
s = json.load(sys.stdin)
ls = s["lcores"]
print("%-24s %10.1f ms %8d marks %8d nacks %8d rounds" % (sys.argv[1], float(sys.argv[2]) / 1000,
      sum(l["marks"] for l in ls), sum(l["nacks"] for l in ls), sum(l["completes"] for l in ls)))
' "$BUILD" "$us" || die "cannot read the box's counters"
)

for r in $(seq "$RUNS"); do
	for b in "${BUILDS[@]}"; do
		one_run "$b" || exit 1
	done
done
