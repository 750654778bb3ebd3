/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * release.c - pbox_release_keys: give keys back to the box (docs/rpc.md
 * "key_release"). The call is a request like the others, so it waits for
 * nothing in flight (a key with a call in flight is EBUSY) and is bounded
 * by the timeout; the progress thread sends one key_release and, when the
 * box has recorded it, forgets the keys' layouts so their next use
 * declares them afresh.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/ops/fleet.h"
#include "client/ops/host.h"

#define RELEASE_MAX  1024 /* keys per call (the box's KEY_RELEASE_MAX) */

int pbox_release_keys(pbox_client *c, const uint32_t *keys, size_t n)
{
	if (!c)
		return PBOX_EINVAL;
	if (c->host && keys && n && n <= RELEASE_MAX)   /* (host.c) */
		return host_release(c, keys, n);
	return release_keys_flat(c, keys, n);
}

int release_keys_flat(pbox_client *c, const uint32_t *keys, size_t n)
{
	if (!c)
		return PBOX_EINVAL;
	if (c->fleet)
		return fleet_release(c, keys, n);
	if (!keys || n == 0 || n > RELEASE_MAX)
		return client_error(c, PBOX_EINVAL, "pbox_release_keys: %s", !keys ? "keys is NULL"
				    : "give 1 to 1024 keys per call");
	if (!c->thread_started)
		return client_error(c, PBOX_EINVAL, "pbox_release_keys: the client is not "
				    "connected");
	for (size_t i = 0; i < n; i++)
		for (size_t o = 0; o < i; o++)
			if (keys[o] == keys[i])
				return client_error(c, PBOX_EINVAL, "pbox_release_keys: key %u "
						    "is named twice", keys[i]);
	struct pbox_req *r = req_new(c, keys[0], &op_release);
	if (!r)
		return PBOX_ENOMEM;
	r->keys = malloc(n * sizeof(*r->keys));
	if (!r->keys) {
		req_free(r);
		return client_error(c, PBOX_ENOMEM, "pbox_release_keys: out of memory");
	}
	memcpy(r->keys, keys, n * sizeof(*keys));
	r->count = n;
	int rc = req_submit(c, r);   /* PBOX_EBUSY if a call on any of them is in flight */
	return rc < 0 ? rc : pbox_wait(r);
}

static void release_start(pbox_client *c, struct pbox_req *r, uint64_t now)
{
	for (size_t i = 0; i < r->count; i++) {
		struct key_state *ks = keytab_find(&c->keys, r->keys[i]);
		if (ks && ks->phase == KEY_DECLARING) {
			progress_finish(c, r, PBOX_EBUSY, "job '%s' rank %d key %u: its declaration "
					"is still unanswered; release it once a call on it "
					"completed", c->job, c->rank, r->keys[i]);
			return;
		}
	}
	struct rpc_pending *p = calloc(1, sizeof(*p));
	json_t *keys = json_array();
	for (size_t i = 0; keys && i < r->count; i++)
		if (json_array_append_new(keys, json_integer(r->keys[i])) < 0) {
			json_decref(keys);
			keys = NULL;
		}
	json_t *params = p && keys ? json_pack("{s:I, s:i, s:o}", "job_id",
					       (json_int_t)c->job_id, "rank", c->rank,
					       "keys", keys) : NULL;
	if (!params) {
		if (!p || !keys)
			json_decref(keys);
		free(p);
		progress_finish(c, r, PBOX_ENOMEM, "job '%s' rank %d: out of memory",
				c->job, c->rank);
		return;
	}
	if (progress_rpc_send(c, r, "key_release", params, p) < 0)
		return;
	r->state = REQ_RPC;
	r->progress_ns = now;
}

static void release_answer(pbox_client *c, struct rpc_pending *p, const json_t *msg,
			   uint64_t now)
{
	struct pbox_req *r = p->req;
	json_t *e = json_object_get(msg, "error");
	char err[CLIENT_MSG_LEN];

	(void)now;
	if (!r) /* ended without it, keys not held (progress_rpc_orphan) */
		return;
	if (e) {
		int rc = ctrl_error(e, "key_release", err, sizeof(err));
		progress_finish(c, r, rc, "job '%s' rank %d: %s", c->job, c->rank, err);
		return;
	}
	for (size_t i = 0; i < r->count; i++) {
		struct key_state *ks = keytab_find(&c->keys, r->keys[i]);
		if (ks)
			key_reset(ks);
		client_forget_key(c, r->keys[i]);   /* (top-k and device states) */
	}
	xfer_finish(c, r, 0, NULL);
}

/* A keyless call: its keys are r->keys. When the box has recorded it,
 * they are reset, even if the call ended before the answer came. */
const struct req_op op_release = {
	.keyless = true,
	.changes_box = true,
	.resets_keys = true,
	.rpc = "key_release",
	.start = release_start,
	.answer = release_answer,
};
