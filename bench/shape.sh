#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# shape.sh - links at a rate each way, on the switch's side, for the
# benchmarks where links are the limit (docs/performance.md "Where links
# are the limit"): sourced by bench/compare/compare.sh and
# bench/daso/daso_compare.sh. A bridge port's egress (toward its host)
# gets a tbf; its ingress (from the host) is redirected by a u32 filter
# and mirred to an ifb with the same tbf: so the rate holds for every
# transport, AF_XDP included, which skips the host's own qdiscs.
# Needs NS_SW (the bridge's namespace), MTU (the links') and die().
# COMPARE_SHAPE_UP=0: the download alone is shaped (no ifb: what the
# upload's shaping costs in CPU and time, measured apart).
# COMPARE_SHAPE_LIMIT_MS=Q: each tbf's queue is Q ms at the rate (default
# max(4 MiB, 50 ms): a deep-buffered port, see the header of compare.sh).

# rate_bps RATE: tc's rate (bit, kbit, mbit, gbit: powers of 1000) in bit/s
rate_bps() {
	[[ $1 =~ ^([0-9]+)(\.([0-9]+))?(bit|kbit|mbit|gbit)$ ]] || return 1
	local m=1
	case ${BASH_REMATCH[4]} in kbit) m=1000 ;; mbit) m=1000000 ;; gbit) m=1000000000 ;; esac
	awk -v v="${BASH_REMATCH[1]}.${BASH_REMATCH[3]:-0}" -v m=$m 'BEGIN { r = v * m; if (r < 1000000) exit 1; printf "%d\n", r }'
}
SHAPED=()                      # "port ifb" per shaped link, for shape_down
shape_burst() { awk -v r="$1" 'BEGIN { b = int(r / 8 / 1000); print (b > 65536 ? b : 65536) }'; }
shape_limit() { awk -v r="$1" -v q="${COMPARE_SHAPE_LIMIT_MS:-}" -v m=$((16 * (MTU + 14))) 'BEGIN {
	if (q != "") { b = int(r / 8 * q / 1000); print (b > m ? b : m) }
	else { b = int(r / 8 * 50 / 1000); print (b > 4194304 ? b : 4194304) } }'; }
# shape_link PORT IFB BPS: bridge port PORT (in NS_SW) at BPS each way: a tbf
# on its egress (toward the host), its ingress redirected to ifb IFB with a tbf
shape_link() {
	local port=$1 ifb=$2 bps=$3 b l
	b=$(shape_burst "$bps"); l=$(shape_limit "$bps")
	SHAPED+=("$port $ifb")
	tc -n "$NS_SW" qdisc add dev "$port" root tbf rate "${bps}bit" burst "$b" limit "$l" ||
		die "cannot shape $port to ${bps} bit/s (tc tbf)"
	[ "${COMPARE_SHAPE_UP:-1}" = 0 ] && return 0
	ip -n "$NS_SW" link add "$ifb" type ifb && ip -n "$NS_SW" link set "$ifb" mtu "$MTU" up &&
	tc -n "$NS_SW" qdisc add dev "$ifb" root tbf rate "${bps}bit" burst "$b" limit "$l" &&
	tc -n "$NS_SW" qdisc add dev "$port" handle ffff: ingress &&
	tc -n "$NS_SW" filter add dev "$port" parent ffff: protocol all prio 1 u32 match u32 0 0 \
		action mirred egress redirect dev "$ifb" ||
		die "cannot shape $port to ${bps} bit/s (tc tbf, ingress, u32, mirred, ifb)"
}
# shape_down: every qdisc and ifb shape_link made, by name (an EXIT trap's
# work; the switch's namespace goes after it)
shape_down() {
	local e port ifb
	for e in "${SHAPED[@]}"; do
		read -r port ifb <<< "$e"
		tc -n "$NS_SW" qdisc del dev "$port" ingress 2>/dev/null
		tc -n "$NS_SW" qdisc del dev "$port" root 2>/dev/null
		ip -n "$NS_SW" link del "$ifb" 2>/dev/null
	done
	SHAPED=()
}
# shape_stats: bytes and drops of every shaped link's tbfs (down: the port's, up: the ifb's)
shape_stats() {
	local e port ifb
	for e in "${SHAPED[@]}"; do
		read -r port ifb <<< "$e"
		printf '%s ' "$port"
		tc -n "$NS_SW" -s qdisc show dev "$port" root | awk '/Sent/ { printf "down %s bytes %s drops ", $2, $7 + 0 }'
		tc -n "$NS_SW" -s qdisc show dev "$ifb" root 2>/dev/null | awk '/Sent/ { printf "up %s bytes %s drops", $2, $7 + 0 }'
		echo
	done
}
