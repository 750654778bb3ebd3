/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sparse_xfer.c - the packets of sparse keys (docs/protocol.md "Sparse
 * keys"), run by the progress thread beside xfer.c.
 *
 * Sending: a segment's record is encoded from the request's entries
 * (sparse_call.c found where each segment's start) straight into the
 * packet, the first time and again for each retransmission; the first
 * time also zeroes the segment in the caller's buffer, whose absent
 * entries the result then leaves zero (unless the caller's thread left
 * the whole buffer zero already: top-k with error feedback, whose
 * selection moves the gradient into the residual). xfer.c's window, RACK, NACK and
 * timeout logic stays per segment; only the packing differs: a segment's
 * record joins the open packet of its endpoint if that packet is of the
 * same key, round and flags, its last segment is lower (the box wants
 * them increasing: retransmissions come in any order) and it has room
 * (the job's seg_bytes), else it starts one in the transmit queue. Each
 * open segment round takes one of the box's contribution slots (--slots
 * per job per lcore, job_join's "slots"), so at most half of them are in
 * flight per endpoint (the other ranks may lag by as many). A packet keeps taking records until
 * the queue is flushed, so the segments one fill or one RACK scan sends to
 * an endpoint travel together.
 *
 * Receiving: a SPARSE RESULT's records are all checked (segment inside
 * the key and increasing, the body by common/sparse.h) before any is
 * used; each new one's entries are written into the caller's buffer
 * (its segment zeroed when first sent, above) and counted as that
 * segment's result (xfer_seg_done).
 */
#include <stdlib.h>
#include <string.h>

#include "client/xfer/xfer.h"
#include "common/sparse.h"

/* Room for the sparse packet buffers and the per-endpoint map. */
static bool sparse_alloc(pbox_client *c)
{
	struct xfer *x = c->x;

	if (x->sp_open)
		return true;
	x->sp_buf = malloc((size_t)XFER_TX_BURST * WIRE_MAX_PAYLOAD);
	x->sp_open = calloc(c->neps ? c->neps : 1, sizeof(*x->sp_open));
	x->sp_last = calloc(c->neps ? c->neps : 1, sizeof(*x->sp_last));
	x->sp_inflight = calloc(c->neps ? c->neps : 1, sizeof(*x->sp_inflight));
	if (x->sp_buf && x->sp_open && x->sp_last && x->sp_inflight)
		return true;
	sparse_free(x);
	return false;
}

void sparse_free(struct xfer *x)
{
	free(x->sp_buf);
	free(x->sp_open);
	free(x->sp_last);
	free(x->sp_inflight);
	x->sp_buf = NULL;
	x->sp_open = NULL;
	x->sp_last = NULL;
	x->sp_inflight = NULL;
}

bool sparse_room(pbox_client *c, unsigned ep)
{
	uint32_t cap = c->box_slots / 2 ? c->box_slots / 2 : 1, n = 0;

	if (!sparse_alloc(c))
		return false;
	/* the box's slots are per lcore, and an lcore serves one endpoint on
	 * each data port: those with its UDP port (docs/rpc.md
	 * "box_endpoints") */
	for (unsigned i = 0; i < c->neps; i++)
		if (c->eps[i].sin_port == c->eps[ep].sin_port)
			n += c->x->sp_inflight[i];
	return n < cap;
}

uint32_t sparse_rec_bytes(const struct pbox_req *r, uint32_t s)
{
	const struct seg_layout *l = &r->ks->lay;
	size_t esz = wire_dtype_size(r->dtype);
	uint32_t n = (uint32_t)(r->sp_first[s + 1] - r->sp_first[s]), len = seg_len(l, s);

	return SPARSE_REC_HDR + (uint32_t)sparse_body_bytes(sparse_best_form(n, len, esz), n,
							      len, esz);
}

/* Segment s's record of r at dst. */
static void encode_at(uint8_t *dst, const struct pbox_req *r, uint32_t s)
{
	const struct seg_layout *l = &r->ks->lay;
	size_t esz = wire_dtype_size(r->dtype), first = r->sp_first[s];

	sparse_encode_entries(dst, s, r->sp_idx + first, (uint32_t)seg_first(l, s),
			      r->sp_val + first * esz, (uint32_t)(r->sp_first[s + 1] - first),
			      seg_len(l, s), esz);
}

void sparse_send(pbox_client *c, struct pbox_req *r, uint32_t s, uint8_t flags)
{
	struct xfer *x = c->x;
	const struct seg_layout *l = &r->ks->lay;
	unsigned ep = seg_endpoint(l, s);
	size_t bytes = sparse_rec_bytes(r, s);

	if (!sparse_alloc(c)) { /* (sparse_room allocated them: not reached) */
		/* never sent: the retransmission timer tries again */
		stat_add(&c->stats.tx_dropped, 1);
		return;
	}
	if (!(flags & WIRE_FLAG_RETX) && !r->sp_out_zero) {
		size_t esz = wire_dtype_size(r->rdtype);
		memset((uint8_t *)r->buf + seg_first(l, s) * esz, 0, (size_t)seg_len(l, s) * esz);
	}
	flags |= WIRE_FLAG_NOTICE | WIRE_FLAG_SPARSE;
	if (x->sp_open[ep]) {
		struct tp_pkt *p = &x->txq[x->sp_open[ep] - 1];
		if (p->hdr.key == r->key && p->hdr.round == r->round && p->hdr.flags == flags &&
		    s > x->sp_last[ep] && p->len + bytes <= c->seg_bytes) {
			encode_at((uint8_t *)p->payload + p->len, r, s);
			p->len += bytes;
			p->hdr.count++;
			x->sp_last[ep] = s;
			goto sent;
		}
		/* a full packet goes out now: the records' round trips start
		 * when they leave, not when the whole window is encoded */
		if (p->len + bytes > c->seg_bytes)
			xfer_flush(c);
	}
	if (x->ntxq == XFER_TX_BURST)
		xfer_flush(c);
	uint8_t *buf = x->sp_buf + (size_t)x->ntxq * WIRE_MAX_PAYLOAD;
	encode_at(buf, r, s);
	x->txq[x->ntxq] = (struct tp_pkt){
		.hdr = { .type = WIRE_PUSH, .dtype = r->dtype, .flags = flags,
			 .rank = (uint16_t)c->rank, .count = 1, .job = c->job_id,
			 .token = c->token, .key = r->key, .seg = s, .round = r->round },
		.payload = buf,
		.len = bytes,
		.ep = ep,
	};
	x->sp_open[ep] = (uint16_t)(++x->ntxq);
	x->sp_last[ep] = s;
	stat_add(&c->stats.pkts_sent, 1);
sent:
	if (flags & WIRE_FLAG_RETX)
		stat_add(&c->stats.retransmits, 1);
}

/* sparse_rec_parse's view of the key's segments. */
static uint32_t lay_seg_len(const void *ctx, uint32_t seg)
{
	const struct seg_layout *l = ctx;

	return seg < l->nsegs ? seg_len(l, seg) : 0;
}

void sparse_result(pbox_client *c, struct pbox_req *r, const struct wire_msg *m,
		   const uint8_t *payload, uint64_t now)
{
	struct key_state *ks = r->ks;
	const struct seg_layout *l = &ks->lay;
	size_t esz = wire_dtype_size(r->rdtype), left = m->plen;
	const uint8_t *p = payload;
	struct sparse_rec rec;
	uint32_t prev = 0;

	for (uint32_t i = 0; i < m->count; i++, p += rec.bytes, left -= rec.bytes) {
		if (sparse_rec_parse(p, left, esz, lay_seg_len, l, &rec) < 0 ||
		    (i == 0 ? rec.seg != m->seg : rec.seg <= prev) ||
		    sparse_rec_check(&rec, seg_len(l, rec.seg), esz) < 0) {
			stat_add(&c->stats.bad_packets, 1);
			return;
		}
		prev = rec.seg;
	}
	if (left) {
		stat_add(&c->stats.bad_packets, 1);
		return;
	}
	stat_add(&c->stats.bytes_recv, WIRE_HDR_LEN + m->plen);
	p = payload;
	for (uint32_t i = 0; i < m->count; i++, p += rec.bytes) {
		sparse_rec_parse(p, m->plen, esz, lay_seg_len, l, &rec);
		if (seg_bit(ks->got, rec.seg)) {
			stat_add(&c->stats.dup_results, 1);
			continue;
		}
		seg_bit_set(ks->got, rec.seg);
		/* the segment is zero (sparse_send or the caller): only the entries */
		sparse_rec_put((uint8_t *)r->buf + seg_first(l, rec.seg) * esz, &rec, esz,
			       seg_len(l, rec.seg));
		if (!xfer_seg_done(c, r, rec.seg, rec.bytes, m->flags, now))
			return; /* r is finished: not ours to touch any more */
	}
}
