#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_checkpoint.sh - PS checkpoints on a real pboxd (docs/operations.md
# "Checkpoints of PS keys"): pboxd refuses to start with a --checkpoint-dir
# others can write; `pboxctl job save` into a directory where a link to a
# root-owned file was planted at the temporary name leaves that file as it
# was and writes regular files (issue 44.3); a restore from a FIFO is
# refused at key_declare at once, naming it (issue 44.4); with
# --checkpoint-dir and --checkpoint-every 1 a job's periodic save lands in
# DIR/<job>/ and a restarted pboxd restores the job created again with
# the same name: weights, and the step count key_declare reports
# (issue 39.4). The worker is tests/integration/ckpt_prog.c, built here
# against the tree's libpbox.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
[ -e "$BUILD/libpbox.so" ] || die "$BUILD/libpbox.so missing: run make first"
build_prog ckpt_prog
prog() { in_wk timeout 60 "$WORKDIR/ckpt_prog" "$CONTROL" "$@"; }
topo_up

# a checkpoint directory others can write: pboxd does not start (status 2)
mkdir -m 0777 "$WORKDIR/open"; chmod 0777 "$WORKDIR/open"
timeout 20 "$BUILD/pboxd" --no-huge -m 64 --no-pci --no-shconf --file-prefix=pboxck$TAG -- \
	--ip 0:$BOX_IP/24 --rpc-socket none --checkpoint-dir "$WORKDIR/open" > "$WORKDIR/open.log" 2>&1
rc=$?
[ $rc = 2 ] || die "pboxd with a world-writable --checkpoint-dir exited $rc, not 2: $(cat "$WORKDIR/open.log")"
grep -q "writable by others" "$WORKDIR/open.log" || die "the refusal does not say why: $(cat "$WORKDIR/open.log")"

CK=$WORKDIR/ckpt
mkdir -m 0700 "$CK" "$WORKDIR/save" "$WORKDIR/fifo"
box_start af_packet --checkpoint-dir "$CK" --checkpoint-every 1

# train 3 steps and hold the job
prog ck1 train "$WORKDIR/go" > "$WORKDIR/train.log" 2>&1 &
TRAIN=$!; PIDS+=($TRAIN)
for _ in $(seq 100); do grep -q TRAINED "$WORKDIR/train.log" && break; sleep 0.1; done
grep -q TRAINED "$WORKDIR/train.log" || die "the worker did not train: $(cat "$WORKDIR/train.log")"

# job save with a link planted at the temporary name (as if a user could
# write there): the link's target stays as it was
echo precious > "$WORKDIR/victim"
ln -s "$WORKDIR/victim" "$WORKDIR/save/key-1.pboxckpt.tmp"
ctl job save ck1 "$WORKDIR/save" > "$WORKDIR/save.txt" 2>&1 || die "job save failed: $(cat "$WORKDIR/save.txt")"
[ "$(cat "$WORKDIR/victim")" = precious ] || die "job save wrote through the planted link"
[ -f "$WORKDIR/save/key-1.pboxckpt" ] && [ ! -L "$WORKDIR/save/key-1.pboxckpt" ] || die "no regular checkpoint file"
[ -e "$WORKDIR/save/key-1.pboxckpt.tmp" ] && die "a temporary file stayed"
# into a directory others can write: refused, naming its mode
chmod 0777 "$WORKDIR/save"
ctl job save ck1 "$WORKDIR/save" > "$WORKDIR/save2.txt" 2>&1 && die "job save into a 0777 directory succeeded"
grep -q "writable by others" "$WORKDIR/save2.txt" || die "refusal unnamed: $(cat "$WORKDIR/save2.txt")"
chmod 0700 "$WORKDIR/save"

# the periodic save: within 3 s of the steps
for _ in $(seq 50); do [ -f "$CK/ck1/key-1.pboxckpt" ] && break; sleep 0.1; done
[ -f "$CK/ck1/key-1.pboxckpt" ] || die "no periodic checkpoint in $CK/ck1: $(ls -la "$CK" "$CK/ck1" 2>&1)"
touch "$WORKDIR/go"
wait $TRAIN || die "the worker failed: $(cat "$WORKDIR/train.log")"

# a FIFO as a checkpoint: refused at once, naming it; the box goes on
mkfifo "$WORKDIR/fifo/key-1.pboxckpt"
ctl job create fifojob --world 1 --restore "$WORKDIR/fifo" > /dev/null || die "job create --restore failed"
start=$SECONDS
prog fifojob refused "is not a regular file" > "$WORKDIR/fifo.log" 2>&1 || die "FIFO restore: $(cat "$WORKDIR/fifo.log")"
[ $((SECONDS - start)) -le 5 ] || die "the refusal took $((SECONDS - start)) s"
ctl status > /dev/null || die "the box does not answer after the FIFO"

# restart pboxd: the job of the same name starts from its checkpoint
box_stop || die "pboxd did not stop cleanly"
box_start af_packet --checkpoint-dir "$CK" --checkpoint-every 1
prog ck1 resume > "$WORKDIR/resume.log" 2>&1 || die "resume: $(cat "$WORKDIR/resume.log")"
grep -q "RESUMED 3" "$WORKDIR/resume.log" || die "resume: $(cat "$WORKDIR/resume.log")"
cat "$WORKDIR/resume.log" "$WORKDIR/fifo.log"
box_stop || die "pboxd did not stop cleanly"
log "PASS test_checkpoint"
