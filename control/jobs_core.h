/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * jobs_core.h - the registry's core (jobs_core.c), which the rest of the
 * registry builds on: the registry's layout and lookups (jobs_find*,
 * jobs_next, the counts of jobs.h), posting to the lcores and waiting for
 * them, a job's key table, and taking a job out of service (abort, the
 * start of its removal). Calls go one way:
 *
 *   jobs.c (life cycle, jobs_tick) -> jobs_keys.c (keys), jobs_watch.c
 *   (stall watch) -> jobs_core.c
 *
 * Not for use outside jobs*.c (the unit tests' in-process box reads the
 * notify hook).
 */
#ifndef PBOX_JOBS_CORE_H
#define PBOX_JOBS_CORE_H

#include "common/errmsg.h"
#include "control/jobs.h"
#include "control/ckpt_load.h"

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
	int admit_operator;                  /* jobs_admit_as_operator */
};

/*
 * The length of name's family: a host-local job's lanes ("X.lane0" ..
 * "X.lane999", docs/architecture.md "The host level") are of family X,
 * every other name is its own. --max-jobs-per-peer counts families.
 */
size_t jobs_family_len(const char *name);

/*
 * May a job of max_bytes be admitted now for the request being served (its
 * peer js->box->log_peer; an operator's with js->admit_operator or no
 * peer)? Checks --total-job-bytes (every job's memory, removing ones too),
 * the operators' reserve (--reserved-jobs, --reserved-job-bytes) and the
 * peer's budget (--max-jobs-per-peer, counting a family of jobs once:
 * one of a family the peer runs is admitted at any count;
 * --max-job-bytes-per-peer). 0 and
 * *by_operator, or -ENOSPC naming the limit and the option.
 */
int jobs_admit_budget(const struct jobs *js, const char *name, uint64_t max_bytes,
		      uint8_t *by_operator, char *err, size_t errlen);

/* Post m to lcore, retrying a full ring for up to about a second.
 * 0, -EAGAIN (still full) or the post's error. */
int jobs_post(struct jobs *js, unsigned lcore, const struct engine_msg *m);
/* jobs_post to every lcore in turn: 0, or the first error with the lcore
 * it stopped at in *failed. */
int jobs_post_all(struct jobs *js, const struct engine_msg *m, unsigned *failed);

/* The size of a job's key index for max_keys keys, in the registry and in
 * every engine: the power of two >= 2 * max_keys. */
uint32_t jobs_key_cap(uint32_t max_keys);
/* Allocate a new job's key table (its index sized by jobs_key_cap).
 * 0 or -ENOMEM. */
int jobs_key_table_init(struct jobs *js, struct job *j);
/* Free a job's key table and give its chunks' loads back (its keys
 * being restored too: their reads dropped). */
void jobs_key_table_free(struct jobs *js, struct job *j);

/* A PS key whose checkpoint is being read (jobs.h JOBS_PENDING): the key
 * built in the arena (k: its chunks placed, its engine key made; owner:
 * the lcore of each chunk), and the read (load NULL: waiting for a reader
 * thread, ckpt_load.h). */
struct job_restoring {
	struct job_key k;
	uint8_t *owner;
	struct ckpt_load *load;
	struct ps_ckpt_load_args args;
	int missing_ok;            /* --checkpoint-dir: no file, a fresh key */
	double since;              /* CLOCK_MONOTONIC s of the first declaration */
};

/* 1 once every lcore has applied the message mark[l] counts up to (a
 * REMOVE posted there: jobs_post and jobs_post_removes count js->posted);
 * 0 while one has not, or mark[l] is 0 (not posted there yet). */
int jobs_applied(const struct jobs *js, const uint64_t *mark);

/* 1 if a connection still holds one of j's ranks. */
int job_has_session(const struct job *j);

/* An aborted j with no session left goes (jobs_start_remove) unless an
 * operator made it: then it waits for the next join, which makes it again
 * (jobs.h jobs_set_kept), or for the join wait to run out. */
void jobs_aborted_idle(struct jobs *js, struct job *j);

/* Abort j: the lcores answer ERROR, its sessions are notified, and it is
 * removed now if none is left. Aborting an aborted or removing job is a
 * no-op. */
void jobs_abort_job(struct jobs *js, struct job *j, const char *reason);

/* Take j out of service (why is logged); its memory goes once every
 * lcore applied its JOB_REMOVE (jobs_tick). A removing job is left alone. */
void jobs_start_remove(struct jobs *js, struct job *j, const char *why);
/* Post the JOB_REMOVEs of a removing j not posted yet (a full ring is
 * retried by the next call). */
void jobs_post_removes(struct jobs *js, struct job *j);

#endif
