/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu_call.c - the device calls of include/pbox_cuda.h on the caller's
 * side: options, the client's GPU state (made by its first device call,
 * on the caller's thread so the streams belong to the caller's device),
 * the key's staging state (pinned slab and events, made by the key's
 * first device call and reused; GPUDirect's registration in
 * gpu_direct.c), the submission of an op_allreduce request whose
 * buffer is the slab (with the host level: gpu_host.c's call instead),
 * and the completion that orders the caller's stream
 * after the call's copies (pbox_wait, pbox_test). The pipeline itself
 * runs in the progress thread (gpu_stage.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/gpu/gpu.h"
#include "client/ops/fleet.h"
#include "client/ops/host.h"
#include "common/sparse.h"
#include "include/pbox_cuda.h"

#define DEV_OPTS_SIZE_V0 (offsetof(pbox_dev_opts, chunk_bytes) + sizeof(uint64_t))
_Static_assert(DEV_OPTS_SIZE_V0 == 24, "pbox_dev_opts' first layout is 24 bytes");
#define STRUCT_SIZE_MAX 4096

int pbox_dev_opts_init_sized(pbox_dev_opts *o, size_t size)
{
	pbox_dev_opts d = { .size = (uint32_t)size, .wire_dtype = -1, .scale = 1.0,
			    .chunk_bytes = 0, .gpudirect = PBOX_GPUDIRECT_DEFAULT };

	if (!o || size < DEV_OPTS_SIZE_V0 || size > STRUCT_SIZE_MAX)
		return PBOX_EINVAL;
	memset(o, 0, size);
	memcpy(o, &d, size < sizeof(d) ? size : sizeof(d));
	return 0;
}

size_t pbox_dev_opts_size(void)
{
	return sizeof(pbox_dev_opts);
}

/* The caller's options as this library knows them (the bytes it has;
 * beyond ours they must be 0). 0 or PBOX_EINVAL with c's message. */
int gpu_dev_opts_read(pbox_client *c, uint32_t key, const pbox_dev_opts *in,
		      pbox_dev_opts *o)
{
	pbox_dev_opts_init(o);
	if (!in)
		return 0;
	if (in->size < DEV_OPTS_SIZE_V0 || in->size > STRUCT_SIZE_MAX)
		return client_error(c, PBOX_EINVAL, "key %u: pbox_dev_opts.size is %u: fill "
				    "the options with pbox_dev_opts_init", key, in->size);
	memcpy(o, in, in->size < sizeof(*o) ? in->size : sizeof(*o));
	for (size_t i = sizeof(*o); i < in->size; i++)
		if (((const unsigned char *)in)[i])
			return client_error(c, PBOX_EINVAL, "key %u: pbox_dev_opts uses an option "
					    "of a newer libpbox (byte %zu is set; this one knows "
					    "%zu)", key, i, sizeof(*o));
	o->size = sizeof(*o);
	return 0;
}

/* Free a key's staging state (its copies done or never enqueued); its
 * GPUDirect registration is retired (the progress thread deregisters it)
 * or, once that thread has stopped, deregistered at once. */
static void key_free(struct client_gpu *g, struct gpu_key *k, bool retire)
{
	const struct pbox_gpu_ops *ops = g->ops;

	gpu_direct_drop(g, k, retire);
	if (k->done_recorded)
		ops->event_sync(k->ev_done);   /* no copy may still use the slab */
	gpu_topk_free(ops, k);
	for (uint32_t i = 0; k->ev_chunk && i < k->nchunks; i++)
		if (k->ev_chunk[i])
			ops->event_destroy(k->ev_chunk[i]);
	if (k->ev_start)
		ops->event_destroy(k->ev_start);
	if (k->ev_done)
		ops->event_destroy(k->ev_done);
	if (k->slab)
		ops->host_free(k->slab);
	free(k->ev_chunk);
	free(k->left);
	free(k);
}

/* Destroy what g holds (its keys included). */
static void gpu_free(struct client_gpu *g)
{
	while (g->keys) {
		struct gpu_key *k = g->keys;
		g->keys = k->next;
		key_free(g, k, false);
	}
	gpu_direct_retire(g);
	if (g->d2h)
		g->ops->stream_destroy(g->d2h);
	if (g->h2d)
		g->ops->stream_destroy(g->h2d);
	if (g->hs)
		g->ops->stream_destroy(g->hs);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

static const struct client_ext gpu_ext;

/* c's GPU state, made on first use: the library loaded, two streams. */
int gpu_get(pbox_client *c, struct client_gpu **out)
{
	char err[CLIENT_MSG_LEN];
	const struct pbox_gpu_ops *ops;

	pthread_mutex_lock(&c->lock);
	*out = c->gpu;
	pthread_mutex_unlock(&c->lock);
	if (*out)
		return 0;
	int rc = gpu_load(&ops, err, sizeof(err));
	if (rc < 0)
		return client_error(c, rc, "%s", err);
	struct client_gpu *g = calloc(1, sizeof(*g));
	if (!g)
		return client_error(c, PBOX_ENOMEM, "out of memory for the GPU state");
	g->ops = ops;
	g->tp = &c->tp;
	pthread_mutex_init(&g->lock, NULL);
	if (ops->stream_create(&g->d2h) < 0 || ops->stream_create(&g->h2d) < 0) {
		rc = client_error(c, PBOX_ESYS, "GPU (%s): cannot create a stream: %s", ops->name,
				  ops->last_error());
		gpu_free(g);
		return rc;
	}
	pthread_mutex_lock(&c->lock);
	if (!c->gpu && (rc = client_ext_attach_locked(c, &gpu_ext)) == 0)
		c->gpu = g;
	*out = c->gpu;
	pthread_mutex_unlock(&c->lock);
	if (*out != g)         /* another thread of the caller was first (or rc < 0) */
		gpu_free(g);
	return *out ? 0 : rc;
}

int pbox_gpu_init(pbox_client *c)
{
	struct client_gpu *g;

	if (c && c->fleet) {   /* every box's client */
		for (unsigned b = 0; b < c->nsubs; b++) {
			int rc = pbox_gpu_init(c->subs[b]);
			if (rc < 0)
				return fleet_wrap(c, c->subs[b], rc, NULL);
		}
		return 0;
	}
	return c ? gpu_get(c, &g) : PBOX_EINVAL;
}

/*
 * k's staging chunks. A chunk is whole segments of the layout the box
 * gives the request (xfer.c sends and gpu_stage.c copies back by its
 * segment numbers): the job's segments for dense calls, the shorter
 * sparse ones (WIRE_SPARSE_SLACK bytes less: sparse_seg_elems) for top-k
 * calls, whose results land in the same slab. chunk_bytes (0: the
 * default) of wire bytes, at least one segment and at most all of them;
 * 64-bit arithmetic, so any chunk_bytes is a valid request.
 */
static void key_chunks(struct gpu_key *k, uint32_t seg_bytes, size_t chunk_bytes)
{
	size_t wsz = wire_dtype_size(k->wire_dt);
	uint32_t seg_elems = k->sparse ? sparse_seg_elems(seg_bytes, wsz)
				       : seg_bytes / (uint32_t)wsz;

	/* a fleet's client has no segments of its own: its device calls
	 * come here only through the host level, which copies the key
	 * whole (gpu_host.c): one chunk */
	if (seg_bytes == 0)
		seg_elems = k->count < UINT32_MAX ? (uint32_t)k->count : UINT32_MAX;
	uint64_t nsegs = seg_nsegs(k->count, seg_elems);
	uint64_t want = chunk_bytes ? chunk_bytes : GPU_CHUNK_DEFAULT;
	uint64_t segs = want / ((uint64_t)seg_elems * wsz);

	if (segs < 1)
		segs = 1;
	if (segs > nsegs)
		segs = nsegs;
	k->seg_elems = seg_elems;
	k->chunk_segs = (uint32_t)segs;   /* <= nsegs < 2^32 (req_check) */
	k->chunk_elems = segs * seg_elems;
	k->nchunks = (uint32_t)seg_nchunks(nsegs, segs);
}

/* A new key's staging state: slab, events, chunks (under g->lock). */
static int key_make(pbox_client *c, struct client_gpu *g, uint32_t key, size_t count,
		    unsigned wire_dt, bool sparse, size_t chunk_bytes, struct gpu_key **out)
{
	const struct pbox_gpu_ops *ops = g->ops;
	size_t wsz = wire_dtype_size(wire_dt);
	struct gpu_key *k = calloc(1, sizeof(*k));

	if (!k)
		return client_error(c, PBOX_ENOMEM, "key %u: out of memory", key);
	k->key = key;
	k->count = count;
	k->wire_dt = (uint8_t)wire_dt;
	k->sparse = sparse;
	k->chunk_bytes = chunk_bytes;
	key_chunks(k, c->seg_bytes, chunk_bytes);
	k->left = calloc(k->nchunks, sizeof(*k->left));
	k->ev_chunk = calloc(k->nchunks, sizeof(*k->ev_chunk));
	int rc = 0;
	if (!k->left || !k->ev_chunk) {
		rc = client_error(c, PBOX_ENOMEM, "key %u: out of memory", key);
	} else if (ops->host_alloc(&k->slab, count * wsz) < 0) {
		k->slab = NULL;
		rc = client_error(c, PBOX_ESYS, "key %u: GPU (%s): cannot allocate %zu bytes of "
				  "pinned host memory: %s", key, ops->name, count * wsz,
				  ops->last_error());
	} else {
		rc = ops->event_create(&k->ev_start);
		if (rc == 0)
			rc = ops->event_create(&k->ev_done);
		for (uint32_t i = 0; rc == 0 && i < k->nchunks; i++)
			rc = ops->event_create(&k->ev_chunk[i]);
		if (rc < 0)
			rc = client_error(c, PBOX_ESYS, "key %u: GPU (%s): cannot create an event: "
					  "%s", key, ops->name, ops->last_error());
	}
	if (rc < 0) {
		key_free(g, k, false);
		return rc;
	}
	k->next = g->keys;
	g->keys = k;
	*out = k;
	return 0;
}

int gpu_dev_check(pbox_client *c, struct client_gpu *g, uint32_t key, const void *dev,
		  const char *host_call)
{
	const struct pbox_gpu_ops *ops = g->ops;
	int isdev = ops->is_device(dev);

	if (isdev < 0)   /* the library failed: its reason, not a guess */
		return client_error(c, PBOX_ESYS, "job '%s' rank %d key %u: GPU (%s): cannot tell "
				    "whether %p is device memory: %s", c->job, c->rank, key,
				    ops->name, dev, ops->last_error());
	if (isdev == 0)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: %p is host memory, "
				    "not device memory (%s); %s", c->job, c->rank, key, dev,
				    ops->name, host_call);
	return 0;
}

/* Find or make key's state and mark it busy (under g->lock). */
int gpu_key_take(pbox_client *c, struct client_gpu *g, uint32_t key, size_t count,
		 unsigned wire_dt, bool sparse, size_t chunk_bytes, struct gpu_key **out)
{
	struct gpu_key *k;
	int rc = 0;

	pthread_mutex_lock(&g->lock);
	k = g->keys;
	while (k && k->key != key)
		k = k->next;
	if (!k)
		rc = key_make(c, g, key, count, wire_dt, sparse, chunk_bytes, &k);
	else if (k->busy)
		rc = client_error(c, PBOX_EBUSY, "job '%s' rank %d key %u: a device call on this "
				  "key is in flight (pbox_wait for it first)", c->job, c->rank, key);
	else if (k->sparse != sparse)
		rc = client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: %s", c->job, c->rank,
				  key, k->sparse ? "a key of top-k device calls "
				  "(pbox_allreduce_topk_dev): dense calls cannot use it"
				  : "a key of dense device calls: top-k calls need a key of "
				  "their own");
	else if (k->count != count || k->wire_dt != wire_dt)
		rc = client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: its device calls have "
				  "%zu %s elements on the wire, this one %zu %s (use another key "
				  "for another size)", c->job, c->rank, key, k->count,
				  wire_dtype_name(k->wire_dt), count, wire_dtype_name(wire_dt));
	else if (chunk_bytes && chunk_bytes != k->chunk_bytes)
		rc = client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: its staging chunk is "
				  "%zu bytes (set by its first device call), this call asks %zu",
				  c->job, c->rank, key, k->chunk_bytes, chunk_bytes);
	if (rc == 0) {
		k->busy = true;
		*out = k;
	}
	pthread_mutex_unlock(&g->lock);
	return rc;
}

void gpu_key_give(struct client_gpu *g, struct gpu_key *k)
{
	pthread_mutex_lock(&g->lock);
	k->busy = false;
	pthread_mutex_unlock(&g->lock);
}

/* A fleet's device allreduce: each partition's on its box (ops/fleet.c). */
struct fleet_dev { uint8_t *dev; size_t esz; pbox_dtype dtype; void *stream;
		   const pbox_dev_opts *opts; };

static int fleet_dev_part(pbox_client *sub, const struct fpart *pt, void *arg, pbox_req **req)
{
	const struct fleet_dev *a = arg;
	return pbox_iallreduce_dev(sub, pt->subkey, a->dev + pt->first * a->esz, pt->count,
				   a->dtype, a->stream, a->opts, req);
}

int pbox_iallreduce_dev(pbox_client *c, uint32_t key, void *dev, size_t count,
			pbox_dtype dtype, void *stream, const pbox_dev_opts *opts,
			pbox_req **req)
{
	pbox_dev_opts o;
	struct client_gpu *g;
	struct gpu_key *k = NULL;

	if (!c)
		return PBOX_EINVAL;
	/* a fleet's client: each partition a flat call on its box, unless the
	 * host level takes the call (below; its lanes are the fleet's) */
	struct fleet_dev a = { .dev = dev, .esz = wire_dtype_size(dtype), .dtype = dtype,
			       .stream = stream, .opts = opts };
	if (c->fleet && !c->host && req && dev && count) {
		*req = NULL;
		return fleet_dense_call(c, key, count, dtype, fleet_dev_part, &a, req);
	}
	if (!req)
		return client_error(c, PBOX_EINVAL, "pbox_iallreduce_dev key %u: req is NULL", key);
	*req = NULL;
	int rc = gpu_dev_opts_read(c, key, opts, &o);
	if (rc < 0)
		return rc;
	unsigned wire = o.wire_dtype < 0 ? (unsigned)dtype : (unsigned)o.wire_dtype;
	if (wire_dtype_size((unsigned)dtype) == 0 || wire_dtype_size(wire) == 0)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: unknown dtype %d or "
				    "wire_dtype %d (use PBOX_F32, PBOX_F16 or PBOX_BF16)", c->job,
				    c->rank, key, (int)dtype, (int)o.wire_dtype);
	if (!isfinite(o.scale) || !isfinite((float)o.scale))
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: scale %g is not a "
				    "finite binary32 number", c->job, c->rank, key, o.scale);
	int mode = gpu_direct_mode(c, key, o.gpudirect);
	if (mode < 0)
		return mode;
	bool via_host = c->host && mode != PBOX_GPUDIRECT_ON;   /* GPUDirect asked for: flat */
	if (c->fleet && !via_host && dev && count)
		return fleet_dense_call(c, key, count, dtype, fleet_dev_part, &a, req);
	rc = via_host ? host_check_buf(c, key, dev, count, (pbox_dtype)wire, false)
		      : req_check(c, key, dev, count, (pbox_dtype)wire, wire);
	if (rc < 0)
		return rc;
	if ((rc = gpu_get(c, &g)) < 0)
		return rc;
	if ((rc = gpu_dev_check(c, g, key, dev, "pbox_iallreduce sums host buffers")) < 0)
		return rc;
	if (via_host)
		return gpu_host_iallreduce(c, g, key, dev, count, dtype, wire, (float)o.scale,
					   (size_t)o.chunk_bytes, stream, NULL, req);
	if ((rc = gpu_key_take(c, g, key, count, wire, false, (size_t)o.chunk_bytes, &k)) < 0)
		return rc;
	if ((rc = gpu_direct_prepare(c, g, k, mode, dev, count, (unsigned)dtype, wire)) < 0) {
		gpu_key_give(g, k);
		return rc;
	}
	if (g->ops->event_record(k->ev_start, stream) < 0) {
		rc = client_error(c, PBOX_ESYS, "job '%s' rank %d key %u: GPU (%s): cannot record "
				  "an event on the stream: %s", c->job, c->rank, key, g->ops->name,
				  g->ops->last_error());
		gpu_key_give(g, k);
		return rc;
	}
	struct pbox_req *r = req_new(c, key, &op_allreduce);
	if (!r) {
		gpu_key_give(g, k);
		return PBOX_ENOMEM;
	}
	k->dev = dev;
	k->dev_dt = (uint8_t)dtype;
	k->scale = (float)o.scale;
	k->stream = stream;
	k->enqueued = false;
	k->staged = 0;
	k->nocopy = k->direct;
	r->gk = k;
	r->dev = &gpu_dev_ops;
	r->src = k->direct ? dev : k->slab;   /* direct: the NIC reads the device buffer */
	r->src_mkey = k->direct ? k->mr.mkey : 0;
	r->buf = k->slab;
	r->count = count;
	r->dtype = r->rdtype = (uint8_t)wire;
	bool direct = k->direct;
	rc = req_submit(c, r);   /* frees r on failure: gpu_drop gives k back */
	if (rc < 0)
		return rc;
	stat_add(direct ? &c->stats.gpu_direct_calls : &c->stats.gpu_staged_calls, 1);
	*req = r;
	return 0;
}

int pbox_allreduce_dev(pbox_client *c, uint32_t key, void *dev, size_t count,
		       pbox_dtype dtype, void *stream, const pbox_dev_opts *opts)
{
	pbox_req *r;
	int rc = pbox_iallreduce_dev(c, key, dev, count, dtype, stream, opts, &r);

	return rc < 0 ? rc : pbox_wait(r);
}

void gpu_complete(struct pbox_req *r)
{
	pbox_client *c = r->c;
	struct client_gpu *g = c->gpu;
	struct gpu_key *k = r->gk;

	r->gk = NULL;
	if (g->ops->stream_wait_event(k->stream, k->ev_done) < 0 && r->rc == 0) {
		r->rc = PBOX_ESYS;
		snprintf(r->msg, sizeof(r->msg), "job '%s' rank %d key %u: GPU (%s): cannot make "
			 "the stream wait for the sum: %s", c->job, c->rank, r->key, g->ops->name,
			 g->ops->last_error());
	}
	gpu_key_give(g, k);
}

/* A device key no request completed: back to the pool, unless the
 * caller keeps it (a device top-k call repairs its residual first). */
static void gpu_drop(pbox_client *c, struct gpu_key *k)
{
	if (!k->caller_keeps)
		gpu_key_give(c->gpu, k);
}

void gpu_close(pbox_client *c)
{
	if (c->gpu)
		gpu_free(c->gpu);
	c->gpu = NULL;
}

void gpu_forget_key(pbox_client *c, uint32_t key)
{
	struct client_gpu *g;
	struct gpu_key *k = NULL, **pp;

	pthread_mutex_lock(&c->lock);
	g = c->gpu;
	pthread_mutex_unlock(&c->lock);
	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	for (pp = &g->keys; *pp; pp = &(*pp)->next)
		if ((*pp)->key == key && !(*pp)->busy) {
			k = *pp;
			*pp = k->next;
			break;
		}
	pthread_mutex_unlock(&g->lock);
	if (k)
		key_free(g, k, true);
}

/* PBOX_DEBUG at pbox_close: how the device calls went. */
static void gpu_summary(const pbox_client *c, FILE *f)
{
	pbox_stats s;

	client_stats(c, &s);
	if (!s.gpu_direct_calls && !s.gpu_staged_calls)
		return;
	fprintf(f, "pbox:   device calls: %llu sent from GPU memory (GPUDirect), %llu "
		"staged through host memory\n", (unsigned long long)s.gpu_direct_calls,
		(unsigned long long)s.gpu_staged_calls);
	if (c->gpu && c->gpu->why[0])   /* (the progress thread has stopped) */
		fprintf(f, "pbox:   staged because %s\n", c->gpu->why);
}

const struct req_dev_ops gpu_dev_ops = {
	.start = gpu_start,
	.seg_done = gpu_seg_done,
	.finish = gpu_finish,
	.timeout_note = gpu_timeout_note,
	.complete = gpu_complete,
	.drop = gpu_drop,
};

static const struct client_ext gpu_ext = {
	.name = "device calls",
	.forget_key = gpu_forget_key,
	.topk_reset = gpu_topk_reset,
	.staging_poll = gpu_poll,
	.close = gpu_close,
	.summary = gpu_summary,
};
