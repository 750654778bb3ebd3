#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_hugepages.sh - deploy/hugepages.sh on this machine: with DPDK's
# dpdk-hugepages.py (package dpdk) it reserves through the tool, and
# `dpdk-hugepages.py --show` sees the pages; a second run with the same N
# changes nothing; DPDK_HUGEPAGES=none takes the sysfs path; bad arguments
# are refused. It reserves two pages per node beyond what each node has
# and puts every count back, and unmounts /dev/hugepages if it mounted it.
# Skipped (77) where the kernel cannot give two more pages.
set -u
cd "$(dirname "$0")/../.."
log() { printf '%s\n' "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }
if [ "$(id -u)" != 0 ]; then
	log "$0 needs root (it writes /sys and mounts hugetlbfs)"; exit 2
fi
TOOL=$(command -v dpdk-hugepages.py || true)
files=(/sys/devices/system/node/node[0-9]*/hugepages/hugepages-2048kB/nr_hugepages)
[ -e "${files[0]}" ] || files=(/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)
[ -w "${files[0]}" ] || { log "SKIP: no 2 MiB hugepage support in this kernel"; exit 77; }

# What was there before, to put back; N must suit every node.
before=() max=0
for f in "${files[@]}"; do
	before+=("$(cat "$f")")
	[ "$(cat "$f")" -gt $max ] && max=$(cat "$f")
done
was_mounted=0
grep -q ' /dev/hugepages hugetlbfs ' /proc/mounts && was_mounted=1
had_dir=0
[ -d /dev/hugepages ] && had_dir=1
restore() {
	local rc=$? i=0
	for f in "${files[@]}"; do echo "${before[$i]}" > "$f"; i=$((i + 1)); done
	if [ $was_mounted = 0 ] && grep -q ' /dev/hugepages hugetlbfs ' /proc/mounts; then
		umount /dev/hugepages
	fi
	[ $had_dir = 0 ] && rmdir /dev/hugepages 2>/dev/null
	return $rc
}
N=$((max + 2))
OUT=$(mktemp /tmp/pbox-hp.XXXXXX)
trap 'rm -f "$OUT" "$OUT.show"; restore' EXIT

pages_ok() { # pages_ok COUNT: every node has COUNT pages
	for f in "${files[@]}"; do [ "$(cat "$f")" = "$1" ] || return 1; done
}

# the tool's path, then the same N again
if [ -n "$TOOL" ]; then
	"$TOOL" --show || die "dpdk-hugepages.py --show failed"
	bash deploy/hugepages.sh $N > "$OUT" 2>&1
	rc=$?
	cat "$OUT"
	if [ $rc != 0 ] && grep -q "only .* of $N pages" "$OUT"; then
		log "SKIP: this machine cannot reserve $N hugepages per node"; exit 77
	fi
	[ $rc = 0 ] || die "hugepages.sh $N failed"
	grep -q "using $TOOL" "$OUT" || die "hugepages.sh did not use $TOOL"
	pages_ok $N || die "a node has not $N pages"
	"$TOOL" --show | tee "$OUT.show"
	grep -Eq "^[0-9]* *$N +2Mb" "$OUT.show" || grep -Eq "^$N +2Mb" "$OUT.show" ||
		die "dpdk-hugepages.py --show does not list $N pages of 2Mb"
	grep -q ' /dev/hugepages hugetlbfs ' /proc/mounts || die "/dev/hugepages not mounted"
	bash deploy/hugepages.sh $N > "$OUT" 2>&1 || { cat "$OUT"; die "second run failed"; }
	grep -q "already mounted" "$OUT" || die "second run: not 'already mounted'"
	pages_ok $N || die "second run changed the pages"
else
	log "dpdk-hugepages.py not installed (package dpdk): the sysfs path only"
fi

# the sysfs path, one page more, then back to N
DPDK_HUGEPAGES=none bash deploy/hugepages.sh $((N + 1)) > "$OUT" 2>&1
rc=$?
cat "$OUT"
if [ $rc != 0 ] && grep -q "only .* of $((N + 1)) pages" "$OUT"; then
	log "SKIP: this machine cannot reserve $((N + 1)) hugepages per node"; exit 77
fi
[ $rc = 0 ] || die "DPDK_HUGEPAGES=none hugepages.sh $((N + 1)) failed"
grep -q "using" "$OUT" && die "DPDK_HUGEPAGES=none still used a tool"
pages_ok $((N + 1)) || die "sysfs path: a node has not $((N + 1)) pages"
bash deploy/hugepages.sh $N > /dev/null 2>&1 || die "back to $N failed"
pages_ok $N || die "back to $N: a node has not $N pages"

# bad arguments
bash deploy/hugepages.sh lots > /dev/null 2>&1; [ $? = 2 ] || die "'lots' was not refused (2)"
bash deploy/hugepages.sh 1 2 > /dev/null 2>&1; [ $? = 2 ] || die "two arguments not refused (2)"
DPDK_HUGEPAGES=/nonexistent bash deploy/hugepages.sh $N > /dev/null 2>&1
[ $? = 2 ] || die "a missing DPDK_HUGEPAGES tool was not refused (2)"
echo "hugepages: ok"
