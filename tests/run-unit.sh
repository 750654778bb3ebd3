#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run-unit.sh - run the cmocka unit test binaries given as arguments and
# print one summary line; exit non-zero if any failed.
set -u
pass=0; fail=0; failed=()
for t in "$@"; do
	if "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); failed+=("$(basename "$t")"); fi
done
echo "unit: $pass passed, $fail failed"
[ $fail -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
