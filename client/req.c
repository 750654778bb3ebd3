/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * req.c - the calls of libpbox: pbox_iallreduce validates a call and
 * queues it for the progress thread; pbox_wait blocks on the client's
 * condition variable until the thread finishes it (every request is
 * bounded by opts.timeout_ms there, so no wait is unbounded);
 * pbox_allreduce is the two together. A device call's request
 * (gpu_call.c) completes here too: pbox_wait and pbox_test order the
 * caller's stream after its copies before they report it finished.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"

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

struct pbox_req *req_new(pbox_client *c, uint32_t key, uint8_t kind)
{
	struct pbox_req *r = calloc(1, sizeof(*r));

	if (!r) {
		client_error(c, PBOX_ENOMEM, "job '%s' rank %d key %u: out of memory",
			     c->job, c->rank, key);
		return NULL;
	}
	r->c = c;
	r->key = key;
	r->kind = kind;
	return r;
}

bool req_key_busy_locked(const pbox_client *c, uint32_t key)
{
	for (const struct pbox_req *r = c->live; r; r = r->live_next) {
		if (r->finished)
			continue;
		if (r->key == key)
			return true;
		for (size_t i = 0; r->kind == REQ_RELEASE && i < r->count; i++)
			if (r->rel_keys[i] == key)
				return true;
	}
	return false;
}

/* Queue r unless the client failed or a key of it (each a release names)
 * is busy; under c->lock, so no call on a key slips in between. */
static int submit_locked(pbox_client *c, struct pbox_req *r)
{
	bool rel = r->kind == REQ_RELEASE;

	if (c->fatal_rc) {
		client_error_locked(c, c->fatal_msg);
		return c->fatal_rc;
	}
	for (size_t i = 0; i < (rel ? r->count : 1); i++) {
		uint32_t key = rel ? r->rel_keys[i] : r->key;
		if (req_key_busy_locked(c, key)) {
			char msg[CLIENT_MSG_LEN];
			snprintf(msg, sizeof(msg), "job '%s' rank %d key %u: a call on this key "
				 "is still in flight (wait for it %s)", c->job, c->rank, key,
				 rel ? "before releasing the key" : "first");
			client_error_locked(c, msg);
			return PBOX_EBUSY;
		}
	}
	if (c->sub_tail)
		c->sub_tail->sub_next = r;
	else
		c->sub_head = r;
	c->sub_tail = r;
	r->live_next = c->live;
	if (c->live)
		c->live->live_prev = r;
	c->live = r;
	return 0;
}

int pbox_iallreduce(pbox_client *c, uint32_t key, void *buf, size_t count,
		    pbox_dtype dtype, pbox_req **req)
{
	if (!c)
		return PBOX_EINVAL;
	if (!req)
		return client_error(c, PBOX_EINVAL, "pbox_iallreduce key %u: req is NULL", key);
	*req = NULL;
	int rc = req_check(c, key, buf, count, dtype, (unsigned)dtype);
	if (rc < 0)
		return rc;
	struct pbox_req *r = req_new(c, key, REQ_ALLREDUCE);
	if (!r)
		return PBOX_ENOMEM;
	r->src = buf;
	r->buf = buf;
	r->count = count;
	r->dtype = r->rdtype = (uint8_t)dtype;
	rc = req_submit(c, r);
	if (rc < 0)
		return rc;
	*req = r;
	return 0;
}

int req_submit(pbox_client *c, struct pbox_req *r)
{
	pthread_mutex_lock(&c->lock);
	if (r->kind == REQ_PUSH_PULL) {
		float lr = ps_lr_locked(c, r->key);
		memcpy(&r->arg, &lr, sizeof(r->arg));
	}
	int rc = submit_locked(c, r);
	pthread_mutex_unlock(&c->lock);
	if (rc < 0) {
		req_free(r);
		return rc;
	}
	client_kick(c);
	return 0;
}

int pbox_wait(pbox_req *r)
{
	if (!r)
		return PBOX_EINVAL;
	pbox_client *c = r->c;
	pthread_mutex_lock(&c->lock);
	while (!r->finished)
		pthread_cond_wait(&c->done_cond, &c->lock);
	if (r->gk) {   /* a device call: order the caller's stream (gpu_call.c) */
		pthread_mutex_unlock(&c->lock);
		gpu_complete(r);
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
		gpu_release(r);
	free(r->sp_first);
	free(r->sp_own);
	free(r->rel_keys);
	free(r);
}

int pbox_test(pbox_req *r)
{
	if (!r)
		return 1;
	pthread_mutex_lock(&r->c->lock);
	int done = r->finished;
	pthread_mutex_unlock(&r->c->lock);
	if (done && r->gk)   /* a device call: finished means ordered on its stream */
		gpu_complete(r);
	return done;
}

int pbox_allreduce(pbox_client *c, uint32_t key, void *buf, size_t count,
		   pbox_dtype dtype)
{
	pbox_req *r;
	int rc = pbox_iallreduce(c, key, buf, count, dtype, &r);

	return rc < 0 ? rc : pbox_wait(r);
}
