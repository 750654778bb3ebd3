#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# install-deps.sh - install the Debian 12 packages pbox builds, tests and
# runs with (`make deps`; .ci/run calls it too). Needs root.
set -eu
PKGS="build-essential pkg-config clang libclang-rt-14-dev
      libdpdk-dev dpdk libjansson-dev libcmocka-dev libhwloc-dev
      libibverbs-dev librdmacm-dev ibverbs-utils libbpf-dev libxdp-dev
      iproute2 iputils-ping nftables iptables procps python3 python3-numpy python3-torch
      openmpi-bin libopenmpi-dev python3-matplotlib bash-completion
      debhelper dh-python lintian"
if [ "$(id -u)" != 0 ]; then
	echo "install-deps: needs root to run apt-get (try: sudo make deps)" >&2
	exit 1
fi
missing=$(for p in $PKGS; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"; done)
if [ -z "$missing" ]; then
	echo "install-deps: all packages present"
	exit 0
fi
echo "install-deps: installing" $missing
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing
