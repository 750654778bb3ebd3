#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_restart.sh - the box restarts without losing a run (docs/reliability.md
# "A box restart"), against the real pboxd on DPDK net_af_packet: 4 ranks
# train through a kill -9 of pboxd, started again 1 s later on the same
# addresses (tests/integration/restart_prog.c):
#  1. dense: 30 allreduces of 1 MiB, each step's input made from the last
#     result; pboxd killed after step 12: every rank rejoins (pbox_stats
#     rejoins 1), sends the results it holds as FINAL pushes, and the
#     digest of every step's result equals an uninterrupted run's on every
#     rank;
#  2. PS: SGD with momentum on the box, --checkpoint-dir and
#     --checkpoint-every 1; pboxd killed after step 12: the step in flight
#     fails PBOX_EAGAIN, the ranks read the restored step, replay from it
#     and finish with the weights of an uninterrupted run;
#  3. BoxOptimizer (torch, SGD with momentum, replay_steps=64): after the
#     restart every rank pushes again the steps the box's checkpoint
#     lacks; the final parameters equal an uninterrupted run's (skipped
#     without torch);
#  4. PBOX_RESUME=off: the same kill fails every rank at once with
#     "lost the control connection".
# The time from the kill to training going on is printed (the first
# progress after the restart).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
need_root "$0"
topo_up
build_prog restart_prog
CK=$WORKDIR/ckpt
mkdir -m 0700 "$CK"
BOX_OPTS=(--checkpoint-dir "$CK" --checkpoint-every 1)
box_start af_packet "${BOX_OPTS[@]}"

STEPS=30
N=262144
# run TAG MODE [ENV...]: 4 ranks in the background (RUN_PIDS)
run() {
	local tag=$1 mode=$2; shift 2
	RUN_PIDS=()
	for r in 0 1 2 3; do
		in_wk env "$@" timeout 120 "$WORKDIR/restart_prog" "$CONTROL" "$tag" $r 4 "$mode" \
			$STEPS $N "$WORKDIR/$tag.$r.step" > "$WORKDIR/$tag.$r.log" 2>&1 &
		RUN_PIDS+=($!); PIDS+=($!)
	done
}
# wait_run TAG: 0 if every rank exited 0
wait_run() {
	local rc=0
	for p in "${RUN_PIDS[@]}"; do wait "$p" || rc=1; done
	return $rc
}
step_of() { cat "$WORKDIR/$1.0.step" 2>/dev/null || echo 0; }
# kill_restart TAG AT: kill -9 pboxd once rank 0 passed step AT, start it
# again 1 s later; KILL_T: the kill's time
kill_restart() {
	local tag=$1 at=$2
	for _ in $(seq 600); do [ "$(step_of "$tag")" -ge "$at" ] && break; sleep 0.05; done
	[ "$(step_of "$tag")" -ge "$at" ] || die "$tag: rank 0 did not reach step $at: $(cat "$WORKDIR/$tag.0.log")"
	kill -9 "$BOX_PID"; wait "$BOX_PID" 2>/dev/null
	KILL_T=$(date +%s.%N); KILL_STEP=$(step_of "$tag")
	BOX_PID=
	sleep 1
	mv "$BOX_LOG" "$WORKDIR/pboxd.$tag.before.log"
	box_start af_packet "${BOX_OPTS[@]}"
	[ -z "${NO_WAIT:-}" ] || return 0
	# training goes on: rank 0's step moves past the one it was in
	for _ in $(seq 600); do [ "$(step_of "$tag")" -gt "$KILL_STEP" ] && break; sleep 0.02; done
	BACK_S=$(awk -v a="$(date +%s.%N)" -v b="$KILL_T" 'BEGIN { printf "%.1f", a - b }')
}
digests() { for r in 0 1 2 3; do sed -n 's/^digest //p' "$WORKDIR/$1.$r.log"; done | sort -u; }

# ---- 1. dense ----
run dense-ref dense
wait_run || die "uninterrupted dense run failed: $(cat "$WORKDIR"/dense-ref.*.log)"
REF=$(digests dense-ref)
[ "$(echo "$REF" | wc -l)" = 1 ] || die "the ranks' digests differ without a restart: $REF"
run dense dense
kill_restart dense 12
wait_run || die "dense training did not survive the restart: $(tail -n 3 "$WORKDIR"/dense.*.log)"
GOT=$(digests dense)
[ "$GOT" = "$REF" ] || die "dense after a restart: digests $GOT, uninterrupted $REF"
grep -q "rejoins 1 " "$WORKDIR/dense.0.log" || die "rank 0 did not rejoin once: $(cat "$WORKDIR/dense.0.log")"
log "dense: killed at step $KILL_STEP, training went on ${BACK_S} s after the kill; every rank's digest equals the uninterrupted run's ($REF); $(grep -h rejoins "$WORKDIR"/dense.*.log | tr '\n' ';')"

# ---- 2. PS, from the box's checkpoint ----
# (200 ms between steps: a periodic save, tried each second, copies the
# keys between two rounds and tries again a second later if a round is
# open; at 100 ms the 3 s run gave it about 3 tries, and once in CI
# (2026-11-29) no file came within 10 s, cause not kept: the failure now
# shows the box's checkpoint lines)
run ps-ref ps STEP_MS=200
wait_run || die "uninterrupted PS run failed: $(cat "$WORKDIR"/ps-ref.*.log)"
REF=$(digests ps-ref)
[ "$(echo "$REF" | wc -l)" = 1 ] || die "the ranks' PS digests differ without a restart: $REF"
run ps ps STEP_MS=200
# (after the box's first periodic save of the key)
for _ in $(seq 100); do [ -f "$CK/ps/key-2.pboxckpt" ] && break; sleep 0.1; done
[ -f "$CK/ps/key-2.pboxckpt" ] || die "no periodic checkpoint of the PS key in $CK/ps ($(ls -A "$CK/ps" 2>&1 | tr '\n' ' ')); rank 0: $(tail -n 3 "$WORKDIR/ps.0.log" | tr '\n' ' '); box: $(grep -i 'checkpoint\|ckpt' "$BOX_LOG" | tail -n 5 | tr '\n' ' ')"
kill_restart ps "$(( $(step_of ps) + 3 ))"
wait_run || die "PS training did not survive the restart: $(tail -n 3 "$WORKDIR"/ps.*.log)"
GOT=$(digests ps)
grep -q "^restored " "$WORKDIR/ps.0.log" || die "rank 0 did not report a restored step: $(cat "$WORKDIR/ps.0.log")"
[ "$GOT" = "$REF" ] || die "PS after a restart: digests $GOT, uninterrupted $REF ($(grep -h restored "$WORKDIR"/ps.*.log))"
log "PS: killed at step $KILL_STEP, $(grep -h '^restored' "$WORKDIR/ps.0.log"), went on ${BACK_S} s after the kill; final weights equal the uninterrupted run's ($REF)"

# ---- 3. BoxOptimizer replays what the checkpoint lacks ----
PY=${PYTHON:-/usr/bin/python3}
if timeout 60 "$PY" -c "import torch" 2>/dev/null; then
	use_python_package
	# pyrun TAG: 4 ranks in the background (RUN_PIDS)
	pyrun() {
		local tag=$1
		RUN_PIDS=()
		for r in 0 1 2 3; do
			in_wk env PBOX_CONTROL="$CONTROL" PBOX_LIB="$PBOX_LIB" PYTHONPATH="$PYTHONPATH" \
				timeout 180 "$PY" tests/integration/restart_box_optimizer.py $r 4 "$tag" 40 \
				"$WORKDIR/$tag.$r.step" > "$WORKDIR/$tag.$r.log" 2>&1 &
			RUN_PIDS+=($!); PIDS+=($!)
		done
	}
	pyrun bo-ref
	wait_run || die "uninterrupted BoxOptimizer run failed: $(tail -n 5 "$WORKDIR"/bo-ref.*.log)"
	REF=$(digests bo-ref)
	[ "$(echo "$REF" | wc -l)" = 1 ] || die "BoxOptimizer digests differ without a restart: $REF"
	pyrun bo
	for _ in $(seq 300); do ls "$CK"/bo/key-*.pboxckpt > /dev/null 2>&1 && break; sleep 0.1; done
	ls "$CK"/bo/key-*.pboxckpt > /dev/null 2>&1 || die "no periodic checkpoint of job bo in $CK/bo"
	kill_restart bo "$(( $(step_of bo) + 5 ))"
	wait_run || die "BoxOptimizer training did not survive the restart: $(tail -n 5 "$WORKDIR"/bo.*.log)"
	GOT=$(digests bo)
	grep -q "^replays 1 " "$WORKDIR/bo.0.log" || die "rank 0 did not replay: $(cat "$WORKDIR/bo.0.log")"
	[ "$GOT" = "$REF" ] || die "BoxOptimizer after a restart: digests $GOT, uninterrupted $REF"
	log "BoxOptimizer: killed at step $KILL_STEP, went on ${BACK_S} s after the kill, replayed the steps since the box's checkpoint; final parameters equal the uninterrupted run's ($REF)"
else
	log "SKIP part 3: $PY cannot import torch (apt-get install python3-torch)"
fi

# ---- 4. PBOX_RESUME=off: the old behaviour, at once ----
run off dense PBOX_RESUME=off
NO_WAIT=1 kill_restart off 5
wait_run && die "with PBOX_RESUME=off the ranks survived a restart"
grep -q "lost the control connection" "$WORKDIR/off.0.log" || die "PBOX_RESUME=off: no named error: $(cat "$WORKDIR/off.0.log")"
log "PBOX_RESUME=off: every rank failed naming the lost connection"
box_stop || die "pboxd did not stop cleanly"
log "PASS test_restart"
