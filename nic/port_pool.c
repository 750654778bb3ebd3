/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_pool.c - a port's mbuf pool, laid out as its PMD needs it, and how
 * many of its mbufs the PMD keeps in its own rings (see port.h).
 *
 * net_af_xdp (DPDK 22.11) registers the pool's memory as the AF_XDP UMEM
 * and gives the kernel each mbuf by its offset in it. It takes the UMEM
 * to be populated_size objects of rte_mempool_calc_obj_size() bytes from
 * the page of the pool's first memory chunk (get_base_addr and
 * xdp_umem_configure in rte_eth_af_xdp.c). A default pktmbuf pool keeps
 * each object within one page of its memory, for IOVA contiguity: with
 * 4 KiB pages (--no-huge) that is one 2368-byte mbuf per page, so 6912 of
 * 16383 mbufs lie beyond the UMEM the PMD registered. The kernel drops such
 * an mbuf from the fill ring as an invalid descriptor, and the PMD refills
 * the fill ring only one for one with what it receives, so every one lost
 * shrinks the ring for good; once its 2048 entries are gone the kernel
 * drops every frame (IMISSED) and rx never resumes. Copying contributions
 * hid it (a few hundred mbufs cycle through the lcore's cache); holding
 * them draws the pool's far mbufs. So net_af_xdp gets a packed pool (the
 * kernel addresses the UMEM by virtual address, IOVA contiguity is not
 * needed) and the PMD's arithmetic is checked on it before its queues are
 * set up.
 */
#include "nic/port.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_mempool.h>

#include "common/errmsg.h"

/* net_af_xdp (DPDK 22.11): the fill ring gets XSK_RING_CONS__DEFAULT_NUM_DESCS
 * mbufs at queue set-up and is refilled one for one; the completion ring has
 * as many entries; its tx ring has as many as the rx ring. */
#define AF_XDP_RING_DESCS 2048u

/* The UMEM net_af_xdp registers for mp, and whether every object of mp
 * lies in it (the objects it would hand to the kernel). */
struct umem_fit {
	uintptr_t base;
	uint64_t size;
	size_t frame;
	unsigned outside;
};

static void umem_fit_obj(struct rte_mempool *mp, void *arg, void *obj, unsigned idx)
{
	struct umem_fit *f = arg;
	uint64_t off = (uintptr_t)obj - mp->header_size - f->base;

	(void)idx;
	if ((uintptr_t)obj - mp->header_size < f->base || off + f->frame > f->size)
		f->outside++;
}

static int af_xdp_check(struct rte_mempool *mp, const char *port, char *err, size_t errlen)
{
	struct rte_mempool_memhdr *mh = STAILQ_FIRST(&mp->mem_list);
	uintptr_t page = (uintptr_t)getpagesize();
	struct umem_fit f;

	if (!mh)
		return errmsg(err, errlen, -ENOMEM, "%s: its mbuf pool has no memory", port);
	f = (struct umem_fit){
		.base = (uintptr_t)mh->addr & ~(page - 1),
		.frame = rte_mempool_calc_obj_size(mp->elt_size, mp->flags, NULL),
	};
	f.size = (uint64_t)mp->populated_size * f.frame + ((uintptr_t)mh->addr - f.base);
	rte_mempool_obj_iter(mp, umem_fit_obj, &f);
	if (f.outside)
		return errmsg(err, errlen, -ENOMEM,
			      "%s: %u of its %u mbufs lie outside the AF_XDP UMEM"
			      " that net_af_xdp registers (the pool came in %u memory chunks;"
			      " it needs one): give the EAL more memory (-m, or hugepages)"
			      " or use fewer --mbufs",
			      port, f.outside, mp->populated_size, mp->nb_mem_chunks);
	return 0;
}

/* A pktmbuf pool whose objects are packed back to back in one chunk, as
 * net_af_xdp assumes (rte_pktmbuf_pool_create with IOVA contiguity waived),
 * without the padding that spreads objects over memory channels: the
 * object is the UMEM chunk, which the kernel takes only up to a page, and
 * the padding to an odd number of cache lines would make the 64-line
 * object of the largest room (3904, MTU 3506) 65 lines, past the page
 * (port_mtu.c sizes the room). */
static struct rte_mempool *packed_pool(const char *name, uint32_t n, uint16_t room, int socket)
{
	struct rte_pktmbuf_pool_private priv = { .mbuf_data_room_size = room };
	struct rte_mempool *mp = rte_mempool_create_empty(name, n, sizeof(struct rte_mbuf) + room,
							  PORT_MBUF_CACHE, sizeof(priv), socket,
							  PORT_AF_XDP_POOL_FLAGS);
	int rc;

	if (!mp)
		return NULL;
	rc = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), NULL);
	if (rc == 0) {
		rte_pktmbuf_pool_init(mp, &priv);
		rc = rte_mempool_populate_default(mp) < 0 ? -ENOMEM : 0;
	}
	if (rc) {
		rte_mempool_free(mp);
		rte_errno = -rc;
		return NULL;
	}
	rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
	return mp;
}

static int is_af_xdp(const char *driver)
{
	return driver && strcmp(driver, "net_af_xdp") == 0;
}

int port_pool_create(const struct port_setup *ps, const char *driver, const char *port,
		     uint16_t room, struct rte_mempool **pool, char *err, size_t errlen)
{
	char name[RTE_MEMPOOL_NAMESIZE];
	int rc;

	snprintf(name, sizeof(name), "pbox_mb%u", ps->port_id);
	*pool = is_af_xdp(driver) ? packed_pool(name, ps->nmbufs, room, ps->socket) :
		rte_pktmbuf_pool_create(name, ps->nmbufs, PORT_MBUF_CACHE, 0, room, ps->socket);
	if (!*pool)
		return errmsg(err, errlen, -ENOMEM, "%s: cannot create a pool of %u mbufs: %s"
			      " (more memory: -m or hugepages, or fewer --mbufs)",
			      port, ps->nmbufs, rte_strerror(rte_errno));
	if (is_af_xdp(driver) && (rc = af_xdp_check(*pool, port, err, errlen)) != 0) {
		rte_mempool_free(*pool);
		*pool = NULL;
		return rc;
	}
	return 0;
}

uint32_t port_pmd_mbufs(const char *driver, unsigned nrxq, unsigned nrxd,
			unsigned ntxq, unsigned ntxd)
{
	/* net_af_packet copies frames out of and into its own ring. */
	if (driver && strcmp(driver, "net_af_packet") == 0)
		return 0;
	/* net_af_xdp: per rx queue the fill ring's mbufs (kept there or in
	 * the rx ring); per tx queue sent mbufs in its tx ring (as long as the
	 * rx ring) and its completion ring until the next transmit frees them. */
	if (is_af_xdp(driver))
		return nrxq * AF_XDP_RING_DESCS + ntxq * (nrxd + AF_XDP_RING_DESCS);
	/* A NIC: every rx descriptor has an mbuf; sent ones wait in the tx
	 * ring until the PMD frees them. */
	return nrxq * nrxd + ntxq * ntxd;
}
