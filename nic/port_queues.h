/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_queues.h - does a port have the queues pboxd needs (nic/port.c)?
 * The rule on the counts its PMD reports, apart from DPDK so that it is
 * unit-tested (tests/unit/test_port_queues.c):
 *   - a tx queue per data lcore (each lcore sends on its own);
 *   - net_af_packet: exactly as many qpairs= as data lcores: the kernel's
 *     fanout group spreads flows over all its sockets, and a queue no
 *     lcore polls would lose its flows;
 *   - net_af_xdp: exactly as many queue_count= as data lcores: pboxd sets
 *     up (and the PMD binds a socket to) one queue per lcore, and the
 *     frames the NIC puts on a queue without one go to the kernel.
 * Other ports may have more rx queues than lcores (pboxd uses the first).
 */
#ifndef PBOX_PORT_QUEUES_H
#define PBOX_PORT_QUEUES_H

#include <stddef.h>

/*
 * Port port (name, driver: the PMD's name, may be NULL) with max_rx and
 * max_tx queues, for nlcores data lcores: 0, or -EINVAL with a message in
 * err naming the --vdev argument or lcore count to change.
 */
int port_queues_check(unsigned port, const char *name, const char *driver, unsigned max_rx,
		      unsigned max_tx, unsigned nlcores, char *err, size_t errlen);

#endif
