#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_straggler.sh - a rank stopped for 2 s (SIGSTOP, then SIGCONT) in the
# middle of a run costs the job time, not an error: every call stays
# exact, the box's stall watch (5 s) does not fire, the ranks waiting for
# it do not storm the box with retransmissions (their WAITs back their
# queries off with the straggler's delay: docs/protocol.md "Recovery"; the
# box's WAIT count over the stop is what they sent for rounds it held),
# and `pboxctl job show` names the straggler by its lateness.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
topo_up
box_start af_packet
STOP_S=2
ITERS=150
waits() { ctl --json stats | python3 -c 'import json, sys; print(sum(l["waits"] for l in json.load(sys.stdin)["lcores"]))'; }
workers 4 strag "$WORKDIR/s" --minbytes 4M --maxbytes 4M --iters $ITERS --check
sleep 1.5
for p in "${WK_PIDS[@]}"; do kill -0 "$p" 2>/dev/null || die "a worker ended before the stop"; done
w0=$(waits)
kill -STOP "${WK_PIDS[3]}" || die "cannot stop rank 3"
sleep $STOP_S
w1=$(waits)
kill -CONT "${WK_PIDS[3]}"
sleep 0.5
show=$(ctl job show strag) || die "pboxctl job show failed while the job runs"
echo "$show" | sed -n '1,8p'
late3=$(ctl --json job show strag | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["weight"] == 1, r
l = {k["rank"]: k["lateness"] for k in r["ranks"]}
print("%.0f" % l[3]["max_us"])
for k, v in l.items():
    assert v["contributions"] > 0, (k, v)
') || die "job show has no lateness per rank"
[ "$late3" -ge $((STOP_S * 1000000 * 3 / 4)) ] ||
	die "rank 3's recent maximum lateness is ${late3} us after a ${STOP_S} s stop"
echo "$show" | grep -q "LATE_MAX" || die "pboxctl job show prints no lateness column"
wait_workers 240 || { tail -n 5 "$WORKDIR"/s.*.log; die "a rank failed after the straggler came back"; }
grep -E "^# (recovery|packets)" "$WORKDIR/s.0.log" | sed "s/^/rank 0: /"
# 3 ranks waiting 2 s with some hundreds of segments in flight each: at one
# query per segment per 5 ms timeout that would be 10^5 and more; paced by
# the WAITs it is about a dozen per segment
echo "queries the box answered with WAIT during the ${STOP_S} s stop: $((w1 - w0))"
[ $((w1 - w0)) -lt 20000 ] || die "the waiting ranks sent $((w1 - w0)) queries in ${STOP_S} s"
ctl --json stats | python3 -c '
import json, sys
l = json.load(sys.stdin)["lcores"][0]
print("box: waits", l["waits"], "nacks", l["nacks"], "nacks_limited", l["nacks_limited"], "marks", l["marks"])
assert l["waits"] > 0, l
' || die "the box sent no WAIT to the ranks waiting for the straggler"
grep -q "stall" "$BOX_LOG" && die "the stall watch fired: $(grep stall "$BOX_LOG")"
box_stop || die "pboxd exited non-zero"
echo "straggler: rank 3 stopped ${STOP_S} s, all calls exact, max lateness ${late3} us"
