/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * jobs_core.c - the registry's core, which jobs.c (life cycle), jobs_keys.c
 * (keys) and jobs_watch.c (stall watch) build on and which calls none of
 * them: the table and its lookups, posting to the lcores, a job's key
 * table, abort, and the start of a removal (jobs.c finishes it once every
 * lcore let go). See jobs_core.h and jobs.h.
 */
#include "control/jobs_core.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "control/log.h"

#define POST_TRIES 10000   /* x 100 us: about a second */

/* ---- posting to the lcores ---- */

int jobs_post(struct jobs *js, unsigned lcore, const struct engine_msg *m)
{
	struct box *b = js->box;

	for (int i = 0; i < POST_TRIES; i++) {
		int rc = b->dp.post(b->dp.ctx, lcore, m);
		if (rc == 0) {
			js->posted[lcore]++;
			return 0;
		}
		if (rc != -EAGAIN)
			return rc;
		usleep(100);
	}
	return -EAGAIN;
}

int jobs_post_all(struct jobs *js, const struct engine_msg *m, unsigned *failed)
{
	for (unsigned l = 0; l < js->box->layout.nlcores; l++) {
		int rc = jobs_post(js, l, m);
		if (rc < 0) {
			*failed = l;
			return rc;
		}
	}
	return 0;
}

int jobs_applied(const struct jobs *js, const uint64_t *mark)
{
	const struct box_dp *dp = &js->box->dp;

	for (unsigned l = 0; l < js->box->layout.nlcores; l++)
		if (!mark[l] || dp->applied(dp->ctx, l) < mark[l])
			return 0;
	return 1;
}

/* ---- lookups ---- */

const struct job *jobs_find(const struct jobs *js, const char *name)
{
	for (unsigned i = 0; i < ENGINE_MAX_JOBS; i++) {
		const struct job *j = js->table[i];
		if (j && !j->removing && strcmp(j->name, name) == 0)
			return j;
	}
	return NULL;
}

const struct job *jobs_find_id(const struct jobs *js, uint32_t id)
{
	const struct job *j = js->table[engine_job_index(id)];
	return j && !j->removing && j->id == id ? j : NULL;
}

const struct job *jobs_next(const struct jobs *js, const struct job *prev)
{
	unsigned i = prev ? engine_job_index(prev->id) + 1 : 0;

	for (; i < ENGINE_MAX_JOBS; i++)
		if (js->table[i] && !js->table[i]->removing)
			return js->table[i];
	return NULL;
}

unsigned jobs_count(const struct jobs *js) { return js->nlive; }
unsigned jobs_removing(const struct jobs *js) { return js->nremoving; }
const uint64_t *jobs_ep_load(const struct jobs *js) { return js->load; }

/* ---- admission budgets ---- */

void jobs_admit_as_operator(struct jobs *js, int on) { js->admit_operator = on; }

size_t jobs_family_len(const char *name)
{
	size_t n = strlen(name), d = n;

	while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9')
		d--;
	if (d == n || n - d > 3 || d < 6 || memcmp(name + d - 5, ".lane", 5) != 0)
		return n;
	return d - 5;
}

/* Whether a and b are of one family (jobs_family_len). */
static bool same_family(const char *a, const char *b)
{
	size_t n = jobs_family_len(a);
	return n == jobs_family_len(b) && memcmp(a, b, n) == 0;
}

int jobs_admit_budget(const struct jobs *js, const char *name, uint64_t max_bytes,
		      uint8_t *by_operator, char *err, size_t errlen)
{
	const struct box_config *cfg = &js->box->cfg;
	const struct peer_addr *peer = &js->box->log_peer;
	int op = js->admit_operator || peer_addr_is_none(peer);
	uint64_t total = 0, peer_bytes = 0;
	unsigned peer_jobs = 0, anon_jobs = 0;
	bool kin = false;   /* the peer runs a job of name's family */
	char a[48];

	for (unsigned i = 0; i < ENGINE_MAX_JOBS; i++) {
		const struct job *j = js->table[i];
		if (!j)
			continue;
		total += j->max_bytes;   /* a removing job's memory is not free yet */
		anon_jobs += !j->removing && !j->by_operator;
		if (op || j->by_operator || memcmp(&j->log_peer, peer, sizeof(*peer)) != 0)
			continue;
		peer_bytes += j->max_bytes;
		if (j->removing)
			continue;
		kin |= same_family(j->name, name);
		/* a family counts once: at its first running job in the table */
		bool counted = false;
		for (unsigned o = 0; o < i && !counted; o++) {
			const struct job *e = js->table[o];
			counted = e && !e->removing && !e->by_operator &&
				  memcmp(&e->log_peer, peer, sizeof(*peer)) == 0 &&
				  same_family(e->name, j->name);
		}
		peer_jobs += !counted;
	}
	*by_operator = (uint8_t)op;
	uint64_t reserve = op ? 0 : cfg->reserved_job_bytes;
	if (cfg->total_job_bytes && total + max_bytes + reserve > cfg->total_job_bytes)
		return errmsg(err, errlen, -ENOSPC, "job %s: its %" PRIu64 " bytes of job memory "
			      "and the %" PRIu64 " the box's jobs hold exceed --total-job-bytes "
			      "%" PRIu64 "%s", name, max_bytes, total, cfg->total_job_bytes,
			      reserve ? " less --reserved-job-bytes (an operator's jobs only)" : "");
	if (op)
		return 0;
	/* the reserve: jobs not an operator's take at most max_jobs - reserved */
	if (cfg->reserved_jobs && anon_jobs + cfg->reserved_jobs >= cfg->max_jobs)
		return errmsg(err, errlen, -ENOSPC, "job %s: the box runs %u jobs that workers "
			      "created; the last %u of its %u (--max-jobs) are reserved for an "
			      "operator's jobs (--reserved-jobs)", name, anon_jobs,
			      cfg->reserved_jobs, cfg->max_jobs);
	if (cfg->max_jobs_per_peer && !kin && peer_jobs >= cfg->max_jobs_per_peer)
		return errmsg(err, errlen, -ENOSPC, "job %s: %s already created %u jobs that "
			      "still run (--max-jobs-per-peer)", name,
			      peer_addr_str(peer, a, sizeof(a)), peer_jobs);
	if (cfg->max_job_bytes_per_peer && peer_bytes + max_bytes > cfg->max_job_bytes_per_peer)
		return errmsg(err, errlen, -ENOSPC, "job %s: its %" PRIu64 " bytes of job memory "
			      "and the %" PRIu64 " of the jobs %s created exceed "
			      "--max-job-bytes-per-peer %" PRIu64, name, max_bytes, peer_bytes,
			      peer_addr_str(peer, a, sizeof(a)), cfg->max_job_bytes_per_peer);
	return 0;
}

/* ---- a job's key table (jobs_keys.c fills it) ---- */

uint32_t jobs_key_cap(uint32_t max_keys)
{
	uint32_t c = 1;
	while (c < 2 * max_keys)
		c <<= 1;
	return c;
}

int jobs_key_table_init(struct jobs *js, struct job *j)
{
	uint32_t cap = jobs_key_cap(js->box->cfg.max_keys);

	j->key_index = calloc(cap, sizeof(*j->key_index));
	if (!j->key_index)
		return -ENOMEM;
	j->key_index_cap = cap;
	return 0;
}

void jobs_key_table_free(struct jobs *js, struct job *j)
{
	for (uint32_t i = 0; i < j->nkeys; i++) {
		if (!j->keys[i].remove_mark) /* a removing key gave its load back */
			assign_release(&j->keys[i].geom, js->load, js->box->layout.neps,
				       j->keys[i].chunk_ep);
		free(j->keys[i].chunk_ep);
		free(j->keys[i].remove_mark);
	}
	for (uint32_t i = 0; i < j->nrestoring; i++) {
		struct job_restoring *r = j->restoring[i];
		ckpt_load_drop(r->load);   /* its thread lets go of the arena */
		assign_release(&r->k.geom, js->load, js->box->layout.neps, r->k.chunk_ep);
		free(r->k.chunk_ep);
		free(r->owner);
		free(r);
	}
	free(j->restoring);
	j->restoring = NULL;
	j->nrestoring = j->restoring_cap = 0;
	j->keys_removing = j->keys_releasing = 0;
	free(j->zeroing);   /* the arena goes with the job: nothing to zero */
	j->zeroing = NULL;
	j->nzeroing = j->zeroing_cap = 0;
	free(j->keys);
	free(j->key_index);
	j->keys = NULL;
	j->key_index = NULL;
	j->nkeys = j->keys_cap = j->key_index_cap = 0;
}

/* ---- out of service: removal and abort ---- */

void jobs_post_removes(struct jobs *js, struct job *j)
{
	struct engine_msg m = { .type = ENGINE_MSG_JOB_REMOVE, .job = j->id };

	for (unsigned l = 0; l < js->box->layout.nlcores; l++) {
		if (j->remove_mark[l])
			continue;
		int rc = js->box->dp.post(js->box->dp.ctx, l, &m);
		if (rc == 0)
			j->remove_mark[l] = ++js->posted[l];
	}
}

void jobs_start_remove(struct jobs *js, struct job *j, const char *why)
{
	if (j->removing)
		return;
	j->removing = 1;
	js->nlive--;
	js->nremoving++;
	jobs_key_table_free(js, j);
	ctl_log_peer(js->box, &j->log_peer, CTL_LOG_INFO, "job %s (id %" PRIu32 "): removing (%s)",
		j->name, j->id, why);
	jobs_post_removes(js, j);
}

int job_has_session(const struct job *j)
{
	for (unsigned r = 0; r < j->world; r++)
		if (j->ranks[r].session)
			return 1;
	return 0;
}

void jobs_abort_job(struct jobs *js, struct job *j, const char *reason)
{
	struct engine_msg m = { .type = ENGINE_MSG_JOB_ABORT, .job = j->id };
	unsigned failed;

	if (j->state == JOB_ABORTED || j->removing)
		return;
	j->state = JOB_ABORTED;
	j->aborted_at = clock_s();
	snprintf(j->reason, sizeof(j->reason), "%s", reason);
	ctl_log_peer(js->box, &j->log_peer, CTL_LOG_WARN, "job %s (id %" PRIu32 "): aborted: %s",
		j->name, j->id, reason);
	if (jobs_post_all(js, &m, &failed) < 0)
		ctl_log_peer(js->box, &j->log_peer, CTL_LOG_ERROR, "job %s: lcore %u's ring is full; "
			"it keeps aggregating until the job is removed", j->name, failed);
	for (unsigned r = 0; r < j->world; r++)
		if (j->ranks[r].session && js->notify)
			js->notify(js->notify_ctx, j->ranks[r].session, j, NULL);
	if (!job_has_session(j))
		jobs_aborted_idle(js, j);
}

void jobs_aborted_idle(struct jobs *js, struct job *j)
{
	if (!j->kept) {
		jobs_start_remove(js, j, "aborted, no session left");
		return;
	}
	if (!j->empty_since)
		j->empty_since = clock_s();
}
