/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ps.c - the PS-mode calls of libpbox (include/pbox.h "PS mode"):
 * pbox_optim_init, pbox_declare_optimizer, pbox_ps_init, pbox_push_pull,
 * pbox_set_lr and the PS reads and writes. They check their arguments here
 * and queue requests that the progress thread runs like allreduce calls
 * (progress.c, xfer.c; reads and writes: ps_rpc.c); the learning rates
 * live in a small table under c->lock, read when a push is queued, so a
 * schedule costs no round trip. Also what the progress thread knows of a
 * declared optimizer: its name, its state planes, how two differ.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/ops/fleet.h"
#include "client/ops/host.h"

#define OPTIM_FIRST_LAYOUT offsetof(pbox_optim, weights_dtype) + sizeof(uint32_t)

int pbox_optim_init_sized(pbox_optim *o, size_t size, pbox_optim_kind kind)
{
	if (!o || size < OPTIM_FIRST_LAYOUT || size > 4096 ||
	    kind < PBOX_OPTIM_SGD || kind > PBOX_OPTIM_ADAMW)
		return PBOX_EINVAL;
	memset(o, 0, size);
	o->size = (uint32_t)size;
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

/* The learning rate PS pushes of key carry (pbox_set_lr; 0 if never set),
 * under c->lock. */
static float ps_lr_locked(const pbox_client *c, uint32_t key)
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
	if (rc == 0 && c->host && host_has_ps_key(c, key))
		return host_set_lr(c, key, lr);
	if (rc == 0 && c->fleet)
		return fleet_set_lr(c, key, lr);
	if (rc == 0 && (rc = lr_store(c, key, (float)lr)) < 0)
		client_error(c, rc, "job '%s' rank %d key %u: out of memory", c->job, c->rank, key);
	return rc;
}

/* ---- the optimizer as declared (key_state optim) ---- */

const char *ps_optim_name(uint32_t kind)
{
	static const char *const names[] = { [PBOX_OPTIM_SGD] = "sgd",
		[PBOX_OPTIM_ADAM] = "adam", [PBOX_OPTIM_ADAMW] = "adamw" };

	return kind < sizeof(names) / sizeof(names[0]) && names[kind] ? names[kind] : "?";
}

unsigned ps_optim_planes(const pbox_optim *o)
{
	if (o->kind == PBOX_OPTIM_SGD)
		return o->momentum != 0 ? 1 : 0;
	return 2;
}

/* A hyperparameter key_declare sends (progress.c optimizer_json). */
struct hparam {
	const char *name;
	size_t off;
};

static const struct hparam sgd_hparams[] = {
	{ "momentum", offsetof(pbox_optim, momentum) },
	{ "dampening", offsetof(pbox_optim, dampening) },
	{ "weight_decay", offsetof(pbox_optim, weight_decay) },
};

static const struct hparam adam_hparams[] = {
	{ "beta1", offsetof(pbox_optim, beta1) },
	{ "beta2", offsetof(pbox_optim, beta2) },
	{ "eps", offsetof(pbox_optim, eps) },
	{ "weight_decay", offsetof(pbox_optim, weight_decay) },
};

static double hparam_of(const pbox_optim *o, const struct hparam *h)
{
	double v;

	memcpy(&v, (const char *)o + h->off, sizeof(v));
	return v;
}

/* "name a, this call b", with as many digits as tell a from b. */
static void say_diff(char *out, size_t len, const char *name, double a, double b)
{
	char sa[32], sb[32];

	snprintf(sa, sizeof(sa), "%g", a);
	snprintf(sb, sizeof(sb), "%g", b);
	if (strcmp(sa, sb) == 0) {
		snprintf(sa, sizeof(sa), "%.17g", a);
		snprintf(sb, sizeof(sb), "%.17g", b);
	}
	snprintf(out, len, "%s %s, this call %s", name, sa, sb);
}

/* Whether now declares another optimizer than was: its kind or a
 * hyperparameter key_declare sends (not lr: it travels in each push);
 * the first difference named in out ("momentum 0.9, this call 0.8"). */
static bool ps_optim_differs(const pbox_optim *was, const pbox_optim *now, char *out,
			     size_t len)
{
	bool sgd = was->kind == PBOX_OPTIM_SGD;
	const struct hparam *h = sgd ? sgd_hparams : adam_hparams;
	size_t n = sgd ? sizeof(sgd_hparams) / sizeof(h[0]) : sizeof(adam_hparams) / sizeof(h[0]);

	if (was->kind != now->kind) {
		snprintf(out, len, "optimizer %s, this call %s", ps_optim_name(was->kind),
			 ps_optim_name(now->kind));
		return true;
	}
	for (size_t i = 0; i < n; i++) {
		double a = hparam_of(was, &h[i]), b = hparam_of(now, &h[i]);
		if (a != b) {
			say_diff(out, len, h[i].name, a, b);
			return true;
		}
	}
	if (sgd && (was->nesterov != 0) != (now->nesterov != 0)) {
		say_diff(out, len, "nesterov", was->nesterov != 0, now->nesterov != 0);
		return true;
	}
	if ((was->sum != 0) != (now->sum != 0)) {
		say_diff(out, len, "sum", was->sum != 0, now->sum != 0);
		return true;
	}
	if (was->mean_over != now->mean_over) {
		say_diff(out, len, "mean_over", was->mean_over, now->mean_over);
		return true;
	}
	if (was->weights_dtype != now->weights_dtype) {
		snprintf(out, len, "weights_dtype %s, this call %s",
			 wire_dtype_name((unsigned)was->weights_dtype),
			 wire_dtype_name((unsigned)now->weights_dtype));
		return true;
	}
	return false;
}

/* ---- the kinds of call ---- */

/* optimizer_json's fields every box knows. */
static json_t *optimizer_fields(const pbox_optim *o)
{
	const char *name = ps_optim_name(o->kind);

	if (o->kind == PBOX_OPTIM_SGD)
		return json_pack("{s:s, s:f, s:f, s:f, s:b, s:b, s:s}", "name", name,
				 "momentum", o->momentum, "dampening", o->dampening,
				 "weight_decay", o->weight_decay, "nesterov", o->nesterov != 0,
				 "sum", o->sum != 0, "weights_dtype",
				 wire_dtype_name(o->weights_dtype));
	return json_pack("{s:s, s:f, s:f, s:f, s:f, s:b, s:s}", "name", name,
			 "beta1", o->beta1, "beta2", o->beta2, "eps", o->eps,
			 "weight_decay", o->weight_decay, "sum", o->sum != 0,
			 "weights_dtype", wire_dtype_name(o->weights_dtype));
}

/* key_declare's "optimizer" object for a PS declaration. */
static json_t *optimizer_json(const pbox_optim *o)
{
	json_t *j = optimizer_fields(o);

	/* (absent unless set: a box before 0.13 knows no mean_over) */
	if (j && o->mean_over &&
	    json_object_set_new(j, "mean_over", json_integer(o->mean_over)) < 0) {
		json_decref(j);
		return NULL;
	}
	return j;
}

/* pbox_declare_optimizer on a declared key: 0 if it declares the same
 * count, dtypes and optimizer (lr aside: pushes carry it), else
 * PBOX_EINVAL naming the difference; the key stays as it was. */
static void declare_again(pbox_client *c, struct pbox_req *r, uint64_t now)
{
	const struct key_state *ks = r->ks;
	char diff[128];

	(void)now;

	if (ks->count != r->count || ks->dtype != r->dtype || ks->rdtype != r->rdtype)
		progress_finish(c, r, PBOX_EINVAL, "job '%s' rank %d key %u: declared before "
				"with %llu %s gradients and %s weights", c->job, c->rank,
				r->key, (unsigned long long)ks->count,
				wire_dtype_name(ks->dtype), wire_dtype_name(ks->rdtype));
	else if (ps_optim_differs(&ks->optim, &r->optim, diff, sizeof(diff)))
		progress_finish(c, r, PBOX_EINVAL, "job '%s' rank %d key %u: declared before "
				"with %s: a key's optimizer is fixed (release the key to "
				"declare it anew)", c->job, c->rank, r->key, diff);
	else
		xfer_finish(c, r, 0, NULL);
}

/* The init round's start: INIT pushes count only in the key's first
 * round (docs/protocol.md "PS keys"); later the box drops them and the
 * call could only time out, a round ahead of the box's. */
static void init_start(pbox_client *c, struct pbox_req *r, uint64_t now)
{
	struct key_state *ks = r->ks;

	if (ks->round >= ks->first_round) {
		progress_finish(c, r, PBOX_EINVAL, "job '%s' rank %d key %u: pbox_ps_init "
				"already ran for this key (its first round, %u, has "
				"started); load weights with pbox_ps_write", c->job,
				c->rank, r->key, ks->first_round);
		return;
	}
	r->count = ks->count;
	r->empty = r->empty || ks->restored;
	xfer_start_checked(c, r, now);
}

/* A PS push carries the key's learning rate as it is when the push is
 * queued (pbox_set_lr). */
static void push_queued_locked(pbox_client *c, struct pbox_req *r)
{
	float lr = ps_lr_locked(c, r->key);
	memcpy(&r->arg, &lr, sizeof(r->arg));
}

static void declare_params(const struct pbox_req *r, json_t *params)
{
	json_object_set_new(params, "optimizer", optimizer_json(&r->optim));
}

/* The kinds of PS call: the declaration (pbox_declare_optimizer), the
 * init round and the steps; reads and writes are ps_rpc.c's. */
const struct req_op op_ps_declare = {
	.declares = true,
	.ps = true,
	.declare_params = declare_params,
	.start = declare_again,
};

const struct req_op op_ps_init = {
	.ps = true,
	.start = init_start,
};

const struct req_op op_push_pull = {
	.ps = true,
	.queued_locked = push_queued_locked,
};

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
	int rc = client_struct_tail(c, "pbox_optim", o, o->size, sizeof(*o));
	if (rc == 0 && c->host)
		return host_declare_optimizer(c, key, count, grad_dtype, o);
	if (rc == 0 && c->fleet)
		return fleet_declare_optimizer(c, key, count, grad_dtype, o);
	if (rc < 0 || (rc = req_check(c, key, o, count, grad_dtype, WIRE_F32)) < 0 ||
	    (rc = lr_check(c, key, o->lr)) < 0)
		return rc;
	struct pbox_req *r = req_new(c, key, &op_ps_declare);
	if (!r)
		return PBOX_ENOMEM;
	r->count = count;
	r->dtype = (uint8_t)grad_dtype;
	r->rdtype = (uint8_t)o->weights_dtype;
	memcpy(&r->optim, o, o->size < sizeof(r->optim) ? o->size : sizeof(r->optim));
	/* the learning rate: a declaration's only once it succeeded (a refused
	 * one leaves the key's as it was) */
	if ((rc = run(c, r)) < 0)
		return rc;
	if ((rc = lr_store(c, key, (float)o->lr)) < 0)
		return client_error(c, rc, "job '%s' rank %d key %u: out of memory", c->job,
				    c->rank, key);
	return 0;
}

/* The request of a PS round (init or step) after the common checks. */
static int ps_req(pbox_client *c, uint32_t key, const struct req_op *op, const void *src,
		  void *out, size_t count, pbox_dtype dtype, struct pbox_req **rp)
{
	*rp = NULL;
	int rc = req_check(c, key, out, count, dtype, WIRE_F32);
	if (rc < 0)
		return rc;
	if (op == &op_push_pull && !src)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: grad is NULL",
				    c->job, c->rank, key);
	struct pbox_req *r = req_new(c, key, op);
	if (!r)
		return PBOX_ENOMEM;
	r->src = src;
	r->buf = out;
	r->count = count;
	r->dtype = (uint8_t)dtype;
	r->empty = op == &op_ps_init && !src;
	r->push_flags = op == &op_ps_init ? WIRE_FLAG_INIT : 0;
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
	if (c->host)
		return host_ps_init(c, key, weights, weights_out);
	if (c->fleet)
		return fleet_ps_init(c, key, weights, weights_out);
	/* the count is the key's: the progress thread fills it in */
	int rc = ps_req(c, key, &op_ps_init, weights, weights_out, 1, PBOX_F32, &r);
	return rc < 0 ? rc : pbox_wait(r);
}

int pbox_ipush_pull(pbox_client *c, uint32_t key, const void *grad, void *weights_out,
		    size_t count, pbox_dtype dtype, pbox_req **req)
{
	if (!c)
		return PBOX_EINVAL;
	if (c->host)
		return host_ipush_pull(c, key, grad, weights_out, count, dtype, req);
	if (c->fleet)
		return fleet_ipush_pull(c, key, grad, weights_out, count, dtype, req);
	if (!req)
		return client_error(c, PBOX_EINVAL, "pbox_ipush_pull key %u: req is NULL", key);
	return ps_req(c, key, &op_push_pull, grad, weights_out, count, dtype, req);
}

int pbox_push_pull(pbox_client *c, uint32_t key, const void *grad, void *weights_out,
		   size_t count, pbox_dtype dtype)
{
	pbox_req *r;
	int rc = pbox_ipush_pull(c, key, grad, weights_out, count, dtype, &r);

	return rc < 0 ? rc : pbox_wait(r);
}

/* ---- reading and writing a PS key between steps ---- */

static int state_req(pbox_client *c, uint32_t key, const struct req_op *op, pbox_ps_part part,
		     const float *in, float *out, size_t count, struct pbox_req **rp)
{
	*rp = NULL;
	if ((unsigned)part > PBOX_PS_STATE1)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: unknown part %d "
				    "(PBOX_PS_WEIGHTS, _STATE0 or _STATE1)", c->job, c->rank,
				    key, (int)part);
	if (op == &op_ps_write && c->rank != 0)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: only rank 0 "
				    "writes a PS key's state", c->job, c->rank, key);
	int rc = req_check(c, key, op == &op_ps_read ? (const void *)out : (const void *)in,
			   count, PBOX_F32, WIRE_F32);
	if (rc < 0)
		return rc;
	struct pbox_req *r = req_new(c, key, op);
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
	if (c->host)
		return host_ps_rw(c, key, part, out, NULL, count, steps);
	if (c->fleet)
		return fleet_ps_rw(c, key, part, out, NULL, count, steps);
	int rc = state_req(c, key, &op_ps_read, part, NULL, out, count, &r);
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
	if (c->host)
		return host_ps_rw(c, key, part, NULL, in, count, NULL);
	if (c->fleet)
		return fleet_ps_rw(c, key, part, NULL, in, count, NULL);
	int rc = state_req(c, key, &op_ps_write, part, in, NULL, count, &r);
	return rc < 0 ? rc : run(c, r);
}

int pbox_ps_set_steps(pbox_client *c, uint32_t key, uint64_t steps)
{
	struct pbox_req *r;
	float dummy = 0;

	if (!c)
		return PBOX_EINVAL;
	/* key_write's steps is a JSON integer: at most INT64_MAX */
	if (steps > INT64_MAX)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: steps %llu is above "
				    "%lld", c->job, c->rank, key, (unsigned long long)steps,
				    (long long)INT64_MAX);
	if (c->host)
		return host_ps_set_steps(c, key, steps);
	if (c->fleet)
		return fleet_ps_set_steps(c, key, steps);
	int rc = state_req(c, key, &op_ps_write, PBOX_PS_WEIGHTS, &dummy, NULL, 1, &r);
	if (rc < 0)
		return rc;
	r->set_steps = true;
	r->steps = steps;
	return run(c, r);
}
