/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * req.c - requests between the caller and the progress thread: a call
 * (ops/) checks its arguments (req_check), fills a request and queues it
 * (req_submit); pbox_wait blocks on the client's condition variable until
 * the thread finishes it (every request is bounded by opts.timeout_ms
 * there, so no wait is unbounded). A device call's request (gpu/)
 * completes here too, through its stages (r->dev): pbox_wait and
 * pbox_test order the caller's stream after its copies before they report
 * it finished.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/core/req.h"

int req_check(pbox_client *c, uint32_t key, const void *buf, size_t count,
	      pbox_dtype dtype, unsigned layout)
{
	char err[CLIENT_MSG_LEN];
	size_t esz = wire_dtype_size((unsigned)dtype);

	if (!buf)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: buf is NULL",
				    c->job, c->rank, key);
	if (count == 0)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: count is 0",
				    c->job, c->rank, key);
	if (esz == 0)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: unknown dtype %d "
				    "(use PBOX_F32, PBOX_F16 or PBOX_BF16)", c->job, c->rank,
				    key, (int)dtype);
	if (!c->thread_started) {
		char why[CLIENT_MSG_LEN];
		pthread_mutex_lock(&c->lock);
		memcpy(why, c->last_err, sizeof(why));
		pthread_mutex_unlock(&c->lock);
		return client_error(c, PBOX_EINVAL, "the client is not connected (pbox_connect "
				    "failed: %s)", why[0] ? why : "?");
	}
	if (seg_count_check(count, layout, c->seg_bytes, err, sizeof(err)) < 0)
		return client_error(c, PBOX_EINVAL, "job '%s' rank %d key %u: %s", c->job,
				    c->rank, key, err);
	return 0;
}

struct pbox_req *req_new(pbox_client *c, uint32_t key, const struct req_op *op)
{
	struct pbox_req *r = calloc(1, sizeof(*r));

	if (!r) {
		client_error(c, PBOX_ENOMEM, "job '%s' rank %d key %u: out of memory",
			     c->job, c->rank, key);
		return NULL;
	}
	r->c = c;
	r->key = key;
	r->op = op;
	return r;
}

bool req_key_busy_locked(const pbox_client *c, uint32_t key)
{
	for (const struct pbox_req *r = c->live; r; r = r->live_next) {
		if (r->finished)
			continue;
		size_t n;
		const uint32_t *keys = req_keys(r, &n);
		for (size_t i = 0; i < n; i++)
			if (keys[i] == key)
				return true;
	}
	return false;
}

/* Make r live unless the client failed or a key of it (each a release
 * names) is busy; under c->lock, so no call on a key slips in between. */
static int track_locked(pbox_client *c, struct pbox_req *r)
{
	size_t n;
	const uint32_t *keys = req_keys(r, &n);

	if (c->fatal_rc) {
		client_error_locked(c, c->fatal_msg);
		return c->fatal_rc;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t key = keys[i];
		if (req_key_busy_locked(c, key)) {
			char msg[CLIENT_MSG_LEN];
			snprintf(msg, sizeof(msg), "job '%s' rank %d key %u: a call on this key "
				 "is still in flight (wait for it %s)", c->job, c->rank, key,
				 r->keys ? "before releasing the key" : "first");
			client_error_locked(c, msg);
			return PBOX_EBUSY;
		}
	}
	r->live_next = c->live;
	if (c->live)
		c->live->live_prev = r;
	c->live = r;
	return 0;
}

/* Queue r for the progress thread once track_locked took it. */
static int submit_locked(pbox_client *c, struct pbox_req *r)
{
	int rc = track_locked(c, r);

	if (rc < 0)
		return rc;
	if (c->sub_tail)
		c->sub_tail->sub_next = r;
	else
		c->sub_head = r;
	c->sub_tail = r;
	return 0;
}

int req_track(pbox_client *c, struct pbox_req *r)
{
	pthread_mutex_lock(&c->lock);
	int rc = track_locked(c, r);
	pthread_mutex_unlock(&c->lock);
	if (rc < 0)
		req_free(r);
	return rc;
}

void req_end(pbox_client *c, struct pbox_req *r, int rc, const char *msg)
{
	pthread_mutex_lock(&c->lock);
	r->rc = rc;
	if (rc < 0)
		snprintf(r->msg, sizeof(r->msg), "%s", msg ? msg : pbox_strerror(rc));
	r->finished = true;
	pthread_cond_broadcast(&c->done_cond);
	pthread_mutex_unlock(&c->lock);
}

void req_feed(pbox_client *c, struct pbox_req *r, uint64_t elems)
{
	__atomic_store_n(&r->feed, elems, __ATOMIC_RELEASE);
	client_kick(c);
}

uint64_t req_drained(const struct pbox_req *r)
{
	return __atomic_load_n(&r->drained, __ATOMIC_ACQUIRE);
}

int req_submit(pbox_client *c, struct pbox_req *r)
{
	pthread_mutex_lock(&c->lock);
	if (r->op->queued_locked)
		r->op->queued_locked(c, r);
	int rc = submit_locked(c, r);
	pthread_mutex_unlock(&c->lock);
	if (rc < 0) {
		req_free(r);
		return rc;
	}
	client_kick(c);
	return 0;
}

struct pbox_req *req_group(pbox_client *c, struct pbox_req **kids, uint32_t n)
{
	struct pbox_req *g = calloc(1, sizeof(*g));

	if (!g) {
		for (uint32_t i = 0; i < n; i++)
			pbox_wait(kids[i]);
		free(kids);
		client_error(c, PBOX_ENOMEM, "out of memory for a call over %u boxes", n);
		return NULL;
	}
	g->c = c;
	g->kids = kids;
	g->nkids = n;
	return g;
}

/* Wait for every call of a fleet's: the first failure is the group's (its
 * message c's last error, naming the box). */
static int group_wait(struct pbox_req *g)
{
	int rc = 0;

	for (uint32_t i = 0; i < g->nkids; i++) {
		pbox_client *kc = g->kids[i]->c;
		int k = pbox_wait(g->kids[i]);
		if (k < 0 && rc == 0)
			rc = client_error(g->c, k, "box %s: %s", kc->control, pbox_last_error(kc));
	}
	free(g->kids);
	free(g);
	return rc;
}

int pbox_wait(pbox_req *r)
{
	if (!r)
		return PBOX_EINVAL;
	if (r->nkids)
		return group_wait(r);
	pbox_client *c = r->c;
	pthread_mutex_lock(&c->lock);
	while (!r->finished)
		pthread_cond_wait(&c->done_cond, &c->lock);
	if (r->gk) {   /* a device call: order the caller's stream (gpu/) */
		pthread_mutex_unlock(&c->lock);
		r->dev->complete(r);
		pthread_mutex_lock(&c->lock);
	}
	int rc = r->rc;
	if (rc < 0)
		client_error_locked(c, r->msg);
	if (r->live_prev)
		r->live_prev->live_next = r->live_next;
	else
		c->live = r->live_next;
	if (r->live_next)
		r->live_next->live_prev = r->live_prev;
	pthread_mutex_unlock(&c->lock);
	req_free(r);
	return rc;
}

void req_free(struct pbox_req *r)
{
	if (!r)
		return;
	if (r->gk)
		r->dev->drop(r->c, r->gk);
	r->gk = NULL;
	free(r->sp_first);
	free(r->sp_own);
	free(r->keys);
	free(r);
}

int pbox_test(pbox_req *r)
{
	if (!r)
		return 1;
	if (r->nkids) {   /* a fleet's call: done when each of its calls is */
		int done = 1;
		for (uint32_t i = 0; i < r->nkids; i++)
			done &= pbox_test(r->kids[i]);
		return done;
	}
	pthread_mutex_lock(&r->c->lock);
	int done = r->finished;
	pthread_mutex_unlock(&r->c->lock);
	if (done && r->gk)   /* a device call: finished means ordered on its stream */
		r->dev->complete(r);
	return done;
}
