/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * netpaths.c - the path to each of the box's endpoints for a raw
 * transport (AF_XDP, verbs): each resolved by netpath_resolve (rawframe.h),
 * an address resolved once for all its ports. A raw transport sends from
 * one interface and source address, so every endpoint must leave through
 * them; each keeps its own next hop (the box's data ports on one subnet
 * have a MAC each).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "client/transport/net.h"
#include "client/transport/rawframe.h"

int netpath_resolve_eps(const struct sockaddr_in *eps, unsigned neps, int wait_ms,
			const char *tp, struct netpath *np, char *err, size_t errlen)
{
	char a[INET_ADDRSTRLEN], b[INET_ADDRSTRLEN];

	for (unsigned i = 0; i < neps; i++) {
		unsigned same = 0;
		while (same < i && eps[same].sin_addr.s_addr != eps[i].sin_addr.s_addr)
			same++;
		if (same < i) {   /* another port of an address resolved already */
			np[i] = np[same];
			continue;
		}
		int rc = netpath_resolve(&eps[i], wait_ms, &np[i], err, errlen);
		if (rc < 0)
			return rc;
		if (strcmp(np[i].ifname, np[0].ifname) != 0 ||
		    np[i].src.s_addr != np[0].src.s_addr) {
			inet_ntop(AF_INET, &eps[0].sin_addr, a, sizeof(a));
			inet_ntop(AF_INET, &eps[i].sin_addr, b, sizeof(b));
			snprintf(err, errlen, "the box's endpoints leave through different interfaces "
				 "or addresses: %s via %s, %s via %s (the %s transport uses one)",
				 a, np[0].ifname, b, np[i].ifname, tp);
			return PBOX_ENOTSUP;
		}
	}
	return 0;
}
