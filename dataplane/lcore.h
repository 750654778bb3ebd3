/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lcore.h - the DPDK poll loop of one data lcore and what it shares.
 *
 * Each data lcore owns: its engine (the chunks assigned to it), its
 * counters, one tx queue on every port, the rx queues given to it, and
 * two rings it consumes: control messages (struct engine_msg by value) and
 * hand-off packets that another lcore received for it. Packets are steered
 * to the owning lcore by UDP destination port (udp_base + lcore index):
 * by the NIC where it can (rte_flow), else by the lcore that polled the
 * queue, through the owner's hand-off ring.
 */
#ifndef PBOX_LCORE_H
#define PBOX_LCORE_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_common.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "dataplane/dp.h"
#include "dataplane/engine.h"
#include "dataplane/rx_fill.h"

#define LCORE_MAX_RXQ RX_FILL_MAX_QUEUES
#define LCORE_BURST 32

/* Read-only after start: what every lcore may look at. */
struct dp_port {
	uint16_t port_id;
	uint32_t ip;        /* host order */
	uint8_t mac[6];
	struct rte_mempool *pool;
	struct rte_mempool *hdr_pool;  /* shared-payload fan-out; NULL: copy */
	uint32_t shared_min;           /* share payloads of at least this size */
	uint32_t mtu;                  /* longer IPv4 datagrams are dropped */
	bool hold;                     /* contributions may stay in rx mbufs */
};

struct dp_shared {
	unsigned nports;
	struct dp_port ports[BOX_MAX_PORTS];   /* indexed by DPDK port id */
	unsigned nlcores;
	struct lcore_ctx *lcores[BOX_MAX_LCORES];
	uint16_t udp_base;
	uint32_t idle_sleep_us;
	bool udp_csum;                         /* fill in UDP checksums of results */
	volatile uint8_t rx_missing;           /* written by the control thread:
						  the ports miss frames now */
	volatile bool *quit;
};

/* Where to send results to a rank: learned from its packets. */
struct dp_peer {
	uint8_t mac[6];
	uint16_t port_id;
};

struct lcore_ctx {
	struct engine eng;
	struct lcore_stats st;
	uint64_t applied;          /* control messages applied; read by control */
	unsigned index;            /* 0..nlcores-1 */
	unsigned eal_id;
	struct rte_ring *msgs;     /* control -> this lcore, engine_msg elems */
	struct rte_ring *handoff;  /* other lcores -> this lcore, mbufs */
	unsigned nrxq;
	struct { uint16_t port_id, queue; } rxq[LCORE_MAX_RXQ];
	uint16_t txq;              /* this lcore's tx queue on every port */
	int64_t held;              /* rx mbufs the engine holds (contributions) */
	int64_t hold_max;          /* hold at most this many; copy beyond */
	uint64_t tsc_hz;
	uint64_t tick_at;          /* ns of the last engine_tick */
	struct rx_fill fill;       /* standing rx queues (congestion) */
	const struct dp_shared *sh;
	struct dp_peer peers[ENGINE_MAX_JOBS][ENGINE_MAX_WORLD];
	/* per-port transmit buffers, flushed after every burst */
	uint16_t ntx[BOX_MAX_PORTS];
	struct rte_mbuf *tx[BOX_MAX_PORTS][LCORE_BURST];
} __rte_cache_aligned;

/* Create an lcore context and its rings on socket. NULL on failure. */
struct lcore_ctx *lcore_ctx_create(unsigned index, unsigned eal_id, int socket,
				   const struct dp_shared *sh,
				   const struct sum_kernels *sum);
void lcore_ctx_free(struct lcore_ctx *lc);

/* The loop, for rte_eal_remote_launch: runs until *sh->quit. */
int lcore_main(void *arg);

#endif
