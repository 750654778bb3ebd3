/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ports_watch.c - congestion marks on port misses (docs/protocol.md
 * "Congestion"): every PORTS_WATCH_MS the control thread reads each data
 * port's imissed (frames the NIC or kernel ring dropped before an lcore
 * saw them); while the count grows the lcores mark completed rounds as
 * they do when their own queues stand. Reading port counters may be a
 * system call (net_af_packet), which is why the lcores do not do it.
 * net_af_packet never fills imissed (DPDK 22.11's eth_stats_get leaves it
 * 0 whatever its kernel ring drops), so on such a port this never marks:
 * only the lcores' own rx queue and hand-off ring signs do.
 */
#include "control/box.h"

#include "common/clock.h"

#define PORTS_WATCH_MS 100

void box_ports_watch(struct box *b)
{
	double now = clock_s();
	uint64_t missed = 0;

	if (!b->dp.port_stats || !b->dp.set_rx_missing ||
	    (now - b->miss_watch.at) * 1000.0 < PORTS_WATCH_MS)
		return;
	b->miss_watch.at = now;
	for (unsigned i = 0; i < b->layout.nports; i++) {
		struct box_port_stats s;
		if (b->dp.port_stats(b->dp.ctx, i, &s) == 0)
			missed += s.imissed;
	}
	int on = b->miss_watch.seen && missed > b->miss_watch.missed;
	b->miss_watch.seen = 1;
	b->miss_watch.missed = missed;
	if (on != b->miss_watch.on) {
		b->miss_watch.on = on;
		b->dp.set_rx_missing(b->dp.ctx, on);
	}
}
