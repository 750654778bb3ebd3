/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ps_rpc.c - PS reads and writes on the progress thread: pbox_ps_read,
 * pbox_ps_write and pbox_ps_set_steps become a chain of key_read /
 * key_write calls on the control connection (docs/rpc.md), one piece of
 * PS_RPC_PIECE floats in flight at a time, base64 in JSON. A call is
 * checked against its key first: its count, and a part the key's
 * optimizer lacks is PBOX_EINVAL (as pbox.h says), not the box's refusal.
 * The request is in state REQ_RPC meanwhile; its timeout counts from the
 * last answer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/b64.h"
#include "client/ops/ops.h"

static const char *const part_names[] = { "weights", "state0", "state1" };

static const char *method_of(const struct pbox_req *r)
{
	return r->op->rpc;
}

/* The params of r's next piece (n floats from done_elems on). */
static json_t *piece_params(pbox_client *c, struct pbox_req *r, size_t n)
{
	json_t *p = json_pack("{s:I, s:i, s:I, s:s, s:I}", "job_id", (json_int_t)c->job_id,
			      "rank", c->rank, "key", (json_int_t)r->key, "part",
			      part_names[r->part], "offset", (json_int_t)r->done_elems);

	if (!p)
		return NULL;
	if (r->op == &op_ps_read) {
		json_object_set_new(p, "count", json_integer((json_int_t)n));
		return p;
	}
	if (r->set_steps) {
		json_object_del(p, "offset");
		json_object_set_new(p, "steps", json_integer((json_int_t)r->steps));
		return p;
	}
	char *text = malloc(b64_len(n * sizeof(float)) + 1);
	if (!text) {
		json_decref(p);
		return NULL;
	}
	b64_encode(text, (const float *)r->src + r->done_elems, n * sizeof(float));
	json_object_set_new(p, "data", json_string(text));
	free(text);
	return p;
}

/* Send r's next key_read/key_write piece. */
static void ps_rpc_next(pbox_client *c, struct pbox_req *r, uint64_t now)
{
	size_t left = r->count - r->done_elems;
	size_t n = r->set_steps ? 0 : left < PS_RPC_PIECE ? left : PS_RPC_PIECE;

	(void)now;
	struct rpc_pending *p = calloc(1, sizeof(*p));
	json_t *params = p ? piece_params(c, r, n) : NULL;
	if (!params) {
		free(p);
		progress_finish(c, r, PBOX_ENOMEM, "job '%s' rank %d key %u: out of memory",
				c->job, c->rank, r->key);
		return;
	}
	p->elems = n;
	progress_rpc_send(c, r, method_of(r), params, p);
}

static void ps_rpc_start(pbox_client *c, struct pbox_req *r, uint64_t now)
{
	const struct key_state *ks = r->ks;
	unsigned planes = ps_optim_planes(&ks->optim);
	bool sgd = ks->optim.kind == PBOX_OPTIM_SGD;

	if (!r->set_steps && r->count != ks->count) {
		progress_finish(c, r, PBOX_EINVAL, "job '%s' rank %d key %u: the key has %llu "
				"elements, the call %zu", c->job, c->rank, r->key,
				(unsigned long long)ks->count, r->count);
		return;
	}
	/* part n > 0 is state plane n - 1: only those the optimizer keeps */
	if (r->part > planes) {
		progress_finish(c, r, PBOX_EINVAL, "job '%s' rank %d key %u: no part %s: the "
				"key's optimizer (%s%s) keeps %u state plane%s", c->job, c->rank,
				r->key, part_names[r->part], ps_optim_name(ks->optim.kind),
				sgd && planes == 0 ? " without momentum" : "", planes,
				planes == 1 ? "" : "s");
		return;
	}
	r->state = REQ_RPC;
	r->progress_ns = now;
	ps_rpc_next(c, r, now);
}

/* A key_read piece's data into r's buffer: 0, or PBOX_EPROTO if it does
 * not fit. */
static int take_data(struct pbox_req *r, const json_t *res, size_t n)
{
	const char *text = json_string_value(json_object_get(res, "data"));
	size_t len = text ? strlen(text) : 0;

	if (!text || b64_len(n * sizeof(float)) != len)
		return PBOX_EPROTO;
	long got = b64_decode((float *)r->buf + r->done_elems, n * sizeof(float), text, len);
	r->steps = (uint64_t)json_integer_value(json_object_get(res, "steps"));
	return got == (long)(n * sizeof(float)) ? 0 : PBOX_EPROTO;
}

static void ps_rpc_answer(pbox_client *c, struct rpc_pending *p, const json_t *msg, uint64_t now)
{
	struct pbox_req *r = p->req;
	json_t *e = json_object_get(msg, "error");
	char err[CLIENT_MSG_LEN];

	if (!r)
		return; /* its request finished (timed out) meanwhile */
	if (e) {
		int rc = ctrl_error(e, method_of(r), err, sizeof(err));
		progress_finish(c, r, rc, "job '%s' rank %d key %u: %s", c->job, c->rank,
				r->key, err);
		return;
	}
	if (r->op == &op_ps_read && take_data(r, json_object_get(msg, "result"), p->elems)) {
		progress_finish(c, r, PBOX_EPROTO, "job '%s' rank %d key %u: key_read answered "
				"with data that is not %zu floats in base64", c->job, c->rank,
				r->key, p->elems);
		return;
	}
	r->done_elems += p->elems;
	r->progress_ns = now;
	if (r->set_steps || r->done_elems == r->count) {
		if (r->steps_out)
			*r->steps_out = r->steps;
		xfer_finish(c, r, 0, NULL);
		return;
	}
	ps_rpc_next(c, r, now);
}

/* The kinds: a chain of key_read or key_write calls on a READY PS key. A
 * write changes what the box holds: if it ends without an answer, its key
 * is unsure until the answer comes. */
const struct req_op op_ps_read = {
	.ps = true,
	.rpc = "key_read",
	.start = ps_rpc_start,
	.answer = ps_rpc_answer,
};

const struct req_op op_ps_write = {
	.ps = true,
	.changes_box = true,
	.rpc = "key_write",
	.start = ps_rpc_start,
	.answer = ps_rpc_answer,
};
