#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ckpt_latency.sh - how long pboxd's control thread is held by a large
# `pboxctl job save` (docs/operations.md "Checkpoints of PS keys"; not a
# pass/fail test, so run.sh does not pick it up). One worker
# (ckpt_prog.c) holds a job with an SGD PS key of N weights (N * 4 bytes
# of checkpoint); the script saves it twice and meanwhile runs
# `pboxctl status` every 50 ms, printing for each save its time and the
# worst status latency (idle: the worst of 5 before it). Then a job
# created with --restore from that checkpoint declares the key (the file
# read and checked: the restore) while status runs every 50 ms: the
# worst status latency from the worker's join until its declaration is
# answered, and the declaration's time.
#   N=134217728 BUILD=build bash tests/integration/ckpt_latency.sh
# BUILD may be another tree's build directory (its pboxd, pboxctl and
# libpbox): that is how the figures of main before the checkpoint thread
# were taken.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
need_root "$0"
N=${N:-33554432}
topo_up
cc -O2 -I"$HERE/../../include" -o "$WORKDIR/ckpt_prog" "$HERE/ckpt_prog.c" \
	-L"$BUILD" -Wl,-rpath,"$(cd "$BUILD" && pwd)" -lpbox || die "ckpt_prog does not build"
box_start af_packet
in_wk env CKPT_N=$N timeout 300 "$WORKDIR/ckpt_prog" "$CONTROL" big train "$WORKDIR/go" \
	> "$WORKDIR/train.log" 2>&1 &
TRAIN=$!; PIDS+=($TRAIN)
for _ in $(seq 1200); do grep -q TRAINED "$WORKDIR/train.log" && break; sleep 0.1; done
grep -q TRAINED "$WORKDIR/train.log" || die "the worker did not train: $(cat "$WORKDIR/train.log")"
mkdir -m 0700 "$WORKDIR/save"
ms() { echo $(($(date +%s%N) / 1000000)); }
for round in 1 2; do
	rm -f "$WORKDIR"/save/*
	idle=0
	for _ in 1 2 3 4 5; do
		s=$(ms); ctl status > /dev/null; d=$(($(ms) - s)); [ $d -gt $idle ] && idle=$d
	done
	s0=$(ms)
	ctl --timeout 600000 job save big "$WORKDIR/save" > "$WORKDIR/save.txt" 2>&1 &
	SP=$!
	worst=0; n=0
	while kill -0 $SP 2>/dev/null; do
		s=$(ms); ctl --timeout 60000 status > /dev/null; d=$(($(ms) - s))
		n=$((n + 1)); [ $d -gt $worst ] && worst=$d
		sleep 0.05
	done
	wait $SP; rc=$?
	echo "save $round: $(grep 'copied in' "$BOX_LOG" | tail -1 | sed 's/.*pboxd[^:]*: //')"
	echo "save $round: N=$N rc=$rc in $(($(ms) - s0)) ms; pboxctl status: idle worst $idle ms," \
		"during the save $n calls, worst $worst ms; $(cat "$WORKDIR/save.txt")"
done
touch "$WORKDIR/go"
wait $TRAIN
# the restore: a job created with --restore from the last save
ctl job create big2 --world 1 --max-bytes $(((256 << 20) + 3 * 4 * N)) \
	--restore "$WORKDIR/save" > /dev/null || die "job create --restore failed"
for round in 1 2; do
	[ $round = 2 ] && { ctl job abort big2 > /dev/null 2>&1; sleep 1
		ctl job create big2 --world 1 --max-bytes $(((256 << 20) + 3 * 4 * N)) \
			--restore "$WORKDIR/save" > /dev/null || die "job create --restore failed"; }
	sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null   # a cold read, as after a restart
	s0=$(ms)
	in_wk env CKPT_N=$N timeout 300 "$WORKDIR/ckpt_prog" "$CONTROL" big2 resume \
		> "$WORKDIR/resume.log" 2>&1 &
	RP=$!
	# from the join (a job's arena is made or remade then) to the answer
	while kill -0 $RP 2>/dev/null && ! grep -q JOINED "$WORKDIR/resume.log"; do
		sleep 0.01
	done
	worst=0; n=0
	while kill -0 $RP 2>/dev/null && ! grep -q DECLARED "$WORKDIR/resume.log"; do
		s=$(ms); ctl --timeout 60000 status > /dev/null; d=$(($(ms) - s))
		n=$((n + 1)); [ $d -gt $worst ] && worst=$d
		sleep 0.05
	done
	wait $RP; rc=$?
	echo "restore $round: N=$N rc=$rc; pboxctl status from the join until key_declare answered:" \
		"$n calls, worst $worst ms; $(tr '\n' ' ' < "$WORKDIR/resume.log")"
done
box_stop
