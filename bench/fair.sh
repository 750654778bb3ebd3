#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# fair.sh - how two jobs share one box (issue "graceful under loss and
# contention"; docs/protocol.md "Congestion"):
#   equal   two jobs of N ranks each, the same size, started together:
#           Jain's fairness index over their rates (bytes per mean call)
#   4x      job "small" (SMALL bytes) alone, then beside job "big" (4 x
#           SMALL, started first and running longer): small's time per call
#           beside big over its time alone
#
#   bench/fair.sh [--n 2] [--size 4M] [--iters 40] [--reps 3] [--mtu 1500]
#
# Every rank in the workers' namespace of tests/integration/lib.sh (one
# veth to pboxd on net_af_packet, one data lcore); medians over --reps
# rounds. Needs root. Prints one line per rep and the medians.
set -u
cd "$(dirname "$0")/.."
N=2; SIZE=4M; ITERS=40; REPS=3; MTU=1500
while [ $# -gt 0 ]; do
	case $1 in
	--n) N=${2:?}; shift ;;
	--size) SIZE=${2:?}; shift ;;
	--iters) ITERS=${2:?}; shift ;;
	--reps) REPS=${2:?}; shift ;;
	--mtu) MTU=${2:?}; shift ;;
	-h|--help) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "fair.sh: unknown option $1 (--help)" >&2; exit 2 ;;
	esac
	shift
done
[[ $N =~ ^[0-9]+$ && $ITERS =~ ^[0-9]+$ && $REPS =~ ^[0-9]+$ ]] && [ "$N" -ge 1 ] ||
	{ echo "fair.sh: --n, --iters and --reps must be positive numbers" >&2; exit 2; }
. tests/integration/lib.sh
need_root "bench/fair.sh"
[ "$MTU" = 1500 ] || BOX_MTU=$MTU
topo_up
box_start af_packet
. bench/sizes.sh
SB=$(to_bytes "$SIZE") || { echo "fair.sh: bad --size $SIZE (e.g. 4M)" >&2; exit 2; }
mean_us() { grep -v '^#' "$1" | awk 'NF >= 5 { print $4; exit }'; }
# run_job NAME BYTES ITERS: start N ranks of one job (WK_PIDS)
run_job() { workers "$N" "$1" "$WORKDIR/$1" --minbytes "$2" --maxbytes "$2" --iters "$3" --check; }
JAIN=(); RATIO=()
for rep in $(seq "$REPS"); do
	# equal: two jobs together
	run_job eqa$rep "$SB" "$ITERS"; A=("${WK_PIDS[@]}")
	run_job eqb$rep "$SB" "$ITERS"; B=("${WK_PIDS[@]}")
	WK_PIDS=("${A[@]}" "${B[@]}"); WK_OUT=$WORKDIR/eqa$rep
	wait_workers 600 || die "the equal jobs failed (rep $rep)"
	ta=$(mean_us "$WORKDIR/eqa$rep.0.log"); tb=$(mean_us "$WORKDIR/eqb$rep.0.log")
	j=$(awk -v a="$ta" -v b="$tb" 'BEGIN { x = 1 / a; y = 1 / b; printf "%.3f", (x + y) ^ 2 / (2 * (x * x + y * y)) }')
	JAIN+=("$j")
	# 4x: small alone, then small beside big
	run_job alone$rep "$SB" "$ITERS"
	wait_workers 600 || die "the small job alone failed (rep $rep)"
	run_job big$rep $((4 * SB)) $((ITERS * 2)); BIG=("${WK_PIDS[@]}")
	sleep 1
	run_job small$rep "$SB" "$ITERS"
	wait_workers 600 || die "the small job beside the big one failed (rep $rep)"
	WK_PIDS=("${BIG[@]}"); WK_OUT=$WORKDIR/big$rep
	wait_workers 600 || die "the big job failed (rep $rep)"
	t1=$(mean_us "$WORKDIR/alone$rep.0.log"); t2=$(mean_us "$WORKDIR/small$rep.0.log")
	r=$(awk -v a="$t2" -v b="$t1" 'BEGIN { printf "%.2f", a / b }')
	RATIO+=("$r")
	echo "rep $rep: equal jobs ${ta} us and ${tb} us per call, Jain $j; small job ${t1} us alone, ${t2} us beside 4x: ${r}x"
done
med() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
# the lcore's load is its busy time over pboxd's uptime (busy_ns; the share
# of polls that found work says little: it moves with --idle-sleep-us)
ctl --json status > "$WORKDIR/status.json" || die "pboxctl --json status failed"
ctl --json stats | python3 -c '
import json, sys
l = json.load(sys.stdin)["lcores"][0]
up = json.load(open(sys.argv[1]))["uptime_s"]
print("box: marks", l["marks"], "nacks", l["nacks"], "waits", l["waits"],
      "lcore busy %.0f%% of %.0f s" % (100 * l["busy_ns"] / 1e9 / max(up, 1e-9), up))' "$WORKDIR/status.json"
echo "median over $REPS reps: Jain's index $(med "${JAIN[@]}") (goal >= 0.95), small job beside 4x $(med "${RATIO[@]}")x its time alone (goal <= 1.5x)"
box_stop
