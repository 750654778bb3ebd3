/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rawframe.h - what libpbox's raw transports (AF_XDP, verbs) share: the
 * path to the box as the kernel sees it (interface, addresses, the next
 * hop's MAC), and pbox datagrams written as, and read from, whole
 * Ethernet/IPv4/UDP frames. The frame code itself is common/frame.c, the
 * box's own.
 *
 * The path comes from the kernel, so a raw transport goes where the UDP
 * transport would: the interface and next hop from the kernel's own route
 * lookup (RTM_GETROUTE, as `ip route get`: policy rules and the local
 * table included), the source address from a connected UDP socket, the
 * next hop's MAC from the neighbour table (/proc/net/arp), which the
 * kernel is asked to fill (a datagram to the discard port) when the entry
 * is missing. IPv4 only.
 */
#ifndef PBOX_CLIENT_RAWFRAME_H
#define PBOX_CLIENT_RAWFRAME_H

#include <net/if.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "common/wire.h"

#define RAWFRAME_HDRS 42          /* Ethernet + IPv4 + UDP */

struct netpath {
	char ifname[IF_NAMESIZE];
	int ifindex;
	uint32_t mtu;                 /* the interface's */
	struct in_addr src;           /* our address toward the box */
	struct in_addr nexthop;       /* the gateway, or the box itself */
	uint8_t src_mac[6], dst_mac[6];
};

/*
 * Resolve the path to dst, waiting up to wait_ms for the next hop's MAC.
 * 0, or PBOX_ENOTSUP (no route, or not an Ethernet interface: loopback),
 * PBOX_ETIMEDOUT (the MAC did not resolve: the next hop does not answer
 * ARP), PBOX_ESYS; err names the interface and address.
 */
int netpath_resolve(const struct sockaddr_in *dst, int wait_ms, struct netpath *np,
		    char *err, size_t errlen);

/*
 * The paths to eps[0..neps) (netpaths.c) into np[0..neps): all must
 * leave through one interface and source address (else PBOX_ENOTSUP
 * naming both, and tp, the transport); each has its own next hop. 0 or
 * the codes of netpath_resolve.
 */
int netpath_resolve_eps(const struct sockaddr_in *eps, unsigned neps, int wait_ms,
			const char *tp, struct netpath *np, char *err, size_t errlen);

/*
 * Write the frame of one pbox datagram (wire header h, then len payload
 * bytes) from np's source, UDP port sport, to dst, into out (room for
 * RAWFRAME_HDRS + WIRE_HDR_LEN + len bytes): IPv4 and UDP checksums
 * computed. Returns the frame's length.
 */
size_t rawframe_build(uint8_t *out, const struct netpath *np, uint16_t sport,
		      const struct sockaddr_in *dst, const struct wire_msg *h,
		      const void *payload, uint32_t len);

/*
 * The pbox datagram in a received frame of len bytes, if it is UDP/IPv4 to
 * np->src port `port` with valid checksums: 0 and *dgram, *dlen (into the
 * frame) and its sender's *src_ip, *src_port (network order). Else a
 * negative drop reason (common/drops.h).
 */
int rawframe_parse(const uint8_t *frame, size_t len, const struct netpath *np, uint16_t port,
		   const uint8_t **dgram, uint32_t *dlen, uint32_t *src_ip, uint16_t *src_port);

#endif
