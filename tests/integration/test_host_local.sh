#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_host_local.sh - host-local aggregation (docs/architecture.md "The
# host level") against the real pboxd on DPDK net_af_packet, each "host" a
# network namespace of its own (WK_HOSTS=1) whose ranks share /dev/shm:
#   - 2 hosts x 2 ranks and 1 host x 4, f32 and bf16, parts of a few KiB
#     and of more than the 1 MiB chunks a lane's call is fed in (also
#     under 5% loss): every rank's result
#     is the sum in the order (host, local rank), bit for bit
#     (host_local_prog.c computes it), every rank's digest equal, and the
#     box saw one contribution per host (the lane jobs' worlds, no dense
#     key in the flat job);
#   - the same on 2 x 2 for device buffers (pbox_allreduce_dev on the fake
#     GPU library, PBOX_GPU_LIB), f32 and bf16, and the box's view of them;
#   - sparse calls (f32, and bf16 on 2 x 2), top-k (5%, error feedback)
#     and host sums on 2 x 2 and 1 x 4 (host_local_sparse.c): the sum in the order (host, local
#     rank) bit for bit, top-k's from each host's sum cut in parts, each
#     part selected with its residual; a top-k rank sent its part's
#     entries only (density x count / L a call, not density x count);
#     pbox-perf --topk/--sparse --local 2 --check exact, 4 KiB to 1 MiB;
#   - a PS key (SGD with momentum) on 2 x 2 and 1 x 4: init, steps, read
#     and write through the host level, the weights the same bits as a
#     reference job of one rank per host fed the hosts' sums with the mean
#     over the whole world (host_local_ps.c);
#   - layouts refused at connect with their named error: a world L does not
#     divide, a local rank that is not rank % L, ranks of one host that
#     disagree on L;
#   - a local rank killed -9 while the others wait in a call: they fail
#     within 3 s naming it (local rank, rank, pid, "died");
#   - a stale name (a dead pid in it) removed by the next job's connect, and
#     nothing of the jobs' left in /dev/shm afterwards.
set -u
cd "$(dirname "$0")/../.."
WK_HOSTS=1
. tests/integration/lib.sh
need_root "$0"
topo_up
box_start af_packet
HL=$WORKDIR/host_local_prog
build_prog host_local_prog -I. -ldl   # (common/gpu_ops.h: the fake GPU's table)
build_prog host_local_sparse -I.
HLSP=$WORKDIR/host_local_sparse
HLPS=$WORKDIR/host_local_ps
cc -O2 -Iinclude -o "$HLPS" tests/integration/host_local_ps.c -L"$BUILD" \
	-Wl,-rpath,"$(pwd)/$BUILD" -lpbox -lm || die "host_local_ps does not build"
export PBOX_TIMEOUT=20s
SHM_BEFORE=$(ls /dev/shm | grep '^pbox-h' | sort)

HOSTS_NS=()
host_ns() {   # host_ns I: the namespace of host I (made at first use)
	while [ ${#HOSTS_NS[@]} -le "$1" ]; do new_host; HOSTS_NS+=("$NEW_HOST"); done
	HNS=${HOSTS_NS[$1]}
}

# run JOB H L DTYPE COUNT CALLS: H hosts of L ranks; waits, checks each ok
# and every digest equal (PROG: host_local_prog, or host_local_ps with no
# DTYPE; PER_HOST=1: each host's ranks' equal)
run() {
	local job=$1 H=$2 L=$3 pids=() r prog=${PROG:-$HL} calls=${!#}
	shift 3
	for r in $(seq 0 $((H * L - 1))); do
		host_ns $((r / L))
		ip netns exec "$HNS" timeout -k 2 60 "$prog" "$CONTROL" "$job" "$r" $((H * L)) "$L" \
			"$@" > "$WORKDIR/$job.$r.log" 2>&1 &
		pids+=($!); PIDS+=($!)
	done
	for r in "${!pids[@]}"; do
		wait "${pids[$r]}" || { cat "$WORKDIR/$job.$r.log" >&2; die "$job: rank $r failed"; }
		grep -q "^ok $calls" "$WORKDIR/$job.$r.log" || die "$job: rank $r did not finish"
	done
	local n want=1
	[ "${PER_HOST:-0}" = 1 ] && want=$H   # host sums: one digest per host
	n=$(grep -h '^digest' "$WORKDIR/$job".*.log | sort -u | wc -l)
	[ "$n" = "$want" ] || die "$job: ranks disagree: $(grep -h '^digest' "$WORKDIR/$job".*.log | sort | uniq -c)"
	log "$job: $((H * L)) ranks ($H x $L) exact, $(grep -h '^digest' "$WORKDIR/$job.0.log")"
}

# lanes JOB H L: while the ranks run, the box holds L lane jobs of world H
# and the flat job no key of the sums (checked on a run kept alive)
check_box_view() {
	local job=$1 H=$2 L=$3 l
	ctl --json jobs > "$WORKDIR/jobs.json" || die "pboxctl jobs failed"
	python3 - "$WORKDIR/jobs.json" "$job" "$H" "$L" <<'PY' || die "$job: the box's view is not one contribution per host"
import json, sys
doc = json.load(open(sys.argv[1])); job, H, L = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
jobs = doc["jobs"] if isinstance(doc, dict) and "jobs" in doc else doc
by = {j["job"]: j for j in jobs}
flat = by.get(job)
assert flat is not None and flat["world"] == H * L, f"flat job: {flat}"
assert flat["keys"] == 0 and flat["bytes_reduced"] == 0, f"the flat job summed: {flat}"
summed = 0
for l in range(L):
    lane = by.get(f"{job}.lane{l}")
    assert lane is not None, f"no lane job {job}.lane{l}: {sorted(by)}"
    assert lane["world"] == H and lane["joined"] == H, f"lane {l}: {lane}"
    summed += lane["bytes_reduced"]
# one call of 4096 f32 done: one contribution of it per host, not per rank
assert summed == H * 4096 * 4, f"the lanes summed {summed} bytes, want {H} x 16384"
print(f"{job}: flat world {H * L} summed nothing; {L} lanes of world {H} summed {summed} bytes")
PY
}

# a name a killed job left before its ranks had all mapped it (a dead pid
# in its owners page): the next job's local rank 0 removes it at connect
true & DEAD=$!; wait $DEAD
STALE=pbox-h4000000000-deadbeef-n0-$TAG
python3 -c "import struct,sys; open('/dev/shm/'+sys.argv[1],'wb').write(struct.pack('<4I',0x50424847,2,1,0)+struct.pack('<64i',int(sys.argv[2]),*[0]*63)+bytes(4096))" "$STALE" "$DEAD" ||
	die "cannot make a stale name"
run hl22f 2 2 f32 100000 3
[ ! -e "/dev/shm/$STALE" ] || { rm -f "/dev/shm/$STALE"; die "the stale /dev/shm/$STALE was not removed"; }
log "stale /dev/shm/$STALE (pid $DEAD, gone) removed at connect"
run hl22b 2 2 bf16 70001 3
run hl14f 1 4 f32 262144 3
run hl14b 1 4 bf16 1000 2
# parts above one chunk (1 MiB): the lane's call fed as the host sum
# fills it, the results copied out as they come (ops/host.c sum_fed)
run hl22fl 2 2 f32 1500000 3
run hl22bl 2 2 bf16 1200001 2
run hl14fl 1 4 f32 1100000 2
# the same under 5% loss each way on the hosts' links (nftables on the
# bridge): lost segments of a fed call go again, results still exact
loss_rules 5
run hl22floss 2 2 f32 1500000 2
loss_rules 0
# device buffers (the fake GPU library) through the host level: the same bits
FAKE_GPU=$(pwd)/$BUILD/tests/libpbox-gpu-fake.so
[ -f "$FAKE_GPU" ] || die "no $FAKE_GPU (make builds it)"
HL_DEV=1 PBOX_GPU_LIB=$FAKE_GPU run hl22fd 2 2 f32 100000 3
HL_DEV=1 PBOX_GPU_LIB=$FAKE_GPU run hl22bd 2 2 bf16 70001 2
HL_DEV=1 PBOX_GPU_LIB=$FAKE_GPU run hl22fdl 2 2 f32 700001 2
# sparse, top-k and host sums (f32) through the host level
PROG=$HLSP run hlsp22 2 2 sparse 30000 3
PROG=$HLSP run hlsp14 1 4 sparse 5000 2
PROG=$HLSP run hlsb22 2 2 sparsebf 30000 2
PROG=$HLSP run hltk22 2 2 topk 40000 4
PROG=$HLSP run hltk14 1 4 topk 4097 3
PER_HOST=1 PROG=$HLSP run hlhs22 2 2 hostsum 10000 2
# a top-k rank sends its part's selection: at most 4 calls x (k + k/8 + 1)
# of its 20,000 elements at 5% (k = 1000), not the whole key's (k = 2000)
for r in 0 1 2 3; do
	e=$(sed -n 's/^entries //p' "$WORKDIR/hltk22.$r.log")
	[ -n "$e" ] && [ "$e" -gt 0 ] && [ "$e" -le $((4 * 1126)) ] ||
		die "hltk22: rank $r sent $e entries in 4 calls, want 1..$((4 * 1126)) (its part's)"
done
log "hltk22: entries sent per rank in 4 calls: $(sed -n 's/^entries //p' "$WORKDIR"/hltk22.*.log | tr '\n' ' ')"
# pbox-perf --check through the host level (every rank replays the hosts'
# sums, parts and residuals: tools/perf_sparse.c), 4 KiB .. 1 MiB
for mode in "topk 0.05" "sparse 0.2"; do
	set -- $mode
	pids=()
	for r in 0 1 2 3; do
		host_ns $((r / 2))
		ip netns exec "$HNS" timeout -k 2 60 "$BUILD/pbox-perf" --control "$CONTROL" \
			--job "hlperf-$1" --rank "$r" --world 4 --local 2 --"$1" "$2" --minbytes 4K \
			--maxbytes 1M --iters 2 --warmup 1 --check > "$WORKDIR/hlperf-$1.$r.log" 2>&1 &
		pids+=($!); PIDS+=($!)
	done
	for r in 0 1 2 3; do
		wait "${pids[$r]}" || { cat "$WORKDIR/hlperf-$1.$r.log" >&2; die "pbox-perf --$1 --local 2 --check: rank $r failed"; }
	done
	log "pbox-perf --$1 $2 --local 2 --check: every element of every size exact on 4 ranks"
done
PROG=$HLPS run hlps22 2 2 50000 4
PROG=$HLPS run hlps14 1 4 3000 3

# the box's view, with ranks alive: the lane jobs, one contribution per host
box_view() {   # box_view TAG [ENV=VALUE...]: 2 x 2 ranks stalled after a call, the box's view checked
	local tag=$1 r; shift
	local pids=()
	for r in 0 1 2 3; do
		host_ns $((r / 2))
		env "$@" HL_STALL_AT=1 ip netns exec "$HNS" timeout -k 2 60 "$HL" "$CONTROL" "$tag" \
			"$r" 4 2 f32 4096 2 > "$WORKDIR/$tag.$r.log" 2>&1 &
		pids+=($!); PIDS+=($!)
	done
	for _ in $(seq 100); do
		[ "$(grep -l stalling "$WORKDIR/$tag".*.log 2>/dev/null | wc -l)" = 4 ] && break
		sleep 0.1
	done
	check_box_view "$tag" 2 2 >&2
	kill -TERM "${pids[@]}" 2>/dev/null   # (timeout passes it on)
	wait "${pids[@]}" 2>/dev/null
}
box_view hlview
box_view hlviewd HL_DEV=1 PBOX_GPU_LIB="$FAKE_GPU"   # ... and of device buffers' calls

# refused layouts, each with its named error
bad() {   # bad WHAT PATTERN CMD...: CMD must fail printing PATTERN
	local what=$1 pat=$2; shift 2
	if "$@" > "$WORKDIR/bad.log" 2>&1; then die "$what: accepted"; fi
	grep -q -- "$pat" "$WORKDIR/bad.log" || { cat "$WORKDIR/bad.log" >&2; die "$what: not named"; }
	log "$what: refused: $(grep -m1 -- "$pat" "$WORKDIR/bad.log" | head -c 400)"
}
host_ns 0
bad "world 3, L 2" "do not divide the world of 3" \
	ip netns exec "$HNS" timeout 30 "$HL" "$CONTROL" hlbad1 0 3 2 f32 64 1
bad "local rank 1 as rank 0" "rank 0 is local rank 0 of host 0" \
	env HL_LOCAL_RANK=1 ip netns exec "$HNS" timeout 30 "$HL" "$CONTROL" hlbad2 0 4 2 f32 64 1
# ranks 0 and 1 on one host, rank 0 says L=2 and rank 1 L=... 2 is the only
# other L that puts rank 1 on host 0 with rank 0: rank 1 says 4 (world 4)
ip netns exec "$HNS" timeout 30 "$HL" "$CONTROL" hlbad3 0 4 2 f32 64 1 > "$WORKDIR/bad3.0.log" 2>&1 &
P0=$!; PIDS+=($P0)
bad "L 2 and L 4 on one host" "LOCAL_WORLD_SIZE or pbox_opts.local_world differ" \
	ip netns exec "$HNS" timeout 30 "$HL" "$CONTROL" hlbad3 1 4 4 f32 64 1
kill -TERM $P0 2>/dev/null; wait $P0 2>/dev/null

# a local rank killed -9 while the others wait for it in a call
pids=()
for r in 0 1 2 3; do
	host_ns $((r / 2))
	stall=; [ $r = 1 ] && stall=1
	HL_STALL_AT=${stall:--1} ip netns exec "$HNS" timeout -k 2 60 "$HL" "$CONTROL" hlkill "$r" \
		4 2 f32 50000 3 > "$WORKDIR/hlkill.$r.log" 2>&1 &
	pids+=($!); PIDS+=($!)
done
for _ in $(seq 200); do grep -q stalling "$WORKDIR/hlkill.1.log" && break; sleep 0.1; done
grep -q stalling "$WORKDIR/hlkill.1.log" || die "hlkill: rank 1 never stalled"
sleep 0.5
VICTIM=$(pgrep -f "^$HL $CONTROL hlkill 1 " | head -1)
[ -n "$VICTIM" ] || die "hlkill: rank 1's process not found"
t0=$SECONDS
kill -9 "$VICTIM"
wait "${pids[0]}"; rc0=$?
dt=$((SECONDS - t0))
[ $rc0 -ne 0 ] || die "hlkill: rank 0 succeeded without its host's local rank 1"
grep -q "local rank 1 (rank 1, pid $VICTIM) died" "$WORKDIR/hlkill.0.log" ||
	{ cat "$WORKDIR/hlkill.0.log" >&2; die "hlkill: rank 0 does not name the dead local rank"; }
[ $dt -le 3 ] || die "hlkill: rank 0 took ${dt}s to see local rank 1 die"
log "hlkill: rank 0 failed in ${dt}s: $(grep -o 'local rank 1 (rank 1.*died' "$WORKDIR/hlkill.0.log")"
for p in "${pids[@]:1}"; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done

# nothing left in /dev/shm (names of killed ranks' groups included)
sleep 0.5
left=$(host_shm_left "$SHM_BEFORE")
[ -z "$left" ] || die "left in /dev/shm: $left"
box_stop || die "pboxd did not stop cleanly"
log "PASS test_host_local"
