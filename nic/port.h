/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port.h - bring up one DPDK port for pboxd: queues (one tx queue per data
 * lcore, rx queues as the port allows), its mbuf pool, and steering of
 * each lcore's UDP port to that lcore's rx queue with rte_flow where the
 * port supports it. Works for PCI NICs and virtual devices alike.
 */
#ifndef PBOX_PORT_H
#define PBOX_PORT_H

#include <stddef.h>
#include <stdint.h>

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "nic/port_info.h"

/* Per-lcore cache of every mbuf pool pboxd creates. An lcore's cache holds
 * up to 1.5 times this (DPDK's flush threshold). */
#define PORT_MBUF_CACHE 256

/* Results of at least this many payload bytes share one payload mbuf
 * across ranks (dataplane/lcore_fanout.h); smaller ones are copied. */
#define FANOUT_SHARED_MIN_BYTES 2048
/* Room of a header mbuf in a shared-payload chain: Ethernet, IPv4, UDP and
 * pbox headers after the headroom. */
#define FANOUT_HDR_ROOM (RTE_PKTMBUF_HEADROOM + 128)

struct rte_eth_dev_info;

struct port_setup {
	uint16_t port_id;
	unsigned nlcores;     /* data lcores: one tx queue each */
	uint32_t nmbufs;
	uint16_t mtu;         /* 0: keep the port's MTU */
	uint16_t udp_base;
	int socket;
	int fanout;           /* BOX_FANOUT_*: shared payload if the port can */
};

/*
 * Configure and start the port; fill info (name, mac, mtu, rx queues,
 * steering, fanout), *pool and *hdr_pool (small mbufs for shared-payload
 * fan-out, see dataplane/lcore_fanout.h; NULL when results are copied per
 * rank). Returns 0 or a negative errno with a message in err naming the
 * port and what it lacks.
 */
int port_start(const struct port_setup *ps, struct box_port_info *info,
	       struct rte_mempool **pool, struct rte_mempool **hdr_pool,
	       char *err, size_t errlen);

/*
 * Create the port's pool of ps->nmbufs mbufs of `room` bytes (port_pool.c),
 * laid out as its PMD (driver name) needs: for net_af_xdp packed in one
 * chunk, so that every mbuf lies in the UMEM the PMD registers. port names
 * the port in messages. Returns 0, or -ENOMEM with a message in err naming
 * what to change (memory, --mbufs).
 */
int port_pool_create(const struct port_setup *ps, const char *driver, const char *port,
		     uint16_t room, struct rte_mempool **pool, char *err, size_t errlen);

/*
 * How many mbufs of its pool the PMD (driver name) may keep in its own
 * rings with these queues and descriptors: what the pool must hold besides
 * the lcores' caches and the contributions they keep.
 */
uint32_t port_pmd_mbufs(const char *driver, unsigned nrxq, unsigned nrxd,
			unsigned ntxq, unsigned ntxd);

/*
 * For a net_af_xdp port, fill info's busy_budget (from its devargs, else
 * the PMD's default), iface and the interface's napi_defer_hard_irqs and
 * gro_flush_timeout (port_xdp.c); for any other, set them to -1.
 */
void port_xdp_info(const struct rte_eth_dev_info *di, struct box_port_info *info);

/* net_af_xdp's pool (port_pool.c): packed in one chunk, and without the
 * padding that spreads objects over memory channels, so that every object
 * up to a page (the UMEM chunk the kernel takes) stays within one. */
#define PORT_AF_XDP_POOL_FLAGS (RTE_MEMPOOL_F_NO_IOVA_CONTIG | RTE_MEMPOOL_F_NO_SPREAD)

/*
 * Can the port carry frames of this MTU (its PMD's limits; for
 * net_af_packet, the ring's framesz= and the kernel interface's MTU; for
 * net_af_xdp, an mbuf, the kernel's XDP headroom and the frame in one
 * page-sized UMEM chunk), and what data room (headroom included) must its
 * mbufs have: room for the frame, and for net_af_packet for a whole ring
 * frame (framesz - 32 bytes after the headroom). Returns 0, *on_device
 * (the PMD takes the MTU itself) and *room, or -EINVAL with a message in
 * err naming the vdev arguments or MTU to change.
 */
int port_mtu_check(const struct rte_eth_dev_info *di, uint16_t pid, const char *name,
		   uint32_t mtu, int *on_device, uint16_t *room, char *err, size_t errlen);

/* Stop and close the port. */
void port_stop(uint16_t port_id);

#endif
