#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_verbs.sh - the exact allreduce of test_allreduce.sh with the workers on
# the verbs transport (PBOX_TRANSPORT=verbs: an RDMA raw-packet QP, kernel
# bypass) and pboxd on DPDK net_af_packet: 4 workers, 1 element to 16 MiB,
# 4 keys in flight, f32 then f16, every sum exact, and the box counts no
# drops for the workers' frames (so their checksums were right, whether the
# NIC or libpbox wrote them).
#
# Needs what a veth cannot give: an RDMA device with an Ethernet port
# (mlx5: ConnectX-4 or later; docs/transports.md) and, on the same host, a
# second Ethernet interface cabled (or switched) to that port:
#   PBOX_VERBS_IF=<the RDMA device's network interface>  (workers' side)
#   PBOX_VERBS_PEER_IF=<the interface cabled to it>      (pboxd's data port)
# Both are moved into the test's network namespaces for the run; the kernel
# returns them when the namespaces go, without their addresses: name
# interfaces the host does not otherwise use. Exits 77 (skip) with the
# reason when there is no RDMA device or the two interfaces are not named.
set -u

rdma_devices() {
	if command -v ibv_devices >/dev/null 2>&1; then
		ibv_devices 2>/dev/null | awk 'NR > 2 && NF { print $1 }'
	else
		ls /sys/class/infiniband 2>/dev/null
	fi
}

DEVS=$(rdma_devices | tr '\n' ' ')
if [ -z "${DEVS// /}" ]; then
	echo "SKIP: needs an RDMA device (ibv_devices lists none; the kernel here has no rxe)"
	exit 77
fi
if [ -z "${PBOX_VERBS_IF:-}" ] || [ -z "${PBOX_VERBS_PEER_IF:-}" ]; then
	echo "SKIP: RDMA device(s) ${DEVS% } found, but the test needs PBOX_VERBS_IF=<the network" \
	     "interface of one> and PBOX_VERBS_PEER_IF=<an Ethernet interface cabled to it, for pboxd>"
	exit 77
fi
. "$(dirname "$0")/lib.sh"   # after the skips: it makes a work directory
need_root "$0"
for i in "$PBOX_VERBS_IF" "$PBOX_VERBS_PEER_IF"; do
	[ -e "/sys/class/net/$i" ] || die "no network interface $i"
done

# lib.sh's topology, with the two physical interfaces as the data link.
IF_WD=$PBOX_VERBS_IF
IF_BD=$PBOX_VERBS_PEER_IF
DATA_LINK=existing
topo_up
# a cable's link takes a moment to come up
for _ in $(seq 100); do
	ip -n "$NS_WK" link show "$IF_WD" | grep -q 'state UP' && break
	sleep 0.1
done
ip -n "$NS_WK" link show "$IF_WD" | grep -q 'state UP' || die "$IF_WD has no link (is it cabled to $IF_BD?)"
box_start af_packet
# The device's port must see the worker's interface from its namespace.
in_wk ls "/sys/class/net/$IF_WD/device/infiniband" >/dev/null 2>&1 ||
	log "note: $IF_WD shows no infiniband/ directory in its namespace; verbs may not find it"

export PBOX_TRANSPORT=verbs   # named: pbox_connect fails rather than fall back
workers 4 verbs "$WORKDIR/verbs" --minbytes 4 --maxbytes 16M --iters 2 --warmup 1 --keys 4 --check
wait_workers 240 || { tail -n 5 "$WORKDIR"/verbs.*.log; die "workers on verbs failed"; }
tail -n 4 "$WORKDIR/verbs.0.log"

workers 4 verbs-f16 "$WORKDIR/f16" --minbytes 2 --maxbytes 1M --iters 3 --dtype f16 --keys 2 --check
wait_workers 120 || { tail -n 5 "$WORKDIR"/f16.*.log; die "f16 workers on verbs failed"; }
tail -n 3 "$WORKDIR/f16.0.log"

ctl --json stats > "$WORKDIR/stats.json" || die "pboxctl --json stats failed"
python3 - "$WORKDIR/stats.json" <<'PY' || die "unexpected drops"
import json, sys
s = json.load(open(sys.argv[1]))
drops = {k: v for k, v in s["drops"].items() if v}
allowed = {"not_ip", "not_mine", "not_udp"}  # other traffic on the link (LLDP, IPv6)
bad = {k: v for k, v in drops.items() if k not in allowed}
print("drops:", drops)
assert not bad, f"frames from the verbs workers dropped: {bad}"
completes = sum(l["completes"] for l in s["lcores"])
assert completes > 0, "no segment completed"
print("completes:", completes)
PY
box_stop || die "pboxd exited non-zero"
echo "verbs: exact"
