/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_mtu.c - can a port carry frames of the MTU pboxd is to use, and how
 * large must its mbufs be? Asked of the PMD (max_mtu, max_rx_pktlen), and
 * of what the PMD's own arithmetic needs where it reports no limit or the
 * wrong one:
 * - net_af_packet reports a fixed 1518-byte limit yet moves what its ring
 *   frames and its kernel interface carry: the ring's frame size (the
 *   vdev's framesz=, 2048 by default) and the interface's MTU. It copies a
 *   whole ring frame into one mbuf, so its mbufs follow framesz, not the MTU.
 * - net_af_xdp makes each mbuf one UMEM chunk, which the kernel takes only
 *   up to a page; the frame shares it with the mbuf and two headrooms.
 * A port that cannot carry the MTU makes pboxd refuse to start, naming what
 * to change, instead of failing in the PMD's queue set-up or losing every
 * larger frame later.
 */
#include "nic/port.h"

#include <errno.h>
#include <inttypes.h>
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
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "common/errmsg.h"

/* net_af_packet's ring frame: a TPACKET_V2 header and the sockaddr_ll,
 * aligned, come before the Ethernet frame (the kernel's tpacket_rcv puts
 * the MAC header at offset 66 for 14-byte Ethernet headers). */
#define AF_PACKET_FRAME_OVERHEAD 66u
#define AF_PACKET_DEFAULT_FRAMESZ 2048u
/* What net_af_packet (DPDK 22.11, eth_rx_queue_setup) requires of an mbuf
 * after its headroom: framesz less the 32 bytes of TPACKET2_HDRLEN that
 * are not the sockaddr_ll ("N bytes will not fit in mbuf"). */
#define AF_PACKET_MBUF_SLACK 32u

/* The kernel's headroom before an AF_XDP frame in its UMEM chunk
 * (XDP_PACKET_HEADROOM), after the chunk headroom net_af_xdp declares. */
#define AF_XDP_KERNEL_HEADROOM 256u

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

/* A NIC's data room: the frame plus slack, in 2 KiB steps (some NICs
 * program their rx buffers in 1 KiB units: ixgbe). */
static uint32_t nic_room(uint32_t mtu)
{
	uint32_t room = RTE_PKTMBUF_HEADROOM +
			RTE_ALIGN_CEIL(mtu + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN + 64u, 2048u);

	return room < RTE_MBUF_DEFAULT_BUF_SIZE ? RTE_MBUF_DEFAULT_BUF_SIZE : room;
}

/* net_af_packet: 0 and *room (a whole ring frame's worth) if its frames
 * and interface carry mtu, else -EINVAL with the vdev arguments and
 * interface MTU to give in err. */
static int af_packet_check(const struct rte_eth_dev_info *di, uint16_t pid, const char *name,
			   uint32_t mtu, uint16_t *room, char *err, size_t errlen)
{
	const struct rte_devargs *da = rte_dev_devargs(di->device);
	struct rte_kvargs *kv = da && da->args ? rte_kvargs_parse(da->args, NULL) : NULL;
	const char *fs = kv ? rte_kvargs_get(kv, "framesz") : NULL;
	const char *iface = kv ? rte_kvargs_get(kv, "iface") : NULL;
	uint32_t framesz = fs ? (uint32_t)strtoul(fs, NULL, 0) : AF_PACKET_DEFAULT_FRAMESZ;
	uint32_t need = mtu + RTE_ETHER_HDR_LEN + AF_PACKET_FRAME_OVERHEAD;
	uint32_t kmtu = iface ? kernel_mtu(iface) : 0;
	/* a ring frame's room (framesz >= need below: the MTU's frame fits) */
	uint64_t fit_room = (uint64_t)RTE_PKTMBUF_HEADROOM + framesz - AF_PACKET_MBUF_SLACK;
	char ifname[IFNAMSIZ] = "";
	int rc = 0;

	if (iface)
		snprintf(ifname, sizeof(ifname), "%s", iface);
	rte_kvargs_free(kv);
	if (fit_room < RTE_MBUF_DEFAULT_BUF_SIZE)
		fit_room = RTE_MBUF_DEFAULT_BUF_SIZE;
	if (framesz < need) {
		/* a power of two at least `need`, with a block holding two frames */
		uint32_t fit = 2048;
		while (fit < need)
			fit *= 2;
		rc = errmsg(err, errlen, -EINVAL,
			    "port %u (%s): MTU %u needs ring frames of at least %u bytes,"
			    " the vdev has framesz=%u: add framesz=%u,blocksz=%u to its --vdev"
			    " (or use a smaller --mtu)", pid, name, mtu, need, framesz, fit,
			    2 * fit);
	} else if (kmtu && kmtu < mtu) {
		rc = errmsg(err, errlen, -EINVAL,
			    "port %u (%s): MTU %u, but its interface %s has MTU %u:"
			    " ip link set %s mtu %u (or use --mtu %u)",
			    pid, name, mtu, ifname, kmtu, ifname, mtu, kmtu);
	} else if (fit_room > UINT16_MAX) {
		/* the largest framesz whose mbufs fit, in the ring's 16-byte units */
		uint32_t most = (UINT16_MAX - RTE_PKTMBUF_HEADROOM + AF_PACKET_MBUF_SLACK) & ~15u;
		rc = errmsg(err, errlen, -EINVAL,
			    "port %u (%s): framesz=%u needs mbufs of %" PRIu64 " bytes"
			    " (net_af_packet copies a whole ring frame into one: headroom %u +"
			    " framesz - %u), above DPDK's %u:"
			    " use framesz=%u or less in its --vdev",
			    pid, name, framesz, fit_room, RTE_PKTMBUF_HEADROOM,
			    AF_PACKET_MBUF_SLACK, UINT16_MAX, most);
	}
	if (rc == 0)
		*room = (uint16_t)fit_room;
	return rc;
}

/* net_af_xdp's data room at mtu: its headroom, the kernel's and the frame
 * (no CRC on AF_XDP), in cache lines, at least DPDK's default. */
static uint32_t af_xdp_room(uint32_t mtu)
{
	uint32_t room = RTE_ALIGN_CEIL(RTE_PKTMBUF_HEADROOM + AF_XDP_KERNEL_HEADROOM + mtu +
				       RTE_ETHER_HDR_LEN, RTE_CACHE_LINE_SIZE);

	return room < RTE_MBUF_DEFAULT_BUF_SIZE ? RTE_MBUF_DEFAULT_BUF_SIZE : room;
}

/* The UMEM chunk net_af_xdp (DPDK 22.11, xdp_umem_configure) registers
 * for an mbuf of this room in pboxd's pool: the mempool object. */
static size_t af_xdp_chunk(uint32_t room)
{
	return rte_mempool_calc_obj_size((uint32_t)sizeof(struct rte_mbuf) + room,
					 PORT_AF_XDP_POOL_FLAGS, NULL);
}

/*
 * net_af_xdp: 0 and *room if an mbuf for mtu is a UMEM chunk the kernel
 * takes, else -EINVAL naming the largest MTU that is. The kernel refuses
 * chunks above a page (xdp_umem_reg: "Failed to create umem" at queue
 * set-up), and writes a frame after the chunk headroom the PMD declares
 * (object header, rte_mbuf, RTE_PKTMBUF_HEADROOM) and its own 256 bytes.
 * The PMD's max_mtu (3542 with 4 KiB pages) counts a 24-byte object
 * header; pboxd's cache-aligned pool has 64 bytes there, which leaves MTU
 * 3506.
 */
static int af_xdp_mtu_check(uint16_t pid, const char *name, uint32_t mtu, uint16_t *room,
			    char *err, size_t errlen)
{
	size_t page = (size_t)getpagesize();
	uint32_t r = af_xdp_room(mtu), most;

	if (af_xdp_chunk(r) <= page) {
		*room = (uint16_t)r;
		return 0;
	}
	for (r = RTE_MBUF_DEFAULT_BUF_SIZE; af_xdp_chunk(r + RTE_CACHE_LINE_SIZE) <= page;
	     r += RTE_CACHE_LINE_SIZE)
		;
	most = r - RTE_PKTMBUF_HEADROOM - AF_XDP_KERNEL_HEADROOM - RTE_ETHER_HDR_LEN;
	return errmsg(err, errlen, -EINVAL,
		      "port %u (%s): MTU %u is above what net_af_xdp takes: %u"
		      " (DPDK 22.11 makes each mbuf one AF_XDP UMEM chunk of at most a %zu-byte"
		      " page, holding the mbuf, %u bytes of headroom, the kernel's %u and the"
		      " frame); use --mtu %u or less", pid, name, mtu, most, page,
		      RTE_PKTMBUF_HEADROOM, AF_XDP_KERNEL_HEADROOM, most);
}

int port_mtu_check(const struct rte_eth_dev_info *di, uint16_t pid, const char *name,
		   uint32_t mtu, int *on_device, uint16_t *room, char *err, size_t errlen)
{
	uint32_t frame = mtu + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
	const char *driver = di->driver_name ? di->driver_name : "";
	int rc;

	*on_device = 0;
	*room = 0;
	if (mtu < di->min_mtu)
		return errmsg(err, errlen, -EINVAL, "port %u (%s): MTU %u is below its minimum %u",
			      pid, name, mtu, di->min_mtu);
	if (strcmp(driver, "net_af_packet") == 0)
		return af_packet_check(di, pid, name, mtu, room, err, errlen);
	if (strcmp(driver, "net_af_xdp") == 0 &&
	    (rc = af_xdp_mtu_check(pid, name, mtu, room, err, errlen)) != 0)
		return rc;
	if (mtu > di->max_mtu || frame > di->max_rx_pktlen) {
		/* the largest MTU both limits allow */
		uint32_t pktlen_mtu = di->max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN;
		uint32_t most = di->max_mtu < pktlen_mtu ? di->max_mtu : pktlen_mtu;
		return errmsg(err, errlen, -EINVAL,
			      "port %u (%s): MTU %u is above what its PMD (%s) takes:"
			      " MTU %u, frames of %u bytes; use --mtu %u or less", pid, name, mtu,
			      di->driver_name ? di->driver_name : "?", di->max_mtu,
			      di->max_rx_pktlen, most);
	}
	if (strcmp(driver, "net_af_xdp") != 0) {
		uint32_t r = nic_room(mtu);
		if (r > UINT16_MAX)
			return errmsg(err, errlen, -EINVAL,
				      "port %u (%s): MTU %u needs mbufs of %u bytes, above"
				      " DPDK's %u; use a smaller --mtu", pid, name, mtu, r,
				      UINT16_MAX);
		*room = (uint16_t)r;
	}
	*on_device = 1;
	return 0;
}
