/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * allreduce.c - pbox_iallreduce and pbox_allreduce: a dense call that sums
 * buf in place over the job's ranks. Its kind (op_allreduce) declares its
 * key on first use and streams one round per call (xfer/). And
 * pbox_allreduce_host, the sum over the ranks of one host (host.c).
 */
#include "client/ops/fleet.h"
#include "client/ops/host.h"

const struct req_op op_allreduce = {
	.declares = true,
};

/* The flat call (no host level, no fleet); fed (not NULL): buf is filled
 * as it runs, and its results are read as they come. */
static int submit(pbox_client *c, uint32_t key, void *buf, size_t count, pbox_dtype dtype,
		  const struct req_drain *fed, pbox_req **req)
{
	if (!req)
		return client_error(c, PBOX_EINVAL, "pbox_iallreduce key %u: req is NULL", key);
	*req = NULL;
	int rc = req_check(c, key, buf, count, dtype, (unsigned)dtype);
	if (rc < 0)
		return rc;
	struct pbox_req *r = req_new(c, key, &op_allreduce);
	if (!r)
		return PBOX_ENOMEM;
	r->src = buf;
	r->buf = buf;
	r->count = count;
	r->dtype = r->rdtype = (uint8_t)dtype;
	if (fed) {
		r->fed = true;
		r->on_drain = fed->fn;
		r->drain_arg = fed->arg;
		r->drain_step = fed->step;
	}
	rc = req_submit(c, r);
	if (rc < 0)
		return rc;
	*req = r;
	return 0;
}

int pbox_iallreduce(pbox_client *c, uint32_t key, void *buf, size_t count,
		    pbox_dtype dtype, pbox_req **req)
{
	if (!c)
		return PBOX_EINVAL;
	if (c->host)   /* host-local aggregation (host.c) */
		return host_iallreduce(c, key, buf, count, dtype, req);
	if (c->fleet)
		return fleet_iallreduce(c, key, buf, count, dtype, req);
	return submit(c, key, buf, count, dtype, NULL, req);
}

int allreduce_fed(pbox_client *c, uint32_t key, void *buf, size_t count, pbox_dtype dtype,
		  const struct req_drain *drain, pbox_req **req)
{
	if (c->host || c->fleet) {
		*req = NULL;
		return client_error(c, PBOX_EINVAL, "key %u: a fed call is on a flat client only",
				    key);
	}
	return submit(c, key, buf, count, dtype, drain, req);
}

int pbox_allreduce(pbox_client *c, uint32_t key, void *buf, size_t count,
		   pbox_dtype dtype)
{
	pbox_req *r;
	int rc = pbox_iallreduce(c, key, buf, count, dtype, &r);

	return rc < 0 ? rc : pbox_wait(r);
}

int pbox_allreduce_host(pbox_client *c, uint32_t key, void *buf, size_t count,
			pbox_dtype dtype)
{
	if (!c)
		return PBOX_EINVAL;
	int rc = host_check_buf(c, key, buf, count, dtype, false);
	return rc < 0 || !c->host ? rc : host_allreduce_host(c, key, buf, count, dtype);
}

int pbox_host_layout(const pbox_client *c, uint32_t *local_rank, uint32_t *local_world)
{
	if (!c || !local_rank || !local_world)
		return PBOX_EINVAL;
	host_layout_get(c, local_rank, local_world);
	return 0;
}
