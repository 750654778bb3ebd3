#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_isolation.sh - two jobs side by side and an attacker on the workers'
# host that captures their packets and sends replays (from its own port),
# cross-job copies and forged tokens to the box, and RESULTs of 666.0 with
# the sniffed token to the workers: no result of either job changes (every
# sum exact), the box counts the attack under bad_source / bad_token.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
topo_up
box_start af_packet
# the attacker listens first, so it cannot miss a job that ends early
in_wk python3 "$(dirname "$0")/attacker.py" "$IF_WD" $BOX_IP 4 > "$WORKDIR/attack.json" 2>&1 &
ATT=$!; PIDS+=($ATT)
sleep 1
workers 2 jobA "$WORKDIR/a" --minbytes 64K --maxbytes 1M --iters 40 --check
A=("${WK_PIDS[@]}")
workers 2 jobB "$WORKDIR/b" --minbytes 64K --maxbytes 1M --iters 40 --check
B=("${WK_PIDS[@]}")
WK_PIDS=("${A[@]}" "${B[@]}")
wait_workers 180 || { tail -n 3 "$WORKDIR"/a.*.log "$WORKDIR"/b.*.log; die "a job's sums changed or failed under attack"; }
wait $ATT || { cat "$WORKDIR/attack.json"; die "attacker failed"; }
cat "$WORKDIR/attack.json"
# Every attack packet that reached the box is dropped under a reason:
# bad_source / bad_token while its job lives, no_job after the job ended
# (the attacker may outlive the jobs); some may be lost before the box
# under this load (the port's imissed). With a worker per namespace
# (lib.sh WK_HOSTS: the xdp pass) the attacker's datagrams cross the
# workers' bridge, and a CI run counted 46% of them at the box with
# imissed 0 (where the rest went is not found yet): there a third must
# arrive.
ctl --json stats | python3 -c '
import json, sys
s = json.load(sys.stdin)
d = s["drops"]
a = json.load(open(sys.argv[1]))["sent"]
assert a["forged_result"] > 100, a   # (sent to the workers: the box never sees them)
a = {k: v for k, v in a.items() if k != "forged_result"}
share = 2 if sys.argv[2] == "0" else 3
print({k: v for k, v in d.items() if v}, "imissed", s["ports"][0]["imissed"])
assert a["replay"] > 100, a
assert d["bad_source"] > 0 and d["bad_token"] > 0, d
counted = d["bad_source"] + d["bad_token"] + d["no_job"]
print("attack packets counted at the box: %d of %d sent" % (counted, sum(a.values())))
assert counted >= sum(a.values()) // share, (counted, a)
' "$WORKDIR/attack.json" "$WK_HOSTS" || die "attack not counted"
box_stop || die "pboxd exited non-zero"
echo "isolation: both jobs exact under attack"
