/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckpt_restore.c - key_declares waiting for their key's checkpoint to be
 * read, and their answers. See ckpt_restore.h.
 */
#include "control/ckpt_restore.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/errmsg.h"
#include "control/jobs.h"
#include "control/rpc.h"
#include "control/rpc_methods.h"

struct waiter {
	uint32_t job_id, key;
	void *session;
	json_t *id;
};

struct ckpt_restore {
	struct waiter *w;
	unsigned n, cap;
};

struct poll_ctx {
	struct ckpt_restore *r;
	struct box *box;
	ckpt_restore_send_fn send;
	void *send_ctx;
};

int ckpt_restore_open(struct ckpt_restore **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void ckpt_restore_close(struct ckpt_restore *r)
{
	if (!r)
		return;
	for (unsigned i = 0; i < r->n; i++)
		json_decref(r->w[i].id);
	free(r->w);
	free(r);
}

int ckpt_restore_wait(struct ckpt_restore *r, uint32_t job_id, uint32_t key, void *session,
		      json_t *id, char *err, size_t errlen)
{
	if (r->n == r->cap) {
		unsigned cap = r->cap ? 2 * r->cap : 16;
		struct waiter *w = realloc(r->w, cap * sizeof(*w));
		if (!w)
			return errmsg(err, errlen, -ENOMEM, "key %" PRIu32 ": out of memory to "
				      "wait for its checkpoint", key);
		r->w = w;
		r->cap = cap;
	}
	r->w[r->n++] = (struct waiter){ .job_id = job_id, .key = key, .session = session,
					.id = id ? json_incref(id) : NULL };
	return 0;
}

static void drop(struct ckpt_restore *r, unsigned i)
{
	json_decref(r->w[i].id);
	r->w[i] = r->w[--r->n];
}

static struct waiter take(struct ckpt_restore *r, unsigned i);

void ckpt_restore_forget(struct ckpt_restore *r, void *session)
{
	for (unsigned i = 0; r && i < r->n;)
		if (r->w[i].session == session)
			drop(r, i);
		else
			i++;
}

unsigned ckpt_restore_waiting(const struct ckpt_restore *r)
{
	return r ? r->n : 0;
}

/* Take waiter i out of the list (its id reference moves to the caller):
 * an answer may close a connection, whose forget then changes the list. */
static struct waiter take(struct ckpt_restore *r, unsigned i)
{
	struct waiter w = r->w[i];

	r->w[i] = r->w[--r->n];
	return w;
}

static void answer(struct poll_ctx *p, struct waiter *w, const struct job *j,
		   const struct job_key *k, int rc, const char *msg)
{
	json_t *reply = NULL;

	if (rc == 0) {
		json_t *result = rpc_key_declared(p->box, j, k);
		reply = result ? json_pack("{s:s, s:O?, s:o}", "jsonrpc", "2.0", "id", w->id,
					   "result", result)
			       : rpc_error_reply(w->id, -ENOMEM, "out of memory for the answer");
	} else {
		reply = rpc_error_reply(w->id, rc, msg);
	}
	if (reply && w->id)   /* a notification gets no answer */
		p->send(p->send_ctx, w->session, reply);
	json_decref(reply);
	json_decref(w->id);
}

/* A read ended: every declaration waiting for it gets the same answer. */
static void restored(void *ctx, const struct job *j, uint32_t key, const struct job_key *k,
		     int rc, const char *msg)
{
	struct poll_ctx *p = ctx;

	for (unsigned i = 0; i < p->r->n;) {
		if (p->r->w[i].job_id != j->id || p->r->w[i].key != key) {
			i++;
			continue;
		}
		struct waiter w = take(p->r, i);
		answer(p, &w, j, k, rc, msg);
		i = 0;
	}
}

void ckpt_restore_poll(struct ckpt_restore *r, struct box *box, ckpt_restore_send_fn send,
		       void *send_ctx)
{
	struct poll_ctx p = { .r = r, .box = box, .send = send, .send_ctx = send_ctx };
	char msg[RPC_ERR_MAX];

	if (!r || !box->jobs)
		return;
	jobs_restores_poll(box->jobs, restored, &p);
	/* a job that went (removed) took its reads with it */
	for (unsigned i = 0; i < r->n;) {
		if (jobs_restore_pending(box->jobs, r->w[i].job_id, r->w[i].key)) {
			i++;
			continue;
		}
		struct waiter w = take(r, i);
		snprintf(msg, sizeof(msg), "job id %" PRIu32 " key %" PRIu32 ": the job ended "
			 "while the key's checkpoint was read", w.job_id, w.key);
		answer(&p, &w, NULL, NULL, -ECONNABORTED, msg);
		i = 0;
	}
}
