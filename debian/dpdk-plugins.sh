#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# debian/dpdk-plugins.sh MULTIARCH - pboxd's ${dpdk:Depends}: the Debian
# packages of the DPDK drivers pboxd needs at run time, which the EAL
# loads as plugins from its plugin directory (so dpkg-shlibdeps, which
# sees only the libraries pboxd links, cannot name them): the vdev and
# PCI buses, the ring mempool (every mbuf pool), the af_packet and af_xdp
# ports. Found by the files the build machine's DPDK installed, so the
# names follow its ABI (librte-bus-vdev23 for DPDK 22.11).
set -eu
ma=$1
deps=
for drv in bus_vdev bus_pci mempool_ring net_af_packet net_af_xdp; do
	f=$(ls /usr/lib/"$ma"/dpdk/pmds-*/librte_"$drv".so.* 2>/dev/null | head -1)
	[ -n "$f" ] || { echo "dpdk-plugins.sh: no DPDK plugin librte_$drv (libdpdk-dev installs them)" >&2; exit 1; }
	pkg=$(dpkg -S "$f" | sed -n '1s/:.*//p')
	[ -n "$pkg" ] || { echo "dpdk-plugins.sh: no package owns $f" >&2; exit 1; }
	deps="$deps${deps:+, }$pkg"
done
echo "$deps"
