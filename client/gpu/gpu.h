/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu.h - libpbox's staging pipeline for device buffers (docs/gpu.md "The
 * staging pipeline"): the GPU library loaded with dlopen (gpu_load.c), the
 * device calls and their completion on the caller's side (gpu_call.c), and
 * the pipeline the progress thread runs (gpu_stage.c), GPUDirect RDMA,
 * where the NIC reads the buffer itself (gpu_direct.c), top-k
 * selection on the device, whose entries go as a sparse call (gpu_topk.c),
 * and the device allreduce through the host level (gpu_host.c).
 *
 * Ownership:
 *   - struct client_gpu is made by the first device call of a client (on
 *     the caller's thread, so the streams belong to the caller's current
 *     device) and freed by pbox_close after the progress thread stopped.
 *     Its key table and every gpu_key's `busy` flag are under its lock.
 *   - A gpu_key (one per key used by device calls) is made by the key's
 *     first device call: its pinned slab and its events, all reused by
 *     every later call. A call owns it from submission until pbox_wait
 *     (or pbox_test) has ordered the caller's stream (busy); in between,
 *     the per-call fields are written by the caller before submission and
 *     by the progress thread while the request is active.
 *   - The two internal streams are used by the progress thread only, the
 *     host level's stream (hs) by the host thread only; the caller's
 *     stream by the caller's threads only (an event recorded at
 *     submission, a wait at completion).
 *   - A key's GPUDirect registration (its mr) is made at submission on the
 *     caller's thread and kept for the key's later calls on the same
 *     memory. One no longer used goes to gpu->retired, which the progress
 *     thread deregisters (transport.h: only it knows when the NIC is done
 *     reading) at its next device call, or pbox_close.
 * Lock order: gpu->lock, then c->lock (client_error).
 */
#ifndef PBOX_CLIENT_GPU_GPU_H
#define PBOX_CLIENT_GPU_GPU_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/ops/ops.h"
#include "client/transport/transport.h"
#include "common/gpu_ops.h"

#define GPU_CHUNK_DEFAULT (1u << 20) /* staging chunk, wire bytes */

struct pbox_client;
struct pbox_req;
struct pbox_dev_opts;

struct gpu_key {
	struct gpu_key *next;
	uint32_t key;
	bool busy;                 /* a call owns it (under gpu->lock) */
	uint8_t wire_dt;           /* enum gpu_dtype: the slab's and the box's */
	size_t count;
	size_t chunk_bytes;        /* as asked by the first call (0: default) */
	void *slab;                /* count wire elements, host_alloc'd */
	bool sparse;               /* top-k calls: the box's sparse segments */
	uint32_t seg_elems;        /* elements per segment of the key's layout:
				      the job's segment, or a sparse one (shorter
				      by WIRE_SPARSE_SLACK bytes) */
	uint32_t chunk_segs;       /* segments per staging chunk */
	uint64_t chunk_elems;      /* chunk_segs x seg_elems */
	uint32_t nchunks;
	uint32_t *left;            /* per chunk: segments without their result */
	void *ev_start;            /* on the caller's stream at submission */
	void *ev_done;             /* on the h2d stream after the call's copies */
	void **ev_chunk;           /* per chunk: after its device-to-host copy */
	bool done_recorded;        /* ev_done was recorded (the next call waits for it) */
	/* the call now owning the key */
	void *dev;
	uint8_t dev_dt;            /* enum gpu_dtype of dev */
	float scale;
	void *stream;              /* the caller's */
	bool enqueued;             /* gpu_start ran: copies may be on the d2h stream */
	bool nocopy;               /* this call's data is not copied to the slab:
				      GPUDirect, or a top-k selection already on
				      the host; one gate event for all chunks */
	bool staging;              /* counted in c->x->staging: chunks not yet on
				      the host */
	uint32_t staged;           /* chunks known to be on the host (in order) */
	char msg[256];             /* a failure of the pipeline, for xfer_finish */
	/* GPUDirect (gpu_direct.c) */
	bool direct;               /* this call: the NIC reads dev (no copy to the host) */
	struct tp_mem mr;          /* registration of [reg_base, +reg_size); mkey 0: none */
	uintptr_t reg_base;
	size_t reg_size;
	uintptr_t fail_base;       /* a range that would not register: its later */
	size_t fail_size;          /* calls stage without trying again */
	/* top-k on the device (gpu_topk.c), made by the key's first such call */
	float *resid;              /* count floats of device memory: error feedback */
	bool resid_reset;          /* zero resid before the next selection */
	bool caller_keeps;         /* a failed submission leaves the key busy: the
				      caller repairs the residual, then gives it */
	uint32_t *sel_idx;         /* host_alloc: the selection, sel_cap entries */
	float *sel_val;
	size_t *sel_m;             /* host_alloc: its size */
	size_t sel_cap;
};

/* A registration no longer used, waiting for the progress thread. */
struct gpu_mr {
	struct gpu_mr *next;
	struct tp_mem mr;
};

struct client_gpu {
	const struct pbox_gpu_ops *ops;
	void *d2h, *h2d;           /* internal streams (progress thread) */
	void *hs;                  /* the host thread's (gpu_host.c): made by the
				      first call through the host level */
	pthread_mutex_t lock;
	struct gpu_key *keys;
	struct transport *tp;      /* the client's (GPUDirect registrations) */
	struct gpu_mr *retired;    /* (under lock) */
	char why[256];             /* why the last call that could not go direct
				      staged (under lock; debug.c) */
};

/* ---- gpu_load.c ----------------------------------------------------- */

/* The GPU library's ops table: $PBOX_GPU_LIB or libpbox-gpu.so.1, opened,
 * checked (symbol, ABI) and initialised once per process per file. 0 and
 * *ops, or PBOX_ENOTSUP with the cause in err. */
int gpu_load(const struct pbox_gpu_ops **ops, char *err, size_t errlen);

/* ---- gpu_call.c: the caller's side ---------------------------------- */

/* c's GPU state, made by the first call (library loaded, streams made):
 * 0, or PBOX_ENOTSUP/PBOX_ENOMEM/PBOX_ESYS with c's message. */
int gpu_get(struct pbox_client *c, struct client_gpu **out);
/* pbox_dev_opts as this library knows them: 0 or PBOX_EINVAL. */
int gpu_dev_opts_read(struct pbox_client *c, uint32_t key, const struct pbox_dev_opts *in,
		      struct pbox_dev_opts *o);
/* dev of a device call (key's) as the GPU library sees it: 0 if it is
 * device memory; PBOX_EINVAL for host memory (the message names
 * host_call, the host form of the call), PBOX_ESYS with the library's
 * reason if it cannot tell. */
int gpu_dev_check(struct pbox_client *c, struct client_gpu *g, uint32_t key, const void *dev,
		  const char *host_call);
/* Find or make key's state (count wire_dt elements on the wire, in the
 * box's dense segments, or its sparse ones for top-k calls) and mark it
 * busy: 0, PBOX_EBUSY (a call owns it), PBOX_EINVAL (another size, chunk
 * or kind of call), PBOX_ENOMEM/PBOX_ESYS; give it back with
 * gpu_key_give. */
int gpu_key_take(struct pbox_client *c, struct client_gpu *g, uint32_t key, size_t count,
		 unsigned wire_dt, bool sparse, size_t chunk_bytes, struct gpu_key **out);
void gpu_key_give(struct client_gpu *g, struct gpu_key *k);

/* pbox_wait/pbox_test of a finished device request (r->gk set): order
 * the caller's stream after the call's copies and release its key; r->gk
 * is NULL afterwards. If the wait cannot be enqueued, r->rc becomes
 * PBOX_ESYS with its message (unless r had failed already). */
void gpu_complete(struct pbox_req *r);
/* pbox_close, after the progress thread stopped: wait for the copies in
 * flight, free slabs, events, streams. */
void gpu_close(struct pbox_client *c);
/* Free key's staging state, if it has any (pbox_release_keys: the key's
 * next device call allocates afresh, for its new size). */
void gpu_forget_key(struct pbox_client *c, uint32_t key);

/* A device call's stages (core/req.h), set as r->dev with r->gk. */
extern const struct req_dev_ops gpu_dev_ops;

/* ---- gpu_host.c: through the host level (ops/host.c) ---------------- */

/* pbox_iallreduce_dev (topk NULL) or pbox_iallreduce_topk_dev (topk: its
 * options, read) on a client with the host level (c->host; dev checked,
 * wire and scale read): key's bounce buffer (its slab) goes through the
 * host level as a host call of wire would (a top-k call: selected from
 * the host's sum). 0 and *req, or an error with c's message. */
int gpu_host_iallreduce(struct pbox_client *c, struct client_gpu *g, uint32_t key, void *dev,
			size_t count, pbox_dtype dtype, unsigned wire, float scale,
			size_t chunk_bytes, void *stream, const pbox_topk_opts *topk,
			struct pbox_req **req);

/* ---- gpu_topk.c ------------------------------------------------------ */

/* Free k's top-k state (its selection's copies are done). */
void gpu_topk_free(const struct pbox_gpu_ops *ops, struct gpu_key *k);
/* pbox_topk_reset of a key used by device top-k calls: 0, PBOX_EBUSY (a
 * call owns it), or 1 if key has no such state. */
int gpu_topk_reset(struct pbox_client *c, uint32_t key);

/* ---- gpu_direct.c: GPUDirect RDMA ----------------------------------- */

/* The mode of a call: PBOX_GPUDIRECT_OFF/AUTO/ON from opt, or from
 * $PBOX_GPUDIRECT for PBOX_GPUDIRECT_DEFAULT. PBOX_EINVAL with c's message
 * for a value outside them. */
int gpu_direct_mode(struct pbox_client *c, uint32_t key, int32_t opt);
/* At submission (k busy, the caller's thread): set k->direct if this
 * call can send from dev (count elements of dtype, wire dtype wire),
 * registering its range if it is not yet. Mode AUTO stages otherwise
 * (0, the reason in gpu->why); mode ON fails with PBOX_ENOTSUP naming
 * it. */
int gpu_direct_prepare(struct pbox_client *c, struct client_gpu *g, struct gpu_key *k,
		       int mode, void *dev, size_t count, unsigned dtype, unsigned wire);
/* Progress thread (or after it stopped): deregister retired ranges. */
void gpu_direct_retire(struct client_gpu *g);
/* Deregister k's range (the progress thread has stopped, or k's range
 * goes to gpu->retired first: retire true). */
void gpu_direct_drop(struct client_gpu *g, struct gpu_key *k, bool retire);

/* ---- gpu_stage.c: the progress thread's side ------------------------ */

/* r (a device call) starts its round: enqueue the copies to the host and
 * gate its segments (r->ready_seg 0). False if r was finished (a GPU
 * failure, or PBOX_EPROTO: the key's chunks do not cut the request's
 * layout): do not touch r then. */
bool gpu_start(struct pbox_client *c, struct pbox_req *r);
/* Advance the ready watermark of every active device call whose chunks
 * reached the host (c->x->staging > 0). */
void gpu_poll(struct pbox_client *c, uint64_t now);
/* Segment seg of r has its result: once its chunk is complete, enqueue
 * the chunk's copy back to the device. False if r was finished (a GPU
 * failure). */
bool gpu_seg_done(struct pbox_client *c, struct pbox_req *r, uint32_t seg);
/* r timed out streaming (xfer.c): msg gets how many of its chunks the
 * device has copied, if not all. */
void gpu_timeout_note(const struct pbox_req *r, char *msg, size_t len);
/* r ends with rc (xfer_finish): record the done event after every copy
 * it enqueued. Returns rc, or PBOX_ESYS with *msg set if that failed. */
int gpu_finish(struct pbox_client *c, struct pbox_req *r, int rc, const char **msg);

#endif
