/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lcore_fanout.h - build the RESULT/ERROR packets an lcore sends to the
 * ranks of a job, without a payload copy per rank where the port allows.
 *
 * Two ways, chosen per port at start-up (never per packet by #ifdef):
 *   copy:   one mbuf per rank holding headers and payload (a payload copy
 *           per rank). Used for single-destination packets (duplicate
 *           answers, errors) and on ports that cannot send chained mbufs.
 *   shared: the payload is copied once into one mbuf; each rank gets a
 *           small header mbuf (Ethernet/IPv4/UDP/pbox headers) chained to
 *           an indirect mbuf attached to that payload mbuf, so N ranks
 *           cost one payload copy and 2N small mbufs. Needs a port with
 *           RTE_ETH_TX_OFFLOAD_MULTI_SEGS. In auto mode only payloads of
 *           FANOUT_SHARED_MIN_BYTES or more are shared.
 * The payload mbuf is freed by the last transmitted indirect mbuf.
 */
#ifndef PBOX_LCORE_FANOUT_H
#define PBOX_LCORE_FANOUT_H

#include <stddef.h>
#include <stdint.h>

#include <rte_mbuf.h>

#include "common/wire.h"
#include "nic/port.h"

/* Addressing of one destination. IPs host order, ports host order. */
struct fanout_dst {
	const uint8_t *dst_mac;
	const uint8_t *src_mac;
	uint32_t src_ip, dst_ip;
	uint16_t src_port, dst_port;
};

/* FANOUT_SHARED_MIN_BYTES and FANOUT_HDR_ROOM: nic/port.h (the port sizes
 * its header pool by them); the measured crossover is in docs/performance.md. */

/* One self-contained packet: headers of h for d, then plen payload bytes
 * (copied). NULL when pool is empty. pay_sum: NULL sends UDP checksum 0;
 * else the payload's frame_csum_partial, and the UDP checksum is filled in
 * (computed once per result, not per rank). */
struct rte_mbuf *fanout_copy(struct rte_mempool *pool, const struct fanout_dst *d,
			     const struct wire_msg *h, const void *payload, size_t plen,
			     const uint64_t *pay_sum);

/* The shared payload mbuf: plen bytes copied once. NULL when pool is empty. */
struct rte_mbuf *fanout_payload(struct rte_mempool *pool, const void *payload, size_t plen);

/* A header mbuf for d and h chained to an indirect mbuf of pay (which
 * keeps pay alive until sent). Both small mbufs come from hdr_pool. NULL
 * when it is empty. pay_sum as for fanout_copy. */
struct rte_mbuf *fanout_chain(struct rte_mempool *hdr_pool, const struct fanout_dst *d,
			      const struct wire_msg *h, struct rte_mbuf *pay,
			      const uint64_t *pay_sum);

#endif
