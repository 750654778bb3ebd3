#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_control_limits.sh - what one unauthenticated peer may hold of the box
# (docs/reliability.md "Resource budgets"), against a real pboxd:
#  - slot squatting: one TCP connection joins 16 jobs of world 1; it gets
#    at most --max-jobs-per-peer of them, and a 2-rank job from other
#    addresses still runs exactly while it holds them;
#  - an operator's job_create still succeeds meanwhile;
#  - job memory: five declare-then-release cycles of a 200 M-float key
#    leave pboxd's RSS near where it started, and the control thread
#    answers another connection within 200 ms throughout;
#  - log injection: an abort reason with a newline and terminal escapes
#    stays one escaped line;
#  - metrics flood: one address opening connections to --metrics as fast
#    as it can does not stop another address's scrapes.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
topo_up
SQUAT=198.18.1.3
MFLOOD=198.18.1.4
for a in $SQUAT $MFLOOD; do
	ip -n "$NS_WK" addr add $a/24 dev "$IF_WM" || die "cannot add the attackers' addresses"
done
atk() {   # atk SRC MODE ARGS...
	local src=$1; shift
	in_wk python3 "$(dirname "$0")/limits_attacker.py" $src "$CONTROL" "$@"
}
rss_mb() { awk '/^VmRSS/ {print int($2 / 1024)}' /proc/$BOX_PID/status; }
fails=0
fail() { log "FAIL: $*"; fails=$((fails + 1)); }

box_start af_packet --max-job-bytes 2G --metrics 0.0.0.0:9470

# -- job memory: five declare-then-release cycles of an 800 MB key
rss0=$(rss_mb)
atk 198.18.1.2 cycles 200000000 5 $((1900 << 20)) > "$WORKDIR/cycles" 2>&1 ||
	fail "the cycles did not run: $(cat "$WORKDIR/cycles")"
rss1=$(rss_mb)
echo "cycles: $(cat "$WORKDIR/cycles"); pboxd RSS ${rss0} MB before, ${rss1} MB after"
python3 - "$WORKDIR/cycles" <<'PY' || fail "the control thread stalled on a release"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["cycles"] == 5 and not d["errors"], d
assert d["worst_stall_ms"] < 200, d
PY
[ $((rss1 - rss0)) -lt 300 ] || fail "RSS grew by $((rss1 - rss0)) MB over five cycles of one 800 MB key"

# -- slot squatting
atk $SQUAT squat 16 40 > "$WORKDIR/squat" 2>&1 & PIDS+=($!)
for _ in $(seq 100); do grep -q '"mode"' "$WORKDIR/squat" 2>/dev/null && break; sleep 0.2; done
echo "squat: $(cat "$WORKDIR/squat")"
held=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["joined"])' "$WORKDIR/squat")
[ "$held" -le 4 ] || fail "one connection holds $held jobs (--max-jobs-per-peer 4)"
workers 2 legit "$WORKDIR/legit" --minbytes 64K --maxbytes 64K --iters 20 --check
wait_workers 60 && echo "legit 2-rank job while squatted: ok" ||
	{ tail -n 3 "$WORKDIR"/legit.*.log; fail "a legitimate job could not run while one peer squatted"; }
# an operator still creates jobs (the reserve itself: test_jobs)
ctl job create opjob --world 1 > "$WORKDIR/opjob" 2>&1 ||
	fail "an operator's job_create was refused: $(cat "$WORKDIR/opjob")"
ctl job abort opjob --reason "done" > /dev/null 2>&1

# -- log injection (over the Unix socket: an operator's reason is outside text too)
python3 - "$PBOX_SOCKET" <<'PY' || fail "could not send the forged abort"
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
def call(m, p):
    s.sendall((json.dumps({"jsonrpc": "2.0", "id": 1, "method": m, "params": p}) + "\n").encode())
    return json.loads(s.makefile().readline())
call("job_create", {"job": "inject", "world": 1})
print(call("job_abort", {"job": "inject", "reason": "x\npboxd: stopped\x1b[2K\r"}))
PY
sleep 0.5
if grep -q '^pboxd: stopped' "$BOX_LOG"; then fail "an abort reason forged a 'pboxd: stopped' line"; fi
grep -q 'aborted: x\\x0apboxd: stopped\\x1b\[2K\\x0d' "$BOX_LOG" ||
	fail "the forged reason is not logged escaped: $(grep -a 'inject' "$BOX_LOG" | tail -n 2)"
if grep -aq $'\x1b' "$BOX_LOG"; then fail "a terminal escape reached the log"; fi

# -- metrics flood from one address, scrapes from another
MET=$BOX_MGMT:9470
in_wk python3 "$(dirname "$0")/limits_attacker.py" 198.18.1.2 "$MET" scrape 20 10 > "$WORKDIR/scrape0" 2>&1
echo "scrapes, no flood: $(cat "$WORKDIR/scrape0")"
for i in 1; do
	in_wk python3 "$(dirname "$0")/limits_attacker.py" $MFLOOD "$MET" mflood 22 > "$WORKDIR/mflood.$i" 2>&1 &
	PIDS+=($!)
done
sleep 2
in_wk python3 "$(dirname "$0")/limits_attacker.py" 198.18.1.2 "$MET" scrape 20 18 > "$WORKDIR/scrape1" 2>&1
wait "${PIDS[@]: -1}" 2>/dev/null
echo "scrapes under a flood: $(cat "$WORKDIR/scrape1"); flood: $(cat "$WORKDIR"/mflood.* | tr '\n' ' ')"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d["failed"] > 0 or d["ok"] < 15)' "$WORKDIR/scrape1" ||
	fail "scrapes from another address failed under a flood"

box_stop || fail "pboxd exited non-zero"
[ $fails = 0 ] || die "$fails checks failed"
echo "PASS test_control_limits"
