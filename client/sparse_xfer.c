/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sparse_xfer.c - the packets of sparse keys (docs/protocol.md "Sparse
 * keys"), run by the progress thread beside xfer.c.
 *
 * Sending: a request's records were encoded when it was submitted
 * (sparse_call.c: r->enc, one per segment). xfer.c's window, RACK, NACK and
 * timeout logic stays per segment; only the packing differs: a segment's
 * record joins the open packet of its endpoint if that packet is of the
 * same key, round and flags, its last segment is lower (the box wants
 * them increasing: retransmissions come in any order) and it has room
 * (the job's seg_bytes), else it starts one in the transmit queue. A packet keeps taking records until
 * the queue is flushed, so the segments one fill or one RACK scan sends to
 * an endpoint travel together.
 *
 * Receiving: a SPARSE RESULT's records are all checked (segment inside
 * the key and increasing, the body by common/sparse.h) before any is
 * used; each new one is scattered into the caller's buffer, dense, and
 * counted as that segment's result (xfer_seg_done).
 */
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"
#include "common/sparse.h"

/* Room for the sparse packet buffers and the per-endpoint map. */
static bool sparse_alloc(pbox_client *c)
{
	struct xfer *x = &c->x;

	if (x->sp_open)
		return true;
	x->sp_buf = malloc((size_t)XFER_TX_BURST * WIRE_MAX_PAYLOAD);
	x->sp_open = calloc(c->neps ? c->neps : 1, sizeof(*x->sp_open));
	x->sp_last = calloc(c->neps ? c->neps : 1, sizeof(*x->sp_last));
	if (x->sp_buf && x->sp_open && x->sp_last)
		return true;
	free(x->sp_buf);
	free(x->sp_open);
	free(x->sp_last);
	x->sp_buf = NULL;
	x->sp_open = NULL;
	x->sp_last = NULL;
	return false;
}

void sparse_send(pbox_client *c, struct pbox_req *r, uint32_t s, uint8_t flags)
{
	struct xfer *x = &c->x;
	const struct seg_layout *l = &r->ks->lay;
	unsigned ep = seg_endpoint(l, s);
	const uint8_t *rec = r->enc + r->enc_off[s];
	size_t bytes = r->enc_off[s + 1] - r->enc_off[s];

	if (!sparse_alloc(c)) {
		/* never sent: the retransmission timer tries again */
		stat_add(&c->stats.tx_dropped, 1);
		return;
	}
	flags |= WIRE_FLAG_NOTICE | WIRE_FLAG_SPARSE;
	if (x->sp_open[ep]) {
		struct tp_pkt *p = &x->txq[x->sp_open[ep] - 1];
		if (p->hdr.key == r->key && p->hdr.round == r->round && p->hdr.flags == flags &&
		    s > x->sp_last[ep] && p->len + bytes <= c->seg_bytes) {
			memcpy((uint8_t *)p->payload + p->len, rec, bytes);
			p->len += bytes;
			p->hdr.count++;
			x->sp_last[ep] = s;
			goto sent;
		}
	}
	if (x->ntxq == XFER_TX_BURST)
		xfer_flush(c);
	uint8_t *buf = x->sp_buf + (size_t)x->ntxq * WIRE_MAX_PAYLOAD;
	memcpy(buf, rec, bytes);
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
	p = payload;
	for (uint32_t i = 0; i < m->count; i++, p += rec.bytes) {
		sparse_rec_parse(p, m->plen, esz, lay_seg_len, l, &rec);
		if (seg_bit(ks->got, rec.seg)) {
			stat_add(&c->stats.dup_results, 1);
			continue;
		}
		seg_bit_set(ks->got, rec.seg);
		sparse_rec_scatter((uint8_t *)r->buf + seg_first(l, rec.seg) * esz, &rec, esz,
				   seg_len(l, rec.seg));
		bool last = r->ndone + 1 == l->nsegs;
		xfer_seg_done(c, r, rec.seg, rec.bytes, m->flags, now);
		if (last)
			return; /* r is finished: not ours to touch any more */
	}
}
