#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# daso_compare.sh - DASO against plain DDP, both on pbox, where the link
# between hosts is the limit (issue 41 item 3; docs/performance.md "DASO
# where links are the limit"). Two "hosts" (network namespaces of
# tests/integration/lib.sh, WK_HOSTS=1) of --local ranks each, every
# host's data link shaped to --rate each way on the switch's side
# (bench/shape.sh: tbf down, ifb + tbf up), the box's link unshaped;
# pboxd on DPDK net_af_packet at MTU 9000. bench/daso/daso_train.py trains
# the same model from the same start with each --modes entry, --reps times
# (interleaved: ddp, daso, ddp, daso, ...), and this prints per run the
# held-out loss, the wall time of the steps and the bytes through the
# box's port (pboxctl stats: in + out), and the medians' ratios
# daso/ddp. The issue's goals: held-out loss within 5 % of DDP's, at
# least 3x fewer bytes through the box, a shorter wall time.
#
#   bench/daso/daso_compare.sh [--rate 1gbit] [--steps 150] [--reps 3]
#                              [--local 2] [--modes ddp,daso] [--out DIR]
#   (modes: ddp, daso, daso-stale: DASO with stale_steps=1)
#                              [-- daso_train.py options...]
#
# Needs root, torch (/usr/bin/python3 or PYTHON) and a build (make).
# Outputs in DIR (default build/daso-compare): runs.txt (one JSON line
# per run), logs/, table.txt.
set -u
cd "$(dirname "$0")/../.."
RATE=1gbit; STEPS=150; REPS=3; LOCAL=2; MODES=ddp,daso; OUT=
while [ $# -gt 0 ]; do
	case $1 in
	--rate) RATE=${2:?}; shift ;;
	--steps) STEPS=${2:?}; shift ;;
	--reps) REPS=${2:?}; shift ;;
	--local) LOCAL=${2:?}; shift ;;
	--modes) MODES=${2:?}; shift ;;
	--out) OUT=${2:?}; shift ;;
	--) shift; break ;;
	*) echo "daso_compare.sh: unknown option $1 (see the header)" >&2; exit 2 ;;
	esac
	shift
done
TRAIN_ARGS=("$@")
export WK_HOSTS=1
. tests/integration/lib.sh
. bench/shape.sh
need_root "$0"
need_torch
use_python_package
OUT=${OUT:-$BUILD/daso-compare}
MTU=9000
BPS=$(rate_bps "$RATE") || die "bad --rate $RATE (1gbit, 500mbit, ...)"
[[ $REPS =~ ^[1-9][0-9]*$ && $LOCAL =~ ^[1-8]$ && $STEPS =~ ^[0-9]+$ ]] ||
	die "bad --reps, --local (1-8) or --steps"
mkdir -p "$OUT/logs" && : > "$OUT/runs.txt" || die "cannot write $OUT"

topo_up
trap 'shape_down; topo_down' EXIT
BOX_MTU=$MTU box_start af_packet
NS_SW=$NS_WK
HOSTS=()
for h in 0 1; do
	new_host; HOSTS+=("$NEW_HOST")
	# new_host plugs eth0 then mgmt: host h's data port is hx$TAG.(2h)
	shape_link "hx$TAG.$((2 * h))" "ifbh$h$TAG" "$BPS"
done
log "daso_compare: 2 hosts x $LOCAL ranks, each host's link $RATE ($BPS bit/s) each way, box unshaped; $STEPS steps, $REPS reps of $MODES"
log "daso_compare: load at start: $(cut -d' ' -f1-3 /proc/loadavg)"

box_bytes() { # in + out bytes of the box's data port so far
	ctl --json stats | "$PY" -c 'import json,sys; s=json.load(sys.stdin); print(sum(p["ibytes"] + p["obytes"] for p in s["ports"]))'
}

port=29700
run() { # run MODE REP
	local mode=$1 rep=$2 pids=() rc=0 b0 b1 h lg
	b0=$(box_bytes) || die "pboxctl stats failed"
	port=$((port + 1))
	for h in 0 1; do
		lg=$OUT/logs/$mode.r$rep.h$h.log
		timeout -k 5 900 ip netns exec "${HOSTS[$h]}" env -u PBOX_JOB -u TORCHELASTIC_RUN_ID \
			PBOX_CONTROL="$CONTROL" PBOX_LIB="$PBOX_LIB" PYTHONPATH="$PYTHONPATH" \
			GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1 \
			"$PY" -m torch.distributed.run --nnodes 2 --node_rank $h --nproc_per_node "$LOCAL" \
			--master_addr 198.18.0.10 --master_port $port --redirects 1 --tee 1 \
			--log_dir "$OUT/logs/tr.$mode.r$rep.h$h" \
			bench/daso/daso_train.py --mode "$mode" --steps "$STEPS" \
			--name "daso-$rep-$TAG" "${TRAIN_ARGS[@]}" > "$lg" 2>&1 &
		pids+=($!); PIDS+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	[ $rc = 0 ] || { tail -n 20 "$OUT"/logs/$mode.r$rep.h*.log >&2; die "$mode rep $rep failed"; }
	b1=$(box_bytes)
	sed -n 's/^.*daso_train: //p' "$OUT/logs/$mode.r$rep.h0.log" | "$PY" -c '
import json, sys
r = json.loads(sys.stdin.read()); r["box_bytes"] = int(sys.argv[1]); r["rep"] = int(sys.argv[2])
print(json.dumps(r))' $((b1 - b0)) "$rep" >> "$OUT/runs.txt" || die "$mode rep $rep: no result line"
	log "daso_compare: $(tail -1 "$OUT/runs.txt")"
}

for ((rep = 0; rep < REPS; rep++)); do
	for mode in ${MODES//,/ }; do run "$mode" $rep; done
done
shape_stats > "$OUT/logs/shape-stats.txt"
"$PY" - "$OUT/runs.txt" <<'PY' | tee "$OUT/table.txt"
import json, statistics as st, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in runs:
    by.setdefault(r["mode"], []).append(r)
print("mode  runs  held-out loss (median)  train loss last 10  wall s (median)  box MB (median)  global averages")
med = {}
for m, rs in by.items():
    med[m] = {k: st.median(r[k] for r in rs) for k in ("held_out_loss", "train_loss_last10", "wall_s", "box_bytes")}
    syncs = ",".join(str(r.get("global_syncs", r["steps"])) for r in rs)
    print(f"{m:10} {len(rs):4}  {med[m]['held_out_loss']:22.5f}  {med[m]['train_loss_last10']:18.5f}  "
          f"{med[m]['wall_s']:15.2f}  {med[m]['box_bytes'] / 1e6:15.1f}  {syncs}")
for m in ("daso", "daso-stale"):
    if "ddp" in med and m in med:
        d, o = med[m], med["ddp"]
        print(f"{m}/ddp: held-out loss {d['held_out_loss'] / o['held_out_loss']:.3f} (goal <= 1.05), "
              f"box bytes 1/{o['box_bytes'] / max(d['box_bytes'], 1):.2f} (goal >= 3x fewer), "
              f"wall time {d['wall_s'] / o['wall_s']:.3f} (goal < 1)")
PY
box_stop || die "pboxd did not stop cleanly"
