#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_py_lifecycle.sh - the Python package's lifetimes and the pbox
# backend's key budget against the real pboxd on DPDK net_af_packet
# (py_lifecycle_check.py, each part bounded):
#  1. wait: four threads waiting on each of 3000 requests get the sum or
#     EBUSY, never ECLOSED on an open client; abandoned requests ECLOSED;
#  2. groups: init_process_group("pbox") / destroy_process_group() three
#     times in two processes: each group's client closed, waiter thread
#     gone and job gone from the box after its destroy;
#  3. ddp: DDP on the backend, job sized key_bytes_for(model): no key
#     released after the second iteration (equal and mixed bucket sizes);
#     prints the keys released and the mean step (docs/pytorch.md "Job
#     memory" quotes them).
# Needs torch for /usr/bin/python3 (Debian: python3-torch); skips (77) without.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
torch_test_up "$0"

for part in wait groups ddp; do
	timeout -k 5 200 ip netns exec "$NS_WK" env -u PBOX_JOB -u TORCHELASTIC_RUN_ID \
		PBOX_CONTROL="$CONTROL" PBOX_SOCKET="$PBOX_SOCKET" PBOXCTL="$ROOT/$BUILD/pboxctl" \
		PBOX_LIB="$PBOX_LIB" PYTHONPATH="$PYTHONPATH" \
		"$PY" tests/integration/py_lifecycle_check.py --part $part > "$WORKDIR/$part.log" 2>&1
	rc=$?
	grep -E '^(wait|groups|ddp|lifecycle|FAIL)' "$WORKDIR/$part.log" | sed 's/^/    /' >&2
	if [ $rc -ne 0 ] || ! grep -q "lifecycle $part: [0-9]* passed, 0 failed" "$WORKDIR/$part.log"; then
		tail -30 "$WORKDIR/$part.log"
		die "py_lifecycle_check.py --part $part: rc=$rc"
	fi
done

box_stop || die "pboxd exited non-zero"
echo "python lifecycle: concurrent waits, dropped groups and the backend's key budget hold"
