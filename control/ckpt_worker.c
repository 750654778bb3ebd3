/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckpt_worker.c - the thread that writes checkpoint files, so the control
 * thread never waits on a disk; job_save's deferred answer and the
 * periodic saves of --checkpoint-dir. See ckpt_worker.h.
 *
 * Ownership: while busy is set and finished is not, the set and dir
 * belong to the worker thread; everything else (session, id, the
 * periodic cursor) only to the control thread. The mutex guards busy,
 * finished, rc and err.
 */
#include "control/ckpt_worker.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/errmsg.h"
#include "control/ckpt_restore.h"
#include "control/jobs.h"
#include "control/log.h"
#include "control/rpc.h"

#define AUTO_RETRY_MS 1000 /* a job stepping at its periodic save: again after */
#define AUTO_MAX_JOBS 64   /* jobs whose last periodic save is remembered */
/* Bytes of a snapshot copied per control-loop iteration
 * (ps_ckpt_cut_step; 1-2 ms on a quiet box, figures in
 * docs/reliability.md): a 512 MiB key is copied over some 128 polls,
 * every RPC answered between them. */
#define CUT_STEP (4u << 20)

struct ckpt_worker {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
	/* the write in flight */
	int busy, finished, rc;
	char err[RPC_ERR_MAX];
	struct ps_ckpt_set set;
	char job[CKPT_NAME_MAX + 1];
	char dir[CKPT_PATH];
	long start_ms, deadline_ms;
	void *session;          /* who waits for the answer; NULL: none */
	json_t *id;
	int answered;           /* at the timeout already */
	/* periodic saves */
	long next_auto_ms;      /* the next period's start, 0 = not yet set */
	long retry_ms;          /* a stepping job: not before */
	uint32_t cursor;        /* job id saved last in this period */
	int in_period;
	struct { uint32_t id; uint64_t rounds; } last[AUTO_MAX_JOBS];
	unsigned nlast;
	struct ckpt_worker_stats stats;
	struct ckpt_restore *restores; /* key_declares waiting for a read */
	/* the snapshot being copied before its write (control thread) */
	struct ps_ckpt_cut *cut;
	unsigned cut_pieces;    /* steps it took so far, */
	long cut_max_us;        /* the longest (logged: the control thread's hold) */
	int cut_auto;           /* a periodic save's ... */
	uint64_t cut_rounds;    /* ... of a job that had completed these rounds */
};

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

static void *worker_main(void *arg)
{
	struct ckpt_worker *w = arg;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->stop && !(w->busy && !w->finished))
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->busy && !w->finished) {
			char err[RPC_ERR_MAX] = "";
			pthread_mutex_unlock(&w->mu);
			/* the set and dir are ours until finished is set */
			int rc = ps_ckpt_write_set(&w->set, w->dir, NULL, err, sizeof(err));
			/* the copies go here, not on the control thread (unmapping
			 * hundreds of MiB takes tens of ms) */
			for (uint32_t i = 0; i < w->set.n; i++)
				ps_ckpt_snap_free(&w->set.s[i]);
			pthread_mutex_lock(&w->mu);
			w->rc = rc;
			snprintf(w->err, sizeof(w->err), "%s", err);
			w->finished = 1;
			continue;
		}
		if (w->stop)
			break;
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int ckpt_worker_open(struct ckpt_worker **out)
{
	struct ckpt_worker *w = calloc(1, sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	if (ckpt_restore_open(&w->restores) < 0) {
		free(w);
		return -ENOMEM;
	}
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if ((rc = pthread_create(&w->th, NULL, worker_main, w)) != 0) {
		pthread_mutex_destroy(&w->mu);
		pthread_cond_destroy(&w->cv);
		ckpt_restore_close(w->restores);
		free(w);
		return -rc;
	}
	*out = w;
	return 0;
}

void ckpt_worker_close(struct ckpt_worker *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->th, NULL);
	ps_ckpt_set_free(&w->set);
	ps_ckpt_cut_free(w->cut);
	json_decref(w->id);
	ckpt_restore_close(w->restores);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
}

/* What a save request answers to and is bounded by (submit and save). */
static void take_request(struct ckpt_worker *w, const char *job, const char *dir,
			 uint32_t timeout_ms, void *session, json_t *id)
{
	snprintf(w->job, sizeof(w->job), "%s", job);
	snprintf(w->dir, sizeof(w->dir), "%s", dir);
	w->start_ms = now_ms();
	w->deadline_ms = timeout_ms ? w->start_ms + (long)timeout_ms : 0;
	w->session = session;
	json_decref(w->id);
	w->id = id ? json_incref(id) : NULL;
	w->answered = 0;
}

int ckpt_worker_submit(struct ckpt_worker *w, struct ps_ckpt_set *set, const char *job,
		       const char *dir, void *session, json_t *id, unsigned timeout_ms,
		       char *err, size_t errlen)
{
	if (w->busy || w->cut) {
		int rc = errmsg(err, errlen, -EBUSY, "a checkpoint of job %s into %s is being "
				"%s (for %ld ms); one is written at a time: try again when "
				"it ends", w->job, w->dir, w->cut ? "copied" : "written",
				now_ms() - w->start_ms);
		ps_ckpt_set_free(set);
		return rc;
	}
	ps_ckpt_set_free(&w->set);
	w->set = *set;
	memset(set, 0, sizeof(*set));
	take_request(w, job, dir, timeout_ms, session, id);
	pthread_mutex_lock(&w->mu);
	w->busy = 1;
	w->finished = 0;
	w->err[0] = '\0';
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return 0;
}

int ckpt_worker_save(struct ckpt_worker *w, const struct job *j, const char *dir,
		     void *session, json_t *id, unsigned timeout_ms, bool patient, char *err,
		     size_t errlen)
{
	struct ps_ckpt_cut *cut;
	int rc;

	if (w->busy || w->cut)
		return errmsg(err, errlen, -EBUSY, "a checkpoint of job %s into %s is being "
			      "%s (for %ld ms); one is written at a time: try again when it ends",
			      w->job, w->dir, w->cut ? "copied" : "written",
			      now_ms() - w->start_ms);
	if ((rc = ps_ckpt_cut_begin(j, patient, &cut, err, errlen)) < 0)
		return rc;
	w->cut = cut;
	w->cut_pieces = 0;
	w->cut_max_us = 0;
	take_request(w, j->name, dir, timeout_ms, session, id);
	return 0;
}

int ckpt_worker_copying(const struct ckpt_worker *w, uint32_t job_id)
{
	return w && w->cut && ps_ckpt_cut_job(w->cut) == job_id;
}

int ckpt_worker_hurry(const struct ckpt_worker *w)
{
	return w && w->cut;
}

void ckpt_worker_forget(struct ckpt_worker *w, void *session)
{
	if (w && w->session == session)
		w->session = NULL;
	if (w)
		ckpt_restore_forget(w->restores, session);
}

struct ckpt_restore *ckpt_worker_restores(struct ckpt_worker *w)
{
	return w->restores;
}

struct ckpt_worker_stats ckpt_worker_stats(struct ckpt_worker *w)
{
	return w->stats;
}

/* job_save's answer: the keys written and their bytes. */
static json_t *saved_result(const struct ckpt_worker *w)
{
	json_t *keys = json_array();
	uint64_t total = 0;

	for (uint32_t i = 0; keys && i < w->set.n; i++) {
		total += w->set.s[i].bytes;
		json_array_append_new(keys, json_pack("{s:I, s:I, s:I}", "key",
						      (json_int_t)w->set.s[i].key, "bytes",
						      (json_int_t)w->set.s[i].bytes, "steps",
						      (json_int_t)w->set.s[i].steps));
	}
	if (!keys)
		return NULL;
	return json_pack("{s:s, s:o, s:I}", "dir", w->dir, "keys", keys, "bytes",
			 (json_int_t)total);
}

static void answer(struct ckpt_worker *w, ckpt_send_fn send, void *send_ctx, int rc,
		   const char *msg)
{
	json_t *reply;

	if (!w->session || !w->id || w->answered)
		return;
	if (rc == 0) {
		json_t *result = saved_result(w);
		reply = result ? json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", w->id,
					   "result", result)
			       : rpc_error_reply(w->id, -ENOMEM, "out of memory for the answer");
	} else {
		reply = rpc_error_reply(w->id, rc, msg);
	}
	if (reply)
		send(send_ctx, w->session, reply);
	json_decref(reply);
	w->answered = 1;
}

/* The write in flight: answered and freed when it ends; answered at its
 * deadline if it has not. */
static void poll_write(struct ckpt_worker *w, struct box *box, ckpt_send_fn send,
		       void *send_ctx, long now)
{
	int finished, rc;
	char err[RPC_ERR_MAX];

	pthread_mutex_lock(&w->mu);
	finished = w->busy && w->finished;
	rc = w->rc;
	snprintf(err, sizeof(err), "%s", w->err);
	pthread_mutex_unlock(&w->mu);
	if (finished) {
		if (rc == 0)
			w->stats.written++;
		else
			w->stats.failed++;
		if (w->answered || !w->session)
			ctl_log(box, rc ? CTL_LOG_WARN : CTL_LOG_INFO, "checkpoint of job %s into "
				"%s: %s after %ld ms", w->job, w->dir, rc ? err : "written",
				now - w->start_ms);
		answer(w, send, send_ctx, rc, err);
		ps_ckpt_set_free(&w->set);
		json_decref(w->id);
		w->id = NULL;
		w->session = NULL;
		pthread_mutex_lock(&w->mu);
		w->busy = 0;
		w->finished = 0;
		pthread_mutex_unlock(&w->mu);
		return;
	}
	if (w->busy && w->deadline_ms && now >= w->deadline_ms && !w->answered &&
	    w->session) {
		snprintf(err, sizeof(err), "job %.100s: the checkpoint into %.200s did not finish within "
			 "%ld ms (--checkpoint-timeout-ms: a slow or hung disk); it goes on, "
			 "and no other checkpoint starts until it ends", w->job, w->dir,
			 w->deadline_ms - w->start_ms);
		w->stats.timed_out++;
		ctl_log(box, CTL_LOG_WARN, "%s", err);
		answer(w, send, send_ctx, -ETIMEDOUT, err);
	}
}

static void auto_ended(struct ckpt_worker *w, struct box *box, const struct job *j, int rc,
		       const char *err);

/* The snapshot being copied: CUT_STEP more bytes; once whole, to the
 * writer thread (the same answer, deadline and session); a failure is
 * answered (job_save) or logged (periodic). */
static void poll_cut(struct ckpt_worker *w, struct box *box, ckpt_send_fn send,
		     void *send_ctx)
{
	char err[RPC_ERR_MAX] = "";
	const struct job *j;
	struct ps_ckpt_set set;
	int rc;

	if (!w->cut)
		return;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	j = box->jobs ? jobs_find_id(box->jobs, ps_ckpt_cut_job(w->cut)) : NULL;
	rc = ps_ckpt_cut_step(j, w->cut, CUT_STEP, err, sizeof(err));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long us = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000;
	w->cut_pieces++;
	w->cut_max_us = us > w->cut_max_us ? us : w->cut_max_us;
	if (rc == 1)
		return;
	if (rc == 0) {
		ps_ckpt_cut_take(w->cut, &set);
		ctl_log(box, CTL_LOG_INFO, "checkpoint of job %s: copied in %u pieces over %ld ms, "
			"the longest %ld.%ld ms", w->job, w->cut_pieces, now_ms() - w->start_ms,
			w->cut_max_us / 1000, w->cut_max_us / 100 % 10);
	}
	if (w->cut_auto)
		auto_ended(w, box, j, rc, err);
	ps_ckpt_cut_free(w->cut);
	w->cut = NULL;
	if (rc < 0) {
		if (w->session)
			answer(w, send, send_ctx, rc, err);
		json_decref(w->id);
		w->id = NULL;
		w->session = NULL;
		return;
	}
	ps_ckpt_set_free(&w->set);
	w->set = set;
	pthread_mutex_lock(&w->mu);
	w->busy = 1;
	w->finished = 0;
	w->err[0] = '\0';
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

/* ---- periodic saves (--checkpoint-dir) ---- */

/* The rounds j's PS keys completed in all (a job that took no step since
 * its last save has the same). */
static uint64_t job_rounds(const struct job *j)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < j->nkeys; i++)
		if (j->keys[i].is_ps && !j->keys[i].remove_mark)
			n += __atomic_load_n(&j->keys[i].ek->segs[0].done, __ATOMIC_ACQUIRE) + 1;
	return n;
}

static int unchanged_since_saved(const struct ckpt_worker *w, const struct job *j,
				 uint64_t rounds)
{
	for (unsigned i = 0; i < w->nlast; i++)
		if (w->last[i].id == j->id)
			return w->last[i].rounds == rounds;
	return 0;
}

static void remember(struct ckpt_worker *w, const struct job *j, uint64_t rounds)
{
	unsigned i = 0;

	while (i < w->nlast && w->last[i].id != j->id)
		i++;
	if (i == w->nlast) {
		if (w->nlast < AUTO_MAX_JOBS)
			w->nlast++;
		else
			i = (unsigned)(j->id % AUTO_MAX_JOBS); /* forget one */
	}
	w->last[i].id = j->id;
	w->last[i].rounds = rounds;
}

/* The live job with the smallest id above cursor that has a PS key. */
static const struct job *next_job(const struct jobs *js, uint32_t cursor)
{
	const struct job *best = NULL;

	for (const struct job *j = jobs_next(js, NULL); j; j = jobs_next(js, j)) {
		int ps = 0;
		for (uint32_t i = 0; i < j->nkeys && !ps; i++)
			ps = j->keys[i].is_ps;
		if (ps && j->id > cursor && (!best || j->id < best->id))
			best = j;
	}
	return best;
}

static void poll_auto(struct ckpt_worker *w, struct box *box, long now)
{
	const struct box_config *cfg = &box->cfg;
	char dir[CKPT_PATH], err[RPC_ERR_MAX];

	if (!cfg->checkpoint_dir[0] || w->busy || w->cut || !box->jobs)
		return;
	if (!w->next_auto_ms)
		w->next_auto_ms = now + (long)cfg->checkpoint_every_s * 1000;
	if (!w->in_period) {
		if (now < w->next_auto_ms)
			return;
		w->in_period = 1;
		w->cursor = 0;
		w->next_auto_ms = now + (long)cfg->checkpoint_every_s * 1000;
	}
	if (now < w->retry_ms)
		return;
	const struct job *j = next_job(box->jobs, w->cursor);
	if (!j) {
		w->in_period = 0;
		return;
	}
	uint64_t rounds = job_rounds(j);
	if (unchanged_since_saved(w, j, rounds)) {
		w->cursor = j->id;
		return;
	}
	int rc = ps_ckpt_auto_dir(dir, sizeof(dir), cfg->checkpoint_dir, j->name, 1, err,
				  sizeof(err));
	if (rc == 0)
		rc = ckpt_worker_save(w, j, dir, NULL, NULL, 0, false, err, sizeof(err));
	if (rc < 0) {
		w->cursor = j->id;
		ctl_log(box, CTL_LOG_WARN, "periodic checkpoint of job %s: %s", j->name, err);
		return;
	}
	/* copied over the next polls (poll_cut), then auto_ended */
	w->cut_auto = 1;
	w->cut_rounds = rounds;
}

/* A periodic save's copy ended: kept (the job is remembered at its
 * rounds), or a job stepping tried again a second later, or one with a
 * key without weights yet (nothing to keep) or failing passed over. */
static void auto_ended(struct ckpt_worker *w, struct box *box, const struct job *j, int rc,
		       const char *err)
{
	uint32_t id = ps_ckpt_cut_job(w->cut);

	w->cut_auto = 0;
	if (rc == -EBUSY && j) { /* stepping: at a round boundary a moment later */
		w->retry_ms = now_ms() + AUTO_RETRY_MS;
		ctl_log(box, CTL_LOG_DEBUG, "periodic checkpoint: %s; again in %d ms", err,
			AUTO_RETRY_MS);
		return;
	}
	w->cursor = id;
	if (rc == -ENODATA)
		return;
	if (rc < 0) {
		ctl_log(box, CTL_LOG_WARN, "periodic checkpoint of job %s: %s", w->job, err);
		return;
	}
	remember(w, j, w->cut_rounds);
	w->stats.auto_saved++;
}

void ckpt_worker_poll(struct ckpt_worker *w, struct box *box, ckpt_send_fn send,
		      void *send_ctx)
{
	long now;

	if (!w)
		return;
	now = now_ms();
	ckpt_restore_poll(w->restores, box, send, send_ctx);
	poll_cut(w, box, send, send_ctx);
	poll_write(w, box, send, send_ctx, now);
	poll_auto(w, box, now);
}
