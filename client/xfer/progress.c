/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * progress.c - the progress thread of a libpbox client: one poll() loop
 * over the eventfd (new requests, stop), the control connection (answers to
 * key_declare, the job_aborted notification, end of stream) and the
 * transport's descriptors (RESULT and ERROR packets), then the device calls'
 * chunks that reached the host (gpu_stage.c), the window fill and the
 * timers.
 *
 * Request life: QUEUED (in c->sub_*) -> admitted here -> DECLARING (first
 * use of its key: key_declare sent, answer awaited without blocking) ->
 * STREAMING (xfer.c) -> finished (xfer_finish). A key's state lives in the
 * key table and outlives requests, so a late key_declare answer for a
 * request that already timed out still completes the key's declaration.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/xfer/xfer.h"

#define CTRL_SEND_MS 1000

void progress_finish(pbox_client *c, struct pbox_req *r, int rc, const char *fmt, ...)
{
	char msg[CLIENT_MSG_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	xfer_finish(c, r, rc, msg);
}

/* Start r on its READY key if the call matches the declaration: the
 * checks every kind shares, then its kind's start. */
static void start_checked(pbox_client *c, struct pbox_req *r, uint64_t now)
{
	struct key_state *ks = r->ks;
	bool sparse = r->op->sparse;
	bool ps = r->op->ps;

	if (sparse != ks->sparse) {
		progress_finish(c, r, PBOX_EINVAL, "job '%s' rank %d key %u: %s", c->job, c->rank,
				r->key, ks->sparse ? "a sparse key (pbox_allreduce_topk or "
				"pbox_allreduce_sparse): dense calls cannot use it" : "a dense key: "
				"sparse calls need a key of their own");
		return;
	}
	if (r->coll != ks->coll || (r->coll == COLL_BROADCAST && r->root != ks->root)) {
		progress_finish(c, r, PBOX_EINVAL, "job '%s' rank %d key %u: declared for %s "
				"(root %u); this call is a %s (root %u): use a key per collective",
				c->job, c->rank, r->key, key_coll_name(ks->coll), ks->root,
				key_coll_name(r->coll), r->root);
		return;
	}
	if (ps != ks->is_ps) {
		progress_finish(c, r, PBOX_EINVAL,
			   "job '%s' rank %d key %u: %s", c->job, c->rank, r->key, ks->is_ps ?
			   "a PS key (pbox_declare_optimizer): use pbox_push_pull, not allreduce" :
			   "not a PS key: declare it with pbox_declare_optimizer first");
		return;
	}
	if (r->op->start)
		r->op->start(c, r, now);
	else
		xfer_start_checked(c, r, now);
}

void xfer_start_checked(pbox_client *c, struct pbox_req *r, uint64_t now)
{
	struct key_state *ks = r->ks;

	/* (an init round pushes f32 weights, whatever the gradients' dtype) */
	r->rdtype = ks->is_ps ? ks->rdtype : r->dtype;
	if (ks->count != r->count || (!(r->push_flags & WIRE_FLAG_INIT) && ks->dtype != r->dtype)) {
		progress_finish(c, r, PBOX_EINVAL,
			   "job '%s' rank %d key %u: declared with %llu %s elements, this call "
			   "has %zu %s (use another key for another size)", c->job, c->rank,
			   r->key, (unsigned long long)ks->count, wire_dtype_name(ks->dtype),
			   r->count, wire_dtype_name(r->dtype));
		return;
	}
	xfer_start(c, r, now);
}

int progress_rpc_send(pbox_client *c, struct pbox_req *r, const char *method,
		      json_t *params, struct rpc_pending *p)
{
	char err[CLIENT_MSG_LEN];

	if (c->x->rc_state) {   /* rejoining the box (resume.c) */
		json_decref(params);
		free(p);
		progress_finish(c, r, PBOX_EAGAIN, "job '%s' rank %d key %u: %s: the box is being "
				"rejoined (%s): call again", c->job, c->rank, r->key, method,
				c->x->rc_why);
		return PBOX_EAGAIN;
	}
	int rc = ctrl_send(&c->ctrl, method, params, CTRL_SEND_MS, &p->id, err, sizeof(err));

	if (rc < 0) {
		free(p);
		progress_finish(c, r, rc, "job '%s' rank %d key %u: %s", c->job, c->rank,
				r->key, err);
		return rc;
	}
	p->req = r;
	p->op = r->op;
	p->next = c->rpcs;
	c->rpcs = p;
	return 0;
}

void progress_rpc_orphan(pbox_client *c, struct rpc_pending *p, const struct pbox_req *r)
{
	size_t n;
	const uint32_t *keys = req_keys(r, &n);

	if (!r->op->changes_box)
		return;   /* a read or a declaration changes nothing at the box */
	p->held = malloc(n * sizeof(*p->held));
	if (!p->held)
		return;   /* out of memory: the keys are not held */
	for (size_t i = 0; i < n; i++) {
		uint32_t key = keys[i];
		struct key_state *ks = keytab_find(&c->keys, key);
		if (ks) {
			ks->unsure++;
			p->held[p->nheld++] = key;
		}
	}
}

/* The answer to a call that ended without it: its keys are sure again,
 * and a key_release the box did record resets them as it would have. */
static void orphan_answer(pbox_client *c, struct rpc_pending *p, const json_t *msg)
{
	bool ok = !json_object_get(msg, "error");

	for (size_t i = 0; i < p->nheld; i++) {
		struct key_state *ks = keytab_find(&c->keys, p->held[i]);
		if (!ks)
			continue;
		ks->unsure--;
		if (p->op->resets_keys && ok && !ks->req) {
			key_reset(ks);
			client_forget_key(c, p->held[i]);
		}
	}
}

void progress_declare(pbox_client *c, struct pbox_req *r)
{
	struct key_state *ks = r->ks;
	struct rpc_pending *p;
	char err[CLIENT_MSG_LEN];

	if (c->x->rc_state)   /* rejoining the box: declared once rejoined (resume.c) */
		return;
	p = calloc(1, sizeof(*p));
	if (!p) {
		progress_finish(c, r, PBOX_ENOMEM, "job '%s' rank %d key %u: out of memory",
			   c->job, c->rank, r->key);
		return;
	}
	json_t *params = json_pack("{s:I, s:i, s:I, s:I, s:s}", "job_id", (json_int_t)c->job_id,
				   "rank", c->rank, "key", (json_int_t)r->key,
				   "count", (json_int_t)r->count, "dtype", wire_dtype_name(r->dtype));
	if (params && r->op->declare_params)
		r->op->declare_params(r, params);
	if (params && r->op->sparse)
		json_object_set_new(params, "sparse", json_true());
	if (params && r->coll != COLL_ALLREDUCE) {
		json_object_set_new(params, "collective", json_string(key_coll_name(r->coll)));
		if (r->coll == COLL_BROADCAST)
			json_object_set_new(params, "root", json_integer(r->root));
	}
	json_t *decl = params ? json_deep_copy(params) : NULL;   /* (resume.c) */
	int rc = ctrl_send(&c->ctrl, "key_declare", params, CTRL_SEND_MS, &p->id, err, sizeof(err));
	if (rc < 0) {
		free(p);
		json_decref(decl);
		progress_finish(c, r, rc, "job '%s' rank %d key %u: %s", c->job, c->rank, r->key, err);
		return;
	}
	json_decref(ks->decl);
	ks->decl = decl;
	p->ks = ks;
	p->next = c->rpcs;
	c->rpcs = p;
	ks->phase = KEY_DECLARING;
	ks->count = r->count;
	ks->dtype = r->dtype;
	ks->is_ps = r->op->ps;
	ks->sparse = r->op->sparse;
	ks->coll = r->coll;
	ks->root = r->root;
	ks->rdtype = ks->is_ps ? r->rdtype : r->dtype;
	if (ks->is_ps)
		ks->optim = r->optim;
}

void progress_admit(pbox_client *c, struct pbox_req *r, uint64_t now)
{
	struct key_state *ks;
	int fatal;
	char msg[CLIENT_MSG_LEN];

	xfer_activate(c, r);
	pthread_mutex_lock(&c->lock);
	fatal = c->fatal_rc;
	memcpy(msg, c->fatal_msg, sizeof(msg));
	pthread_mutex_unlock(&c->lock);
	if (fatal) {
		xfer_finish(c, r, fatal, msg);
		return;
	}
	if (r->op->keyless) {
		r->op->start(c, r, now);
		return;
	}
	ks = keytab_get(&c->keys, r->key);
	if (!ks) {
		progress_finish(c, r, PBOX_ENOMEM, "job '%s' rank %d key %u: out of memory for the key",
			   c->job, c->rank, r->key);
		return;
	}
	if (ks->unsure) {
		progress_finish(c, r, PBOX_EBUSY, "job '%s' rank %d key %u: an earlier key_write "
				"or key_release on this key timed out and the box has not answered "
				"it yet, so what it holds is unknown (try again once it has)",
				c->job, c->rank, r->key);
		return;
	}
	r->ks = ks;
	ks->req = r;
	r->state = REQ_DECLARING;
	r->progress_ns = now;
	if (ks->phase == KEY_READY)
		start_checked(c, r, now);
	else if (ks->phase == KEY_NEW && r->op->declares)
		progress_declare(c, r);
	else if (ks->phase == KEY_NEW)
		progress_finish(c, r, PBOX_EINVAL, "job '%s' rank %d key %u: not a PS key: declare it "
			   "with pbox_declare_optimizer first", c->job, c->rank, r->key);
	/* KEY_DECLARING: an earlier declaration's answer will start r */
}

/* Parse a key_declare result into *l (chunk_ep allocated). 0, or
 * PBOX_EPROTO (the answer does not fit the declaration) or PBOX_ENOMEM,
 * with the cause in err. */
static int parse_layout(const json_t *res, struct key_state *ks, uint32_t seg_bytes,
			unsigned neps, int world, struct seg_layout *l, char *err, size_t errlen)
{
	json_t *chunks = json_object_get(res, "chunks");
	const char *dtype = json_string_value(json_object_get(res, "dtype"));

	memset(l, 0, sizeof(*l));
	l->count = (uint64_t)json_integer_value(json_object_get(res, "count"));
	l->elem = (uint32_t)wire_dtype_size(ks->is_ps ? WIRE_F32 : ks->dtype);
	l->seg_elems = (uint32_t)json_integer_value(json_object_get(res, "seg_elems"));
	l->nsegs = (uint32_t)json_integer_value(json_object_get(res, "nsegs"));
	l->segs_per_chunk = (uint32_t)json_integer_value(json_object_get(res, "segs_per_chunk"));
	l->nchunks = (uint32_t)json_array_size(chunks);
	if ((uint32_t)json_integer_value(json_object_get(res, "key")) != ks->key ||
	    wire_dtype_parse(dtype) != ks->dtype || !json_is_array(chunks)) {
		snprintf(err, errlen, "key, dtype or chunks differ from the declaration");
		return PBOX_EPROTO;
	}
	l->chunk_ep = calloc(l->nchunks ? l->nchunks : 1, sizeof(*l->chunk_ep));
	if (!l->chunk_ep) {
		snprintf(err, errlen, "out of memory for its %u chunks", l->nchunks);
		return PBOX_ENOMEM;
	}
	for (uint32_t i = 0; i < l->nchunks; i++) {
		json_int_t ep = json_integer_value(json_array_get(chunks, i));
		l->chunk_ep[i] = ep < 0 || ep > UINT16_MAX ? UINT16_MAX : (uint16_t)ep;
	}
	json_t *ps = json_object_get(res, "ps");
	if (ks->is_ps != json_is_object(ps) ||
	    (ks->is_ps && wire_dtype_parse(json_string_value(json_object_get(ps,
						"weights_dtype"))) != ks->rdtype)) {
		snprintf(err, errlen, "the PS mode (\"ps\") differs from the declaration");
		return PBOX_EPROTO;
	}
	ks->restored = ks->is_ps && json_is_true(json_object_get(ps, "restored"));
	/* the key's rounds go on from its earlier lives' (a box before 0.9.1
	 * does not say: 1) */
	json_t *fr = json_object_get(res, "first_round");
	json_int_t first = fr ? json_integer_value(fr) : 1;
	if ((fr && !json_is_integer(fr)) || first < 1 || first > UINT32_MAX) {
		snprintf(err, errlen, "\"first_round\" is not a round number");
		return PBOX_EPROTO;
	}
	ks->first_round = (uint32_t)first;
	ks->round = ks->first_round - 1;
	if (ks->sparse != json_is_true(json_object_get(res, "sparse"))) {
		snprintf(err, errlen, "the sparse mode (\"sparse\") differs from the declaration");
		return PBOX_EPROTO;
	}
	const char *coll = json_string_value(json_object_get(res, "collective"));
	json_t *root = json_object_get(res, "root");
	if (coll ? strcmp(coll, key_coll_name(ks->coll)) != 0 : ks->coll != COLL_ALLREDUCE) {
		snprintf(err, errlen, "the collective (\"collective\") differs from the "
			 "declaration");
		return PBOX_EPROTO;
	}
	if (ks->coll == COLL_BROADCAST && json_integer_value(root) != ks->root) {
		snprintf(err, errlen, "the root (\"root\") differs from the declaration");
		return PBOX_EPROTO;
	}
	/* allgather and reduce_scatter keys: a slice per rank, each cut on its own */
	if (ks->coll == COLL_ALLGATHER || ks->coll == COLL_REDUCE_SCATTER)
		return seg_layout_check_sliced(l, ks->count, ks->dtype, seg_bytes, neps,
					       (uint32_t)world, err, errlen) < 0 ? PBOX_EPROTO : 0;
	/* a sparse key's segments are WIRE_SPARSE_SLACK bytes shorter */
	return seg_layout_check(l, ks->count, ks->is_ps ? WIRE_F32 : ks->dtype,
				ks->sparse ? seg_bytes - WIRE_SPARSE_SLACK : seg_bytes,
				neps, err, errlen) < 0 ? PBOX_EPROTO : 0;
}

static void on_declare_result(pbox_client *c, struct key_state *ks, const json_t *res,
			      uint64_t now)
{
	struct seg_layout l;
	char err[CLIENT_MSG_LEN];
	struct pbox_req *r = ks->req;

	/* a resumed key keeps its rounds (resume.c) */
	uint32_t round = ks->round, first = ks->first_round;
	bool resumed = ks->resuming && ks->shadow;
	int rc = parse_layout(res, ks, c->seg_bytes, c->neps, c->world, &l, err, sizeof(err));

	if (resumed) {
		ks->round = round;
		ks->first_round = first;
	}
	if (rc == 0 && ks->resuming) {
		rc = resume_declared(c, ks, &l, now);
		snprintf(err, sizeof(err), "out of memory for the state of its %u segments",
			 l.nsegs);
	} else if (rc == 0 && (rc = key_set_layout(ks, &l)) < 0) {
		snprintf(err, sizeof(err), "out of memory for the state of its %u segments",
			 l.nsegs);
	} else if (rc == 0 && c->resume && resume_key_ok(ks)) {
		key_keep_shadow(ks);   /* (out of memory: none kept) */
	}
	ks->resuming = false;
	r = ks->req;   /* (resume_declared may have ended it) */
	if (rc < 0) {
		free(l.chunk_ep);
		ks->phase = KEY_NEW;
		if (r && rc == PBOX_ENOMEM)
			progress_finish(c, r, rc, "job '%s' rank %d key %u: key_declare answered, "
					"but %s", c->job, c->rank, ks->key, err);
		else if (r)
			progress_finish(c, r, rc, "job '%s' rank %d key %u: bad key_declare "
					"answer from box %s: %s", c->job, c->rank, ks->key,
					c->control, err);
		return;
	}
	if (r && r->state == REQ_DECLARING)
		start_checked(c, r, now);
}

static void on_answer(pbox_client *c, const json_t *msg, uint64_t id, uint64_t now)
{
	struct rpc_pending **pp = &c->rpcs, *p;

	while (*pp && (*pp)->id != id)
		pp = &(*pp)->next;
	if (!(p = *pp))
		return; /* not ours (anymore) */
	*pp = p->next;
	if (p->held) {
		orphan_answer(c, p, msg);
		free(p->held);
		free(p);
		return;
	}
	if (!p->ks) { /* a control call of a kind of request: its own */
		p->op->answer(c, p, msg, now);
		free(p);
		return;
	}
	struct key_state *ks = p->ks;
	free(p);
	json_t *e = json_object_get(msg, "error");
	if (e) {
		char err[CLIENT_MSG_LEN];
		int rc = ctrl_error(e, "key_declare", err, sizeof(err));
		ks->phase = KEY_NEW;
		ks->resuming = false;
		/* released by this rank, not yet by all: declare again shortly
		 * (docs/rpc.md "key_release"), within the request's timeout */
		if (ks->req && json_integer_value(json_object_get(e, "code")) == -EBUSY) {
			/* kept for the timeout's message (r->msg is read only once
			 * the request finished) */
			snprintf(ks->req->msg, sizeof(ks->req->msg), "%s", err);
			xfer_redeclare_later(c, ks->req, now);
			return;
		}
		if (ks->req)
			progress_finish(c, ks->req, rc, "job '%s' rank %d key %u: %s", c->job,
				   c->rank, ks->key, err);
		return;
	}
	on_declare_result(c, ks, json_object_get(msg, "result"), now);
}

/* job_reset (docs/rpc.md): a lost rank was replaced; where each key goes on. */
static void on_reset(pbox_client *c, const json_t *params, const char *reason)
{
	char msg[CLIENT_MSG_LEN];
	json_t *base = json_object_get(params, "base"), *list = json_object_get(params, "done");
	size_t n = json_array_size(list);
	uint32_t (*done)[2] = calloc(n ? n : 1, sizeof(*done));

	snprintf(msg, sizeof(msg), "job '%s': %s", c->job,
		 reason ? reason : "a rank was replaced: call again");
	if (!json_is_integer(base) || json_integer_value(base) < 0 ||
	    json_integer_value(base) >= UINT32_MAX || !done) {
		free(done);
		xfer_fatal(c, done ? PBOX_EPROTO : PBOX_ENOMEM, done ? "job_reset without a base "
			   "round from the box" : "out of memory for a job_reset");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(list, i);
		done[i][0] = (uint32_t)json_integer_value(json_array_get(e, 0));
		done[i][1] = (uint32_t)json_integer_value(json_array_get(e, 1));
	}
	xfer_job_reset(c, msg, (uint32_t)json_integer_value(base),
		       (const uint32_t (*)[2])done, n);
	free(done);
}

static void on_notification(pbox_client *c, const char *method, const json_t *params)
{
	char msg[CLIENT_MSG_LEN];
	json_t *jid = json_object_get(params, "job_id");

	bool reset = strcmp(method, "job_reset") == 0;
	if (!reset && strcmp(method, "job_aborted") != 0)
		return;
	if (json_is_integer(jid) && (uint32_t)json_integer_value(jid) != c->job_id)
		return;
	const char *reason = json_string_value(json_object_get(params, "reason"));
	if (reset) {
		on_reset(c, params, reason);
		return;
	}
	snprintf(msg, sizeof(msg), "job '%s' aborted: %s", c->job,
		 reason ? reason : "(the box gave no reason)");
	xfer_fatal(c, PBOX_EABORTED, msg);
}

static void on_ctrl_msg(void *arg, json_t *msg)
{
	pbox_client *c = arg;
	const char *method = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id");

	if (method && !id)
		on_notification(c, method, json_object_get(msg, "params"));
	else if (!method && json_is_integer(id))
		on_answer(c, msg, (uint64_t)json_integer_value(id), clock_ns());
}

/* Lines the socket has, or (buffered) only those read already. */
static void read_ctrl(pbox_client *c, bool buffered)
{
	char err[CLIENT_MSG_LEN];
	int rc = buffered ? ctrl_read_buffered(&c->ctrl, on_ctrl_msg, c, err, sizeof(err))
			  : ctrl_read(&c->ctrl, on_ctrl_msg, c, err, sizeof(err));

	if (rc == PBOX_ECLOSED && resume_begin(c, err, clock_ns()))
		return;   /* (resume.c reconnects) */
	if (rc < 0) {
		c->ctrl_open = false;
		xfer_fatal(c, rc, err);
	}
}

/* A line on the control connection every XFER_HEARTBEAT_MS while the
 * client lives, calls or not: the box tells a rank whose process runs (a
 * long checkpoint, an evaluation) from one that is gone. A heartbeat that
 * cannot be sent is not an error here: a closed connection is read as one. */
static void heartbeat(pbox_client *c, uint64_t now)
{
	char err[CLIENT_MSG_LEN];

	if (!c->ctrl_open || now < c->x->heartbeat_ns)
		return;
	c->x->heartbeat_ns = now + XFER_HEARTBEAT_MS * 1000000ull;
	ctrl_notify(&c->ctrl, "heartbeat", NULL, CTRL_SEND_MS, err, sizeof(err));
}

/* Take the submitted requests; false once pbox_close asked to stop. */
static bool take_submissions(pbox_client *c, uint64_t now)
{
	uint64_t v;
	struct pbox_req *r;
	bool stop;

	if (read(c->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return true;
	pthread_mutex_lock(&c->lock);
	r = c->sub_head;
	c->sub_head = c->sub_tail = NULL;
	stop = c->stop;
	pthread_mutex_unlock(&c->lock);
	while (r) {
		struct pbox_req *next = r->sub_next;
		r->sub_next = NULL;
		progress_admit(c, r, now);
		r = next;
	}
	return !stop;
}

void *progress_main(void *arg)
{
	pbox_client *c = arg;

	/* Lines that came with pbox_connect's last answer (a job_aborted
	 * right after job_join's) are handled first: poll() would not report
	 * them. (No ctrl_call runs while this thread does: pbox_connect's come
	 * before it, pbox_close's job_leave after it.) */
	read_ctrl(c, true);
	for (;;) {
		struct pollfd p[2 + TP_MAX_FDS] = {
			{ .fd = c->evfd, .events = POLLIN },
			{ .fd = c->ctrl_open ? c->ctrl.fd : -1, .events = POLLIN },
		};
		int fds[TP_MAX_FDS];
		unsigned nfds = 2 + c->tp.ops->poll_fds(&c->tp, fds);
		for (unsigned i = 2; i < nfds; i++)
			p[i] = (struct pollfd){ .fd = fds[i - 2], .events = POLLIN };
		/* busy_poll: spin while calls are active instead of sleeping */
		uint64_t t = clock_ns();
		int wait_ms = c->opts.busy_poll && c->x->act_head ? 0 : xfer_poll_ms(c, t);
		int rs_ms = resume_poll_ms(c, t);
		if (rs_ms >= 0 && rs_ms < wait_ms)
			wait_ms = rs_ms;
		if (c->x->heartbeat_ns <= t)
			wait_ms = 0;
		else if (wait_ms > (int)((c->x->heartbeat_ns - t) / 1000000 + 1))
			wait_ms = (int)((c->x->heartbeat_ns - t) / 1000000 + 1);
		/* device chunks on their way to the host: their events have no
		 * fd, so look again soon (gpu/gpu_stage.c) */
		static const struct timespec gpu_nap = { 0, XFER_STAGING_POLL_NS };
		int n = c->x->staging && wait_ms ? ppoll(p, nfds, &gpu_nap, NULL)
						    : poll(p, nfds, wait_ms);
		if (n < 0 && errno != EINTR) {
			snprintf(c->x->pend_msg, sizeof(c->x->pend_msg), "poll: %s", strerror(errno));
			xfer_fatal(c, PBOX_ESYS, c->x->pend_msg);
		}
		uint64_t now = clock_ns();
		if ((p[0].revents & POLLIN) && !take_submissions(c, now))
			break;
		if (p[1].revents)
			read_ctrl(c, false);
		bool readable = wait_ms == 0 && c->x->act_head;
		short rev[TP_MAX_FDS];
		for (unsigned i = 2; i < nfds; i++) {
			rev[i - 2] = p[i].revents;
			readable |= (p[i].revents & POLLIN) != 0;
		}
		if (c->tp.ops->polled)
			c->tp.ops->polled(&c->tp, rev, nfds - 2);
		if (readable)
			xfer_recv(c, now);
		xfer_apply_pending(c);
		if (c->x->staging)
			client_ext_staging_poll(c, now);
		if (c->x->rc_state) {   /* the box is gone: nothing is sent */
			resume_poll(c, clock_ns());
			continue;
		}
		xfer_fill(c, now);
		xfer_timers(c, clock_ns());
		resume_finals(c, clock_ns());
		xfer_apply_pending(c);
		heartbeat(c, now);
	}
	xfer_fatal(c, PBOX_ECLOSED, "the client was closed (pbox_close) during the call");
	return NULL;
}
