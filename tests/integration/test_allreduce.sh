#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_allreduce.sh - 4 worker processes allreduce through the real pboxd on
# DPDK net_af_packet, sizes from 1 element to 64 MiB, several keys in flight,
# f32/f16/bf16, and with UDP GSO/GRO (--udp-offload); every sum must be
# exact (pbox-perf --check), results must carry correct UDP checksums and
# the box must count no drops for well-formed traffic.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
topo_up
box_start af_packet

# f32 over the whole size range, 4 keys in flight at once; meanwhile the
# first 2000 results to reach the workers' veth must carry correct,
# non-zero UDP checksums (pboxd --udp-checksum on, the default)
in_wk python3 "$(dirname "$0")/udp_csum_check.py" "$IF_WD" "$BOX_IP" 2000 60 > "$WORKDIR/csum.txt" 2>&1 &
CSUM_PID=$!; PIDS+=($CSUM_PID)
sleep 0.5
workers 4 exact "$WORKDIR/f32" --minbytes 4 --maxbytes 64M --iters 2 --warmup 1 --keys 4 --check
wait_workers 240 || { tail -n 5 "$WORKDIR"/f32.*.log; die "f32 workers failed"; }
cat "$WORKDIR/f32.0.log"
wait $CSUM_PID || { cat "$WORKDIR/csum.txt"; die "results without a correct UDP checksum"; }
cat "$WORKDIR/csum.txt"

# half-width dtypes, one element to 1 MiB
for dt in f16 bf16; do
	workers 4 "exact-$dt" "$WORKDIR/$dt" --minbytes 2 --maxbytes 1M --iters 3 --dtype $dt --keys 2 --check
	wait_workers 120 || { tail -5 "$WORKDIR/$dt".*.log; die "$dt workers failed"; }
	tail -3 "$WORKDIR/$dt.0.log"
done

# UDP GSO sends (the udp transport's offload): the workers' veth end cuts
# them (gso_max_segs 1) before the box's net_af_packet sees them, as a NIC
# would.
if [ "$PBOX_TRANSPORT" = udp ]; then
	ip -n "$NS_WK" link set dev "$IF_WD" gso_max_segs 1 || die "cannot set gso_max_segs"
	workers 4 exact-gso "$WORKDIR/gso" --minbytes 4 --maxbytes 16M --stepfactor 8 --iters 2 --keys 2 --check --udp-offload
	wait_workers 120 || { tail -n 5 "$WORKDIR"/gso.*.log; die "workers with --udp-offload failed"; }
	tail -n 3 "$WORKDIR/gso.0.log"
	grep -q "udp offload: [1-9][0-9]* GSO sends" "$WORKDIR/gso.0.log" || die "--udp-offload made no GSO send"
fi

ctl stats > "$WORKDIR/stats.txt" || die "pboxctl stats failed"
cat "$WORKDIR/stats.txt"
ctl --json stats > "$WORKDIR/stats.json" || die "pboxctl --json stats failed"
python3 - "$WORKDIR/stats.json" <<'PY' || die "unexpected drops"
import json, sys
s = json.load(open(sys.argv[1]))
drops = {k: v for k, v in s["drops"].items() if v}
allowed = {"not_ip", "not_mine", "not_udp"}  # kernel chatter on the veth (IPv6, IGMP)
bad = {k: v for k, v in drops.items() if k not in allowed}
print("drops:", drops)
assert not bad, f"well-formed traffic dropped: {bad}"
completes = sum(l["completes"] for l in s["lcores"])
assert completes > 0, "no segment completed"
# af_packet: every contribution stayed in its rx mbuf (no copy in)
held = sum(l["held"] for l in s["lcores"]); pushes = sum(l["pushes"] for l in s["lcores"])
assert held == pushes, (held, pushes)
print("completes:", completes)
PY
box_stop || die "pboxd exited non-zero"
echo "allreduce: exact"
