/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckpt_rpc.c - a PS key's weights and state through the control protocol
 * (docs/rpc.md): job_save writes a checkpoint of every PS key of a job into
 * a directory on the box (control/ps_ckpt.h), for a job created later with
 * `restore` (an operator method: the box writes files where it is told):
 * the snapshot a piece per poll, the files on the checkpoint thread, which
 * answers (control/ckpt_worker.h);
 * key_read and key_write let a job's own ranks read the weights and state
 * and rank 0 overwrite them between steps, in base64 pieces of at most
 * PS_RPC_MAX_ELEMS floats (a JSON line holds 64 KiB).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/b64.h"
#include "common/errmsg.h"
#include "control/jobs.h"
#include "control/ckpt_worker.h"
#include "control/ps_ckpt.h"
#include "control/rpc_methods.h"

#define PS_RPC_MAX_ELEMS 8192 /* 32 KiB of floats, 43.7 KB of base64 */

RPC_HANDLER(rpc_job_save)
{
	static const char *const known[] = { "job", "dir", NULL };
	const char *name = NULL, *dir = NULL;
	char why[RPC_ERR_MAX];
	int rc;

	(void)result;
	if ((rc = rpc_params_known(params, known, err, errlen)) ||
	    (rc = rpc_param_str(params, "job", 1, 255, &name, err, errlen)) ||
	    (rc = rpc_param_str(params, "dir", 1, JOB_RESTORE_MAX, &dir, err, errlen)))
		return rc;
	const struct job *j = jobs_find(ctx->box->jobs, name);
	if (!j)
		return errmsg(err, errlen, -ENOENT, "no job named '%s'", name);
	int dfd = ckpt_dir_open(dir, why, sizeof(why));
	if (dfd < 0)
		return errmsg(err, errlen, dfd, "job %s: %s", j->name, why);
	close(dfd);
	if (!ctx->box->ckpt)
		return errmsg(err, errlen, -ENOTSUP, "job %s: no checkpoint thread", j->name);
	/* the snapshot a piece per poll, at one cut; the files on the
	 * checkpoint thread, which answers (RPC_DEFERRED) */
	rc = ckpt_worker_save(ctx->box->ckpt, j, dir, ctx->session, ctx->id,
			      ctx->box->cfg.checkpoint_timeout_ms, true, err, errlen);
	return rc < 0 ? rc : RPC_DEFERRED;
}

/* ---- key_read / key_write: a rank's access to its PS key between steps ---- */

/* The job, key and array of a key_read/key_write on the rank's own
 * connection (as key_declare checks). */
static int ps_target(struct rpc_ctx *ctx, json_t *params, int write, const struct job **jo,
		     const struct job_key **ko, unsigned *array, char *err, size_t errlen)
{
	static const char *const parts[] = { "weights", "state0", "state1", NULL };
	uint32_t job_id = 0, rank = 0, key = 0;
	const char *part = "weights";
	int rc;

	if ((rc = rpc_param_u32(params, "job_id", 1, 0, UINT32_MAX, &job_id, err, errlen)) ||
	    (rc = rpc_param_u32(params, "rank", 1, 0, 65535, &rank, err, errlen)) ||
	    (rc = rpc_param_u32(params, "key", 1, 0, UINT32_MAX, &key, err, errlen)) ||
	    (rc = rpc_param_str(params, "part", 0, 16, &part, err, errlen)))
		return rc;
	const struct job *j = jobs_find_id(ctx->box->jobs, job_id);
	if (!j)
		return errmsg(err, errlen, -ENOENT, "no job with id %" PRIu32, job_id);
	if (rank >= j->world || !j->ranks[rank].joined || j->ranks[rank].session != ctx->session)
		return errmsg(err, errlen, -EACCES, "job %s key %" PRIu32 ": rank %" PRIu32
			      " has not joined on this connection", j->name, key, rank);
	if (write && rank != 0)
		return errmsg(err, errlen, -EACCES, "job %s key %" PRIu32 ": only rank 0 writes "
			      "a PS key's state", j->name, key);
	const struct job_key *k = job_key_find(j, key);
	if (!k)
		return errmsg(err, errlen, -ENOENT, "job %s has no key %" PRIu32, j->name, key);
	for (*array = 0; parts[*array] && strcmp(parts[*array], part); (*array)++)
		;
	if (!parts[*array])
		return errmsg(err, errlen, RPC_INVALID_PARAMS, "params.part: '%s' is not weights, "
			      "state0 or state1", part);
	*jo = j;
	*ko = k;
	return 0;
}

RPC_HANDLER(rpc_key_read)
{
	static const char *const known[] = { "job_id", "rank", "key", "part", "offset",
					     "count", NULL };
	const struct job *j;
	const struct job_key *k;
	uint64_t offset = 0, steps = 0;
	uint32_t count = 0;
	unsigned a;
	int rc;

	if ((rc = rpc_params_known(params, known, err, errlen)) ||
	    (rc = ps_target(ctx, params, 0, &j, &k, &a, err, errlen)) ||
	    (rc = rpc_param_u64(params, "offset", 1, 0, INT64_MAX, &offset, err, errlen)) ||
	    (rc = rpc_param_u32(params, "count", 1, 1, PS_RPC_MAX_ELEMS, &count, err, errlen)))
		return rc;
	float *buf = malloc((size_t)count * sizeof(float));
	char *text = malloc(b64_len((size_t)count * sizeof(float)) + 1);
	if (!buf || !text)
		rc = errmsg(err, errlen, -ENOMEM, "job %s key %" PRIu32 ": out of memory",
			    j->name, k->key);
	else
		rc = ps_ckpt_read(j, k, a, offset, count, buf, &steps, err, errlen);
	if (rc == 0) {
		b64_encode(text, buf, (size_t)count * sizeof(float));
		*result = json_pack("{s:I, s:s}", "steps", (json_int_t)steps, "data", text);
	}
	free(buf);
	free(text);
	return rc;
}

RPC_HANDLER(rpc_key_write)
{
	static const char *const known[] = { "job_id", "rank", "key", "part", "offset",
					     "data", "steps", NULL };
	const struct job *j;
	const struct job_key *k;
	const char *data = NULL;
	uint64_t offset = 0, steps = 0;
	unsigned a;
	int rc;

	if ((rc = rpc_params_known(params, known, err, errlen)) ||
	    (rc = ps_target(ctx, params, 1, &j, &k, &a, err, errlen)) ||
	    (rc = rpc_param_u64(params, "offset", 0, 0, INT64_MAX, &offset, err, errlen)) ||
	    (rc = rpc_param_str(params, "data", 0, b64_len(PS_RPC_MAX_ELEMS * sizeof(float)),
				&data, err, errlen)) ||
	    (rc = rpc_param_u64(params, "steps", 0, 0, INT64_MAX, &steps, err, errlen)))
		return rc;
	if (ckpt_worker_copying(ctx->box->ckpt, j->id)) /* between two pieces of a save */
		return errmsg(err, errlen, -EBUSY, "job %s key %" PRIu32 ": a checkpoint of the "
			      "job is being copied; write again in a moment", j->name, k->key);
	if (data) { /* decoded whole before anything is written */
		size_t len = strlen(data);
		float *buf = malloc(len / 4 * 3 + 4);
		long n = buf ? b64_decode(buf, len / 4 * 3 + 4, data, len) : -1;
		if (n <= 0 || n % 4 || n / 4 > PS_RPC_MAX_ELEMS)
			rc = errmsg(err, errlen, RPC_INVALID_PARAMS, "params.data must be base64 "
				    "of 1..%d little-endian float32", PS_RPC_MAX_ELEMS);
		else if ((rc = a == 0 ? jobs_ps_stage(ctx->box->jobs, j, k, err, errlen) : 0) == 0)
			rc = ps_ckpt_write(j, k, a, offset, (uint32_t)(n / 4), buf, err, errlen);
		free(buf);
		if (rc)
			return rc;
	}
	if (json_object_get(params, "steps") &&
	    (rc = ps_ckpt_set_step(j, k, steps, err, errlen)))
		return rc;
	*result = json_object();
	return 0;
}
