#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run-unit.sh - run the unit tests given as arguments (cmocka binaries, or
# scripts such as gpu_archs.sh) and print one summary line; exit non-zero
# if any failed. A script (*.sh) that exits 77 was skipped (it said what
# it needs): counted apart, never as passed. (A cmocka binary's exit code
# is its number of failures, so 77 means failures there.)
set -u
pass=0; fail=0; skip=0; failed=()
for t in "$@"; do
	"$t"; rc=$?
	case $rc:$t in
	0:*) pass=$((pass + 1)) ;;
	77:*.sh) skip=$((skip + 1)) ;;
	*) fail=$((fail + 1)); failed+=("$(basename "$t")") ;;
	esac
done
sum="unit: $pass passed, $fail failed"
[ $skip -eq 0 ] || sum="$sum, $skip skipped"
echo "$sum"
[ $fail -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
