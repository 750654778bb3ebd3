/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xfer.c - libpbox's send/receive/retransmit engine, run by the progress
 * thread only.
 *
 * A request streams PUSH packets of its round: segment s carries
 * buf[s*seg_elems ...] to the endpoint owning chunk s / segs_per_chunk.
 * One global window bounds the segments in flight over all requests;
 * requests take slots in submission order. Its size is twice the measured
 * bandwidth-delay product (struct bdp_est), at least XFER_WIN_MIN and at
 * most opts.window segments. A sparse key's records count by their bytes
 * (cwnd x seg_bytes in flight), from a pool of slots XFER_SPARSE_SLOTS
 * larger: at 1% density some 60 of them fill one segment's bytes. Every RESULT is
 * checked (wire_decode; type, job, token, rank, the sender is the box
 * endpoint of its segment, key, round == the key's current round, segment
 * range, dtype, exact count) and copied into the caller's buffer once;
 * later copies count as dup_results. A datagram with our token from
 * elsewhere (a sniffed token) counts as foreign_packets, whatever its
 * type: only the box may complete, pause, hurry or abort a segment.
 *
 * Recovery (docs/protocol.md "Recovery"): a segment is sent again with the
 * RETX flag at once when RACK finds it lost (a segment sent after it has
 * its result: recovery.h) or when the box NACKs it (the box has every
 * contribution but ours; ignored if our last copy left less than a path
 * round trip ago, as it may still be on its way). A WAIT means the box has
 * our contribution and waits for other ranks: RACK leaves the segment
 * alone and its timer is set no earlier than the time the round has been
 * open, so a rank waiting for a straggler asks again at a pace that backs
 * off with the straggler's delay, not at every timeout; once a segment
 * first sent after it completes, its RESULT is overdue and it asks at once
 * (rack_wait_due). A segment overtaken but not yet overdue gets a RACK
 * timer (rack_timed), as the last ones of a call have nothing after them.
 * CE marks and heavy loss shrink the AIMD window (recovery.h), which caps
 * the BDP one.
 *
 * Timeouts: a slot's segment is sent again with the RETX flag when
 * its deadline passes. The timeout adapts to the measured round trip
 * (struct rtt_est, RFC 6298): every result of a segment sent only once
 * (Karn's rule) is a sample from its first PUSH to its RESULT; before the
 * first sample it is opts.rto_ms. It is doubled on each retransmission of
 * that segment, capped at XFER_BACKOFF_MAX_US (or the estimate, if larger),
 * and back to the estimate once
 * the request makes progress (a new result bumps the request's epoch,
 * which resets the slot's retransmission count).
 * A request that neither gets a new result nor sends a new segment for
 * opts.timeout_ms fails PBOX_ETIMEDOUT naming job, rank, key, round and the
 * missing segments. While its ready segments wait for window room held by
 * the requests ahead of it, it progresses as they do (it is merely queued).
 *
 * An ERROR packet for this job means the box aborted it: the reason comes
 * with the job_aborted notification, which is awaited ABORT_GRACE_MS before
 * failing everything with a generic message.
 *
 * Hot path: no allocation. Per-segment state lives in the key (slot_of,
 * got: allocated once per key), slots in the window array, outgoing
 * datagrams in txq until the transport takes them as one burst
 * (transport.h). What one client moves against pboxd, and against the
 * raw wire, is in docs/performance.md "One client against the wire".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/core/note.h"
#include "client/xfer/xfer.h"

#define NS_PER_MS 1000000ull
#define NS_PER_US 1000ull
#define RECV_BATCHES_PER_WAKE 16

int xfer_init(pbox_client *c)
{
	uint32_t window = c->opts.window;
	struct xfer *x = calloc(1, sizeof(*x));

	keytab_init(&c->keys);
	if (!x)
		return PBOX_ENOMEM;
	c->x = x;
	c->ctrl_open = true;
	rtt_init(&x->rtt, c->opts.rto_ms * 1000u, XFER_RTO_MIN_US, XFER_RTO_MAX_US);
	bdp_init(&x->bdp);
	x->cwnd = window;
	x->wmax = window;
	x->next_retx_ns = UINT64_MAX;
	aimd_init(&x->aimd, XFER_WIN_MIN, window);
	/* sparse records: up to 16 per segment of the window, in bytes */
	uint32_t pool = window + (window < XFER_SPARSE_SLOTS / 15 ? window * 15 : XFER_SPARSE_SLOTS);
	x->slots = calloc(pool, sizeof(*x->slots));
	if (!x->slots || seg_window_init(&x->win, pool) < 0 ||
	    sendq_init(&x->sendq, pool) < 0) {
		free(x->slots);
		x->slots = NULL;
		seg_window_free(&x->win);
		return PBOX_ENOMEM;
	}
	stat_set(&c->stats.rto_us, x->rtt.rto_us);
	stat_set(&c->stats.window, x->cwnd);
	return 0;
}

void xfer_free(pbox_client *c)
{
	struct xfer *x = c->x;

	while (c->rpcs) {
		struct rpc_pending *p = c->rpcs;
		c->rpcs = p->next;
		free(p->held);
		free(p);
	}
	keytab_free(&c->keys);
	if (!x)
		return;
	seg_window_free(&x->win);
	sendq_free(&x->sendq);
	free(x->slots);
	sparse_free(x);
	free(x);
	c->x = NULL;
}

void xfer_activate(pbox_client *c, struct pbox_req *r)
{
	struct xfer *x = c->x;

	r->act_next = NULL;
	r->act_prev = x->act_tail;
	if (x->act_tail)
		x->act_tail->act_next = r;
	else
		x->act_head = r;
	x->act_tail = r;
}

static void act_unlink(struct xfer *x, struct pbox_req *r)
{
	if (r->act_prev)
		r->act_prev->act_next = r->act_next;
	else if (x->act_head == r)
		x->act_head = r->act_next;
	if (r->act_next)
		r->act_next->act_prev = r->act_prev;
	else if (x->act_tail == r)
		x->act_tail = r->act_prev;
	r->act_prev = r->act_next = NULL;
}

static void slot_release(struct xfer *x, uint32_t i)
{
	struct xslot *s = &x->slots[i];

	s->req->ks->slot_of[s->seg] = 0;
	if (s->req->op->sparse)
		x->sp_inflight[seg_endpoint(&s->req->ks->lay, s->seg)]--;
	s->req = NULL;
	x->nwaited -= s->box_has;
	x->inflight_bytes -= s->bytes;
	sendq_remove(&x->sendq, i);
	seg_window_put(&x->win, i);
}

/* Remember a hard socket error; the progress loop fails the client with
 * it at a point where no request is being iterated (xfer_apply_pending). */
static void sock_error(pbox_client *c, int rc)
{
	if (c->x->pend_rc == 0) {
		c->x->pend_rc = rc;
		memcpy(c->x->pend_msg, c->x->err, sizeof(c->x->pend_msg));
	}
}

void xfer_apply_pending(pbox_client *c)
{
	if (c->x->pend_rc) {
		int rc = c->x->pend_rc;
		c->x->pend_rc = 0;
		xfer_fatal(c, rc, c->x->pend_msg);
	}
}

void xfer_flush(pbox_client *c)
{
	struct xfer *x = c->x;
	uint64_t bytes = 0;

	if (x->ntxq == 0)
		return;
	for (unsigned i = 0; i < x->ntxq; i++)
		bytes += WIRE_HDR_LEN + x->txq[i].len;
	stat_add(&c->stats.bytes_sent, bytes);
	int rc = c->tp.ops->tx_burst(&c->tp, x->txq, x->ntxq, x->err, sizeof(x->err));
	x->ntxq = 0;
	if (x->sp_open) /* the sparse packets are closed: the next record starts one */
		memset(x->sp_open, 0, c->neps * sizeof(*x->sp_open));
	if (rc < 0)
		sock_error(c, rc);
}

static inline void flush(pbox_client *c)
{
	xfer_flush(c);
}

static void send_seg(pbox_client *c, struct pbox_req *r, uint32_t s, uint8_t flags)
{
	const struct seg_layout *l = &r->ks->lay;
	uint32_t n = r->empty || !key_sends_data(r->ks, s, c->rank) ? 0 : seg_len(l, s);
	size_t esz = wire_dtype_size(r->dtype);

	if (r->op->sparse) {
		sparse_send(c, r, s, flags);
		return;
	}
	if (c->x->ntxq == XFER_TX_BURST)
		flush(c);
	flags |= r->push_flags;
	c->x->txq[c->x->ntxq++] = (struct tp_pkt){
		.hdr = { .type = WIRE_PUSH, .dtype = r->dtype,
			 .flags = (uint8_t)(flags | WIRE_FLAG_NOTICE),
			 .rank = (uint16_t)c->rank, .count = (uint16_t)n,
			 .job = c->job_id, .token = c->token, .key = r->key, .seg = s,
			 .round = r->round, .arg = r->arg },
		.payload = n ? (const uint8_t *)r->src + (seg_first(l, s) - r->src_first) * esz
			     : r->buf,
		.len = n * esz,
		.ep = seg_endpoint(l, s),
		.mkey = r->src_mkey,
	};
	stat_add(&c->stats.pkts_sent, 1);
	if (flags & WIRE_FLAG_RETX)
		stat_add(&c->stats.retransmits, 1);
}

/* A fed request (req_feed): its segments whose elements are filled may
 * go. */
static void feed_gate(struct pbox_req *r, uint64_t now)
{
	const struct seg_layout *lay = &r->ks->lay;
	uint64_t e = __atomic_load_n(&r->feed, __ATOMIC_ACQUIRE);
	uint32_t s = r->ready_seg;

	while (s < lay->nsegs && seg_first(lay, s) + seg_len(lay, s) <= e)
		s++;
	if (s > r->ready_seg) {
		r->ready_seg = s;
		r->progress_ns = now;   /* data came: not stalled */
	}
}

/* A fed request's segment has its result: publish the results' prefix
 * (req_drained), and say so at each drain_step. */
static void drain_advance(struct pbox_req *r)
{
	const struct seg_layout *lay = &r->ks->lay;
	uint32_t s = r->drained_seg;

	while (s < lay->nsegs && seg_bit(r->ks->got, s))
		s++;
	if (s == r->drained_seg)
		return;
	r->drained_seg = s;
	uint64_t was = r->drained, now = s == lay->nsegs ? r->count : seg_first(lay, s);
	__atomic_store_n(&r->drained, now, __ATOMIC_RELEASE);
	if (r->on_drain && (now == r->count || !r->drain_step ||
			    now / r->drain_step != was / r->drain_step))
		r->on_drain(r->drain_arg);
}

void xfer_start(pbox_client *c, struct pbox_req *r, uint64_t now)
{
	struct key_state *ks = r->ks;

	ks->round++;
	r->round = ks->round;
	memset(ks->got, 0, seg_bitmap_words(ks->lay.nsegs) * sizeof(*ks->got));
	r->next_seg = 0;
	r->ready_seg = ks->lay.nsegs;
	r->ndone = 0;
	r->epoch = 0;
	r->progress_ns = now;
	r->state = REQ_STREAMING;
	if (r->fed) {   /* its segments wait for their data */
		r->ready_seg = 0;
		r->drained_seg = 0;
		__atomic_store_n(&r->drained, 0, __ATOMIC_RELEASE);
		feed_gate(r, now);
	}
	/* a device call: its segments wait for their chunks; one whose
	 * copies could not start sent nothing: a retry is this round again */
	if (r->gk && !r->dev->start(c, r))
		ks->round--;
}

/* Send r's unsent segments while slots are free; false if none is left. */
static bool fill_req(pbox_client *c, struct pbox_req *r, uint64_t now)
{
	struct xfer *x = c->x;
	struct key_state *ks = r->ks;
	uint64_t deadline = now + x->rtt.rto_us * NS_PER_US;

	if (ks->resuming)   /* declared again at a rejoined box: its answer first */
		return true;
	if (r->fed)
		feed_gate(r, now);
	while (r->next_seg < r->ready_seg) {
		uint32_t s = r->next_seg, i;
		if (seg_bit(ks->got, s)) { /* result already in: nothing to send */
			r->next_seg++;
			continue;
		}
		/* dense: cwnd segments; sparse: cwnd segments' worth of bytes */
		uint32_t bytes = r->op->sparse ? sparse_rec_bytes(r, s)
				 : seg_len(&ks->lay, s) * (uint32_t)wire_dtype_size(r->dtype);
		bool room = r->op->sparse
			    ? x->inflight_bytes < (uint64_t)x->cwnd * c->seg_bytes &&
			      sparse_room(c, seg_endpoint(&ks->lay, s))
			    : seg_window_inflight(&x->win) < x->cwnd;
		if (!room || !seg_window_take(&x->win, &i))
			return false;
		if (r->op->sparse)
			x->sp_inflight[seg_endpoint(&ks->lay, s)]++;
		x->slots[i] = (struct xslot){ .req = r, .seg = s, .epoch = r->epoch,
					      .first_ns = now, .sent_ns = now,
					      .deadline_ns = deadline, .bytes = bytes };
		x->inflight_bytes += bytes;
		ks->slot_of[s] = i + 1;
		sendq_push(&x->sendq, i);
		r->next_seg++;
		r->progress_ns = now; /* window room came: not stalled */
		send_seg(c, r, s, 0);
		if (deadline < x->next_retx_ns)
			x->next_retx_ns = deadline;
	}
	return true;
}

void xfer_fill(pbox_client *c, uint64_t now)
{
	for (struct pbox_req *r = c->x->act_head, *next; r; r = next) {
		next = r->act_next;
		if (r->state == REQ_STREAMING && !fill_req(c, r, now))
			break;
	}
	flush(c);
}

void xfer_finish(pbox_client *c, struct pbox_req *r, int rc, const char *msg)
{
	struct xfer *x = c->x;

	/* Queued packets may point into r's buffers (a NACK's resend queued
	 * earlier in the same receive batch), which the caller may free once
	 * woken: they leave first. */
	xfer_flush(c);
	if (r->gk)   /* a device call: mark the end of its copies (gpu/) */
		rc = r->dev->finish(c, r, rc, &msg);
	act_unlink(x, r);
	if (r->state == REQ_STREAMING && r->ndone < r->ks->lay.nsegs)
		for (uint32_t i = 0; i < x->win.cap; i++)
			if (x->slots[i].req == r)
				slot_release(x, i);
	if (r->ks && r->ks->req == r)
		r->ks->req = NULL;
	for (struct rpc_pending *p = c->rpcs; p; p = p->next)
		if (p->req == r) {
			progress_rpc_orphan(c, p, r);
			p->req = NULL; /* its answer, if it comes, is dropped */
		}
	if (rc == 0 && r->state == REQ_STREAMING)   /* a call that moved data */
		stat_add(&c->stats.calls, 1);
	req_end(c, r, rc, msg);
}

void xfer_fatal(pbox_client *c, int rc, const char *msg)
{
	char m[CLIENT_MSG_LEN];

	pthread_mutex_lock(&c->lock);
	if (c->fatal_rc == 0) {
		c->fatal_rc = rc;
		snprintf(c->fatal_msg, sizeof(c->fatal_msg), "%s", msg);
	}
	rc = c->fatal_rc;
	memcpy(m, c->fatal_msg, sizeof(m));
	pthread_mutex_unlock(&c->lock);
	while (c->x->act_head)
		xfer_finish(c, c->x->act_head, rc, m);
}

/* The last round every segment of key is done with at the box, from a
 * job_reset's list; 0 (none) if the key is not in it. */
static uint32_t reset_done(const uint32_t (*done)[2], size_t n, uint32_t key)
{
	for (size_t i = 0; i < n; i++)
		if (done[i][0] == key)
			return done[i][1];
	return 0;
}

void xfer_job_reset(pbox_client *c, const char *msg, uint32_t base,
		    const uint32_t (*done)[2], size_t n)
{
	for (struct pbox_req *r = c->x->act_head, *next; r; r = next) {
		next = r->act_next;
		/* complete at the box: its lost RESULTs are still answered */
		if (r->state == REQ_STREAMING &&
		    (int32_t)(r->round - reset_done(done, n, r->key)) <= 0)
			continue;
		xfer_finish(c, r, PBOX_EAGAIN, msg);
	}
	for (uint32_t i = 0; i < c->keys.cap; i++) {
		struct key_state *ks = c->keys.tab[i];
		if (!ks || ks->phase != KEY_READY)
			continue;   /* (a declaration's answer says where to start) */
		ks->round = base;
		ks->first_round = base + 1;   /* a PS key: its next round is an init */
		ks->restored = ks->is_ps;     /* ... that keeps the box's weights */
	}
}

/* ERROR: NO_WEIGHTS fails the PS call it answers (nothing was applied);
 * any other status (NO_JOB, NONFINITE) means the job is gone (its reason
 * follows on the control connection, see xfer_timers). */
static void on_error_packet(pbox_client *c, const struct wire_msg *m, uint64_t now)
{
	if (m->status == WIRE_ST_NO_WEIGHTS) {
		struct key_state *ks = keytab_find(&c->keys, m->key);
		struct pbox_req *r = ks ? ks->req : NULL;
		char msg[CLIENT_MSG_LEN];
		/* (an init round's PUSHes are never answered so: this one answers
		 * an earlier gradient's, still arriving) */
		if (!r || r->state != REQ_STREAMING || m->round != r->round ||
		    (r->push_flags & WIRE_FLAG_INIT))
			return;
		snprintf(msg, sizeof(msg), "job '%s' rank %d key %u: the box has no weights "
			 "for this PS key yet (every rank calls pbox_ps_init first); nothing "
			 "was applied", c->job, c->rank, m->key);
		ks->round--; /* the box never opened this round: pbox_ps_init is the first */
		xfer_finish(c, r, PBOX_EINVAL, msg);
		return;
	}
	if (c->x->abort_seen_ns == 0)
		c->x->abort_seen_ns = now;
}

/* The window: the BDP estimate, capped by the AIMD window. */
static void set_cwnd(pbox_client *c)
{
	struct xfer *x = c->x;
	uint32_t w = bdp_window(&x->bdp, c->seg_bytes, XFER_WIN_MIN, x->wmax);
	uint32_t a = aimd_window(&x->aimd);

	x->cwnd = a < w ? a : w;
	stat_set(&c->stats.window, x->cwnd);
}

/* The smoothed round trip in ns (the initial timeout before a sample). */
static uint64_t srtt_ns(const struct xfer *x)
{
	return (uint64_t)(x->rtt.nsamples ? x->rtt.srtt_us : x->rtt.rto_us) * NS_PER_US;
}

/* Send slot i's segment again now, its next timeout rto_us away. */
static void resend(pbox_client *c, uint32_t i, uint64_t now, uint32_t rto_us)
{
	struct xfer *x = c->x;
	struct xslot *s = &x->slots[i];

	s->retxed = true;
	x->nwaited -= s->box_has;
	s->box_has = false;
	s->rack_timed = false;
	s->sent_ns = now;
	s->deadline_ns = now + (uint64_t)rto_us * NS_PER_US;
	if (s->deadline_ns < x->next_retx_ns)
		x->next_retx_ns = s->deadline_ns;
	sendq_push(&x->sendq, i);
	send_seg(c, s->req, s->seg, WIRE_FLAG_RETX);
}

/* A new result of `bytes`; rtt_ns its round trip, 0 if it was
 * retransmitted (Karn): refresh the estimates, the window and counters. */
static void rtt_update(pbox_client *c, uint64_t now, uint32_t bytes, uint64_t rtt_ns)
{
	struct xfer *x = c->x;
	struct rtt_est *e = &x->rtt;
	/* whole microseconds, at least 1 for a measured round trip; 0 = none */
	uint32_t rtt_us = rtt_ns == 0 ? 0 : rtt_ns < NS_PER_US ? 1
			: rtt_ns / NS_PER_US > UINT32_MAX ? UINT32_MAX : (uint32_t)(rtt_ns / NS_PER_US);

	if (rtt_us) {
		rtt_sample(e, rtt_us);
		stat_set(&c->stats.rtt_samples, e->nsamples);
		stat_set(&c->stats.srtt_us, e->srtt_us);
		stat_set(&c->stats.rttvar_us, e->rttvar_us);
		stat_set(&c->stats.rto_us, e->rto_us);
	}
	bdp_on_result(&x->bdp, now / NS_PER_US, bytes, rtt_us, e->srtt_us);
	set_cwnd(c);
}

/* A RESULT that passed the header checks: apply it to its request (ks:
 * its key's state, NULL if the key is unknown). */
static void on_result(pbox_client *c, struct key_state *ks, const struct wire_msg *m,
		      const uint8_t *payload, uint64_t now)
{
	struct pbox_req *r = ks ? ks->req : NULL;

	if (!r || r->state != REQ_STREAMING || m->round != r->round) {
		/* a late copy of an earlier round, or garbage */
		stat_add(ks && m->round <= ks->round ? &c->stats.dup_results
						       : &c->stats.bad_packets, 1);
		return;
	}
	const struct seg_layout *l = &ks->lay;
	size_t esz = wire_dtype_size(r->rdtype);
	if (m->dtype != r->rdtype || (m->flags & WIRE_FLAG_SPARSE) != (ks->sparse ? WIRE_FLAG_SPARSE : 0)) {
		stat_add(&c->stats.bad_packets, 1);
		return;
	}
	if (ks->sparse) {
		sparse_result(c, r, m, payload, now);
		return;
	}
	if (m->seg >= l->nsegs ||
	    m->count != (key_gets_data(ks, m->seg, c->rank) ? seg_len(l, m->seg) : 0)) {
		stat_add(&c->stats.bad_packets, 1);
		return;
	}
	if (seg_bit(ks->got, m->seg)) {
		stat_add(&c->stats.dup_results, 1);
		return;
	}
	stat_add(&c->stats.bytes_recv, WIRE_HDR_LEN + m->plen);
	seg_bit_set(ks->got, m->seg);
	if (m->status == WIRE_ST_SKIPPED) /* PS: the weights as before the round */
		stat_add(&c->stats.ps_skipped, 1);
	if (m->count) /* (a scatter key's acknowledgement carries nothing) */
		memcpy((uint8_t *)r->buf + (seg_first(l, m->seg) - r->buf_first) * esz, payload,
		       (size_t)m->count * esz);
	if (ks->shadow && m->count) {   /* another rank may need it after a restart */
		memcpy(ks->shadow + (size_t)seg_first(l, m->seg) * esz, payload,
		       (size_t)m->count * esz);
		ks->shadow_round[m->seg] = m->round;
	}
	xfer_seg_done(c, r, m->seg, (uint32_t)(seg_len(l, m->seg) * esz), m->flags, now);
}

bool xfer_seg_done(pbox_client *c, struct pbox_req *r, uint32_t seg, uint32_t bytes,
		   uint8_t flags, uint64_t now)
{
	struct key_state *ks = r->ks;
	uint64_t rtt_ns = 0;

	if (ks->slot_of[seg]) {
		uint32_t i = ks->slot_of[seg] - 1;
		const struct xslot *sl = &c->x->slots[i];
		if (!sl->retxed && now > sl->first_ns)
			rtt_ns = now - sl->first_ns;
		/* only a segment sent once says when its result was due: a
		 * retransmitted one may answer an older copy (RFC 8985 5.2;
		 * counting it anyway made retransmissions spurious:
		 * docs/reliability.md "Lost RESULTs of waited segments") */
		if (!sl->retxed)
			rack_on_delivery(&c->x->rack, sl->sent_ns, now);
		rack_on_order(&c->x->rack, sl->first_ns, now);
		slot_release(c->x, i);
	}
	if (flags & WIRE_FLAG_CE)
		stat_add(&c->stats.ce_marks, 1);
	aimd_on_result(&c->x->aimd, now, srtt_ns(c->x), flags & WIRE_FLAG_CE);
	rtt_update(c, now, bytes, rtt_ns);
	r->ndone++;
	r->epoch++;
	r->progress_ns = now;
	r->wait_missing = 0;   /* (the next WAIT names whom it waits for) */
	if (r->gk && !r->dev->seg_done(c, r, seg))   /* (failed: r is finished) */
		return false;
	if (r->fed)
		drain_advance(r);
	if (r->ndone == ks->lay.nsegs) {
		xfer_finish(c, r, 0, NULL);
		return false;
	}
	return true;
}

/* The slot of the segment a WAIT or NACK names, if it is in flight in
 * the key's current round; else NULL (a notice for what is already done). */
static struct xslot *notice_slot(pbox_client *c, const struct wire_msg *m, uint32_t *idx)
{
	struct key_state *ks = keytab_find(&c->keys, m->key);
	struct pbox_req *r = ks ? ks->req : NULL;

	if (!r || r->state != REQ_STREAMING || m->round != r->round ||
	    m->seg >= ks->lay.nsegs || !ks->slot_of[m->seg])
		return NULL;
	*idx = ks->slot_of[m->seg] - 1;
	return &c->x->slots[*idx];
}

/* "rank 0" / "ranks 0, 3" of missing (bit r: rank base + r) into buf. */
static void ranks_text(uint64_t missing, uint32_t base, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "rank%s", missing & (missing - 1) ? "s" : "");

	for (unsigned r = 0, first = 1; r < 64 && n < len; r++)
		if (missing >> r & 1) {
			n += (size_t)snprintf(buf + n, len - n, "%s%u", first ? " " : ", ",
					      base + r);
			first = 0;
		}
}

/* The call of the key a WAIT names waits for late ranks: keep whom (its
 * timeout names them) and say so once at PBOX_DEBUG=INFO, when the round
 * has been open XFER_LATE_NOTE_US. */
static void note_late(pbox_client *c, const struct wire_msg *m, const struct wire_notice *n)
{
	struct pbox_req *r = keytab_find(&c->keys, m->key)->req;
	char who[128];

	/* the late ranks: missing from every segment the box holds of ours
	 * (a rank missing from some is only behind in its window) */
	uint64_t late = r->wait_base == n->base ? r->wait_missing & n->missing : 0;
	r->wait_missing = late ? late : n->missing;
	r->wait_base = n->base;
	if (r->late_noted || n->open_us < XFER_LATE_NOTE_US || !r->wait_missing)
		return;
	r->late_noted = true;
	ranks_text(r->wait_missing, r->wait_base, who, sizeof(who));
	note(KNOB_DEBUG_INFO, "job '%s' rank %d key %u round %u: waiting for %s (late %.1f s); "
	     "the call waits up to its timeout, %u ms", c->job, c->rank, r->key, r->round, who,
	     n->open_us / 1e6, c->opts.timeout_ms);
}

/* WAIT: the box has our contribution and waits for other ranks (the
 * notice names them). Leave the segment to the box: RACK skips it, and the
 * next query comes after the round has been open as long again. */
static void on_wait(pbox_client *c, const struct wire_msg *m, const struct wire_notice *n,
		    uint64_t now)
{
	struct xfer *x = c->x;
	uint32_t i;
	struct xslot *s = notice_slot(c, m, &i);

	stat_add(&c->stats.waits, 1);
	if (!s)
		return;
	note_late(c, m, n);
	x->nwaited += !s->box_has;
	s->box_has = true;
	s->wait_seq = rack_wait_seq(&x->rack);
	s->rack_timed = false;
	uint64_t wait_us = n->open_us > XFER_WAIT_MAX_US ? XFER_WAIT_MAX_US : n->open_us;
	if (wait_us < x->rtt.rto_us)
		wait_us = x->rtt.rto_us;
	s->deadline_ns = now + wait_us * NS_PER_US;
	if (s->deadline_ns < x->next_retx_ns)
		x->next_retx_ns = s->deadline_ns;
}

/* NACK: the box lacks our contribution. Send it at once unless our last
 * copy left less than a path round trip ago (it may still be coming). */
static void on_nack(pbox_client *c, const struct wire_msg *m, uint64_t now)
{
	struct xfer *x = c->x;
	uint32_t i;
	struct xslot *s = notice_slot(c, m, &i);
	uint64_t guard = (uint64_t)x->bdp.min_rtt_us * NS_PER_US;

	if (guard < srtt_ns(x) / 2)
		guard = srtt_ns(x) / 2;

	stat_add(&c->stats.nacks, 1);
	if (!s || now - s->sent_ns < guard)
		return;
	resend(c, i, now, x->rtt.rto_us);
	stat_add(&c->stats.fast_retransmits, 1);
	if (aimd_on_loss(&x->aimd, now, srtt_ns(x), 1))
		set_cwnd(c);
}

static void on_notice(pbox_client *c, const struct wire_msg *m, const uint8_t *body,
		      uint64_t now)
{
	struct wire_notice n;

	if (wire_notice_decode(body, &n) < 0) {
		stat_add(&c->stats.bad_packets, 1);
		return;
	}
	if (m->type == WIRE_WAIT)
		on_wait(c, m, &n, now);
	else
		on_nack(c, m, now);
}

/* n segments sent again for loss, counted in *stat: the AIMD window
 * reacts (recovery.h). */
static void on_losses(pbox_client *c, uint64_t *stat, uint32_t n, uint64_t now)
{
	if (!n)
		return;
	stat_add(stat, n);
	if (aimd_on_loss(&c->x->aimd, now, srtt_ns(c->x), n))
		set_cwnd(c);
}

/* A RACK timer: slot i's retransmission moved up to due (before its
 * timeout); retransmit sends it then as a fast retransmission. */
static void rack_timer(struct xfer *x, uint32_t i, uint64_t due)
{
	struct xslot *s = &x->slots[i];

	if (due >= s->deadline_ns)
		return;
	s->deadline_ns = due;
	s->rack_timed = true;
	if (due < x->next_retx_ns)
		x->next_retx_ns = due;
}

/* The waited segments (box_has) whose RESULT rack_wait_due finds lost
 * after the latest completion: a RACK timer for that time. */
static void rack_wait_scan(pbox_client *c, uint64_t reo)
{
	struct xfer *x = c->x;

	x->wait_scan_seq = x->rack.order_at_seq;
	for (uint32_t i = sendq_first(&x->sendq); i != SENDQ_NIL; i = sendq_next(&x->sendq, i))
		if (x->slots[i].box_has)
			rack_timer(x, i, rack_wait_due(&x->rack, x->slots[i].first_ns,
						       x->slots[i].wait_seq, reo));
}

/* RACK: resend the segments (oldest sent first) that a later-sent one
 * overtook by more than the longer of its round trip and the smoothed one,
 * plus a quarter of the smoothed one; the ones overtaken but not that long
 * yet get a timer for it. */
static void rack_scan(pbox_client *c, uint64_t now)
{
	struct xfer *x = c->x;
	uint64_t srtt = srtt_ns(x), reo = srtt / 4;
	uint32_t lost = 0;

	for (uint32_t i = sendq_first(&x->sendq), next; i != SENDQ_NIL; i = next) {
		next = sendq_next(&x->sendq, i);
		struct xslot *s = &x->slots[i];
		uint64_t due = rack_due(&x->rack, s->sent_ns, srtt, reo);
		if (due == UINT64_MAX)
			break;   /* sent later than the rest: none of them is overtaken */
		if (s->box_has)
			continue;
		if (now < due) {
			rack_timer(x, i, due);
			continue;
		}
		resend(c, i, now, x->rtt.rto_us);
		lost++;
	}
	if (x->nwaited && x->rack.order_at_seq > x->wait_scan_seq) /* a completion since */
		rack_wait_scan(c, reo);
	if (lost) {
		on_losses(c, &c->stats.fast_retransmits, lost, now);
		flush(c);
	}
}

/* Whether d came from the box endpoint m's segment belongs to (address
 * and port): the token only proves the sender saw one of our packets. A
 * datagram naming no segment of a declared key (garbage, an unknown key)
 * must come from one of the box's endpoints; its own checks drop it. */
static bool from_box(const pbox_client *c, const struct key_state *ks, const struct wire_msg *m,
		     const struct tp_dgram *d)
{
	if (ks && ks->lay.chunk_ep && m->seg < ks->lay.nsegs) {
		unsigned ep = seg_endpoint(&ks->lay, m->seg);
		return ep < c->neps && c->eps[ep].sin_addr.s_addr == d->src_ip &&
		       c->eps[ep].sin_port == d->src_port;
	}
	for (unsigned ep = 0; ep < c->neps; ep++)
		if (c->eps[ep].sin_addr.s_addr == d->src_ip && c->eps[ep].sin_port == d->src_port)
			return true;
	return false;
}

static void on_datagram(pbox_client *c, const struct tp_dgram *d, uint64_t now)
{
	const uint8_t *p = d->data;
	struct wire_msg m;

	stat_add(&c->stats.pkts_recv, 1);
	if (d->len >= WIRE_HDR_LEN && p[5] == WIRE_PROBE_ACK)
		return;   /* a path MTU probe answered late (pmtu.c): harmless */
	if (wire_decode(p, d->len, &m) < 0 || m.job != c->job_id || m.token != c->token ||
	    m.rank != (uint16_t)c->rank) {
		stat_add(&c->stats.bad_packets, 1);
		return;
	}
	struct key_state *ks = keytab_find(&c->keys, m.key);
	if (!from_box(c, ks, &m, d)) {
		stat_add(&c->stats.foreign_packets, 1);
		return;
	}
	if (c->x->finals && (m.type == WIRE_RESULT || m.type == WIRE_ERROR) &&
	    resume_answered(c, ks, &m))
		return;
	if (m.type == WIRE_ERROR)
		on_error_packet(c, &m, now);
	else if (m.type == WIRE_RESULT)
		on_result(c, ks, &m, p + WIRE_HDR_LEN, now);
	else if (m.type == WIRE_WAIT || m.type == WIRE_NACK)
		on_notice(c, &m, p + WIRE_HDR_LEN, now);
	else
		stat_add(&c->stats.bad_packets, 1);
}

void xfer_recv(pbox_client *c, uint64_t now)
{
	struct xfer *x = c->x;

	for (int b = 0; b < RECV_BATCHES_PER_WAKE; b++) {
		int n = c->tp.ops->rx_burst(&c->tp, x->rxq, XFER_RX_BURST, x->err, sizeof(x->err));
		if (n < 0) {
			sock_error(c, n);
			return;
		}
		if (b > 0)
			now = clock_ns(); /* round trips are measured against this */
		for (int i = 0; i < n; i++)
			on_datagram(c, &x->rxq[i], now);
		if (n)
			rack_scan(c, now);
		xfer_fill(c, now); /* freed slots: keep the pipe full */
		if (n == 0)
			return;
	}
}

void xfer_resend_all(pbox_client *c, struct pbox_req *r, uint64_t now)
{
	struct xfer *x = c->x;

	for (uint32_t i = 0; i < x->win.cap; i++) {
		struct xslot *s = &x->slots[i];
		if (s->req != r)
			continue;
		s->deadline_ns = now;
		s->nretx = 0;
		s->rack_timed = false;
		s->box_has = false;
	}
	r->wait_missing = 0;
	r->progress_ns = now;
	x->next_retx_ns = now;
}

/* Retransmit overdue slots and recompute the earliest deadline. */
static void retransmit(pbox_client *c, uint64_t now)
{
	struct xfer *x = c->x;
	uint64_t next = UINT64_MAX;
	uint32_t backoff_max = x->rtt.rto_us > XFER_BACKOFF_MAX_US ? x->rtt.rto_us : XFER_BACKOFF_MAX_US;
	uint32_t timeouts = 0, fast = 0, first = 0;

	x->next_retx_ns = UINT64_MAX;  /* resend lowers it */
	for (uint32_t i = 0; i < x->win.cap; i++) {
		struct xslot *s = &x->slots[i];
		if (!s->req)
			continue;
		if (s->epoch != s->req->epoch) { /* progress since: back-off resets */
			s->epoch = s->req->epoch;
			s->nretx = 0;
		}
		if (now >= s->deadline_ns && s->rack_timed) {   /* a RACK timer */
			fast++;
			resend(c, i, now, x->rtt.rto_us);
		} else if (now >= s->deadline_ns) {
			if (!s->box_has)
				timeouts++;
			first += !s->box_has && !s->retxed;
			s->nretx++;
			resend(c, i, now, seg_rto_backoff(x->rtt.rto_us, s->nretx, backoff_max));
		}
		if (s->deadline_ns < next)
			next = s->deadline_ns;
	}
	if (next < x->next_retx_ns)
		x->next_retx_ns = next;
	/* first transmissions timed out, and no round trip came since the
	 * last time they did: the timeout is below the path's (rtt_backoff) */
	if (first) {
		if (x->rtt.nsamples == x->timeout_samples) {
			rtt_backoff(&x->rtt);
			stat_set(&c->stats.rto_us, x->rtt.rto_us);
		}
		x->timeout_samples = x->rtt.nsamples;
	}
	on_losses(c, &c->stats.fast_retransmits, fast, now);
	on_losses(c, &c->stats.timeouts, timeouts, now);
	flush(c);
}

static void fail_timed_out(pbox_client *c, struct pbox_req *r)
{
	char msg[CLIENT_MSG_LEN];

	if (r->state == REQ_STREAMING) {
		uint32_t nsegs = r->ks->lay.nsegs;
		snprintf(msg, sizeof(msg),
			 "job '%s' rank %d key %u round %u: no new result for %u ms; "
			 "%u of %u segments missing, the first is %u",
			 c->job, c->rank, r->key, r->round, c->opts.timeout_ms,
			 nsegs - r->ndone, nsegs, seg_bitmap_first_clear(r->ks->got, nsegs));
		if (r->wait_missing) {
			char who[128];
			size_t n = strlen(msg);
			ranks_text(r->wait_missing, r->wait_base, who, sizeof(who));
			snprintf(msg + n, sizeof(msg) - n, "; the box has this rank's contribution "
				 "and waits for %s", who);
		}
		if (r->gk)
			r->dev->timeout_note(r, msg, sizeof(msg));
	} else if (r->held_elsewhere) {
		snprintf(msg, sizeof(msg),
			 "job '%s' rank %d key %u: not declared within %u ms: keys released by "
			 "some ranks are still held by others (every rank must "
			 "pbox_release_keys them); the box said: %.200s", c->job, c->rank,
			 r->key, c->opts.timeout_ms, r->msg);
	} else {
		snprintf(msg, sizeof(msg),
			 "job '%s' rank %d key %u: no answer to %s within %u ms",
			 c->job, c->rank, r->key, r->state == REQ_RPC ? r->op->rpc : "key_declare", c->opts.timeout_ms);
	}
	xfer_finish(c, r, PBOX_ETIMEDOUT, msg);
}

void xfer_redeclare_later(pbox_client *c, struct pbox_req *r, uint64_t now)
{
	r->redeclare_ns = now + REDECLARE_MS * NS_PER_MS;
	r->held_elsewhere = true;
	if (!c->x->redeclare_ns || r->redeclare_ns < c->x->redeclare_ns)
		c->x->redeclare_ns = r->redeclare_ns;
}

/* Send the declarations whose time came; the next one's time. */
static void redeclare(pbox_client *c, uint64_t now)
{
	struct xfer *x = c->x;

	x->redeclare_ns = 0;
	for (struct pbox_req *r = x->act_head, *next; r; r = next) {
		next = r->act_next;
		if (!r->redeclare_ns)
			continue;
		if (now >= r->redeclare_ns) {
			r->redeclare_ns = 0;
			progress_declare(c, r);
		} else if (!x->redeclare_ns || r->redeclare_ns < x->redeclare_ns) {
			x->redeclare_ns = r->redeclare_ns;
		}
	}
}

void xfer_timers(pbox_client *c, uint64_t now)
{
	struct xfer *x = c->x;
	uint64_t limit = c->opts.timeout_ms * NS_PER_MS;

	if (now >= x->next_retx_ns)
		retransmit(c, now);
	if (x->redeclare_ns && now >= x->redeclare_ns)
		redeclare(c, now);
	/* a streaming call whose ready segments wait for window room that the
	 * calls ahead of it hold (xfer_fill serves calls in order) progresses
	 * as they do */
	uint64_t ahead_ns = 0;
	for (struct pbox_req *r = x->act_head, *next; r; r = next) {
		next = r->act_next;
		bool streaming = r->state == REQ_STREAMING;
		uint64_t p = r->progress_ns;
		if (streaming && r->next_seg < r->ready_seg && ahead_ns > p)
			p = ahead_ns;
		/* the box has ours and waits for late ranks: its abort names them */
		uint64_t grace = streaming && r->wait_missing ? XFER_WAIT_GRACE_MS * NS_PER_MS : 0;
		if (r->state != REQ_QUEUED && now - p >= limit + grace)
			fail_timed_out(c, r);
		else if (streaming && p > ahead_ns)
			ahead_ns = p;
	}
	if (x->abort_seen_ns && now - x->abort_seen_ns >= ABORT_GRACE_MS * NS_PER_MS) {
		char msg[CLIENT_MSG_LEN];
		snprintf(msg, sizeof(msg),
			 "job '%s' (id %u) was aborted: the box answers rank %d's packets "
			 "with ERROR (job unknown or aborted) and sent no reason",
			 c->job, c->job_id, c->rank);
		x->abort_seen_ns = 0;
		xfer_fatal(c, PBOX_EABORTED, msg);
	}
}

int xfer_poll_ms(const pbox_client *c, uint64_t now)
{
	const struct xfer *x = c->x;
	uint64_t wake = now + 100 * NS_PER_MS;

	if (x->next_retx_ns < wake)
		wake = x->next_retx_ns;
	if (x->abort_seen_ns && x->abort_seen_ns + ABORT_GRACE_MS * NS_PER_MS < wake)
		wake = x->abort_seen_ns + ABORT_GRACE_MS * NS_PER_MS;
	if (x->redeclare_ns && x->redeclare_ns < wake)
		wake = x->redeclare_ns;
	return wake <= now ? 0 : (int)((wake - now + NS_PER_MS - 1) / NS_PER_MS);
}
