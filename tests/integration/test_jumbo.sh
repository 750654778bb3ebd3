#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_jumbo.sh - MTU 9000 end to end: pboxd --mtu 9000 on net_af_packet
# (10 KiB frames), the data veth at MTU 9000, 4 workers with default options
# find MTU 9000 themselves (pbox_opts.mtu 0: box and route MTU, confirmed by
# a probe): 8896-byte segments, every sum exact (f32 4 B..16 MiB, bf16), and
# the box reports the MTU; a worker that asks for 1500 on the same box still
# gets exact sums with 1408-byte segments, and so do default workers on a
# path that drops jumbo frames (they fall back to 1500 with a warning).
# Before that, pboxd refuses --mtu 9000
# on ports that cannot carry it (af_packet ring frames of 2 KiB, or the
# interface at MTU 1500), naming what to change.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
topo_up

# refuse VDEV_EXTRA MESSAGE: pboxd --mtu 9000 must exit non-zero within
# 20 s and say MESSAGE
refuse() {
	local log=$WORKDIR/refuse.log
	timeout 20 ip netns exec "$NS_BOX" "$BUILD/pboxd" -l 0-1 --no-huge -m 512 --no-pci --no-shconf \
		--file-prefix=pboxr$TAG --vdev="net_af_packet0,iface=$IF_BD$1" --log-level=lib.eal:error -- \
		--ip 0:$BOX_IP/24 --control 127.0.0.1:7471 --rpc-socket "$WORKDIR/refuse.sock" --mtu 9000 \
		> "$log" 2>&1
	local rc=$?
	[ $rc != 0 ] && [ $rc != 124 ] || { cat "$log"; die "pboxd --mtu 9000 with '$1' did not refuse (rc $rc)"; }
	grep -q -- "$2" "$log" || { cat "$log"; die "pboxd's refusal does not say '$2'"; }
	echo "refused with '${1:-default frames}': $(grep -o -- "$2.*" "$log" | head -1)"
}
refuse "" "add framesz=16384,blocksz=32768"
refuse ",framesz=10240,blocksz=20480" "ip link set $IF_BD mtu 9000"

BOX_MTU=9000 box_start af_packet
ctl --json status | python3 -c '
import json, sys
p = json.load(sys.stdin)["ports"][0]
assert p["mtu"] == 9000, p
' || die "status does not report MTU 9000"
workers 4 jumbo "$WORKDIR/j" --minbytes 4 --maxbytes 16M --stepfactor 4 --iters 2 --keys 2 --check
wait_workers 120 || { tail -n 5 "$WORKDIR"/j.*.log; die "jumbo f32 workers failed"; }
cat "$WORKDIR/j.0.log"
grep -q "# mtu 9000 (automatic): segments of 8896 B" "$WORKDIR/j.0.log" ||
	die "default workers did not find MTU 9000 (8896-byte segments)"
workers 4 jumbo-bf16 "$WORKDIR/b" --minbytes 2 --maxbytes 1M --stepfactor 8 --iters 2 --dtype bf16 --check
wait_workers 120 || { tail -n 5 "$WORKDIR"/b.*.log; die "jumbo bf16 workers failed"; }
workers 2 small "$WORKDIR/s" --minbytes 4 --maxbytes 1M --stepfactor 16 --iters 2 --check --mtu 1500
wait_workers 60 || { tail -n 5 "$WORKDIR"/s.*.log; die "MTU 1500 workers on the jumbo box failed"; }
grep -q "segments of 1408 B" "$WORKDIR/s.0.log" || die "a 1500-MTU worker did not get 1408-byte segments"
# a path that silently drops jumbo frames: the probe does not come back
in_wk nft -f - <<EOF || die "cannot add the nftables rule"
table inet pboxjumbo {
	chain out { type filter hook output priority 0; ip daddr $BOX_IP meta length > 1600 drop; }
}
EOF
workers 2 dropjumbo "$WORKDIR/d" --minbytes 4 --maxbytes 1M --stepfactor 16 --iters 2 --check
wait_workers 60 || { tail -n 5 "$WORKDIR"/d.*.log; die "default workers on a path that drops jumbo frames failed"; }
grep -q "a 9000-byte probe to the box .* did not come back; using MTU 1500" "$WORKDIR/d.0.log" ||
	die "no warning about the lost probe: $(head -3 "$WORKDIR/d.0.log")"
grep -q "# mtu 1500 (automatic): segments of 1408 B" "$WORKDIR/d.0.log" ||
	die "default workers did not fall back to 1500 on a path that drops jumbo frames"
in_wk nft delete table inet pboxjumbo
box_stop || die "pboxd exited non-zero"
echo "jumbo: exact at MTU 9000 and 1500 on one box"
