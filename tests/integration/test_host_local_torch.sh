#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_host_local_torch.sh - the torch backend's collectives over the host
# level (docs/architecture.md "The host level"): 2 "hosts" (network
# namespaces, WK_HOSTS=1) each running torchrun --nproc_per_node 2, so
# LOCAL_WORLD_SIZE=2 turns host-local aggregation on by default;
# torch_backend_check.py --part coll checks every collective exact on each
# rank, and the box's log shows the lane jobs, each of world 2 (one
# contribution per host); then DDP with topk_hook on 2 hosts of 2, local
# rank 0 selecting from the host's sum, the model exactly the replay's
# (host_topk_check.py). Skips (77) without torch.
set -u
cd "$(dirname "$0")/../.."
WK_HOSTS=1
. tests/integration/lib.sh
torch_test_up "$0"
SHM_BEFORE=$(ls /dev/shm | grep '^pbox-h' | sort)

new_host; H0=$NEW_HOST
new_host; H1=$NEW_HOST
MASTER=198.18.1.10   # H0's management address (lib.sh new_host)
pids=()
for n in 0 1; do
	ns=$H0; [ $n = 1 ] && ns=$H1
	# (Gloo, which the backend keeps for the other ops, on the hosts' link)
	timeout -k 5 120 ip netns exec "$ns" env -u PBOX_JOB -u TORCHELASTIC_RUN_ID \
		GLOO_SOCKET_IFNAME=mgmt PBOX_CONTROL="$CONTROL" PBOX_LIB="$PBOX_LIB" PYTHONPATH="$PYTHONPATH" \
		"$PY" -m torch.distributed.run --nnodes 2 --node_rank $n --nproc_per_node 2 \
		--master_addr $MASTER --master_port 29671 --redirects 1 --tee 1 \
		--log_dir "$WORKDIR/tr$n" tests/integration/torch_backend_check.py --part coll \
		--steps 1 > "$WORKDIR/node$n.log" 2>&1 &
	pids+=($!); PIDS+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
grep -hE 'backend coll:' "$WORKDIR"/node*.log | sort -u >&2
if [ $rc -ne 0 ] || ! grep -q 'backend coll: [0-9]* passed, 0 failed' "$WORKDIR/node0.log"; then
	tail -n 30 "$WORKDIR"/node*.log
	for f in $(find "$WORKDIR"/tr* -name 'std*.log' 2>/dev/null); do echo "== $f"; tail -n 20 "$f"; done
	die "torchrun on 2 hosts x 2: rc=$rc"
fi
# the sums went through lanes of world 2 (one contribution per host), both
# hosts' ranks joined
for l in 0 1; do
	grep -q "job pg-[0-9a-f]*\.lane$l (id [0-9]*): admitted, world 2," "$BOX_LOG" &&
	grep -q "job pg-[0-9a-f]*\.lane$l: rank [01] joined (2 of 2)" "$BOX_LOG" ||
		die "no lane $l of world 2 with both hosts in the box's log"
done
log "lanes: $(grep -o 'job pg-[0-9a-f]*\.lane[0-9] (id [0-9]*): admitted, world 2' "$BOX_LOG" | tr '\n' ' ')"
# DDP with topk_hook through the host level: 4 ranks as 2 hosts of 2 on H0
# (pbox.Client(local_world=2)), local rank 0 selecting from its host's
# sum; host_topk_check.py replays the job and checks the model exactly
timeout -k 5 180 ip netns exec "$H0" env -u TORCHELASTIC_RUN_ID PBOX_JOB=hltopk \
	PBOX_CONTROL="$CONTROL" PBOX_LIB="$PBOX_LIB" PYTHONPATH="$PYTHONPATH" \
	"$PY" -m torch.distributed.run --nproc_per_node 4 --master_addr 127.0.0.1 \
	--master_port 29672 --redirects 1 --tee 1 --log_dir "$WORKDIR/trk" \
	tests/integration/host_topk_check.py > "$WORKDIR/hosttopk.log" 2>&1
rc=$?
grep -h "host topk:" "$WORKDIR/hosttopk.log" | sed 's/^\[[^]]*\]:*//' | sort -u >&2
if [ $rc -ne 0 ] || [ "$(grep -c 'host topk: rank [0-3]: [0-9]* passed, 0 failed' "$WORKDIR/hosttopk.log")" != 4 ]; then
	tail -40 "$WORKDIR/hosttopk.log"
	die "DDP topk_hook through the host level: rc=$rc"
fi
sleep 0.5
left=$(host_shm_left "$SHM_BEFORE")
[ -z "$left" ] || die "left in /dev/shm: $left"
box_stop || die "pboxd exited non-zero"
log "PASS test_host_local_torch"
