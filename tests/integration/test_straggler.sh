#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_straggler.sh - a rank stopped for 2 s (SIGSTOP, then SIGCONT) in the
# middle of a run costs the job time, not an error: every call stays
# exact, the box's stall watch (5 s) does not fire, the ranks waiting for
# it do not storm the box with retransmissions (their WAITs back their
# queries off with the straggler's delay: docs/protocol.md "Recovery"),
# and `pboxctl job show` names the straggler by its lateness.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
topo_up
box_start af_packet
STOP_S=2
ITERS=150
retx_of() { sed -n 's/^# packets.* retransmits \([0-9]*\).*/\1/p' "$1"; }
# the same run without a stop: its retransmissions are the baseline
workers 4 base "$WORKDIR/b" --minbytes 4M --maxbytes 4M --iters $ITERS --check
wait_workers 240 || die "the run without a straggler failed"
workers 4 strag "$WORKDIR/s" --minbytes 4M --maxbytes 4M --iters $ITERS --check
sleep 1.5
for p in "${WK_PIDS[@]}"; do kill -0 "$p" 2>/dev/null || die "a worker ended before the stop"; done
kill -STOP "${WK_PIDS[3]}" || die "cannot stop rank 3"
sleep $STOP_S
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
for r in 0; do   # pbox-perf's rank 0 prints the counters
	grep -E "^# (recovery|packets)" "$WORKDIR/s.$r.log" | sed "s/^/rank $r: /"
	retx=$(retx_of "$WORKDIR/s.$r.log"); base=$(retx_of "$WORKDIR/b.$r.log")
	# 2 s of waiting with up to a few hundred segments in flight: a storm
	# would be tens of thousands (one per slot per 5 ms timeout); paced by
	# WAITs it is about a dozen per slot
	[ -n "$retx" ] && [ -n "$base" ] && [ $((retx - base)) -lt 4000 ] ||
		die "rank $r sent ${retx:-?} retransmissions around a ${STOP_S} s straggler, ${base:-?} without"
	echo "rank $r: $retx retransmissions with the straggler, $base without"
done
ctl --json stats | python3 -c '
import json, sys
l = json.load(sys.stdin)["lcores"][0]
print("box: waits", l["waits"], "nacks", l["nacks"], "nacks_limited", l["nacks_limited"], "marks", l["marks"])
assert l["waits"] > 0, l
' || die "the box sent no WAIT to the ranks waiting for the straggler"
grep -q "stall" "$BOX_LOG" && die "the stall watch fired: $(grep stall "$BOX_LOG")"
box_stop || die "pboxd exited non-zero"
echo "straggler: rank 3 stopped ${STOP_S} s, all calls exact, max lateness ${late3} us"
