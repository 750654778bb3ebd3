/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tp_verbs.c - the verbs transport (transport.h): pbox datagrams as whole
 * Ethernet/IPv4/UDP frames (rawframe.h) through an RDMA NIC's raw-packet
 * queue pair, bypassing the kernel on both paths. The box sees the same
 * frames the udp transport's kernel would send.
 *
 *   send     a ring of registered frame buffers. tx_burst writes each
 *            datagram's frame into the next free buffer and posts the
 *            burst as one chain of work requests; one send in
 *            VERBS_TX_SIGNAL asks for a completion, which frees every
 *            buffer up to it (a send queue completes in order). With
 *            IBV_SEND_IP_CSUM the NIC writes the IPv4 and UDP checksums.
 *   receive  a ring of registered buffers, all posted at open. A flow rule
 *            (Ethernet dst = our MAC, IPv4 dst = our address, UDP dst =
 *            our port) steers the worker's traffic to the queue pair; the
 *            kernel no longer sees it. rx_burst hands out datagrams inside
 *            the buffers and posts those buffers again at its next call.
 *   waking   the receive CQ reports to a completion channel whose fd the
 *            progress thread polls; rx_burst re-arms it once the CQ is
 *            empty. While completions may be left (rx_burst stopped at
 *            max), poll_fds adds an always-readable eventfd.
 *
 *   GPUDirect a datagram whose payload is in registered GPU memory (tp_pkt
 *            mkey, verbs_mem.c) is sent as two pieces: the headers from
 *            its ring buffer, the payload read by the NIC from the GPU.
 *
 * The UDP port is reserved with a kernel socket (udp_reserve_port) so the
 * kernel gives it to nobody else. The rings are host memory registered
 * with ibv_reg_mr. Nothing is allocated after tp_verbs_open but the
 * memory regions of mem_reg.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "client/transport/net.h"
#include "common/clock.h"
#include "client/transport/rawframe.h"
#include "client/transport/verbs.h"
#include "common/drops.h"
#include "common/frame.h"

#define VERBS_TX_RING     512      /* send buffers (a power of two) */
#define VERBS_RX_RING     512      /* receive buffers (a power of two) */
#define VERBS_RING_MIN    64       /* smaller device queues: not worth it */
#define VERBS_TX_SIGNAL   32       /* one send in this many is signaled */
#define VERBS_POLL        32       /* completions taken from a CQ at once */
#define VERBS_TX_WAIT_NS  1000000  /* ring full: wait this long for completions */
#define VERBS_ARP_WAIT_MS 1000     /* for the next hop's MAC at open */
#define VERBS_DEREG_WAIT_NS 1000000000 /* mem_dereg: for the NIC's last GPU read */

struct verbs {
	struct verbs_port vp;          /* device, port, offloads */
	struct ibv_pd *pd;
	struct ibv_comp_channel *chan; /* the receive CQ's events */
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	struct ibv_flow *flow;
	struct ibv_mr *tx_mr, *rx_mr;
	uint8_t *tx_buf, *rx_buf;      /* ntx / nrx frames of buf_len bytes */
	uint32_t buf_len;              /* mtu + 14 rounded up to 64 */
	uint32_t frame_max;            /* mtu + 14 */
	uint32_t ntx, nrx;             /* ring sizes, powers of two */
	uint32_t signal;               /* signal one send in this many */
	uint64_t tx_head;              /* sends posted so far (wr_id = sequence) */
	uint64_t tx_tail;              /* sends known complete: buffer seq % ntx is
					* free for seq < tx_tail + ntx */
	uint64_t dev_seq;              /* 1 + the last send that read GPU memory (each
					* one is signaled); 0: none */
	struct ibv_send_wr *swr;       /* ntx: one per send buffer */
	struct ibv_sge *ssge;          /* 2 per send buffer: frame (or headers), payload */
	struct ibv_recv_wr *rwr;       /* nrx: one per receive buffer, wr_id = index */
	struct ibv_sge *rsge;
	uint32_t *held;                /* receive buffers handed out by the last rx_burst */
	uint32_t nheld;
	bool armed;                    /* the receive CQ raises an event on its next entry */
	bool rx_more;                  /* the last rx_burst may have left completions */
	struct ibv_wc swc[VERBS_POLL], rwc[VERBS_POLL];
	int port_fd;                   /* the kernel socket reserving our UDP port */
	int ready_fd;                  /* eventfd, always readable */
	uint16_t port;                 /* our UDP port, host order */
	const struct sockaddr_in *eps; /* tp_config.eps */
	unsigned neps;
	struct netpath *np;            /* per endpoint: interface, addresses, MACs */
	struct tp_counters ctr;        /* relaxed atomics (ctr_add) */
};


/* ---- send ----------------------------------------------------------------- */

/* Take what the send CQ has: the buffers of completed sends become free.
 * A failed send means the queue pair broke: PBOX_ESYS. */
static int tx_reap(struct verbs *v, char *err, size_t errlen)
{
	for (;;) {
		int got = ibv_poll_cq(v->scq, VERBS_POLL, v->swc);
		if (got < 0) {
			snprintf(err, errlen, "polling the send CQ of %s failed", v->vp.dev);
			return PBOX_ESYS;
		}
		for (int i = 0; i < got; i++) {
			const struct ibv_wc *w = &v->swc[i];
			if (w->status != IBV_WC_SUCCESS) {
				snprintf(err, errlen, "a send on %s port %u failed: %s (vendor error "
					 "0x%x)", v->vp.dev, v->vp.port, ibv_wc_status_str(w->status),
					 w->vendor_err);
				return PBOX_ESYS;
			}
			if (w->wr_id + 1 > v->tx_tail && w->wr_id < v->tx_head)
				v->tx_tail = w->wr_id + 1;
		}
		if (got < VERBS_POLL)
			return 0;
	}
}

static bool tx_full(const struct verbs *v)
{
	return v->tx_head - v->tx_tail >= v->ntx;
}

/* Post the chain first..last. Sends the device refuses for lack of room
 * (ENOMEM) are dropped and counted; any other refusal is PBOX_ESYS.
 * Returns the number posted. */
static int tx_post(struct verbs *v, struct ibv_send_wr **first, struct ibv_send_wr **last,
		   char *err, size_t errlen)
{
	struct ibv_send_wr *bad = NULL;

	if (!*first)
		return 0;
	uint64_t from = (*first)->wr_id;
	int rc = ibv_post_send(v->qp, *first, &bad);
	*first = *last = NULL;
	if (rc == 0) {
		tp_ctr_add(&v->ctr.tx_dgrams, v->tx_head - from);
		return (int)(v->tx_head - from);
	}
	/* Work requests from bad on were not posted: their buffers are free. */
	uint64_t upto = bad ? bad->wr_id : from;
	uint64_t lost = v->tx_head - upto;
	v->tx_head = upto;
	/* The last send reading GPU memory may be among them: mem_dereg
	 * waits only for one the NIC has (the last posted before upto, if
	 * not known complete), else for a completion that cannot come. */
	if (v->dev_seq > upto) {
		v->dev_seq = 0;
		for (uint64_t seq = upto; seq > v->tx_tail; seq--)
			if (v->swr[(seq - 1) & (v->ntx - 1)].num_sge == 2) {
				v->dev_seq = seq;
				break;
			}
	}
	tp_ctr_add(&v->ctr.tx_dgrams, upto - from);
	tp_ctr_add(&v->ctr.tx_dropped, lost);
	if (rc != ENOMEM) {
		snprintf(err, errlen, "ibv_post_send on %s port %u: %s", v->vp.dev, v->vp.port,
			 strerror(rc));
		return PBOX_ESYS;
	}
	return (int)(upto - from);
}

/* The ring is full: wait a little for the NIC to finish sends. */
static int tx_wait(struct verbs *v, char *err, size_t errlen)
{
	uint64_t end = clock_ns() + VERBS_TX_WAIT_NS;

	do {
		int rc = tx_reap(v, err, errlen);
		if (rc < 0 || !tx_full(v))
			return rc;
	} while (clock_ns() < end);
	return 0;
}

/* The sum of the UDP pseudo header, folded, not complemented: what a
 * checksum-offloading sender leaves in the UDP checksum field (Linux's
 * CHECKSUM_PARTIAL), so the NIC may finish it or compute it anew. A NIC
 * that did neither leaves a datagram the box still accepts
 * (FRAME_CSUM_UNFILLED). */
static void udp_pseudo_csum(uint8_t *frame)
{
	uint8_t *ip = frame + FRAME_ETH_LEN, *udp = ip + 20, pseudo[12];

	memcpy(pseudo, ip + 12, 8);
	pseudo[8] = 0;
	pseudo[9] = 17; /* UDP */
	memcpy(pseudo + 10, udp + 4, 2);
	uint64_t s = frame_csum_partial(pseudo, sizeof(pseudo), 0);
	while (s >> 16)
		s = (s & 0xFFFF) + (s >> 16);
	uint16_t c = (uint16_t)s;
	memcpy(udp + 6, &c, 2);
}

/* Write p's frame into f; its length. A payload in GPU memory (mkey) is
 * not copied: f gets the headers, and the caller sends the payload as a
 * second piece (mem_reg made sure the NIC computes the checksums). */
static size_t tx_build(const struct verbs *v, uint8_t *f, const struct tp_pkt *p)
{
	const struct netpath *np = &v->np[p->ep];
	const struct sockaddr_in *to = &v->eps[p->ep];
	size_t copied = p->mkey ? 0 : p->len;

	if (!v->vp.csum_tx)
		return rawframe_build(f, np, v->port, to, &p->hdr, p->payload, p->len);
	/* The NIC computes the checksums: no pass over the payload here. */
	frame_udp_headers(f, np->dst_mac, np->src_mac, ntohl(np->src.s_addr),
			  ntohl(to->sin_addr.s_addr), v->port, ntohs(to->sin_port),
			  WIRE_HDR_LEN + (size_t)p->len);
	wire_encode(f + RAWFRAME_HDRS, &p->hdr);
	memcpy(f + RAWFRAME_HDRS + WIRE_HDR_LEN, p->payload, copied);
	udp_pseudo_csum(f);
	return RAWFRAME_HDRS + WIRE_HDR_LEN + copied;
}

static int verbs_tx_burst(struct transport *t, const struct tp_pkt *p, unsigned n, char *err,
			  size_t errlen)
{
	struct verbs *v = t->priv;
	struct ibv_send_wr *first = NULL, *last = NULL;
	int rc, sent = 0;

	for (unsigned i = 0; i < n; i++) {
		if (p[i].ep >= v->neps ||
		    (uint64_t)RAWFRAME_HDRS + WIRE_HDR_LEN + p[i].len > v->frame_max) {
			snprintf(err, errlen, "verbs: a datagram of %u payload bytes to endpoint %u "
				 "does not fit the MTU (%u-byte frames, %u endpoints)", p[i].len,
				 p[i].ep, v->frame_max, v->neps);
			return PBOX_EINVAL;
		}
	}
	if ((rc = tx_reap(v, err, errlen)) < 0)
		return rc;
	for (unsigned i = 0; i < n; i++) {
		if (tx_full(v)) {
			/* Hand the NIC what is ready, then wait briefly for room. */
			if ((rc = tx_post(v, &first, &last, err, errlen)) < 0)
				return rc;
			sent += rc;
			if ((rc = tx_wait(v, err, errlen)) < 0)
				return rc;
			if (tx_full(v)) {
				tp_ctr_add(&v->ctr.tx_dropped, n - i);
				break;
			}
		}
		uint64_t seq = v->tx_head++;
		uint32_t slot = (uint32_t)(seq & (v->ntx - 1));
		struct ibv_send_wr *w = &v->swr[slot];
		w->wr_id = seq;
		w->next = NULL;
		w->sg_list[0].length = (uint32_t)tx_build(v, v->tx_buf + (size_t)slot * v->buf_len,
							  &p[i]);
		w->num_sge = p[i].mkey && p[i].len ? 2 : 1;
		w->sg_list[1] = (struct ibv_sge){ .addr = (uintptr_t)p[i].payload,
						  .length = p[i].len, .lkey = p[i].mkey };
		/* a send reading GPU memory is signaled: mem_dereg waits for it */
		if (w->num_sge == 2)
			v->dev_seq = seq + 1;
		w->send_flags = (v->vp.csum_tx ? IBV_SEND_IP_CSUM : 0) |
				((seq + 1) % v->signal == 0 || w->num_sge == 2
				 ? IBV_SEND_SIGNALED : 0);
		if (last)
			last->next = w;
		else
			first = w;
		last = w;
	}
	if ((rc = tx_post(v, &first, &last, err, errlen)) < 0)
		return rc;
	return sent + rc;
}

/* ---- receive -------------------------------------------------------------- */

/* Post again the buffers handed out by the last rx_burst, in one chain. */
static int rx_repost(struct verbs *v, char *err, size_t errlen)
{
	struct ibv_recv_wr *bad = NULL;

	if (v->nheld == 0)
		return 0;
	for (uint32_t i = 0; i < v->nheld; i++)
		v->rwr[v->held[i]].next = i + 1 < v->nheld ? &v->rwr[v->held[i + 1]] : NULL;
	int rc = ibv_post_recv(v->qp, &v->rwr[v->held[0]], &bad);
	v->nheld = 0;
	if (rc) {
		snprintf(err, errlen, "ibv_post_recv on %s port %u: %s", v->vp.dev, v->vp.port,
			 strerror(rc));
		return PBOX_ESYS;
	}
	return 0;
}

/* Take the completion channel's events (each one disarmed the CQ). */
static void rx_events(struct verbs *v)
{
	struct ibv_cq *cq;
	void *cq_ctx;
	unsigned nev = 0;

	while (ibv_get_cq_event(v->chan, &cq, &cq_ctx) == 0)
		nev++;
	if (nev) {
		ibv_ack_cq_events(v->rcq, nev);
		v->armed = false;
	}
}

/* The pbox datagram in a received frame (rawframe_parse's 0 or negative
 * drop reason). Where the NIC verified the IPv4 and UDP checksums
 * (IBV_WC_IP_CSUM_OK) they are not summed again. */
static int rx_parse(const struct verbs *v, const uint8_t *f, uint32_t len, bool csum_ok,
		    struct tp_dgram *d)
{
	struct frame_info fi;

	if (!csum_ok)
		return rawframe_parse(f, len, &v->np[0], v->port, &d->data, &d->len, &d->src_ip,
				      &d->src_port);
	int k = frame_parse(f, len, ntohl(v->np[0].src.s_addr), &fi);
	if (k != FRAME_UDP || fi.dst_port != v->port)
		return -DROP_BAD_PORT;
	*d = (struct tp_dgram){ .data = fi.payload, .len = (uint32_t)fi.payload_len,
				.src_ip = htonl(fi.src_ip), .src_port = htons(fi.src_port) };
	return 0;
}

/* One receive completion: a datagram into d (1), a refused frame (0), or
 * PBOX_ESYS when the queue pair broke. */
static int rx_one(struct verbs *v, const struct ibv_wc *w, struct tp_dgram *d, char *err,
		  size_t errlen)
{
	uint32_t b = (uint32_t)w->wr_id;

	if (b >= v->nrx) {
		snprintf(err, errlen, "receive completion on %s for unknown buffer %u", v->vp.dev, b);
		return PBOX_ESYS;
	}
	v->held[v->nheld++] = b;
	if (w->status == IBV_WC_WR_FLUSH_ERR) {
		snprintf(err, errlen, "the raw packet QP on %s port %u went to the error state "
			 "(receive flushed)", v->vp.dev, v->vp.port);
		return PBOX_ESYS;
	}
	if (w->status != IBV_WC_SUCCESS || w->byte_len > v->buf_len ||
	    rx_parse(v, v->rx_buf + (size_t)b * v->buf_len, w->byte_len,
		     (w->wc_flags & IBV_WC_IP_CSUM_OK) != 0, d) < 0) {
		tp_ctr_add(&v->ctr.rx_bad, 1);
		return 0;
	}
	return 1;
}

static int verbs_rx_burst(struct transport *t, struct tp_dgram *d, unsigned max, char *err,
			  size_t errlen)
{
	struct verbs *v = t->priv;
	unsigned n = 0, polled = 0;
	int rc;

	if ((rc = rx_repost(v, err, errlen)) < 0)
		return rc;
	rx_events(v);
	v->rx_more = false;
	for (;;) {
		unsigned want = max - n < VERBS_POLL ? max - n : VERBS_POLL;
		if (want == 0 || polled >= v->nrx) {
			v->rx_more = true;   /* poll_fds: come back at once */
			break;
		}
		int got = ibv_poll_cq(v->rcq, (int)want, v->rwc);
		if (got < 0) {
			snprintf(err, errlen, "polling the receive CQ of %s failed", v->vp.dev);
			return PBOX_ESYS;
		}
		polled += (unsigned)got;
		for (int i = 0; i < got; i++) {
			if ((rc = rx_one(v, &v->rwc[i], &d[n], err, errlen)) < 0)
				return rc;
			n += (unsigned)rc;
		}
		if ((unsigned)got == want)
			continue;
		/* Empty: arm, then look once more, since an entry that came
		 * between the poll and the arm raises no event. */
		if (v->armed)
			break;
		if ((rc = ibv_req_notify_cq(v->rcq, 0)) != 0) {
			snprintf(err, errlen, "ibv_req_notify_cq on %s: %s", v->vp.dev, strerror(rc));
			return PBOX_ESYS;
		}
		v->armed = true;
	}
	tp_ctr_add(&v->ctr.rx_dgrams, n);
	return (int)n;
}

static unsigned verbs_poll_fds(const struct transport *t, int fds[TP_MAX_FDS])
{
	const struct verbs *v = t->priv;

	fds[0] = v->chan->fd;
	if (!v->rx_more)
		return 1;
	fds[1] = v->ready_fd;
	return 2;
}

static void verbs_counters(const struct transport *t, struct tp_counters *out)
{
	const struct verbs *v = t->priv;

	tp_counters_load(&v->ctr, out);
}

/* ---- open and close ------------------------------------------------------- */

/* Everything v holds, in the reverse order of opening. */
static void verbs_free(struct verbs *v)
{
	if (v->flow)
		ibv_destroy_flow(v->flow);
	if (v->qp)
		ibv_destroy_qp(v->qp);
	if (v->tx_mr)
		ibv_dereg_mr(v->tx_mr);
	if (v->rx_mr)
		ibv_dereg_mr(v->rx_mr);
	free(v->tx_buf);
	free(v->rx_buf);
	if (v->rcq)
		ibv_destroy_cq(v->rcq);
	if (v->scq)
		ibv_destroy_cq(v->scq);
	if (v->chan)
		ibv_destroy_comp_channel(v->chan);
	if (v->pd)
		ibv_dealloc_pd(v->pd);
	verbs_dev_close(&v->vp);
	if (v->ready_fd >= 0)
		close(v->ready_fd);
	if (v->port_fd >= 0)
		close(v->port_fd);
	free(v->swr);
	free(v->ssge);
	free(v->rwr);
	free(v->rsge);
	free(v->held);
	free(v->np);
	free(v);
}

static void verbs_close_tp(struct transport *t)
{
	verbs_free(t->priv);
}

static int verbs_mem_reg_tp(struct transport *t, const struct tp_mem_src *src, struct tp_mem *m,
			    char *err, size_t errlen)
{
	struct verbs *v = t->priv;
	struct ibv_mr *mr;
	const char *how;
	int rc = verbs_mem_reg(v->pd, &v->vp, src->base, src->size, src->dmabuf_fd, &mr, &how,
			       err, errlen);

	if (rc < 0)
		return rc;
	*m = (struct tp_mem){ .handle = mr, .mkey = mr->lkey, .how = how };
	if (!m->mkey) {   /* 0 means "host memory" in a tp_pkt */
		ibv_dereg_mr(mr);
		snprintf(err, errlen, "GPUDirect: %s gave the region local key 0, which pbox "
			 "reserves", v->vp.dev);
		return PBOX_ENOTSUP;
	}
	return 0;
}

/* Only once the NIC has read the region for the last time: every send
 * that read GPU memory completed (a send queue completes in order). */
static void verbs_mem_dereg_tp(struct transport *t, struct tp_mem *m)
{
	struct verbs *v = t->priv;
	char err[8];
	uint64_t end = clock_ns() + VERBS_DEREG_WAIT_NS;

	while (v->tx_tail < v->dev_seq && clock_ns() < end && tx_reap(v, err, sizeof(err)) == 0)
		;
	if (m->handle)
		ibv_dereg_mr(m->handle);
	m->handle = NULL;
	m->mkey = 0;
}

static const struct transport_ops verbs_ops = {
	.name = "verbs",
	.tx_burst = verbs_tx_burst,
	.rx_burst = verbs_rx_burst,
	.poll_fds = verbs_poll_fds,
	.counters = verbs_counters,
	.close = verbs_close_tp,
	.mem_reg = verbs_mem_reg_tp,
	.mem_dereg = verbs_mem_dereg_tp,
};

/* The largest power of two <= want and <= limit (limit 0: no limit). */
static uint32_t ring_size(uint32_t want, uint32_t limit)
{
	uint32_t n = want;

	while (limit && n > limit)
		n >>= 1;
	return n;
}

/* Send and receive buffers: host memory registered with the device. */
static int bufs_alloc(struct verbs *v, char *err, size_t errlen)
{
	void *tx = NULL, *rx = NULL;

	if (posix_memalign(&tx, 4096, (size_t)v->ntx * v->buf_len) ||
	    posix_memalign(&rx, 4096, (size_t)v->nrx * v->buf_len)) {
		free(tx);
		snprintf(err, errlen, "out of memory for the verbs rings");
		return PBOX_ENOMEM;
	}
	v->tx_buf = tx;
	v->rx_buf = rx;
	memset(v->tx_buf, 0, (size_t)v->ntx * v->buf_len);
	memset(v->rx_buf, 0, (size_t)v->nrx * v->buf_len);
	v->tx_mr = ibv_reg_mr(v->pd, v->tx_buf, (size_t)v->ntx * v->buf_len, 0);
	if (v->tx_mr)
		v->rx_mr = ibv_reg_mr(v->pd, v->rx_buf, (size_t)v->nrx * v->buf_len,
				      IBV_ACCESS_LOCAL_WRITE);
	if (!v->tx_mr || !v->rx_mr) {
		snprintf(err, errlen, "ibv_reg_mr of %u KiB on %s: %s (locked memory limit: "
			 "ulimit -l)", (unsigned)(((size_t)v->ntx + v->nrx) * v->buf_len / 1024),
			 v->vp.dev, strerror(errno));
		return errno == ENOMEM ? PBOX_ENOMEM : PBOX_ESYS;
	}
	for (uint32_t i = 0; i < v->ntx; i++) {
		v->ssge[2 * i] = (struct ibv_sge){
			.addr = (uintptr_t)(v->tx_buf + (size_t)i * v->buf_len),
			.lkey = v->tx_mr->lkey };
		v->swr[i] = (struct ibv_send_wr){ .sg_list = &v->ssge[2 * i], .num_sge = 1,
						  .opcode = IBV_WR_SEND };
	}
	for (uint32_t i = 0; i < v->nrx; i++) {
		v->rsge[i] = (struct ibv_sge){ .addr = (uintptr_t)(v->rx_buf + (size_t)i * v->buf_len),
					       .length = v->buf_len, .lkey = v->rx_mr->lkey };
		v->rwr[i] = (struct ibv_recv_wr){ .wr_id = i, .sg_list = &v->rsge[i], .num_sge = 1 };
	}
	return 0;
}

/* PD, completion channel, CQs, the raw packet QP in RTS. */
static int qp_open(struct verbs *v, char *err, size_t errlen)
{
	const char *what;
	int e;

	if (!(v->pd = ibv_alloc_pd(v->vp.ctx))) {
		what = "ibv_alloc_pd";
		goto fail;
	}
	if (!(v->chan = ibv_create_comp_channel(v->vp.ctx))) {
		what = "ibv_create_comp_channel";
		goto fail;
	}
	int fl = fcntl(v->chan->fd, F_GETFL);
	if (fl < 0 || fcntl(v->chan->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		what = "fcntl O_NONBLOCK on the completion channel";
		goto fail;
	}
	if (!(v->scq = ibv_create_cq(v->vp.ctx, (int)v->ntx, v, NULL, 0))) {
		what = "ibv_create_cq (send)";
		goto fail;
	}
	if (!(v->rcq = ibv_create_cq(v->vp.ctx, (int)v->nrx, v, v->chan, 0))) {
		what = "ibv_create_cq (receive)";
		goto fail;
	}
	struct ibv_qp_init_attr qa = {
		.send_cq = v->scq, .recv_cq = v->rcq,
		.cap = { .max_send_wr = v->ntx, .max_recv_wr = v->nrx,
			 .max_send_sge = v->vp.max_send_sge, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RAW_PACKET,
		.sq_sig_all = 0,
	};
	if (!(v->qp = ibv_create_qp(v->pd, &qa))) {
		e = errno;
		if (e == EPERM || e == EACCES) {
			snprintf(err, errlen, "creating a raw packet QP on %s needs CAP_NET_RAW (run "
				 "as root or grant the program cap_net_raw): %s", v->vp.dev, strerror(e));
			return PBOX_EPERM;
		}
		if (e == EOPNOTSUPP || e == EINVAL || e == ENOSYS) {
			snprintf(err, errlen, "%s offers no raw packet QP (ibv_create_qp: %s)",
				 v->vp.dev, strerror(e));
			return PBOX_ENOTSUP;
		}
		what = "ibv_create_qp (raw packet)";
		errno = e;
		goto fail;
	}
	/* A raw packet QP needs its port in INIT, and only state changes after. */
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT, .port_num = v->vp.port };
	if ((e = ibv_modify_qp(v->qp, &at, IBV_QP_STATE | IBV_QP_PORT)) == 0) {
		at = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR };
		if ((e = ibv_modify_qp(v->qp, &at, IBV_QP_STATE)) == 0) {
			at = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS };
			e = ibv_modify_qp(v->qp, &at, IBV_QP_STATE);
		}
	}
	if (e) {
		snprintf(err, errlen, "moving the raw packet QP on %s to %s: %s", v->vp.dev,
			 at.qp_state == IBV_QPS_INIT ? "INIT" : at.qp_state == IBV_QPS_RTR ? "RTR" :
			 "RTS", strerror(e));
		return PBOX_ESYS;
	}
	return 0;
fail:
	e = errno;
	snprintf(err, errlen, "%s on %s: %s", what, v->vp.dev, strerror(e));
	return e == ENOMEM ? PBOX_ENOMEM : PBOX_ESYS;
}

/* Post every receive buffer, arm the receive CQ. */
static int rx_start(struct verbs *v, char *err, size_t errlen)
{
	for (uint32_t i = 0; i < v->nrx; i++)
		v->held[i] = i;
	v->nheld = v->nrx;
	int rc = rx_repost(v, err, errlen);
	if (rc < 0)
		return rc;
	if ((rc = ibv_req_notify_cq(v->rcq, 0)) != 0) {
		snprintf(err, errlen, "ibv_req_notify_cq on %s: %s", v->vp.dev, strerror(rc));
		return PBOX_ESYS;
	}
	v->armed = true;
	return 0;
}

/* Steer our flow (Ethernet dst = our MAC, IPv4 dst = our address, UDP
 * dst = our port) to the QP. Flow specs are in network byte order. */
static int flow_open(struct verbs *v, char *err, size_t errlen)
{
	struct {
		struct ibv_flow_attr attr;
		struct ibv_flow_spec_eth eth;
		struct ibv_flow_spec_ipv4 ip;
		struct ibv_flow_spec_tcp_udp udp;
	} fa;
	/* The specs follow the attribute back to back, each spec.size long. */
	_Static_assert(sizeof(fa) == sizeof(fa.attr) + sizeof(fa.eth) + sizeof(fa.ip) +
		       sizeof(fa.udp), "flow specs must be contiguous");

	memset(&fa, 0, sizeof(fa));
	fa.attr.type = IBV_FLOW_ATTR_NORMAL;
	fa.attr.size = sizeof(fa);
	fa.attr.num_of_specs = 3;
	fa.attr.port = v->vp.port;
	fa.eth.type = IBV_FLOW_SPEC_ETH;
	fa.eth.size = sizeof(fa.eth);
	memcpy(fa.eth.val.dst_mac, v->np[0].src_mac, 6);
	memset(fa.eth.mask.dst_mac, 0xFF, 6);
	fa.eth.val.ether_type = htons(0x0800);
	fa.eth.mask.ether_type = 0xFFFF;
	fa.ip.type = IBV_FLOW_SPEC_IPV4;
	fa.ip.size = sizeof(fa.ip);
	fa.ip.val.dst_ip = v->np[0].src.s_addr;
	fa.ip.mask.dst_ip = 0xFFFFFFFF;
	fa.udp.type = IBV_FLOW_SPEC_UDP;
	fa.udp.size = sizeof(fa.udp);
	fa.udp.val.dst_port = htons(v->port);
	fa.udp.mask.dst_port = 0xFFFF;
	v->flow = ibv_create_flow(v->qp, &fa.attr);
	if (v->flow)
		return 0;
	int e = errno;
	snprintf(err, errlen, "steering UDP port %u on %s port %u to the QP (ibv_create_flow): "
		 "%s%s", v->port, v->vp.dev, v->vp.port, strerror(e),
		 e == EPERM ? " (needs CAP_NET_RAW)" : "");
	if (e == EPERM || e == EACCES)
		return PBOX_EPERM;
	return e == EOPNOTSUPP || e == ENOTSUP || e == ENOSYS || e == ENXIO || e == EINVAL ?
	       PBOX_ENOTSUP : PBOX_ESYS;
}

static int verbs_setup(struct verbs *v, const struct tp_config *cfg, struct ibv_device **list,
		       int ndev, char *err, size_t errlen)
{
	int rc;

	if ((rc = netpath_resolve_eps(v->eps, v->neps, VERBS_ARP_WAIT_MS, "verbs", v->np, err,
				       errlen)) < 0 ||
	    (rc = verbs_dev_open(list, ndev, v->np[0].ifname, &v->vp, err, errlen)) < 0)
		return rc;
	uint32_t mtu = cfg->mtu ? cfg->mtu : v->np[0].mtu;
	if (mtu < 576 || (v->np[0].mtu && mtu > v->np[0].mtu)) {
		snprintf(err, errlen, "MTU %u does not fit interface %s (MTU %u)", mtu,
			 v->np[0].ifname, v->np[0].mtu);
		return PBOX_ENOTSUP;
	}
	v->frame_max = mtu + FRAME_ETH_LEN;
	v->buf_len = (v->frame_max + 63) / 64 * 64;
	v->ntx = ring_size(VERBS_TX_RING, v->vp.max_qp_wr < v->vp.max_cqe ? v->vp.max_qp_wr :
			   v->vp.max_cqe);
	v->nrx = ring_size(VERBS_RX_RING, v->vp.max_qp_wr < v->vp.max_cqe ? v->vp.max_qp_wr :
			   v->vp.max_cqe);
	if (v->ntx < VERBS_RING_MIN || v->nrx < VERBS_RING_MIN) {
		snprintf(err, errlen, "%s allows only %u work requests per queue", v->vp.dev,
			 v->vp.max_qp_wr);
		return PBOX_ENOTSUP;
	}
	v->signal = VERBS_TX_SIGNAL;
	v->swr = calloc(v->ntx, sizeof(*v->swr));
	v->ssge = calloc(2 * (size_t)v->ntx, sizeof(*v->ssge));
	v->rwr = calloc(v->nrx, sizeof(*v->rwr));
	v->rsge = calloc(v->nrx, sizeof(*v->rsge));
	v->held = calloc(v->nrx, sizeof(*v->held));
	if (!v->swr || !v->ssge || !v->rwr || !v->rsge || !v->held) {
		snprintf(err, errlen, "out of memory for the verbs transport");
		return PBOX_ENOMEM;
	}
	if ((rc = qp_open(v, err, errlen)) < 0 || (rc = bufs_alloc(v, err, errlen)) < 0 ||
	    (rc = rx_start(v, err, errlen)) < 0 || (rc = flow_open(v, err, errlen)) < 0)
		return rc;
	return 0;
}

int tp_verbs_open(struct transport *t, const struct tp_config *cfg, char *err, size_t errlen)
{
	struct ibv_device **list = NULL;
	int rc, ndev;

	if (cfg->neps == 0) {
		snprintf(err, errlen, "no box data endpoint to reach");
		return PBOX_EINVAL;
	}
	/* First, so that a host without RDMA devices waits for nothing. */
	if ((ndev = verbs_dev_list(&list, err, errlen)) < 0)
		return ndev;
	struct verbs *v = calloc(1, sizeof(*v));
	if (!v || !(v->np = calloc(cfg->neps, sizeof(*v->np)))) {
		free(v);
		ibv_free_device_list(list);
		snprintf(err, errlen, "out of memory for the verbs transport");
		return PBOX_ENOMEM;
	}
	v->port_fd = v->ready_fd = -1;
	v->eps = cfg->eps;
	v->neps = cfg->neps;
	rc = udp_reserve_port(&v->port_fd, &v->port, err, errlen);
	if (rc == 0) {
		v->ready_fd = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);
		if (v->ready_fd < 0) {
			snprintf(err, errlen, "eventfd: %s", strerror(errno));
			rc = PBOX_ESYS;
		}
	}
	if (rc == 0)
		rc = verbs_setup(v, cfg, list, ndev, err, errlen);
	ibv_free_device_list(list);
	if (rc < 0) {
		verbs_free(v);
		return rc;
	}
	t->priv = v;
	t->ops = &verbs_ops;
	t->port = v->port;
	t->src = v->np[0].src;
	snprintf(t->info, sizeof(t->info), "verbs on %s port %u (%s), raw packet QP, %u send + "
		 "%u receive buffers of %u B, send checksums %s", v->vp.dev, v->vp.port,
		 v->np[0].ifname, v->ntx, v->nrx, v->buf_len,
		 v->vp.csum_tx ? "by the NIC" : "in software");
	return 0;
}
