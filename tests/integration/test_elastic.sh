#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_elastic.sh - slow is not dead, and a group that restarts goes on
# (docs/reliability.md "Liveness and timeouts"), against the real pboxd on
# DPDK net_af_packet:
#  1. 4 ranks allreduce; rank 0 pauses 40 s before its second call (a
#     checkpoint) while ranks 1-3 wait in it: every call is exact, pboxctl
#     job show names rank 0 as the rank the job waits for, ranks 1-3 say so
#     once at PBOX_DEBUG=INFO, and their queries back off (WAITs counted);
#  2. the same with a job timeout of 5 s (PBOX_TIMEOUT=5s) and a 7 s pause:
#     every waiting rank fails naming rank 0 and the job's timeout;
#  3. torch backend: rank 0 sleeps 6 s before dist.barrier(); rank 1's
#     barrier returns only once rank 0 came; with a process group timeout
#     of 5 s (rank 0 8 s late) it raises naming rank 0, never returning as
#     if rank 0 had come;
#  4. torchrun --max-restarts 1 with a rank that raises at step 3: training
#     on the backend and with pbox.torch.allreduce_hook resumes from the
#     script's last checkpoint and finishes, the backend's weights equal
#     an uninterrupted run's bit for bit;
#  5. a job that waits for replacements (PBOX_REPLACE_WAIT): rank 2 is
#     killed mid-run, an impostor with a wrong join secret is refused, a new
#     process joins as rank 2 and the others' calls fail with EAGAIN, are
#     made again and every sum is exact to the end.
# Parts 2-5 run during part 1's pause.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
torch_test_up "$0"

# pyrank NAME RANK ARGS...: tests/integration/pauser.py in a worker
# namespace, in the background (PIDS, and ELASTIC_PIDS)
pyrank() {
	local name=$1; shift
	worker_ns
	ip netns exec "$WORKER_NS" env PBOX_CONTROL="$CONTROL" PBOX_LIB="$PBOX_LIB" \
		PYTHONPATH="$PYTHONPATH" ${EXTRA_ENV:-} "$PY" tests/integration/pauser.py "$@" \
		> "$WORKDIR/$name.$1.log" 2>&1 &
	PIDS+=($!); ELASTIC_PIDS+=($!)
}
# wait_pids LIMIT_S PID...: 0 if all ended with 0 within LIMIT_S
wait_pids() {
	local limit=$1 start=$SECONDS rc=0; shift
	for p in "$@"; do
		while kill -0 "$p" 2>/dev/null; do
			[ $((SECONDS - start)) -lt "$limit" ] || { log "still running after ${limit}s"; return 124; }
			sleep 0.2
		done
		wait "$p" || rc=1
	done
	return $rc
}

# ---- 1. a 40 s pause, waited for ----
ELASTIC_PIDS=()
for r in 0 1 2 3; do
	EXTRA_ENV="PBOX_DEBUG=INFO" pyrank pause "$r" 4 pause 40 3
done
PAUSE_PIDS=("${ELASTIC_PIDS[@]}")
waiting=
for _ in $(seq 150); do
	ctl --json job show pause > "$WORKDIR/show.json" 2>&1
	waiting=$(python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["waiting_for"] == [0] and r["waiting_s"] > 1.0 and "yes" or "")' < "$WORKDIR/show.json" 2>/dev/null)
	[ "$waiting" = yes ] && break
	sleep 0.2
done
[ "$waiting" = yes ] || { tail -n 5 "$WORKDIR"/pause.*.log; cat "$WORKDIR/show.json"; die "job show never named rank 0 as the rank the job waits for"; }
ctl job show pause | grep "^waiting for rank 0 for" || die "pboxctl job show prints no waiting line"
PAUSE_AT=$SECONDS

# ---- 2. past the job's timeout: a named error (during part 1's pause) ----
ELASTIC_PIDS=()
for r in 0 1 2 3; do
	EXTRA_ENV="PBOX_TIMEOUT=5s" pyrank late "$r" 4 late 7 2
done
wait_pids 40 "${ELASTIC_PIDS[@]}" && die "the late job succeeded though rank 0 paused past its 5 s timeout"
for r in 1 2 3; do
	grep -q "rank 0 stalled: no contribution for [5-9]\.[0-9] s, the job's timeout (5.0 s" "$WORKDIR/late.$r.log" ||
		{ cat "$WORKDIR/late.$r.log"; die "late rank $r does not name rank 0 and the job's timeout"; }
done
echo "past the timeout: $(grep -o 'error after .*' "$WORKDIR/late.1.log")"

# ---- 3. a barrier never returns for a rank that did not come ----
PORT=29700
# trun NAME NPROC ARGS...: torchrun NPROC ranks in the workers' namespace
trun() {
	local name=$1 n=$2; shift 2
	PORT=$((PORT + 1))
	timeout -k 5 240 ip netns exec "$NS_WK" env -u PBOX_JOB -u TORCHELASTIC_RUN_ID \
		PBOX_CONTROL="$CONTROL" PBOX_LIB="$PBOX_LIB" PYTHONPATH="$PYTHONPATH" \
		"$PY" -m torch.distributed.run --nproc_per_node "$n" --master_addr 127.0.0.1 \
		--master_port $PORT --redirects 1 --tee 1 --log_dir "$WORKDIR/tr-$name" "$@" \
		> "$WORKDIR/$name.log" 2>&1
}
trun barrier 2 tests/integration/barrier_check.py 6 60 ||
	{ tail -20 "$WORKDIR/barrier.log"; die "the barrier with a 6 s late rank failed"; }
t1=$(grep -o "barrier: rank 1 returned after [0-9.]*" "$WORKDIR/barrier.log" | grep -o "[0-9.]*$")
[ -n "$t1" ] || { tail -20 "$WORKDIR/barrier.log"; die "rank 1's barrier did not return"; }
python3 -c "import sys; sys.exit(0 if float('$t1') >= 5.5 else 1)" ||
	die "rank 1's barrier returned after $t1 s, before rank 0 came (6 s)"
trun barrier-tmo 2 tests/integration/barrier_check.py 8 5 &&
	die "the barrier returned though rank 0 came after the group's 5 s timeout"
grep -q "barrier: rank 1 returned" "$WORKDIR/barrier-tmo.log" &&
	die "rank 1's barrier returned though rank 0 never came within the timeout"
# (the box names it, or with the host level on (LOCAL_WORLD_SIZE 2) the
# host's shared memory: "rank 0 (local rank 0, pid P) stalled")
grep -q "barrier: rank 1 raised after .*rank 0\( (local rank 0, pid [0-9]*)\)\? stalled" "$WORKDIR/barrier-tmo.log" ||
	{ grep -E "barrier|pbox" "$WORKDIR/barrier-tmo.log" | head; die "rank 1's barrier did not raise naming rank 0"; }
echo "barrier: waited $t1 s for a 6 s late rank; $(grep -o 'barrier: rank 1 raised after [0-9.]* s' "$WORKDIR/barrier-tmo.log") past a 5 s timeout"

# ---- 4. torchrun restarts the group ----
ck() { rm -rf "$WORKDIR/ck-$1"; mkdir -p "$WORKDIR/ck-$1"; echo "$WORKDIR/ck-$1"; }
trun ref 2 tests/integration/restart_train.py backend "$(ck ref)" 8 -1 ||
	{ tail -30 "$WORKDIR/ref.log"; die "the uninterrupted training failed"; }
ref=$(grep -o "rank 0 done: digest [0-9a-f]*" "$WORKDIR/ref.log" | awk '{print $NF}')
for mode in backend hook; do
	trun "re-$mode" 2 --max_restarts 1 --rdzv_id "elastic-$mode" \
		tests/integration/restart_train.py $mode "$(ck "$mode")" 8 3 ||
		{ tail -40 "$WORKDIR/re-$mode.log"; die "$mode: the restarted training did not finish"; }
	grep -q "rank 1 attempt 1 resumed at step 3" "$WORKDIR/re-$mode.log" ||
		{ grep "restart:" "$WORKDIR/re-$mode.log"; die "$mode: the restarted group did not resume at step 3"; }
	d=$(grep -o "rank 0 done: digest [0-9a-f]*" "$WORKDIR/re-$mode.log" | awk '{print $NF}')
	d1=$(grep -o "rank 1 done: digest [0-9a-f]*" "$WORKDIR/re-$mode.log" | awk '{print $NF}')
	[ -n "$d" ] && [ "$d" = "$d1" ] || die "$mode: ranks end with different weights ($d, $d1)"
	[ "$d" = "$ref" ] || die "$mode: weights $d after a restart, $ref uninterrupted"
	echo "$mode: restarted at step 3, $(grep -o 'back after [0-9.]* s' "$WORKDIR/re-$mode.log"), weights equal the uninterrupted run's ($d)"
done
# ---- 5. a lost rank replaced ----
# rpyrank NAME RANK SECRET ARGS...: replacer.py in a worker namespace, in
# the background (PIDS, and RPIDS)
rpyrank() {
	local name=$1 r=$2 secret=$3; shift 3
	worker_ns
	ip netns exec "$WORKER_NS" env PBOX_CONTROL="$CONTROL" PBOX_LIB="$PBOX_LIB" \
		PYTHONPATH="$PYTHONPATH" PBOX_REPLACE_WAIT=30s PBOX_JOIN_SECRET="$secret" \
		"$PY" tests/integration/replacer.py "$r" 4 repl 400 "$WORKDIR/repl.step" "$@" \
		> "$WORKDIR/$name.log" 2>&1 &
	PIDS+=($!); RPIDS+=($!)
}
RPIDS=()
for r in 0 1 2 3; do rpyrank "repl.$r" $r s3cret; done
SURVIVORS=("${RPIDS[0]}" "${RPIDS[1]}" "${RPIDS[3]}")
VICTIM=${RPIDS[2]}
for _ in $(seq 100); do [ -s "$WORKDIR/repl.step" ] && [ "$(cat "$WORKDIR/repl.step")" -ge 20 ] && break; sleep 0.1; done
kill -9 "$VICTIM"
wait "$VICTIM" 2>/dev/null
for _ in $(seq 50); do
	ctl --json job show repl | python3 -c '
import json, sys
r = json.load(sys.stdin)
sys.exit(0 if any("lost_s" in k for k in r["ranks"]) else 1)' 2>/dev/null && break
	sleep 0.1
done
ctl --json job show repl | grep -q '"lost_why"' || die "job show does not name rank 2 as lost"
RPIDS=()
rpyrank repl.impostor 2 guess resume
wait_pids 20 "${RPIDS[@]}" && die "an impostor with a wrong join secret joined as rank 2"
grep -q "wrong join secret" "$WORKDIR/repl.impostor.log" ||
	{ cat "$WORKDIR/repl.impostor.log"; die "the impostor was not refused for its secret"; }
RPIDS=()
joined_at=$(date +%s.%N)
rpyrank repl.new 2 s3cret resume
wait_pids 120 "${SURVIVORS[@]}" "${RPIDS[@]}" ||
	{ tail -n 4 "$WORKDIR"/repl.*.log; die "the job did not go on exactly after rank 2 was replaced"; }
for r in 0 1 3; do
	grep -q "made again .*rank 2 was replaced: call again" "$WORKDIR/repl.$r.log" ||
		{ cat "$WORKDIR/repl.$r.log"; die "rank $r's call was not failed with EAGAIN naming the replaced rank"; }
done
grep -h "ok calls" "$WORKDIR"/repl.[0-3].log "$WORKDIR/repl.new.log" | sed 's/^/    /'
again=$(grep -ho "made again (at [0-9.]*" "$WORKDIR"/repl.[0-3].log | grep -o "[0-9.]*$" | sort -n | tail -1)
echo "replacement: the others went on $(python3 -c "print('%.2f' % ($again - $joined_at))") s after the new rank 2 was started (its interpreter and pbox_connect included)"
# ---- 1, continued ----
wait_pids 90 "${PAUSE_PIDS[@]}" || { tail -n 3 "$WORKDIR"/pause.*.log; die "a rank failed across rank 0's 40 s pause"; }
for r in 1 2 3; do
	n=$(grep -c "waiting for rank 0 (late" "$WORKDIR/pause.$r.log")
	[ "$n" = 1 ] || { cat "$WORKDIR/pause.$r.log"; die "rank $r said $n times that it waits for rank 0 (PBOX_DEBUG=INFO: once)"; }
	t=$(grep -o "the second took [0-9.]*" "$WORKDIR/pause.$r.log" | grep -o "[0-9.]*$")
	python3 -c "import sys; sys.exit(0 if float('$t') >= 38 else 1)" || die "rank $r's second call took $t s, not the pause"
done
grep "^rank" "$WORKDIR"/pause.*.log | sed 's/^/    /'
python3 - "$WORKDIR" <<'PY' || die "the waiting ranks stormed the box"
import re, sys
w = [int(re.search(r"(\d+) WAITs", open(f"{sys.argv[1]}/pause.{r}.log").read()).group(1))
     for r in (1, 2, 3)]
print("WAITs per waiting rank over the 40 s pause: %s (%.1f a second)" % (w, max(w) / 40))
# at most a window (128) of segments, each asking at the pace the round has
# been open (5 ms, 10 ms, ... about 10 queries) and then every 2 s
assert max(w) < 128 * (40 / 2 + 12), w
PY

box_stop || die "pboxd exited non-zero"
echo "elastic: ok"
