#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# hugepages.sh - reserve 2 MiB hugepages for pboxd on every NUMA node and
# mount hugetlbfs at /dev/hugepages, through DPDK's dpdk-hugepages.py
# (Debian's package `dpdk`) when it is installed, else through sysfs
# directly. Idempotent: running it again with the same N changes nothing.
# Needs root.
set -eu

usage() {
	cat <<USAGE
usage: hugepages.sh [N]

Reserve N 2 MiB hugepages on each NUMA node (default 1024 = 2 GiB per node)
and mount hugetlbfs at /dev/hugepages unless it is mounted already. Uses
dpdk-hugepages.py (package dpdk: --pagesize 2M --reserve SIZE --node NODE,
then --mount) when installed, else writes
/sys/devices/system/node/node*/hugepages/hugepages-2048kB/nr_hugepages and
mounts hugetlbfs itself. A node that has N pages already is not touched.
Prints what each node got. Needs root (e.g. sudo deploy/hugepages.sh 2048).

DPDK_HUGEPAGES=PATH names the tool; DPDK_HUGEPAGES=none uses sysfs even
where the tool is installed.

pboxd allocates its mbuf pools and the memory of every admitted job from
hugepages: plan for max-jobs x max-job-bytes plus the mbuf pools
(see docs/operations.md). The reservation does not survive a reboot: run
this at boot (before pboxd.service) or use the kernel command line
(hugepagesz=2M hugepages=N).
USAGE
}

case ${1:-} in
-h|--help) usage; exit 0 ;;
esac
N=${1:-1024}
if ! [[ $N =~ ^[0-9]+$ ]]; then
	echo "hugepages.sh: '$N' is not a number of pages (see --help)" >&2
	exit 2
fi
if [ $# -gt 1 ]; then
	echo "hugepages.sh: too many arguments (see --help)" >&2
	exit 2
fi
if [ "$(id -u)" != 0 ]; then
	echo "hugepages.sh: needs root to write /sys and mount hugetlbfs (try: sudo $0 $N)" >&2
	exit 1
fi

TOOL=${DPDK_HUGEPAGES:-$(command -v dpdk-hugepages.py || true)}
[ "$TOOL" = none ] && TOOL=
if [ -n "$TOOL" ] && [ ! -x "$TOOL" ]; then
	echo "hugepages.sh: $TOOL is not an executable (DPDK_HUGEPAGES)" >&2
	exit 2
fi
[ -n "$TOOL" ] && echo "hugepages.sh: using $TOOL"

nodes=(/sys/devices/system/node/node[0-9]*)
if [ ! -d "${nodes[0]}" ]; then
	# No NUMA information (e.g. some VMs): use the global knob.
	nodes=()
fi
rc=0
reserve() { # reserve FILE LABEL [NODE]
	local f=$1 label=$2 node=${3:-} have
	if [ ! -w "$f" ]; then
		echo "hugepages.sh: $f missing: the kernel has no 2 MiB hugepage support" >&2
		return 1
	fi
	have=$(cat "$f")
	if [ "$have" != "$N" ]; then
		if [ -n "$TOOL" ]; then
			# it exits 1 when it got fewer pages: said below, with the remedy
			"$TOOL" --pagesize 2M --reserve "$((N * 2))M" ${node:+--node "$node"} >/dev/null 2>&1 || true
		else
			echo "$N" > "$f"
		fi
		have=$(cat "$f")
	fi
	if [ "$have" -lt "$N" ]; then
		echo "hugepages.sh: $label: only $have of $N pages (memory fragmented or too small;" \
		     "reserve at boot with hugepages=N on the kernel command line)" >&2
		return 1
	fi
	echo "hugepages.sh: $label: $have x 2 MiB pages"
}
if [ ${#nodes[@]} -gt 0 ]; then
	for n in "${nodes[@]}"; do
		reserve "$n/hugepages/hugepages-2048kB/nr_hugepages" "$(basename "$n")" "${n##*/node}" || rc=1
	done
else
	reserve /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages "system" || rc=1
fi

mounted() {
	awk '$2 == "/dev/hugepages" && $3 == "hugetlbfs" { found = 1 } END { exit !found }' /proc/mounts
}
if mounted; then
	echo "hugepages.sh: hugetlbfs already mounted at /dev/hugepages"
else
	mkdir -p /dev/hugepages
	if [ -n "$TOOL" ]; then
		"$TOOL" --pagesize 2M --mount --directory /dev/hugepages >/dev/null
	else
		mount -t hugetlbfs -o pagesize=2M nodev /dev/hugepages
	fi
	mounted || { echo "hugepages.sh: cannot mount hugetlbfs at /dev/hugepages" >&2; exit 1; }
	echo "hugepages.sh: mounted hugetlbfs at /dev/hugepages"
fi
exit $rc
