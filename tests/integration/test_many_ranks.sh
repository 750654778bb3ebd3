#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_many_ranks.sh - a job of 256 ranks (beyond the 64 of one bit each in
# a 64-bit word, issue 41) against the real pboxd on DPDK net_af_packet:
# tests/integration/many_ranks.c runs 256 clients on threads of one
# process in the workers' namespace (kernel UDP); every rank makes 5
# allreduces of 4,096 floats and checks every element of every sum; then
# 1,024 ranks as 128 hosts of 8 on the host level (2,048 control
# connections: the box's cap was 2,048 before 0.15.0), 3 calls. The box
# runs with no per-peer connection caps (all ranks share one address) and
# a 30 s heartbeat timeout: 1,024 ranks' 4,000 threads in one process on
# two CPUs starved a client's heartbeat past the default 6 s in one run of
# three.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
need_root "$0"
topo_up
build_prog many_ranks -lpthread
box_start af_packet --max-conns-per-peer 0 --conn-rate-per-peer 0 --heartbeat-timeout-ms 30000
ulimit -n 16384
in_wk timeout 120 "$WORKDIR/many_ranks" "$CONTROL" big ${MANY_WORLD:-256} ${MANY_CALLS:-5} 4096 > "$WORKDIR/many.log" 2>&1 ||
	die "256 ranks: $(tail -n 5 "$WORKDIR/many.log")"
log "$(cat "$WORKDIR/many.log")"
# 1,024 ranks as 128 hosts of 8 (issue 41's largest shape): every rank in
# the flat job of 1,024 and its lane job of 128, the box summing one
# contribution per host
if [ "${MANY_HOSTS:-128}" -gt 0 ]; then
	in_wk timeout 300 "$WORKDIR/many_ranks" "$CONTROL" huge $((${MANY_HOSTS:-128} * 8)) 3 4096 8 \
		> "$WORKDIR/many8.log" 2>&1 || die "${MANY_HOSTS:-128} hosts of 8: $(tail -n 5 "$WORKDIR/many8.log")"
	log "$(cat "$WORKDIR/many8.log")"
	[ -z "$(ls /dev/shm | grep '^pbox-h' || true)" ] || die "shared memory left: $(ls /dev/shm | grep '^pbox-h' | head -3)"
fi
ctl --json stats > "$WORKDIR/stats.json" && python3 - "$WORKDIR/stats.json" <<'PY' >&2
import json, sys
s = json.load(open(sys.argv[1]))
drops = {k: v for k, v in s["drops"].items() if v}
l = s["lcores"][0]
print(f"box: pushes {l['pushes']} completes {l['completes']} dup_open {l['dup_open']} "
      f"dup_done {l['dup_done']} retx {l['retx']} waits {l['waits']} nacks {l['nacks']} drops {drops}")
PY
box_stop || die "pboxd did not stop cleanly"
log "PASS test_many_ranks"
