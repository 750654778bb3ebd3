#!/usr/bin/env bash
# test_operator.sh - what an operator sees and does: pboxd started from an
# INI --config file, ARP + ICMP echo answered by the box, pboxctl status /
# jobs / job show / stats (tables and --json), and `pboxctl job abort`
# ending a running job: every worker fails with the named reason within a
# bounded time, the box keeps serving, and the name can be reused.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
topo_up
cat > "$WORKDIR/pboxd.conf" <<CONF
[pboxd]
# limits read from the file, checked below through pboxctl status
max-world = 8
max-jobs = 4
chunk-bytes = 16K
CONF
box_start af_packet --config "$WORKDIR/pboxd.conf"

in_wk ping -c 3 -i 0.2 -W 1 $BOX_IP > "$WORKDIR/ping.log" || { cat "$WORKDIR/ping.log"; die "box does not answer ping (ARP/ICMP)"; }

ctl status > "$WORKDIR/status.txt" || die "pboxctl status failed"
cat "$WORKDIR/status.txt"
ctl --json status | python3 -c '
import json, sys
s = json.load(sys.stdin)
l = s["limits"]
assert l["max_world"] == 8 and l["max_jobs"] == 4 and l["chunk_bytes"] == 16384, l
assert s["ports"][0]["ip"].startswith("198.18.0.1"), s["ports"]
' || die "status does not show the config file's limits"

# a long-running job to look at and then abort
workers 4 longjob "$WORKDIR/long" --minbytes 1M --maxbytes 1M --iters 100000 --check
for _ in $(seq 100); do ctl --json jobs | grep -q '"active"' && break; sleep 0.1; done
ctl jobs | tee "$WORKDIR/jobs.txt" | grep -q longjob || die "pboxctl jobs does not list the job"
ctl job show longjob > "$WORKDIR/show.txt" || die "pboxctl job show failed"
cat "$WORKDIR/show.txt"
ctl job show nosuchjob > "$WORKDIR/nojob.txt" 2>&1 && die "job show of a missing job succeeded"
grep -qi "nosuchjob" "$WORKDIR/nojob.txt" || die "missing-job error does not name the job: $(cat "$WORKDIR/nojob.txt")"

start=$SECONDS
ctl job abort longjob --reason "operator test" || die "pboxctl job abort failed"
wait_workers 15 && die "workers succeeded after their job was aborted"
took=$((SECONDS - start))
for r in 0 1 2 3; do
	grep -q "aborted: operator test" "$WORKDIR/long.$r.log" || { cat "$WORKDIR/long.$r.log"; die "rank $r did not report the abort reason"; }
done
echo "abort reached all 4 workers within ${took}s"
[ $took -le 10 ] || die "abort took ${took}s"

# the box keeps serving and the name is free again
for _ in $(seq 50); do ctl --json jobs | grep -q longjob || break; sleep 0.1; done
workers 4 longjob "$WORKDIR/again" --minbytes 4 --maxbytes 256K --iters 2 --check
wait_workers 60 || { tail -3 "$WORKDIR"/again.*.log; die "job name could not be reused after abort"; }
ctl stats | tee "$WORKDIR/stats.txt" | grep -q LCORE || die "pboxctl stats failed"
ctl --json stats | python3 -c '
import json, sys
s = json.load(sys.stdin)
assert s["lcores"][0]["icmp"] >= 3 and s["lcores"][0]["arp"] >= 1, s["lcores"][0]
assert s["lcores"][0]["errors_sent"] >= 0
' || die "ARP/ICMP counters wrong"
box_stop || die "pboxd exited non-zero"
echo "operator: ok"
