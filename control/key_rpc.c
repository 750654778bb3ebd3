/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * key_rpc.c - the key_declare method (docs/rpc.md): decode, declare the
 * key in the registry, answer with its geometry and chunk owners.
 */
#include <errno.h>
#include <stdio.h>

#include "control/jobs.h"
#include "control/rpc_methods.h"

static json_t *chunk_list(const struct job_key *k)
{
	json_t *a = json_array();

	for (uint32_t c = 0; a && c < k->geom.nchunks; c++)
		if (json_array_append_new(a, json_integer(k->chunk_ep[c])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

RPC_HANDLER(rpc_key_declare)
{
	static const char *const known[] = { "job_id", "rank", "key", "count", "dtype", NULL };
	struct jobs_declare_args a = { .session = ctx->session };
	const char *dtype = NULL;
	const struct job_key *k;
	int rc;

	if ((rc = rpc_params_known(params, known, err, errlen)) ||
	    (rc = rpc_param_u32(params, "job_id", 1, 0, UINT32_MAX, &a.job_id, err, errlen)) ||
	    (rc = rpc_param_u32(params, "rank", 1, 0, 65535, &a.rank, err, errlen)) ||
	    (rc = rpc_param_u32(params, "key", 1, 0, UINT32_MAX, &a.key, err, errlen)) ||
	    (rc = rpc_param_u64(params, "count", 1, 0, INT64_MAX, &a.count, err, errlen)) ||
	    (rc = rpc_param_str(params, "dtype", 1, 16, &dtype, err, errlen)))
		return rc;
	int d = wire_dtype_parse(dtype);
	if (d < 0) {
		snprintf(err, errlen, "key %u: unknown dtype '%s' (f32, f16 or bf16)", a.key, dtype);
		return -EINVAL;
	}
	a.dtype = (unsigned)d;
	rc = jobs_declare(ctx->box->jobs, &a, &k, err, errlen);
	if (rc < 0)
		return rc;
	json_t *chunks = chunk_list(k);
	if (!chunks) {
		snprintf(err, errlen, "key %u: out of memory for the reply", a.key);
		return -ENOMEM;
	}
	*result = json_pack("{s:I, s:I, s:s, s:I, s:I, s:I, s:o}",
			    "key", (json_int_t)k->key, "count", (json_int_t)k->geom.count,
			    "dtype", wire_dtype_name(k->geom.dtype),
			    "seg_elems", (json_int_t)k->geom.seg_elems,
			    "nsegs", (json_int_t)k->geom.nsegs,
			    "segs_per_chunk", (json_int_t)k->geom.segs_per_chunk,
			    "chunks", chunks);
	return 0;
}
