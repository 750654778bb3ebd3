#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_telemetry.sh - pboxd's DPDK telemetry commands (docs/operations.md
# "Telemetry"): on the EAL's telemetry socket of the box's --file-prefix,
# /pbox/info names the version, port and lcore (also through DPDK's
# dpdk-telemetry.py where installed); during a job /pbox/jobs
# and /pbox/stats show its counters rising between two queries (rounds,
# bytes reduced, completes), under the documented names, and agree with
# job_list; a job is found by name too; parts of an answer
# ("/pbox/stats,lcores/0") and a missing part's error; the job is gone
# from /pbox/jobs once it ends. Then a box with --no-telemetry says so
# once in its log and serves RPC as usual.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
topo_up
box_start af_packet
# --no-shconf does not move it: the EAL's runtime directory of the prefix
SOCK=/run/dpdk/pbox$TAG/dpdk_telemetry.v2
[ -S "$SOCK" ] || die "no telemetry socket at $SOCK"
# (the EAL may name it through /var/run, a link to /run)
grep -Eq "telemetry: /pbox/stats, /pbox/jobs, /pbox/info on (/var)?$SOCK\$" "$BOX_LOG" ||
	die "pboxd's log does not name the telemetry socket"

tq() { python3 "$(dirname "$0")/tel_query.py" "$SOCK" "$@"; }
# get FILE LINE PATH: a value of the LINE-th reply (0-based) in FILE, by a
# path of keys joined by '/' ("/pbox/jobs/1/rounds"); "MISSING" if absent
get() {
	python3 - "$@" <<'PY'
import json, sys
d = json.loads(open(sys.argv[1]).read().splitlines()[int(sys.argv[2])])
parts = sys.argv[3].split("/")
d = d["/%s/%s" % (parts[1], parts[2])]
for k in parts[3:]:
    if not isinstance(d, dict) or k not in d:
        print("MISSING"); sys.exit(0)
    d = d[k]
print(d)
PY
}

tq /pbox/info > "$WORKDIR/info.json" || die "/pbox/info failed"
cat "$WORKDIR/info.json"
version=$(sed -n 's/^#define PBOX_VERSION_\(MAJOR\|MINOR\|PATCH\) *\([0-9]*\).*/\2/p' include/pbox.h | paste -sd.)
[ "$(get "$WORKDIR/info.json" 0 /pbox/info/version)" = "$version" ] || die "/pbox/info: version is not $version"
[ "$(get "$WORKDIR/info.json" 0 /pbox/info/ports/0/ip)" = "$BOX_IP/24" ] || die "/pbox/info: port 0's ip"
[ "$(get "$WORKDIR/info.json" 0 /pbox/info/lcores/0/udp_port)" != MISSING ] || die "/pbox/info: no lcore 0"

# DPDK's own client (dpdk-telemetry.py, package dpdk-dev) finds it by prefix
if command -v dpdk-telemetry.py > /dev/null; then
	echo /pbox/info | dpdk-telemetry.py -f "pbox$TAG" > "$WORKDIR/dt.txt" 2>&1 ||
		{ cat "$WORKDIR/dt.txt"; die "dpdk-telemetry.py -f pbox$TAG failed"; }
	grep -q "\"version\": \"$version\"" "$WORKDIR/dt.txt" ||
		{ cat "$WORKDIR/dt.txt"; die "dpdk-telemetry.py: no version in /pbox/info"; }
else
	log "dpdk-telemetry.py not installed (package dpdk-dev): tel_query.py alone"
fi

workers 4 teljob "$WORKDIR/w" --minbytes 1M --maxbytes 1M --iters 400 --check
for _ in $(seq 100); do ctl --json jobs | grep -q '"active"' && break; sleep 0.1; done
id=$(ctl --json jobs | python3 -c 'import json, sys
print([j["job_id"] for j in json.load(sys.stdin)["jobs"] if j["job"] == "teljob"][0])') ||
	die "job_list has no teljob"
sleep 1
tq /pbox/jobs /pbox/stats > "$WORKDIR/t1.json" || die "first query failed"
sleep 1
tq /pbox/jobs /pbox/stats /pbox/jobs,teljob /pbox/stats,lcores/0 /pbox/stats,nosuch \
	/pbox/stats,lcores/0/completes > "$WORKDIR/t2.json" || die "second query failed"
wait_workers 120 || { tail -3 "$WORKDIR"/w.*.log; die "workers failed"; }
head -c 600 "$WORKDIR/t2.json"; echo

r1=$(get "$WORKDIR/t1.json" 0 "/pbox/jobs/$id/rounds")
r2=$(get "$WORKDIR/t2.json" 0 "/pbox/jobs/$id/rounds")
b2=$(get "$WORKDIR/t2.json" 0 "/pbox/jobs/$id/bytes_reduced")
c1=$(get "$WORKDIR/t1.json" 1 /pbox/stats/lcores/0/completes)
c2=$(get "$WORKDIR/t2.json" 1 /pbox/stats/lcores/0/completes)
echo "job $id rounds $r1 -> $r2, bytes_reduced $b2; lcore 0 completes $c1 -> $c2"
[ "$r1" != MISSING ] && [ "$r2" != MISSING ] && [ "$r2" -gt "$r1" ] ||
	die "the job's rounds did not rise: '$r1' -> '$r2'"
[ "$b2" != MISSING ] && [ "$b2" -gt 0 ] || die "no bytes reduced: '$b2'"
[ "$c1" != MISSING ] && [ "$c2" -gt "$c1" ] || die "lcore 0's completes did not rise: '$c1' -> '$c2'"
for f in job:teljob job_id:$id state:active world:4 joined:4; do
	[ "$(get "$WORKDIR/t2.json" 0 "/pbox/jobs/$id/${f%%:*}")" = "${f#*:}" ] ||
		die "/pbox/jobs: ${f%%:*} is not ${f#*:}"
done
for f in keys bytes_used max_bytes weight nacks; do
	[ "$(get "$WORKDIR/t2.json" 0 "/pbox/jobs/$id/$f")" != MISSING ] || die "/pbox/jobs: no $f"
done
for f in ports/0/ipackets ports/0/opackets ports/0/link_up lcores/0/rx lcores/0/pushes \
	 lcores/0/nacks drops/bad_token drops/stale_round uptime_s jobs; do
	[ "$(get "$WORKDIR/t2.json" 1 "/pbox/stats/$f")" != MISSING ] || die "/pbox/stats: no $f"
done
[ "$(get "$WORKDIR/t2.json" 1 /pbox/stats/ports/0/ipackets)" -gt 0 ] || die "port 0 received nothing"
[ "$(get "$WORKDIR/t2.json" 2 /pbox/jobs/job_id)" = "$id" ] || die "/pbox/jobs,teljob is not job $id"
[ "$(get "$WORKDIR/t2.json" 3 /pbox/stats/completes)" != MISSING ] || die "/pbox/stats,lcores/0"
grep -q '"error":"/pbox/stats has no part .nosuch."' "$WORKDIR/t2.json" ||
	die "/pbox/stats,nosuch: no error"
[ "$(get "$WORKDIR/t2.json" 5 /pbox/stats/completes)" -gt 0 ] || die "/pbox/stats,lcores/0/completes"

# the job ends with its workers: gone from /pbox/jobs within a snapshot or two
for _ in $(seq 50); do
	tq /pbox/jobs > "$WORKDIR/t3.json"
	[ "$(get "$WORKDIR/t3.json" 0 "/pbox/jobs/$id")" = MISSING ] && break
	sleep 0.1
done
[ "$(get "$WORKDIR/t3.json" 0 "/pbox/jobs/$id")" = MISSING ] || die "job $id still in /pbox/jobs"
box_stop || die "pboxd exited non-zero"

# without the EAL's telemetry: one line in the log, and the box serves
EAL_LCORES="-l 0-1 --no-telemetry" box_start af_packet
[ "$(grep -c 'telemetry: the EAL runs without telemetry' "$BOX_LOG")" = 1 ] ||
	{ cat "$BOX_LOG"; die "--no-telemetry: not logged once"; }
ctl --json status > /dev/null || die "pboxd --no-telemetry does not serve RPC"
box_stop || die "pboxd (--no-telemetry) exited non-zero"
echo "telemetry: ok"
