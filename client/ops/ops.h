/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ops.h - the calls of libpbox (client/ops/), above xfer, core and
 * transport: connect and close (connect.c), allreduce (allreduce.c), the
 * collectives (coll.c), the box optimizer's PS calls (ps.c, ps_rpc.c),
 * sparse and top-k calls (sparse_call.c, topk_*.c), key release
 * (release.c) and PBOX_DEBUG's summaries (debug.c). Each kind of call
 * fills its struct req_op (core/req.h) here; what the files of this room
 * share is declared below.
 */
#ifndef PBOX_CLIENT_OPS_OPS_H
#define PBOX_CLIENT_OPS_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "client/core/client.h"
#include "client/core/req.h"
#include "client/xfer/xfer.h"
#include "include/pbox.h"

/* ---- the kinds of call (struct req_op), each in its file --------------- */

extern const struct req_op op_allreduce;   /* allreduce.c: buf summed in place */
/* pbox_iallreduce on a flat client (no host level, no fleet) whose buf is
 * filled as the call runs: its segments go as req_feed says they are
 * filled (ops/host.c sums a lane's part into it), and its results may be
 * read as req_drained says they came; the progress thread calls
 * drain->fn(drain->arg) at each drain->step elements of them. */
struct req_drain {
	void (*fn)(void *arg);
	void *arg;
	uint64_t step;
};
int allreduce_fed(pbox_client *c, uint32_t key, void *buf, size_t count, pbox_dtype dtype,
		  const struct req_drain *drain, pbox_req **req);
extern const struct req_op op_coll;        /* coll.c: broadcast, allgather,
					      reduce_scatter (r->coll) */
extern const struct req_op op_ps_declare;  /* ps.c: key_declare of a PS key */
extern const struct req_op op_ps_init;     /* ps.c: PS init round */
extern const struct req_op op_push_pull;   /* ps.c: PS step */
extern const struct req_op op_ps_read;     /* ps_rpc.c: key_read pieces */
extern const struct req_op op_ps_write;    /* ps_rpc.c: key_write pieces */
extern const struct req_op op_sparse;      /* sparse_call.c: records in, dense sum out */
extern const struct req_op op_release;     /* release.c: key_release */

/* ---- sparse_call.c: the submission of sparse calls ------------------------- */

/* The checks every sparse call shares (req_check, 32-bit indices, room
 * for records). 0 or PBOX_EINVAL with c's message. */
int sparse_check(pbox_client *c, uint32_t key, const void *buf, size_t count,
		 pbox_dtype dtype);
/* pbox_topk_opts as this library knows them (in NULL: the defaults),
 * checked, and k for count entries: 0 or PBOX_EINVAL. (topk_call.c) */
int topk_opts_read(pbox_client *c, uint32_t key, const pbox_topk_opts *in, size_t count,
		   pbox_topk_opts *o, size_t *k);
/* Queue an op_sparse request for out (count of dtype) carrying the nnz
 * entries (checked: increasing, below count): copied with
 * SPARSE_SUBMIT_COPY, else borrowed until the request ends. With
 * SPARSE_SUBMIT_OUT_ZERO, out is all zero already (the progress thread
 * does not clear each segment before writing its result). gk, dev: a device
 * call's key state and stages (out is its slab; given back with
 * dev->drop if this fails), or NULL. 0 and *req, or an error with c's message. */
int sparse_submit(pbox_client *c, uint32_t key, size_t count, pbox_dtype dtype,
		  const uint32_t *idx, const void *val, size_t nnz, void *out, unsigned flags,
		  struct gpu_key *gk, const struct req_dev_ops *dev, pbox_req **req);
#define SPARSE_SUBMIT_COPY     1u
#define SPARSE_SUBMIT_OUT_ZERO 2u

/* ---- topk_local.c: hierarchical top-k's host group ---------------------- */

struct topk_local;
/* local_rank/local_size of pbox_topk_opts against c's rank and world: 0
 * or PBOX_EINVAL with c's message (local_size <= 1: flat, always 0). */
int topk_local_check(pbox_client *c, uint32_t key, uint32_t local_rank, uint32_t local_size);
/* Key's host group for this rank: the leader (local_rank 0) creates its
 * shared memory, the others wait for it (up to timeout_ms) and check it.
 * 0 and *out, or an error with c's message. */
int topk_local_open(pbox_client *c, uint32_t key, size_t count, uint32_t local_rank,
		    uint32_t local_size, struct topk_local **out);
/* This member's slot: count floats, where a call puts its gradient. */
float *topk_local_slot(struct topk_local *l);
/* Barrier, this member's slice of the sum, and (leader) the barrier of
 * the slices: 0 with *sum (the host's sum, count floats; NULL but for
 * the leader), PBOX_ETIMEDOUT or PBOX_EABORTED with c's message. */
int topk_local_reduce(pbox_client *c, struct topk_local *l, const float **sum);
/* Mark the group broken (a member failed after the sum): the others fail. */
void topk_local_break(struct topk_local *l);
void topk_local_free(struct topk_local *l);

/* ---- ps_rpc.c: PS reads and writes through the control connection ----- */

#define PS_RPC_PIECE 8192 /* floats per key_read / key_write (a JSON line
			     holds 64 KiB) */

/* ---- ps.c ----------------------------------------------------------------- */

/* key_declare's name of an optimizer kind ("sgd", "adam", "adamw"; "?"). */
const char *ps_optim_name(uint32_t kind);
/* State planes the box keeps for o (dataplane/optim.c optim_planes): SGD
 * 1 with momentum (the momentum buffer), else 0; Adam(W) 2. */
unsigned ps_optim_planes(const pbox_optim *o);

/* ---- debug.c: PBOX_DEBUG diagnostics ----------------------------------- */

/* pbox_connect ended with rc: the join's summary (PBOX_DEBUG). */
void client_debug_joined(const pbox_client *c, int rc);
/* pbox_close: the client's summary (PBOX_DEBUG). */
void client_debug_closing(const pbox_client *c);

#endif
