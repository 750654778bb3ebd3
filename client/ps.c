/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ps.c - the PS-mode calls of libpbox (include/pbox.h "PS mode"):
 * pbox_optim_init, pbox_declare_optimizer, pbox_ps_init, pbox_push_pull,
 * pbox_set_lr. They check their arguments here and queue requests that the
 * progress thread runs like allreduce calls (progress.c, xfer.c); the
 * learning rates live in a small table under c->lock, read when a push is
 * queued, so a schedule costs no round trip.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"

#define OPTIM_FIRST_LAYOUT offsetof(pbox_optim, weights_dtype) + sizeof(uint32_t)

int pbox_optim_init_sized(pbox_optim *o, size_t size, pbox_optim_kind kind)
{
	if (!o || size < OPTIM_FIRST_LAYOUT || size > 4096 ||
	    kind < PBOX_OPTIM_SGD || kind > PBOX_OPTIM_ADAMW)
		return PBOX_EINVAL;
	memset(o, 0, size);
	o->size = (uint32_t)(size < sizeof(*o) ? size : sizeof(*o));
	o->kind = kind;
	o->lr = kind == PBOX_OPTIM_SGD ? 0.01 : 0.001;
	o->weight_decay = kind == PBOX_OPTIM_ADAMW ? 0.01 : 0;
	o->beta1 = 0.9;
	o->beta2 = 0.999;
	o->eps = 1e-8;
	return 0;
}

/* ---- learning rates (c->lrs, under c->lock) ---- */

static struct lr_entry *lr_find(const pbox_client *c, uint32_t key)
{
	for (uint32_t i = 0; i < c->nlrs; i++)
		if (c->lrs[i].key == key)
			return &c->lrs[i];
	return NULL;
}

float ps_lr_locked(const pbox_client *c, uint32_t key)
{
	const struct lr_entry *e = lr_find(c, key);
	return e ? e->lr : 0;
}

static int lr_store(pbox_client *c, uint32_t key, float lr)
{
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	struct lr_entry *e = lr_find(c, key);
	if (!e && c->nlrs == c->lrs_cap) {
		uint32_t cap = c->lrs_cap ? 2 * c->lrs_cap : 16;
		struct lr_entry *n = realloc(c->lrs, cap * sizeof(*n));
		if (n) {
			c->lrs = n;
			c->lrs_cap = cap;
		}
	}
	if (!e && c->nlrs < c->lrs_cap)
		e = &c->lrs[c->nlrs++];
	if (e)
		*e = (struct lr_entry){ .key = key, .lr = lr };
	else
		rc = PBOX_ENOMEM;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

static int lr_check(pbox_client *c, uint32_t key, double lr)
{
	if (!isfinite(lr) || lr < 0 || lr > 3.4e38)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: learning rate %g "
				    "must be finite and >= 0", c->job, c->rank, key, lr);
	return 0;
}

int pbox_set_lr(pbox_client *c, uint32_t key, double lr)
{
	if (!c)
		return PBOX_EINVAL;
	int rc = lr_check(c, key, lr);
	if (rc == 0 && (rc = lr_store(c, key, (float)lr)) < 0)
		client_error(c, rc, "job '%s' rank %d key %u: out of memory", c->job, c->rank, key);
	return rc;
}

/* ---- requests ---- */

static int run(pbox_client *c, struct pbox_req *r)
{
	int rc = req_submit(c, r);
	return rc < 0 ? rc : pbox_wait(r);
}

int pbox_declare_optimizer(pbox_client *c, uint32_t key, size_t count,
			   pbox_dtype grad_dtype, const pbox_optim *o)
{
	if (!c)
		return PBOX_EINVAL;
	if (!o || o->size < OPTIM_FIRST_LAYOUT || o->size > 4096)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: the optimizer is "
				    "NULL or not filled by pbox_optim_init", c->job, c->rank, key);
	if (o->kind < PBOX_OPTIM_SGD || o->kind > PBOX_OPTIM_ADAMW)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: unknown optimizer "
				    "kind %u (PBOX_OPTIM_SGD, _ADAM or _ADAMW)", c->job, c->rank,
				    key, o->kind);
	if (o->weights_dtype != PBOX_F32 && o->weights_dtype != (uint32_t)grad_dtype)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: weights_dtype must "
				    "be PBOX_F32 or the gradients' dtype", c->job, c->rank, key);
	int rc = req_check(c, key, o, count, grad_dtype, WIRE_F32);
	if (rc < 0 || (rc = lr_check(c, key, o->lr)) < 0)
		return rc;
	if ((rc = lr_store(c, key, (float)o->lr)) < 0)
		return client_error(c, rc, "job '%s' rank %d key %u: out of memory", c->job,
				    c->rank, key);
	struct pbox_req *r = req_new(c, key, REQ_DECLARE);
	if (!r)
		return PBOX_ENOMEM;
	r->count = count;
	r->dtype = (uint8_t)grad_dtype;
	r->rdtype = (uint8_t)o->weights_dtype;
	memcpy(&r->optim, o, o->size < sizeof(r->optim) ? o->size : sizeof(r->optim));
	return run(c, r);
}

/* The request of a PS round (init or step) after the common checks. */
static int ps_req(pbox_client *c, uint32_t key, uint8_t kind, const void *src,
		  void *out, size_t count, pbox_dtype dtype, struct pbox_req **rp)
{
	*rp = NULL;
	int rc = req_check(c, key, out, count, dtype, WIRE_F32);
	if (rc < 0)
		return rc;
	if (kind == REQ_PUSH_PULL && !src)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: grad is NULL",
				    c->job, c->rank, key);
	struct pbox_req *r = req_new(c, key, kind);
	if (!r)
		return PBOX_ENOMEM;
	r->src = src;
	r->buf = out;
	r->count = count;
	r->dtype = (uint8_t)dtype;
	r->empty = kind == REQ_PS_INIT && !src;
	/* rdtype: the key's, set when the progress thread admits r */
	rc = req_submit(c, r);
	if (rc == 0)
		*rp = r;
	return rc;
}

int pbox_ps_init(pbox_client *c, uint32_t key, const float *weights, void *weights_out)
{
	struct pbox_req *r;

	if (!c)
		return PBOX_EINVAL;
	if (weights && c->rank != 0)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: only rank 0 "
				    "uploads the initial weights (pass NULL)", c->job, c->rank, key);
	if (!weights && c->rank == 0)
		return client_error(c, PBOX_EINVAL, "job '%s' rank 0 key %u: rank 0 must upload "
				    "the initial weights", c->job, key);
	/* the count is the key's: the progress thread fills it in */
	int rc = ps_req(c, key, REQ_PS_INIT, weights, weights_out, 1, PBOX_F32, &r);
	return rc < 0 ? rc : pbox_wait(r);
}

int pbox_ipush_pull(pbox_client *c, uint32_t key, const void *grad, void *weights_out,
		    size_t count, pbox_dtype dtype, pbox_req **req)
{
	if (!c)
		return PBOX_EINVAL;
	if (!req)
		return client_error(c, PBOX_EINVAL, "pbox_ipush_pull key %u: req is NULL", key);
	return ps_req(c, key, REQ_PUSH_PULL, grad, weights_out, count, dtype, req);
}

int pbox_push_pull(pbox_client *c, uint32_t key, const void *grad, void *weights_out,
		   size_t count, pbox_dtype dtype)
{
	pbox_req *r;
	int rc = pbox_ipush_pull(c, key, grad, weights_out, count, dtype, &r);

	return rc < 0 ? rc : pbox_wait(r);
}

/* ---- reading and writing a PS key between steps ---- */

static int state_req(pbox_client *c, uint32_t key, uint8_t kind, pbox_ps_part part,
		     const float *in, float *out, size_t count, struct pbox_req **rp)
{
	*rp = NULL;
	if ((unsigned)part > PBOX_PS_STATE1)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: unknown part %d "
				    "(PBOX_PS_WEIGHTS, _STATE0 or _STATE1)", c->job, c->rank,
				    key, (int)part);
	if (kind == REQ_PS_WRITE && c->rank != 0)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: only rank 0 "
				    "writes a PS key's state", c->job, c->rank, key);
	int rc = req_check(c, key, kind == REQ_PS_READ ? (const void *)out : (const void *)in,
			   count, PBOX_F32, WIRE_F32);
	if (rc < 0)
		return rc;
	struct pbox_req *r = req_new(c, key, kind);
	if (!r)
		return PBOX_ENOMEM;
	r->part = (uint8_t)part;
	r->src = in;
	r->buf = out;
	r->count = count;
	r->dtype = r->rdtype = PBOX_F32;
	*rp = r;
	return 0;
}

int pbox_ps_read(pbox_client *c, uint32_t key, pbox_ps_part part, float *out,
		 size_t count, uint64_t *steps)
{
	struct pbox_req *r;

	if (!c)
		return PBOX_EINVAL;
	int rc = state_req(c, key, REQ_PS_READ, part, NULL, out, count, &r);
	if (rc < 0)
		return rc;
	r->steps_out = steps;
	return run(c, r);
}

int pbox_ps_write(pbox_client *c, uint32_t key, pbox_ps_part part, const float *in,
		  size_t count)
{
	struct pbox_req *r;

	if (!c)
		return PBOX_EINVAL;
	int rc = state_req(c, key, REQ_PS_WRITE, part, in, NULL, count, &r);
	return rc < 0 ? rc : run(c, r);
}

int pbox_ps_set_steps(pbox_client *c, uint32_t key, uint64_t steps)
{
	struct pbox_req *r;
	float dummy = 0;

	if (!c)
		return PBOX_EINVAL;
	int rc = state_req(c, key, REQ_PS_WRITE, PBOX_PS_WEIGHTS, &dummy, NULL, 1, &r);
	if (rc < 0)
		return rc;
	r->set_steps = true;
	r->steps = steps;
	return run(c, r);
}
