/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * jobs_internal.h - what jobs.c (life cycle) and jobs_keys.c (keys) share:
 * the registry layout, posting to lcores and the message helper. Not for
 * use outside jobs*.c.
 */
#ifndef PBOX_JOBS_INTERNAL_H
#define PBOX_JOBS_INTERNAL_H

#include "common/errmsg.h"
#include "control/jobs.h"

struct jobs {
	struct box *box;
	struct job *table[ENGINE_MAX_JOBS];  /* by engine_job_index(id) */
	uint32_t gen[ENGINE_MAX_JOBS];       /* last generation used per entry */
	unsigned next;                       /* where to look for a free entry */
	unsigned nlive, nremoving;
	uint64_t posted[BOX_MAX_LCORES];     /* messages posted per lcore */
	uint64_t load[BOX_MAX_EPS];          /* bytes of chunks per endpoint */
	jobs_notify_fn notify;
	void *notify_ctx;
	double watch_at;                     /* jobs_watch's last run (CLOCK_MONOTONIC s) */
};

/* Post m to lcore, retrying a full ring for up to about a second.
 * 0, -EAGAIN (still full) or the post's error. */
int jobs_post(struct jobs *js, unsigned lcore, const struct engine_msg *m);

/* Abort j (helper of jobs_abort, also used when a key cannot be installed). */
void jobs_abort_job(struct jobs *js, struct job *j, const char *reason);

/* Stall watch (jobs_watch.c): abort jobs whose open rounds have made no
 * progress for cfg.stall_timeout_ms, naming the missing ranks. */
void jobs_watch(struct jobs *js);

/* Free a job's key bookkeeping and give its chunks' loads back. */
void jobs_keys_release(struct jobs *js, struct job *j);

/* Finish the removals of j's released keys whose lcores applied their
 * KEY_REMOVE (memory back to the job), retry posts that found a full ring. */
void jobs_keys_tick(struct jobs *js, struct job *j);

/* Allocate key bookkeeping for a new job (index sized for max_keys). */
int jobs_keys_init(struct jobs *js, struct job *j);

#endif
