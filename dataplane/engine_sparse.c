/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * engine_sparse.c - sparse keys (docs/protocol.md "Sparse keys"): their
 * layout, a sparse PUSH (records of several segments, each checked, then
 * each a contribution to its segment under the round rules of engine.c),
 * the merge at completion (common/sparse.h sparse_sum, in rank order) and
 * engine_next, which drains a PUSH's answers: completed records to every
 * rank, answered ones to the sender, then notices and drops.
 *
 * Rules: one bad record drops the whole packet before any is applied;
 * the answers wait in the engine's own e->sp (sized for the most records
 * one PUSH can carry), the merge's scratch is e->sp_acc and
 * e->sp_touched: no allocation on the lcore.
 */
#include "dataplane/engine_internal.h"

#include <stdbool.h>
#include <string.h>

#include "common/sparse.h"

size_t engine_sparse_mem_bytes(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			       uint32_t segs_per_chunk)
{
	return key_layout_bytes(count, sparse_seg_elems(seg_bytes, wire_dtype_size(dtype)),
				seg_bytes, segs_per_chunk, 1);
}

struct engine_key *engine_sparse_key_init(void *mem, uint32_t key, uint64_t count,
					  unsigned dtype, uint32_t seg_bytes,
					  uint32_t segs_per_chunk,
					  const uint8_t *chunk_lcore)
{
	struct engine_key *k = key_layout_init(mem, key, count, dtype,
					       sparse_seg_elems(seg_bytes, wire_dtype_size(dtype)),
					       segs_per_chunk, chunk_lcore, 1);
	k->sparse = 1;
	return k;
}

/* A sparse round completed: every rank's record added in rank order into
 * a binary32 sum that starts from +0, rounded once to the dtype, kept in
 * the shadow copy as one record of the entries that are not zero bits
 * (common/sparse.h sparse_sum: the work is in the entries present). */
void sparse_complete(struct engine *e, const struct engine_job *j,
		     const struct engine_key *k, const struct engine_slot *sl,
		     uint32_t seg, uint16_t len)
{
	sparse_sum(k->result + (size_t)seg * j->seg_bytes, seg, (const uint8_t *const *)sl->src,
		   j->world, k->dtype, len, e->sp_acc, e->sp_touched);
}

/* A sparse PUSH: every record checked before any is applied (one bad
 * record drops the packet), then each applied as its segment's
 * contribution; the answers wait in e->sp for engine_next. */
int sparse_push(struct engine *e, struct engine_job *j, struct engine_key *k,
		const struct wire_msg *m, const uint8_t *payload, struct engine_out *out)
{
	struct engine_sparse_out *sp = &e->sp;
	size_t esz = wire_dtype_size(k->dtype), left = m->plen;
	const uint8_t *p = payload;
	struct sparse_rec r;
	uint32_t prev = 0, done = 0;

	if (m->arg || (m->flags & WIRE_FLAG_INIT))
		return -DROP_BAD_FLAGS;
	if (m->count > ENGINE_SPARSE_MAX_RECS)
		return -DROP_BAD_SPARSE;
	for (uint32_t i = 0; i < m->count; i++, p += r.bytes, left -= r.bytes) {
		if (sparse_rec_parse(p, left, esz, key_seg_len, k, &r) < 0 ||
		    (i == 0 ? r.seg != m->seg : r.seg <= prev) ||
		    sparse_rec_check(&r, key_seg_len(k, r.seg), esz) < 0)
			return -DROP_BAD_SPARSE;
		if (k->chunk_lcore[r.seg / k->segs_per_chunk] != e->lcore)
			return -DROP_WRONG_LCORE;
		prev = r.seg;
	}
	if (left)
		return -DROP_BAD_SPARSE;

	if (m->flags & WIRE_FLAG_RETX)
		e->c.retx++;
	sp->job = j;
	sp->key = k;
	sp->m = *m;
	p = payload;
	for (uint32_t i = 0; i < m->count; i++, p += r.bytes) {
		struct engine_sparse_ev *ev = &sp->ev[i];
		struct engine_out o;
		sparse_rec_header(p, &r.seg, &r.n, &r.form);
		uint32_t len = key_seg_len(k, r.seg);
		r.bytes = SPARSE_REC_HDR + (uint32_t)sparse_body_bytes(r.form, r.n, len, esz);
		ev->seg = r.seg;
		ev->what = seg_push(e, j, k, m, r.seg, (uint16_t)len, p, r.bytes, NULL, 0, &o);
		if (ev->what == ENGINE_SEND_NOTICE)
			ev->notice = o.notice;
		done += ev->what == ENGINE_SEND_ALL;
	}
	sp->n = m->count;
	sp->cur = 0;
	sp->phase = 0;
	/* marks counts rounds, as the dense path's: one per completed record */
	sp->ce = done && over_share(e, j);
	if (sp->ce)
		e->c.marks += done;
	(void)out;
	return ENGINE_ABSORBED;
}

/* Whether event what belongs to phase ph of engine_next. */
static inline bool in_phase(int32_t what, unsigned ph)
{
	return ph == 0 ? what == ENGINE_SEND_ALL : ph == 1 ? what == ENGINE_SEND_ONE
	       : what < 0 || what == ENGINE_SEND_NOTICE;
}

int engine_next(struct engine *e, struct engine_out *out)
{
	struct engine_sparse_out *sp = &e->sp;

	out->held = 0;
	for (; sp->phase < 3; sp->phase++, sp->cur = 0) {
		while (sp->cur < sp->n && !in_phase(sp->ev[sp->cur].what, sp->phase))
			sp->cur++;
		if (sp->cur == sp->n)
			continue;
		const struct engine_sparse_ev *ev = &sp->ev[sp->cur];
		const struct engine_job *j = sp->job;
		if (sp->phase == 2) {
			sp->cur++;
			if (ev->what < 0)
				return ev->what;
			out->job = j;
			out->hdr = (struct wire_msg){
				.type = WIRE_WAIT, .dtype = sp->key->dtype, .job = j->id,
				.token = j->token, .key = sp->key->key, .seg = ev->seg,
				.round = sp->m.round, .rank = sp->m.rank,
			};
			out->notice = ev->notice;
			out->payload = NULL;
			out->plen = 0;
			out->rank = sp->m.rank;
			return ENGINE_SEND_NOTICE;
		}
		/* pack this phase's records from the shadow copies */
		uint32_t used = 0, nrec = 0, first = ev->seg;
		size_t esz = wire_dtype_size(sp->key->dtype);
		for (; sp->cur < sp->n; sp->cur++) {
			ev = &sp->ev[sp->cur];
			if (!in_phase(ev->what, sp->phase))
				continue;
			const uint8_t *rec = sp->key->result + (size_t)ev->seg * j->seg_bytes;
			uint32_t seg;
			uint16_t n;
			uint8_t form;
			sparse_rec_header(rec, &seg, &n, &form);
			uint32_t bytes = SPARSE_REC_HDR + (uint32_t)sparse_body_bytes(form, n,
						key_seg_len(sp->key, seg), esz);
			if (used + bytes > j->seg_bytes)
				break;
			memcpy(sp->pack + used, rec, bytes);
			used += bytes;
			nrec++;
		}
		out->job = j;
		out->hdr = (struct wire_msg){
			.type = WIRE_RESULT, .dtype = sp->key->dtype,
			.flags = (uint8_t)(WIRE_FLAG_SPARSE | (sp->phase == 0 && sp->ce ? WIRE_FLAG_CE : 0)),
			.job = j->id, .token = j->token, .key = sp->key->key, .seg = first,
			.round = sp->m.round, .count = (uint16_t)nrec,
		};
		out->payload = sp->pack;
		out->plen = used;
		out->rank = sp->m.rank;
		out->only = ENGINE_ONLY_NONE;
		return sp->phase == 0 ? ENGINE_SEND_ALL : ENGINE_SEND_ONE;
	}
	sp->n = 0;
	return ENGINE_ABSORBED;
}
