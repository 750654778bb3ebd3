#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run.sh - run every tests/integration/test_*.sh against the real pboxd on
# DPDK virtual devices, each bounded in time; print one summary line.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD
if [ "$(id -u)" != 0 ]; then
	echo "integration tests need root (network namespaces, veth, DPDK): run make test as root"
	exit 1
fi
pass=0; fail=0; skip=0; failed=()
for t in tests/integration/test_*.sh; do
	[ -n "${ONLY:-}" ] && [[ $t != *"$ONLY"* ]] && continue
	name=$(basename "$t" .sh)
	start=$SECONDS
	echo "=== $name"
	timeout -k 10 "${TEST_TIMEOUT:-300}" bash "$t"
	rc=$?
	dur=$((SECONDS - start))
	case $rc in
	0) echo "--- PASS $name (${dur}s)"; pass=$((pass + 1)) ;;
	77) echo "--- SKIP $name (${dur}s)"; skip=$((skip + 1)) ;;
	*) echo "--- FAIL $name rc=$rc (${dur}s)"; fail=$((fail + 1)); failed+=("$name") ;;
	esac
done
echo "integration: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
