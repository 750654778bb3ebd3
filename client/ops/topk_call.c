/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topk_call.c - pbox_allreduce_topk: top-k selection (common/topk.h) of the
 * gradient plus what earlier calls did not send (error feedback), with
 * optional momentum correction, then the sparse allreduce of sparse_call.c.
 *
 * The top-k state of a key (its residual, momentum, selection buffers)
 * lives on the caller's side of the client: found under c->lock and used
 * outside it while its `busy` flag is set, so one call per key is in its
 * selection at a time (PBOX_EBUSY for another). The selection runs in the
 * caller's thread before the request is queued.
 *
 * Hierarchical top-k (local_size > 1, topk_local.c): the call first puts
 * the gradient into the host group's shared memory and sums its slice;
 * the leader then selects from the host's sum with its residual, the
 * others send an empty contribution. A key keeps the local_size and
 * local_rank of its first call.
 *
 * A client with the host level (ops/host.c) sends a flat call (local_size
 * 1) through it: the host's sum, each local rank's part selected on its
 * lane. (An explicit local_size stays the hierarchical call above, on the
 * flat job.)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/ops/fleet.h"
#include "client/ops/host.h"
#include "common/sum.h"
#include "common/topk.h"

struct topk_state {
	struct topk_state *next;
	uint32_t key;
	bool busy;                 /* a call is selecting (under c->lock) */
	size_t count;
	uint8_t dtype;
	float *resid;              /* count: what was not sent yet (error feedback) */
	float *mom;                /* count: momentum (momentum correction), or NULL */
	float *g32;                /* count: a f16/bf16 gradient widened, or NULL */
	uint32_t *idx;             /* cap: the selection */
	float *val;
	uint8_t *val_wire;         /* cap values in the wire dtype (f16/bf16) */
	size_t cap;
	uint32_t local_size;       /* of the first call: 1 flat, else hierarchical */
	uint32_t local_rank;       /* of the first call (hierarchical): its place in
				    * the host group (t->local) is the key's for good */
	struct topk_local *local;  /* the host group (hierarchical), once opened */
};

int pbox_topk_opts_init_sized(pbox_topk_opts *o, size_t size)
{
	pbox_topk_opts d = { .size = (uint32_t)sizeof(d), .error_feedback = 1,
			     .density = 0.01, .momentum = 0 };

	if (!o || size < offsetof(pbox_topk_opts, momentum) + sizeof(double) ||
	    size > 4096)
		return PBOX_EINVAL;
	memset(o, 0, size);
	memcpy(o, &d, size < sizeof(d) ? size : sizeof(d));
	o->size = (uint32_t)size;
	return 0;
}

static void topk_state_free(struct topk_state *t)
{
	if (!t)
		return;
	free(t->resid);
	free(t->mom);
	free(t->g32);
	free(t->idx);
	free(t->val);
	free(t->val_wire);
	topk_local_free(t->local);
	free(t);
}

static void topk_free_all(pbox_client *c)
{
	while (c->topk) {
		struct topk_state *t = c->topk;
		c->topk = t->next;
		topk_state_free(t);
	}
}

static void topk_forget_key(pbox_client *c, uint32_t key)
{
	struct topk_state **pp, *t = NULL;

	pthread_mutex_lock(&c->lock);
	for (pp = &c->topk; *pp; pp = &(*pp)->next)
		if ((*pp)->key == key && !(*pp)->busy) {
			t = *pp;
			*pp = t->next;
			break;
		}
	pthread_mutex_unlock(&c->lock);
	topk_state_free(t);
}

/* The host top-k states, per client: attached by the first call that
 * makes one; a released key's goes, and all go at pbox_close. */
static const struct client_ext topk_ext = {
	.name = "top-k",
	.forget_key = topk_forget_key,
	.close = topk_free_all,
};

/* Find or make key's state and mark it busy. 0, PBOX_EBUSY, PBOX_EINVAL
 * (another size or dtype), PBOX_ENOMEM. A call refused here (busy,
 * another size) leaves no state behind; a new state takes the size and
 * dtype of the call that made it. That size is this client's, not the
 * key's declaration (which the progress thread checks later): a first
 * call that the declaration refused leaves a state of its size, until a
 * release of the key clears it. */
static int topk_take(pbox_client *c, uint32_t key, size_t count, pbox_dtype dtype,
		     struct topk_state **out)
{
	struct topk_state *t = NULL;
	size_t had_count = 0;
	uint8_t had_dtype = 0;
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	for (t = c->topk; t && t->key != key; t = t->next)
		;
	if ((t && t->busy) || req_key_busy_locked(c, key)) {
		rc = PBOX_EBUSY;
	} else if (t && (t->count != count || t->dtype != (uint8_t)dtype)) {
		rc = PBOX_EINVAL;
		had_count = t->count;   /* (t may go with a release once unlocked) */
		had_dtype = t->dtype;
	} else if (!t && client_ext_attach_locked(c, &topk_ext) == 0 &&
		   (t = calloc(1, sizeof(*t)))) {
		t->key = key;
		t->count = count;
		t->dtype = (uint8_t)dtype;
		t->next = c->topk;
		c->topk = t;
	}
	if (rc == 0 && !t)
		rc = PBOX_ENOMEM;
	else if (rc == 0)
		t->busy = true;
	pthread_mutex_unlock(&c->lock);
	if (rc == PBOX_ENOMEM)
		return client_error(c, rc, "job '%s' rank %d key %u: out of memory", c->job,
				    c->rank, key);
	if (rc == PBOX_EBUSY)
		return client_error(c, rc, "job '%s' rank %d key %u: a call on this key is still "
				    "in flight (wait for it first)", c->job, c->rank, key);
	if (rc == PBOX_EINVAL)
		return client_error(c, rc, "job '%s' rank %d key %u: this rank's top-k state of "
				    "the key is for %zu %s elements (its first pbox_allreduce_topk "
				    "call's), this call has %zu %s (use another key for another "
				    "size, or pbox_release_keys the key first)", c->job, c->rank,
				    key, had_count, wire_dtype_name(had_dtype), count,
				    wire_dtype_name((unsigned)dtype));
	*out = t;
	return 0;
}

static void topk_give(pbox_client *c, struct topk_state *t)
{
	pthread_mutex_lock(&c->lock);
	t->busy = false;
	pthread_mutex_unlock(&c->lock);
}

/* Buffers for a call: the selection's (k entries at most) and the
 * residual, momentum and widened gradient (wide) as the options need them. */
static int topk_buffers(struct topk_state *t, size_t k, const pbox_topk_opts *o, bool wide)
{
	size_t cap = TOPK_MAX(k), esz = wire_dtype_size(t->dtype);

	if (cap > t->cap) {
		free(t->idx);
		free(t->val);
		free(t->val_wire);
		t->idx = malloc(cap * sizeof(*t->idx));
		t->val = malloc(cap * sizeof(*t->val));
		t->val_wire = malloc(cap * esz);
		t->cap = t->idx && t->val && t->val_wire ? cap : 0;
		if (!t->cap)
			return PBOX_ENOMEM;
	}
	if (o->error_feedback && !t->resid && !(t->resid = calloc(t->count, sizeof(float))))
		return PBOX_ENOMEM;
	if (o->momentum > 0 && !t->mom && !(t->mom = calloc(t->count, sizeof(float))))
		return PBOX_ENOMEM;
	if (wide && t->dtype != WIRE_F32 && !t->g32 && !(t->g32 = malloc(t->count * sizeof(float))))
		return PBOX_ENOMEM;
	return 0;
}

/*
 * The selection of one call: g (the gradient in f32: buf itself or
 * t->g32) -> momentum (u = m u + g) -> error feedback (e += u) -> top k
 * -> sent entries cleared from e and u. f16/bf16 values are rounded to
 * the wire dtype here and their rounding error stays in e. Returns m.
 * With error feedback the gradient ends up in e (and u), and, with move,
 * g is left all zero by the sweep that moved it (g is the buffer the
 * result is written into: no clearing of it later, see sparse_submit).
 */
static size_t topk_run(struct topk_state *t, float *g, size_t k, const pbox_topk_opts *o,
		       bool move)
{
	const struct topk_kernels *kk = topk_best();
	float *src = g;
	size_t m;

	if (o->momentum > 0) {
		float mu = (float)o->momentum;
		for (size_t i = 0; i < t->count; i++) {
			t->mom[i] = mu * t->mom[i] + g[i];
			if (o->error_feedback)
				g[i] = 0;
		}
		src = t->mom;
	}
	if (o->error_feedback && src == g && move)
		m = topk_select_ef_move(kk, t->resid, g, t->count, k, t->idx, t->val);
	else if (o->error_feedback)
		m = topk_select_ef(kk, t->resid, src, t->count, k, t->idx, t->val);
	else
		m = topk_select(kk, src, t->count, k, t->idx, t->val);
	if (o->momentum > 0)
		for (size_t j = 0; j < m; j++)
			t->mom[t->idx[j]] = 0;
	if (t->dtype != WIRE_F32) {
		sum_narrow(t->val_wire, t->val, m, t->dtype);
		/* the rounding error stays for the next step; an infinity sent
		 * (an infinite value, or one past the wire dtype's range) leaves
		 * nothing: inf - inf would be a NaN, sent again next step */
		if (o->error_feedback)
			for (size_t j = 0; j < m; j++) {
				uint16_t h;
				memcpy(&h, t->val_wire + 2 * j, 2);
				float sent = t->dtype == WIRE_F16 ? half_to_float(h) : bf16_to_float(h);
				if (isfinite(sent))
					t->resid[t->idx[j]] += t->val[j] - sent;
			}
	}
	return m;
}

/* The gradient in buf (count of dtype) into dst as f32; with clear, buf
 * left zero in the same sweep (the result comes into a zero buffer:
 * SPARSE_SUBMIT_OUT_ZERO). */
static void take_grad(float *dst, void *buf, size_t count, uint8_t dtype, bool clear)
{
	if (dtype == WIRE_F32) {
		float *b = buf;
		for (size_t i = 0; i < count; i++) {
			dst[i] = b[i];
			if (clear)
				b[i] = 0;
		}
		return;
	}
	uint16_t *h = buf;
	for (size_t i = 0; i < count; i++) {
		dst[i] = dtype == WIRE_F16 ? half_to_float(h[i]) : bf16_to_float(h[i]);
		if (clear)
			h[i] = 0;
	}
}

int topk_opts_read(pbox_client *c, uint32_t key, const pbox_topk_opts *in, size_t count,
		   pbox_topk_opts *o, size_t *k)
{
	pbox_topk_opts_init(o);
	if (in) {
		if (in->size < offsetof(pbox_topk_opts, momentum) + sizeof(double) ||
		    in->size > 4096)
			return client_error(c, PBOX_EINVAL, "top-k key %u: options not set up by "
					    "pbox_topk_opts_init", key);
		int rc = client_struct_tail(c, "pbox_topk_opts", in, in->size, sizeof(*o));
		if (rc < 0)
			return rc;
		memcpy(o, in, in->size < sizeof(*o) ? in->size : sizeof(*o));
	}
	if (!(o->density > 0 && o->density <= 1))
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: density %g is "
				    "outside (0, 1]", c->job, c->rank, key, o->density);
	if (!(o->momentum >= 0 && o->momentum < 1))
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: momentum %g is "
				    "outside [0, 1)", c->job, c->rank, key, o->momentum);
	if (o->local_size <= 1)
		o->local_size = 1;
	int rc = topk_local_check(c, key, o->local_rank, o->local_size);
	if (rc < 0)
		return rc;
	*k = topk_k_of_density(o->density, count);
	return 0;
}

/* Undo take_grad (exact: a widened f16/bf16 narrows back to itself). */
static void local_back(const float *slot, void *buf, size_t count, uint8_t dtype)
{
	if (dtype == WIRE_F32)
		memcpy(buf, slot, count * sizeof(float));
	else
		sum_narrow(buf, slot, count, dtype);
}

/*
 * A hierarchical call (o->local_size > 1): buf into the host group's
 * shared memory, the host's sum, then the leader's selection from it or
 * another member's empty contribution. If it fails, buf gets its gradient
 * back and the group is broken (every member's later calls on the key
 * fail): the members cannot agree on a call that some of them sent.
 */
static int topk_hier(pbox_client *c, struct topk_state *t, void *buf, size_t k,
		     const pbox_topk_opts *o, pbox_req **req)
{
	bool leader = o->local_rank == 0;
	const float *sum;
	int rc;

	if (!t->local && (rc = topk_local_open(c, t->key, t->count, o->local_rank,
					       o->local_size, &t->local)) < 0)
		return rc;
	if (leader && topk_buffers(t, k, o, false) < 0) {
		topk_local_break(t->local);
		return client_error(c, PBOX_ENOMEM, "job '%s' rank %d key %u: out of memory for "
				    "the top-k state (%zu elements)", c->job, c->rank, t->key,
				    t->count);
	}
	float *slot = topk_local_slot(t->local);
	take_grad(slot, buf, t->count, t->dtype, true);
	if ((rc = topk_local_reduce(c, t->local, &sum)) < 0) {
		local_back(slot, buf, t->count, t->dtype);
		return rc;
	}
	size_t m = leader ? topk_run(t, (float *)sum, k, o, false) : 0;
	const void *vals = t->dtype == WIRE_F32 ? (const void *)t->val : t->val_wire;
	rc = sparse_submit(c, t->key, t->count, (pbox_dtype)t->dtype, leader ? t->idx : NULL,
			   leader ? vals : NULL, m, buf, SPARSE_SUBMIT_OUT_ZERO, NULL, NULL, req);
	if (rc < 0) {
		topk_local_break(t->local);
		local_back(slot, buf, t->count, t->dtype);
	}
	return rc;
}

/* A fleet's top-k call: each partition's on its box (ops/fleet.c), with
 * the caller's options (density applies to each partition's count). */
struct fleet_topk { uint8_t *buf; size_t esz; pbox_dtype dtype; const pbox_topk_opts *opts; };

static int fleet_topk_part(pbox_client *sub, const struct fpart *pt, void *arg, pbox_req **req)
{
	const struct fleet_topk *a = arg;
	return pbox_iallreduce_topk(sub, pt->subkey, a->buf + pt->first * a->esz, pt->count,
				    a->dtype, a->opts, req);
}

/* A flat top-k call through the host level: the checks a lane's call
 * would make too late (in the host thread), then host.c's call. 1: the
 * call is hierarchical (an explicit local_size), not for the host level. */
static int host_topk(pbox_client *c, uint32_t key, void *buf, size_t count, pbox_dtype dtype,
		     const pbox_topk_opts *opts, pbox_req **req)
{
	pbox_topk_opts o;
	size_t k;

	*req = NULL;
	int rc = host_check_buf(c, key, buf, count, dtype, true);
	if (rc < 0 || (rc = topk_opts_read(c, key, opts, count, &o, &k)) < 0)
		return rc;
	return o.local_size > 1 ? 1 : host_iallreduce_topk(c, key, buf, count, dtype, &o, req);
}

int pbox_iallreduce_topk(pbox_client *c, uint32_t key, void *buf, size_t count,
			 pbox_dtype dtype, const pbox_topk_opts *opts, pbox_req **req)
{
	pbox_topk_opts o;
	struct topk_state *t = NULL;
	size_t k;

	if (!c)
		return PBOX_EINVAL;
	if (c->host && req) {
		int rc = host_topk(c, key, buf, count, dtype, opts, req);
		if (rc <= 0)
			return rc;
	}
	if (c->fleet && req && buf && count) {
		struct fleet_topk a = { .buf = buf, .esz = wire_dtype_size(dtype), .dtype = dtype,
					.opts = opts };
		*req = NULL;
		return fleet_topk_call(c, key, count, dtype, fleet_topk_part, &a, req);
	}
	if (!req)
		return client_error(c, PBOX_EINVAL, "pbox_iallreduce_topk key %u: req is NULL", key);
	*req = NULL;
	int rc = sparse_check(c, key, buf, count, dtype);
	if (rc < 0 || (rc = topk_opts_read(c, key, opts, count, &o, &k)) < 0)
		return rc;
	if ((rc = topk_take(c, key, count, dtype, &t)) < 0)
		return rc;
	if (!t->local_size) {
		t->local_size = o.local_size;
		t->local_rank = o.local_rank;
	}
	if (t->local_size != o.local_size) {
		rc = client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: local_size %u, but the "
				  "key's first call had %u (a key stays flat or hierarchical)",
				  c->job, c->rank, key, o.local_size, t->local_size);
		topk_give(c, t);
		return rc;
	}
	/* the host group was opened for the first call's place in it: another
	 * local_rank would lead a group it is a member of (a member gets no
	 * host sum to select from), or the reverse */
	if (o.local_size > 1 && t->local_rank != o.local_rank) {
		rc = client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: local_rank %u, but the "
				  "key's first call had %u (a rank's place in its host group is "
				  "fixed per key)", c->job, c->rank, key, o.local_rank,
				  t->local_rank);
		topk_give(c, t);
		return rc;
	}
	if (o.local_size > 1) {
		rc = topk_hier(c, t, buf, k, &o, req);
		topk_give(c, t);
		return rc;
	}
	if (topk_buffers(t, k, &o, true) < 0) {
		topk_give(c, t);
		return client_error(c, PBOX_ENOMEM, "job '%s' rank %d key %u: out of memory for "
				    "the top-k state (%zu elements)", c->job, c->rank, key, count);
	}
	float *g = buf;
	if (t->dtype != WIRE_F32) {   /* cleared with error feedback, as topk_run an f32 buf */
		take_grad(t->g32, buf, count, t->dtype, o.error_feedback);
		g = t->g32;
	}
	size_t m = topk_run(t, g, k, &o, true);
	const void *vals = t->dtype == WIRE_F32 ? (const void *)t->val : t->val_wire;
	/* the state's arrays are lent to the request: topk_take refuses the
	 * key until it is waited for */
	rc = sparse_submit(c, key, count, dtype, t->idx, vals, m, buf,
			   o.error_feedback ? SPARSE_SUBMIT_OUT_ZERO : 0, NULL, NULL,
			   req);
	if (rc < 0 && o.error_feedback)
		for (size_t j = 0; j < m; j++) /* nothing was sent: keep it all */
			t->resid[t->idx[j]] = t->val[j];
	topk_give(c, t);
	return rc;
}

int pbox_allreduce_topk(pbox_client *c, uint32_t key, void *buf, size_t count,
			pbox_dtype dtype, const pbox_topk_opts *o)
{
	pbox_req *r;
	int rc = pbox_iallreduce_topk(c, key, buf, count, dtype, o, &r);

	return rc < 0 ? rc : pbox_wait(r);
}

int pbox_topk_reset(pbox_client *c, uint32_t key)
{
	struct topk_state *t;
	int rc = 0;

	if (!c)
		return PBOX_EINVAL;
	if (c->host && (rc = host_topk_reset(c, key)) <= 0)
		return rc;
	rc = 0;
	if (c->fleet)
		return fleet_topk_reset(c, key);
	pthread_mutex_lock(&c->lock);
	for (t = c->topk; t && t->key != key; t = t->next)
		;
	if (!t)
		rc = PBOX_EINVAL;
	else if (t->busy)
		rc = PBOX_EBUSY;
	else {
		if (t->resid)
			memset(t->resid, 0, t->count * sizeof(float));
		if (t->mom)
			memset(t->mom, 0, t->count * sizeof(float));
	}
	pthread_mutex_unlock(&c->lock);
	if (rc == PBOX_EINVAL && (rc = client_ext_topk_reset(c, key)) <= 0)
		return rc;   /* a device key's residual (0), or PBOX_EBUSY */
	if (rc == 1)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: no "
				    "pbox_allreduce_topk call has used this key", c->job, c->rank,
				    key);
	if (rc == PBOX_EBUSY)
		return client_error(c, rc, "job '%s' rank %d key %u: a call is selecting on it",
				    c->job, c->rank, key);
	return 0;
}
