/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * box_inproc.h - a pbox box inside the test process, built from the code
 * that runs in pboxd, for libpbox's unit tests: the real JSON-RPC server
 * and job registry (control/) on a control thread listening on
 * 127.0.0.1:<ephemeral>, and per data lcore a thread owning a real engine
 * (dataplane/engine.c) behind kernel UDP sockets on 127.0.0.1, one per
 * endpoint. The struct box is box_fixture.h's (deferred mode: the control
 * plane reaches the engines only through box_dp's post/applied).
 *
 * An lcore thread does with sockets what pboxd's lcore loop
 * (dataplane/lcore.c) does with DPDK: take a batch of datagrams
 * (recvmmsg), apply the control messages posted so far before handling it
 * (and when idle; applied is published with a release store),
 * decode each (wire_decode), file it in the engine (engine_push_ref: the
 * contribution stays in its receive buffer until the round is summed,
 * copied once the lcore holds BI_HOLD_MAX), count drops under their
 * reason, and answer from the endpoint's socket: a completed round to
 * every rank's registered data address, a shadow copy or an ERROR to one
 * rank.
 *
 * Failure knobs act on the link or call the real control plane; none
 * re-implements the box: datagram loss (every Nth datagram an lcore
 * receives, every Nth RESULT it sends), silence (every datagram lost),
 * lost job_aborted notifications (quiet_aborts), an operator's abort
 * (box_inproc_abort: jobs_abort), the control plane gone
 * (box_inproc_drop_control: the RPC server closed with every connection)
 * or stalled (box_inproc_stall_control: its thread answers nothing for a
 * while).
 *
 * Use: b = box_inproc_new(nlcores); adjust b->f->box.cfg and the knobs;
 * box_inproc_start(b); clients connect to b->addr; box_inproc_stop(b)
 * (after it, engines and counters may be read directly);
 * box_inproc_free(b). Set-up failures abort the test program.
 */
#ifndef PBOX_TEST_BOX_INPROC_H
#define PBOX_TEST_BOX_INPROC_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/sum.h"
#include "common/wire.h"
#include "control/jobs.h"
#include "control/jobs_core.h" /* the server's notify hook, for quiet_aborts */
#include "control/rpc_server.h"
#include "tests/unit/box_fixture.h"

#define BI_BATCH      32    /* datagrams per recvmmsg (LCORE_BURST) */
#define BI_BUFS       1024  /* receive buffers per lcore */
#define BI_BUF_BYTES  9024  /* a datagram of MTU 9000 (WIRE_HDR_LEN + WIRE_MAX_PAYLOAD), 64-byte multiple */
#define BI_HOLD_MAX   (BI_BUFS - BI_BATCH) /* held contributions; beyond: copied */
#define BI_MAX_EPS    8
#define BI_TICK_MS    5     /* control thread: rpc_server_poll timeout */
#define BI_LOOPBACK   0x7f000001u

struct box_inproc;

/* One data lcore: its thread owns f->eng[index] and f->lstats[index]. */
struct bi_lcore {
	struct box_inproc *b;
	unsigned index;
	pthread_t th;
	int bell;                 /* eventfd: messages posted, or stop */
	unsigned neps;
	unsigned ep[BI_MAX_EPS];  /* its endpoints: indexes of layout.eps, b->fd */
	uint8_t *bufs;            /* BI_BUFS x BI_BUF_BYTES */
	uint16_t free_bufs[BI_BUFS];
	unsigned nfree;
	int64_t held;             /* buffers the engine holds */
	uint64_t rx_seen;         /* datagrams arrived (loss knob) */
	uint64_t results_out;     /* RESULTs to send (loss knob) */
	uint64_t rng;             /* xorshift state of the random loss knob */
};

struct box_inproc {
	struct fixture *f;        /* the box: config, layout, engines, job memory */
	struct rpc_server *srv;   /* NULL after box_inproc_drop_control */
	char addr[32];            /* "127.0.0.1:port" of the control listener */
	int fd[BI_MAX_EPS];       /* UDP socket of each endpoint */
	struct bi_lcore lc[FIX_MAX_LCORES];
	/* knobs: may change at any time */
	atomic_uint drop_push_every;   /* every Nth datagram an lcore receives is lost */
	atomic_uint drop_result_every; /* every Nth RESULT an lcore sends is lost */
	atomic_int drop_random;        /* the two above lose 1 in N at random instead
					* (reproducible per lcore, never periodic) */
	atomic_int lose_results_to;    /* rank + 1 whose RESULTs are all lost; 0 = none */
	atomic_int silent;             /* every datagram to the box is lost */
	atomic_uint probe_max;         /* path MTU probes above this many bytes are lost
					* (a path that drops jumbo frames); 0 = none */
	atomic_int quiet_aborts;       /* job_aborted notifications are not sent */
	/* datagrams that arrived at the endpoints, and those of them lost to
	 * the knobs (tests wait on them) */
	atomic_ulong seen, lost;
	/* the control thread and calls run on it */
	pthread_t ctl;
	atomic_int stop;
	int started, stopped;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	void (*call_fn)(struct box_inproc *b, void *arg);
	void *call_arg;
	uint64_t call_seq, done_seq;
	jobs_notify_fn notify;    /* the RPC server's job_aborted hook */
	void *notify_ctx;
};

static inline void bi_die(const char *what)
{
	fprintf(stderr, "box_inproc: %s: %s\n", what, strerror(errno));
	abort();
}

/* ---- receive buffers (engine_push_ref references) ---- */

static inline uint8_t *bi_buf_get(struct bi_lcore *lc)
{
	return lc->bufs + (size_t)lc->free_bufs[--lc->nfree] * BI_BUF_BYTES;
}

static inline void bi_buf_put(struct bi_lcore *lc, uint8_t *buf)
{
	lc->free_bufs[lc->nfree++] = (uint16_t)((size_t)(buf - lc->bufs) / BI_BUF_BYTES);
}

/* The engine is done with a contribution it held. */
static void bi_release(void *ctx, void *ref)
{
	struct bi_lcore *lc = ctx;

	lc->held--;
	bi_buf_put(lc, ref);
}

/* ---- the data path (an lcore thread) ---- */

/* Whether a loss knob of N (0 = off) takes the datagram counted in *ctr:
 * every Nth, or 1 in N at random with drop_random. Periodic loss can lock
 * in phase with senders whose timers run in step (a rank's retransmission
 * then always lands on the lost position); random loss cannot. */
static inline int bi_lose(struct bi_lcore *lc, uint64_t *ctr, unsigned every)
{
	if (!every)
		return 0;
	++*ctr;
	if (!atomic_load_explicit(&lc->b->drop_random, memory_order_relaxed))
		return *ctr % every == 0;
	lc->rng ^= lc->rng << 13;
	lc->rng ^= lc->rng >> 7;
	lc->rng ^= lc->rng << 17;
	return lc->rng % every == 0;
}

/* One RESULT/ERROR of out to rank, from endpoint ep's socket to the data
 * address the rank registered (job_join -> WORKER_SET). */
static void bi_send(struct bi_lcore *lc, unsigned ep, const struct engine_out *out, uint16_t rank)
{
	struct box_inproc *b = lc->b;
	struct lcore_stats *st = &b->f->lstats[lc->index];
	unsigned every = atomic_load_explicit(&b->drop_result_every, memory_order_relaxed);
	const struct engine_worker *w = &out->job->workers[rank];
	struct wire_msg h = out->hdr;
	uint8_t hdr[WIRE_HDR_LEN];
	/* a scatter key's SEND_ALL: the payload for out->only, a header-only
	 * acknowledgement for the others (lcore.c's send_all) */
	bool ack = out->only != ENGINE_ONLY_NONE && rank != out->only;
	size_t plen = out->payload && !ack ? out->plen : 0;
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(w->port),
				  .sin_addr.s_addr = htonl(w->ip) };
	struct iovec iov[2] = { { hdr, sizeof(hdr) }, { (void *)out->payload, plen } };
	struct msghdr mh = { .msg_name = &to, .msg_namelen = sizeof(to), .msg_iov = iov,
			     .msg_iovlen = plen ? 2 : 1 };

	if (h.type == WIRE_RESULT && bi_lose(lc, &lc->results_out, every))
		return;
	if (h.type == WIRE_RESULT &&
	    atomic_load_explicit(&b->lose_results_to, memory_order_relaxed) == rank + 1)
		return;
	h.rank = rank;
	if (ack)
		h.count = 0;
	wire_encode(hdr, &h);
	if (sendmsg(b->fd[ep], &mh, MSG_DONTWAIT) < 0)
		st->drops[DROP_TX_FULL]++;
	else
		st->tx++;
}

/* One datagram that arrived at endpoint ep from src: validate, file,
 * answer (lcore.c's handle_push). */
static void bi_handle(struct bi_lcore *lc, unsigned ep, uint8_t *buf, size_t len, int flags,
		      const struct sockaddr_in *src)
{
	struct box_inproc *b = lc->b;
	struct lcore_stats *st = &b->f->lstats[lc->index];
	unsigned every = atomic_load_explicit(&b->drop_push_every, memory_order_relaxed);
	struct wire_msg m;
	struct engine_out out;
	int rc;

	/* a path MTU probe goes back as it came (lcore.c's answer_probe),
	 * outside the loss knobs' count so their patterns stay the same */
	if (!(flags & MSG_TRUNC) && wire_decode(buf, len, &m) == 0 && m.type == WIRE_PROBE) {
		unsigned max = atomic_load_explicit(&b->probe_max, memory_order_relaxed);
		if (!atomic_load_explicit(&b->silent, memory_order_relaxed) && (!max || len <= max)) {
			buf[offsetof(struct wire_hdr, type)] = WIRE_PROBE_ACK;
			if (sendto(b->fd[ep], buf, len, MSG_DONTWAIT, (const struct sockaddr *)src,
				   sizeof(*src)) == (ssize_t)len)
				st->probes++;
		}
		bi_buf_put(lc, buf);
		return;
	}
	atomic_fetch_add_explicit(&b->seen, 1, memory_order_relaxed);
	if (!every)
		lc->rx_seen++;
	if (bi_lose(lc, &lc->rx_seen, every) ||
	    atomic_load_explicit(&b->silent, memory_order_relaxed)) {
		atomic_fetch_add_explicit(&b->lost, 1, memory_order_relaxed);
		bi_buf_put(lc, buf);
		return;
	}
	st->rx++;
	rc = (flags & MSG_TRUNC) ? -DROP_BAD_LEN : wire_decode(buf, len, &m);
	if (rc == 0)
		rc = engine_push_ref(&b->f->eng[lc->index], &m, buf + WIRE_HDR_LEN,
				     lc->held < BI_HOLD_MAX ? buf : NULL,
				     ntohl(src->sin_addr.s_addr), ntohs(src->sin_port), &out);
	if (rc < 0) {
		st->drops[-rc]++;
		bi_buf_put(lc, buf);
		return;
	}
	if (out.held)
		lc->held++;    /* the release may already have run: held nets to 0 */
	else
		bi_buf_put(lc, buf);
	do { /* a sparse PUSH's answers and dropped records come from engine_next */
		if (rc < 0)
			st->drops[-rc]++;
		else if (rc == ENGINE_SEND_ALL)
			for (uint16_t r = 0; r < out.job->world; r++)
				bi_send(lc, ep, &out, r);
		else if (rc == ENGINE_SEND_ONE || rc == ENGINE_SEND_ERROR)
			bi_send(lc, ep, &out, out.rank);
	} while ((rc = engine_next(&b->f->eng[lc->index], &out)) != ENGINE_ABSORBED);
}

/* Every datagram waiting at endpoint ep, in batches; the control messages
 * posted so far are applied after taking each batch, before handling it,
 * so a PUSH sent after an RPC's answer finds what that RPC installed. */
static void bi_rx(struct bi_lcore *lc, unsigned ep)
{
	struct mmsghdr mm[BI_BATCH];
	struct iovec iov[BI_BATCH];
	struct sockaddr_in src[BI_BATCH];
	uint8_t *buf[BI_BATCH];
	int n;

	do {
		for (unsigned i = 0; i < BI_BATCH; i++) {
			buf[i] = bi_buf_get(lc);
			iov[i] = (struct iovec){ buf[i], BI_BUF_BYTES };
			mm[i].msg_hdr = (struct msghdr){ .msg_name = &src[i],
							 .msg_namelen = sizeof(src[i]),
							 .msg_iov = &iov[i], .msg_iovlen = 1 };
		}
		n = recvmmsg(lc->b->fd[ep], mm, BI_BATCH, MSG_DONTWAIT, NULL);
		for (int i = BI_BATCH - 1; i >= (n > 0 ? n : 0); i--)
			bi_buf_put(lc, buf[i]);
		if (n <= 0)
			return;
		fixture_drain_lcore(lc->b->f, lc->index, FIX_QUEUE);
		for (int i = 0; i < n; i++)
			bi_handle(lc, ep, buf[i], mm[i].msg_len, mm[i].msg_hdr.msg_flags, &src[i]);
	} while (n == BI_BATCH);
}

static void *bi_lcore_main(void *arg)
{
	struct bi_lcore *lc = arg;
	struct box_inproc *b = lc->b;
	struct pollfd p[1 + BI_MAX_EPS];
	uint64_t v;

	p[0] = (struct pollfd){ .fd = lc->bell, .events = POLLIN };
	for (unsigned i = 0; i < lc->neps; i++)
		p[1 + i] = (struct pollfd){ .fd = b->fd[lc->ep[i]], .events = POLLIN };
	while (!atomic_load(&b->stop)) {
		if (poll(p, 1 + lc->neps, 1000) < 0 && errno != EINTR)
			bi_die("poll");
		if ((p[0].revents & POLLIN) && read(lc->bell, &v, sizeof(v)) < 0 && errno != EAGAIN)
			bi_die("read eventfd");
		for (unsigned i = 0; i < lc->neps; i++)
			if (p[1 + i].revents & POLLIN)
				bi_rx(lc, lc->ep[i]);
		fixture_drain_lcore(b->f, lc->index, FIX_QUEUE);
	}
	return NULL;
}

/* ---- box_dp hooks beyond the fixture's ---- */

/* fixture's on_post: wake the lcore that owns the ring. */
static void bi_ring_bell(void *ctx, unsigned lcore)
{
	struct box_inproc *b = ctx;
	uint64_t one = 1;

	if (write(b->lc[lcore].bell, &one, sizeof(one)) < 0 && errno != EAGAIN)
		bi_die("write eventfd");
}

/* Read from the control thread while the lcore runs, as in pboxd. */
static int bi_rank_lateness(void *ctx, unsigned lcore, uint32_t job_id, uint16_t rank,
			    struct engine_lateness *out)
{
	return engine_rank_lateness(&((struct fixture *)ctx)->eng[lcore], job_id, rank, out);
}

static int bi_job_progress(void *ctx, unsigned lcore, uint32_t job_id, struct engine_progress *out)
{
	return engine_job_progress(&((struct fixture *)ctx)->eng[lcore], job_id, out);
}

/* The registry's job_aborted hook: the server's, unless quiet_aborts. */
static void bi_notify(void *ctx, void *session, const struct job *j,
		      const struct jobs_reset_note *reset)
{
	struct box_inproc *b = ctx;

	if (!atomic_load(&b->quiet_aborts) && b->notify)
		b->notify(b->notify_ctx, session, j, reset);
}

/* ---- the control thread ---- */

static void *bi_control_main(void *arg)
{
	struct box_inproc *b = arg;

	while (!atomic_load(&b->stop)) {
		if (b->srv) {
			rpc_server_poll(b->srv, BI_TICK_MS);  /* ends with jobs_tick */
		} else {
			jobs_tick(b->f->box.jobs);
			usleep(BI_TICK_MS * 1000);
		}
		pthread_mutex_lock(&b->lock);
		if (b->call_fn) {
			b->call_fn(b, b->call_arg);
			b->call_fn = NULL;
			b->done_seq = b->call_seq;
			pthread_cond_broadcast(&b->cond);
		}
		pthread_mutex_unlock(&b->lock);
	}
	return NULL;
}

/*
 * Run fn(b, arg) on the control thread (the registry is single-threaded)
 * and wait for it; before start or after stop, on the caller's thread.
 */
static inline void box_inproc_call(struct box_inproc *b, void (*fn)(struct box_inproc *, void *),
				   void *arg)
{
	if (!b->started || b->stopped) {
		fn(b, arg);
		return;
	}
	pthread_mutex_lock(&b->lock);
	while (b->call_fn)
		pthread_cond_wait(&b->cond, &b->lock);
	b->call_fn = fn;
	b->call_arg = arg;
	uint64_t mine = ++b->call_seq;
	while (b->done_seq < mine)
		pthread_cond_wait(&b->cond, &b->lock);
	pthread_mutex_unlock(&b->lock);
}

/* ---- set-up and teardown ---- */

static inline int bi_udp_socket(uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(BI_LOOPBACK) };
	socklen_t al = sizeof(a);
	int sz = 8 << 20;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0)
		bi_die("UDP socket on 127.0.0.1");
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	*port = ntohs(a.sin_port);
	return fd;
}

/*
 * A box of one port (127.0.0.1, MTU 1500) and nlcores engines with the
 * fastest sum kernel, one UDP endpoint per lcore; pboxd's defaults
 * otherwise (log level "error"). Not started yet.
 */
static inline struct box_inproc *box_inproc_new(unsigned nlcores)
{
	struct box_inproc *b = calloc(1, sizeof(*b));
	const struct sum_kernels *sum = sum_best();

	if (!b || nlcores == 0 || nlcores > FIX_MAX_LCORES || nlcores > BI_MAX_EPS)
		bi_die("box_inproc_new");
	b->f = fixture_new(1, nlcores);
	struct box *box = &b->f->box;
	struct dp_layout *lay = &box->layout;

	snprintf(box->cfg.control, sizeof(box->cfg.control), "127.0.0.1:0");
	box->cfg.rpc_socket[0] = '\0';
	box->dp.job_progress = bi_job_progress;
	box->dp.rank_lateness = bi_rank_lateness;
	lay->kernel = sum->name;
	lay->ports[0].ip = BI_LOOPBACK;
	lay->ports[0].prefix = 8;
	snprintf(lay->ports[0].name, sizeof(lay->ports[0].name), "lo");
	b->f->deferred = 1;
	b->f->on_post = bi_ring_bell;
	b->f->on_post_ctx = b;
	for (unsigned e = 0; e < lay->neps; e++) {
		lay->eps[e].ip = BI_LOOPBACK;
		b->fd[e] = bi_udp_socket(&lay->eps[e].udp_port);
	}
	for (unsigned l = 0; l < nlcores; l++) {
		struct bi_lcore *lc = &b->lc[l];
		lc->b = b;
		lc->index = l;
		lc->rng = 0x9E3779B97F4A7C15ull * (l + 1); /* xorshift: never 0 */
		lc->bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		lc->bufs = malloc((size_t)BI_BUFS * BI_BUF_BYTES);
		if (lc->bell < 0 || !lc->bufs)
			bi_die("lcore set-up");
		for (unsigned i = 0; i < BI_BUFS; i++)
			lc->free_bufs[i] = (uint16_t)i;
		lc->nfree = BI_BUFS;
		engine_init(&b->f->eng[l], (uint16_t)l, sum);
		engine_set_hold(&b->f->eng[l], bi_release, lc);
		for (unsigned e = 0; e < lay->neps; e++)
			if (lay->eps[e].lcore == l)
				lc->ep[lc->neps++] = e;
	}
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->cond, NULL);
	return b;
}

/* Open the registry and the RPC server, start the threads. */
static inline void box_inproc_start(struct box_inproc *b)
{
	struct box *box = &b->f->box;
	char err[256];

	box->start_time = clock_s();
	if (jobs_open(box, &box->jobs) < 0)
		bi_die("jobs_open");
	if (rpc_server_open(&b->srv, box, err, sizeof(err)) < 0) {
		fprintf(stderr, "box_inproc: rpc_server_open: %s\n", err);
		abort();
	}
	b->notify = box->jobs->notify;
	b->notify_ctx = box->jobs->notify_ctx;
	jobs_set_notify(box->jobs, bi_notify, b);
	snprintf(b->addr, sizeof(b->addr), "127.0.0.1:%u", rpc_server_tcp_port(b->srv));
	b->started = 1;
	for (unsigned l = 0; l < box->layout.nlcores; l++)
		if (pthread_create(&b->lc[l].th, NULL, bi_lcore_main, &b->lc[l]) != 0)
			bi_die("pthread_create");
	if (pthread_create(&b->ctl, NULL, bi_control_main, b) != 0)
		bi_die("pthread_create");
}

/* Stop and join every thread. Afterwards the registry, engines and
 * counters may be read from the caller's thread. */
static inline void box_inproc_stop(struct box_inproc *b)
{
	if (!b->started || b->stopped)
		return;
	atomic_store(&b->stop, 1);
	for (unsigned l = 0; l < b->f->box.layout.nlcores; l++)
		bi_ring_bell(b, l);
	for (unsigned l = 0; l < b->f->box.layout.nlcores; l++)
		pthread_join(b->lc[l].th, NULL);
	pthread_join(b->ctl, NULL);
	b->stopped = 1;
}

/* Stop, close the server (every connection), free every job, the sockets
 * and the box. */
static inline void box_inproc_free(struct box_inproc *b)
{
	struct box *box = &b->f->box;

	box_inproc_stop(b);
	rpc_server_close(b->srv);
	jobs_close(box->jobs);
	box->jobs = NULL;
	for (unsigned e = 0; e < box->layout.neps; e++)
		close(b->fd[e]);
	for (unsigned l = 0; l < box->layout.nlcores; l++) {
		close(b->lc[l].bell);
		free(b->lc[l].bufs);
	}
	pthread_mutex_destroy(&b->lock);
	pthread_cond_destroy(&b->cond);
	fixture_free(b->f);
	free(b);
}

/* ---- what tests do to a running box ---- */

struct bi_abort_args {
	const char *job, *reason;
	int rc;
};

static void bi_abort_fn(struct box_inproc *b, void *arg)
{
	struct bi_abort_args *a = arg;
	char err[256];

	a->rc = jobs_abort(b->f->box.jobs, a->job, a->reason, err, sizeof(err));
}

/* Abort job as an operator's job_abort does: 0 or -ENOENT. */
static inline int box_inproc_abort(struct box_inproc *b, const char *job, const char *reason)
{
	struct bi_abort_args a = { job, reason, 0 };

	box_inproc_call(b, bi_abort_fn, &a);
	return a.rc;
}

static void bi_drop_control_fn(struct box_inproc *b, void *arg)
{
	(void)arg;
	rpc_server_close(b->srv);
	b->srv = NULL;
}

/* The control plane goes away: the RPC server closes its listener and
 * every connection (each session ends, as when pboxd's main lcore dies
 * with its sockets); the data path and the registry keep running. */
static inline void box_inproc_drop_control(struct box_inproc *b)
{
	box_inproc_call(b, bi_drop_control_fn, NULL);
}

/* A stall of the control thread (box_inproc_stall_control). */
struct bi_stall {
	struct box_inproc *b;
	int ms;
	atomic_int in;
	pthread_t th;
};

static void bi_stall_fn(struct box_inproc *b, void *arg)
{
	struct bi_stall *s = arg;

	(void)b;
	atomic_store(&s->in, 1);
	usleep((useconds_t)s->ms * 1000);
}

static void *bi_stall_main(void *arg)
{
	struct bi_stall *s = arg;

	box_inproc_call(s->b, bi_stall_fn, s);
	return NULL;
}

/* The control thread answers nothing for ms (as a box's control thread
 * held up by a slow disk): returns once the stall began; the data path
 * runs on. box_inproc_stall_end waits for its end. */
static inline void box_inproc_stall_control(struct box_inproc *b, struct bi_stall *s, int ms)
{
	s->b = b;
	s->ms = ms;
	atomic_store(&s->in, 0);
	if (pthread_create(&s->th, NULL, bi_stall_main, s) != 0)
		bi_die("pthread_create");
	while (!atomic_load(&s->in))
		usleep(1000);
}

static inline void box_inproc_stall_end(struct bi_stall *s)
{
	pthread_join(s->th, NULL);
}

struct bi_job_args {
	const char *name;
	uint32_t id;
};

static void bi_job_id_fn(struct box_inproc *b, void *arg)
{
	struct bi_job_args *a = arg;
	const struct job *j = jobs_find(b->f->box.jobs, a->name);

	a->id = j ? j->id : 0;
}

/* The id of job `name`, 0 if there is none. */
static inline uint32_t box_inproc_job_id(struct box_inproc *b, const char *name)
{
	struct bi_job_args a = { name, 0 };

	box_inproc_call(b, bi_job_id_fn, &a);
	return a.id;
}

static void bi_idle_fn(struct box_inproc *b, void *arg)
{
	const struct fixture *f = b->f;

	*(int *)arg = jobs_count(f->box.jobs) == 0 && jobs_removing(f->box.jobs) == 0 &&
		      f->allocs == f->frees && f->live_bytes == 0;
}

/* Wait up to timeout_ms until the box has no job left, live or being
 * removed, and every byte of job memory is back. 1 if so, else 0. */
static inline int box_inproc_idle(struct box_inproc *b, int timeout_ms)
{
	uint64_t end = clock_ns() + (uint64_t)timeout_ms * 1000000u;
	int idle = 0;

	for (;;) {
		box_inproc_call(b, bi_idle_fn, &idle);
		if (idle || clock_ns() >= end)
			return idle;
		usleep(2000);
	}
}

/* Wait up to timeout_ms until at least n datagrams arrived at the box's
 * endpoints (lost ones included). 1 if so, else 0. */
static inline int box_inproc_wait_seen(struct box_inproc *b, unsigned long n, int timeout_ms)
{
	uint64_t end = clock_ns() + (uint64_t)timeout_ms * 1000000u;

	while (atomic_load(&b->seen) < n) {
		if (clock_ns() >= end)
			return 0;
		usleep(1000);
	}
	return 1;
}

/* The engines' counters summed over lcores (after box_inproc_stop). */
static inline struct engine_counters box_inproc_engine_totals(const struct box_inproc *b)
{
	struct engine_counters t = { 0 };

	for (unsigned l = 0; l < b->f->box.layout.nlcores; l++) {
		const struct engine_counters *c = &b->f->eng[l].c;
		t.pushes += c->pushes;
		t.completes += c->completes;
		t.dup_open += c->dup_open;
		t.dup_done += c->dup_done;
		t.retx += c->retx;
		t.errors_sent += c->errors_sent;
		t.msgs += c->msgs;
		t.held += c->held;
		t.updates += c->updates;
		t.no_weights += c->no_weights;
	}
	return t;
}

/* Drops under reason summed over lcores (after box_inproc_stop). */
static inline uint64_t box_inproc_drops(const struct box_inproc *b, int reason)
{
	uint64_t n = 0;

	for (unsigned l = 0; l < b->f->box.layout.nlcores; l++)
		n += b->f->lstats[l].drops[reason];
	return n;
}

#endif
