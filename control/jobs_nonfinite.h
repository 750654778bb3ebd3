/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * jobs_nonfinite.h - a job's policy for PS gradients that are not finite
 * (docs/protocol.md "Non-finite gradients"): its names, setting it on the
 * lcores, the counts the lcores keep (job_status, metrics), and the watch
 * that aborts a job an lcore stopped under the abort policy, naming the
 * rank and key. Builds on jobs_core.c; jobs.c, job_rpc.c and metrics.c
 * use it.
 */
#ifndef PBOX_JOBS_NONFINITE_H
#define PBOX_JOBS_NONFINITE_H

#include <stddef.h>
#include <stdint.h>

#include "control/jobs.h"

/* "abort", "skip", "pass" (enum engine_nonfinite); NULL if unknown. */
const char *jobs_nonfinite_name(unsigned policy);
/* The policy named name, or -EINVAL with the names in err. */
int jobs_nonfinite_parse(const char *name, char *err, size_t errlen);

/* Set a new job's policy (before any rank joins; the lcores take it
 * before any packet of the job): 0, or the post's error in err. */
int jobs_set_nonfinite(struct jobs *js, const struct job *j, unsigned policy, char *err,
		       size_t errlen);

/* A job's counts over every lcore: segment rounds whose gradient sum was
 * not finite, those skipped; and rank r's gradients that were not. */
struct job_nonfinite {
	uint64_t rounds, skipped;
};
void jobs_nonfinite_counts(const struct jobs *js, const struct job *j, struct job_nonfinite *n);
uint64_t jobs_rank_nonfinite(const struct jobs *js, const struct job *j, uint16_t r);

/* Run by jobs_tick: abort every live job an lcore stopped (policy abort)
 * with a reason naming the rank, key, segment and round. */
void jobs_nonfinite_watch(struct jobs *js);

#endif
