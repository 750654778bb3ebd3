#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# af_xdp.sh - pboxd on net_af_xdp (the integration topology of
# tests/integration/lib.sh): 4 workers allreduce 16 MiB and 64 MiB f32
# (5 calls after 1 warm-up) against pboxd variants, REPS interleaved runs,
# a fresh pboxd per run; prints the median time per call, and the medians
# of the data lcore's CPU time (its thread's user and system time: on
# net_af_xdp the kernel's share of rx and tx is the latter) and of pboxctl
# stats counters. Root (namespaces, veth, DPDK).
#   bash bench/af_xdp.sh [REPS]          (BEFORE=DIR adds DIR/pboxd as "before")
# Variants: "before" (another build's pboxd, e.g. one that copies every
# contribution on net_af_xdp), "held" (this build: contributions held,
# --xdp-busy-budget 64), "held bb=0" (busy polling off), "held napi"
# (budget 64 with the box veth's napi_defer_hard_irqs 2 and
# gro_flush_timeout 200000, as docs/operations.md advises for a NIC).
set -u
cd "$(dirname "$0")/.."
. tests/integration/lib.sh
need_root "$0" "bench"
REPS=${1:-5}
topo_up
napi() { # napi DEFER TIMEOUT_NS: the box veth's interrupt deferral
	ip netns exec "$NS_BOX" sh -c "echo $1 > /sys/class/net/$IF_BD/napi_defer_hard_irqs &&
		echo $2 > /sys/class/net/$IF_BD/gro_flush_timeout" || die "cannot set $IF_BD's napi settings"
}
run() { # run NAME BUILD PBOXD-ARGS...: one pboxd, one 4-rank job; "NAME size seconds" and "NAME stat value" lines
	local name=$1 build=$2; shift 2
	BUILD=$build box_start af_xdp "$@" > /dev/null
	workers 4 "j$RANDOM" "$WORKDIR/w" --minbytes 16M --maxbytes 64M --stepfactor 4 --iters 5 --warmup 1
	wait_workers 300 || { tail -n 3 "$WORKDIR"/w.*.log "$BOX_LOG" >&2; ctl stats >&2; die "$name failed"; }
	awk -v n="$name" '/^ *[0-9]/ && NF >= 7 {print n "|" $1 "|" $4 / 1e6}' "$WORKDIR/w.0.log"
	ctl --json stats | python3 -c '
import json, sys
d = json.load(sys.stdin); p = d["ports"][0]; l = d["lcores"][0]
for k in ("imissed", "rx_nombuf"): print("%s|%s|%d" % (sys.argv[1], k, p[k]))
for k in ("pushes", "held", "retx", "dup_open", "busy_polls", "idle_polls"): print("%s|%s|%d" % (sys.argv[1], k, l[k]))
' "$name"
	# CPU time of the data lcore's thread (DPDK 22.11 names it rte-worker-N)
	local t hz
	hz=$(getconf CLK_TCK)
	for t in /proc/$BOX_PID/task/*; do
		grep -q '^rte-worker' "$t/comm" 2>/dev/null &&
			awk -v n="$name" -v hz="$hz" '{print n "|lcore_user_ms|" $14 * 1000 / hz;
				print n "|lcore_sys_ms|" $15 * 1000 / hz}' "$t/stat"
	done
	box_stop || die "$name: pboxd exited non-zero"
}
for r in $(seq "$REPS"); do
	[ -n "${BEFORE:-}" ] && run before "$BEFORE"
	run held "$BUILD"
	run "held bb=0" "$BUILD" --xdp-busy-budget 0
	napi 2 200000
	run "held napi" "$BUILD"
	napi 0 0
done > "$WORKDIR/all.txt"
python3 - "$WORKDIR/all.txt" "$REPS" <<'PY'
import collections, statistics, sys
t = collections.defaultdict(list)
names = []
for line in open(sys.argv[1]):
    name, key, val = line.strip().split("|")
    t[(name, key)].append(float(val))
    if name not in names:
        names.append(name)
stats = ("lcore_user_ms", "lcore_sys_ms", "imissed", "rx_nombuf", "pushes", "held", "retx", "dup_open",
         "busy_polls", "idle_polls")
print("4 workers, median of %s runs: time per call; the data lcore's CPU time and the"
      " counters of a run (16 MiB and 64 MiB, 6 calls each)" % sys.argv[2])
print("%-10s %10s %10s %s" % ("pboxd", "16 MiB", "64 MiB", " ".join("%10s" % s.replace("lcore_", "") for s in stats)))
for n in names:
    ms = ["%8.1f ms" % (statistics.median(t[(n, str(s))]) * 1e3) for s in (16 << 20, 64 << 20)]
    print("%-10s %10s %10s %s" % (n, ms[0], ms[1],
          " ".join("%10d" % statistics.median(t[(n, s)]) for s in stats)))
PY
