/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tp_xdp.c - the xdp transport (transport.h): an AF_XDP socket on queue 0
 * of the interface toward the box, the worker writing and reading whole
 * Ethernet/IPv4/UDP frames itself (rawframe.h).
 *
 * The UMEM, its fill and completion rings and the XDP program are the
 * interface's, shared by every xdp transport of the process there (a
 * fleet's clients, one per box: xdp_share.h); the socket's rx and tx rings
 * are its own. Memory, in the UMEM's 4 KiB chunks:
 *   rx: chunks from the one fill ring; a burst's chunks go back to it at
 *       the next burst, under the share's lock;
 *   tx: slots of the share's pool (xsk_slots.h), one frame each, taken a
 *       burst's worth at a time (kept in `cache` between bursts) under the
 *       lock, which reaps the completion ring for every socket first.
 * A frame longer than a chunk (jumbo MTU) is written contiguously into its
 * slot and sent as slot_chunks descriptors chained with XDP_PKT_CONTD;
 * received ones arrive chained the same way (AF_XDP multi-buffer, Linux
 * >= 6.6, XDP_USE_SG) and are copied into a staging area. Single-chunk
 * frames are read in place. Nothing is allocated after open.
 *
 * Steering: client/transport/bpf/xdp_flow.bpf.c redirects this socket's
 * UDP flow (its address and port) to it; everything else goes on to the
 * kernel. Frames of the flow that land on another queue (a multi-queue
 * NIC without a steering rule) reach the UDP socket that reserves the
 * port: rx_burst drains it too.
 *
 * need_wakeup: the kernel is kicked (sendto/recvfrom) only when the rings
 * say it sleeps; in copy mode each sendto moves at most 32 descriptors,
 * so a burst kicks until the ring drains.
 * busy_poll: SO_PREFER_BUSY_POLL with a budget, and rx_burst drives the
 * queue itself when the ring is empty.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/capability.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "client/transport/net.h"
#include "client/transport/rawframe.h"
#include "client/transport/xdp_share.h"

#ifndef XDP_PKT_CONTD
#define XDP_PKT_CONTD (1 << 0)
#endif
#ifndef SO_PREFER_BUSY_POLL
#define SO_PREFER_BUSY_POLL 69
#endif
#ifndef SO_BUSY_POLL_BUDGET
#define SO_BUSY_POLL_BUDGET 70
#endif

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

#define XDP_RX_PEEK     256u     /* descriptors taken from the rx ring at once */
#define XDP_UDP_BURST   8u       /* datagrams taken from the port's UDP socket at once */
#define XDP_KICK_BATCH  32u      /* descriptors one copy-mode sendto moves (TX_BATCH_SIZE) */
#define XDP_ARP_WAIT_MS 1000
#define XDP_UNSTEER_US  1000u    /* frames in flight to a socket just unsteered: landed by then */
#define XDP_SLOT_CACHE  256u     /* tx slots a socket holds at most (XFER_TX_BURST) */
#define BUSY_POLL_US    20
#define BUSY_POLL_BUDGET 64

struct xdp_tp {
	struct xdp_share *sh;        /* the interface's UMEM, fill/completion rings, program */
	struct xsk_socket *xsk;
	struct xsk_ring_prod tx;
	struct xsk_ring_cons rx;
	uint8_t *area;               /* sh->area */
	unsigned xsk_idx;            /* in the program's xsks map */
	int xsk_fd;
	int udp_fd;                  /* reserves the port; receives what misses the socket */
	struct netpath *np;          /* per endpoint: one interface and source, a next hop each */
	uint16_t port;
	const struct sockaddr_in *eps;
	unsigned neps;
	bool busy_poll;
	uint32_t frame_max;          /* the largest frame: MTU + Ethernet header */
	bool udp_ready;              /* poll saw udp_fd readable: drain it */
	/* tx slots taken from the share's pool, not yet sent */
	uint32_t slot_chunks;
	uint32_t ncache;
	uint32_t cache[XDP_SLOT_CACHE];
	/* rx */
	uint64_t *done;              /* chunks handed out last burst: back to the fill ring next */
	uint32_t ndone;
	uint8_t *stage;              /* multi-buffer frames, copied whole */
	size_t stage_frame;          /* bytes per staged frame */
	uint8_t *udp_buf;            /* XDP_UDP_BURST datagrams from udp_fd */
	size_t udp_len;
	struct tp_counters ctr;      /* relaxed atomics */
};


/* ---- privileges ----------------------------------------------------------- */

static bool has_cap(const struct __user_cap_data_struct d[2], int cap)
{
	return (d[cap / 32].effective >> (cap % 32)) & 1;
}

/* Checked before libbpf runs, so a worker without them falls back quietly
 * (libbpf would print its own errors) and the message names what is
 * missing. */
static int check_caps(char *err, size_t errlen)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	const int cap_bpf = 39;

	if (syscall(SYS_capget, &h, d) != 0)
		return 0; /* cannot tell: let the calls below say */
	bool raw = has_cap(d, CAP_NET_RAW), admin = has_cap(d, CAP_NET_ADMIN);
	bool bpf = has_cap(d, cap_bpf) || has_cap(d, CAP_SYS_ADMIN);
	if (raw && admin && bpf)
		return 0;
	snprintf(err, errlen, "needs CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF (or root); "
		 "missing%s%s%s", raw ? "" : " CAP_NET_RAW", admin ? "" : " CAP_NET_ADMIN",
		 bpf ? "" : " CAP_BPF");
	return PBOX_EPERM;
}

/* ---- set-up --------------------------------------------------------------- */

static void busy_poll_on(struct xdp_tp *x)
{
	int one = 1, us = BUSY_POLL_US, budget = BUSY_POLL_BUDGET;

	x->busy_poll = setsockopt(x->xsk_fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &one, sizeof(one)) == 0 &&
		       setsockopt(x->xsk_fd, SOL_SOCKET, SO_BUSY_POLL, &us, sizeof(us)) == 0 &&
		       setsockopt(x->xsk_fd, SOL_SOCKET, SO_BUSY_POLL_BUDGET, &budget, sizeof(budget)) == 0;
}

/* The share's lock: the fill and completion rings, the slot pool. */
static inline void share_lock(struct xdp_tp *x)
{
	pthread_mutex_lock(&x->sh->lock);
}

static inline void share_unlock(struct xdp_tp *x)
{
	pthread_mutex_unlock(&x->sh->lock);
}

/* ---- tx ------------------------------------------------------------------- */

/* Reap the completion ring (every socket's: the slots go back to the
 * pool) and top this socket's cache up to want slots (at most
 * XDP_SLOT_CACHE), under the share's lock: once a burst, or when a burst
 * ran out. */
static void reap(struct xdp_tp *x, uint32_t want)
{
	if (want > XDP_SLOT_CACHE)
		want = XDP_SLOT_CACHE;
	share_lock(x);
	xdp_share_reap_locked(x->sh);
	if (x->ncache < want)
		x->ncache += xsk_slots_take(&x->sh->slots, x->cache + x->ncache, want - x->ncache);
	share_unlock(x);
}

static bool tx_ring_empty(struct xdp_tp *x)
{
	return xsk_prod_nb_free(&x->tx, XDP_RING) == XDP_RING;
}

/* Let the kernel send what the tx ring holds: in copy mode a sendto moves
 * up to XDP_KICK_BATCH descriptors (a jumbo frame takes three), so kick
 * until the ring drains, bounded by what it holds. A descriptor left in
 * the ring waits for the next burst's kick: at the end of a window that
 * is the retransmission timeout. */
static int kick(struct xdp_tp *x, char *err, size_t errlen)
{
	unsigned tries = (XDP_RING - xsk_prod_nb_free(&x->tx, XDP_RING)) / XDP_KICK_BATCH + 4;

	while (tries-- > 0 && xsk_ring_prod__needs_wakeup(&x->tx) && !tx_ring_empty(x)) {
		tp_ctr_add(&x->ctr.wakeups, 1);
		if (sendto(x->xsk_fd, NULL, 0, MSG_DONTWAIT, NULL, 0) >= 0)
			continue;
		if (errno == EAGAIN || errno == EBUSY || errno == ENOBUFS || errno == EINTR) {
			reap(x, 0);
			continue;
		}
		if (errno == ENETDOWN || errno == ENXIO) {
			snprintf(err, errlen, "AF_XDP send on %s: %s (the interface went down or "
				 "away)", x->np[0].ifname, strerror(errno));
			return PBOX_ESYS;
		}
		/* others are transient: retransmission repairs what was lost */
		break;
	}
	return 0;
}

static int xdp_tx_burst(struct transport *t, const struct tp_pkt *p, unsigned n, char *err,
			size_t errlen)
{
	struct xdp_tp *x = t->priv;
	unsigned sent = 0, queued = 0;
	size_t slot_bytes = (size_t)x->slot_chunks * XDP_CHUNK;

	if (x->ncache < n)
		reap(x, n);
	for (unsigned i = 0; i < n; i++) {
		size_t flen = RAWFRAME_HDRS + WIRE_HDR_LEN + (size_t)p[i].len;
		uint32_t nd = (uint32_t)((flen + XDP_CHUNK - 1) / XDP_CHUNK), idx;
		if (flen > slot_bytes) {   /* larger than the MTU the transport was opened for */
			tp_ctr_add(&x->ctr.tx_dropped, 1);
			continue;
		}
		if (x->ncache == 0 || xsk_ring_prod__reserve(&x->tx, nd, &idx) != nd) {
			/* full: hand over what is queued, take back what completed */
			xsk_ring_prod__submit(&x->tx, queued);
			queued = 0;
			int rc = kick(x, err, errlen);
			if (rc < 0)
				return rc;
			reap(x, n - i);
			if (x->ncache == 0 || xsk_ring_prod__reserve(&x->tx, nd, &idx) != nd) {
				tp_ctr_add(&x->ctr.tx_dropped, 1);
				continue;
			}
		}
		uint32_t s = x->cache[--x->ncache];
		uint64_t base = xsk_slots_addr(&x->sh->slots, s);
		rawframe_build(x->area + base, &x->np[p[i].ep], x->port, &x->eps[p[i].ep], &p[i].hdr,
			       p[i].payload, p[i].len);
		for (uint32_t d = 0; d < nd; d++) {
			struct xdp_desc *xd = xsk_ring_prod__tx_desc(&x->tx, idx + d);
			xd->addr = base + (uint64_t)d * XDP_CHUNK;
			xd->len = d + 1 < nd ? XDP_CHUNK : (uint32_t)(flen - (size_t)d * XDP_CHUNK);
			xd->options = d + 1 < nd ? XDP_PKT_CONTD : 0;
		}
		xsk_slots_sent(&x->sh->slots, s, nd);
		queued += nd;
		sent++;
	}
	xsk_ring_prod__submit(&x->tx, queued);
	int rc = kick(x, err, errlen);
	if (rc < 0)
		return rc;
	tp_ctr_add(&x->ctr.tx_dgrams, sent);
	return (int)sent;
}

/* ---- rx ------------------------------------------------------------------- */

/* The last burst's chunks back to the share's fill ring, under its lock. */
static void refill(struct xdp_tp *x)
{
	struct xsk_ring_prod *fill = &x->sh->fill;
	uint32_t idx;
	bool wake;

	if (x->ndone == 0)
		return;
	share_lock(x);
	if (xsk_ring_prod__reserve(fill, x->ndone, &idx) != x->ndone) {
		share_unlock(x);
		return; /* cannot happen: every rx chunk fits the ring; kept for next time */
	}
	for (uint32_t i = 0; i < x->ndone; i++)
		*xsk_ring_prod__fill_addr(fill, idx + i) = x->done[i];
	xsk_ring_prod__submit(fill, x->ndone);
	wake = xsk_ring_prod__needs_wakeup(fill);
	share_unlock(x);
	x->ndone = 0;
	if (wake) {
		tp_ctr_add(&x->ctr.wakeups, 1);
		recvfrom(x->xsk_fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
	}
}

static void accept_frame(struct xdp_tp *x, const uint8_t *f, size_t len, struct tp_dgram *d,
			 unsigned *n)
{
	struct tp_dgram *o = &d[*n];

	if (rawframe_parse(f, len, &x->np[0], x->port, &o->data, &o->len, &o->src_ip,
			   &o->src_port) < 0) {
		tp_ctr_add(&x->ctr.rx_bad, 1);
		return;
	}
	(*n)++;
}

/* Datagrams that reached the port's UDP socket instead (another queue). */
static unsigned drain_udp(struct xdp_tp *x, struct tp_dgram *d, unsigned max)
{
	unsigned n = 0;

	while (n < max && n < XDP_UDP_BURST) {
		uint8_t *b = x->udp_buf + (size_t)n * x->udp_len;
		struct sockaddr_in from = { 0 };
		socklen_t fl = sizeof(from);
		ssize_t r = recvfrom(x->udp_fd, b, x->udp_len, MSG_DONTWAIT | MSG_TRUNC,
				     (struct sockaddr *)&from, &fl);
		if (r < 0) {
			x->udp_ready = false;   /* drained: wait for poll to say more */
			break;
		}
		if ((size_t)r > x->udp_len) {
			tp_ctr_add(&x->ctr.rx_bad, 1);
			continue;
		}
		d[n++] = (struct tp_dgram){ .data = b, .len = (uint32_t)r,
					    .src_ip = from.sin_addr.s_addr,
					    .src_port = from.sin_port };
	}
	return n;
}

static int xdp_rx_burst(struct transport *t, struct tp_dgram *d, unsigned max, char *err,
			size_t errlen)
{
	struct xdp_tp *x = t->priv;
	uint32_t idx, got, used = 0;
	unsigned n = 0, staged = 0;

	(void)err;
	(void)errlen;
	refill(x);
	got = xsk_ring_cons__peek(&x->rx, XDP_RX_PEEK - x->ndone, &idx);
	while (used < got && n < max && staged < TP_RX_BURST) {
		/* one frame: descriptors up to the first without XDP_PKT_CONTD */
		uint32_t nd = 0;
		while (used + nd < got &&
		       (xsk_ring_cons__rx_desc(&x->rx, idx + used + nd)->options & XDP_PKT_CONTD))
			nd++;
		if (used + nd >= got)
			break;   /* its last part is not in the ring yet: next time */
		nd++;
		const struct xdp_desc *first = xsk_ring_cons__rx_desc(&x->rx, idx + used);
		if (nd == 1) {
			accept_frame(x, xsk_umem__get_data(x->area, first->addr), first->len, d, &n);
		} else {
			uint8_t *st = x->stage + (size_t)staged++ * x->stage_frame;
			size_t off = 0;
			bool fits = true;
			for (uint32_t k = 0; k < nd; k++) {
				const struct xdp_desc *xd = xsk_ring_cons__rx_desc(&x->rx, idx + used + k);
				fits = fits && off + xd->len <= x->stage_frame;
				if (fits)
					memcpy(st + off, xsk_umem__get_data(x->area, xd->addr), xd->len);
				off += xd->len;
			}
			if (fits)
				accept_frame(x, st, off, d, &n);
			else
				tp_ctr_add(&x->ctr.rx_bad, 1);
		}
		for (uint32_t k = 0; k < nd; k++) /* chunk base: aligned mode masks offsets */
			x->done[x->ndone++] = xsk_ring_cons__rx_desc(&x->rx, idx + used + k)->addr &
					      ~(uint64_t)(XDP_CHUNK - 1);
		used += nd;
	}
	/* peek moved the ring's cached consumer past all it returned: give
	 * back what is left for the next burst (else those frames are skipped
	 * for good, their chunks never refilled, and the kernel, seeing them
	 * unconsumed, keeps the socket readable) */
	xsk_ring_cons__cancel(&x->rx, got - used);
	xsk_ring_cons__release(&x->rx, used);
	if (n == 0) {
		if (x->busy_poll) {   /* drive the queue ourselves */
			tp_ctr_add(&x->ctr.wakeups, 1);
			recvfrom(x->xsk_fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
		}
		if (x->udp_ready)
			n = drain_udp(x, d, max);
	}
	tp_ctr_add(&x->ctr.rx_dgrams, n);
	return (int)n;
}

/* ---- close ----------------------------------------------------------------- */

/* The frames in this socket's rx ring, unread, their chunks back to the
 * fill ring. */
static void rx_give_back(struct xdp_tp *x)
{
	uint32_t idx, n;

	refill(x);
	while ((n = xsk_ring_cons__peek(&x->rx, XDP_RX_PEEK, &idx)) > 0) {
		for (uint32_t k = 0; k < n; k++)
			x->done[x->ndone++] = xsk_ring_cons__rx_desc(&x->rx, idx + k)->addr &
					      ~(uint64_t)(XDP_CHUNK - 1);
		xsk_ring_cons__release(&x->rx, n);
		refill(x);
	}
}

/* Leaving a share others keep: nothing of this socket's may stay lost to
 * them. Its flow unsteered first, the frames already in its rx ring are
 * taken (their chunks back to the fill ring), and its tx ring is kicked
 * until the kernel has taken everything (bounded: the completions come
 * back to the pool); its unsent slots go back too. Frames the kernel was
 * redirecting to it as it was unsteered land by the end of that NAPI
 * poll: with others in the share, the rx ring is drained again 1 ms
 * later. */
static void drain(struct xdp_tp *x)
{
	char err[128];

	rx_give_back(x);
	for (unsigned tries = 0; tries < XDP_RING / 32 && !tx_ring_empty(x); tries++) {
		if (kick(x, err, sizeof(err)) < 0)
			break;
		if (!xsk_ring_prod__needs_wakeup(&x->tx))
			usleep(100);   /* zero-copy: the driver takes them by itself */
	}
	if (xdp_share_members(x->sh) > 1) {
		usleep(XDP_UNSTEER_US);
		rx_give_back(x);
	}
	share_lock(x);
	xdp_share_reap_locked(x->sh);
	xsk_slots_give(&x->sh->slots, x->cache, x->ncache);
	x->ncache = 0;
	share_unlock(x);
}

static void xdp_free(struct xdp_tp *x)
{
	if (x->sh) {
		xdp_share_unsteer(x->sh, x->xsk_idx, x->np[0].src.s_addr, x->port);
		drain(x);
		xdp_share_leave(x->sh, x->xsk, x->xsk_idx);
	}
	if (x->udp_fd >= 0)
		close(x->udp_fd);
	free(x->done);
	free(x->stage);
	free(x->udp_buf);
	free(x->np);
	free(x);
}

/* ---- the rest of the vtable ----------------------------------------------- */

static unsigned xdp_poll_fds(const struct transport *t, int fds[TP_MAX_FDS])
{
	const struct xdp_tp *x = t->priv;

	fds[0] = x->xsk_fd;
	fds[1] = x->udp_fd;
	return 2;
}

static void xdp_polled(struct transport *t, const short *revents, unsigned n)
{
	struct xdp_tp *x = t->priv;

	if (n > 1 && (revents[1] & POLLIN))
		x->udp_ready = true;
}

static void xdp_counters(const struct transport *t, struct tp_counters *out)
{
	const struct xdp_tp *x = t->priv;
	struct xdp_statistics st;
	socklen_t sl = sizeof(st);

	tp_counters_load(&x->ctr, out);
	if (getsockopt(x->xsk_fd, SOL_XDP, XDP_STATISTICS, &st, &sl) == 0) {
		/* the fill ring's count is the share's: its first socket's */
		out->rx_lost += st.rx_dropped + st.rx_ring_full +
				(xdp_share_first(x->sh, x->xsk_idx) ? st.rx_fill_ring_empty_descs : 0);
		out->tx_dropped += st.tx_invalid_descs;
		out->rx_bad += st.rx_invalid_descs;
	}
}

static void xdp_close(struct transport *t)
{
	xdp_free(t->priv);
}

static const struct transport_ops xdp_ops = {
	.name = "xdp",
	.tx_burst = xdp_tx_burst,
	.rx_burst = xdp_rx_burst,
	.poll_fds = xdp_poll_fds,
	.polled = xdp_polled,
	.counters = xdp_counters,
	.close = xdp_close,
};

/* The per-socket buffers: chunks to give back, staged multi-buffer
 * frames, datagrams from the UDP socket. */
static int bufs_alloc(struct xdp_tp *x, uint32_t frame_max, char *err, size_t errlen)
{
	x->frame_max = frame_max;
	x->slot_chunks = (frame_max + XDP_CHUNK - 1) / XDP_CHUNK;
	x->done = calloc(XDP_RX_PEEK, sizeof(*x->done));
	x->stage_frame = (size_t)x->slot_chunks * XDP_CHUNK;
	x->stage = malloc(TP_RX_BURST * x->stage_frame);
	x->udp_len = (WIRE_HDR_LEN + WIRE_MAX_PAYLOAD + 63) / 64 * 64;
	x->udp_buf = malloc(XDP_UDP_BURST * x->udp_len);
	if (!x->done || !x->stage || !x->udp_buf) {
		snprintf(err, errlen, "out of memory for the xdp transport");
		return PBOX_ENOMEM;
	}
	return 0;
}

/* The namespace's cookie (one process may have threads in several): 0
 * where the kernel cannot tell. */
static uint64_t netns_cookie(int fd)
{
	uint64_t c = 0;
	socklen_t cl = sizeof(c);

	return getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, &c, &cl) == 0 ? c : 0;
}

int tp_xdp_open(struct transport *t, const struct tp_config *cfg, char *err, size_t errlen)
{
	int rc = check_caps(err, errlen);
	if (rc < 0)
		return rc;
	struct xdp_tp *x = calloc(1, sizeof(*x));
	if (!x) {
		snprintf(err, errlen, "out of memory for the xdp transport");
		return PBOX_ENOMEM;
	}
	x->udp_fd = x->xsk_fd = -1;
	x->eps = cfg->eps;
	x->neps = cfg->neps;
	if (!(x->np = calloc(cfg->neps, sizeof(*x->np)))) {
		free(x);
		snprintf(err, errlen, "out of memory for the xdp transport");
		return PBOX_ENOMEM;
	}
	unsigned others = 0;
	if ((rc = netpath_resolve_eps(x->eps, x->neps, XDP_ARP_WAIT_MS, "xdp", x->np, err,
				      errlen)) == 0 &&
	    (rc = udp_reserve_port(&x->udp_fd, &x->port, err, errlen)) == 0) {
		uint32_t mtu = cfg->mtu > x->np[0].mtu ? cfg->mtu : x->np[0].mtu;
		rc = bufs_alloc(x, mtu + 14, err, errlen);
	}
	if (rc == 0) {
		struct xdp_member m = { .np = &x->np[0], .netns = netns_cookie(x->udp_fd),
					.port = x->port, .frame_max = x->frame_max,
					.skb_mode = cfg->xdp_skb != 0 };
		rc = xdp_share_join(&m, &x->sh, &x->xsk, &x->rx, &x->tx, &x->xsk_idx, &others,
				    err, errlen);
	}
	if (rc < 0) {
		xdp_free(x);
		return rc;
	}
	x->xsk_fd = xsk_socket__fd(x->xsk);
	x->area = x->sh->area;
	if (cfg->busy_poll)
		busy_poll_on(x);
	t->priv = x;
	t->ops = &xdp_ops;
	t->port = x->port;
	t->src = x->np[0].src;
	const struct xdp_share *sh = x->sh;
	if (!sh->zerocopy)
		snprintf(t->auto_veto, sizeof(t->auto_veto), "%s has no zero-copy AF_XDP (copy "
			 "mode measured slower than udp: docs/performance.md)", x->np[0].ifname);
	char shared[64] = "";
	if (others)
		snprintf(shared, sizeof(shared), ", UMEM shared with %u other socket%s", others,
			 others > 1 ? "s" : "");
	snprintf(t->info, sizeof(t->info), "xdp on %s queue 0 (%s XDP, %s%s%s%s)", x->np[0].ifname,
		 sh->native ? "native" : "generic", sh->zerocopy ? "zero-copy" : "copy mode",
		 sh->sg ? ", multi-buffer" : "", x->busy_poll ? ", busy poll" : "", shared);
	return 0;
}
