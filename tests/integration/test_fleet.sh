#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_fleet.sh - one job over a fleet of boxes (docs/architecture.md "A
# fleet of boxes"), against real pboxd on DPDK net_af_packet, each box in
# its own namespace with its own data and management links to the
# workers' namespace. 4 ranks of tests/integration/restart_prog.c, with
# PBOX_CONTROL a list of boxes:
#  1. a fleet of 2: dense allreduces of 1 MiB (each key cut into 512 KiB
#     partitions over both boxes), a PS key (SGD with momentum, a PS key
#     per partition) and top-k (each partition selects its own entries):
#     the digests of every result equal a single box's run bit for bit
#     (for top-k, one box's run with the key cut as the fleet cuts it,
#     TOPK_PIECE), and both boxes summed contributions;
#     host-local aggregation (1 host x 4) over the 2 boxes, exact, of
#     host buffers and of device buffers (the fake GPU library);
#  2. a fleet of 3: dense, the same digest;
#  3. bad lists: a box listed twice, an unreachable box, and a box whose
#     job of the name has another world, fail pbox_connect naming the
#     box;
#  4. torch's "pbox" backend over the fleet of 3 (torchrun, 4 ranks): every
#     collective exact against each rank's reference
#     (torch_backend_check.py --part coll; skipped without torch);
#  5. box 3 killed mid-run fails every rank naming it (PBOX_TIMEOUT 3 s
#     bounds the rejoin).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
need_root "$0"
topo_up
build_prog restart_prog
box_start af_packet --box-id box1

# extra_box N: box N (2, 3, ...) in its own namespace: management
# 198.18.(10+N).1 (workers: .2), data 198.18.(20+N).1 (workers: .2);
# BOXES gets its control address
BOXES=$CONTROL
BOX_PIDS=()
extra_box() {
	local n=$1 ns=pbox-h$TAG-b$1
	HOST_NS+=("$ns")
	ip netns add "$ns" || die "cannot create namespace $ns"
	ip link add "bd$n$TAG" type veth peer name "wd$n$TAG" &&
	ip link add "bm$n$TAG" type veth peer name "wm$n$TAG" &&
	ip link set "bd$n$TAG" netns "$ns" && ip link set "bm$n$TAG" netns "$ns" &&
	ip link set "wd$n$TAG" netns "$NS_WK" && ip link set "wm$n$TAG" netns "$NS_WK" &&
	ip -n "$ns" link set lo up && ip -n "$ns" link set "bd$n$TAG" up &&
	ip netns exec "$ns" sysctl -qw net.ipv6.conf."bd$n$TAG".disable_ipv6=1 &&
	ip -n "$ns" addr add "198.18.$((10 + n)).1/24" dev "bm$n$TAG" &&
	ip -n "$ns" link set "bm$n$TAG" up &&
	ip -n "$NS_WK" addr add "198.18.$((10 + n)).2/24" dev "wm$n$TAG" &&
	ip -n "$NS_WK" link set "wm$n$TAG" up &&
	ip -n "$NS_WK" addr add "198.18.$((20 + n)).2/24" dev "wd$n$TAG" &&
	ip -n "$NS_WK" link set "wd$n$TAG" up ||
		die "cannot set up box $n's links"
	ip netns exec "$ns" "$BUILD/pboxd" -l 0-1 --no-huge -m 512 --no-pci --no-shconf \
		--file-prefix=pboxf$n$TAG --vdev="net_af_packet0,iface=bd$n$TAG" \
		--log-level=lib.eal:error -- --ip "0:198.18.$((20 + n)).1/24" \
		--control 0.0.0.0:7470 --rpc-socket "$WORKDIR/pboxd$n.sock" \
		--idle-sleep-us "${PBOX_IDLE_SLEEP_US:-20}" --box-id "box$n" \
		> "$WORKDIR/pboxd$n.log" 2>&1 &
	BOX_PIDS+=($!); PIDS+=($!)
	for _ in $(seq 200); do
		grep -q 'pboxd: ready' "$WORKDIR/pboxd$n.log" 2>/dev/null && break
		sleep 0.1
	done
	grep -q 'pboxd: ready' "$WORKDIR/pboxd$n.log" || { cat "$WORKDIR/pboxd$n.log"; die "box $n not ready"; }
	BOXES="$BOXES,198.18.$((10 + n)).1:7470"
}
ctln() { local n=$1; shift; "$BUILD/pboxctl" --socket "$WORKDIR/pboxd$n.sock" "$@"; }
pushes() { # pushes SOCKET: contributions the box summed so far
	"$BUILD/pboxctl" --socket "$1" --json stats | python3 -c \
		'import json,sys; print(sum(l["pushes"] for l in json.load(sys.stdin)["lcores"]))'
}

# run TAG MODE CONTROL: 4 ranks to the end; the one digest they agree on
run() {
	local tag=$1 mode=$2 control=$3 pids=() rc=0
	for r in 0 1 2 3; do
		in_wk timeout 120 "$WORKDIR/restart_prog" "$control" "$tag" $r 4 "$mode" 6 262144 \
			"$WORKDIR/$tag.$r.step" > "$WORKDIR/$tag.$r.log" 2>&1 &
		pids+=($!); PIDS+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	[ $rc = 0 ] || die "$tag ($mode over $control): $(tail -n 3 "$WORKDIR"/$tag.*.log)"
	one_digest "$tag" 4
}

extra_box 2
# ---- 1. a fleet of 2 against one box ----
for mode in dense ps topk; do
	# one box: top-k in 512 KiB pieces (keys of their own), as the fleet's partitions
	piece=; [ "$mode" = topk ] && piece=131072
	TOPK_PIECE=$piece run "one-$mode" "$mode" "$CONTROL"; ONE=$DIGEST
	before1=$(pushes "$PBOX_SOCKET"); before2=$(pushes "$WORKDIR/pboxd2.sock")
	run "two-$mode" "$mode" "$BOXES"; TWO=$DIGEST
	[ "$TWO" = "$ONE" ] || die "$mode over 2 boxes: digest $TWO, one box $ONE"
	n1=$(( $(pushes "$PBOX_SOCKET") - before1 )); n2=$(( $(pushes "$WORKDIR/pboxd2.sock") - before2 ))
	log "$mode: 2 boxes equal to one ($ONE); contributions summed by box 1: $n1, box 2: $n2"
	[ "$n1" -gt 0 ] && [ "$n2" -gt 0 ] || die "$mode: a box summed nothing ($n1, $n2)"
done

# host-local aggregation over the fleet: 1 host x 4, each lane's part
# (1 MB: two partitions) on both boxes, exact against the (host, local
# rank) order's reference computed by every rank
build_prog host_local_prog -I. -ldl
FAKE_GPU=$(pwd)/$BUILD/tests/libpbox-gpu-fake.so
[ -f "$FAKE_GPU" ] || die "no $FAKE_GPU (make builds it)"
# hl_fleet TAG [ENV=VALUE...]: the 4 ranks, exact, both boxes summed
hl_fleet() {
	local tag=$1 r; shift
	before1=$(pushes "$PBOX_SOCKET"); before2=$(pushes "$WORKDIR/pboxd2.sock")
	pids=()
	for r in 0 1 2 3; do
		env "$@" ip netns exec "$NS_WK" timeout 60 "$WORKDIR/host_local_prog" "$BOXES" "$tag" \
			$r 4 4 f32 1000000 3 > "$WORKDIR/$tag.$r.log" 2>&1 &
		pids+=($!); PIDS+=($!)
	done
	for r in 0 1 2 3; do
		wait "${pids[$r]}"; st=$?; [ $st = 0 ] && grep -q "^ok 3" "$WORKDIR/$tag.$r.log" ||
			die "$tag: host level over 2 boxes, rank $r (exit $st): $(tail -n 3 "$WORKDIR/$tag.$r.log")"
	done
	n1=$(( $(pushes "$PBOX_SOCKET") - before1 )); n2=$(( $(pushes "$WORKDIR/pboxd2.sock") - before2 ))
	[ "$n1" -gt 0 ] && [ "$n2" -gt 0 ] || die "$tag: host level over 2 boxes: a box summed nothing ($n1, $n2)"
	log "$tag: host level over 2 boxes: 4 ranks exact ($(grep -h '^digest' "$WORKDIR/$tag.0.log")), contributions by box 1: $n1, box 2: $n2"
}
hl_fleet hlfleet
# ... and device buffers (the fake GPU library): staged through the host
# level, its lanes the fleet's
hl_fleet hlfleetd HL_DEV=1 PBOX_GPU_LIB="$FAKE_GPU"

# ---- 2. a fleet of 3 ----
extra_box 3
run three-dense dense "$BOXES"
[ "$DIGEST" = "$(cd "$WORKDIR" && for r in 0; do sed -n 's/^digest //p' one-dense.$r.log; done)" ] ||
	die "dense over 3 boxes: digest $DIGEST differs from one box's"
log "dense: 3 boxes ($BOXES) equal to one ($DIGEST)"

# ---- 3. bad lists ----
in_wk timeout 30 "$WORKDIR/restart_prog" "$CONTROL,$CONTROL" dup 0 1 dense 1 16 "$WORKDIR/dup.step" \
	> "$WORKDIR/dup.log" 2>&1 && die "a box listed twice was taken"
grep -q "$CONTROL" "$WORKDIR/dup.log" && grep -qi "twice" "$WORKDIR/dup.log" ||
	die "a box listed twice: no error naming it: $(cat "$WORKDIR/dup.log")"
in_wk env PBOX_TIMEOUT=3s timeout 30 "$WORKDIR/restart_prog" "$CONTROL,198.18.1.1:7999" down 0 1 dense 1 16 \
	"$WORKDIR/down.step" > "$WORKDIR/down.log" 2>&1 && die "an unreachable box was taken"
grep -q "box 198.18.1.1:7999 (2 of 2)" "$WORKDIR/down.log" ||
	die "an unreachable box: no error naming it: $(cat "$WORKDIR/down.log")"
log "bad lists named: $(head -c 200 "$WORKDIR/dup.log" | tr '\n' ' ') / $(head -c 200 "$WORKDIR/down.log" | tr '\n' ' ')"
# a mismatched box: box 3 already holds a job of the name with another world
ctln 3 job create mism --world 2 > /dev/null || die "job create on box 3 failed"
in_wk env PBOX_TIMEOUT=3s timeout 30 "$WORKDIR/restart_prog" "$BOXES" mism 0 4 dense 1 16 \
	"$WORKDIR/mism.step" > "$WORKDIR/mism.log" 2>&1 && die "a box whose job has another world was taken"
grep -q "box 198.18.13.1:7470 (3 of 3)" "$WORKDIR/mism.log" && grep -qi "world" "$WORKDIR/mism.log" ||
	die "a mismatched box: no error naming it and the world: $(cat "$WORKDIR/mism.log")"
log "a mismatched box named: $(head -c 300 "$WORKDIR/mism.log" | tr '\n' ' ')"
# ---- 4. the torch backend over the fleet ----
PY=${PYTHON:-/usr/bin/python3}
if timeout 60 "$PY" -c "import torch" 2>/dev/null; then
	use_python_package
	timeout -k 5 240 ip netns exec "$NS_WK" env -u PBOX_JOB -u TORCHELASTIC_RUN_ID \
		PBOX_CONTROL="$BOXES" PBOX_LIB="$PBOX_LIB" PYTHONPATH="$PYTHONPATH" \
		"$PY" -m torch.distributed.run --nproc_per_node 4 --master_addr 127.0.0.1 \
		--master_port 29650 --redirects 1 --tee 1 --log_dir "$WORKDIR/tr-fleet" \
		tests/integration/torch_backend_check.py --part coll --steps 1 \
		> "$WORKDIR/torch.log" 2>&1
	rc=$?
	if [ $rc -ne 0 ] || ! grep -q 'backend coll: [0-9]* passed, 0 failed' "$WORKDIR/torch.log"; then
		tail -30 "$WORKDIR/torch.log"
		die "torch backend over 3 boxes: rc=$rc"
	fi
	log "torch backend over 3 boxes: $(grep -o 'backend coll: [0-9]* passed, 0 failed' "$WORKDIR/torch.log" | head -1)"
else
	log "SKIP part 4: $PY cannot import torch (apt-get install python3-torch)"
fi
# ---- 5. a box that dies mid-run takes the job down, naming it (PBOX_TIMEOUT bounds the rejoin)
pids=()
for r in 0 1 2 3; do
	in_wk env PBOX_TIMEOUT=3s STEP_MS=50 timeout 60 "$WORKDIR/restart_prog" "$BOXES" dies $r 4 dense 400 \
		262144 "$WORKDIR/dies.$r.step" > "$WORKDIR/dies.$r.log" 2>&1 &
	pids+=($!); PIDS+=($!)
done
for _ in $(seq 100); do [ -s "$WORKDIR/dies.0.step" ] && [ "$(cat "$WORKDIR/dies.0.step")" -ge 3 ] && break; sleep 0.1; done
t0=$(date +%s.%N)
kill -9 "${BOX_PIDS[1]}"
for i in 0 1 2 3; do wait "${pids[$i]}" && die "rank $i went on after box 3 died"; done
t1=$(date +%s.%N)
for r in 0 1 2 3; do
	grep -q "198.18.13.1:7470" "$WORKDIR/dies.$r.log" ||
		die "rank $r: box 3's death not named: $(tail -n 3 "$WORKDIR/dies.$r.log")"
done
log "a box killed: every rank failed $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s after, naming it: $(head -c 300 "$WORKDIR/dies.0.log" | tr '\n' ' ')"
box_stop || die "pboxd did not stop cleanly"
log "PASS test_fleet"
