/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * engine.c - per-lcore aggregation: segment rounds, contribution slots,
 * rank-ordered sums and shadow copies. See engine.h for the contract and
 * docs/protocol.md "Rounds" and "Recovery" for the rules: WAIT and NACK
 * notices, congestion marks by weighted fair share, lateness per rank.
 * No locks, no allocation, no system calls, no clock reads: everything
 * lives in memory the control plane handed over, time comes from
 * engine_clock.
 */
#include "dataplane/engine.h"

#include "common/sparse.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#define ALIGN64(x) (((x) + 63) & ~(size_t)63)

/* ---- memory layout (used by the control plane, on its own thread) ---- */

size_t engine_job_mem_bytes(uint16_t world, uint32_t seg_bytes,
			    uint32_t key_cap, uint32_t nslots)
{
	return ALIGN64((size_t)key_cap * sizeof(struct engine_key *)) +
	       ALIGN64((size_t)nslots * sizeof(struct engine_slot)) +
	       ALIGN64((size_t)nslots * sizeof(uint16_t)) +
	       ALIGN64((size_t)nslots * world * 2 * sizeof(void *)) +
	       (size_t)nslots * world * seg_bytes;
}

/* A key's layout with seg_elems elements per segment; shadow copies are
 * seg_bytes apart whatever the layout (a sparse key's records fit). */
/* nslices slices of count / nslices elements, each cut on its own
 * (docs/protocol.md "Collective keys"; one slice: the plain layout). */
static uint32_t nsegs_of(uint64_t count, uint32_t seg_elems, uint32_t nslices)
{
	uint64_t slice = nslices ? count / nslices : 0;
	return seg_elems ? (uint32_t)(nslices * ((slice + seg_elems - 1) / seg_elems)) : 0;
}

static uint32_t nchunks_of(uint64_t count, uint32_t seg_elems, uint32_t segs_per_chunk,
			   uint32_t nslices)
{
	return (nsegs_of(count, seg_elems, nslices) + segs_per_chunk - 1) / segs_per_chunk;
}

static size_t key_mem(uint64_t count, uint32_t seg_elems, uint32_t seg_bytes,
		      uint32_t segs_per_chunk, uint32_t nslices)
{
	uint32_t nsegs = nsegs_of(count, seg_elems, nslices);
	return ALIGN64(sizeof(struct engine_key)) +
	       ALIGN64(nchunks_of(count, seg_elems, segs_per_chunk, nslices)) +
	       ALIGN64((size_t)nsegs * sizeof(struct engine_seg)) +
	       (size_t)nsegs * seg_bytes;
}

static struct engine_key *key_init(void *mem, uint32_t key, uint64_t count, unsigned dtype,
				   uint32_t seg_elems, uint32_t segs_per_chunk,
				   const uint8_t *chunk_lcore, uint32_t nslices)
{
	uint8_t *p = mem;
	struct engine_key *k = (struct engine_key *)p;
	uint32_t nsegs = nsegs_of(count, seg_elems, nslices);
	uint32_t nchunks = nchunks_of(count, seg_elems, segs_per_chunk, nslices);

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

static inline uint32_t dense_elems(unsigned dtype, uint32_t seg_bytes)
{
	return seg_bytes / (uint32_t)wire_dtype_size(dtype);
}

uint32_t engine_key_nsegs(uint64_t count, unsigned dtype, uint32_t seg_bytes)
{
	return nsegs_of(count, dense_elems(dtype, seg_bytes), 1);
}

uint32_t engine_key_nchunks(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			    uint32_t segs_per_chunk)
{
	return nchunks_of(count, dense_elems(dtype, seg_bytes), segs_per_chunk, 1);
}

size_t engine_key_mem_bytes(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			    uint32_t segs_per_chunk)
{
	return key_mem(count, dense_elems(dtype, seg_bytes), seg_bytes, segs_per_chunk, 1);
}

struct engine_key *engine_key_init(void *mem, uint32_t key, uint64_t count,
				   unsigned dtype, uint32_t seg_bytes,
				   uint32_t segs_per_chunk,
				   const uint8_t *chunk_lcore)
{
	return key_init(mem, key, count, dtype, dense_elems(dtype, seg_bytes), segs_per_chunk,
			chunk_lcore, 1);
}

uint32_t engine_coll_nsegs(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			   uint16_t nslices)
{
	return nsegs_of(count, dense_elems(dtype, seg_bytes), nslices);
}

uint32_t engine_coll_nchunks(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			     uint32_t segs_per_chunk, uint16_t nslices)
{
	return nchunks_of(count, dense_elems(dtype, seg_bytes), segs_per_chunk, nslices);
}

size_t engine_coll_mem_bytes(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			     uint32_t segs_per_chunk, uint16_t nslices)
{
	return key_mem(count, dense_elems(dtype, seg_bytes), seg_bytes, segs_per_chunk,
		       nslices);
}

struct engine_key *engine_coll_key_init(void *mem, uint32_t key, uint64_t count,
					unsigned dtype, uint32_t seg_bytes,
					uint32_t segs_per_chunk, const uint8_t *chunk_lcore,
					unsigned coll, uint16_t root, uint16_t nslices)
{
	struct engine_key *k = key_init(mem, key, count, dtype, dense_elems(dtype, seg_bytes),
					segs_per_chunk, chunk_lcore, nslices);
	k->coll = (uint8_t)coll;
	k->root = root;
	return k;
}

size_t engine_sparse_mem_bytes(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			       uint32_t segs_per_chunk)
{
	return key_mem(count, sparse_seg_elems(seg_bytes, wire_dtype_size(dtype)), seg_bytes,
		       segs_per_chunk, 1);
}

struct engine_key *engine_sparse_key_init(void *mem, uint32_t key, uint64_t count,
					  unsigned dtype, uint32_t seg_bytes,
					  uint32_t segs_per_chunk,
					  const uint8_t *chunk_lcore)
{
	struct engine_key *k = key_init(mem, key, count, dtype,
					sparse_seg_elems(seg_bytes, wire_dtype_size(dtype)),
					segs_per_chunk, chunk_lcore, 1);
	k->sparse = 1;
	return k;
}

size_t engine_ps_mem_bytes(uint64_t count, uint32_t seg_bytes, unsigned planes,
			   unsigned rdtype)
{
	size_t arr = ALIGN64((size_t)engine_key_nsegs(count, WIRE_F32, seg_bytes) * seg_bytes);
	return ALIGN64(sizeof(struct engine_ps)) + (rdtype == WIRE_F32 ? 0 : arr) +
	       planes * arr;
}

struct engine_ps *engine_ps_init(void *mem, struct engine_key *k,
				 const struct optim_params *opt, unsigned grad_dtype,
				 unsigned rdtype, int average)
{
	uint8_t *p = mem;
	struct engine_ps *ps = (struct engine_ps *)p;
	size_t arr = ALIGN64((size_t)k->nsegs * k->seg_elems * sizeof(float));

	p += ALIGN64(sizeof(*ps));
	ps->opt = *opt;
	ps->rdtype = (uint8_t)rdtype;
	ps->average = (uint8_t)(average != 0);
	if (rdtype == WIRE_F32) {
		ps->w = (float *)k->result;
	} else {
		ps->w = (float *)p;
		p += arr;
	}
	for (unsigned i = 0; i < optim_planes(opt); i++, p += arr)
		ps->st[i] = (float *)p;
	k->dtype = (uint8_t)grad_dtype;
	k->ps = ps;
	return ps;
}

size_t engine_ps_stage_bytes(const struct engine_key *k)
{
	return ALIGN64((size_t)k->nsegs * k->seg_elems * sizeof(float)) + ALIGN64(k->nsegs);
}

void engine_ps_stage_init(struct engine_key *k, void *mem)
{
	uint8_t *p = mem;

	k->ps->staged = (float *)p;
	__atomic_store_n(&k->ps->pending, p + ALIGN64((size_t)k->nsegs * k->seg_elems *
						      sizeof(float)), __ATOMIC_RELEASE);
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
}

static inline uint64_t world_mask(uint16_t world)
{
	return world >= 64 ? ~0ull : (1ull << world) - 1;
}

/* A clean round (no retransmission, no NACK) took t from its first to its
 * last contribution: the NACK delay is the smoothed spread plus four mean
 * deviations (as RFC 6298 sets a timeout from round trips), so ranks that
 * are merely late are seldom NACKed. */
static void spread_sample(struct engine_job *j, uint64_t t)
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
 * and j takes at least its weighted fair share of the recent byte rate. */
static inline int over_share(const struct engine *e, const struct engine_job *j)
{
	return e->congested &&
	       (unsigned __int128)j->rate * e->share_weight >=
	       (unsigned __int128)j->weight * e->share_rate;
}

/* A WAIT or NACK of slot sl's round for rank r. */
static void fill_notice(struct engine_out *out, const struct engine *e,
			const struct engine_job *j, const struct engine_slot *sl,
			uint8_t type, uint16_t rank)
{
	uint64_t open_us = (e->now - sl->t_open) / 1000;

	out->job = j;
	out->hdr = (struct wire_msg){
		.type = type, .dtype = sl->key->dtype, .job = j->id, .token = j->token,
		.key = sl->key->key, .seg = sl->seg, .round = sl->round, .rank = rank,
	};
	out->notice = (struct wire_notice){
		.missing = ~sl->have & world_mask(j->world),
		.open_us = open_us > UINT32_MAX ? UINT32_MAX : (uint32_t)open_us,
	};
	out->payload = NULL;
	out->plen = 0;
	out->rank = rank;
}

/* A PS round completed: the init round sets the weights (rank 0's, unless they
 * came from a checkpoint), later rounds average the gradients and step the
 * optimizer; then the segment's shadow copy holds the weights in rdtype. */
static void ps_complete(struct engine *e, const struct engine_job *j,
			struct engine_key *k, const struct engine_slot *sl,
			uint32_t seg, uint16_t count)
{
	struct engine_ps *ps = k->ps;
	size_t first = (size_t)seg * k->seg_elems;
	float *w = ps->w + first;

	uint32_t rounds = engine_key_rounds(k, sl->round); /* this one included */

	if (rounds == 1) {
		if (!ps->restored)
			memcpy(w, sl->src[0], (size_t)count * sizeof(float));
	} else {
		float *g = e->ps_grad;
		float *st[OPTIM_MAX_PLANES] = { 0 };
		uint8_t *pending = __atomic_load_n(&ps->pending, __ATOMIC_ACQUIRE);
		if (pending && __atomic_load_n(&pending[seg], __ATOMIC_ACQUIRE)) {
			/* weights written since the last round: this step's start */
			memcpy(w, ps->staged + first, (size_t)count * sizeof(float));
			__atomic_store_n(&pending[seg], 0, __ATOMIC_RELEASE);
		}
		if (k->dtype == WIRE_F32)
			e->sum->fn[WIRE_F32](g, sl->src, j->world, count);
		else
			sum_widen(g, sl->src, j->world, count, k->dtype);
		for (unsigned i = 0; i < OPTIM_MAX_PLANES; i++)
			st[i] = ps->st[i] ? ps->st[i] + first : NULL;
		/* the mean: divided by the world inside the update's pass */
		uint64_t t = ps->step0 + rounds - 1;
		/* a written SGD buffer is continued: optim_step's step 2 (optim.h) */
		optim_step(&ps->opt, w, st, g, count, t == 1 && ps->buf_written ? 2 : t, sl->lr,
			   ps->average ? (float)j->world : 1.0f);
		e->c.updates++;
	}
	if (ps->rdtype != WIRE_F32)
		sum_narrow(k->result + (size_t)seg * j->seg_bytes, w, count, ps->rdtype);
}

/* A sparse round completed: every rank's record added in rank order into
 * a binary32 sum that starts from +0, rounded once to the dtype, kept in
 * the shadow copy as one record of the entries that are not zero bits
 * (common/sparse.h sparse_sum: the work is in the entries present). */
static void sparse_complete(struct engine *e, const struct engine_job *j,
			    const struct engine_key *k, const struct engine_slot *sl,
			    uint32_t seg, uint16_t len)
{
	sparse_sum(k->result + (size_t)seg * j->seg_bytes, seg, (const uint8_t *const *)sl->src,
		   j->world, k->dtype, len, e->sp_acc, e->sp_touched);
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
		ps_complete(e, j, k, sl, seg, count);
	else if (k->sparse)
		sparse_complete(e, j, k, sl, seg, count);
	else if (k->coll == ENGINE_COLL_GATHER) /* the owner's bytes, as sent */
		memcpy(k->result + (size_t)seg * j->seg_bytes, sl->src[engine_seg_owner(k, seg)],
		       (size_t)count * wire_dtype_size(k->dtype));
	else
		e->sum->fn[k->dtype](k->result + (size_t)seg * j->seg_bytes, sl->src,
				     j->world, count);
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
static int send_error(const struct engine_job *j, const struct wire_msg *m, uint16_t status,
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

/* The checks of a PUSH to a PS key: its first round is the init round (flag INIT,
 * f32; rank 0 carries the segment's weights unless they came from a
 * checkpoint, the others nothing); later rounds carry gradients in the
 * key's dtype and a learning rate in arg. A gradient for the first round (the
 * weights are not there) is answered with ERROR NO_WEIGHTS. Returns 0
 * (*lr set), a verdict, or a negative drop reason. */
static int ps_check(struct engine *e, const struct engine_job *j,
		    const struct engine_key *k, const struct wire_msg *m, uint16_t count,
		    float *lr, struct engine_out *out)
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
static int seg_push(struct engine *e, struct engine_job *j, struct engine_key *k,
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
	if (m->round != sg->done + 1)
		return m->round <= sg->done ? -DROP_STALE_ROUND : -DROP_FUTURE_ROUND;

	struct engine_slot *sl;
	if (sg->slot == ENGINE_NO_SLOT) {
		if (j->nfree == 0)
			return -DROP_NO_SLOT;
		/* visible before the round can touch the weights (ps_ckpt.c) */
		__atomic_store_n(&sg->slot, j->free_slots[--j->nfree], __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		sl = &j->slots[sg->slot];
		sl->have = 0;
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
	uint64_t bit = 1ull << m->rank;
	if (sl->have & bit) {
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
	sl->have |= bit;
	sl->nhave++;
	j->rx_bytes += nbytes;
	e->c.pushes++;
	if (sl->nhave < j->world)
		return ENGINE_ABSORBED;
	complete(e, j, k, sg, sl, seg, count);
	return ENGINE_SEND_ALL;
}

/* Elements of segment seg of k (< nsegs), 0 outside the key. */
static uint32_t key_seg_len(const void *ctx, uint32_t seg)
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

/* A sparse PUSH: every record checked before any is applied (one bad
 * record drops the packet), then each applied as its segment's
 * contribution; the answers wait in e->sp for engine_next. */
static int sparse_push(struct engine *e, struct engine_job *j, struct engine_key *k,
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
		return sparse_push(e, j, k, m, payload, out);
	if (m->seg >= k->nsegs)
		return -DROP_BAD_SEGMENT;
	if (k->chunk_lcore[m->seg / k->segs_per_chunk] != e->lcore)
		return -DROP_WRONG_LCORE;
	uint16_t count = (uint16_t)key_seg_len(k, m->seg);
	float lr = 0;
	if (k->ps) {
		int rc = ps_check(e, j, k, m, count, &lr, out);
		if (rc != 0)
			return rc;
	} else if (m->count != (k->coll == ENGINE_COLL_GATHER &&
				engine_seg_owner(k, m->seg) != m->rank ? 0 : count)) {
		return -DROP_BAD_COUNT; /* a gather key: only the owner sends data */
	} else if (m->arg || (m->flags & WIRE_FLAG_INIT)) {
		return -DROP_BAD_FLAGS;
	}

	if (m->flags & WIRE_FLAG_RETX)
		e->c.retx++;
	int v = seg_push(e, j, k, m, m->seg, count, payload,
			 (size_t)m->count * wire_dtype_size(m->dtype), ref, lr, out);
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

/* ---- timers (engine_tick) ---- */

/* Close the byte-rate period of every job (and, every 10 s, its lateness
 * period) and sum the rates and weights of the jobs with traffic. */
static void roll_periods(struct engine *e)
{
	e->share_rate = e->share_weight = 0;
	for (unsigned i = 0; i < ENGINE_MAX_JOBS; i++) {
		struct engine_job *j = &e->jobs[i];
		if (j->state != ENGINE_JOB_ACTIVE)
			continue;
		j->rate = (3 * j->rate + (j->rx_bytes - j->rate_mark)) / 4;
		j->rate_mark = j->rx_bytes;
		if (j->rate) {
			e->share_rate += j->rate;
			e->share_weight += j->weight;
		}
		if (e->now - j->late_period_at >= ENGINE_LATE_PERIOD_NS) {
			for (unsigned r = 0; r < j->world; r++) {
				j->ranks[r].late_max_ns[1] = j->ranks[r].late_max_ns[0];
				j->ranks[r].late_max_ns[0] = 0;
			}
			j->late_period_at = e->now;
		}
	}
	e->rate_at = e->now;
}

/* Take one of rank's NACK tokens (refilled one per ENGINE_NACK_REFILL_NS,
 * at most ENGINE_NACK_BURST); false if it has none. */
static bool nack_token(struct engine_rank *rk, uint64_t now)
{
	uint64_t add = (now - rk->nack_refill_at) / ENGINE_NACK_REFILL_NS;

	if (add) {
		uint64_t t = rk->nack_tokens + add;
		rk->nack_tokens = (uint16_t)(t > ENGINE_NACK_BURST ? ENGINE_NACK_BURST : t);
		rk->nack_refill_at += add * ENGINE_NACK_REFILL_NS;
	}
	if (rk->nack_tokens == 0)
		return false;
	rk->nack_tokens--;
	return true;
}

/* Whether missing rank rk is known to have sent past sl's segment: its
 * furthest PUSH of the same key and round is a later segment. */
static inline bool passed(const struct engine_rank *rk, const struct engine_slot *sl)
{
	return rk->last_key == sl->key->key && rk->last_round == sl->round &&
	       rk->last_seg > sl->seg;
}

/* NACK the missing ranks of a due slot that understand NACKs: at once
 * those seen past the segment (its PUSH was lost), the others (late, or
 * lost and sending something else since) only once the round has been
 * open ENGINE_NACK_BLIND delays. The next NACK of this round comes after
 * the job's delay doubled per NACK. */
static unsigned nack_slot(struct engine *e, struct engine_job *j, struct engine_slot *sl,
			  struct engine_out *outs)
{
	uint64_t miss = ~sl->have & world_mask(j->world);
	bool blind = e->now - sl->t_open >= ENGINE_NACK_BLIND * j->nack_delay_ns;
	unsigned n = 0;

	for (; miss; miss &= miss - 1) {
		uint16_t r = (uint16_t)__builtin_ctzll(miss);
		struct engine_rank *rk = &j->ranks[r];
		if (!rk->notice || (!blind && !passed(rk, sl)))
			continue;
		if (!nack_token(rk, e->now)) {
			e->c.nacks_limited++;
			continue;
		}
		fill_notice(&outs[n++], e, j, sl, WIRE_NACK, r);
		rk->nacks++;
		e->c.nacks++;
	}
	if (n)   /* a round with a NACK is no sample of the ranks' spread */
		sl->retx = 1;
	if (sl->nnack < ENGINE_NACK_BACKOFF)
		sl->nnack++;
	uint64_t gap = j->nack_delay_ns << sl->nnack;
	sl->nack_at = e->now + (gap < ENGINE_NACK_GAP_MAX_NS ? gap : ENGINE_NACK_GAP_MAX_NS);
	return n;
}

unsigned engine_tick(struct engine *e, struct engine_out *outs, unsigned max)
{
	unsigned n = 0;

	if (e->now - e->rate_at >= ENGINE_RATE_PERIOD_NS)
		roll_periods(e);
	for (unsigned looked = 0; looked < ENGINE_TICK_SCAN; looked++) {
		struct engine_job *j = &e->jobs[e->scan_job];
		if (j->state != ENGINE_JOB_ACTIVE || j->nfree == j->nslots ||
		    e->scan_slot >= j->nslots) {
			e->scan_job = (e->scan_job + 1) % ENGINE_MAX_JOBS;
			e->scan_slot = 0;
			continue;
		}
		struct engine_slot *sl = &j->slots[e->scan_slot];
		/* congested: the missing PUSH may be in the queue */
		if (sl->key && e->now >= sl->nack_at && !e->congested) {
			if (max - n < j->world)
				break;
			n += nack_slot(e, j, sl, outs + n);
		}
		e->scan_slot++;
	}
	return n;
}

/* ---- stall watch (read from the control thread) ---- */

int engine_job_progress(const struct engine *e, uint32_t job_id,
			struct engine_progress *p)
{
	const struct engine_job *j = &e->jobs[engine_job_index(job_id)];
	uint64_t all = 0;

	memset(p, 0, sizeof(*p));
	if (j->state == ENGINE_JOB_FREE || j->id != job_id)
		return -ENOENT;
	all = world_mask(j->world);
	p->completes = j->completes;
	p->rx_bytes = j->rx_bytes;
	for (uint32_t s = 0; s < j->nslots; s++) {
		const struct engine_slot *sl = &j->slots[s];
		const struct engine_key *k = sl->key;
		if (!k)
			continue;
		if (p->open++ == 0) {
			p->key = k->key;
			p->seg = sl->seg;
			p->round = sl->round;
		}
		p->missing |= ~sl->have & all;
	}
	return 0;
}

int engine_rank_lateness(const struct engine *e, uint32_t job_id, uint16_t rank,
			 struct engine_lateness *l)
{
	const struct engine_job *j = &e->jobs[engine_job_index(job_id)];

	memset(l, 0, sizeof(*l));
	if (j->state == ENGINE_JOB_FREE || j->id != job_id || rank >= j->world)
		return -ENOENT;
	const struct engine_rank *rk = &j->ranks[rank];
	l->n = rk->late_n;
	l->sum_ns = rk->late_sum_ns;
	l->max_ns = rk->late_max_ns[0] > rk->late_max_ns[1] ? rk->late_max_ns[0]
							    : rk->late_max_ns[1];
	l->nacks = rk->nacks;
	return 0;
}
