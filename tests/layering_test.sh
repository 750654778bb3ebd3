#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# layering_test.sh - the layering check must fail when a floor reaches up:
# on a copy of the tree, common/wire.h includes control/jobs.h,
# client/core/ctrl.c includes a DPDK header, client/transport/udp.c
# includes a header of the core room above it, and
# dataplane/engine_control.h (the control plane's façade, through
# dataplane/dp.h) includes dataplane/engine.h; tests/layering.sh must name
# all four lines and exit 1, after passing on the unchanged copy.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "layering_test: FAIL: $*"; exit 1; }

for d in common nic dataplane control client gpu tools include; do
	[ -d "$here/$d" ] && cp -r "$here/$d" "$tmp/"
done
out=$(bash "$here/tests/layering.sh" "$tmp") || fail "the unchanged tree fails: $out"

sed -i '0,/#include/s//#include "control\/jobs.h"\n#include/' "$tmp/common/wire.h"
sed -i '0,/#include/s//#include <rte_mbuf.h>\n#include/' "$tmp/client/core/ctrl.c"
sed -i '0,/#include/s//#include "client\/core\/client.h"\n#include/' "$tmp/client/transport/udp.c"
sed -i '0,/#include/s//#include "dataplane\/engine.h"\n#include/' "$tmp/dataplane/engine_control.h"
out=$(bash "$here/tests/layering.sh" "$tmp"); rc=$?
[ $rc = 1 ] || fail "exit $rc, not 1, with common/ including control/: $out"
grep -q '^common/wire.h:[0-9]*: common/ may not include "control/jobs.h"' <<<"$out" ||
	fail "common/wire.h's include of control/jobs.h not named: $out"
grep -q "^client/core/ctrl.c:[0-9]*: client/ may not include DPDK's <rte_mbuf.h>" <<<"$out" ||
	fail "client/core/ctrl.c's DPDK include not named: $out"
grep -q '^client/transport/udp.c:[0-9]*: client/transport/ may not include "client/core/client.h"' <<<"$out" ||
	fail "client/transport/udp.c's include of the core room not named: $out"
grep -q '^dataplane/engine_control.h:[0-9]*: control/ sees "dataplane/engine.h" through dataplane/dp.h' <<<"$out" ||
	fail "dataplane/engine_control.h's include of engine.h not named: $out"
echo "layering_test: 4 passed, 0 failed"
