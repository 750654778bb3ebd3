#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# loss.sh - allreduce time per call against packet loss: pbox beside
# OpenMPI and Gloo, the same nftables loss in the same topology (every rank
# in its own namespace on one bridge, the box on it too).
#
#   bench/loss.sh [--loss 0,0.1,1,5,20] [--sizes 1M,64M] [--n 2,4] [--reps 3]
#                 [--iters 3] [--warmup 1] [--timeout 300]
#                 [--systems pbox,openmpi,gloo] [--mtu 1500|9000]
#                 [--loss-unit wire|skb] [--out DIR] [--quick] [--publish]
#
# For every loss rate and every size, one run of bench/compare/compare.sh
# --topology hosts --loss PCT --sizes SIZE:SIZE --timeout S (its header
# says where the frames are dropped and what is spared: pbox's control
# connection, mpirun's PMIx, Gloo's rendezvous): PCT% of the data frames
# dropped each way, alike for all three systems; N ranks, R reps of I
# timed calls after W warm-up calls. Each run (one system, N, rep) is
# bounded by --timeout seconds; one that does not finish is a DNF, and
# that system and N are not run again at that loss and size. Defaults:
# loss 0,0.1,1,5,20 (percent, up to two decimals), sizes 1M,64M, N 2,4,
# 3 reps of 3 calls after 1 warm-up call, timeout 300 s, MTU 1500 (as the
# issue's table), loss per wire frame, out build/loss. --loss-unit skb
# drops what the kernel hands the bridge instead, TSO super-packets whole:
# compare.sh's header says why neither is free of bias (per wire frame
# slows TCP's baseline about 2x here; per skb spares TCP most loss events);
# run both to show the spread. --quick: loss 0,5, size 1M, N 2, 1 rep
# (options given explicitly win). The loss 0 run is the baseline of the
# slowdowns: keep 0 in --loss. Needs root; `make loss` builds what it
# needs and runs it with LOSS_ARGS. A full run takes from half an hour to
# a few hours, most of it in runs that end as DNF.
#
# Output in DIR: loss.csv (system,n,bytes,loss_pct,median_us,min_us,
# max_us,slowdown; "DNF" times, empty slowdown for a DNF), loss.txt (per N
# and size: a row per loss rate, per system the time and the slowdown
# against 0%, then t_pbox/t_gloo and t_pbox/t_openmpi), loss.png (time vs
# loss rate, log y, a panel per N and size, a line per system; from
# bench/loss_report.py), runs.txt (the runs: loss bytes dir exit-status)
# and runs/ (every compare.sh run: its own raw.txt, table, logs with the
# nftables counters, and compare.log). --publish copies loss.csv and
# loss.png to docs/perf/loss-<UTC date>.csv/.png (loss-<date>-skb.* with
# --loss-unit skb).
#
# Every compare.sh run cleans up after itself (its EXIT trap removes its
# namespaces and stops its processes); this script's EXIT trap stops the
# run under way, if any, and waits for that clean-up. Exit status 0 if
# every compare.sh run succeeded (DNFs included), 1 otherwise.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=${PYTHON:-/usr/bin/python3}
export BUILD PYTHON=$PY

usage() {
	sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'
}
bad() { echo "loss.sh: $*" >&2; exit 2; }

QUICK=0; LOSSES=; SIZES=; NLIST=; REPS=; ITERS=3; WARMUP=1; TIMEOUT=300
SYSTEMS=pbox,openmpi,gloo; MTU=1500; OUT=; PUBLISH=0; UNIT=wire
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--publish) PUBLISH=1 ;;
	--loss) LOSSES=${2:?--loss needs a list (e.g. 0,1,5)}; shift ;;
	--sizes) SIZES=${2:?--sizes needs a list (e.g. 1M,64M)}; shift ;;
	--n) NLIST=${2:?--n needs a list (e.g. 2,4)}; shift ;;
	--reps) REPS=${2:?--reps needs a number}; shift ;;
	--iters) ITERS=${2:?--iters needs a number}; shift ;;
	--warmup) WARMUP=${2:?--warmup needs a number}; shift ;;
	--timeout) TIMEOUT=${2:?--timeout needs seconds}; shift ;;
	--systems) SYSTEMS=${2:?--systems needs a list}; shift ;;
	--mtu) MTU=${2:?--mtu needs 1500 or 9000}; shift ;;
	--loss-unit) UNIT=${2:?--loss-unit needs wire or skb}; shift ;;
	--out) OUT=${2:?--out needs a directory}; shift ;;
	-h|--help) usage; exit 0 ;;
	*) bad "unknown option $1 (--help)" ;;
	esac
	shift
done
if [ $QUICK = 1 ]; then
	LOSSES=${LOSSES:-0,5}; SIZES=${SIZES:-1M}; NLIST=${NLIST:-2}; REPS=${REPS:-1}
fi
LOSSES=${LOSSES:-0,0.1,1,5,20}; SIZES=${SIZES:-1M,64M}; NLIST=${NLIST:-2,4}; REPS=${REPS:-3}
OUT=${OUT:-$BUILD/loss}

IFS=, read -r -a LOSS_LIST <<< "$LOSSES"
[ ${#LOSS_LIST[@]} -gt 0 ] || bad "bad --loss $LOSSES (e.g. 0,1,5)"
for l in "${LOSS_LIST[@]}"; do
	[[ $l =~ ^[0-9]{1,3}(\.[0-9]{1,2})?$ ]] && awk -v l="$l" 'BEGIN { exit !(l <= 100) }' ||
		bad "bad --loss $LOSSES (e.g. 0,1,5: percentages 0..100, at most two decimals)"
done
[[ ,$LOSSES, =~ ,0(\.0+)?, ]] ||
	echo "loss.sh: WARNING: no 0 in --loss $LOSSES: loss.csv will have no slowdowns" >&2
IFS=, read -r -a SIZE_LIST <<< "$SIZES"
[ ${#SIZE_LIST[@]} -gt 0 ] || bad "bad --sizes $SIZES (e.g. 1M,64M)"
. bench/sizes.sh
for s in "${SIZE_LIST[@]}"; do
	b=$(to_bytes "$s") && [ "$b" -ge 4 ] || bad "bad --sizes $SIZES (e.g. 1M,64M: sizes of at least 4 bytes, K/M/G suffixes)"
done
[[ $NLIST =~ ^[0-9]+(,[0-9]+)*$ ]] || bad "bad --n $NLIST (e.g. 2,4)"
IFS=, read -r -a NS <<< "$NLIST"
for n in "${NS[@]}"; do [ "$n" -ge 2 ] || bad "bad --n $NLIST (every N >= 2)"; done
for v in "$REPS" "$ITERS" "$WARMUP" "$TIMEOUT"; do
	[[ $v =~ ^[0-9]+$ ]] || bad "--reps, --iters, --warmup and --timeout take whole numbers (got $v)"
done
[ "$REPS" -ge 1 ] && [ "$ITERS" -ge 1 ] && [ "$TIMEOUT" -ge 1 ] || bad "--reps, --iters and --timeout must be >= 1"
[[ $SYSTEMS =~ ^(pbox|openmpi|gloo)(,(pbox|openmpi|gloo))*$ ]] || bad "bad --systems $SYSTEMS (e.g. pbox,openmpi,gloo)"
[ "$MTU" = 1500 ] || [ "$MTU" = 9000 ] || bad "bad --mtu $MTU (1500 or 9000)"
[ "$UNIT" = wire ] || [ "$UNIT" = skb ] || bad "bad --loss-unit $UNIT (wire or skb)"
if [ "$(id -u)" != 0 ]; then
	echo "loss.sh needs root (network namespaces, veth, nftables and DPDK). Run it as root, e.g. sudo make loss." >&2
	exit 2
fi
[ -x "$BUILD/pboxd" ] && [ -x "$BUILD/pbox-perf" ] || bad "$BUILD/pboxd or $BUILD/pbox-perf missing: run make first"
command -v nft > /dev/null || bad "nft not found (Debian: apt-get install nftables)"

# The run under way: stopped (TERM: compare.sh then removes its namespaces
# and processes) and waited for when this script ends early.
CHILD=
cleanup() {
	local rc=$?
	if [ -n "$CHILD" ] && kill -0 "$CHILD" 2>/dev/null; then
		echo "loss.sh: stopping the run under way (pid $CHILD)" >&2
		kill -TERM "$CHILD" 2>/dev/null
		wait "$CHILD" 2>/dev/null
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$OUT" || bad "cannot create $OUT"
rm -rf "$OUT/runs" "$OUT/runs.txt" "$OUT/loss.csv" "$OUT/loss.txt" "$OUT/loss.png"
mkdir -p "$OUT/runs"
MANIFEST=$OUT/runs.txt
echo "# loss_pct bytes dir compare.sh-exit-status" > "$MANIFEST"
{
	echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "loss: ${LOSS_LIST[*]} (% each way, per $UNIT); sizes: ${SIZE_LIST[*]}; n: ${NS[*]}"
	echo "reps $REPS; iters $ITERS; warmup $WARMUP; timeout ${TIMEOUT}s per run; systems $SYSTEMS; MTU $MTU"
	echo "pbox: $(git describe --always --dirty 2>/dev/null)"
} > "$OUT/info.txt"
sed 's/^/loss.sh: /' "$OUT/info.txt"

START=$SECONDS
FAILED=()
total=$((${#LOSS_LIST[@]} * ${#SIZE_LIST[@]})); k=0
for l in "${LOSS_LIST[@]}"; do
	for s in "${SIZE_LIST[@]}"; do
		k=$((k + 1))
		dir=$OUT/runs/loss-$l-$s
		mkdir -p "$dir" || bad "cannot create $dir"
		echo "loss.sh: [$((SECONDS - START))s] run $k/$total: loss $l% each way (per $UNIT), $s"
		# in the background, so that a signal to this script reaches the trap at once;
		# the progress lines shown, everything in compare.log
		bash bench/compare/compare.sh --topology hosts --loss "$l" --loss-unit "$UNIT" --sizes "$s:$s" --n "$NLIST" \
			--reps "$REPS" --iters "$ITERS" --warmup "$WARMUP" --timeout "$TIMEOUT" \
			--systems "$SYSTEMS" --mtu "$MTU" --out "$dir" \
			> >(tee "$dir/compare.log" |
			    grep --line-buffered -E '^compare: \[|WARNING|FAIL|did not finish|timed out|failed' |
			    sed -u 's/^/  /') 2>&1 &
		CHILD=$!
		wait "$CHILD"; rc=$?
		CHILD=
		echo "$l $(to_bytes "$s") $dir $rc" >> "$MANIFEST"
		[ $rc = 0 ] || { FAILED+=("loss $l% $s (compare.sh exit $rc)"); echo "loss.sh: run failed (exit $rc): see $dir/compare.log" >&2; }
	done
done

echo "loss.sh: [$((SECONDS - START))s] results in $OUT"
"$PY" bench/loss_report.py "$MANIFEST" "$OUT" --timeout "$TIMEOUT" --unit "$UNIT" \
	--title "float32 allreduce under packet loss (per $([ "$UNIT" = wire ] && echo "wire frame" || echo "skb: TSO super-packets whole")), $(nproc) CPUs, a namespace per rank on one bridge, MTU $MTU" ||
	FAILED+=("loss_report.py")
for f in loss.csv loss.txt loss.png; do
	[ -s "$OUT/$f" ] || FAILED+=("no $OUT/$f")
done
if [ $PUBLISH = 1 ] && [ -s "$OUT/loss.csv" ] && [ -s "$OUT/loss.png" ]; then
	d=docs/perf/loss-$(date -u +%Y-%m-%d)$([ "$UNIT" = wire ] || echo "-$UNIT")
	cp "$OUT/loss.csv" "$d.csv" && cp "$OUT/loss.png" "$d.png" && echo "loss.sh: published $d.csv and $d.png" ||
		FAILED+=("publish to $d")
fi
echo "loss.sh: csv $OUT/loss.csv, table $OUT/loss.txt, plot $OUT/loss.png ($((SECONDS - START))s)"
if [ ${#FAILED[@]} -gt 0 ]; then
	echo "loss.sh: incomplete: ${FAILED[*]}" >&2
	exit 1
fi
exit 0
