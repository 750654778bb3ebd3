#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_xdp.sh - the xdp transport's own behaviour, each worker in its own
# namespace (lib.sh WK_HOSTS):
#   1. auto skips xdp in copy mode (veth has no zero-copy; measured slower
#      than udp) and says so (pbox_transport_info);
#   2. jumbo frames (MTU 9000, AF_XDP multi-buffer) on xdp: exact sums;
#   3. without privileges: xdp fails with PBOX_EPERM naming the missing
#      capabilities, auto falls back to udp and says why;
#   4. a second worker on an interface that already has one: xdp fails
#      (ENOTSUP, "queue 0 ... already has an AF_XDP socket"); udp works
#      beside it, in the same job;
#   5. the interface disappears during a call: a named error, no hang.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
export PBOX_TRANSPORT=xdp WK_HOSTS=1
BOX_MTU=9000
topo_up
box_start af_packet

perf() { # perf NS JOB RANK WORLD args...: one pbox-perf in NS, bounded
	local ns=$1 job=$2 rank=$3 world=$4; shift 4
	ip netns exec "$ns" timeout 60 "$BUILD/pbox-perf" --control "$CONTROL" --job "$job" \
		--rank "$rank" --world "$world" "$@"
}

# 1: auto on veth
PBOX_TRANSPORT=auto workers 2 auto "$WORKDIR/auto" --minbytes 4 --maxbytes 1M --stepfactor 16 --iters 2 --check
PBOX_TRANSPORT=auto wait_workers 120 || { tail -n 5 "$WORKDIR"/auto.*.log; die "workers failed with transport auto"; }
grep -q "^# transport: udp (kernel UDP socket); verbs skipped: .*; xdp skipped: eth0 has no zero-copy AF_XDP (copy mode measured slower than udp" "$WORKDIR/auto.0.log" ||
	die "auto on veth: $(grep '^# transport:' "$WORKDIR/auto.0.log")"
echo "auto: $(grep '^# transport:' "$WORKDIR/auto.0.log")"

# 2: xdp, two hosts, jumbo
workers 2 jumbo "$WORKDIR/jumbo" --minbytes 4 --maxbytes 16M --stepfactor 8 --iters 2 --keys 2 --check
wait_workers 120 || { tail -n 5 "$WORKDIR"/jumbo.*.log; die "xdp workers failed at MTU 9000"; }
grep -q "^# transport: xdp on eth0 queue 0 (native XDP, copy mode, multi-buffer)" "$WORKDIR/jumbo.0.log" ||
	die "xdp not native with multi-buffer: $(grep '^# transport:' "$WORKDIR/jumbo.0.log")"
grep -q "^# mtu 9000" "$WORKDIR/jumbo.0.log" || die "not at MTU 9000: $(grep '^# mtu' "$WORKDIR/jumbo.0.log")"
echo "xdp: $(grep '^# transport:' "$WORKDIR/jumbo.0.log"); exact up to 16 MiB at MTU 9000"

# 3: no privileges (PBOX_TRANSPORT=auto: pbox_opts.transport 0 defers to it)
new_host; h=$NEW_HOST
nopriv=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all)
out=$(ip netns exec "$h" timeout 30 "${nopriv[@]}" "$BUILD/pbox-perf" --control "$CONTROL" --job np \
	--rank 0 --world 1 --transport xdp --maxbytes 4 2>&1)
echo "$out" | grep -q "missing privileges: transport xdp: needs CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF (or root); missing CAP_NET_RAW CAP_NET_ADMIN CAP_BPF" ||
	die "xdp without privileges: $out"
out=$(ip netns exec "$h" timeout 30 "${nopriv[@]}" env PBOX_TRANSPORT=auto "$BUILD/pbox-perf" \
	--control "$CONTROL" --job np2 --rank 0 --world 1 --maxbytes 64K --check 2>&1) || die "auto without privileges failed: $out"
echo "$out" | grep -q "^# transport: udp (kernel UDP socket); verbs skipped: .*; xdp skipped: needs CAP_NET_RAW" ||
	die "auto without privileges: $(echo "$out" | grep '^# transport:')"
echo "no privileges: xdp refused (EPERM, named), auto fell back: $(echo "$out" | grep '^# transport:')"

# 4: one interface, two xdp workers
perf "$h" busy 1 2 --maxbytes 256K --iters 200 --check > "$WORKDIR/busy.1.log" 2>&1 &
first=$!; PIDS+=($first)
for _ in $(seq 100); do ip -n "$h" link show eth0 | grep -q "prog/xdp" && break; sleep 0.1; done
out=$(perf "$h" other 0 1 --maxbytes 4 2>&1) && die "a second xdp worker on one interface succeeded"
echo "$out" | grep -q "queue 0 of eth0 already has an AF_XDP socket (another worker on this interface?)" ||
	die "second xdp worker: $out"
out=$(PBOX_TRANSPORT=udp perf "$h" busy 0 2 --maxbytes 256K --iters 200 --check 2>&1) ||
	die "a udp worker beside an xdp worker failed: $out"
wait $first || die "the xdp worker failed beside a udp one: $(tail -3 "$WORKDIR/busy.1.log")"
echo "one interface: the second xdp worker refused (named); a udp worker beside it: mixed job exact"

# 5: the interface goes away during a call
new_host; h2=$NEW_HOST
perf "$h2" gone 0 1 --minbytes 64M --maxbytes 64M --iters 1000 --timeout-ms 5000 > "$WORKDIR/gone.log" 2>&1 &
p=$!; PIDS+=($p)
for _ in $(seq 100); do grep -q "^# transport: xdp" "$WORKDIR/gone.log" && break; sleep 0.1; done
sleep 1
ip -n "$h2" link del eth0 || die "cannot delete eth0"
start=$SECONDS
wait $p && die "a call succeeded after its interface was deleted"
took=$((SECONDS - start))
[ $took -le 15 ] || die "the worker took ${took}s to fail after its interface went away"
grep -qE "pbox-perf: rank 0 .*(went down or away|no new result)" "$WORKDIR/gone.log" ||
	die "no named error when the interface went away: $(tail -3 "$WORKDIR/gone.log")"
echo "interface gone: failed in ${took}s: $(grep '^pbox-perf' "$WORKDIR/gone.log")"
box_stop || die "pboxd exited non-zero"
echo "xdp: ok"
