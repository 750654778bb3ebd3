/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * engine_internal.h - what the engine's files share. Not for use outside
 * dataplane/engine*.c: everyone else includes dataplane/engine.h, whose
 * contract they all keep.
 *
 *   engine.c           the round core: job and key tables, control
 *                      messages, a PUSH's checks, the round rules and
 *                      slot bitmaps, completion and answers
 *   engine_dense.c     dense and collective keys' layout
 *   engine_ps.c        PS keys: layout, the optimizer step at completion
 *   engine_sparse.c    sparse keys: layout, records, merge, engine_next
 *   engine_recovery.c  WAIT and NACK notices, engine_tick, the NACK
 *                      delay, the stall watch's readers
 *
 * Rules for every one of them: one struct engine per lcore, touched only
 * by that lcore (the stall watch's readers excepted, engine.h); no locks,
 * no allocation, no system calls, no clock reads, no mutable globals.
 * What runs per packet or per completed round on the dense path and is
 * called from another file is static inline here (below), so the push
 * compiles as it did in one file (bench/engine_bench, docs/performance.md
 * "engine split (issue 38)"). A PS or sparse completion is an ordinary
 * call: its work (an optimizer step, a merge of records) dwarfs the call.
 */
#ifndef PBOX_ENGINE_INTERNAL_H
#define PBOX_ENGINE_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "dataplane/engine.h"

#define ALIGN64(x) (((x) + 63) & ~(size_t)63)

/* ---- key layout (engine.c; on the control plane's thread) ---- */

/* A key of count elements cut into nslices slices of count / nslices
 * elements, each cut on its own into segments of seg_elems elements
 * (docs/protocol.md "Collective keys"; one slice: the plain layout), and
 * grouped segs_per_chunk segments to a chunk. */
uint32_t key_layout_nsegs(uint64_t count, uint32_t seg_elems, uint32_t nslices);
uint32_t key_layout_nchunks(uint64_t count, uint32_t seg_elems, uint32_t segs_per_chunk,
			    uint32_t nslices);

/* Bytes of such a key and its layout in mem (zeroed, 64-aligned); shadow
 * copies are seg_bytes apart whatever seg_elems (a sparse key's records
 * fit). key_layout_init copies the chunk owners and leaves coll, root,
 * sparse and ps to the caller. */
size_t key_layout_bytes(uint64_t count, uint32_t seg_elems, uint32_t seg_bytes,
			uint32_t segs_per_chunk, uint32_t nslices);
struct engine_key *key_layout_init(void *mem, uint32_t key, uint64_t count, unsigned dtype,
				   uint32_t seg_elems, uint32_t segs_per_chunk,
				   const uint8_t *chunk_lcore, uint32_t nslices);

/* ---- the round core (engine.c) ---- */

/* One contribution to segment seg of k (count elements; nbytes of it at
 * payload: a dense segment's elements or a sparse key's record) from the
 * sender of m, ref held as engine_push_ref holds it: the round rules of
 * docs/protocol.md "Rounds". Completes the round when it is the last
 * rank's. Returns an enum engine_verdict (SEND_NOTICE: out holds the
 * WAIT) or a negative drop reason. */
int seg_push(struct engine *e, struct engine_job *j, struct engine_key *k,
	     const struct wire_msg *m, uint32_t seg, uint16_t count,
	     const void *payload, size_t nbytes, void *ref, float lr,
	     struct engine_out *out);

/* An ERROR with status for the sender of m; returns ENGINE_SEND_ERROR. */
int send_error(const struct engine_job *j, const struct wire_msg *m, uint16_t status,
	       struct engine_out *out);

/* Elements of segment seg of k (< nsegs), 0 outside the key. Per packet
 * (engine.c's push; engine_sparse.c per record and as sparse_rec_parse's
 * callback). */
static inline uint32_t key_seg_len(const void *ctx, uint32_t seg)
{
	const struct engine_key *k = ctx;

	if (seg >= k->nsegs)
		return 0;
	/* (no division on the hot path of one-slice keys: every key but an
	 * allgather's or reduce_scatter's) */
	uint32_t in = k->slice_segs == k->nsegs ? seg : seg % k->slice_segs;
	uint64_t left = k->slice - (uint64_t)in * k->seg_elems;
	return left < k->seg_elems ? (uint32_t)left : k->seg_elems;
}

/* ---- dense and collective keys (hot: inline; layout in engine_dense.c) ---- */

/* The checks of a PUSH to a dense key of count elements in segment m->seg:
 * every rank sends count elements, but to a gather key only the segment's
 * owner sends data (the others count 0); no argument, no INIT. Returns 0
 * or a negative drop reason. Per packet. */
static inline int dense_check(const struct engine_key *k, const struct wire_msg *m,
			      uint16_t count)
{
	if (m->count != (k->coll == ENGINE_COLL_GATHER &&
			 engine_seg_owner(k, m->seg) != m->rank ? 0 : count))
		return -DROP_BAD_COUNT; /* a gather key: only the owner sends data */
	if (m->arg || (m->flags & WIRE_FLAG_INIT))
		return -DROP_BAD_FLAGS;
	return 0;
}

/* A dense round completed: the slot's contributions summed in rank order
 * into the segment's shadow copy; a gather key's: the owner's bytes, as
 * sent. Per completed round. */
static inline void dense_complete(struct engine *e, const struct engine_job *j,
				  const struct engine_key *k, const struct engine_slot *sl,
				  uint32_t seg, uint16_t count)
{
	uint8_t *dst = k->result + (size_t)seg * j->seg_bytes;

	if (k->coll == ENGINE_COLL_GATHER) /* the owner's bytes, as sent */
		memcpy(dst, sl->src[engine_seg_owner(k, seg)],
		       (size_t)count * wire_dtype_size(k->dtype));
	else
		e->sum->fn[k->dtype](dst, sl->src, j->world, count);
}

/* ---- PS keys (engine_ps.c) ---- */

/* The checks of a PUSH to a PS key: its first round is the init round (flag INIT,
 * f32; rank 0 carries the segment's weights unless they came from a
 * checkpoint, the others nothing); later rounds carry gradients in the
 * key's dtype and a learning rate in arg. A gradient for the first round (the
 * weights are not there) is answered with ERROR NO_WEIGHTS. Returns 0
 * (*lr set), a verdict, or a negative drop reason. Per packet: inline. */
static inline int ps_check(struct engine *e, const struct engine_job *j,
			   const struct engine_key *k, const struct wire_msg *m,
			   uint16_t count, float *lr, struct engine_out *out)
{
	int init = (m->flags & WIRE_FLAG_INIT) != 0;
	int first = m->round - k->round0 == 1;

	if (first && !init) {
		e->c.no_weights++;
		return send_error(j, m, WIRE_ST_NO_WEIGHTS, out);
	}
	if (init) {
		uint16_t want = m->rank == 0 && !k->ps->restored ? count : 0;
		if (!first || m->arg)
			return -DROP_BAD_ARG;
		if (m->dtype != WIRE_F32)
			return -DROP_BAD_DTYPE;
		return m->count == want ? 0 : -DROP_BAD_COUNT;
	}
	if (m->dtype != k->dtype)
		return -DROP_BAD_DTYPE;
	if (m->count != count)
		return -DROP_BAD_COUNT;
	uint32_t bits = m->arg;
	memcpy(lr, &bits, sizeof(*lr));
	/* finite and >= 0 (NaN fails the comparison) */
	return *lr >= 0 && *lr <= 3.4028234663852886e38f ? 0 : -DROP_BAD_ARG;
}

/* A PS round of segment seg (count elements) completed: set the weights
 * or step the optimizer, then the shadow copy holds them in rdtype. A
 * gradient sum that is not finite is counted and handled by the job's
 * policy: returns ENGINE_NF_SKIP (not stepped), ENGINE_NF_ABORT (not
 * stepped, the job stopped on this lcore) or ENGINE_NF_PASS (stepped:
 * every finite round too). */
int ps_complete(struct engine *e, struct engine_job *j, struct engine_key *k,
		const struct engine_slot *sl, uint32_t seg, uint16_t count);

/* ---- sparse keys (engine_sparse.c) ---- */

/* A sparse PUSH to k: its records checked, then applied (seg_push each);
 * the answers wait in e->sp for engine_next. Returns ENGINE_ABSORBED or a
 * negative drop reason of the whole packet. */
int sparse_push(struct engine *e, struct engine_job *j, struct engine_key *k,
		const struct wire_msg *m, const uint8_t *payload, struct engine_out *out);

/* A sparse round of segment seg (len elements) completed: the records
 * merged in rank order into the shadow copy. */
void sparse_complete(struct engine *e, const struct engine_job *j,
		     const struct engine_key *k, const struct engine_slot *sl,
		     uint32_t seg, uint16_t len);

/* ---- recovery and fairness (engine_recovery.c; per round: inline) ---- */

/* A WAIT or NACK (type) of slot sl's round for rank, into out. */
void fill_notice(struct engine_out *out, const struct engine *e,
		 const struct engine_job *j, const struct engine_slot *sl,
		 uint8_t type, uint16_t rank);

/* A clean round (no retransmission, no NACK) took t from its first to its
 * last contribution: the NACK delay is the smoothed spread plus four mean
 * deviations (as RFC 6298 sets a timeout from round trips), so ranks that
 * are merely late are seldom NACKed. Per completed round. */
static inline void spread_sample(struct engine_job *j, uint64_t t)
{
	if (j->spread_ns == 0) {
		j->spread_ns = t;
		j->spread_dev_ns = t / 2;
	} else {
		uint64_t diff = t > j->spread_ns ? t - j->spread_ns : j->spread_ns - t;
		j->spread_dev_ns = (3 * j->spread_dev_ns + diff) / 4;
		j->spread_ns = (7 * j->spread_ns + t) / 8;
	}
	uint64_t d = j->spread_ns + 4 * j->spread_dev_ns + ENGINE_NACK_MIN_NS / 2;
	j->nack_delay_ns = d < ENGINE_NACK_MIN_NS ? ENGINE_NACK_MIN_NS
			 : d > ENGINE_NACK_MAX_NS ? ENGINE_NACK_MAX_NS : d;
}

/* Whether a completed round of j goes out marked: the lcore is congested
 * and j takes at least its weighted fair share of the recent byte rate
 * (engine_tick sums the shares). Per completed round. */
static inline int over_share(const struct engine *e, const struct engine_job *j)
{
	return e->congested &&
	       (unsigned __int128)j->rate * e->share_weight >=
	       (unsigned __int128)j->weight * e->share_rate;
}

#endif
