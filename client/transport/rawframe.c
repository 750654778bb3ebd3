/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rawframe.c - the path to the box from the kernel's tables, and pbox
 * datagrams as whole frames (rawframe.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "client/transport/net.h"
#include "common/clock.h"
#include "client/transport/rawframe.h"
#include "common/drops.h"
#include "common/frame.h"

#define ARP_FLAG_COMPLETE 0x2
#define DISCARD_PORT 9

/* Ask the kernel's FIB (RTM_GETROUTE, as `ip route get` does: every
 * table, policy rules, local routes) how dst leaves: the interface and the
 * gateway (0.0.0.0 for a directly connected destination). */
static int route_lookup(struct in_addr dst, char ifname[IF_NAMESIZE], struct in_addr *gw)
{
	struct {
		struct nlmsghdr nh;
		struct rtmsg rt;
		char attrs[64];
	} req = {
		.nh = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg)), .nlmsg_type = RTM_GETROUTE,
			.nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 1 },
		.rt = { .rtm_family = AF_INET, .rtm_dst_len = 32 },
	};
	struct rtattr *ra = (struct rtattr *)((char *)&req + NLMSG_ALIGN(req.nh.nlmsg_len));
	union { struct nlmsghdr nh; char buf[4096]; } ans;
	int oif = 0, fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);

	ra->rta_type = RTA_DST;
	ra->rta_len = RTA_LENGTH(sizeof(dst));
	memcpy(RTA_DATA(ra), &dst, sizeof(dst));
	req.nh.nlmsg_len = NLMSG_ALIGN(req.nh.nlmsg_len) + RTA_ALIGN(ra->rta_len);
	gw->s_addr = 0;
	if (fd < 0)
		return PBOX_ESYS;
	struct timeval tv = { .tv_sec = 1 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ssize_t n = send(fd, &req, req.nh.nlmsg_len, 0) < 0 ? -1 : recv(fd, &ans, sizeof(ans), 0);
	close(fd);
	if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct rtmsg)) || !NLMSG_OK(&ans.nh, (size_t)n) ||
	    ans.nh.nlmsg_type != RTM_NEWROUTE)
		return PBOX_ECONNECT;   /* NLMSG_ERROR: no route */
	struct rtmsg *rt = NLMSG_DATA(&ans.nh);
	int len = (int)RTM_PAYLOAD(&ans.nh);
	for (struct rtattr *a = RTM_RTA(rt); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type == RTA_OIF && RTA_PAYLOAD(a) >= sizeof(int))
			memcpy(&oif, RTA_DATA(a), sizeof(int));
		else if (a->rta_type == RTA_GATEWAY && RTA_PAYLOAD(a) >= sizeof(*gw))
			memcpy(gw, RTA_DATA(a), sizeof(*gw));
	}
	return oif > 0 && if_indextoname((unsigned)oif, ifname) ? 0 : PBOX_ECONNECT;
}

/* The complete neighbour entry of ip on ifname in /proc/net/arp. */
static int arp_lookup(struct in_addr ip, const char *ifname, uint8_t mac[6])
{
	FILE *f = fopen("/proc/net/arp", "re");
	char line[256], ips[32], dev[IF_NAMESIZE + 16];
	unsigned type, flags, m[6];
	int found = 0;

	if (!f)
		return PBOX_ESYS;
	while (!found && fgets(line, sizeof(line), f)) {
		/* IP address  HW type  Flags  HW address  Mask  Device */
		if (sscanf(line, "%31s %x %x %x:%x:%x:%x:%x:%x %*s %31s", ips, &type, &flags,
			   &m[0], &m[1], &m[2], &m[3], &m[4], &m[5], dev) != 10)
			continue;
		struct in_addr a;
		if (inet_pton(AF_INET, ips, &a) != 1 || a.s_addr != ip.s_addr ||
		    strcmp(dev, ifname) != 0 || !(flags & ARP_FLAG_COMPLETE))
			continue;
		for (int i = 0; i < 6; i++)
			mac[i] = (uint8_t)m[i];
		found = 1;
	}
	fclose(f);
	return found ? 0 : PBOX_ECONNECT;
}

/* Ask the kernel to resolve ip: one empty datagram to its discard port. */
static void arp_provoke(struct in_addr ip)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr = ip,
				 .sin_port = htons(DISCARD_PORT) };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	if (sendto(fd, "", 0, MSG_DONTWAIT, (struct sockaddr *)&a, sizeof(a)) < 0) {
		/* nothing to do: the lookup below times out and says so */
	}
	close(fd);
}

static int if_facts(struct netpath *np, char *err, size_t errlen)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return PBOX_ESYS;
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", np->ifname);
	int ok = ioctl(fd, SIOCGIFHWADDR, &ifr) == 0;
	int e = errno;
	if (ok)
		memcpy(np->src_mac, ifr.ifr_hwaddr.sa_data, 6);
	int ether = ok && ifr.ifr_hwaddr.sa_family == ARPHRD_ETHER;
	if (ok && ioctl(fd, SIOCGIFMTU, &ifr) == 0)
		np->mtu = (uint32_t)ifr.ifr_mtu;
	close(fd);
	np->ifindex = (int)if_nametoindex(np->ifname);
	if (!ok || np->ifindex == 0) {
		snprintf(err, errlen, "interface %s: %s", np->ifname, strerror(ok ? errno : e));
		return PBOX_ESYS;
	}
	if (!ether) {
		snprintf(err, errlen, "interface %s toward the box is not Ethernet (a raw "
			 "transport writes Ethernet frames)", np->ifname);
		return PBOX_ENOTSUP;
	}
	return 0;
}

int netpath_resolve(const struct sockaddr_in *dst, int wait_ms, struct netpath *np,
		    char *err, size_t errlen)
{
	char ip[INET_ADDRSTRLEN], hop[INET_ADDRSTRLEN];
	struct in_addr gw = { 0 };
	int rc;

	memset(np, 0, sizeof(*np));
	inet_ntop(AF_INET, &dst->sin_addr, ip, sizeof(ip));
	if (route_lookup(dst->sin_addr, np->ifname, &gw) < 0) {
		snprintf(err, errlen, "no IPv4 route to the box %s", ip);
		return PBOX_ENOTSUP;
	}
	if ((rc = udp_source_ip(dst, &np->src, err, errlen)) < 0 ||
	    (rc = if_facts(np, err, errlen)) < 0)
		return rc;
	np->nexthop = gw.s_addr ? gw : dst->sin_addr;
	inet_ntop(AF_INET, &np->nexthop, hop, sizeof(hop));
	uint64_t end = clock_ns() + (uint64_t)wait_ms * 1000000u;
	for (int tries = 0; arp_lookup(np->nexthop, np->ifname, np->dst_mac) < 0; tries++) {
		if (clock_ns() >= end) {
			snprintf(err, errlen, "the MAC of %s (next hop to the box %s on %s) did not "
				 "resolve within %d ms", hop, ip, np->ifname, wait_ms);
			return PBOX_ETIMEDOUT;
		}
		if (tries % 50 == 0)   /* first, then every 0.5 s */
			arp_provoke(dst->sin_addr);
		struct timespec ts = { 0, 10 * 1000000 };
		nanosleep(&ts, NULL);
	}
	return 0;
}

size_t rawframe_build(uint8_t *out, const struct netpath *np, uint16_t sport,
		      const struct sockaddr_in *dst, const struct wire_msg *h,
		      const void *payload, uint32_t len)
{
	uint8_t *wh = out + RAWFRAME_HDRS;

	frame_udp_headers(out, np->dst_mac, np->src_mac, ntohl(np->src.s_addr),
			  ntohl(dst->sin_addr.s_addr), sport, ntohs(dst->sin_port),
			  WIRE_HDR_LEN + (size_t)len);
	wire_encode(wh, h);
	memcpy(wh + WIRE_HDR_LEN, payload, len);
	frame_udp_csum(out, WIRE_HDR_LEN, frame_csum_partial(wh + WIRE_HDR_LEN, len, 0));
	return RAWFRAME_HDRS + WIRE_HDR_LEN + (size_t)len;
}

int rawframe_parse(const uint8_t *frame, size_t len, const struct netpath *np, uint16_t port,
		   const uint8_t **dgram, uint32_t *dlen, uint32_t *src_ip, uint16_t *src_port)
{
	struct frame_info fi;
	int k = frame_parse(frame, len, ntohl(np->src.s_addr), &fi);

	if (k < 0)
		return k;
	if (k != FRAME_UDP)
		return -DROP_NOT_UDP;
	if (fi.dst_port != port)
		return -DROP_BAD_PORT;
	k = frame_verify(frame, len, FRAME_CSUM_IP | FRAME_CSUM_L4);
	if (k < 0)
		return k;
	*dgram = fi.payload;
	*dlen = (uint32_t)fi.payload_len;
	*src_ip = htonl(fi.src_ip);
	*src_port = htons(fi.src_port);
	return 0;
}
