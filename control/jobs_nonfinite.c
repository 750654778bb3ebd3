/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * jobs_nonfinite.c - PS gradients that are not finite, on the control
 * plane's side (jobs_nonfinite.h): the lcores check and count
 * (dataplane/engine_ps.c); this sets a job's policy on them, sums what
 * they count, and turns an lcore's stop (policy abort) into the job's
 * abort with a reason naming the rank and the key, within a jobs_tick.
 */
#include "control/jobs_nonfinite.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "control/jobs_core.h"
#include "control/log.h"

static const char *const names[ENGINE_NF_COUNT] = {
	[ENGINE_NF_ABORT] = "abort", [ENGINE_NF_SKIP] = "skip", [ENGINE_NF_PASS] = "pass",
};

const char *jobs_nonfinite_name(unsigned policy)
{
	return policy < ENGINE_NF_COUNT ? names[policy] : NULL;
}

int jobs_nonfinite_parse(const char *name, char *err, size_t errlen)
{
	for (unsigned p = 0; name && p < ENGINE_NF_COUNT; p++)
		if (strcmp(name, names[p]) == 0)
			return (int)p;
	return errmsg(err, errlen, -EINVAL, "nonfinite '%.40s' is not a policy (abort, skip or "
		      "pass)", name ? name : "");
}

int jobs_set_nonfinite(struct jobs *js, const struct job *cj, unsigned policy, char *err,
		       size_t errlen)
{
	struct job *j = (struct job *)cj;  /* the registry's own */
	struct engine_msg m = { .type = ENGINE_MSG_JOB_NONFINITE, .job = j->id,
				.u.nonfinite = (uint8_t)policy };
	unsigned failed;

	if (policy >= ENGINE_NF_COUNT)
		return errmsg(err, errlen, -EINVAL, "job %s: nonfinite policy %u is unknown",
			      j->name, policy);
	int rc = jobs_post_all(js, &m, &failed);
	if (rc < 0)
		return errmsg(err, errlen, rc, "job %s: cannot reach lcore %u to set its "
			      "nonfinite policy: %s", j->name, failed, strerror(-rc));
	j->nonfinite = (uint8_t)policy;
	return 0;
}

void jobs_nonfinite_counts(const struct jobs *js, const struct job *j, struct job_nonfinite *n)
{
	const struct box_dp *dp = &js->box->dp;

	memset(n, 0, sizeof(*n));
	for (unsigned l = 0; dp->job_progress && l < js->box->layout.nlcores; l++) {
		struct engine_progress p;
		if (dp->job_progress(dp->ctx, l, j->id, &p) == 0) {
			n->rounds += p.nonfinite;
			n->skipped += p.skipped;
		}
	}
}

uint64_t jobs_rank_nonfinite(const struct jobs *js, const struct job *j, uint16_t r)
{
	const struct box_dp *dp = &js->box->dp;
	uint64_t n = 0;

	for (unsigned l = 0; dp->rank_lateness && l < js->box->layout.nlcores; l++) {
		struct engine_lateness late;
		if (dp->rank_lateness(dp->ctx, l, j->id, r, &late) == 0)
			n += late.nonfinite;
	}
	return n;
}

/* The first lcore's stop of j, if one stopped it: 1 and *p. */
static int stopped(const struct jobs *js, const struct job *j, struct engine_progress *p)
{
	const struct box_dp *dp = &js->box->dp;

	for (unsigned l = 0; l < js->box->layout.nlcores; l++)
		if (dp->job_progress(dp->ctx, l, j->id, p) == 0 && p->nf_abort)
			return 1;
	return 0;
}

void jobs_nonfinite_watch(struct jobs *js)
{
	if (!js->box->dp.job_progress)
		return;
	for (unsigned i = 0; i < ENGINE_MAX_JOBS; i++) {
		struct job *j = js->table[i];
		struct engine_progress p;
		char who[64], reason[sizeof(j->reason)];
		if (!j || j->removing || j->state == JOB_ABORTED || !stopped(js, j, &p))
			continue;
		if (p.nf_rank == ENGINE_NF_NO_RANK)
			snprintf(who, sizeof(who), "the sum of finite gradients overflowed");
		else
			snprintf(who, sizeof(who), "rank %u sent a NaN or Inf gradient",
				 (unsigned)p.nf_rank);
		snprintf(reason, sizeof(reason), "non-finite gradient: %s for key %" PRIu32
			 " (segment %" PRIu32 " round %" PRIu32 "); the job's nonfinite policy "
			 "is abort, the weights are as before that round", who, p.nf_key, p.nf_seg,
			 p.nf_round);
		ctl_log_peer(js->box, &j->log_peer, CTL_LOG_WARN, "job %s (id %" PRIu32 "): %s",
			     j->name, j->id, reason);
		jobs_abort_job(js, j, reason);
	}
}
