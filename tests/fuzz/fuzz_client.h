/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_client.h - a libpbox client for the fuzzers, built from libpbox's
 * internal objects (libpbox-internal-fuzz.a) without a box, a socket or a
 * progress thread: the fuzzer is the progress thread. Job 65, token
 * FZ_TOKEN, seg_bytes FZ_SEG_BYTES, rank 0 of 2, the window state of
 * xfer_init, and three box endpoints that differ by port and by address
 * (FZ_EPS). Its transport is a fake (fz_tp): tx_burst checks each
 * datagram it is handed (a known endpoint, a payload inside one of the
 * buffers the fuzzer registered, a header that encodes) and counts it;
 * rx_burst hands out the datagrams the fuzzer queued, with their sender.
 */
#ifndef PBOX_FUZZ_CLIENT_H
#define PBOX_FUZZ_CLIENT_H

#include <arpa/inet.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/core/client.h"
#include "client/core/req.h"
#include "client/xfer/xfer.h"
#include "tests/fuzz/fuzz_check.h"

#define FZ_JOB        65u
#define FZ_TOKEN      0x00000000000000aaull
#define FZ_SEG_BYTES  256u
#define FZ_NEPS       3
#define FZ_MAX_BUFS   8
#define FZ_MAX_RX     8

/* Endpoint i: 198.18.0.1 port 47000, 198.18.0.1 port 47001, 198.18.0.2
 * port 47000 (host order). */
static const uint32_t FZ_EP_IP[FZ_NEPS] = { 0xC6120001u, 0xC6120001u, 0xC6120002u };
static const uint16_t FZ_EP_PORT[FZ_NEPS] = { 47000, 47001, 47000 };

struct fz_tp {
	const uint8_t *buf[FZ_MAX_BUFS]; /* where a PUSH's payload may come from */
	size_t len[FZ_MAX_BUFS];
	unsigned nbufs;
	unsigned neps;                   /* endpoints a PUSH may name */
	uint32_t max_payload;            /* bytes a PUSH may carry (seg_bytes) */
	uint32_t job;                    /* ... and the job and token it must carry */
	uint64_t token;
	struct tp_dgram rx[FZ_MAX_RX];   /* queued for rx_burst */
	unsigned nrx;
	uint64_t sent;
};

static int fz_tx_burst(struct transport *t, const struct tp_pkt *p, unsigned n, char *err,
		       size_t errlen)
{
	struct fz_tp *f = t->priv;
	uint8_t hdr[WIRE_HDR_LEN];

	(void)err;
	(void)errlen;
	for (unsigned i = 0; i < n; i++) {
		CHECK(p[i].ep < f->neps);
		CHECK(p[i].hdr.type == WIRE_PUSH && p[i].hdr.job == f->job &&
		      p[i].hdr.token == f->token);
		CHECK(p[i].len <= f->max_payload);
		wire_encode(hdr, &p[i].hdr);
		if (p[i].len) {
			bool inside = false;
			for (unsigned b = 0; b < f->nbufs; b++)
				inside |= (const uint8_t *)p[i].payload >= f->buf[b] &&
					  (const uint8_t *)p[i].payload + p[i].len <=
						  f->buf[b] + f->len[b];
			CHECK(inside);
		}
		f->sent++;
	}
	return 0;
}

static int fz_rx_burst(struct transport *t, struct tp_dgram *d, unsigned max, char *err,
		       size_t errlen)
{
	struct fz_tp *f = t->priv;
	unsigned n = f->nrx < max ? f->nrx : max;

	(void)err;
	(void)errlen;
	memcpy(d, f->rx, n * sizeof(*d));
	memmove(f->rx, f->rx + n, (f->nrx - n) * sizeof(*d));
	f->nrx -= n;
	return (int)n;
}

static unsigned fz_poll_fds(const struct transport *t, int fds[TP_MAX_FDS])
{
	(void)t;
	(void)fds;
	return 0;
}

static void fz_counters(const struct transport *t, struct tp_counters *out)
{
	(void)t;
	memset(out, 0, sizeof(*out));
}

static void fz_close(struct transport *t)
{
	t->ops = NULL;
}

static const struct transport_ops fz_tp_ops = {
	.name = "fuzz",
	.tx_burst = fz_tx_burst,
	.rx_burst = fz_rx_burst,
	.poll_fds = fz_poll_fds,
	.counters = fz_counters,
	.close = fz_close,
};

/* A client as pbox_connect leaves it (no thread, no sockets; its control
 * connection closed unless the fuzzer gives it one). */
static pbox_client *fz_client_new(struct fz_tp *f)
{
	pbox_client *c = calloc(1, sizeof(*c));

	CHECK(c);
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->done_cond, NULL);
	ctrl_init(&c->ctrl);
	c->evfd = -1;
	CHECK(client_opts_read(c, NULL) == 0);
	c->opts.timeout_ms = 1000;
	snprintf(c->job, sizeof(c->job), "fz");
	snprintf(c->control, sizeof(c->control), "fuzz:1");
	c->rank = 0;
	c->world = 2;
	c->job_id = FZ_JOB;
	c->token = FZ_TOKEN;
	c->seg_bytes = FZ_SEG_BYTES;
	c->chunk_bytes = 2 * FZ_SEG_BYTES;
	c->box_slots = 256;
	c->neps = FZ_NEPS;
	c->eps = calloc(FZ_NEPS, sizeof(*c->eps));
	CHECK(c->eps);
	for (unsigned i = 0; i < FZ_NEPS; i++)
		c->eps[i] = (struct sockaddr_in){ .sin_family = AF_INET,
						  .sin_port = htons(FZ_EP_PORT[i]),
						  .sin_addr.s_addr = htonl(FZ_EP_IP[i]) };
	memset(f, 0, sizeof(*f));
	f->neps = FZ_NEPS;
	f->max_payload = FZ_SEG_BYTES;
	f->job = FZ_JOB;
	f->token = FZ_TOKEN;
	c->tp.ops = &fz_tp_ops;
	c->tp.priv = f;
	c->tp.kind = PBOX_TRANSPORT_UDP;
	CHECK(xfer_init(c) == 0);
	c->thread_started = true;
	c->joined = true;
	return c;
}

static void fz_client_register(struct fz_tp *f, const void *buf, size_t len)
{
	CHECK(f->nbufs < FZ_MAX_BUFS);
	f->buf[f->nbufs] = buf;
	f->len[f->nbufs++] = len;
}

/* End every call still active (as pbox_close's xfer_fatal does) and free
 * the client; the requests are the caller's to free. */
static void fz_client_free(pbox_client *c)
{
	xfer_fatal(c, PBOX_ECLOSED, "fuzz input done");
	xfer_free(c);
	ctrl_close(&c->ctrl);
	free(c->eps);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->done_cond);
	free(c);
}

#endif
