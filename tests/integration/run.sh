#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run.sh - run every tests/integration/test_*.sh against the real pboxd on
# DPDK virtual devices, each bounded in time; then run XDP_TESTS again with
# the workers on the xdp transport (PBOX_TRANSPORT=xdp, each worker in its
# own namespace: lib.sh); print one summary line. ONLY=substring picks
# tests; SKIP="name ..." leaves out the tests named (test_NAME.sh);
# TRANSPORTS="udp" skips the xdp pass.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD
if [ "$(id -u)" != 0 ]; then
	echo "integration tests need root (network namespaces, veth, DPDK): run make test as root"
	exit 1
fi
pass=0; fail=0; skip=0; failed=()
# test_xdp.sh covers exact sums on xdp (MTU 9000); these add loss,
# duplication and reordering, attack, and failures (a killed or stopped
# rank, aborts, the stall watch: 25 s; the whole of .ci/run took 8.5
# minutes on 2026-11-24 without it).
XDP_TESTS=${XDP_TESTS:-"loss dupreorder isolation failures"}
run_one() { # run_one NAME FILE [ENV...]
	local name=$1 t=$2 start=$SECONDS rc; shift 2
	echo "=== $name"
	env "$@" timeout -k 10 "${TEST_TIMEOUT:-300}" bash "$t"
	rc=$?
	local dur=$((SECONDS - start))
	case $rc in
	0) echo "--- PASS $name (${dur}s)"; pass=$((pass + 1)) ;;
	77) echo "--- SKIP $name (${dur}s)"; skip=$((skip + 1)) ;;
	*) echo "--- FAIL $name rc=$rc (${dur}s)"; fail=$((fail + 1)); failed+=("$name") ;;
	esac
}
for t in tests/integration/test_*.sh; do
	[ -n "${ONLY:-}" ] && [[ $t != *"$ONLY"* ]] && continue
	n=$(basename "$t" .sh)
	[[ " ${SKIP:-} " == *" ${n#test_} "* ]] && continue
	run_one "$(basename "$t" .sh)" "$t" PBOX_TRANSPORT=udp
done
if [[ " ${TRANSPORTS:-udp xdp} " == *" xdp "* ]]; then
	for n in $XDP_TESTS; do
		t=tests/integration/test_$n.sh
		[ -n "${ONLY:-}" ] && [[ $t != *"$ONLY"* ]] && continue
		run_one "test_$n[xdp]" "$t" PBOX_TRANSPORT=xdp
	done
fi
echo "integration: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
