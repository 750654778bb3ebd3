#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_dupreorder.sh - exact sums when packets are duplicated and reordered
# in both directions, with the duplicates counted on both sides.
#
# No netem here, so the chaos is built from nftables and HTB:
#   duplication  nft netdev egress "dup to" the same device: 10% of data
#                packets leave twice;
#   reordering   nft sets skb->priority 1:2 on another 10%, which HTB puts in
#                a 20 Mbit/s class beside the 10 Gbit/s default one: those
#                packets fall behind the ones sent after them.
# Worker -> box on the workers' veth end; box -> worker on the box's veth
# end, which sees pboxd's transmissions because net_af_packet is told not
# to bypass the qdisc (qdisc_bypass=0).
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
command -v nft >/dev/null && command -v tc >/dev/null || { echo "SKIP: needs nft and tc"; exit 77; }
topo_up

# chaos NS DEV MATCH: duplicate and reorder 10% each of DEV's egress data packets.
chaos() {
	local ns=$1 dev=$2 match=$3
	ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: htb default 1 &&
	ip netns exec "$ns" tc class add dev "$dev" parent 1: classid 1:1 htb rate 10gbit quantum 60000 &&
	ip netns exec "$ns" tc class add dev "$dev" parent 1: classid 1:2 htb rate 20mbit ceil 20mbit quantum 1514 ||
		{ echo "SKIP: needs the htb qdisc"; exit 77; }
	ip netns exec "$ns" nft -f - <<NFT || { echo "SKIP: needs nftables netdev egress and dup"; exit 77; }
table netdev pboxchaos {
	chain egress {
		type filter hook egress device "$dev" priority 0;
		$match numgen random mod 100 < 10 counter dup to "$dev"
		$match numgen random mod 100 < 10 counter meta priority set 1:2
	}
}
NFT
}
# chaos_counts NS DEV: "duplicated D delayed R" (packets) for the log.
chaos_counts() {
	ip netns exec "$1" nft list table netdev pboxchaos |
		awk '/counter/ { for (i = 1; i <= NF; i++) if ($i == "packets") n[++k] = $(i + 1) }
		     END { printf "duplicated %d delayed %d", n[1], n[2] }'
}

chaos "$NS_WK" "$IF_WD" "ip daddr $BOX_IP udp dport 47000-47999"
chaos "$NS_BOX" "$IF_BD" "ip saddr $BOX_IP udp sport 47000-47999"
VDEV_ARGS=",qdisc_bypass=0" box_start af_packet

workers 4 chaos "$WORKDIR/c" --minbytes 4 --maxbytes 4M --iters 3 --keys 2 --check
wait_workers 240 || { tail -n 5 "$WORKDIR"/c.*.log; die "allreduce failed with duplication and reordering"; }
up=$(chaos_counts "$NS_WK" "$IF_WD"); down=$(chaos_counts "$NS_BOX" "$IF_BD")
echo "worker->box: $up; box->worker: $down"
echo "rank 0: $(grep -E '^# (packets|round)' "$WORKDIR/c.0.log" | tr '\n' ' ')"
for c in "$up" "$down"; do
	[[ $c =~ duplicated\ ([0-9]+)\ delayed\ ([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -gt 0 ] &&
		[ "${BASH_REMATCH[2]}" -gt 0 ] || die "the chaos rules did not fire: $c"
done
# Rank 0 prints its counters: the duplicated results were counted.
grep -q "dup_results [1-9]" "$WORKDIR/c.0.log" || die "rank 0 counted no duplicate results"
grep -q "retransmits [0-9]" "$WORKDIR/c.0.log" || die "rank 0 printed no counters"
ctl --json stats | python3 -c '
import json, sys
s = json.load(sys.stdin)
dup = sum(l["dup_open"] + l["dup_done"] for l in s["lcores"])
print("box: dup_open+dup_done", dup, "retx", sum(l["retx"] for l in s["lcores"]))
assert dup > 0, s["lcores"]
' || die "the box counted no duplicate pushes"
box_stop || die "pboxd exited non-zero"
echo "duplication and reordering: exact"
