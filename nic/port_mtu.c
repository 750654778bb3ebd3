/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_mtu.c - can a port carry frames of the MTU pboxd is to use? Asked of
 * the PMD (max_mtu, max_rx_pktlen), and for net_af_packet, whose PMD
 * reports a fixed 1518-byte limit yet moves what its ring frames and its
 * kernel interface carry, of those two: the ring's frame size (the vdev's
 * framesz=, 2048 by default) and the interface's MTU. A port that cannot
 * carry the MTU makes pboxd refuse to start, naming what to change, instead
 * of losing every larger frame later.
 */
#include "nic/port.h"

#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_ethdev.h>
#include <rte_kvargs.h>

/* net_af_packet's ring frame: a TPACKET_V2 header and the sockaddr_ll,
 * aligned, come before the Ethernet frame (the kernel's tpacket_rcv puts
 * the MAC header at offset 66 for 14-byte Ethernet headers). */
#define AF_PACKET_FRAME_OVERHEAD 66u
#define AF_PACKET_DEFAULT_FRAMESZ 2048u

/* The MTU of kernel interface ifname in this network namespace; 0 if it
 * cannot be read. */
static uint32_t kernel_mtu(const char *ifname)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	uint32_t mtu = 0;

	if (fd < 0)
		return 0;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(fd, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0)
		mtu = (uint32_t)ifr.ifr_mtu;
	close(fd);
	return mtu;
}

/* net_af_packet: 0 if its frames and interface carry mtu, else -EINVAL
 * with the vdev arguments and interface MTU to give in err. */
static int af_packet_check(const struct rte_eth_dev_info *di, uint16_t pid, const char *name,
			   uint32_t mtu, char *err, size_t errlen)
{
	const struct rte_devargs *da = rte_dev_devargs(di->device);
	struct rte_kvargs *kv = da && da->args ? rte_kvargs_parse(da->args, NULL) : NULL;
	const char *fs = kv ? rte_kvargs_get(kv, "framesz") : NULL;
	const char *iface = kv ? rte_kvargs_get(kv, "iface") : NULL;
	uint32_t framesz = fs ? (uint32_t)strtoul(fs, NULL, 0) : AF_PACKET_DEFAULT_FRAMESZ;
	uint32_t need = mtu + RTE_ETHER_HDR_LEN + AF_PACKET_FRAME_OVERHEAD;
	uint32_t kmtu = iface ? kernel_mtu(iface) : 0;
	char ifname[IFNAMSIZ] = "";
	int rc = 0;

	if (iface)
		snprintf(ifname, sizeof(ifname), "%s", iface);
	rte_kvargs_free(kv);
	if (framesz < need) {
		/* a power of two at least `need`, with a block holding two frames */
		uint32_t fit = 2048;
		while (fit < need)
			fit *= 2;
		snprintf(err, errlen, "port %u (%s): MTU %u needs ring frames of at least %u bytes,"
			 " the vdev has framesz=%u: add framesz=%u,blocksz=%u to its --vdev"
			 " (or use a smaller --mtu)", pid, name, mtu, need, framesz, fit, 2 * fit);
		rc = -EINVAL;
	} else if (kmtu && kmtu < mtu) {
		snprintf(err, errlen, "port %u (%s): MTU %u, but its interface %s has MTU %u:"
			 " ip link set %s mtu %u (or use --mtu %u)", pid, name, mtu, ifname, kmtu,
			 ifname, mtu, kmtu);
		rc = -EINVAL;
	}
	return rc;
}

int port_mtu_check(const struct rte_eth_dev_info *di, uint16_t pid, const char *name,
		   uint32_t mtu, int *on_device, char *err, size_t errlen)
{
	uint32_t frame = mtu + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;

	*on_device = 0;
	if (mtu < di->min_mtu) {
		snprintf(err, errlen, "port %u (%s): MTU %u is below its minimum %u",
			 pid, name, mtu, di->min_mtu);
		return -EINVAL;
	}
	if (di->driver_name && strcmp(di->driver_name, "net_af_packet") == 0)
		return af_packet_check(di, pid, name, mtu, err, errlen);
	if (mtu > di->max_mtu || frame > di->max_rx_pktlen) {
		snprintf(err, errlen, "port %u (%s): MTU %u is above what its PMD (%s) takes:"
			 " MTU %u, frames of %u bytes; use --mtu %u or less", pid, name, mtu,
			 di->driver_name ? di->driver_name : "?", di->max_mtu, di->max_rx_pktlen,
			 di->max_mtu < di->max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN ?
			 di->max_mtu : di->max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN);
		return -EINVAL;
	}
	*on_device = 1;
	return 0;
}
