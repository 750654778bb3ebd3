#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_af_xdp.sh - the same exact allreduce as test_allreduce.sh, with pboxd
# on DPDK net_af_xdp instead of net_af_packet: 4 workers, 1 element to
# 16 MiB, 4 keys in flight, every sum exact.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
topo_up
box_start af_xdp
ctl --json status | python3 -c 'import json,sys; p=json.load(sys.stdin)["ports"][0]; assert p["contributions"] == "copied" and p["fanout"] == "copy", p' \
	|| die "af_xdp must copy contributions and results"
workers 4 xdp "$WORKDIR/xdp" --minbytes 4 --maxbytes 16M --iters 2 --keys 4 --check
wait_workers 180 || { tail -n 5 "$WORKDIR"/xdp.*.log; die "workers failed on af_xdp"; }
tail -4 "$WORKDIR/xdp.0.log"
box_stop || die "pboxd exited non-zero"
echo "af_xdp: exact"
