/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu_stage.c - the staging pipeline of a device call, run by the progress
 * thread (docs/gpu.md "The staging pipeline"). A device call is a
 * op_allreduce request whose buffer is its key's pinned slab (gpu_call.c); this
 * file moves the data between the device and the slab around the rounds
 * that xfer.c runs on it:
 *
 *   nocopy  the segments' data is not copied to the slab: the NIC reads
 *           them from the device buffer (GPUDirect, gpu_direct.c), or a
 *           top-k selection put them on the host already (gpu_topk.c);
 *           one event after the d2h stream's waits below gates all
 *           segments at once.
 *   start   the internal d2h stream waits for the caller's stream (the
 *           event recorded at submission) and for the key's last call's
 *           copies back (they read the slab); then every chunk's
 *           device-to-host copy (with the cast to the wire dtype) and an
 *           event after each are enqueued at once. r->ready_seg is 0:
 *           xfer.c sends no segment yet.
 *   poll    each loop of the progress thread queries the next chunks'
 *           events; as chunk i is on the host, ready_seg moves past its
 *           segments and xfer.c sends them. The copy of chunk i+1 runs
 *           while chunk i's segments are on the network.
 *   result  when every segment of chunk i has its result in the slab,
 *           the chunk's host-to-device copy (scale and cast back fused)
 *           is enqueued on the internal h2d stream, while later chunks
 *           are still being copied or summed.
 *   finish  the done event is recorded on the h2d stream after all of the
 *           call's copies (both streams); pbox_wait makes the caller's
 *           stream wait for it (gpu_call.c). Nothing here waits for the
 *           device on the host.
 */
#include <errno.h>
#include <stdio.h>

#include <string.h>

#include "client/gpu/gpu.h"

/* Fail r with the GPU library's reason for what failed. */
static void gpu_fail(pbox_client *c, struct pbox_req *r, const char *what)
{
	const struct pbox_gpu_ops *ops = c->gpu->ops;

	progress_finish(c, r, PBOX_ESYS, "job '%s' rank %d key %u round %u: GPU (%s): %s: %s",
			c->job, c->rank, r->key, r->round, ops->name, what, ops->last_error());
}

/* Elements of chunk i of k. */
static size_t chunk_len(const struct gpu_key *k, uint32_t i)
{
	uint64_t first = (uint64_t)i * k->chunk_elems;
	return (size_t)(k->count - first < k->chunk_elems ? k->count - first : k->chunk_elems);
}

/* k's chunks cut the request's segments as the box laid them out (dense,
 * or sparse ones for top-k): gpu_poll releases chunk_segs segments per
 * chunk and gpu_seg_done copies chunk seg / chunk_segs back, chunk_elems
 * a chunk; a chunk of other segments would leave segments unsent or copy
 * elements whose results are not in yet. */
static bool chunks_fit(const struct gpu_key *k, const struct seg_layout *l)
{
	return l->slice_segs == 0 && l->seg_elems == k->seg_elems && l->count == k->count &&
	       k->chunk_segs && k->nchunks == seg_nchunks(l->nsegs, k->chunk_segs);
}

bool gpu_start(pbox_client *c, struct pbox_req *r)
{
	struct client_gpu *g = c->gpu;
	const struct pbox_gpu_ops *ops = g->ops;
	struct gpu_key *k = r->gk;
	uint32_t nsegs = r->ks->lay.nsegs;
	size_t dsz = wire_dtype_size(k->dev_dt), wsz = wire_dtype_size(k->wire_dt);
	int rc;

	gpu_direct_retire(g);   /* ranges no longer used: the NIC is done with them */
	if (!chunks_fit(k, &r->ks->lay)) {
		progress_finish(c, r, PBOX_EPROTO, "job '%s' rank %d key %u round %u: the staging "
				"chunks (%u of %u segments of %u elements) do not cut the layout "
				"the box gave the key (%u segments of %u elements)", c->job,
				c->rank, r->key, r->round, k->nchunks, k->chunk_segs, k->seg_elems,
				nsegs, r->ks->lay.seg_elems);
		return false;
	}
	r->ready_seg = 0;
	k->staged = 0;
	k->enqueued = true;
	rc = ops->stream_wait_event(g->d2h, k->ev_start);
	if (rc == 0 && k->done_recorded)
		rc = ops->stream_wait_event(g->d2h, k->ev_done);
	if (rc < 0) {
		gpu_fail(c, r, "the copy stream cannot wait for the caller's stream");
		return false;
	}
	if (k->nocopy && ops->event_record(k->ev_chunk[0], g->d2h) < 0) {
		gpu_fail(c, r, "cannot record the gate of the segments");
		return false;
	}
	for (uint32_t i = 0; i < k->nchunks; i++) {
		uint64_t first = (uint64_t)i * k->chunk_elems;
		uint64_t seg0 = (uint64_t)i * k->chunk_segs, left = nsegs - seg0;
		k->left[i] = (uint32_t)(left < k->chunk_segs ? left : k->chunk_segs);
		if (k->nocopy)
			continue;
		rc = ops->copy_d2h((uint8_t *)k->slab + first * wsz, (enum gpu_dtype)k->wire_dt,
				   (const uint8_t *)k->dev + first * dsz,
				   (enum gpu_dtype)k->dev_dt, chunk_len(k, i), g->d2h);
		if (rc == 0)
			rc = ops->event_record(k->ev_chunk[i], g->d2h);
		if (rc < 0) {
			gpu_fail(c, r, "cannot enqueue the copy to the host");
			return false;
		}
	}
	k->staging = true;
	c->x->staging++;
	return true;
}

void gpu_poll(pbox_client *c, uint64_t now)
{
	const struct pbox_gpu_ops *ops = c->gpu->ops;

	for (struct pbox_req *r = c->x->act_head, *next; r; r = next) {
		next = r->act_next;
		struct gpu_key *k = r->gk;
		if (!k || !k->staging)
			continue;
		uint32_t was = k->staged;
		int rc = 0;
		/* (nocopy: one gate for every chunk) */
		while (k->staged < k->nchunks &&
		       (rc = ops->event_query(k->ev_chunk[k->nocopy ? 0 : k->staged])) == 0)
			k->staged = k->nocopy ? k->nchunks : k->staged + 1;
		if (rc < 0 && rc != -EAGAIN) {
			gpu_fail(c, r, "the copy to the host failed");
			continue;
		}
		if (k->staged == was)
			continue;
		uint64_t ready = (uint64_t)k->staged * k->chunk_segs;
		r->ready_seg = ready < r->ks->lay.nsegs ? (uint32_t)ready : r->ks->lay.nsegs;
		r->progress_ns = now;   /* data came: not stalled */
		if (k->staged == k->nchunks) {
			k->staging = false;
			c->x->staging--;
		}
	}
}

bool gpu_seg_done(pbox_client *c, struct pbox_req *r, uint32_t seg)
{
	struct client_gpu *g = c->gpu;
	struct gpu_key *k = r->gk;
	uint32_t i = seg / k->chunk_segs;

	if (--k->left[i])
		return true;
	uint64_t first = (uint64_t)i * k->chunk_elems;
	size_t dsz = wire_dtype_size(k->dev_dt), wsz = wire_dtype_size(k->wire_dt);
	if (g->ops->copy_h2d((uint8_t *)k->dev + first * dsz, (enum gpu_dtype)k->dev_dt,
			     (const uint8_t *)k->slab + first * wsz, (enum gpu_dtype)k->wire_dt,
			     chunk_len(k, i), k->scale, g->h2d) < 0) {
		gpu_fail(c, r, "cannot enqueue the copy back to the device");
		return false;
	}
	return true;
}

int gpu_finish(pbox_client *c, struct pbox_req *r, int rc, const char **msg)
{
	struct client_gpu *g = c->gpu;
	const struct pbox_gpu_ops *ops = g->ops;
	struct gpu_key *k = r->gk;
	int e = 0;

	if (k->staging) {
		k->staging = false;
		c->x->staging--;
	}
	/* After every device-to-host copy the call enqueued (all of them on
	 * success; a failed call may leave some pending): ev_start, whose
	 * wait the d2h stream took at gpu_start, is free to mark that point. */
	if (k->enqueued) {
		e = ops->event_record(k->ev_start, g->d2h);
		if (e == 0)
			e = ops->stream_wait_event(g->h2d, k->ev_start);
	}
	if (e == 0)
		e = ops->event_record(k->ev_done, g->h2d);
	if (e == 0)
		k->done_recorded = true;
	if (e < 0 && rc == 0) {
		snprintf(k->msg, sizeof(k->msg), "job '%s' rank %d key %u round %u: GPU (%s): "
			 "cannot record the end of the call's copies: %s", c->job, c->rank,
			 r->key, r->round, ops->name, ops->last_error());
		*msg = k->msg;
		rc = PBOX_ESYS;
	}
	return rc;
}

void gpu_timeout_note(const struct pbox_req *r, char *msg, size_t len)
{
	size_t at = strlen(msg);

	if (r->gk->staged < r->gk->nchunks && at < len)
		snprintf(msg + at, len - at, "; %u of %u chunks copied from the device (they "
			 "wait for the work enqueued on the stream before the call)",
			 r->gk->staged, r->gk->nchunks);
}
