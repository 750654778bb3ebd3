/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pmtu.c - the MTU a client uses when pbox_opts.mtu is 0 (automatic): the
 * smaller of the box's data-port MTU (box_endpoints) and the route's MTU
 * toward each box address (IP_MTU of a connected socket), then confirmed
 * the way packetization-layer PMTU discovery does (RFC 8899): a PROBE as
 * large as a full segment goes to every box address and must come back
 * (docs/protocol.md "PROBE"). If one does not, the client falls back to
 * 1500 with a warning, so a path that silently drops jumbo frames costs
 * 0.6 s at start, not every packet of the job.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/transport/net.h"
#include "common/clock.h"

/* Attempts wait 10, 20, 40, ... ms (630 ms in all): a PROBE or its answer
 * lost on a lossy path costs about 10 ms, a path that drops jumbo frames
 * about 0.6 s. */
#define PROBE_TRIES         6
#define PROBE_FIRST_WAIT_MS 10

int pmtu_route(const struct sockaddr_in *dst, uint32_t *mtu, char *err, size_t errlen)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int val = IP_PMTUDISC_DO, m = 0;
	socklen_t len = sizeof(m);
	int rc = 0;

	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return PBOX_ESYS;
	}
	if (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &val, sizeof(val)) < 0 ||
	    connect(fd, (const struct sockaddr *)dst, sizeof(*dst)) < 0 ||
	    getsockopt(fd, IPPROTO_IP, IP_MTU, &m, &len) < 0 || m <= 0) {
		char ip[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &dst->sin_addr, ip, sizeof(ip));
		snprintf(err, errlen, "path MTU toward %s: %s", ip, strerror(errno));
		rc = PBOX_ESYS;
	}
	close(fd);
	*mtu = (uint32_t)m;
	return rc;
}

/* The distinct box addresses among eps, at most max. */
static unsigned box_addresses(const struct sockaddr_in *eps, unsigned neps,
			      struct sockaddr_in *out, unsigned max)
{
	unsigned n = 0;

	for (unsigned i = 0; i < neps && n < max; i++) {
		unsigned j;
		for (j = 0; j < n && out[j].sin_addr.s_addr != eps[i].sin_addr.s_addr; j++)
			;
		if (j == n)
			out[n++] = eps[i];
	}
	return n;
}

uint32_t pmtu_route_min(const struct sockaddr_in *eps, unsigned neps, uint32_t mtu)
{
	struct sockaddr_in a[16];
	unsigned n = box_addresses(eps, neps, a, 16);
	char err[256];

	for (unsigned i = 0; i < n; i++) {
		uint32_t r;
		if (pmtu_route(&a[i], &r, err, sizeof(err)) == 0 && r < mtu)
			mtu = r;
	}
	return mtu;
}

int pmtu_confirm(int fd, const struct sockaddr_in *eps, unsigned neps, uint32_t mtu)
{
	uint8_t pkt[WIRE_HDR_LEN + WIRE_MAX_PAYLOAD + 64], in[sizeof(pkt)];
	struct sockaddr_in a[16];
	unsigned n = box_addresses(eps, neps, a, 16), acked = 0;
	uint32_t nonce;
	uint8_t got[16] = { 0 };
	size_t len = WIRE_HDR_LEN + wire_seg_bytes(mtu);

	if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
		nonce = (uint32_t)clock_ns();
	memset(pkt, 0, len);
	for (int t = 0; t < PROBE_TRIES && acked < n; t++) {
		struct wire_msg m = { .type = WIRE_PROBE, .key = nonce, .seg = (uint32_t)t };
		wire_encode(pkt, &m);
		for (unsigned i = 0; i < n; i++)
			if (!got[i])
				sendto(fd, pkt, len, MSG_DONTWAIT, (const struct sockaddr *)&a[i],
				       sizeof(a[i]));
		uint64_t end = clock_ns() + ((uint64_t)PROBE_FIRST_WAIT_MS << t) * 1000000;
		while (acked < n) {
			uint64_t now = clock_ns();
			if (now >= end)
				break;
			struct pollfd p = { .fd = fd, .events = POLLIN };
			if (poll(&p, 1, (int)((end - now) / 1000000) + 1) <= 0)
				continue;
			struct sockaddr_in from;
			socklen_t fl = sizeof(from);
			ssize_t r = recvfrom(fd, in, sizeof(in), MSG_DONTWAIT,
					     (struct sockaddr *)&from, &fl);
			struct wire_msg ack;
			if (r < 0 || (size_t)r != len || wire_decode(in, (size_t)r, &ack) < 0 ||
			    ack.type != WIRE_PROBE_ACK || ack.key != nonce)
				continue;
			for (unsigned i = 0; i < n; i++)
				if (!got[i] && a[i].sin_addr.s_addr == from.sin_addr.s_addr) {
					got[i] = 1;
					acked++;
				}
		}
	}
	return acked == n ? 0 : PBOX_ETIMEDOUT;
}
