/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fleet.h - a job over a fleet of boxes (fleet.c, docs/architecture.md "A
 * fleet of boxes"): pbox_connect given "a:7470,b:7470,..." makes a client
 * with no box of its own whose calls go to a client per box (c->subs),
 * each joined to the same job there. Dense keys (allreduce, PS, device
 * allreduce) and top-k keys are cut into partitions placed by
 * core/placement.c, each a key of its own on its box; the other kinds
 * (collectives and sparse calls) go whole to one box. Every public call of ops/ and gpu/ on a
 * fleet's client comes here first (the `if (c->fleet)` at its top).
 */
#ifndef PBOX_CLIENT_OPS_FLEET_H
#define PBOX_CLIENT_OPS_FLEET_H

#include "client/ops/ops.h"

/* Whether control lists more than one box. */
bool fleet_listed(const char *control);
/* pbox_connect of a fleet: a client per box, each checked and joined with
 * the fleet's placement hash. 0, or the first failure naming its box. */
int fleet_connect(pbox_client *c, const pbox_opts *opts);
/* connect.c: a client of one box, as pbox_connect makes it, whose join
 * carries placement (16 hex digits, or NULL). *out is set as by
 * pbox_connect. */
int client_connect_box(const char *control, const char *job, int rank, int world,
		       const pbox_opts *opts, const char *placement, pbox_client **out);
/* pbox_close of a fleet: every box's client, then the fleet. */
void fleet_close(pbox_client *c);

int fleet_iallreduce(pbox_client *c, uint32_t key, void *buf, size_t count,
		     pbox_dtype dtype, pbox_req **req);
/* broadcast, allgather, reduce_scatter (coll: enum key_coll) and the sparse
 * calls go whole to the box of the key: *sub and its key there. 0 or
 * PBOX_EINVAL (the key is of another kind over this fleet). */
int fleet_route(pbox_client *c, uint32_t key, unsigned kind, pbox_client **sub,
		uint32_t *subkey);
/* A routed call's end on c: its failure (rc < 0) as c's error naming the
 * box, or its request wrapped so that pbox_wait names the box too. */
int fleet_wrap(pbox_client *c, pbox_client *sub, int rc, pbox_req **req);
/* The call of a whole key on its box: `call` evaluated with sub and skey
 * (the box's client and the key there) in place of c and key. */
#define FLEET_ROUTE(c, key, kind, req, call)                                   \
	do {                                                                    \
		pbox_client *sub;                                               \
		uint32_t skey;                                                  \
		int frc_ = fleet_route((c), (key), (kind), &sub, &skey);        \
		return frc_ < 0 ? frc_ : fleet_wrap((c), sub, (call), (req));   \
	} while (0)
int fleet_release(pbox_client *c, const uint32_t *keys, size_t n);
/* PS keys: cut as dense keys, each partition a PS key on its box */
int fleet_declare_optimizer(pbox_client *c, uint32_t key, size_t count, pbox_dtype grad,
			    const pbox_optim *o);
int fleet_ps_init(pbox_client *c, uint32_t key, const float *weights, void *weights_out);
int fleet_ipush_pull(pbox_client *c, uint32_t key, const void *grad, void *weights_out,
		     size_t count, pbox_dtype dtype, pbox_req **req);
int fleet_set_lr(pbox_client *c, uint32_t key, double lr);
/* read (in NULL: out filled, *steps the first partition's) or write */
int fleet_ps_rw(pbox_client *c, uint32_t key, pbox_ps_part part, float *out,
		const float *in, size_t count, uint64_t *steps);
int fleet_ps_set_steps(pbox_client *c, uint32_t key, uint64_t steps);
/* One partition of a dense key: elements [first, first + count) of the
 * fleet's key are key subkey on the box of subs[sub]. */
struct fpart {
	uint32_t sub;                /* its box: c->subs index */
	uint32_t subkey;             /* its key there */
	uint64_t first, count;
};
/* A dense call over the partitions of key (count elements of dtype): start
 * makes partition pt's call on sub (0 or its error), gathered in *req. For
 * the rooms above (gpu/: pbox_iallreduce_dev). */
typedef int (*fleet_part_fn)(pbox_client *sub, const struct fpart *pt, void *arg,
			     pbox_req **req);
int fleet_dense_call(pbox_client *c, uint32_t key, size_t count, pbox_dtype dtype,
		     fleet_part_fn start, void *arg, pbox_req **req);
/* The same for a top-k key (host or device): each partition selects its
 * own density share of its entries and sends them to its box. */
int fleet_topk_call(pbox_client *c, uint32_t key, size_t count, pbox_dtype dtype,
		    fleet_part_fn start, void *arg, pbox_req **req);
/* pbox_topk_reset over a top-k key's partitions: 0, or PBOX_EINVAL (not a
 * top-k key of this fleet) or a box's failure naming it. */
int fleet_topk_reset(pbox_client *c, uint32_t key);

/* Kinds of a fleet's key: how it is placed (fleet_route's kind for the
 * whole ones). */
enum fleet_kind {
	FLEET_DENSE = 1,   /* partitioned: allreduce, device allreduce */
	FLEET_PS,          /* partitioned: a PS key per partition */
	FLEET_COLL,        /* whole: broadcast, allgather, reduce_scatter */
	FLEET_SPARSE,      /* whole: sparse calls (the caller's indices) */
	FLEET_TOPK,        /* partitioned: top-k, host and device */
};

#endif
