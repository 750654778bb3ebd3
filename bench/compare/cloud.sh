#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# cloud.sh - the standard set of link-limited runs (`make compare-cloud`):
# bench/compare/compare.sh --shape on workers with cloud-like links, pbox
# beside Gloo (and OpenMPI), with a balanced box (its link unshaped) and
# with a box whose link is as fast as one worker's (--box-rate, K = 1):
#
#   n4-balanced   --n 4 --shape RATE4
#   n4-box        --n 4 --shape RATE4 --box-rate RATE4
#   n8-balanced   --n 8 --shape RATE8
#   n8-box        --n 8 --shape RATE8 --box-rate RATE8
#
#   bench/compare/cloud.sh [--reps R] [--out DIR] [--rate4 RATE] [--rate8 RATE]
#                          [--systems pbox,gloo,openmpi] [--only NAME,...]
#
# Defaults: 5 reps of 3 timed calls after 1 warm-up call per size, sizes 16
# and 64 MiB, RATE4 1gbit, RATE8 500mbit (at 1gbit, 8 ranks need more than
# this machine's 2 CPUs: docs/performance.md), systems pbox,gloo, out
# build/compare-cloud. Each set's compare.sh output goes to DIR/NAME/; then
# DIR/cloud.txt has every set's table (with the model's bounds) and
# DIR/cloud.png the measured times against the bounds (plot_cloud.py).
# Every run (one system, N and rep) may take up to COMPARE_RUN_TIMEOUT
# seconds (default here 900: the box-limited sets are slow by design).
# Needs root, as compare.sh. Exit status 1 if a set failed (the others
# still run).
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
PY=${PYTHON:-/usr/bin/python3}
REPS=5; OUT=$BUILD/compare-cloud; RATE4=1gbit; RATE8=500mbit; SYSTEMS=pbox,gloo; ONLY=
while [ $# -gt 0 ]; do
	case $1 in
	--reps) REPS=${2:?--reps needs a number}; shift ;;
	--out) OUT=${2:?--out needs a directory}; shift ;;
	--rate4) RATE4=${2:?--rate4 needs a rate}; shift ;;
	--rate8) RATE8=${2:?--rate8 needs a rate}; shift ;;
	--systems) SYSTEMS=${2:?--systems needs a list}; shift ;;
	--only) ONLY=${2:?--only needs a list of set names}; shift ;;
	-h|--help) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "cloud.sh: unknown option $1 (--help)" >&2; exit 2 ;;
	esac
	shift
done
SETS=("n4-balanced 4 $RATE4 -" "n4-box 4 $RATE4 $RATE4" "n8-balanced 8 $RATE8 -" "n8-box 8 $RATE8 $RATE8")
mkdir -p "$OUT" || { echo "cloud.sh: cannot create $OUT" >&2; exit 1; }
FAILED=()
: > "$OUT/cloud.txt"
for set in "${SETS[@]}"; do
	read -r name n rate box <<< "$set"
	[ -z "$ONLY" ] || [[ ,$ONLY, == *",$name,"* ]] || continue
	args=(--n "$n" --shape "$rate" --sizes 16M:64M --reps "$REPS" --iters 3 --warmup 1
	      --systems "$SYSTEMS" --out "$OUT/$name")
	[ "$box" = - ] || args+=(--box-rate "$box")
	echo "cloud: $name: compare.sh ${args[*]}"
	BUILD=$BUILD PYTHON=$PY COMPARE_RUN_TIMEOUT=${COMPARE_RUN_TIMEOUT:-900} bash bench/compare/compare.sh "${args[@]}" > "$OUT/$name.log" 2>&1 ||
		{ FAILED+=("$name"); echo "cloud: $name failed (see $OUT/$name.log)"; }
	{
		echo "## $name: compare.sh ${args[*]}"
		grep -E '^(shaping|load)' "$OUT/$name/info.txt" 2>/dev/null
		cat "$OUT/$name/table.txt" 2>/dev/null
		echo
	} >> "$OUT/cloud.txt"
done
cat "$OUT/cloud.txt"
"$PY" bench/compare/plot_cloud.py "$OUT" "$OUT/cloud.png" || FAILED+=("plot")
[ ${#FAILED[@]} = 0 ] || { echo "cloud: failed: ${FAILED[*]}" >&2; exit 1; }
