/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * engine.c - the engine's round core: job memory and the shared key
 * layout, control messages (job install, key table, abort, remove), a
 * PUSH's checks, the round rules per segment (contribution slots, the
 * bitmap of ranks in, held or copied payloads, lateness) and completion
 * (exactly once per round: the kind's completion, then the slot is free).
 * See engine.h for the contract and docs/protocol.md "Rounds"; the other
 * engine_*.c files hold what differs per kind of key and recovery
 * (engine_internal.h lists them).
 *
 * Rules: no locks, no allocation, no system calls, no clock reads, no
 * mutable globals: everything lives in memory the control plane handed
 * over, time comes from engine_clock. engine_push_ref is the hot path:
 * what it calls in another file per packet or per round is inline in
 * engine_internal.h.
 */
#include "dataplane/engine_internal.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

/* ---- memory layout (used by the control plane, on its own thread) ---- */

size_t engine_job_mem_bytes(uint16_t world, uint32_t seg_bytes,
			    uint32_t key_cap, uint32_t nslots)
{
	return ALIGN64((size_t)key_cap * sizeof(struct engine_key *)) +
	       ALIGN64((size_t)nslots * sizeof(struct engine_slot)) +
	       ALIGN64((size_t)nslots * sizeof(uint16_t)) +
	       ALIGN64((size_t)world * sizeof(struct engine_worker)) +
	       ALIGN64((size_t)world * sizeof(struct engine_rank)) +
	       ALIGN64((size_t)nslots * world * 2 * sizeof(void *)) +
	       (size_t)nslots * world * seg_bytes;
}

/* The layout of every kind of key (engine_internal.h); the kinds' own
 * entry points are in engine_dense.c, engine_sparse.c and engine_ps.c. */
uint32_t key_layout_nsegs(uint64_t count, uint32_t seg_elems, uint32_t nslices)
{
	uint64_t slice = nslices ? count / nslices : 0;
	return seg_elems ? (uint32_t)(nslices * ((slice + seg_elems - 1) / seg_elems)) : 0;
}

uint32_t key_layout_nchunks(uint64_t count, uint32_t seg_elems, uint32_t segs_per_chunk,
			    uint32_t nslices)
{
	return (key_layout_nsegs(count, seg_elems, nslices) + segs_per_chunk - 1) /
	       segs_per_chunk;
}

size_t key_layout_bytes(uint64_t count, uint32_t seg_elems, uint32_t seg_bytes,
			uint32_t segs_per_chunk, uint32_t nslices)
{
	uint32_t nsegs = key_layout_nsegs(count, seg_elems, nslices);
	return ALIGN64(sizeof(struct engine_key)) +
	       ALIGN64(key_layout_nchunks(count, seg_elems, segs_per_chunk, nslices)) +
	       ALIGN64((size_t)nsegs * sizeof(struct engine_seg)) +
	       (size_t)nsegs * seg_bytes;
}

struct engine_key *key_layout_init(void *mem, uint32_t key, uint64_t count, unsigned dtype,
				   uint32_t seg_elems, uint32_t segs_per_chunk,
				   const uint8_t *chunk_lcore, uint32_t nslices)
{
	uint8_t *p = mem;
	struct engine_key *k = (struct engine_key *)p;
	uint32_t nsegs = key_layout_nsegs(count, seg_elems, nslices);
	uint32_t nchunks = key_layout_nchunks(count, seg_elems, segs_per_chunk, nslices);

	p += ALIGN64(sizeof(*k));
	k->key = key;
	k->dtype = (uint8_t)dtype;
	k->count = count;
	k->slice = count / nslices;
	k->slice_segs = nsegs / nslices;
	k->seg_elems = seg_elems;
	k->nsegs = nsegs;
	k->segs_per_chunk = segs_per_chunk;
	k->nchunks = nchunks;
	k->round0 = 0;
	memcpy(p, chunk_lcore, nchunks);
	k->chunk_lcore = p;
	p += ALIGN64(nchunks);
	k->segs = (struct engine_seg *)p;
	for (uint32_t s = 0; s < nsegs; s++)
		k->segs[s] = (struct engine_seg){ .done = 0, .slot = ENGINE_NO_SLOT };
	p += ALIGN64((size_t)nsegs * sizeof(struct engine_seg));
	k->result = p;
	return k;
}

void engine_key_set_round0(struct engine_key *k, uint32_t round0)
{
	k->round0 = round0;
	for (uint32_t s = 0; s < k->nsegs; s++)
		k->segs[s].done = round0;
}

/* ---- control messages (applied by the owning lcore) ---- */

void engine_init(struct engine *e, uint16_t lcore, const struct sum_kernels *sum)
{
	memset(e, 0, sizeof(*e));
	e->lcore = lcore;
	e->sum = sum;
}

void engine_set_hold(struct engine *e, engine_release_fn release, void *ctx)
{
	e->release = release;
	e->release_ctx = ctx;
}

/* Give back the references held by a slot. */
static void slot_release(struct engine *e, struct engine_slot *sl, uint16_t world)
{
	for (unsigned r = 0; r < world; r++)
		if (sl->ref[r]) {
			e->release(e->release_ctx, sl->ref[r]);
			sl->ref[r] = NULL;
		}
}

/* Every reference a job holds (abort, remove). */
static void job_release(struct engine *e, struct engine_job *j)
{
	for (uint32_t s = 0; s < j->nslots; s++)
		if (j->slots[s].key)
			slot_release(e, &j->slots[s], j->world);
}

static struct engine_job *job_of(struct engine *e, uint32_t id)
{
	struct engine_job *j = &e->jobs[engine_job_index(id)];
	return j->state != ENGINE_JOB_FREE && j->id == id ? j : NULL;
}

static int job_install(struct engine *e, const struct engine_job_desc *d)
{
	struct engine_job *j = &e->jobs[engine_job_index(d->id)];
	uint8_t *p = d->mem;

	if (j->state != ENGINE_JOB_FREE)
		return -EEXIST;
	if (d->id == 0 || d->world == 0 || d->world > ENGINE_MAX_WORLD ||
	    d->seg_bytes == 0 || d->seg_bytes % WIRE_PAYLOAD_ALIGN ||
	    d->key_cap == 0 || (d->key_cap & (d->key_cap - 1)) ||
	    d->nslots == 0 || d->nslots >= ENGINE_NO_SLOT || !d->mem ||
	    d->weight > ENGINE_WEIGHT_MAX)
		return -EINVAL;
	memset(j, 0, sizeof(*j));
	j->id = d->id;
	j->token = d->token;
	j->world = d->world;
	j->seg_bytes = d->seg_bytes;
	j->key_cap = d->key_cap;
	j->keys = (struct engine_key **)p;
	p += ALIGN64((size_t)d->key_cap * sizeof(struct engine_key *));
	j->slots = (struct engine_slot *)p;
	p += ALIGN64((size_t)d->nslots * sizeof(struct engine_slot));
	j->free_slots = (uint16_t *)p;
	p += ALIGN64((size_t)d->nslots * sizeof(uint16_t));
	j->workers = (struct engine_worker *)p;
	memset(p, 0, (size_t)d->world * sizeof(struct engine_worker));
	p += ALIGN64((size_t)d->world * sizeof(struct engine_worker));
	j->ranks = (struct engine_rank *)p;
	memset(p, 0, (size_t)d->world * sizeof(struct engine_rank));
	p += ALIGN64((size_t)d->world * sizeof(struct engine_rank));
	const void **srcs = (const void **)p;
	void **refs = (void **)p + (size_t)d->nslots * d->world;
	p += ALIGN64((size_t)d->nslots * d->world * 2 * sizeof(void *));
	j->nslots = d->nslots;
	for (uint32_t i = 0; i < d->nslots; i++) {
		j->slots[i].data = p + (size_t)i * d->world * d->seg_bytes;
		j->slots[i].src = srcs + (size_t)i * d->world;
		j->slots[i].ref = refs + (size_t)i * d->world;
		j->free_slots[i] = (uint16_t)(d->nslots - 1 - i);
	}
	j->nfree = d->nslots;
	j->weight = d->weight ? d->weight : 1;
	j->nack_delay_ns = ENGINE_NACK_INIT_NS;
	j->late_period_at = e->now;
	for (unsigned r = 0; r < d->world; r++) {
		j->ranks[r].nack_tokens = ENGINE_NACK_BURST;
		j->ranks[r].nack_refill_at = e->now;
	}
	j->state = ENGINE_JOB_ACTIVE;
	return 0;
}

static inline uint32_t key_hash(uint32_t key, uint32_t cap)
{
	return (key * 2654435761u) & (cap - 1);
}

static int key_install(struct engine_job *j, struct engine_key *k)
{
	if (!k || j->nkeys + 1 > j->key_cap / 2)
		return -ENOSPC;
	for (uint32_t h = key_hash(k->key, j->key_cap);; h = (h + 1) & (j->key_cap - 1)) {
		if (!j->keys[h]) {
			j->keys[h] = k;
			j->nkeys++;
			return 0;
		}
		if (j->keys[h]->key == k->key)
			return -EEXIST;
	}
}

static inline struct engine_key *key_find(const struct engine_job *j, uint32_t key)
{
	for (uint32_t h = key_hash(key, j->key_cap);; h = (h + 1) & (j->key_cap - 1)) {
		struct engine_key *k = j->keys[h];
		if (!k || k->key == key)
			return k;
	}
}

/* Forget k: release its open rounds' slots, then take it out of the
 * table and put back the rest of its probe cluster (linear probing has no
 * holes inside a cluster). */
static int key_remove(struct engine *e, struct engine_job *j, const struct engine_key *k)
{
	uint32_t mask = j->key_cap - 1, h;

	if (!k)
		return -EINVAL;
	for (h = key_hash(k->key, j->key_cap); j->keys[h] != k; h = (h + 1) & mask)
		if (!j->keys[h])
			return -ENOENT;
	for (uint32_t s = 0; s < j->nslots; s++) {
		struct engine_slot *sl = &j->slots[s];
		if (sl->key != k)
			continue;
		slot_release(e, sl, j->world);
		sl->key = NULL;
		j->free_slots[j->nfree++] = (uint16_t)s;
	}
	for (unsigned r = 0; r < j->world; r++)
		if (j->ranks[r].last_key == k->key)
			j->ranks[r].last_round = 0;
	j->keys[h] = NULL;
	j->nkeys--;
	for (h = (h + 1) & mask; j->keys[h]; h = (h + 1) & mask) {
		struct engine_key *o = j->keys[h];
		j->keys[h] = NULL;
		j->nkeys--;
		key_install(j, o);
	}
	return 0;
}

/* A rank was replaced (ENGINE_MSG_JOB_RESET): every open round of the
 * job is dropped, its contributions released, and rounds up to round0
 * never open again: every segment goes on at round0 + 1, with every rank
 * again (a segment's last done round is still answered from its shadow
 * copy, for a rank whose RESULT of it was lost). */
static void job_reset(struct engine *e, struct engine_job *j, uint32_t round0)
{
	for (uint32_t s = 0; s < j->nslots; s++) {
		struct engine_slot *sl = &j->slots[s];
		if (!sl->key)
			continue;
		sl->key->segs[sl->seg].slot = ENGINE_NO_SLOT;
		slot_release(e, sl, j->world);
		sl->key = NULL;
		j->free_slots[j->nfree++] = (uint16_t)s;
	}
	j->floor = round0;
	for (unsigned r = 0; r < j->world; r++)
		j->ranks[r].last_round = 0;
}

int engine_apply(struct engine *e, const struct engine_msg *m)
{
	struct engine_job *j;

	e->c.msgs++;
	if (m->type == ENGINE_MSG_JOB_INSTALL)
		return job_install(e, &m->u.desc);
	j = job_of(e, m->job);
	if (!j)
		return -ENOENT;
	switch (m->type) {
	case ENGINE_MSG_WORKER_SET:
		if (m->u.worker.rank >= j->world)
			return -EINVAL;
		j->workers[m->u.worker.rank].ip = m->u.worker.ip;
		j->workers[m->u.worker.rank].port = m->u.worker.port;
		return 0;
	case ENGINE_MSG_KEY_INSTALL:
		return key_install(j, m->u.key);
	case ENGINE_MSG_KEY_REMOVE:
		return key_remove(e, j, m->u.key);
	case ENGINE_MSG_JOB_RESET:
		job_reset(e, j, m->u.round0);
		return 0;
	case ENGINE_MSG_JOB_NONFINITE:
		if (m->u.nonfinite >= ENGINE_NF_COUNT)
			return -EINVAL;
		j->nonfinite = m->u.nonfinite;
		return 0;
	case ENGINE_MSG_JOB_ABORT:
		job_release(e, j);
		j->state = ENGINE_JOB_ABORTED;
		return 0;
	case ENGINE_MSG_JOB_REMOVE:
		job_release(e, j);
		memset(j, 0, sizeof(*j));
		return 0;
	default:
		return -EINVAL;
	}
}

/* ---- the data path ---- */

static void fill_out(struct engine_out *out, const struct engine_job *j,
		     const struct engine_key *k, const struct wire_msg *m,
		     uint16_t count)
{
	out->job = j;
	out->hdr = (struct wire_msg){
		.type = WIRE_RESULT, .dtype = k->ps ? k->ps->rdtype : k->dtype, .job = j->id,
		.token = j->token, .key = k->key, .seg = m->seg,
		.round = m->round, .count = count,
	};
	out->payload = k->result + (size_t)m->seg * j->seg_bytes;
	out->plen = (uint32_t)count * (uint32_t)wire_dtype_size(out->hdr.dtype);
	out->rank = m->rank;
	out->only = ENGINE_ONLY_NONE;
	if (k->segs[m->seg].skipped) /* PS: the weights were not stepped */
		out->hdr.status = WIRE_ST_SKIPPED;
}

/* Sum the slot's contributions in rank order into the shadow copy (PS:
 * update the weights); give back the packets held. */
static void complete(struct engine *e, struct engine_job *j,
		     struct engine_key *k, struct engine_seg *sg,
		     struct engine_slot *sl, uint32_t seg, uint16_t count)
{
	if (!sl->retx)
		spread_sample(j, e->now - sl->t_open);
	if (k->ps)
		sg->skipped = (uint16_t)(ps_complete(e, j, k, sl, seg, count) == ENGINE_NF_SKIP);
	else if (k->sparse)
		sparse_complete(e, j, k, sl, seg, count);
	else
		dense_complete(e, j, k, sl, seg, count);
	slot_release(e, sl, j->world);
	/* done, then the slot: a PS key's snapshot (control/ps_ckpt.c) reads
	 * them in the other order around its copy of the weights */
	__atomic_store_n(&sg->done, sl->round, __ATOMIC_RELEASE);
	__atomic_store_n(&sg->slot, ENGINE_NO_SLOT, __ATOMIC_RELEASE);
	sl->key = NULL;
	j->free_slots[j->nfree++] = (uint16_t)(sl - j->slots);
	j->completes++;
	e->c.completes++;
}

/* An ERROR with status for the sender of m. */
int send_error(const struct engine_job *j, const struct wire_msg *m, uint16_t status,
	       struct engine_out *out)
{
	out->job = j;
	out->hdr = (struct wire_msg){
		.type = WIRE_ERROR, .dtype = m->dtype, .job = j->id, .token = j->token,
		.key = m->key, .seg = m->seg, .round = m->round, .status = status,
	};
	out->payload = NULL;
	out->plen = 0;
	out->rank = m->rank;
	return ENGINE_SEND_ERROR;
}

/*
 * A FINAL push (docs/protocol.md "Resuming after a box restart"): a rank
 * hands the box a round's result it got from the box's earlier life. It
 * completes the segment's round with those bytes (an open round of it:
 * its contributions are dropped and every rank gets the result) or moves
 * a segment that has no round open up to it; the round just done is
 * acknowledged with its result, an older one with ERROR STALE. Dense keys
 * whose every rank gets the whole result only (not PS, sparse or scatter
 * keys).
 */
static int final_push(struct engine *e, struct engine_job *j, struct engine_key *k,
		      const struct wire_msg *m, const void *payload, uint16_t count,
		      struct engine_out *out)
{
	struct engine_seg *sg = &k->segs[m->seg];

	if (k->ps || k->coll == ENGINE_COLL_SCATTER || m->arg ||
	    (m->flags & WIRE_FLAG_INIT))
		return -DROP_BAD_FLAGS;
	if (m->count != count)
		return -DROP_BAD_COUNT;
	e->c.finals++;
	if (m->round <= sg->done || m->round <= j->floor) {
		if (m->round == sg->done && sg->done != k->round0) {
			fill_out(out, j, k, m, count);
			return ENGINE_SEND_ONE;
		}
		e->c.errors_sent++;
		return send_error(j, m, WIRE_ST_STALE, out);
	}
	int v = ENGINE_SEND_ONE;
	if (sg->slot != ENGINE_NO_SLOT) {
		struct engine_slot *sl = &j->slots[sg->slot];
		if (sl->round != m->round)
			return -DROP_FUTURE_ROUND;   /* an earlier round must end first */
		slot_release(e, sl, j->world);
		sl->key = NULL;
		j->free_slots[j->nfree++] = sg->slot;
		sg->slot = ENGINE_NO_SLOT;
		v = ENGINE_SEND_ALL;
	}
	memcpy(k->result + (size_t)m->seg * j->seg_bytes, payload,
	       (size_t)count * wire_dtype_size(k->dtype));
	sg->done = m->round;
	j->completes++;
	e->c.completes++;
	fill_out(out, j, k, m, count);
	return v;
}

/*
 * The hot path: per packet, the checks and slot bookkeeping, and per
 * completed round the N-way sum. Its cycles per packet (bench/engine_bench)
 * are in docs/performance.md "Engine at packet rate".
 */
int engine_push(struct engine *e, const struct wire_msg *m, const void *payload,
		uint32_t src_ip, uint16_t src_port, struct engine_out *out)
{
	return engine_push_ref(e, m, payload, NULL, src_ip, src_port, out);
}

/* One contribution to segment seg of k (count elements; nbytes of it at
 * payload: a dense segment's elements or a sparse key's record) from the
 * sender of m: the round rules of docs/protocol.md "Rounds". */
int seg_push(struct engine *e, struct engine_job *j, struct engine_key *k,
	     const struct wire_msg *m, uint32_t seg, uint16_t count,
	     const void *payload, size_t nbytes, void *ref, float lr,
	     struct engine_out *out)
{
	struct engine_seg *sg = &k->segs[seg];
	struct engine_rank *rk = &j->ranks[m->rank];

	if (rk->last_key != m->key || rk->last_round != m->round) {
		rk->last_key = m->key;
		rk->last_round = m->round;
		rk->last_seg = seg;
	} else if (seg > rk->last_seg) {
		rk->last_seg = seg;
	}
	if (m->round == sg->done && sg->done != k->round0) {
		e->c.dup_done++;
		return ENGINE_SEND_ONE;
	}
	if ((m->round != sg->done + 1 || m->round <= j->floor) &&
	    !(m->round == j->floor + 1 && sg->done < j->floor))   /* (a reset's: JOB_RESET) */
		return m->round <= sg->done || m->round <= j->floor ? -DROP_STALE_ROUND
								   : -DROP_FUTURE_ROUND;

	struct engine_slot *sl;
	if (sg->slot == ENGINE_NO_SLOT) {
		if (j->nfree == 0)
			return -DROP_NO_SLOT;
		/* visible before the round can touch the weights (ps_ckpt.c) */
		__atomic_store_n(&sg->slot, j->free_slots[--j->nfree], __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		sl = &j->slots[sg->slot];
		rankset_clear(&sl->have, j->world);
		sl->nhave = 0;
		sl->key = k;
		sl->seg = seg;
		sl->round = m->round;
		sl->retx = 0;
		sl->nnack = 0;
		sl->t_open = e->now;
		sl->nack_at = e->now + j->nack_delay_ns;
	} else {
		sl = &j->slots[sg->slot];
	}
	/* taken into an open round (the lcore learns where the rank is, so a
	 * NACK can reach it): whether it understands notices */
	rk->notice = (m->flags & WIRE_FLAG_NOTICE) != 0;
	if (m->flags & WIRE_FLAG_RETX)
		sl->retx = 1;
	if (rankset_has(&sl->have, m->rank)) {
		e->c.dup_open++;
		if (!rk->notice)
			return ENGINE_ABSORBED;
		fill_notice(out, e, j, sl, WIRE_WAIT, m->rank);
		e->c.waits++;
		return ENGINE_SEND_NOTICE;
	}
	if (ref && e->release) {
		sl->src[m->rank] = payload;
		sl->ref[m->rank] = ref;
		out->held = 1;
		e->c.held++;
	} else {
		uint8_t *d = sl->data + (size_t)m->rank * j->seg_bytes;
		if (nbytes) /* a PS init round's empty contributions have no payload */
			memcpy(d, payload, nbytes);
		sl->src[m->rank] = d;
	}
	if (m->rank == 0)
		sl->lr = lr;
	uint64_t late = e->now - sl->t_open;
	rk->late_sum_ns += late;
	rk->late_n++;
	if (late > rk->late_max_ns[0])
		rk->late_max_ns[0] = late;
	rankset_add(&sl->have, m->rank);
	sl->nhave++;
	j->rx_bytes += nbytes;
	e->c.pushes++;
	if (sl->nhave < j->world)
		return ENGINE_ABSORBED;
	complete(e, j, k, sg, sl, seg, count);
	return ENGINE_SEND_ALL;
}

int engine_push_ref(struct engine *e, const struct wire_msg *m, const void *payload,
		    void *ref, uint32_t src_ip, uint16_t src_port, struct engine_out *out)
{
	struct engine_job *j = &e->jobs[engine_job_index(m->job)];

	out->held = 0;
	out->only = ENGINE_ONLY_NONE;
	e->sp.n = 0;

	if (m->type != WIRE_PUSH)
		return -DROP_BAD_TYPE;
	if (j->state == ENGINE_JOB_FREE || j->id != m->job)
		return -DROP_NO_JOB;
	if (m->token != j->token)
		return -DROP_BAD_TOKEN;
	if (m->rank >= j->world)
		return -DROP_BAD_RANK;
	const struct engine_worker *w = &j->workers[m->rank];
	if (w->ip != src_ip || w->port != src_port || w->ip == 0)
		return -DROP_BAD_SOURCE;
	if (j->state == ENGINE_JOB_ABORTED) {
		e->c.errors_sent++;
		return send_error(j, m, WIRE_ST_NO_JOB, out);
	}

	struct engine_key *k = key_find(j, m->key);
	if (!k)
		return -DROP_NO_KEY;
	if (!k->ps && m->dtype != k->dtype)
		return -DROP_BAD_DTYPE;
	if (k->sparse != ((m->flags & WIRE_FLAG_SPARSE) != 0))
		return -DROP_SPARSE_MISMATCH;
	if (k->sparse)
		return m->flags & WIRE_FLAG_FINAL ? -DROP_BAD_FLAGS
						  : sparse_push(e, j, k, m, payload, out);
	if (m->seg >= k->nsegs)
		return -DROP_BAD_SEGMENT;
	if (k->chunk_lcore[m->seg / k->segs_per_chunk] != e->lcore)
		return -DROP_WRONG_LCORE;
	uint16_t count = (uint16_t)key_seg_len(k, m->seg);
	if (m->flags & WIRE_FLAG_FINAL)
		return final_push(e, j, k, m, payload, count, out);
	float lr = 0;
	int rc = k->ps ? ps_check(e, j, k, m, count, &lr, out) : dense_check(k, m, count);
	if (rc != 0)
		return rc;

	if (m->flags & WIRE_FLAG_RETX)
		e->c.retx++;
	int v = seg_push(e, j, k, m, m->seg, count, payload,
			 (size_t)m->count * wire_dtype_size(m->dtype), ref, lr, out);
	if (v == ENGINE_SEND_ALL && j->state == ENGINE_JOB_ABORTED)
		return send_error(j, m, WIRE_ST_NONFINITE, out); /* ps_complete stopped it */
	if (v == ENGINE_SEND_ONE || v == ENGINE_SEND_ALL) {
		/* a scatter key's sum goes to the owner, the others get an ack */
		bool scatter = k->coll == ENGINE_COLL_SCATTER;
		uint16_t owner = scatter ? engine_seg_owner(k, m->seg) : 0;
		fill_out(out, j, k, m, scatter && v == ENGINE_SEND_ONE && m->rank != owner
				       ? 0 : count);
		if (scatter)
			out->only = owner;
	}
	if (v == ENGINE_SEND_ALL && over_share(e, j)) {
		out->hdr.flags |= WIRE_FLAG_CE;
		e->c.marks++;
	}
	return v;
}
