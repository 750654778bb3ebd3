#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_control_abuse.sh - unauthenticated clients on the TCP control port
# (their own addresses, 198.18.1.3-6) attack while a legitimate 4-rank job runs:
# reply amplification (16 connections pipelining 400 job_status requests
# each on a 4096-key job, never reading), 2100 idle connections, a
# connect/join/close flood, a half-sent request, and a hijack (declare a
# victim rank's key, leave for it, create and abort jobs). The job must sum
# exactly within 3x its unattacked time, pboxd's RSS stay under 512 MB, the
# Unix socket stay usable, every attack fail with a named error or a
# refusal, the log stay bounded, and a clean run drop nothing. Then, with
# no per-peer cap, 2100 idle connections fill the TCP slots but not the
# Unix socket's, and the idle timeout frees them for workers. Last, a rank
# that starts 7 s after the others still joins its job.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
topo_up
ATK=198.18.1.3     # amplification and hijack
ATK_IDLE=198.18.1.4
ATK_FLOOD=198.18.1.5
ATK_SLOW=198.18.1.6
for a in $ATK $ATK_IDLE $ATK_FLOOD $ATK_SLOW; do
	ip -n "$NS_WK" addr add $a/24 dev "$IF_WM" || die "cannot add the attackers' addresses"
done
# attacker [SRC] MODE ARGS...: rpc_attacker.py from SRC (default $ATK).
# Attackers sit on other hosts in the threat model; here they share the
# workers' two CPUs, so they run at the lowest priority: what is measured
# is the box's defence, not the attackers' CPU use on this machine.
attacker() {
	local src=$ATK
	case $1 in 198.*) src=$1; shift ;; esac
	in_wk nice -n 19 python3 "$(dirname "$0")/rpc_attacker.py" $src "$CONTROL" "$@"
}
now() { date +%s.%N; }
calc() { awk "BEGIN { print ($*) }"; }   # calc EXPR: a number, or 1/0 for a comparison
rss_kb() { awk '/^VmRSS/ {print $2}' /proc/$BOX_PID/status; }
JOBARGS=(--minbytes 1M --maxbytes 16M --stepfactor 4 --iters 4 --keys 2 --check)

box_start af_packet

# -- unattacked: the reference time
t0=$(now)
workers 4 base "$WORKDIR/base" "${JOBARGS[@]}"
wait_workers 120 || { tail -n 5 "$WORKDIR"/base.*.log; die "unattacked job failed"; }
base=$(calc "$(now) - $t0")
echo "unattacked 4-rank job: ${base} s"

# -- the attacks, all at once, bounded in time
attacker bigjob big 4096 40 > "$WORKDIR/atk.big" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do grep -q '"keys": 4096' "$WORKDIR/atk.big" 2>/dev/null && break; sleep 0.2; done
grep -q '"keys": 4096' "$WORKDIR/atk.big" || die "the attacker could not declare its 4096 keys: $(cat "$WORKDIR/atk.big")"
log_before=$(wc -l < "$BOX_LOG")
attacker amplify big 16 400 25 > "$WORKDIR/atk.amp" 2>&1 & PIDS+=($!)
attacker $ATK_IDLE idle 2100 25 > "$WORKDIR/atk.idle" 2>&1 & PIDS+=($!)
attacker $ATK_FLOOD flood 20 > "$WORKDIR/atk.flood" 2>&1 & PIDS+=($!)
attacker $ATK_SLOW slow 15 > "$WORKDIR/atk.slow" 2>&1 & PIDS+=($!)
sleep 3
maxrss=$(rss_kb)
t0=$(now)
workers 4 attacked "$WORKDIR/att" "${JOBARGS[@]}"
WK=("${WK_PIDS[@]}")
unix_ok=0
while :; do
	r=$(rss_kb); [ "${r:-0}" -gt "$maxrss" ] && maxrss=$r
	if [ $unix_ok = 0 ]; then
		ts=$(now)
		timeout 5 "$BUILD/pboxctl" --socket "$PBOX_SOCKET" --timeout 5000 status > "$WORKDIR/unix.txt" 2>&1 &&
			unix_ok=$(calc "$(now) - $ts")
	fi
	alive=0; for p in "${WK[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
	[ $alive = 0 ] && break
	[ "$(calc "$(now) - $t0 > 120")" = 1 ] && break
	sleep 0.5
done
WK_PIDS=("${WK[@]}")
wait_workers 5 || { tail -n 5 "$WORKDIR"/att.*.log; die "the attacked job failed"; }
attacked=$(calc "$(now) - $t0")
echo "attacked 4-rank job: ${attacked} s (unattacked ${base} s); pboxd RSS at most $((maxrss / 1024)) MB;" \
	"pboxctl status over the Unix socket answered in ${unix_ok} s"
[ "$(calc "$attacked <= 3 * $base")" = 1 ] || die "attacked job took ${attacked} s, more than 3x ${base} s"
[ "$maxrss" -lt $((512 * 1024)) ] || die "pboxd's RSS reached $((maxrss / 1024)) MB"
[ "$unix_ok" != 0 ] || die "pboxctl over the Unix socket failed during the attack: $(cat "$WORKDIR/unix.txt")"
for p in "${PIDS[@]}"; do
	case " ${WK[*]} " in *" $p "*) continue ;; esac
	[ "$p" = "$BOX_PID" ] || wait "$p" 2>/dev/null
done
for f in amp idle flood slow; do echo "attack $f: $(cat "$WORKDIR/atk.$f")"; done
# (the box may get to some refusals only after the attacker stopped
# counting them as such, busy with the other attacks: those show as
# closed_by_box, since no idle timeout (60 s) falls in the attack's 25 s)
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
held = d["opened"] - d["closed_by_box"]
assert held == 64 and d["refused"] + d["closed_by_box"] == 2100 - 64, d
' "$WORKDIR/atk.idle" || die "the per-peer cap did not hold the attacker to 64 connections"
grep -q '"answer": "request line not complete within 10000 ms' "$WORKDIR/atk.slow" ||
	die "a half-sent request was not closed with a named error"
log_lines=$(( $(wc -l < "$BOX_LOG") - log_before ))
echo "pboxd wrote $log_lines log lines during the attack"
[ $log_lines -lt 300 ] || { tail -n 20 "$BOX_LOG"; die "the flood wrote $log_lines log lines"; }
grep -q "log lines from $ATK_FLOOD suppressed" "$BOX_LOG" || die "no report of suppressed log lines"

# -- a hijack of a running job fails by name; the job, a clean run, drops nothing
ctl --json stats > "$WORKDIR/s0.json"
workers 4 victim "$WORKDIR/victim" --minbytes 4M --maxbytes 4M --iters 200 --keys 2 --check
for _ in $(seq 100); do
	ctl --json job show victim 2>/dev/null | python3 -c 'import json, sys; sys.exit(json.load(sys.stdin)["state"] != "active")' 2>/dev/null && break
	sleep 0.1
done
# (not niced: one short exchange, which must happen while the job runs)
in_wk python3 "$(dirname "$0")/rpc_attacker.py" $ATK "$CONTROL" hijack victim > "$WORKDIR/atk.hijack" 2>&1 ||
	die "hijack attempt failed to run: $(cat "$WORKDIR/atk.hijack")"
echo "attack hijack: $(cat "$WORKDIR/atk.hijack")"
grep -q '"declare": "job victim key 0: rank 0 belongs to another connection' "$WORKDIR/atk.hijack" ||
	die "hijacking key_declare was not refused by name"
grep -q '"leave": "job victim: rank 0 belongs to another connection' "$WORKDIR/atk.hijack" ||
	die "hijacking job_leave was not refused by name"
grep -q '"create": "job_create over TCP is refused' "$WORKDIR/atk.hijack" || die "remote job_create was not refused"
grep -q '"abort": "job_abort over TCP is refused' "$WORKDIR/atk.hijack" || die "remote job_abort was not refused"
wait_workers 120 || { tail -n 5 "$WORKDIR"/victim.*.log; die "the job a client tried to hijack failed"; }
ctl --json stats > "$WORKDIR/s1.json"
python3 - "$WORKDIR/s0.json" "$WORKDIR/s1.json" <<'PY' || die "a clean run dropped PUSHes"
import json, sys
b, a = (json.load(open(f))["drops"] for f in sys.argv[1:3])
d = {k: a[k] - b[k] for k in a if a[k] != b[k]}
bad = {k: v for k, v in d.items() if k not in ("not_ip", "not_mine", "not_udp")}
assert not bad, f"clean run dropped {bad}"
print("hijacked job exact; clean run: no drops")
PY
box_stop || die "pboxd exited non-zero"

# -- no per-peer cap: the Unix socket keeps its slots; idle ones time out
# (--max-conns 2048, of the default 8192, keeps the flood's time short)
# The idle timeout is 20 s so that every TCP slot is full before the first
# connection times out even where opening 2100 takes long (8 s was too
# short on a loaded 2-core machine: 1520 held at most).
box_start af_packet --max-conns-per-peer 0 --conn-rate-per-peer 0 --idle-timeout-ms 20000 --max-conns 2048
# (counted at 26 s, and at least 23 s after the last connection opened:
# the 20 s timeout, the once-a-second sweep and 2 s to spare)
attacker $ATK_IDLE idle 2100 26 23 > "$WORKDIR/atk.idle2" 2>&1 & PIDS+=($!); ap=$!
held=0
count_held() { ip netns exec "$NS_BOX" ss -Htn state established '( sport = :7470 )' | wc -l; }
for _ in $(seq 150); do   # until the TCP slots are full (2048 - 16 for the Unix socket)
	held=$(count_held)
	[ "$held" -ge 2032 ] && break
	sleep 0.1
done
# ss also counts connections the kernel completed that pboxd has not yet
# accepted and refused (closed) over the cap: a reading above 2032 is
# transient, so look again (for up to 3 s: the first connections time
# out 20 s after they opened, and filling takes at most 15 s above)
for _ in $(seq 60); do
	[ "$held" -gt 2032 ] || break
	sleep 0.05
	held=$(count_held)
done
[ "$held" -eq 2032 ] || die "the box holds $held TCP control connections, not 2048 - 16"
timeout 5 "$BUILD/pboxctl" --socket "$PBOX_SOCKET" jobs > /dev/null 2>&1 ||
	die "the Unix socket was refused with the TCP slots full"
echo "TCP slots full ($held connections); the Unix socket still answers"
wait $ap
echo "attack idle (no per-peer cap): $(cat "$WORKDIR/atk.idle2")"
workers 2 after "$WORKDIR/after" --minbytes 4 --maxbytes 1M --iters 1 --check
wait_workers 30 || { tail -n 5 "$WORKDIR"/after.*.log; die "workers could not connect after the idle timeout"; }
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["opened"] == 2032, d
assert d["closed_by_box"] == d["opened"], d
' "$WORKDIR/atk.idle2" || die "the box did not hold 2032 idle TCP connections and close them all by the idle timeout"

# -- a rank that starts 7 s late still joins (the join wait, not the stall watch)
WK_PIDS=()
for r in 0 1 2; do
	ip netns exec "$NS_WK" "$BUILD/pbox-perf" --control "$CONTROL" --job late --rank $r --world 4 \
		--minbytes 1M --maxbytes 1M --iters 2 --check > "$WORKDIR/late.$r.log" 2>&1 &
	WK_PIDS+=($!); PIDS+=($!)
done
sleep 7
ip netns exec "$NS_WK" "$BUILD/pbox-perf" --control "$CONTROL" --job late --rank 3 --world 4 \
	--minbytes 1M --maxbytes 1M --iters 2 --check > "$WORKDIR/late.3.log" 2>&1 &
WK_PIDS+=($!); PIDS+=($!)
wait_workers 60 || { tail -n 3 "$WORKDIR"/late.*.log; die "a job whose last rank started 7 s late failed"; }
echo "a rank 7 s late: exact"
box_stop || die "pboxd exited non-zero"
echo "control abuse: every attack refused or bounded, legitimate jobs exact"
