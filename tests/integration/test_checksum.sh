#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_checksum.sh - on net_af_packet, whose PMD reports no checksum status,
# pboxd verifies checksums in software: a pbox datagram with a wrong UDP or
# IPv4 header checksum and an ICMP echo with a wrong IPv4 checksum are
# dropped as bad_csum (the echo unanswered); datagrams and echo requests the
# kernel reassembled from fragments beyond the MTU are dropped as fragment; then a
# clean job sums exactly with no drop at all, its veth-unfinished UDP
# checksums accepted and counted (csum_unfilled).
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
topo_up
box_start af_packet
N=50
in_wk ping -c 2 -W 1 -q $BOX_IP >/dev/null || die "box does not answer ping"
BOX_MAC=$(ip -n "$NS_WK" neigh show $BOX_IP dev "$IF_WD" | awk '{print $3; exit}')
[ -n "$BOX_MAC" ] || die "no neighbour entry for the box"
ctl status | grep -q software || die "pboxctl status does not say that checksums are verified in software"
ctl --json stats > "$WORKDIR/before.json" || die "pboxctl stats failed"
in_wk python3 "$(dirname "$0")/rawframes.py" "$IF_WD" "$BOX_MAC" $WK_IP $BOX_IP 47000 $N || die "sender failed"
sleep 1
kill -0 $BOX_PID || die "pboxd died"
ctl --json stats > "$WORKDIR/after.json" || die "pboxctl stats failed"
python3 - "$WORKDIR/before.json" "$WORKDIR/after.json" $N <<'PY' || die "counters wrong"
import json, sys
b, a, n = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
d = {k: a["drops"][k] - b["drops"].get(k, 0) for k in a["drops"]}
print({k: v for k, v in d.items() if v})
icmp = sum(l["icmp"] for l in a["lcores"]) - sum(l["icmp"] for l in b["lcores"])
assert d["bad_csum"] == 3 * n, f"bad_csum {d['bad_csum']} != {3 * n}"
assert icmp == 0, f"{icmp} echo requests with a bad IPv4 checksum answered"
# net_af_packet's socket reassembles fragments in the kernel before pboxd
# sees them: the lone fragments never arrive (the kernel discards them after
# its reassembly timeout), the n split datagrams arrive whole and longer
# than the MTU, and are dropped as fragment
assert d["fragment"] == n, f"fragment {d['fragment']} != {n}"
assert d["no_job"] == 0 and d["bad_len"] == 0, "a damaged datagram got past the checks"
PY
# an echo request the kernel fragments (1800 bytes at MTU 1500) reaches
# pboxd reassembled beyond the MTU: dropped as fragment, not answered with
# a reply the port cannot send (it was counted as icmp and tx)
ctl --json stats > "$WORKDIR/before.json"
in_wk ping -c 2 -s 1800 -W 1 -q $BOX_IP > /dev/null && die "an 1800-byte echo was answered beyond the MTU"
sleep 0.5
ctl --json stats > "$WORKDIR/after.json"
python3 - "$WORKDIR/before.json" "$WORKDIR/after.json" <<'PY' || die "oversized echo not dropped as fragment"
import json, sys
b, a = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
frag = a["drops"]["fragment"] - b["drops"].get("fragment", 0)
icmp = sum(l["icmp"] for l in a["lcores"]) - sum(l["icmp"] for l in b["lcores"])
assert frag == 2 and icmp == 0, f"fragment {frag} (want 2), icmp {icmp} (want 0); drops { {k: v - b['drops'].get(k, 0) for k, v in a['drops'].items() if v != b['drops'].get(k, 0)} }"
PY
ctl --json stats > "$WORKDIR/before.json"
workers 4 clean "$WORKDIR/clean" --minbytes 4 --maxbytes 4M --iters 2 --check
wait_workers 60 || { tail -n 5 "$WORKDIR"/clean.*.log; die "allreduce failed"; }
ctl --json stats > "$WORKDIR/after.json"
python3 - "$WORKDIR/before.json" "$WORKDIR/after.json" <<'PY' || die "clean run dropped or did not verify"
import json, sys
b, a = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
d = {k: a["drops"][k] - b["drops"].get(k, 0) for k in a["drops"]}
assert not any(d.values()), f"clean run dropped: { {k: v for k, v in d.items() if v} }"
u = sum(l["csum_unfilled"] for l in a["lcores"]) - sum(l["csum_unfilled"] for l in b["lcores"])
print(f"clean run: no drops, {u} UDP checksums left unfilled by the veth, accepted")
PY
box_stop || die "pboxd exited non-zero"
echo "checksum: bad checksums and fragments dropped and counted; clean job exact with no drops"
