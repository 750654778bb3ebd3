/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu_topk.c - pbox_iallreduce_topk_dev (include/pbox_cuda.h): top-k with
 * error feedback selected on the GPU (the GPU library's topk_ef: MSTopK's
 * threshold search on device memory, docs/gpu.md), then the sparse
 * allreduce of sparse_call.c with the dense sum copied back to the device
 * buffer by the staging pipeline (gpu_stage.c).
 *
 *   select  on the caller's stream, after the work enqueued on it: the
 *           key's device residual += the gradient, about k entries into
 *           pinned host memory, and those zeroed in the residual. The
 *           caller's thread waits for it (the search reads counts back
 *           between its passes anyway), as pbox_iallreduce_topk selects
 *           before it returns.
 *   send    an op_sparse request of those entries whose buffer is the key's slab;
 *           no copy to the host is needed (gpu_key.nocopy).
 *   result  each chunk of the dense sum goes back into the device buffer
 *           (times the scale) as soon as its segments are in, and
 *           pbox_wait orders the caller's stream after the last copy, as
 *           for pbox_iallreduce_dev.
 * Through the host level (c->host) the call is gpu_host.c's instead:
 * staged to the host and selected there from the host's sum.
 * The residual (count floats) lives in device memory, made by the key's
 * first call and zeroed on the caller's stream; the selection's arrays
 * are pinned, grown with k and reused. float32 buffers with error
 * feedback and no momentum: the device kernels' case.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "client/gpu/gpu.h"
#include "client/ops/fleet.h"
#include "client/ops/host.h"
#include "common/topk.h"
#include "include/pbox_cuda.h"

void gpu_topk_free(const struct pbox_gpu_ops *ops, struct gpu_key *k)
{
	if (k->resid)
		ops->dev_free(k->resid);
	if (k->sel_idx)
		ops->host_free(k->sel_idx);
	if (k->sel_val)
		ops->host_free(k->sel_val);
	if (k->sel_m)
		ops->host_free(k->sel_m);
	k->resid = NULL;
	k->sel_idx = NULL;
	k->sel_val = NULL;
	k->sel_m = NULL;
	k->sel_cap = 0;
}

int gpu_topk_reset(pbox_client *c, uint32_t key)
{
	struct client_gpu *g;
	int rc = 1;

	pthread_mutex_lock(&c->lock);
	g = c->gpu;
	pthread_mutex_unlock(&c->lock);
	if (!g)
		return 1;
	pthread_mutex_lock(&g->lock);
	for (struct gpu_key *k = g->keys; k; k = k->next)
		if (k->key == key && k->resid) {
			rc = k->busy ? PBOX_EBUSY : 0;
			if (!k->busy)
				k->resid_reset = true;   /* zeroed before the next selection */
		}
	pthread_mutex_unlock(&g->lock);
	if (rc == PBOX_EBUSY)
		return client_error(c, rc, "job '%s' rank %d key %u: a device call on this key is "
				    "in flight (pbox_wait for it first)", c->job, c->rank, key);
	return rc;
}

/* The key's residual and selection arrays for k entries; on the caller's
 * stream, the residual zeroed if it is new or was reset. */
static int topk_state(pbox_client *c, const struct pbox_gpu_ops *ops, struct gpu_key *k,
		      size_t sel, void *stream)
{
	size_t cap = TOPK_MAX(sel);
	const char *what = NULL;

	if (!k->resid) {
		if (ops->dev_alloc((void **)&k->resid, k->count * sizeof(float)) < 0) {
			k->resid = NULL;
			what = "allocate the residual in device memory";
		} else {
			k->resid_reset = true;
		}
	}
	if (!what && !k->sel_m && ops->host_alloc((void **)&k->sel_m, sizeof(*k->sel_m)) < 0) {
		k->sel_m = NULL;
		what = "allocate pinned host memory";
	}
	if (!what && cap > k->sel_cap) {
		if (k->sel_idx)
			ops->host_free(k->sel_idx);
		if (k->sel_val)
			ops->host_free(k->sel_val);
		k->sel_cap = 0;
		if (ops->host_alloc((void **)&k->sel_idx, cap * sizeof(*k->sel_idx)) < 0)
			k->sel_idx = NULL;
		if (ops->host_alloc((void **)&k->sel_val, cap * sizeof(*k->sel_val)) < 0)
			k->sel_val = NULL;
		if (k->sel_idx && k->sel_val)
			k->sel_cap = cap;
		else
			what = "allocate pinned host memory for the selection";
	}
	if (!what && k->resid_reset) {
		if (ops->dev_zero(k->resid, k->count * sizeof(float), stream) < 0)
			what = "zero the residual";
		else
			k->resid_reset = false;
	}
	if (!what)
		return 0;
	return client_error(c, PBOX_ESYS, "job '%s' rank %d key %u: GPU (%s): cannot %s (%zu "
			    "elements): %s", c->job, c->rank, k->key, ops->name, what, k->count,
			    ops->last_error());
}

/* Options a device top-k call cannot take: PBOX_EINVAL naming them. */
static int dev_limits(pbox_client *c, uint32_t key, const pbox_topk_opts *t,
		      const pbox_dev_opts *o)
{
	const char *what = !t->error_feedback ? "error_feedback 0 (the device keeps a residual)"
			   : t->momentum > 0  ? "momentum correction"
			   : t->local_size > 1 ? "hierarchical top-k (local_size > 1: the "
						 "host group sums in host memory)"
			   : o->wire_dtype >= 0 && o->wire_dtype != PBOX_F32
				? "a wire_dtype other than f32 (the selected values go as f32)"
			   : !isfinite(o->scale) || !isfinite((float)o->scale)
				? "a scale that is not a finite binary32 number" : NULL;

	if (!what)
		return 0;
	return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: top-k of a device buffer "
			    "does not take %s", c->job, c->rank, key, what);
}

/* A fleet's device top-k: each partition's on its box (ops/fleet.c). */
struct fleet_topk_dev { float *dev; void *stream; const pbox_topk_opts *topk;
			const pbox_dev_opts *opts; };

static int fleet_topk_dev_part(pbox_client *sub, const struct fpart *pt, void *arg,
			       pbox_req **req)
{
	const struct fleet_topk_dev *a = arg;
	return pbox_iallreduce_topk_dev(sub, pt->subkey, a->dev + pt->first, pt->count, a->stream,
					a->topk, a->opts, req);
}

int pbox_iallreduce_topk_dev(pbox_client *c, uint32_t key, float *dev, size_t count,
			     void *stream, const pbox_topk_opts *topk, const pbox_dev_opts *opts,
			     pbox_req **req)
{
	pbox_topk_opts t;
	pbox_dev_opts o;
	struct client_gpu *g;
	struct gpu_key *k;
	size_t sel;

	if (!c)
		return PBOX_EINVAL;
	if (c->fleet && !c->host && req && dev && count) {   /* (host level: below) */
		struct fleet_topk_dev a = { .dev = dev, .stream = stream, .topk = topk,
					    .opts = opts };
		*req = NULL;
		return fleet_topk_call(c, key, count, PBOX_F32, fleet_topk_dev_part, &a, req);
	}
	if (!req)
		return client_error(c, PBOX_EINVAL, "pbox_iallreduce_topk_dev key %u: req is NULL",
				    key);
	*req = NULL;
	int rc = c->host ? host_check_buf(c, key, dev, count, PBOX_F32, true)
			 : sparse_check(c, key, dev, count, PBOX_F32);
	if (rc < 0 || (rc = topk_opts_read(c, key, topk, count, &t, &sel)) < 0 ||
	    (rc = gpu_dev_opts_read(c, key, opts, &o)) < 0 ||
	    (rc = dev_limits(c, key, &t, &o)) < 0 || (rc = gpu_get(c, &g)) < 0)
		return rc;
	const struct pbox_gpu_ops *ops = g->ops;
	if ((rc = gpu_dev_check(c, g, key, dev, "pbox_allreduce_topk selects on host buffers")) < 0)
		return rc;
	if (c->host)   /* staged, selected from the host's sum (gpu_host.c) */
		return gpu_host_iallreduce(c, g, key, dev, count, PBOX_F32, PBOX_F32, (float)o.scale,
					   (size_t)o.chunk_bytes, stream, &t, req);
	/* the dense sum comes back in the sparse call's segments */
	if ((rc = gpu_key_take(c, g, key, count, PBOX_F32, true, (size_t)o.chunk_bytes, &k)) < 0)
		return rc;
	if ((rc = topk_state(c, ops, k, sel, stream)) < 0) {
		gpu_key_give(g, k);
		return rc;
	}
	/* select on the caller's stream, then wait for it on the host */
	rc = ops->topk_ef(k->resid, dev, count, sel, k->sel_idx, k->sel_val, k->sel_m, stream);
	if (rc == 0)
		rc = ops->event_record(k->ev_start, stream);
	if (rc == 0)
		rc = ops->event_sync(k->ev_start);
	if (rc < 0) {
		rc = client_error(c, PBOX_ESYS, "job '%s' rank %d key %u: GPU (%s): the top-k "
				  "selection failed: %s", c->job, c->rank, key, ops->name,
				  ops->last_error());
		gpu_key_give(g, k);
		return rc;
	}
	size_t m = *k->sel_m;
	k->dev = dev;
	k->dev_dt = PBOX_F32;
	k->scale = (float)o.scale;
	k->stream = stream;
	k->enqueued = false;
	k->staged = 0;
	k->direct = false;
	k->nocopy = true;   /* the entries are on the host already */
	k->caller_keeps = true;
	rc = sparse_submit(c, key, count, PBOX_F32, k->sel_idx, k->sel_val, m, k->slab, 0, k,
			   &gpu_dev_ops, req);
	k->caller_keeps = false;
	if (rc < 0) {
		/* nothing was sent: the selected entries go back into the
		 * residual (one small copy each: a failure path only), done
		 * before the key is free again */
		for (size_t j = 0; j < m; j++)
			ops->copy_h2d(k->resid + k->sel_idx[j], GPU_F32, &k->sel_val[j], GPU_F32, 1,
				      1.0f, stream);
		if (ops->event_record(k->ev_start, stream) == 0)
			ops->event_sync(k->ev_start);
		gpu_key_give(g, k);
		return rc;
	}
	stat_add(&c->stats.gpu_staged_calls, 1);
	return 0;
}

int pbox_allreduce_topk_dev(pbox_client *c, uint32_t key, float *dev, size_t count,
			    void *stream, const pbox_topk_opts *topk, const pbox_dev_opts *opts)
{
	pbox_req *r;
	int rc = pbox_iallreduce_topk_dev(c, key, dev, count, stream, topk, opts, &r);

	return rc < 0 ? rc : pbox_wait(r);
}
