/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * job_rpc.c - the job methods of docs/rpc.md: job_create, job_join,
 * job_leave, job_list, job_status, job_abort, heartbeat. Each decodes and checks its
 * params, calls the registry (jobs.h) and builds the result.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/secret.h"
#include "common/wire.h"
#include "control/jobs.h"
#include "control/jobs_nonfinite.h"
#include "control/log.h"
#include "control/rpc_methods.h"

#define U16_MAX 65535u
#define REASON_MAX 160

static json_t *job_entry(const struct jobs *js, const struct job *j)
{
	struct job_traffic t;

	jobs_traffic(js, j, &t);
	json_t *e = json_pack("{s:s, s:I, s:i, s:i, s:s, s:I, s:I, s:I, s:I, s:i, s:I, s:I, s:I}",
			 "job", j->name, "job_id", (json_int_t)j->id,
			 "world", (int)j->world, "joined", (int)j->njoined,
			 "state", job_state_name(j->state), "keys", (json_int_t)j->nkeys,
			 "bytes_used", (json_int_t)j->mem.used, "max_bytes", (json_int_t)j->max_bytes,
			 "bytes_free_block", (json_int_t)arena_largest(&j->mem),
			 "weight", (int)j->weight, "rounds", (json_int_t)t.rounds,
			 "bytes_reduced", (json_int_t)t.bytes, "nacks", (json_int_t)t.nacks);
	char hash[17];

	if (e && j->placement_rank >= 0) {   /* job_join's, for a fleet's view */
		snprintf(hash, sizeof(hash), "%016" PRIx64, j->placement);
		json_object_set_new(e, "placement", json_string(hash));
	}
	return e;
}

/* The ranks j's open rounds wait for and for how long (jobs_watch). */
static void add_waiting(json_t *e, const struct job *j)
{
	json_t *who = json_array();

	for (unsigned r = 0; r < j->world; r++)
		if (rankset_has(&j->waiting_for, r))
			json_array_append_new(who, json_integer(r));
	json_object_set_new(e, "timeout_ms", json_integer(j->timeout_ms));
	json_object_set_new(e, "replace_wait_ms", json_integer(j->replace_wait_ms));
	json_object_set_new(e, "replaced", json_integer(j->resets));
	json_object_set_new(e, "waiting_for", who);
	json_object_set_new(e, "waiting_s", json_real(!rankset_empty(&j->waiting_for, j->world) &&
						       j->watch_since ?
						       clock_s() - j->watch_since : 0.0));
}

RPC_HANDLER(rpc_job_create)
{
	static const char *const known[] = { "job", "world", "max_bytes", "join_secret",
					     "weight", "restore", "timeout_ms", "replace_wait_ms", "nonfinite",
					     NULL };
	const char *name = NULL, *secret = NULL, *restore = NULL, *nonfinite = "abort";
	uint32_t world = 0, weight = 1, timeout_ms = 0, replace_wait_ms = 0;
	uint64_t max_bytes = 0;
	const struct job *j;
	int rc;

	if ((rc = rpc_params_known(params, known, err, errlen)) ||
	    (rc = rpc_param_str(params, "job", 1, 255, &name, err, errlen)) ||
	    (rc = rpc_param_u32(params, "world", 1, 0, U16_MAX, &world, err, errlen)) ||
	    (rc = rpc_param_u64(params, "max_bytes", 0, 0, INT64_MAX, &max_bytes, err, errlen)) ||
	    (rc = rpc_param_str(params, "join_secret", 0, JOB_SECRET_MAX, &secret, err, errlen)) ||
	    (rc = rpc_param_u32(params, "weight", 0, 1, ENGINE_WEIGHT_MAX, &weight, err, errlen)) ||
	    (rc = rpc_param_str(params, "restore", 0, JOB_RESTORE_MAX, &restore, err, errlen)) ||
	    (rc = rpc_param_u32(params, "timeout_ms", 0, 0, INT32_MAX, &timeout_ms, err, errlen)) ||
	    (rc = rpc_param_u32(params, "replace_wait_ms", 0, 0, 86400000, &replace_wait_ms, err,
				errlen)) ||
	    (rc = rpc_param_str(params, "nonfinite", 0, 16, &nonfinite, err, errlen)))
		return rc;
	int policy = jobs_nonfinite_parse(nonfinite, err, errlen);
	if (policy < 0)
		return policy;
	if (restore && (rc = jobs_restore_dir_check(restore, err, errlen)) < 0)
		return rc;
	/* an operator's job: it may take the reserve (--reserved-jobs) */
	jobs_admit_as_operator(ctx->box->jobs, 1);
	rc = jobs_create(ctx->box->jobs, name, world, max_bytes, 0, weight, &j, err, errlen);
	jobs_admit_as_operator(ctx->box->jobs, 0);
	if (rc < 0)
		return rc;
	/* cannot fail: the directory was checked, and no key is declared yet */
	if (restore)
		jobs_set_restore(ctx->box->jobs, j, restore, err, errlen);
	/* cannot fail: its length was checked, and nobody has joined a new job */
	if (secret)
		jobs_set_join_secret(ctx->box->jobs, j, secret, err, errlen);
	jobs_set_timeout(ctx->box->jobs, j, timeout_ms);
	rc = jobs_set_nonfinite(ctx->box->jobs, j, (unsigned)policy, err, errlen);
	if (rc < 0) { /* (a lcore's ring full for a second) */
		char e2[64];
		jobs_abort(ctx->box->jobs, name, "its nonfinite policy could not be set", e2,
			   sizeof(e2));
		return rc;
	}
	jobs_set_kept(ctx->box->jobs, j);
	jobs_set_replace_wait(ctx->box->jobs, j, replace_wait_ms);
	*result = json_pack("{s:I, s:I, s:s}", "job_id", (json_int_t)j->id,
			    "timeout_ms", (json_int_t)j->timeout_ms,
			    "nonfinite", jobs_nonfinite_name(j->nonfinite));
	return 0;
}

RPC_HANDLER(rpc_job_join)
{
	static const char *const known[] = { "job", "rank", "world", "data_ip", "data_port",
					     "mtu", "join_secret", "max_bytes", "key_bytes",
					     "timeout_ms", "heartbeat_ms", "replace_wait_ms", "nonfinite",
					     "placement", NULL };
	struct jobs_join_args a = { .mtu = 1500, .session = ctx->session };
	const char *nonfinite = "abort";
	uint32_t port = 0;
	const struct job *j;
	char token[17];
	int rc;

	if ((rc = rpc_params_known(params, known, err, errlen)) ||
	    (rc = rpc_param_str(params, "job", 1, 255, &a.name, err, errlen)) ||
	    (rc = rpc_param_u32(params, "rank", 1, 0, U16_MAX, &a.rank, err, errlen)) ||
	    (rc = rpc_param_u32(params, "world", 1, 0, U16_MAX, &a.world, err, errlen)) ||
	    (rc = rpc_param_ipv4(params, "data_ip", 1, &a.ip, err, errlen)) ||
	    (rc = rpc_param_u32(params, "data_port", 1, 0, U16_MAX, &port, err, errlen)) ||
	    (rc = rpc_param_u32(params, "mtu", 0, 0, U16_MAX, &a.mtu, err, errlen)) ||
	    (rc = rpc_param_str(params, "join_secret", 0, JOB_SECRET_MAX, &a.join_secret, err, errlen)) ||
	    (rc = rpc_param_u64(params, "max_bytes", 0, 0, INT64_MAX, &a.max_bytes, err, errlen)) ||
	    (rc = rpc_param_u64(params, "key_bytes", 0, 0, INT64_MAX / 2, &a.key_bytes, err,
				errlen)) ||
	    (rc = rpc_param_u32(params, "timeout_ms", 0, 0, INT32_MAX, &a.timeout_ms, err,
				errlen)) ||
	    (rc = rpc_param_u32(params, "heartbeat_ms", 0, 100, 60000, &a.heartbeat_ms, err,
				errlen)) ||
	    (rc = rpc_param_u32(params, "replace_wait_ms", 0, 0, 86400000, &a.replace_wait_ms,
				err, errlen)) ||
	    (rc = rpc_param_str(params, "nonfinite", 0, 16, &nonfinite, err, errlen)) ||
	    (rc = rpc_param_str(params, "placement", 0, 16, &a.placement, err, errlen)))
		return rc;
	if ((rc = jobs_nonfinite_parse(nonfinite, err, errlen)) < 0)
		return rc;
	a.nonfinite = (uint32_t)rc;
	a.port = (uint16_t)port;
	rc = jobs_join(ctx->box->jobs, &a, &j, err, errlen);
	if (rc < 0)
		return rc;
	snprintf(token, sizeof(token), "%016" PRIx64, j->token);
	*result = json_pack("{s:I, s:s, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
			    "job_id", (json_int_t)j->id,
			    "token", token, "world", (int)j->world,
			    "seg_bytes", (json_int_t)j->seg_bytes,
			    "chunk_bytes", (json_int_t)ctx->box->cfg.chunk_bytes,
			    "max_bytes", (json_int_t)j->max_bytes,
			    "key_bytes", (json_int_t)(j->mem.size - j->mem.reserved),
			    "slots", (json_int_t)jobs_slots(&ctx->box->cfg, j->world, j->seg_bytes),
			    "timeout_ms", (json_int_t)j->timeout_ms,
			    "heartbeat_timeout_ms", (json_int_t)ctx->box->cfg.heartbeat_timeout_ms);
	json_object_set_new(*result, "nonfinite", json_string(jobs_nonfinite_name(j->nonfinite)));
	return 0;
}

RPC_HANDLER(rpc_job_leave)
{
	static const char *const known[] = { "job_id", "rank", NULL };
	uint32_t id = 0, rank = 0;
	int rc;

	if ((rc = rpc_params_known(params, known, err, errlen)) ||
	    (rc = rpc_param_u32(params, "job_id", 1, 0, UINT32_MAX, &id, err, errlen)) ||
	    (rc = rpc_param_u32(params, "rank", 1, 0, U16_MAX, &rank, err, errlen)))
		return rc;
	rc = jobs_leave(ctx->box->jobs, id, rank, ctx->session, err, errlen);
	if (rc < 0)
		return rc;
	*result = json_object();
	return 0;
}

RPC_HANDLER(rpc_job_list)
{
	static const char *const known[] = { NULL };
	json_t *list = json_array();
	int rc = rpc_params_known(params, known, err, errlen);

	if (rc < 0) {
		json_decref(list);
		return rc;
	}
	for (const struct job *j = jobs_next(ctx->box->jobs, NULL); j;
	     j = jobs_next(ctx->box->jobs, j))
		json_array_append_new(list, job_entry(ctx->box->jobs, j));
	*result = json_pack("{s:o}", "jobs", list);
	return 0;
}

/* How long the box waited for rank r, over every lcore: mean and recent
 * maximum in microseconds, and the NACKs it sent the rank. */
static json_t *lateness_of(const struct box *b, const struct job *j, uint16_t r)
{
	struct engine_lateness t = { 0 }, l;

	for (unsigned c = 0; b->dp.rank_lateness && c < b->layout.nlcores; c++) {
		if (b->dp.rank_lateness(b->dp.ctx, c, j->id, r, &l) != 0)
			continue;
		t.n += l.n;
		t.sum_ns += l.sum_ns;
		t.nacks += l.nacks;
		if (l.max_ns > t.max_ns)
			t.max_ns = l.max_ns;
	}
	return json_pack("{s:I, s:f, s:f, s:I}", "contributions", (json_int_t)t.n,
			 "mean_us", t.n ? (double)t.sum_ns / (double)t.n / 1e3 : 0.0,
			 "max_us", (double)t.max_ns / 1e3, "nacks", (json_int_t)t.nacks);
}

static json_t *ranks_of(const struct box *b, const struct job *j)
{
	json_t *a = json_array();
	char ip[16];

	for (unsigned r = 0; r < j->world; r++) {
		const struct job_rank *k = &j->ranks[r];
		json_t *e = json_pack("{s:i, s:b, s:o, s:I}", "rank", (int)r, "joined", k->joined,
				      "lateness", lateness_of(b, j, (uint16_t)r), "nonfinite",
				      (json_int_t)jobs_rank_nonfinite(b->jobs, j, (uint16_t)r));
		if (k->lost_at) {   /* waiting for a replacement since lost_s */
			json_object_set_new(e, "lost_s", json_real(clock_s() - k->lost_at));
			json_object_set_new(e, "lost_why", json_string(k->lost_why));
		}
		if (k->ip) {
			json_object_set_new(e, "data_ip", json_string(rpc_ip_str(k->ip, ip, sizeof(ip))));
			json_object_set_new(e, "data_port", json_integer(k->port));
		} else {
			json_object_set_new(e, "data_ip", json_null());
			json_object_set_new(e, "data_port", json_null());
		}
		json_array_append_new(a, e);
	}
	return a;
}

static json_t *keys_of(const struct job *j)
{
	json_t *a = json_array();

	for (uint32_t i = 0; i < j->nkeys; i++) {
		const struct job_key *k = &j->keys[i];
		json_array_append_new(a, json_pack("{s:I, s:I, s:s, s:I, s:I, s:i, s:o, s:b, s:s, "
						   "s:s, s:i}",
			"key", (json_int_t)k->key, "count", (json_int_t)k->geom.count,
			"dtype", wire_dtype_name(k->dtype), "nsegs", (json_int_t)k->geom.nsegs,
			"nchunks", (json_int_t)k->geom.nchunks,
			"declared", (int)rankset_count(&k->declared, j->world), "optimizer",
			k->is_ps ? json_string(optim_name(k->ps.opt.kind)) : json_null(),
			"sparse", k->sparse, "collective", jobs_coll_name(k->coll),
			"state", job_key_state(k), "released", (int)k->nreleased));
	}
	return a;
}

RPC_HANDLER(rpc_job_status)
{
	static const char *const known[] = { "job", NULL };
	const char *name = NULL;
	int rc;

	if ((rc = rpc_params_known(params, known, err, errlen)) ||
	    (rc = rpc_param_str(params, "job", 1, 255, &name, err, errlen)))
		return rc;
	const struct job *j = jobs_find(ctx->box->jobs, name);
	if (!j) {
		snprintf(err, errlen, "no job named '%.80s'", name);
		return -ENOENT;
	}
	json_t *e = job_entry(ctx->box->jobs, j);
	add_waiting(e, j);
	json_object_set_new(e, "reason", j->reason[0] ? json_string(j->reason) : json_null());
	json_object_set_new(e, "seg_bytes", json_integer(j->seg_bytes));
	json_object_set_new(e, "ranks", ranks_of(ctx->box, j));
	json_object_set_new(e, "key_list", keys_of(j));
	struct job_nonfinite nf;
	jobs_nonfinite_counts(ctx->box->jobs, j, &nf);
	json_object_set_new(e, "nonfinite", json_pack("{s:s, s:I, s:I}", "policy",
		jobs_nonfinite_name(j->nonfinite), "rounds", (json_int_t)nf.rounds,
		"skipped", (json_int_t)nf.skipped));
	*result = e;
	return 0;
}

RPC_HANDLER(rpc_job_abort)
{
	static const char *const known[] = { "job", "reason", NULL };
	const char *name = NULL, *reason = "aborted by operator";
	int rc;

	if ((rc = rpc_params_known(params, known, err, errlen)) ||
	    (rc = rpc_param_str(params, "job", 1, 255, &name, err, errlen)) ||
	    (rc = rpc_param_str(params, "reason", 0, REASON_MAX, &reason, err, errlen)))
		return rc;
	rc = jobs_abort(ctx->box->jobs, name, reason, err, errlen);
	if (rc < 0)
		return rc;
	*result = json_object();
	return 0;
}

/* A worker's sign of life (a notification: no answer). The line itself is
 * the heartbeat: rpc_server.c notes when each connection last sent one. */
RPC_HANDLER(rpc_heartbeat)
{
	static const char *const known[] = { NULL };
	int rc = rpc_params_known(params, known, err, errlen);

	(void)ctx;
	if (rc < 0)
		return rc;
	*result = json_object();
	return 0;
}
