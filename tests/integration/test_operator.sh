#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_operator.sh - what an operator sees and does: pboxd started from an
# INI --config file, ARP + ICMP echo answered by the box, pboxctl status /
# jobs / job show / stats (tables and --json) with the configured limits,
# and `pboxctl job abort` ending a running job: over TCP only with the
# operator secret (refused without it or with a wrong one, the job going
# on), every worker fails with the named reason within a bounded time, the
# box keeps serving, the name can be reused, and the local socket aborts
# without a secret. `job save` over the socket takes a relative DIR.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
topo_up
head -c 24 /dev/urandom | base64 > "$WORKDIR/secret"
chmod 600 "$WORKDIR/secret"
echo "not-the-secret-at-all" > "$WORKDIR/wrong"; chmod 600 "$WORKDIR/wrong"
cat > "$WORKDIR/pboxd.conf" <<CONF
[pboxd]
# limits read from the file, checked below through pboxctl status
max-world = 8
max-jobs = 4
max-keys = 100
max-job-bytes = 512M
chunk-bytes = 16K
operator-secret-file = $WORKDIR/secret
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
assert l["max_keys"] == 100 and l["max_job_bytes"] == 512 << 20, l
assert s["ports"][0]["ip"].startswith("198.18.0.1"), s["ports"]
c = {r["option"]: r["value"] for r in s["config"]}
assert c["max-world"] == "8" and c["chunk-bytes"] == "16K" and c["max-job-bytes"] == "512M", c
assert c["operator-secret-file"] == "set", c
' || die "status does not show the config file's limits"
for kv in "max-jobs 4" "max-world 8" "max-keys 100" "max-job-bytes 512M" "chunk-bytes 16K" "operator-secret-file set"; do
	grep -qE "^${kv% *} +${kv#* } " "$WORKDIR/status.txt" ||
		die "the status table does not show ${kv% *} ${kv#* } from the config file"
done
grep -qF "$(cat "$WORKDIR/secret")" "$BOX_LOG" "$WORKDIR/status.txt" && die "the operator secret leaked into the log or status"

# a long-running job to look at and then abort
workers 4 longjob "$WORKDIR/long" --minbytes 1M --maxbytes 1M --iters 100000 --check
for _ in $(seq 100); do ctl --json jobs | grep -q '"active"' && break; sleep 0.1; done
ctl jobs | tee "$WORKDIR/jobs.txt" | grep -q longjob || die "pboxctl jobs does not list the job"
ctl job show longjob > "$WORKDIR/show.txt" || die "pboxctl job show failed"
cat "$WORKDIR/show.txt"
ctl job show nosuchjob > "$WORKDIR/nojob.txt" 2>&1 && die "job show of a missing job succeeded"
grep -qi "nosuchjob" "$WORKDIR/nojob.txt" || die "missing-job error does not name the job: $(cat "$WORKDIR/nojob.txt")"

# over the Unix socket a relative DIR is the caller's, made absolute (the
# job has no PS key: the box gets as far as saying so)
mkdir -p "$WORKDIR/ckrel"
pboxctl_bin=$(realpath "$BUILD/pboxctl")
(cd "$WORKDIR" && "$pboxctl_bin" --socket "$PBOX_SOCKET" job save longjob ckrel) > "$WORKDIR/save.txt" 2>&1 &&
	die "job save of a job without PS keys succeeded"
grep -q "has no PS key" "$WORKDIR/save.txt" || die "a relative DIR was not made absolute: $(cat "$WORKDIR/save.txt")"

# remote operators (TCP) need the secret; refused aborts leave the job running
rctl() { in_wk "$BUILD/pboxctl" --control "$CONTROL" "$@"; }
rctl job abort longjob > "$WORKDIR/nosecret.txt" 2>&1 && die "remote abort without the secret succeeded"
grep -q "needs the operator secret" "$WORKDIR/nosecret.txt" || die "no-secret refusal unclear: $(cat "$WORKDIR/nosecret.txt")"
rctl --secret-file "$WORKDIR/wrong" job abort longjob > "$WORKDIR/wrongsecret.txt" 2>&1 && die "remote abort with a wrong secret succeeded"
grep -q "wrong operator secret" "$WORKDIR/wrongsecret.txt" || die "wrong-secret refusal unclear: $(cat "$WORKDIR/wrongsecret.txt")"
grep -q "wrong operator secret" "$BOX_LOG" || die "the box did not log the refused abort"
ctl --json jobs | grep -q '"active"' || die "a refused abort stopped the job"
for p in "${WK_PIDS[@]}"; do kill -0 "$p" 2>/dev/null || die "a worker ended after a refused abort"; done
echo "remote abort refused without / with a wrong secret; job still running"

start=$SECONDS
rctl --secret-file "$WORKDIR/secret" job abort longjob --reason "operator test" || die "pboxctl job abort with the secret failed"
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
# the local socket (file permissions guard it) aborts without a secret
workers 2 localjob "$WORKDIR/local" --minbytes 64K --maxbytes 64K --iters 100000
for _ in $(seq 100); do ctl --json jobs | grep -q '"active"' && break; sleep 0.1; done
ctl job abort --reason "local operator" localjob || die "local abort without a secret failed"
wait_workers 15 && die "workers succeeded after a local abort"
grep -q "aborted: local operator" "$WORKDIR/local.0.log" || die "rank 0 did not report the local abort"
ctl stats | tee "$WORKDIR/stats.txt" | grep -q LCORE || die "pboxctl stats failed"
ctl --json stats | python3 -c '
import json, sys
s = json.load(sys.stdin)
assert s["lcores"][0]["icmp"] >= 3 and s["lcores"][0]["arp"] >= 1, s["lcores"][0]
assert s["lcores"][0]["errors_sent"] >= 0
' || die "ARP/ICMP counters wrong"
# pboxctl's conventions: options anywhere, -o, --version, exit codes
# 0 done, 1 failed, 2 usage, 3 unreachable
ctl stats --json | python3 -c 'import json, sys; json.load(sys.stdin)' ||
	die "pboxctl stats --json (the option after the command) failed"
ctl -o json jobs | python3 -c 'import json, sys; json.load(sys.stdin)' || die "pboxctl -o json failed"
"$BUILD/pboxctl" --version | grep -q "^pboxctl [0-9]" || die "pboxctl --version"
expect_rc() { local want=$1; shift; "$@" > "$WORKDIR/rc.txt" 2>&1; local got=$?
	[ "$got" = "$want" ] || die "'$*' exited $got, not $want: $(cat "$WORKDIR/rc.txt")"; }
expect_rc 1 ctl job show nosuchjob
expect_rc 2 ctl frobnicate
expect_rc 2 ctl status --reason x
expect_rc 2 ctl job create x
expect_rc 3 "$BUILD/pboxctl" --socket "$WORKDIR/no.sock" status
box_stop || die "pboxd exited non-zero"
echo "operator: ok"
