/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * req.h - requests: one call of the API from submission to pbox_wait
 * (req.c), the table of handlers each kind of call fills (struct req_op)
 * and the stages of a device call (struct req_dev_ops). Part of core.
 *
 * Request life: QUEUED (in c->sub_*) -> admitted by the progress thread
 * (xfer/progress.c) -> DECLARING (first use of its key: key_declare sent,
 * answer awaited without blocking) -> STREAMING (xfer/xfer.c) or RPC (its
 * op's control calls) -> finished (xfer_finish). The progress thread knows
 * a kind of call only through its req_op: adding a kind is a table in its
 * own room (ops/), and nothing here or in xfer/.
 */
#ifndef PBOX_CLIENT_CORE_REQ_H
#define PBOX_CLIENT_CORE_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "client/core/client.h"
#include "client/core/keys.h"
#include "include/pbox.h"

/* What a kind of call does, for the progress thread. Filled by the room
 * of the call (ops/); a request points at its kind's (r->op). */
struct req_op {
	bool keyless;            /* not one key's call (key_release): start
				    runs on admission, on no key state */
	bool declares;           /* its first call on a key declares the key
				    (else the key must be declared) */
	bool ps;                 /* a PS key's call */
	bool sparse;             /* a sparse key's call */
	/* its control calls change what the box holds (key_write,
	 * key_release): if the call ends without their answer, its keys are
	 * unsure until it comes (xfer/progress.c) */
	bool changes_box;
	/* its answered control calls reset its keys (key_release) */
	bool resets_keys;
	const char *rpc;         /* the control call it waits for in REQ_RPC */
	/* key_declare's parameters beyond those every declaration has (PS:
	 * "optimizer"); NULL: none */
	void (*declare_params)(const struct pbox_req *r, json_t *params);
	/* r on its READY key, the checks every call shares passed: NULL =
	 * stream its round (xfer_start_checked) */
	void (*start)(pbox_client *c, struct pbox_req *r, uint64_t now);
	/* the answer (result or error) to a control call of r's kind; p->req
	 * is NULL if the call ended without it */
	void (*answer)(pbox_client *c, struct rpc_pending *p, const json_t *msg, uint64_t now);
	/* under c->lock, as r is queued (a PS push: the learning rate now) */
	void (*queued_locked)(pbox_client *c, struct pbox_req *r);
};

struct gpu_key;   /* a device call's staging state (gpu/gpu.h), opaque here */

/* The stages of a device call that the rooms below run at their moments:
 * filled by gpu/; r->dev set with r->gk. */
struct req_dev_ops {
	/* r's round starts (progress thread): enqueue its copies, gate its
	 * segments (r->ready_seg). False if r was finished. */
	bool (*start)(pbox_client *c, struct pbox_req *r);
	/* segment seg has its result. False if r was finished. */
	bool (*seg_done)(pbox_client *c, struct pbox_req *r, uint32_t seg);
	/* r ends with rc: rc, or another error with *msg set */
	int (*finish)(pbox_client *c, struct pbox_req *r, int rc, const char **msg);
	/* r timed out streaming: what its device side adds to msg */
	void (*timeout_note)(const struct pbox_req *r, char *msg, size_t len);
	/* pbox_wait/pbox_test of the finished r: order the caller's stream
	 * after its copies; r->gk is NULL afterwards */
	void (*complete)(struct pbox_req *r);
	/* k, owned by no completed request (a failed submission, pbox_close):
	 * give it back, unless its caller keeps it */
	void (*drop)(pbox_client *c, struct gpu_key *k);
	/* A device call that a thread of a room above runs instead of the
	 * progress thread (ops/host.c; start, seg_done, finish and
	 * timeout_note unused): host_in brings the device data to r->src
	 * before that thread reads it (it may wait for the device: its own
	 * thread, never the caller's); host_out, after the call ended with
	 * rc and wrote r->buf, enqueues the copy back (rc 0) and marks the
	 * end of the call's copies for complete. 0 (host_out: rc) or an
	 * error with msg. */
	int (*host_in)(pbox_client *c, struct pbox_req *r, char *msg, size_t len);
	int (*host_out)(pbox_client *c, struct pbox_req *r, int rc, char *msg, size_t len);
};

/* State of a request inside the progress thread. */
enum req_state {
	REQ_QUEUED = 0,  /* submitted, not yet seen by the thread */
	REQ_DECLARING,   /* waiting for its key's key_declare answer */
	REQ_STREAMING,   /* segments being sent and results collected */
	REQ_RPC,         /* its op's control calls await their answers */
};

struct pbox_req {
	pbox_client *c;
	struct pbox_req **kids;               /* a fleet's call (ops/fleet.c): the
						 calls on its boxes' clients, each
						 waited for by pbox_wait; nkids 0:
						 an ordinary call */
	uint32_t nkids;
	uint32_t key;
	const struct req_op *op;              /* its kind */
	uint8_t dtype;                        /* of src (PS init: f32) */
	uint8_t rdtype;                       /* of buf (PS: the weights') */
	bool empty;                           /* PS init: send count 0 */
	uint8_t push_flags;                   /* WIRE_FLAG_* every PUSH carries
						 (PS init: WIRE_FLAG_INIT) */
	uint32_t arg;                         /* PUSH argument (learning rate bits) */
	const void *src;                      /* what is pushed (allreduce: buf) */
	uint32_t src_mkey;                    /* GPUDirect: src is GPU memory the NIC
						 reads (transport.h tp_pkt.mkey); 0 */
	void *buf;                            /* where results go */
	size_t count;                         /* elements of the key (keys: of keys) */
	uint8_t coll;                         /* enum key_coll (0: allreduce) */
	uint16_t root;                        /* broadcast: its root */
	uint64_t src_first;                   /* key element at src[0] (allgather:
						 rank * count / world) */
	uint64_t buf_first;                   /* key element at buf[0] (reduce_scatter:
						 rank * count / world) */
	pbox_optim optim;                     /* PS declaration */
	uint8_t part;                         /* PS read/write: pbox_ps_part */
	bool set_steps;                       /* PS write: steps, no data */
	uint64_t steps;                       /* read: steps held; write: to set */
	uint64_t *steps_out;                  /* PS read: where steps go */
	size_t done_elems;                    /* PS read/write: progress */
	const uint32_t *sp_idx;               /* sparse: the entries (sorted) */
	const uint8_t *sp_val;
	size_t *sp_first;                     /* nsegs + 1: each segment's first entry */
	void *sp_own;                         /* the request's copy of idx and val */
	size_t sp_nnz;                        /* ... their count (ops/host.c) */
	bool sp_out_zero;                     /* buf is all zero at submission */
	uint32_t *keys;                       /* a keyless call's keys (count), owned */
	pbox_topk_opts topk;                  /* a host-level top-k call's options
						 (ops/host.c) */
	struct gpu_key *gk;                   /* a device call: its key's staging
						 state; NULL for host calls */
	const struct req_dev_ops *dev;        /* ... and its stages */
	bool fed;                             /* buf is filled by another thread as
						 the call runs (req_feed), and its
						 results are read as they come
						 (req_drained) */
	uint64_t feed;                        /* ... elements of it filled so far
						 (atomic: release by req_feed,
						 acquire by xfer.c) */
	uint64_t drained;                     /* ... elements of buf from 0 that
						 hold their results (atomic: release
						 by xfer.c, acquire by req_drained) */
	uint32_t drained_seg;                 /* (progress thread: segments below
						 it have their results) */
	uint64_t drain_step;                  /* on_drain(drain_arg) runs (progress
						 thread) when drained crosses a
						 multiple of this, and at count */
	void (*on_drain)(void *arg);
	void *drain_arg;
	/* under c->lock */
	bool finished;
	int rc;
	char msg[CLIENT_MSG_LEN];
	struct pbox_req *sub_next;            /* submission queue */
	struct pbox_req *live_prev, *live_next; /* not yet waited for */
	/* progress thread only */
	uint8_t state;                        /* enum req_state */
	struct pbox_req *act_prev, *act_next; /* active list, FIFO */
	struct key_state *ks;
	uint32_t round;
	uint32_t next_seg;                    /* first segment never sent */
	uint32_t ready_seg;                   /* segments below it may be sent: all
						 (nsegs), or a device call's that are
						 on the host (gpu/gpu_stage.c) */
	uint32_t ndone;                       /* segments with their result */
	uint32_t epoch;                       /* bumped on progress: resets RTO */
	uint64_t progress_ns;                 /* last new result (or start) */
	uint64_t wait_missing;                /* the last WAIT's ranks (the box has
						 ours and waits for them), 0 none */
	uint32_t wait_base;                   /* ... rank of its bit 0 (wire_notice base) */
	bool late_noted;                      /* PBOX_DEBUG=INFO said it waits */
	uint64_t redeclare_ns;                /* declare again then: the box said
						 the key is still being released
						 (0 = not waiting) */
	bool held_elsewhere;                  /* ... which it said at least once */
};

/* A control call of the progress thread awaiting its answer (c->rpcs). */
struct rpc_pending {
	uint64_t id;
	struct key_state *ks;        /* a key_declare's key ... */
	struct pbox_req *req;        /* ... or the call it serves (NULL once
				        that request finished) */
	const struct req_op *op;     /* that call's kind */
	size_t elems;                /* elements this piece carries (PS) */
	uint32_t *held;              /* a call that changes the box and ended
				        without this answer (timed out): its keys,
				        each counted in key_state unsure until
				        the answer comes */
	size_t nheld;
	struct rpc_pending *next;
};

/* The checks of a call that need no connection, then those that need the
 * job's seg_bytes (count cut into segments of layout's elements: the
 * dtype, or f32 for PS keys). 0 or PBOX_EINVAL with c's message. */
int req_check(pbox_client *c, uint32_t key, const void *buf, size_t count,
	      pbox_dtype dtype, unsigned layout);
/* A fleet's call on c made of the calls kids[0..n) on its boxes' clients
 * (taken: freed with it); NULL with PBOX_ENOMEM's message (the kids are
 * waited for and freed). */
struct pbox_req *req_group(pbox_client *c, struct pbox_req **kids, uint32_t n);
/* A zeroed request of op for key, or NULL with PBOX_ENOMEM's message set
 * on c. */
struct pbox_req *req_new(pbox_client *c, uint32_t key, const struct req_op *op);
/* Queue r (filled by the caller) for the progress thread and wake it; r is
 * freed on failure. 0, or PBOX_EBUSY / the client's fatal code. */
int req_submit(pbox_client *c, struct pbox_req *r);
/* req_end finishes r with rc (msg: its message when rc < 0, NULL: rc's
 * name) and wakes its waiters: the last thing done with a request
 * (xfer_finish; ops/host.c). Requests run by a thread of a room above
 * rather than the progress thread (ops/host.c): req_track makes r one of
 * c's live requests (so pbox_wait, pbox_test and the busy-key rule
 * apply) without queueing it; 0, or PBOX_EBUSY / the client's fatal code
 * (r freed). */
int req_track(pbox_client *c, struct pbox_req *r);
void req_end(pbox_client *c, struct pbox_req *r, int rc, const char *msg);
/* A fed request (r->fed, submitted before its buffer is whole: ops/host.c
 * sums into it as its segments go): the first elems elements of r's
 * buffer hold their data; the progress thread may send the segments
 * they fill. elems only grows, to r->count. */
void req_feed(pbox_client *c, struct pbox_req *r, uint64_t elems);
/* A fed request: the elements of its buffer from 0 that hold their
 * results (any thread; it only grows, to r->count). */
uint64_t req_drained(const struct pbox_req *r);
/* Whether a call on key is submitted and not finished (under c->lock). */
bool req_key_busy_locked(const pbox_client *c, uint32_t key);
/* The keys r holds: its keys (count), or its key. */
static inline const uint32_t *req_keys(const struct pbox_req *r, size_t *n)
{
	*n = r->keys ? r->count : 1;
	return r->keys ? r->keys : &r->key;
}
/* Free a request and what it owns. */
void req_free(struct pbox_req *r);

#endif
