/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sparse_call.c - libpbox's sparse allreduce of index/value pairs
 * (docs/protocol.md "Sparse keys"), and the submission every sparse call
 * shares (topk_call.c's too): in the caller's thread, check the entries,
 * find where each segment's entries start and queue an op_sparse request;
 * the progress thread then encodes each segment's record as it sends it
 * (sparse_xfer.c) and writes the dense sum into the caller's buffer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/ops/fleet.h"
#include "client/ops/host.h"
#include "common/sparse.h"


/* Where each segment's entries start in idx (nsegs + 1 of them). 0 or
 * PBOX_ENOMEM. */
static int index_segments(pbox_client *c, struct pbox_req *r, size_t nnz)
{
	uint32_t se = sparse_seg_elems(c->seg_bytes, wire_dtype_size(r->dtype));
	uint64_t nsegs = (r->count + se - 1) / se;
	size_t j = 0;

	r->sp_first = malloc((size_t)(nsegs + 1) * sizeof(*r->sp_first));
	if (!r->sp_first)
		return PBOX_ENOMEM;
	for (uint64_t s = 0; s < nsegs; s++) {
		r->sp_first[s] = j;
		while (j < nnz && r->sp_idx[j] < (s + 1) * se)
			j++;
	}
	r->sp_first[nsegs] = nnz;
	return 0;
}

/* Records in (indices and values), the dense sum out: a sparse key's
 * calls (pbox_allreduce_sparse, pbox_allreduce_topk and their device
 * forms), one round per call. */
const struct req_op op_sparse = {
	.declares = true,
	.sparse = true,
};

int sparse_submit(pbox_client *c, uint32_t key, size_t count, pbox_dtype dtype,
		  const uint32_t *idx, const void *val, size_t nnz, void *out, unsigned flags,
		  struct gpu_key *gk, const struct req_dev_ops *dev, pbox_req **req)
{
	bool copy = flags & SPARSE_SUBMIT_COPY;
	struct pbox_req *r = req_new(c, key, &op_sparse);
	size_t esz = wire_dtype_size((unsigned)dtype);
	int rc = PBOX_ENOMEM;

	if (!r) {
		if (gk)
			dev->drop(c, gk);
		return PBOX_ENOMEM;
	}
	r->gk = gk;   /* (req_free gives it back: dev->drop) */
	r->dev = dev;
	r->buf = out;
	r->src = out;
	r->count = count;
	r->dtype = r->rdtype = (uint8_t)dtype;
	r->sp_idx = idx;
	r->sp_val = val;
	r->sp_out_zero = flags & SPARSE_SUBMIT_OUT_ZERO;
	if (copy && nnz) {
		uint8_t *own = malloc(nnz * (sizeof(*idx) + esz));
		if ((r->sp_own = own)) {
			memcpy(own, idx, nnz * sizeof(*idx));
			memcpy(own + nnz * sizeof(*idx), val, nnz * esz);
			r->sp_idx = (const uint32_t *)own;
			r->sp_val = own + nnz * sizeof(*idx);
		}
	}
	if ((copy && nnz && !r->sp_own) || (rc = index_segments(c, r, nnz)) < 0) {
		req_free(r);
		return client_error(c, PBOX_ENOMEM, "job '%s' rank %d key %u: out of memory for "
				    "the sparse entries", c->job, c->rank, key);
	}
	if ((rc = req_submit(c, r)) < 0)
		return rc;
	stat_add(&c->stats.sparse_entries, nnz);
	*req = r;
	return 0;
}

/* The checks every sparse call shares. */
int sparse_check(pbox_client *c, uint32_t key, const void *buf, size_t count,
			pbox_dtype dtype)
{
	int rc = req_check(c, key, buf, count, dtype, (unsigned)dtype);

	if (rc < 0)
		return rc;
	if (count > UINT32_MAX)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: a sparse key holds "
				    "at most %u elements (32-bit indices), not %zu", c->job,
				    c->rank, key, UINT32_MAX, count);
	if (sparse_seg_elems(c->seg_bytes, wire_dtype_size((unsigned)dtype)) == 0)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: %u-byte segments "
				    "leave no room for sparse records (MTU too small)", c->job,
				    c->rank, key, c->seg_bytes);
	return 0;
}

int pbox_iallreduce_sparse(pbox_client *c, uint32_t key, size_t count, pbox_dtype dtype,
			   const uint32_t *idx, const void *val, size_t nnz, void *out,
			   pbox_req **req)
{
	if (!c)
		return PBOX_EINVAL;
	if (c->fleet && !c->host)
		FLEET_ROUTE(c, key, FLEET_SPARSE, req,
			    pbox_iallreduce_sparse(sub, skey, count, dtype, idx, val, nnz, out, req));
	if (!req)
		return client_error(c, PBOX_EINVAL, "pbox_iallreduce_sparse key %u: req is NULL",
				    key);
	*req = NULL;
	int rc = c->host ? host_check_buf(c, key, out, count, dtype, true)
			 : sparse_check(c, key, out, count, dtype);
	if (rc < 0)
		return rc;
	if (nnz && (!idx || !val))
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: %zu entries but "
				    "idx or val is NULL", c->job, c->rank, key, nnz);
	if (nnz > count)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: %zu entries, more "
				    "than the key's %zu elements", c->job, c->rank, key, nnz, count);
	for (size_t j = 0; j < nnz; j++) {
		if (idx[j] >= count)
			return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: index %u "
					    "(entry %zu) is outside the key's %zu elements", c->job,
					    c->rank, key, idx[j], j, count);
		if (j && idx[j] <= idx[j - 1])
			return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: indices must "
					    "increase strictly: entry %zu is %u after %u", c->job,
					    c->rank, key, j, idx[j], idx[j - 1]);
	}
	if (c->host)   /* host-local aggregation (host.c) */
		return host_iallreduce_sparse(c, key, count, dtype, idx, val, nnz, out, req);
	return sparse_submit(c, key, count, dtype, idx, val, nnz, out, SPARSE_SUBMIT_COPY, NULL,
			     NULL, req);
}

int pbox_allreduce_sparse(pbox_client *c, uint32_t key, size_t count, pbox_dtype dtype,
			  const uint32_t *idx, const void *val, size_t nnz, void *out)
{
	pbox_req *r;
	int rc = pbox_iallreduce_sparse(c, key, count, dtype, idx, val, nnz, out, &r);

	return rc < 0 ? rc : pbox_wait(r);
}

