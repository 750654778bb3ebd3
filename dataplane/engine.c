/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * engine.c - per-lcore aggregation: segment rounds, contribution slots,
 * rank-ordered sums and shadow copies. See engine.h for the contract and
 * docs/protocol.md "Rounds" for the rules. No locks, no allocation, no
 * system calls: everything lives in memory the control plane handed over.
 */
#include "dataplane/engine.h"

#include <errno.h>
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

uint32_t engine_key_nsegs(uint64_t count, unsigned dtype, uint32_t seg_bytes)
{
	uint64_t per = seg_bytes / wire_dtype_size(dtype);
	return (uint32_t)((count + per - 1) / per);
}

uint32_t engine_key_nchunks(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			    uint32_t segs_per_chunk)
{
	uint32_t nsegs = engine_key_nsegs(count, dtype, seg_bytes);
	return (nsegs + segs_per_chunk - 1) / segs_per_chunk;
}

size_t engine_key_mem_bytes(uint64_t count, unsigned dtype, uint32_t seg_bytes,
			    uint32_t segs_per_chunk)
{
	uint32_t nsegs = engine_key_nsegs(count, dtype, seg_bytes);
	uint32_t nchunks = engine_key_nchunks(count, dtype, seg_bytes, segs_per_chunk);
	return ALIGN64(sizeof(struct engine_key)) + ALIGN64(nchunks) +
	       ALIGN64((size_t)nsegs * sizeof(struct engine_seg)) +
	       (size_t)nsegs * seg_bytes;
}

struct engine_key *engine_key_init(void *mem, uint32_t key, uint64_t count,
				   unsigned dtype, uint32_t seg_bytes,
				   uint32_t segs_per_chunk,
				   const uint8_t *chunk_lcore)
{
	uint8_t *p = mem;
	struct engine_key *k = (struct engine_key *)p;
	uint32_t nsegs = engine_key_nsegs(count, dtype, seg_bytes);
	uint32_t nchunks = engine_key_nchunks(count, dtype, seg_bytes, segs_per_chunk);

	p += ALIGN64(sizeof(*k));
	k->key = key;
	k->dtype = (uint8_t)dtype;
	k->count = count;
	k->seg_elems = seg_bytes / (uint32_t)wire_dtype_size(dtype);
	k->nsegs = nsegs;
	k->segs_per_chunk = segs_per_chunk;
	k->nchunks = nchunks;
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
	    d->nslots == 0 || d->nslots >= ENGINE_NO_SLOT || !d->mem)
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
		.type = WIRE_RESULT, .dtype = k->dtype, .job = j->id,
		.token = j->token, .key = k->key, .seg = m->seg,
		.round = m->round, .count = count,
	};
	out->payload = k->result + (size_t)m->seg * j->seg_bytes;
	out->rank = m->rank;
}

/* Sum the slot's contributions in rank order into the shadow copy; give
 * back the packets held. */
static void complete(struct engine *e, struct engine_job *j,
		     struct engine_key *k, struct engine_seg *sg,
		     struct engine_slot *sl, uint32_t seg, uint16_t count)
{
	e->sum->fn[k->dtype](k->result + (size_t)seg * j->seg_bytes, sl->src, j->world, count);
	slot_release(e, sl, j->world);
	sg->done = sl->round;
	sg->slot = ENGINE_NO_SLOT;
	sl->key = NULL;
	j->free_slots[j->nfree++] = (uint16_t)(sl - j->slots);
	j->completes++;
	e->c.completes++;
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

int engine_push_ref(struct engine *e, const struct wire_msg *m, const void *payload,
		    void *ref, uint32_t src_ip, uint16_t src_port, struct engine_out *out)
{
	struct engine_job *j = &e->jobs[engine_job_index(m->job)];

	out->held = 0;

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
		out->job = j;
		out->hdr = (struct wire_msg){
			.type = WIRE_ERROR, .dtype = m->dtype, .job = j->id,
			.token = j->token, .key = m->key, .seg = m->seg,
			.round = m->round, .status = WIRE_ST_NO_JOB,
		};
		out->payload = NULL;
		out->rank = m->rank;
		e->c.errors_sent++;
		return ENGINE_SEND_ERROR;
	}

	struct engine_key *k = key_find(j, m->key);
	if (!k)
		return -DROP_NO_KEY;
	if (m->dtype != k->dtype)
		return -DROP_BAD_DTYPE;
	if (m->seg >= k->nsegs)
		return -DROP_BAD_SEGMENT;
	if (k->chunk_lcore[m->seg / k->segs_per_chunk] != e->lcore)
		return -DROP_WRONG_LCORE;
	uint64_t first = (uint64_t)m->seg * k->seg_elems;
	uint64_t left = k->count - first;
	uint16_t count = (uint16_t)(left < k->seg_elems ? left : k->seg_elems);
	if (m->count != count)
		return -DROP_BAD_COUNT;

	struct engine_seg *sg = &k->segs[m->seg];
	if (m->flags & WIRE_FLAG_RETX)
		e->c.retx++;
	if (m->round == sg->done && sg->done != 0) {
		e->c.dup_done++;
		fill_out(out, j, k, m, count);
		return ENGINE_SEND_ONE;
	}
	if (m->round != sg->done + 1)
		return m->round <= sg->done ? -DROP_STALE_ROUND : -DROP_FUTURE_ROUND;

	struct engine_slot *sl;
	if (sg->slot == ENGINE_NO_SLOT) {
		if (j->nfree == 0)
			return -DROP_NO_SLOT;
		sg->slot = j->free_slots[--j->nfree];
		sl = &j->slots[sg->slot];
		sl->have = 0;
		sl->nhave = 0;
		sl->key = k;
		sl->seg = m->seg;
		sl->round = m->round;
	} else {
		sl = &j->slots[sg->slot];
	}
	uint64_t bit = 1ull << m->rank;
	if (sl->have & bit) {
		e->c.dup_open++;
		return ENGINE_ABSORBED;
	}
	if (ref && e->release) {
		sl->src[m->rank] = payload;
		sl->ref[m->rank] = ref;
		out->held = 1;
		e->c.held++;
	} else {
		uint8_t *d = sl->data + (size_t)m->rank * j->seg_bytes;
		memcpy(d, payload, (size_t)count * wire_dtype_size(k->dtype));
		sl->src[m->rank] = d;
	}
	sl->have |= bit;
	sl->nhave++;
	e->c.pushes++;
	if (sl->nhave < j->world)
		return ENGINE_ABSORBED;
	complete(e, j, k, sg, sl, m->seg, count);
	fill_out(out, j, k, m, count);
	return ENGINE_SEND_ALL;
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
	all = j->world >= 64 ? ~0ull : (1ull << j->world) - 1;
	p->completes = j->completes;
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
