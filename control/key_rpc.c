/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * key_rpc.c - the key_declare method (docs/rpc.md): decode (a PS key's
 * "optimizer" object too), declare the key in the registry, answer with
 * its geometry and chunk owners.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/errmsg.h"
#include "common/wire.h"
#include "control/ckpt_restore.h"
#include "control/ckpt_worker.h"
#include "control/jobs.h"
#include "control/rpc_methods.h"

static json_t *chunk_list(const struct job_key *k)
{
	json_t *a = json_array();

	for (uint32_t c = 0; a && c < k->geom.nchunks; c++)
		if (json_array_append_new(a, json_integer(k->chunk_ep[c])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/* A finite number params.optimizer.name into *out (left alone if absent). */
static int opt_num(json_t *o, const char *name, double *out, char *err, size_t errlen)
{
	json_t *v = json_object_get(o, name);

	if (!v)
		return 0;
	if (!json_is_number(v) || !isfinite(json_number_value(v)))
		return errmsg(err, errlen, RPC_INVALID_PARAMS, "params.optimizer.%s must be a "
			      "finite number", name);
	*out = json_number_value(v);
	return 0;
}

/* A boolean params.optimizer.name into *out (left alone if absent). */
static int opt_bool(json_t *o, const char *name, int *out, char *err, size_t errlen)
{
	json_t *v = json_object_get(o, name);

	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return errmsg(err, errlen, RPC_INVALID_PARAMS, "params.optimizer.%s must be "
			      "true or false", name);
	*out = json_is_true(v);
	return 0;
}

/* params.optimizer of a PS key: {"name": "sgd"|"adam"|"adamw", PyTorch's
 * hyperparameters, "sum", "weights_dtype"}; absent ones take PyTorch's
 * defaults (docs/rpc.md). */
static int parse_optimizer(json_t *o, unsigned grad_dtype, struct job_ps *ps,
			   char *err, size_t errlen)
{
	static const char *const known[] = { "name", "momentum", "dampening",
		"weight_decay", "nesterov", "beta1", "beta2", "eps", "sum",
		"weights_dtype", "mean_over", NULL };
	const char *name = NULL, *wd = NULL;
	int nesterov = 0, sum = 0, rc;

	if (!json_is_object(o))
		return errmsg(err, errlen, RPC_INVALID_PARAMS, "params.optimizer must be an object");
	if ((rc = rpc_params_known(o, known, err, errlen)) ||
	    (rc = rpc_param_str(o, "name", 1, 16, &name, err, errlen)) ||
	    (rc = rpc_param_str(o, "weights_dtype", 0, 16, &wd, err, errlen)))
		return rc;
	memset(ps, 0, sizeof(*ps));
	ps->opt.kind = (uint8_t)optim_parse(name);
	if (ps->opt.kind == OPTIM_NONE)
		return errmsg(err, errlen, -EINVAL, "unknown optimizer '%s' (sgd, adam or adamw)",
			      name);
	ps->opt.beta1 = 0.9;
	ps->opt.beta2 = 0.999;
	ps->opt.eps = 1e-8;
	ps->opt.weight_decay = ps->opt.kind == OPTIM_ADAMW ? 1e-2 : 0;
	if ((rc = opt_num(o, "momentum", &ps->opt.momentum, err, errlen)) ||
	    (rc = opt_num(o, "dampening", &ps->opt.dampening, err, errlen)) ||
	    (rc = opt_num(o, "weight_decay", &ps->opt.weight_decay, err, errlen)) ||
	    (rc = opt_num(o, "beta1", &ps->opt.beta1, err, errlen)) ||
	    (rc = opt_num(o, "beta2", &ps->opt.beta2, err, errlen)) ||
	    (rc = opt_num(o, "eps", &ps->opt.eps, err, errlen)) ||
	    (rc = opt_bool(o, "nesterov", &nesterov, err, errlen)) ||
	    (rc = opt_bool(o, "sum", &sum, err, errlen)))
		return rc;
	ps->opt.nesterov = (uint8_t)nesterov;
	ps->average = !sum;
	json_t *mo = json_object_get(o, "mean_over");
	if (mo && (!json_is_integer(mo) || json_integer_value(mo) < 1 ||
		   json_integer_value(mo) > 1 << 20))
		return errmsg(err, errlen, RPC_INVALID_PARAMS, "params.optimizer.mean_over must "
			      "be a whole number of ranks, 1..%d", 1 << 20);
	ps->mean_over = mo ? (uint32_t)json_integer_value(mo) : 0;
	if (ps->opt.kind != OPTIM_SGD && (ps->opt.momentum || ps->opt.dampening || nesterov))
		return errmsg(err, errlen, -EINVAL, "momentum, dampening and nesterov are "
			      "SGD's; %s takes beta1, beta2 and eps", name);
	if (optim_check(&ps->opt, err, errlen) < 0)
		return -EINVAL;
	int d = wd ? wire_dtype_parse(wd) : WIRE_F32;
	if (d < 0 || (d != WIRE_F32 && d != (int)grad_dtype))
		return errmsg(err, errlen, -EINVAL, "weights_dtype '%s' must be f32 or the "
			      "gradients' dtype (%s)", wd, wire_dtype_name(grad_dtype));
	ps->rdtype = (unsigned)d;
	return 0;
}

static json_t *ps_reply(const struct job_key *k)
{
	if (!k->is_ps)
		return json_null();
	return json_pack("{s:s, s:s, s:b, s:b, s:I, s:I}", "name", optim_name(k->ps.opt.kind),
			 "weights_dtype", wire_dtype_name(k->ps.rdtype), "sum", !k->ps.average,
			 "restored", k->ek->ps->restored, "step", (json_int_t)k->ek->ps->step0,
			 "mean_over", (json_int_t)k->ps.mean_over);
}

RPC_HANDLER(rpc_key_declare)
{
	static const char *const known[] = { "job_id", "rank", "key", "count", "dtype",
					     "optimizer", "sparse", "collective", "root", "resume_round",
					     NULL };
	struct jobs_declare_args a = { .session = ctx->session };
	struct job_ps ps;
	const char *dtype = NULL, *coll = NULL;
	const struct job_key *k;
	uint32_t root = 0;
	int rc;

	if ((rc = rpc_params_known(params, known, err, errlen)) ||
	    (rc = rpc_param_u32(params, "job_id", 1, 0, UINT32_MAX, &a.job_id, err, errlen)) ||
	    (rc = rpc_param_u32(params, "rank", 1, 0, 65535, &a.rank, err, errlen)) ||
	    (rc = rpc_param_u32(params, "key", 1, 0, UINT32_MAX, &a.key, err, errlen)) ||
	    (rc = rpc_param_u64(params, "count", 1, 0, INT64_MAX, &a.count, err, errlen)) ||
	    (rc = rpc_param_str(params, "dtype", 1, 16, &dtype, err, errlen)) ||
	    (rc = rpc_param_str(params, "collective", 0, 16, &coll, err, errlen)) ||
	    (rc = rpc_param_u32(params, "root", 0, 0, 65535, &root, err, errlen)) ||
	    (rc = rpc_param_u32(params, "resume_round", 0, 0, UINT32_MAX - 1, &a.resume_round,
				err, errlen)))
		return rc;
	if (coll && jobs_coll_parse(coll, &a.coll) < 0) {
		snprintf(err, errlen, "key %u: unknown collective '%s' (allreduce, broadcast, "
			 "allgather or reduce_scatter)", a.key, coll);
		return -EINVAL;
	}
	if (json_object_get(params, "root") && a.coll != JOB_BROADCAST) {
		snprintf(err, errlen, "key %u: 'root' goes with the broadcast collective only",
			 a.key);
		return -EINVAL;
	}
	a.root = (uint16_t)root;
	json_t *sp = json_object_get(params, "sparse");
	if (sp && !json_is_boolean(sp)) {
		snprintf(err, errlen, "key %u: 'sparse' must be true or false", a.key);
		return -EINVAL;
	}
	a.sparse = json_is_true(sp);
	int d = wire_dtype_parse(dtype);
	if (d < 0) {
		snprintf(err, errlen, "key %u: unknown dtype '%s' (f32, f16 or bf16)", a.key, dtype);
		return -EINVAL;
	}
	a.dtype = (unsigned)d;
	json_t *opt = json_object_get(params, "optimizer");
	if (opt && !json_is_null(opt)) {
		if ((rc = parse_optimizer(opt, a.dtype, &ps, err, errlen)) < 0) {
			char why[256];
			snprintf(why, sizeof(why), "%s", err);
			snprintf(err, errlen, "key %u: %s", a.key, why);
			return rc;
		}
		a.ps = &ps;
	}
	if (a.resume_round && (a.ps || a.sparse || a.coll == JOB_REDUCE_SCATTER)) {
		snprintf(err, errlen, "key %u: 'resume_round' goes with dense keys whose ranks all "
			 "get the whole result (not PS, sparse or reduce_scatter)", a.key);
		return -EINVAL;
	}
	/* a restored key's checkpoint is read off the control thread; this
	 * declaration (and the other ranks' meanwhile) is answered when it is
	 * (control/ckpt_restore.h) */
	a.defer_restore = ctx->box->ckpt != NULL;
	rc = jobs_declare(ctx->box->jobs, &a, &k, err, errlen);
	if (rc == JOBS_PENDING) {
		rc = ckpt_restore_wait(ckpt_worker_restores(ctx->box->ckpt), a.job_id, a.key,
				       ctx->session, ctx->id, err, errlen);
		return rc < 0 ? rc : RPC_DEFERRED;
	}
	if (rc < 0)
		return rc;
	*result = rpc_key_declared(ctx->box, jobs_find_id(ctx->box->jobs, a.job_id), k);
	if (!*result) {
		snprintf(err, errlen, "key %u: out of memory for the reply", a.key);
		return -ENOMEM;
	}
	return 0;
}

json_t *rpc_key_declared(struct box *box, const struct job *j, const struct job_key *k)
{
	(void)box;
	json_t *chunks = chunk_list(k);
	if (!chunks)
		return NULL;
	return json_pack("{s:I, s:I, s:s, s:I, s:I, s:I, s:o, s:o, s:b, s:s, s:i, s:I}",
			 "key", (json_int_t)k->key, "count", (json_int_t)k->geom.count,
			 "dtype", wire_dtype_name(k->dtype),
			 "seg_elems", (json_int_t)k->geom.seg_elems,
			 "nsegs", (json_int_t)k->geom.nsegs,
			 "segs_per_chunk", (json_int_t)k->geom.segs_per_chunk,
			 "chunks", chunks, "ps", ps_reply(k), "sparse", k->sparse,
			 "collective", jobs_coll_name(k->coll), "root", (int)k->root,
			 "first_round", (json_int_t)jobs_first_round(j, k));
}

/* key_release (docs/rpc.md): {"job_id", "rank", "keys": [...]} ->
 * {"removed": [...]}. */
RPC_HANDLER(rpc_key_release)
{
	static const char *const known[] = { "job_id", "rank", "keys", NULL };
	uint32_t job_id, rank, keys[KEY_RELEASE_MAX], removed[KEY_RELEASE_MAX], nremoved;
	json_t *a, *v;
	size_t i;
	int rc;

	if ((rc = rpc_params_known(params, known, err, errlen)) ||
	    (rc = rpc_param_u32(params, "job_id", 1, 0, UINT32_MAX, &job_id, err, errlen)) ||
	    (rc = rpc_param_u32(params, "rank", 1, 0, 65535, &rank, err, errlen)))
		return rc;
	a = json_object_get(params, "keys");
	if (!json_is_array(a) || json_array_size(a) == 0 ||
	    json_array_size(a) > KEY_RELEASE_MAX)
		return errmsg(err, errlen, RPC_INVALID_PARAMS, "params.keys must be an array "
			      "of 1 to %d keys", KEY_RELEASE_MAX);
	json_array_foreach(a, i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > UINT32_MAX)
			return errmsg(err, errlen, RPC_INVALID_PARAMS, "params.keys[%zu] must "
				      "be a key (an integer in [0, 4294967295])", i);
		keys[i] = (uint32_t)json_integer_value(v);
	}
	rc = jobs_release(ctx->box->jobs, job_id, rank, ctx->session, keys,
			  (uint32_t)json_array_size(a), removed, &nremoved, err, errlen);
	if (rc < 0)
		return rc;
	json_t *out = json_array();
	for (uint32_t k = 0; out && k < nremoved; k++)
		json_array_append_new(out, json_integer(removed[k]));
	*result = json_pack("{s:o}", "removed", out ? out : json_array());
	return *result ? 0 : errmsg(err, errlen, -ENOMEM, "out of memory for the reply");
}
