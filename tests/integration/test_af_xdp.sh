#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_af_xdp.sh - the same exact allreduce as test_allreduce.sh, with pboxd
# on DPDK net_af_xdp instead of net_af_packet: contributions stay in their
# rx mbufs (held, no copy); 4 workers, 1 element to 16 MiB, 4 keys in
# flight, every sum exact. Then a longer run that makes the pool's ring
# cycle through every mbuf: 64 MiB, 5 calls, windows of up to 1024
# segments (--slots 4096 so the box has a slot for each open round), so
# thousands of contributions are held at once and the lcore's mbuf cache
# cannot absorb the swings. Before the pool was packed for net_af_xdp
# (nic/port_pool.c), the mbufs beyond the PMD's UMEM drained its fill ring
# there and rx stopped for good, IMISSED climbing; on net_af_xdp IMISSED
# counts frames the kernel had no fill buffer for, so it must stay 0.
# Busy polling: the vdev gets --xdp-busy-budget (64) and status shows it.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
topo_up
box_start af_xdp --slots 4096
ctl --json status | python3 -c 'import json,sys; d=json.load(sys.stdin); p=d["ports"][0]; assert p["contributions"] == "held" and p["fanout"] == "copy" and d["lcores"][0]["hold_max"] > 0, (p, d["lcores"]); assert p["busy_poll"]["budget"] == 64 and p["busy_poll"]["iface"], p' \
	|| die "af_xdp must hold contributions (and copy results), busy polling with the default budget"
workers 4 xdp "$WORKDIR/xdp" --minbytes 4 --maxbytes 16M --iters 2 --keys 4 --check
wait_workers 180 || { tail -n 5 "$WORKDIR"/xdp.*.log; die "workers failed on af_xdp"; }
tail -4 "$WORKDIR/xdp.0.log"
workers 4 xdplong "$WORKDIR/long" --minbytes 64M --maxbytes 64M --iters 5 --keys 4 --window 1024 --check
wait_workers 240 || { tail -n 5 "$WORKDIR"/long.*.log; ctl stats; die "the long run failed on af_xdp"; }
tail -2 "$WORKDIR/long.0.log"
ctl --json stats > "$WORKDIR/stats.json" || die "pboxctl stats failed"
python3 - "$WORKDIR/stats.json" <<'EOF' || die "af_xdp counters"
import json, sys
d = json.load(open(sys.argv[1]))
p, l = d["ports"][0], d["lcores"][0]
print("af_xdp: ipackets %d imissed %d rx_nombuf %d pushes %d held %d" %
      (p["ipackets"], p["imissed"], p["rx_nombuf"], l["pushes"], l["held"]))
assert p["imissed"] == 0, "the fill ring ran dry (IMISSED %d)" % p["imissed"]
assert l["held"] > l["pushes"] // 2, "most contributions must be held"
EOF
box_stop || die "pboxd exited non-zero"
echo "af_xdp: exact, contributions held"
