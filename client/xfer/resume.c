/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * resume.c - going on after the control connection to the box was lost
 * (a pboxd restart, docs/reliability.md "A box restart"), when PBOX_RESUME
 * is on (the default):
 *
 *   1. The progress thread keeps the calls in flight and tries to connect
 *      again, with back-off (RESUME_BACKOFF_MIN_MS doubling to _MAX_MS: a box back
 *      within a second or two is found within a second of it),
 *      until the client's timeout_ms since the loss: then every call fails
 *      PBOX_ECLOSED naming the box and the last error. No retransmission
 *      goes out meanwhile.
 *   2. Connected: box_endpoints must list the same endpoints (else the
 *      calls fail: the transport was opened for them), then job_join as
 *      pbox_connect's (the same job, rank, world and secret: the first
 *      rank back makes the job again) gives a new job id and token, so no
 *      packet of the box's earlier life is ever taken again.
 *   3. Every declared key is declared again. A dense key whose ranks all
 *      get the whole result (allreduce, broadcast, allgather; host
 *      buffers) resumes: its declaration carries resume_round, the lowest
 *      round it holds a result of, and once answered the rank sends each
 *      segment's latest result as a FINAL push (the box takes it as that
 *      round's result; ranks that lacked it get it) until the box answers
 *      it, while its call in flight sends again what has no result yet.
 *      Sums stay exact: a result is one the box computed; a contribution
 *      goes only into a round no rank has a result of (docs/protocol.md
 *      "Resuming after a box restart").
 *   4. Any other key (PS, sparse, reduce_scatter, a device call) cannot
 *      resume its call in flight: the call fails PBOX_EAGAIN, and the key
 *      goes on from the box's answer (a PS key restored from the box's
 *      checkpoint starts at its step: pbox_ps_read tells which).
 *
 * Part of xfer: runs on the progress thread only.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/core/note.h"
#include "client/xfer/xfer.h"

#define RESUME_BACKOFF_MIN_MS  100
#define RESUME_BACKOFF_MAX_MS  1000
#define RESUME_CONNECT_MS      1000   /* each try's connect and answers */
#define RESUME_FINAL_RETRY_MS  300    /* FINAL pushes not answered: again */
#define NS_PER_MS              1000000ull

bool resume_key_ok(const struct key_state *ks)
{
	return !ks->is_ps && !ks->sparse && ks->coll != COLL_REDUCE_SCATTER;
}

/* Drop every control call awaiting an answer from the box that is gone:
 * a declaration is sent again once rejoined; a call of a kind fails
 * PBOX_EAGAIN; an orphan's keys are sure again (the box forgot them). */
static void drop_rpcs(pbox_client *c, const char *why)
{
	struct rpc_pending *p = c->rpcs;

	c->rpcs = NULL;
	while (p) {
		struct rpc_pending *next = p->next;
		if (p->held) {
			for (size_t i = 0; i < p->nheld; i++) {
				struct key_state *ks = keytab_find(&c->keys, p->held[i]);
				if (ks && ks->unsure)
					ks->unsure--;
			}
			free(p->held);
		} else if (p->ks) {
			/* declared again (rejoin_keys): a key resuming from an
			 * earlier loss still has its layout, results and call */
			p->ks->phase = p->ks->resuming ? KEY_READY : KEY_NEW;
		} else if (p->req) {
			progress_finish(c, p->req, PBOX_EAGAIN, "job '%s' rank %d key %u: %s during "
					"%s: call again", c->job, c->rank, p->req->key, why,
					p->op->rpc ? p->op->rpc : "the call");
		}
		free(p);
		p = next;
	}
}

bool resume_begin(pbox_client *c, const char *why, uint64_t now)
{
	struct xfer *x = c->x;

	if (!c->resume || x->rc_state)
		return c->resume;
	ctrl_close(&c->ctrl);
	c->ctrl_open = false;
	x->rc_state = 1;
	x->rc_since_ns = now;
	x->rc_next_ns = now;
	x->rc_backoff_ms = RESUME_BACKOFF_MIN_MS;
	x->rc_tries = 0;
	snprintf(x->rc_why, sizeof(x->rc_why), "%s", why);
	note(KNOB_DEBUG_WARN, "job '%s' rank %d: %s; reconnecting (for up to %u ms)", c->job,
	     c->rank, why, c->opts.timeout_ms);
	drop_rpcs(c, "the connection to the box was lost");
	return true;
}

/* The box's endpoints now must be those the transport was opened for. */
static int same_endpoints(pbox_client *c, char *err, size_t errlen)
{
	json_t *res;
	int rc = ctrl_call(&c->ctrl, "box_endpoints", NULL, RESUME_CONNECT_MS, &res, err, errlen);

	if (rc < 0)
		return rc;
	json_t *eps = json_object_get(res, "endpoints");
	bool same = json_integer_value(json_object_get(res, "version")) == WIRE_VERSION &&
		    json_array_size(eps) == c->neps;
	for (unsigned i = 0; same && i < c->neps; i++) {
		json_t *e = json_array_get(eps, i);
		struct in_addr ip;
		const char *s = json_string_value(json_object_get(e, "ip"));
		same = s && inet_pton(AF_INET, s, &ip) == 1 &&
		       ip.s_addr == c->eps[i].sin_addr.s_addr &&
		       json_integer_value(json_object_get(e, "port")) == ntohs(c->eps[i].sin_port);
	}
	json_decref(res);
	if (!same) {
		snprintf(err, errlen, "box %.200s came back with other data endpoints or another "
			 "wire protocol version", c->control);
		return PBOX_EPROTO;
	}
	return 0;
}

/* job_join again, as pbox_connect did: a new job id and token. */
static int rejoin(pbox_client *c, char *err, size_t errlen)
{
	uint32_t seg = c->seg_bytes;
	json_t *res, *params = client_join_params(c);
	int rc = ctrl_call(&c->ctrl, "job_join", params, RESUME_CONNECT_MS, &res, err, errlen);

	if (rc < 0)
		return rc;
	rc = client_join_answer(c, res);
	json_decref(res);
	if (rc < 0) {
		snprintf(err, errlen, "%s", c->last_err);
		return rc;
	}
	if (c->seg_bytes != seg) {
		snprintf(err, errlen, "box %.200s came back with %u-byte segments, not %u", c->control,
			 c->seg_bytes, seg);
		return PBOX_EPROTO;
	}
	return 0;
}

/* The lowest round ks holds a result of (0: none). */
static uint32_t lowest_round(const struct key_state *ks)
{
	uint32_t low = 0;

	for (uint32_t s = 0; s < ks->lay.nsegs; s++)
		if (ks->shadow_round[s] && (!low || ks->shadow_round[s] < low))
			low = ks->shadow_round[s];
	return low;
}

/* key_declare of ks again, from what it was declared with. */
static int declare_again(pbox_client *c, struct key_state *ks, uint32_t resume_round)
{
	struct rpc_pending *p = calloc(1, sizeof(*p));
	char err[CLIENT_MSG_LEN];

	if (!p)
		return PBOX_ENOMEM;
	json_t *params = ks->decl ? json_deep_copy(ks->decl) : NULL;
	if (params)
		json_object_set_new(params, "job_id", json_integer((json_int_t)c->job_id));
	if (!params) {
		free(p);
		return PBOX_ENOMEM;
	}
	if (resume_round)
		json_object_set_new(params, "resume_round", json_integer(resume_round));
	int rc = ctrl_send(&c->ctrl, "key_declare", params, RESUME_CONNECT_MS, &p->id, err,
			   sizeof(err));
	if (rc < 0) {
		free(p);
		return rc;
	}
	p->ks = ks;
	p->next = c->rpcs;
	c->rpcs = p;
	ks->phase = KEY_DECLARING;
	ks->resuming = true;
	return 0;
}

/* Every key the client knows, at the rejoined box. */
static int rejoin_keys(pbox_client *c, const char *why)
{
	for (uint32_t i = 0; i < c->keys.cap; i++) {
		struct key_state *ks = c->keys.tab[i];
		if (!ks || ks->phase == KEY_NEW) {
			/* a declaration that was on its way: its call declares again */
			if (ks && ks->req && ks->req->state == REQ_DECLARING)
				progress_declare(c, ks->req);
			continue;
		}
		bool resumes = ks->shadow && (!ks->req || !ks->req->gk);
		if (!resumes && ks->req) {   /* (its key stays: declared again below) */
			/* a kept key's call made again is the same round: the
			 * ranks that finished it hand its results over (FINAL) */
			bool again = ks->shadow && ks->req->state == REQ_STREAMING;
			progress_finish(c, ks->req, PBOX_EAGAIN, "job '%s' rank %d key %u: %s during "
					"the call (round %u); this kind of call cannot resume: call "
					"again", c->job, c->rank, ks->key, why, ks->round);
			if (again)
				ks->round--;
		}
		int rc = declare_again(c, ks, resumes ? lowest_round(ks) : 0);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* One try: connect, check, rejoin, declare. 0, or the error (err). */
static int try_rejoin(pbox_client *c, char *err, size_t errlen)
{
	int rc = ctrl_connect(&c->ctrl, c->control, RESUME_CONNECT_MS, err, errlen);

	if (rc == 0)
		rc = same_endpoints(c, err, errlen);
	if (rc == 0)
		rc = rejoin(c, err, errlen);
	if (rc == 0) {
		c->ctrl_open = true;
		rc = rejoin_keys(c, c->x->rc_why);
		if (rc < 0)
			snprintf(err, errlen, "declaring its keys again: %s", pbox_strerror(rc));
	}
	if (rc < 0) {
		ctrl_close(&c->ctrl);
		c->ctrl_open = false;
	}
	return rc;
}

void resume_poll(pbox_client *c, uint64_t now)
{
	struct xfer *x = c->x;
	char err[CLIENT_MSG_LEN] = "";

	if (!x->rc_state || now < x->rc_next_ns)
		return;
	x->rc_tries++;
	int rc = try_rejoin(c, err, sizeof(err));
	now = clock_ns();
	if (rc == 0) {
		x->rc_state = 0;
		stat_add(&c->stats.rejoins, 1);
		note(KNOB_DEBUG_WARN, "job '%s' rank %d: rejoined box %s after %.1f s (%u tries); "
		     "resuming", c->job, c->rank, c->control,
		     (double)(now - x->rc_since_ns) / 1e9, x->rc_tries);
		for (struct pbox_req *r = x->act_head; r; r = r->act_next)
			r->progress_ns = now;   /* the outage is not the calls' */
		x->heartbeat_ns = now;
		return;
	}
	bool fatal = rc == PBOX_EREJECTED || rc == PBOX_EABORTED || rc == PBOX_EPROTO;
	if (fatal || now - x->rc_since_ns >= (uint64_t)c->opts.timeout_ms * NS_PER_MS) {
		char msg[CLIENT_MSG_LEN];
		snprintf(msg, sizeof(msg), "%.200s, and %s after %.1f s (%u tries): %.200s", x->rc_why,
			 fatal ? "the job could not go on" : "could not rejoin the job",
			 (double)(now - x->rc_since_ns) / 1e9, x->rc_tries, err);
		x->rc_state = 0;
		c->resume = false;   /* (the connection stays closed) */
		xfer_fatal(c, fatal ? rc : PBOX_ECLOSED, msg);
		return;
	}
	x->rc_next_ns = now + (uint64_t)x->rc_backoff_ms * NS_PER_MS;
	x->rc_backoff_ms = x->rc_backoff_ms * 2 > RESUME_BACKOFF_MAX_MS ? RESUME_BACKOFF_MAX_MS
									 : x->rc_backoff_ms * 2;
}

/* The layout the rejoined box answered must be the one ks had: the
 * results and the call in flight are cut by it. */
static bool same_layout(const struct seg_layout *a, const struct seg_layout *b)
{
	return a->count == b->count && a->seg_elems == b->seg_elems && a->nsegs == b->nsegs &&
	       a->nchunks == b->nchunks && a->segs_per_chunk == b->segs_per_chunk &&
	       !memcmp(a->chunk_ep, b->chunk_ep, a->nchunks * sizeof(*a->chunk_ep));
}

int resume_declared(pbox_client *c, struct key_state *ks, struct seg_layout *l, uint64_t now)
{
	struct pbox_req *r = ks->req;

	ks->resuming = false;
	if (!ks->shadow) {   /* goes on from the box's rounds: its layout */
		int rc = key_set_layout(ks, l);
		if (rc == 0 && c->resume && resume_key_ok(ks))
			key_keep_shadow(ks);   /* (out of memory: none kept) */
		return rc;
	}
	if (!same_layout(&ks->lay, l)) {
		free(l->chunk_ep);
		l->chunk_ep = NULL;
		ks->phase = KEY_NEW;
		key_drop_shadow(ks);
		if (r)
			progress_finish(c, r, PBOX_EPROTO, "job '%s' rank %d key %u: box %s came back "
					"cutting the key another way (its settings changed): the call "
					"cannot resume", c->job, c->rank, ks->key, c->control);
		return 0;
	}
	free(l->chunk_ep);
	l->chunk_ep = NULL;
	ks->phase = KEY_READY;
	/* every result this rank holds goes to the box: another rank may lack it */
	memset(ks->final_due, 0, seg_bitmap_words(ks->lay.nsegs) * sizeof(*ks->final_due));
	ks->nfinal = 0;
	for (uint32_t s = 0; s < ks->lay.nsegs; s++)
		if (ks->shadow_round[s]) {
			seg_bit_set(ks->final_due, s);
			ks->nfinal++;
		}
	ks->final_ns = now;
	if (ks->nfinal)
		c->x->finals++;
	if (r && r->state == REQ_STREAMING)
		xfer_resend_all(c, r, now);
	return 0;
}

/* FINAL pushes of ks's segments still due, from its shadow. */
static void send_finals(pbox_client *c, struct key_state *ks)
{
	const struct seg_layout *l = &ks->lay;
	size_t esz = wire_dtype_size(ks->dtype);

	for (uint32_t s = 0; s < l->nsegs; s++) {
		if (!seg_bit(ks->final_due, s))
			continue;
		if (c->x->ntxq == XFER_TX_BURST)
			xfer_flush(c);
		uint32_t n = seg_len(l, s);
		c->x->txq[c->x->ntxq++] = (struct tp_pkt){
			.hdr = { .type = WIRE_PUSH, .dtype = ks->dtype,
				 .flags = WIRE_FLAG_FINAL | WIRE_FLAG_NOTICE,
				 .rank = (uint16_t)c->rank, .count = (uint16_t)n,
				 .job = c->job_id, .token = c->token, .key = ks->key, .seg = s,
				 .round = ks->shadow_round[s] },
			.payload = ks->shadow + (size_t)seg_first(l, s) * esz,
			.len = n * esz,
			.ep = seg_endpoint(l, s),
		};
		stat_add(&c->stats.pkts_sent, 1);
		stat_add(&c->stats.finals_sent, 1);
	}
	xfer_flush(c);
}

void resume_finals(pbox_client *c, uint64_t now)
{
	if (!c->x->finals || c->x->rc_state)
		return;
	for (uint32_t i = 0; i < c->keys.cap; i++) {
		struct key_state *ks = c->keys.tab[i];
		if (!ks || !ks->nfinal || ks->phase != KEY_READY || now < ks->final_ns)
			continue;
		send_finals(c, ks);
		ks->final_ns = now + RESUME_FINAL_RETRY_MS * NS_PER_MS;
	}
}

bool resume_answered(pbox_client *c, struct key_state *ks, const struct wire_msg *m)
{
	bool stale = m->type == WIRE_ERROR && m->status == WIRE_ST_STALE;

	if (!ks || !ks->nfinal || m->seg >= ks->lay.nsegs || !seg_bit(ks->final_due, m->seg))
		return stale;
	if (stale || (m->type == WIRE_RESULT && m->round >= ks->shadow_round[m->seg])) {
		seg_bit_clear(ks->final_due, m->seg);
		if (--ks->nfinal == 0)
			c->x->finals--;
	}
	return stale;
}

int resume_poll_ms(const pbox_client *c, uint64_t now)
{
	const struct xfer *x = c->x;
	uint64_t wake = UINT64_MAX;

	if (x->rc_state)
		wake = x->rc_next_ns;
	else if (x->finals)
		wake = now + RESUME_FINAL_RETRY_MS * NS_PER_MS;
	if (wake == UINT64_MAX)
		return -1;
	return wake <= now ? 0 : (int)((wake - now + NS_PER_MS - 1) / NS_PER_MS);
}
