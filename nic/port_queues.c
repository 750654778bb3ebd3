/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_queues.c - the queues a port must have for pboxd's data lcores
 * (nic/port_queues.h).
 */
#include "nic/port_queues.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/errmsg.h"

/* A PMD whose rx queues must all be polled, and the --vdev argument that
 * sets their count; NULL for any other. */
static const char *all_polled_arg(const char *driver)
{
	if (!driver)
		return NULL;
	if (strcmp(driver, "net_af_packet") == 0)
		return "qpairs";
	if (strcmp(driver, "net_af_xdp") == 0)
		return "queue_count";
	return NULL;
}

int port_queues_check(unsigned port, const char *name, const char *driver, unsigned max_rx,
		      unsigned max_tx, unsigned nlcores, char *err, size_t errlen)
{
	const char *arg = all_polled_arg(driver);

	if (max_tx < nlcores) {
		/* what to give the --vdev, for a PMD that takes a queue count there */
		char use[64] = "";
		if (arg)
			snprintf(use, sizeof(use), ": use %s=%u in its --vdev", arg, nlcores);
		return errmsg(err, errlen, -EINVAL,
			      "port %u (%s) has %u tx queues; pboxd needs one per"
			      " data lcore (%u)%s", port, name, max_tx, nlcores, use);
	}
	if (arg && max_rx != nlcores)
		return errmsg(err, errlen, -EINVAL,
			      "port %u (%s) has %s=%u: pboxd polls one queue per data lcore and %s;"
			      " %s=N must equal the number of data lcores, %u: use %s=%u in its"
			      " --vdev (or %u data lcores)",
			      port, name, arg, max_rx,
			      strcmp(arg, "qpairs") == 0 ?
			      "the kernel spreads flows over all its queues: the flows of the"
			      " others would be lost" :
			      "the frames the NIC puts on the others would go to the kernel,"
			      " not pboxd",
			      arg, nlcores, arg, nlcores, max_rx);
	return 0;
}
