/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lcore_fanout.c - result packets for the ranks of a job: a copy per rank,
 * or one shared payload mbuf with per-rank header mbufs (see
 * lcore_fanout.h). No locks; allocation only from the given mempools.
 */
#include "dataplane/lcore_fanout.h"

#include <string.h>

#include "common/frame.h"

#define PKT_HDRS_LEN (FRAME_HDRS_LEN + WIRE_HDR_LEN)

static inline void write_hdrs(uint8_t *p, const struct fanout_dst *d,
			      const struct wire_msg *h, size_t plen, const uint64_t *pay_sum)
{
	frame_udp_headers(p, d->dst_mac, d->src_mac, d->src_ip, d->dst_ip,
			  d->src_port, d->dst_port, WIRE_HDR_LEN + plen);
	wire_encode(p + FRAME_HDRS_LEN, h);
	if (pay_sum)
		frame_udp_csum(p, WIRE_HDR_LEN, *pay_sum);
}

struct rte_mbuf *fanout_copy(struct rte_mempool *pool, const struct fanout_dst *d,
			     const struct wire_msg *h, const void *payload, size_t plen,
			     const uint64_t *pay_sum)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(pool);

	if (!m)
		return NULL;
	uint8_t *p = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(PKT_HDRS_LEN + plen));
	if (!p) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	write_hdrs(p, d, h, plen, pay_sum);
	if (plen)
		memcpy(p + PKT_HDRS_LEN, payload, plen);
	return m;
}

struct rte_mbuf *fanout_payload(struct rte_mempool *pool, const void *payload, size_t plen)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(pool);

	if (!m)
		return NULL;
	void *p = rte_pktmbuf_append(m, (uint16_t)plen);
	if (!p) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	memcpy(p, payload, plen);
	return m;
}

struct rte_mbuf *fanout_chain(struct rte_mempool *hdr_pool, const struct fanout_dst *d,
			      const struct wire_msg *h, struct rte_mbuf *pay,
			      const uint64_t *pay_sum)
{
	struct rte_mbuf *two[2];

	if (rte_pktmbuf_alloc_bulk(hdr_pool, two, 2) != 0)
		return NULL;
	struct rte_mbuf *hm = two[0], *ind = two[1];
	rte_pktmbuf_attach(ind, pay);          /* takes a reference on pay */
	ind->data_len = pay->data_len;
	ind->pkt_len = pay->data_len;
	uint8_t *p = (uint8_t *)rte_pktmbuf_append(hm, PKT_HDRS_LEN);
	write_hdrs(p, d, h, pay->data_len, pay_sum);
	hm->next = ind;
	hm->nb_segs = 2;
	hm->pkt_len = PKT_HDRS_LEN + ind->data_len;
	return hm;
}
