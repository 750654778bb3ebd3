/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * engine_ps.c - PS keys (docs/protocol.md "PS keys"): the layout of a
 * key's weights, optimizer state and stage for written weights, and the
 * completion of a round: the init round sets the weights, every later one
 * sums the gradients in rank order in fp32, checks the sum is finite
 * (else the job's policy: enum engine_nonfinite) and steps the optimizer
 * (dataplane/optim.h). A PS PUSH's checks run per packet inside engine.c's
 * push: they are inline in engine_internal.h (ps_check).
 *
 * Rules: the layout functions run on the control plane's thread before
 * the key is installed; ps_complete runs on the lcore owning the segment,
 * with the engine's scratch gradient (e->ps_grad), never allocating. The
 * weights and the pending flags are shared with the control plane's
 * checkpoint and key_write (control/ps_ckpt.c) through the atomics below.
 */
#include "dataplane/engine_internal.h"

#include <string.h>

#include "common/finite.h"

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

/* The round's gradient sum was not finite: count it (the job; each rank
 * whose own gradient was not finite: found by looking at each, only now)
 * and apply the job's policy; ENGINE_NF_ABORT stops the job on this lcore
 * and leaves where for the control plane (engine_progress nf_*). Returns
 * the policy. The rare path: an ordinary call, scalar loops. */
static int ps_nonfinite(struct engine *e, struct engine_job *j, const struct engine_key *k,
			const struct engine_slot *sl, uint32_t seg, uint16_t count)
{
	uint16_t first = ENGINE_NF_NO_RANK;

	for (uint16_t r = 0; r < j->world; r++)
		if (finite_first(sl->src[r], count, k->dtype) < count) {
			j->ranks[r].nonfinite++;
			if (first == ENGINE_NF_NO_RANK)
				first = r;
		}
	j->nf_rounds++;
	e->c.nonfinite++;
	if (j->nonfinite == ENGINE_NF_SKIP) {
		j->nf_skipped++;
		e->c.skipped++;
	} else if (j->nonfinite == ENGINE_NF_ABORT && !j->nf_abort) {
		j->nf_rank = first;
		j->nf_key = k->key;
		j->nf_seg = seg;
		j->nf_round = sl->round;
		/* the fields above, then the flag (engine_job_progress) */
		__atomic_store_n(&j->nf_abort, 1, __ATOMIC_RELEASE);
		j->state = ENGINE_JOB_ABORTED;
	}
	return j->nonfinite;
}

/* A PS round completed: the init round sets the weights (rank 0's, unless they
 * came from a checkpoint), later rounds average the gradients and step the
 * optimizer, unless their sum is not finite and the job's policy says
 * otherwise (ps_nonfinite); then the segment's shadow copy holds the
 * weights in rdtype. */
int ps_complete(struct engine *e, struct engine_job *j, struct engine_key *k,
		const struct engine_slot *sl, uint32_t seg, uint16_t count)
{
	struct engine_ps *ps = k->ps;
	size_t first = (size_t)seg * k->seg_elems;
	float *w = ps->w + first;
	int v = ENGINE_NF_PASS;

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
		/* one pass over the sum: any NaN or Inf of a rank's shows in it */
		if (!finite_all_f32(g, count))
			v = ps_nonfinite(e, j, k, sl, seg, count);
		if (v == ENGINE_NF_PASS) {
			for (unsigned i = 0; i < OPTIM_MAX_PLANES; i++)
				st[i] = ps->st[i] ? ps->st[i] + first : NULL;
			/* the mean: divided by the world inside the update's pass */
			uint64_t t = ps->step0 + rounds - 1;
			/* a written SGD buffer is continued: optim_step's step 2 (optim.h) */
			optim_step(&ps->opt, w, st, g, count,
				   t == 1 && ps->buf_written ? 2 : t, sl->lr,
				   !ps->average ? 1.0f : ps->mean_over ? (float)ps->mean_over
							: (float)j->world);
			e->c.updates++;
		}
	}
	if (ps->rdtype != WIRE_F32)
		sum_narrow(k->result + (size_t)seg * j->seg_bytes, w, count, ps->rdtype);
	return v;
}
