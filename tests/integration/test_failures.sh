#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_failures.sh - nothing hangs silently: a worker killed with SIGKILL
# mid-run makes every other worker of its job fail with "rank R lost" within
# a bound while another job on the box goes on exactly; a stopped worker
# is found lost by its missing heartbeats; a rank that leaves with rounds open
# is named at once; pboxd killed mid-run makes every worker fail with a
# named error within a bound.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
ROOT=$(pwd)
topo_up
box_start af_packet

# job "victim" loses rank 2; job "bystander" runs beside it and must finish exactly
workers 4 victim "$WORKDIR/v" --minbytes 256K --maxbytes 256K --iters 100000 --check
VICTIMS=("${WK_PIDS[@]}")
workers 2 bystander "$WORKDIR/b" --minbytes 4 --maxbytes 2M --iters 3 --check
BYSTANDERS=("${WK_PIDS[@]}")
for _ in $(seq 100); do ctl --json jobs | grep -q '"victim".*"active"\|"active".*"victim"' && break; sleep 0.1; done
sleep 1
kill -9 "${VICTIMS[2]}"
start=$SECONDS
WK_PIDS=("${VICTIMS[0]}" "${VICTIMS[1]}" "${VICTIMS[3]}")
wait_workers 15 && die "surviving workers succeeded after rank 2 was killed"
took=$((SECONDS - start))
for r in 0 1 3; do
	grep -q "rank 2 lost" "$WORKDIR/v.$r.log" || { cat "$WORKDIR/v.$r.log"; die "rank $r does not name the lost rank"; }
done
echo "rank 2 loss reported to ranks 0, 1, 3 within ${took}s"
[ $took -le 10 ] || die "loss detection took ${took}s"
WK_PIDS=("${BYSTANDERS[@]}")
wait_workers 120 || { tail -3 "$WORKDIR"/b.*.log; die "the other job was disturbed"; }
echo "bystander job finished exactly"

# the victim's name is free again and its memory released
for _ in $(seq 50); do ctl --json jobs | grep -q victim || break; sleep 0.1; done
ctl --json status | python3 -c 'import json,sys; s=json.load(sys.stdin); assert s["jobs"] == 0, s["jobs"]' || die "aborted job not removed"

# a worker that stops (SIGSTOP) keeps its control connection open but sends
# no heartbeat: the box must find it lost within --heartbeat-timeout-ms
# (6 s) and name it (a late rank that still answers is waited for: test_elastic)
workers 4 stuck "$WORKDIR/s" --minbytes 256K --maxbytes 256K --iters 100000 --check
STUCK=("${WK_PIDS[@]}")
sleep 2
kill -STOP "${STUCK[1]}"
start=$SECONDS
WK_PIDS=("${STUCK[0]}" "${STUCK[2]}" "${STUCK[3]}")
wait_workers 20 && die "workers succeeded with rank 1 stopped"
took=$((SECONDS - start))
kill -9 "${STUCK[1]}"; kill -CONT "${STUCK[1]}" 2>/dev/null
for r in 0 2 3; do
	grep -q "rank 1 lost (no heartbeat" "$WORKDIR/s.$r.log" || { cat "$WORKDIR/s.$r.log"; die "rank $r does not name the stopped rank"; }
done
echo "stopped rank 1 reported within ${took}s: $(grep -o 'aborted: .*' "$WORKDIR/s.0.log" | head -1)"
[ $took -le 12 ] || die "detecting the stopped rank took ${took}s"

# a rank that leaves cleanly (pbox_close) while the others wait for it in
# a round: the box aborts the job at once, naming it
LPIDS=()
for r in 0 1 2 3; do
	worker_ns
	ip netns exec "$WORKER_NS" env PBOX_CONTROL="$CONTROL" PBOX_LIB="$ROOT/$BUILD/libpbox.so" \
		PYTHONPATH="$ROOT/python" /usr/bin/python3 "$ROOT/tests/integration/leaver.py" $r 4 leaver \
		> "$WORKDIR/l.$r.log" 2>&1 &
	LPIDS+=($!); PIDS+=($!)
done
WK_PIDS=("${LPIDS[3]}")
wait_workers 20 || { cat "$WORKDIR/l.3.log"; die "the leaving rank failed"; }
WK_PIDS=("${LPIDS[0]}" "${LPIDS[1]}" "${LPIDS[2]}")
wait_workers 20 && die "workers succeeded with rank 3 gone"
for r in 0 1 2; do
	grep -q "rank 3 left the job with rounds open" "$WORKDIR/l.$r.log" || { cat "$WORKDIR/l.$r.log"; die "rank $r does not name the rank that left"; }
done
echo "left rank reported: $(cat "$WORKDIR/l.0.log")"
t=$(grep -o 'after [0-9.]* s' "$WORKDIR/l.0.log" | grep -o '[0-9.]*' | head -1)
python3 -c "import sys; sys.exit(0 if float('$t') < 3 else 1)" || die "leave detection took ${t}s"

# the box dies under running workers and does not come back: they try to
# rejoin for their timeout (5 s here), then fail naming the box
workers 4 orphan "$WORKDIR/o" --minbytes 256K --maxbytes 256K --iters 100000 --check --timeout-ms 5000
sleep 2
kill -9 $BOX_PID; wait $BOX_PID 2>/dev/null; BOX_PID=
start=$SECONDS
wait_workers 40 && die "workers succeeded with the box gone"
took=$((SECONDS - start))
for r in 0 1 2 3; do
	grep -qiE "lost the control connection.*could not rejoin" "$WORKDIR/o.$r.log" || { cat "$WORKDIR/o.$r.log"; die "rank $r has no clear error for the box's death"; }
done
echo "box death reported to all 4 workers within ${took}s: $(tail -1 "$WORKDIR/o.0.log")"
echo "failures: ok"
