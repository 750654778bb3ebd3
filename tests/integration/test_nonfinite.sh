#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_nonfinite.sh - a NaN or Inf gradient in PS mode on the real pboxd
# (DPDK net_af_packet) with real libpbox clients (the Python package; 2
# ranks each), docs/protocol.md "Non-finite gradients":
#
#  1. skip (the job created by rank 0's pbox.Client(nonfinite="skip")):
#     rank 1 sends a NaN in one segment of key 1; every rank gets the
#     weights with that segment not stepped and the others stepped
#     exactly, counts one skipped segment, and the next step steps from
#     there; the box's weights stay finite (nonfinite_check.py).
#     `pboxctl job show` says the policy and 1 round (1 skipped), rank 1
#     (not 0) with 1 non-finite gradient; /metrics has the same counts.
#  2. abort (the job created by `pboxctl job create --nonfinite abort`):
#     rank 1 sends an Inf; both ranks' calls fail with EABORTED naming
#     rank 1 and key 1, and `pboxctl job show` gives that reason.
# Needs torch for /usr/bin/python3; skips (77) without.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
need_root "$0"
need_torch
use_python_package
CHECK=tests/integration/nonfinite_check.py
URL=http://$BOX_MGMT:9470

topo_up
box_start af_packet --metrics 0.0.0.0:9470

# run MODE JOB: the two ranks in the background (RANK_PIDS)
run() {
	local mode=$1 job=$2 r
	RANK_PIDS=()
	mkdir -p "$WORKDIR/$job"
	for r in 0 1; do
		timeout -k 5 90 ip netns exec "$NS_WK" "$PY" "$CHECK" "$mode" "$CONTROL" "$job" $r 2 \
			"$WORKDIR/$job" > "$WORKDIR/$job/rank$r.log" 2>&1 &
		RANK_PIDS+=($!); PIDS+=($!)
	done
}

# finish JOB: wait for RANK_PIDS; fail naming the logs if one failed
finish() {
	local job=$1 p rc=0
	for p in "${RANK_PIDS[@]}"; do wait "$p" || rc=1; done
	if [ $rc != 0 ]; then
		tail -20 "$WORKDIR/$job"/rank*.log
		die "$job: a rank failed"
	fi
	cat "$WORKDIR/$job"/rank*.log
}

# 1. skip
SKIP=nfskip-$TAG
run skip "$SKIP"
for _ in $(seq 300); do
	[ -e "$WORKDIR/$SKIP/ready.0" ] && [ -e "$WORKDIR/$SKIP/ready.1" ] && break
	kill -0 "${RANK_PIDS[0]}" 2>/dev/null || break
	sleep 0.1
done
[ -e "$WORKDIR/$SKIP/ready.0" ] && [ -e "$WORKDIR/$SKIP/ready.1" ] || {
	touch "$WORKDIR/$SKIP/go"; finish "$SKIP"; die "skip: the ranks did not get ready"; }
ctl job show "$SKIP" > "$WORKDIR/show_skip.txt" || die "pboxctl job show failed"
ctl --json job show "$SKIP" > "$WORKDIR/show_skip.json" || die "pboxctl --json job show failed"
in_wk python3 -c "import sys, urllib.request
sys.stdout.write(urllib.request.urlopen('$URL/metrics', timeout=5).read().decode())" \
	> "$WORKDIR/metrics.txt" || die "cannot scrape /metrics"
sed -Ei 's/\{box="[^"]*"\}//; s/box="[^"]*",//' "$WORKDIR/metrics.txt"   # the box label
touch "$WORKDIR/$SKIP/go"
finish "$SKIP"
cat "$WORKDIR/show_skip.txt"
grep -q "non-finite PS gradients: policy skip, 1 segment rounds, 1 skipped" \
	"$WORKDIR/show_skip.txt" || die "job show does not count the skipped round"
python3 - "$WORKDIR/show_skip.json" <<'PY' || die "job_status's counts are wrong"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["nonfinite"] == {"policy": "skip", "rounds": 1, "skipped": 1}, s["nonfinite"]
assert [r["nonfinite"] for r in s["ranks"]] == [0, 1], s["ranks"]
PY
grep -qx "pbox_job_nonfinite_rounds_total{pbox_job=\"$SKIP\",policy=\"skip\"} 1" "$WORKDIR/metrics.txt" &&
grep -qx "pbox_job_skipped_rounds_total{pbox_job=\"$SKIP\"} 1" "$WORKDIR/metrics.txt" &&
grep -qx "pbox_job_rank_nonfinite_total{pbox_job=\"$SKIP\",rank=\"1\"} 1" "$WORKDIR/metrics.txt" &&
grep -qx "pbox_job_rank_nonfinite_total{pbox_job=\"$SKIP\",rank=\"0\"} 0" "$WORKDIR/metrics.txt" ||
	{ grep nonfinite "$WORKDIR/metrics.txt"; die "/metrics lacks the job's non-finite counts"; }

# 2. abort
ABORT=nfabort-$TAG
ctl job create "$ABORT" --world 2 --nonfinite abort || die "pboxctl job create --nonfinite failed"
run abort "$ABORT"
finish "$ABORT"
ctl job show "$ABORT" > "$WORKDIR/show_abort.txt" 2>&1 || true
cat "$WORKDIR/show_abort.txt"
# (the job may be gone once both ranks left: the ranks' messages above
# were checked by nonfinite_check.py; the box's log names it too)
grep -q "rank 1 sent a NaN or Inf gradient for key 1" "$BOX_LOG" ||
	die "pboxd's log does not name rank 1 and key 1"

box_stop || die "pboxd exited non-zero"
echo "nonfinite: skip keeps the weights finite and counts; abort names rank 1 and key 1"
