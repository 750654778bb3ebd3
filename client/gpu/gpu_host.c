/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu_host.c - pbox_iallreduce_dev through the host level (docs/gpu.md
 * "Through the host level"; ops/host.c runs the call).
 *
 * A device call of a client with the host level is a host-level dense call
 * of the wire dtype on its key's pinned slab, used as a bounce buffer: the
 * host thread copies the slab into this member's slot of the key's shared
 * memory, sums and allreduces on the lane, and copies the result back into
 * the slab exactly as it does a host buffer, so the sums are the host
 * call's bits. Around it, on the host level's own stream (g->hs, used by
 * the host thread only):
 *
 *   submission (the caller's thread) take the key (busy until pbox_wait),
 *           record ev_start on the caller's stream: nothing waits for the
 *           device here.
 *   host_in (host thread) the stream waits for ev_start and for the
 *           key's last call's copies (ev_done: they read the slab); the
 *           copy to the slab (cast to the wire dtype) and ev_chunk[0]
 *           after it are enqueued; the host thread sleeps on that event
 *           (event_sync: a blocking wait, never a poll) before the
 *           slab is read.
 *   host_out (host thread) the copy back (scale and cast fused) is
 *           enqueued, then ev_done after every copy of the call, also
 *           after a failure (the d2h copy may have run); pbox_wait makes
 *           the caller's stream wait for ev_done (gpu_complete), as for a
 *           flat call.
 *
 * pbox_iallreduce_topk_dev comes here too (f32): the host-level top-k
 * call on the slab, selected on the CPU from the host's sum (ops/host.c),
 * where the flat call selects on the device.
 *
 * Why a bounce buffer and not the shared slot itself: the ABI's copies
 * take host_alloc memory on the host side (a fused cast kernel writes it
 * through its device address), which the shared memory is not; and the
 * result areas are reused two calls later, while the copy back may still
 * read: the slab is the key's, kept until the next call's d2h copy waits
 * for ev_done.
 */
#include <stdio.h>

#include "client/gpu/gpu.h"
#include "client/ops/host.h"

/* A failure of the GPU library in msg: 0 or PBOX_ESYS. */
static int gpu_err(pbox_client *c, struct pbox_req *r, int e, const char *what, char *msg,
		   size_t len)
{
	const struct pbox_gpu_ops *ops = c->gpu->ops;

	if (e == 0)
		return 0;
	snprintf(msg, len, "job '%s' rank %d key %u: host level: GPU (%s): %s: %s", c->job,
		 c->rank, r->key, ops->name, what, ops->last_error());
	return PBOX_ESYS;
}

/* The device data into the slab, on the host when this returns. */
static int host_in(pbox_client *c, struct pbox_req *r, char *msg, size_t len)
{
	struct client_gpu *g = c->gpu;
	const struct pbox_gpu_ops *ops = g->ops;
	struct gpu_key *k = r->gk;
	int e = ops->stream_wait_event(g->hs, k->ev_start);

	if (e == 0 && k->done_recorded)
		e = ops->stream_wait_event(g->hs, k->ev_done);
	if (gpu_err(c, r, e, "the copy stream cannot wait for the caller's stream", msg, len))
		return PBOX_ESYS;
	k->enqueued = true;
	e = ops->copy_d2h(k->slab, (enum gpu_dtype)k->wire_dt, k->dev, (enum gpu_dtype)k->dev_dt,
			  k->count, g->hs);
	if (gpu_err(c, r, e, "cannot enqueue the copy to the host", msg, len))
		return PBOX_ESYS;
	e = ops->event_record(k->ev_chunk[0], g->hs);
	if (e == 0)
		e = ops->event_sync(k->ev_chunk[0]);
	return gpu_err(c, r, e, "the copy to the host failed", msg, len);
}

/* The result back to the device (rc 0), the end of the call's copies. */
static int host_out(pbox_client *c, struct pbox_req *r, int rc, char *msg, size_t len)
{
	struct client_gpu *g = c->gpu;
	const struct pbox_gpu_ops *ops = g->ops;
	struct gpu_key *k = r->gk;
	int e = 0;

	if (rc == 0) {
		e = ops->copy_h2d(k->dev, (enum gpu_dtype)k->dev_dt, k->slab,
				  (enum gpu_dtype)k->wire_dt, k->count, k->scale, g->hs);
		rc = gpu_err(c, r, e, "cannot enqueue the copy back to the device", msg, len);
	}
	if (k->enqueued || rc == 0) {   /* (nothing enqueued: the last ev_done stands) */
		e = ops->event_record(k->ev_done, g->hs);
		if (e == 0)
			k->done_recorded = true;
		else if (rc == 0)
			rc = gpu_err(c, r, e, "cannot record the end of the call's copies", msg, len);
	}
	return rc;
}

static void host_drop(pbox_client *c, struct gpu_key *k)
{
	gpu_key_give(c->gpu, k);
}

/* Only complete, drop and the host thread's stages: the progress thread
 * never runs these calls. */
static const struct req_dev_ops gpu_host_ops = {
	.complete = gpu_complete,
	.drop = host_drop,
	.host_in = host_in,
	.host_out = host_out,
};

int gpu_host_iallreduce(pbox_client *c, struct client_gpu *g, uint32_t key, void *dev,
			size_t count, pbox_dtype dtype, unsigned wire, float scale,
			size_t chunk_bytes, void *stream, const pbox_topk_opts *topk,
			pbox_req **req)
{
	const struct pbox_gpu_ops *ops = g->ops;
	struct gpu_key *k;
	int rc = 0;

	/* the host thread's stream, made here: on the caller's device */
	pthread_mutex_lock(&g->lock);
	if (!g->hs && ops->stream_create(&g->hs) < 0) {
		g->hs = NULL;
		rc = client_error(c, PBOX_ESYS, "job '%s' rank %d key %u: GPU (%s): cannot create "
				  "a stream: %s", c->job, c->rank, key, ops->name, ops->last_error());
	}
	pthread_mutex_unlock(&g->lock);
	if (rc < 0)
		return rc;
	if ((rc = gpu_key_take(c, g, key, count, wire, false, chunk_bytes, &k)) < 0)
		return rc;
	if (ops->event_record(k->ev_start, stream) < 0) {
		rc = client_error(c, PBOX_ESYS, "job '%s' rank %d key %u: GPU (%s): cannot record "
				  "an event on the stream: %s", c->job, c->rank, key, ops->name,
				  ops->last_error());
		gpu_key_give(g, k);
		return rc;
	}
	k->dev = dev;
	k->dev_dt = (uint8_t)dtype;
	k->scale = scale;
	k->stream = stream;
	k->enqueued = false;
	k->direct = k->nocopy = false;
	if ((rc = host_iallreduce_dev(c, key, k->slab, count, (pbox_dtype)wire, topk, k,
				      &gpu_host_ops, req)) < 0)
		return rc;
	stat_add(&c->stats.gpu_staged_calls, 1);
	return 0;
}
