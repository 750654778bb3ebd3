#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_metrics.sh - pboxd --metrics: GET /metrics from the workers'
# namespace during a job shows the job's counters rising (rounds, bytes),
# the ports' and lcores' packets, every drop reason, in Prometheus' text
# format; other paths get 404, other methods 405; a scraper that never
# sends its request does not stop the next one; an lcore's busy seconds
# rise by at most the wall time. Every sample carries the box label
# (--box-id). `pboxctl top` shows the job's rates
# meanwhile, BUSY% within 0..100, and outlives the box's idle timeout.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
topo_up
box_start af_packet --metrics 0.0.0.0:9470 --idle-timeout-ms 1000 --box-id metricsbox
URL=http://$BOX_MGMT:9470

scrape() { # scrape PATH [METHOD] -> body on stdout, "HTTP <code>" on stderr
	in_wk python3 - "$URL$1" "${2:-GET}" <<'PY'
import sys, urllib.request, urllib.error
req = urllib.request.Request(sys.argv[1], method=sys.argv[2])
try:
    with urllib.request.urlopen(req, timeout=5) as r:
        sys.stdout.write(r.read().decode())
        print("HTTP", r.status, r.headers.get("Content-Type"), file=sys.stderr)
except urllib.error.HTTPError as e:
    print("HTTP", e.code, file=sys.stderr)
PY
}
value() { # value FILE METRIC-WITH-LABELS
	awk -v m="$2" '$1 == m { print $2 }' "$1"
}

workers 4 metricsjob "$WORKDIR/w" --minbytes 1M --maxbytes 1M --iters 400 --check
# a scraper that connects and never sends: the next scrape is still served
in_wk python3 -c "
import socket, time
s = socket.create_connection(('$BOX_MGMT', 9470)); time.sleep(3)" &
IDLE_PID=$!; PIDS+=($IDLE_PID)
for _ in $(seq 100); do ctl --json jobs | grep -q '"active"' && break; sleep 0.1; done
sleep 1
t0=$(date +%s.%N)
scrape /metrics > "$WORKDIR/m1.txt" 2> "$WORKDIR/h1.txt"
sleep 1
scrape /metrics > "$WORKDIR/m2.txt" 2> "$WORKDIR/h2.txt"
t1=$(date +%s.%N)
# pboxctl top: two frames of rates; the job's rounds per second are not 0
ctl top --interval 500 --count 2 > "$WORKDIR/top.txt" || die "pboxctl top failed"
wait_workers 120 || { tail -3 "$WORKDIR"/w.*.log; die "workers failed"; }
cat "$WORKDIR/h1.txt"
# every sample names the box first; the checks below read them without it
for m in m1 m2; do
	grep -v '^#' "$WORKDIR/$m.txt" | grep -Ev '^[a-z_]+\{box="metricsbox"[,}]' &&
		die "samples without box=\"metricsbox\" above"
	sed -Ei 's/\{box="metricsbox"\}//; s/box="metricsbox",//' "$WORKDIR/$m.txt"
done
grep -q "HTTP 200 text/plain; version=0.0.4" "$WORKDIR/h1.txt" || die "no 200 text/plain 0.0.4"
grep -q '^# TYPE pbox_job_rounds_total counter' "$WORKDIR/m1.txt" || die "no TYPE line"
r1=$(value "$WORKDIR/m1.txt" 'pbox_job_rounds_total{pbox_job="metricsjob",state="active"}')
r2=$(value "$WORKDIR/m2.txt" 'pbox_job_rounds_total{pbox_job="metricsjob",state="active"}')
b2=$(value "$WORKDIR/m2.txt" 'pbox_job_reduced_bytes_total{pbox_job="metricsjob",state="active"}')
echo "rounds $r1 -> $r2, bytes $b2"
[ -n "$r1" ] && [ -n "$r2" ] && [ "$r2" -gt "$r1" ] || die "the job's rounds did not rise: '$r1' -> '$r2'"
[ "${b2:-0}" -gt 0 ] || die "no reduced bytes"
rx=$(value "$WORKDIR/m2.txt" 'pbox_port_rx_packets_total{port="0"}')
[ "${rx:-0}" -gt 0 ] || die "port 0 received nothing: '$rx'"
[ "$(value "$WORKDIR/m2.txt" 'pbox_job_ranks_joined{pbox_job="metricsjob",state="active"}')" = 4 ] ||
	die "ranks joined is not 4"
grep -q '^pbox_drops_total{reason="bad_token"} ' "$WORKDIR/m2.txt" || die "drop reasons missing"
grep -q '^pbox_lcore_rounds_total{lcore="0"} ' "$WORKDIR/m2.txt" || die "lcore rounds missing"
# an lcore's busy time is time: it rose, by no more than the time between
# the scrapes (the poll counts, which it replaced as the load, are not)
s1=$(value "$WORKDIR/m1.txt" 'pbox_lcore_busy_seconds_total{lcore="0"}')
s2=$(value "$WORKDIR/m2.txt" 'pbox_lcore_busy_seconds_total{lcore="0"}')
python3 -c "
d, wall = $s2 - $s1, $t1 - $t0
print(f'lcore 0 busy {d:.3f} s of {wall:.3f} s between the scrapes')
assert 0 < d <= wall * 1.01, (d, wall)" || die "lcore busy seconds: '$s1' -> '$s2'"
# every sample line is "name{labels} number"
grep -v '^#' "$WORKDIR/m2.txt" | grep -Ev '^[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? [0-9.]+$' &&
	die "malformed sample lines above"
cat "$WORKDIR/top.txt"
[ "$(grep -c '^pbox top' "$WORKDIR/top.txt")" = 2 ] || die "pboxctl top: not 2 frames"
awk '/^LCORE/ { l = 1; next } l && NF == 0 { l = 0 } l && ($4 < 0 || $4 > 100) { bad = 1 }
     END { exit bad }' "$WORKDIR/top.txt" || die "pboxctl top: a BUSY% outside 0..100"
awk '$1 == "metricsjob" && $2 == "active" && $3 == "4/4" && $4 > 0 { ok = 1 } END { exit !ok }' \
	"$WORKDIR/top.txt" || die "pboxctl top shows no rounds for the job"
scrape /other > /dev/null 2> "$WORKDIR/h3.txt"
grep -q "HTTP 404" "$WORKDIR/h3.txt" || die "/other: $(cat "$WORKDIR/h3.txt")"
scrape /metrics POST > /dev/null 2> "$WORKDIR/h4.txt"
grep -q "HTTP 405" "$WORKDIR/h4.txt" || die "POST: $(cat "$WORKDIR/h4.txt")"
wait $IDLE_PID 2>/dev/null
# top samples on a connection each: an interval past --idle-timeout-ms
# (1 s here) does not end it (it exited "Broken pipe")
ctl top --interval 1500 --count 2 > "$WORKDIR/top2.txt" || die "pboxctl top with an interval past the idle timeout failed"
[ "$(grep -c '^pbox top' "$WORKDIR/top2.txt")" = 2 ] || die "pboxctl top (1.5 s): not 2 frames"
box_stop || die "pboxd exited non-zero"
echo "metrics: ok"
