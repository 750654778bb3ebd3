/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * coll.c - the collectives besides allreduce (include/pbox.h): broadcast,
 * allgather, reduce_scatter and barrier. Each checks its call and queues
 * one op_coll request; the progress thread streams it as an allreduce,
 * the key's collective deciding which segments carry data each way
 * (docs/protocol.md "Collective keys", client/core/keys.h key_sends_data
 * and key_gets_data).
 */
#include <stdint.h>
#include <stdlib.h>

#include "client/ops/fleet.h"

/* broadcast, allgather, reduce_scatter: a key per collective (r->coll,
 * and broadcast's root, in its declaration), one round per call. */
const struct req_op op_coll = {
	.declares = true,
};

/* What one collective call moves: the key holds `count` elements; the
 * library reads src (whose element 0 is key element src_first) and
 * writes buf (key element buf_first at buf[0]). */
struct coll_call {
	unsigned coll;
	uint16_t root;
	const void *src;
	void *buf;
	size_t count;
	uint64_t src_first, buf_first;
};

static int coll_submit(pbox_client *c, uint32_t key, pbox_dtype dtype,
		       const struct coll_call *cc, pbox_req **req)
{
	*req = NULL;
	int rc = req_check(c, key, cc->buf, cc->count, dtype, (unsigned)dtype);
	if (rc < 0)
		return rc;
	if (!cc->src)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: in is NULL",
				    c->job, c->rank, key);
	struct pbox_req *r = req_new(c, key, &op_coll);
	if (!r)
		return PBOX_ENOMEM;
	r->coll = (uint8_t)cc->coll;
	r->root = cc->root;
	r->src = cc->src;
	r->buf = cc->buf;
	r->count = cc->count;
	r->src_first = cc->src_first;
	r->buf_first = cc->buf_first;
	r->dtype = r->rdtype = (uint8_t)dtype;
	rc = req_submit(c, r);
	if (rc < 0)
		return rc;
	*req = r;
	return 0;
}

/* A collective's checks that read c's world come after this one: an
 * unconnected client has none (0 if pbox_connect failed early). 0, or
 * req_check's error (its argument checks, then "not connected"). */
static int coll_connected(pbox_client *c, uint32_t key, const void *buf, size_t count,
			  pbox_dtype dtype)
{
	return c->thread_started ? 0 : req_check(c, key, buf, count, dtype, (unsigned)dtype);
}

/* count elements per rank times the world, or 0 with an error set. */
static size_t world_count(pbox_client *c, uint32_t key, size_t count, const char *what)
{
	if (count > SIZE_MAX / (size_t)c->world) {
		client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: %s of %zu elements "
			     "times world %d overflows", c->job, c->rank, key, what, count,
			     c->world);
		return 0;
	}
	return count * (size_t)c->world;
}

/* The blocking form: the started request's result, or the start's error. */
static int wait_started(int rc, pbox_req *const *r)
{
	return rc < 0 ? rc : pbox_wait(*r);
}

int pbox_ibroadcast(pbox_client *c, uint32_t key, void *buf, size_t count,
		    pbox_dtype dtype, int root, pbox_req **req)
{
	if (!c)
		return PBOX_EINVAL;
	if (c->fleet)
		FLEET_ROUTE(c, key, FLEET_COLL, req,
			    pbox_ibroadcast(sub, skey, buf, count, dtype, root, req));
	if (!req)
		return client_error(c, PBOX_EINVAL, "pbox_ibroadcast key %u: req is NULL", key);
	*req = NULL;
	int rc = coll_connected(c, key, buf, count, dtype);
	if (rc < 0)
		return rc;
	if (root < 0 || root >= c->world)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: broadcast root %d "
				    "is not a rank of the job (world %d)", c->job, c->rank, key,
				    root, c->world);
	struct coll_call cc = { .coll = COLL_BROADCAST, .root = (uint16_t)root, .src = buf,
				.buf = buf, .count = count };
	return coll_submit(c, key, dtype, &cc, req);
}

int pbox_broadcast(pbox_client *c, uint32_t key, void *buf, size_t count,
		   pbox_dtype dtype, int root)
{
	pbox_req *r = NULL;
	int rc = pbox_ibroadcast(c, key, buf, count, dtype, root, &r);
	return wait_started(rc, &r);
}

int pbox_iallgather(pbox_client *c, uint32_t key, const void *in, void *out,
		    size_t count, pbox_dtype dtype, pbox_req **req)
{
	if (!c)
		return PBOX_EINVAL;
	if (c->fleet)
		FLEET_ROUTE(c, key, FLEET_COLL, req,
			    pbox_iallgather(sub, skey, in, out, count, dtype, req));
	if (!req)
		return client_error(c, PBOX_EINVAL, "pbox_iallgather key %u: req is NULL", key);
	*req = NULL;
	int rc = coll_connected(c, key, out, count, dtype);
	if (rc < 0)
		return rc;
	size_t total = count ? world_count(c, key, count, "allgather") : 0;
	if (count && !total)
		return PBOX_EINVAL;
	struct coll_call cc = { .coll = COLL_ALLGATHER, .src = in, .buf = out, .count = total,
				.src_first = (uint64_t)c->rank * count };
	return coll_submit(c, key, dtype, &cc, req);
}

int pbox_allgather(pbox_client *c, uint32_t key, const void *in, void *out,
		   size_t count, pbox_dtype dtype)
{
	pbox_req *r = NULL;
	int rc = pbox_iallgather(c, key, in, out, count, dtype, &r);
	return wait_started(rc, &r);
}

int pbox_ireduce_scatter(pbox_client *c, uint32_t key, const void *in, void *out,
			 size_t count, pbox_dtype dtype, pbox_req **req)
{
	if (!c)
		return PBOX_EINVAL;
	if (c->fleet)
		FLEET_ROUTE(c, key, FLEET_COLL, req,
			    pbox_ireduce_scatter(sub, skey, in, out, count, dtype, req));
	if (!req)
		return client_error(c, PBOX_EINVAL, "pbox_ireduce_scatter key %u: req is NULL",
				    key);
	*req = NULL;
	int rc = coll_connected(c, key, out, count, dtype);
	if (rc < 0)
		return rc;
	size_t total = count ? world_count(c, key, count, "reduce_scatter") : 0;
	if (count && !total)
		return PBOX_EINVAL;
	struct coll_call cc = { .coll = COLL_REDUCE_SCATTER, .src = in, .buf = out,
				.count = total, .buf_first = (uint64_t)c->rank * count };
	return coll_submit(c, key, dtype, &cc, req);
}

int pbox_reduce_scatter(pbox_client *c, uint32_t key, const void *in, void *out,
			size_t count, pbox_dtype dtype)
{
	pbox_req *r = NULL;
	int rc = pbox_ireduce_scatter(c, key, in, out, count, dtype, &r);
	return wait_started(rc, &r);
}

int pbox_barrier(pbox_client *c, uint32_t key)
{
	float one = 1.0f;
	return pbox_allreduce(c, key, &one, 1, PBOX_F32);
}
