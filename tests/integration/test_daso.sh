#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_daso.sh - pbox.torch.DASO (docs/pytorch.md "DASO") against the real
# pboxd on DPDK net_af_packet: torchrun with 4 ranks taken as 2 hosts of 2
# (tests/integration/daso_check.py): the ranks of a host agree every step,
# all ranks agree at each global average through the box, the hosts
# drift between them, the period grows as the loss settles, bad
# arguments raise. Skips (77) without torch.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
torch_test_up "$0"
timeout -k 5 240 ip netns exec "$NS_WK" env -u PBOX_JOB -u TORCHELASTIC_RUN_ID \
	PBOX_CONTROL="$CONTROL" PBOX_LIB="$PBOX_LIB" PYTHONPATH="$PYTHONPATH" \
	"$PY" -m torch.distributed.run --nproc_per_node 4 --master_addr 127.0.0.1 \
	--master_port 29660 --redirects 1 --tee 1 --log_dir "$WORKDIR/tr" \
	tests/integration/daso_check.py > "$WORKDIR/daso.log" 2>&1
rc=$?
grep -h "daso:" "$WORKDIR/daso.log" | sort -u >&2
if [ $rc -ne 0 ] || ! grep -q "daso: [0-9]* passed, 0 failed" "$WORKDIR/daso.log"; then
	tail -30 "$WORKDIR/daso.log"
	die "DASO check: rc=$rc"
fi
box_stop || die "pboxd did not stop cleanly"
log "PASS test_daso"
