/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * udp.c - the udp transport (transport.h): one non-blocking UDP socket bound to
 * INADDR_ANY:0 for all of a client's traffic, sends gathered into
 * sendmmsg batches (header copied, payload sent straight from the caller's
 * buffer) and receives drained with recvmmsg into preallocated buffers.
 * Nothing is allocated after udp_open.
 *
 * With pbox_opts.udp_offload, consecutive datagrams of the same size to
 * the same endpoint (the segments of one chunk) go out as one message of
 * up to UDP_GSO_SEGS datagrams with UDP_SEGMENT: the kernel walks its UDP
 * and IP layers once per run and cuts it just before the device (or the
 * NIC does). The iovecs stay header, payload, header, payload...: no copy.
 * A kernel that refuses GSO turns it off for the socket (udp->gso_errno).
 * On receive, UDP_GRO lets the kernel hand over runs of RESULTs at once;
 * udp_rx_seg says where to cut them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/transport/net.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#define UDP_MAX_PAYLOAD 65507u

#define UDP_BATCH      32                          /* datagrams per sendmmsg / recvmmsg */
#define UDP_SOCKBUF_BYTES (8 << 20)                /* SO_SNDBUF and SO_RCVBUF */
#define UDP_GSO_SEGS   16                          /* datagrams per GSO send */
#define UDP_TX_DGRAMS  (UDP_BATCH * UDP_GSO_SEGS)  /* queued before a flush */
#define UDP_GRO_BYTES  65536                       /* receive buffer with GRO */

union udp_cmsg {
	char buf[64];                  /* one UDP_SEGMENT / UDP_GRO cmsg */
	struct cmsghdr align;
};

struct udp {
	int fd;
	int gso;                       /* send runs of datagrams with UDP_SEGMENT */
	int gro;                       /* UDP_GRO on: one message may hold many */
	int gso_errno;                 /* why GSO was turned off, 0 if it was not */
	/* tx: ntx datagrams (header + payload iovecs) in nmsg messages; with
	 * GSO a message holds a run of equal-sized datagrams to one address */
	unsigned ntx, nmsg, niov;
	struct mmsghdr tx[UDP_TX_DGRAMS];
	union udp_cmsg txctl[UDP_BATCH];
	struct {
		const struct sockaddr_in *to;
		uint16_t first_iov, niov;
		uint32_t len;
	} dg[UDP_TX_DGRAMS];
	struct {
		uint16_t first_dg, ndg;
		uint32_t seg;                /* datagram size of the run */
	} run[UDP_TX_DGRAMS];
	struct iovec txiov[UDP_TX_DGRAMS * 2];
	uint8_t txhdr[UDP_TX_DGRAMS][WIRE_HDR_LEN];
	/* rx */
	struct mmsghdr rx[UDP_BATCH];
	unsigned rx_n, rx_i;           /* messages received, next to cut */
	size_t rx_off;                 /* offset of the next datagram in message rx_i */
	struct iovec rxiov[UDP_BATCH];
	struct sockaddr_in rxaddr[UDP_BATCH];
	union udp_cmsg rxctl[UDP_BATCH];
	uint8_t *rxbuf;                /* UDP_BATCH * rxlen */
	size_t rxlen;
	const struct sockaddr_in *eps; /* tp_config.eps */
	unsigned neps;
	struct tp_counters ctr;        /* written with relaxed atomics (ctr_add) */
};



static void set_bufsize(int fd, int opt_force, int opt, int bytes)
{
	/* The FORCE variant ignores the sysctl cap but needs CAP_NET_ADMIN. */
	if (setsockopt(fd, SOL_SOCKET, opt_force, &bytes, sizeof(bytes)) < 0)
		setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
}

static void rx_setup(struct udp *u)
{
	for (unsigned i = 0; i < UDP_BATCH; i++) {
		u->rxiov[i].iov_base = u->rxbuf + (size_t)i * u->rxlen;
		u->rxiov[i].iov_len = u->rxlen;
		u->rx[i].msg_hdr = (struct msghdr){
			.msg_name = &u->rxaddr[i],
			.msg_namelen = sizeof(u->rxaddr[i]),
			.msg_iov = &u->rxiov[i],
			.msg_iovlen = 1,
			.msg_control = u->gro ? u->rxctl[i].buf : NULL,
			.msg_controllen = u->gro ? sizeof(u->rxctl[i].buf) : 0,
		};
	}
}

static int udp_setup(struct udp *u, size_t max_dgram, int offload, uint16_t *port,
		     char *err, size_t errlen)
{
	int one = 1;
	int rc = udp_reserve_port(&u->fd, port, err, errlen);

	if (rc < 0)
		return rc;
	if (offload) {
		int probe = 0;
		socklen_t pl = sizeof(probe);
		/* UDP_SEGMENT readable: the kernel has UDP GSO (Linux >= 4.18) */
		u->gso = getsockopt(u->fd, SOL_UDP, UDP_SEGMENT, &probe, &pl) == 0;
		if (!u->gso)
			u->gso_errno = errno;
		u->gro = setsockopt(u->fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0;
	}
	u->rxlen = u->gro ? UDP_GRO_BYTES : (max_dgram + 63) / 64 * 64;
	u->rxbuf = malloc(u->rxlen * UDP_BATCH);
	if (!u->rxbuf) {
		snprintf(err, errlen, "out of memory for UDP receive buffers");
		return PBOX_ENOMEM;
	}
	rx_setup(u);
	set_bufsize(u->fd, SO_RCVBUFFORCE, SO_RCVBUF, UDP_SOCKBUF_BYTES);
	set_bufsize(u->fd, SO_SNDBUFFORCE, SO_SNDBUF, UDP_SOCKBUF_BYTES);
	return 0;
}

int udp_reserve_port(int *fd, uint16_t *port, char *err, size_t errlen)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
	socklen_t al = sizeof(a);

	*fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (*fd < 0 || bind(*fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(*fd, (struct sockaddr *)&a, &al) < 0) {
		snprintf(err, errlen, "cannot open a UDP socket for the data port: %s",
			 strerror(errno));
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return PBOX_ESYS;
	}
	*port = ntohs(a.sin_port);
	return 0;
}

static void udp_free(struct udp *u)
{
	if (u->fd >= 0)
		close(u->fd);
	free(u->rxbuf);
	free(u);
}

int udp_source_ip(const struct sockaddr_in *dst, struct in_addr *src,
		  char *err, size_t errlen)
{
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	char ip[INET_ADDRSTRLEN];
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int ok = fd >= 0 && connect(fd, (const struct sockaddr *)dst, sizeof(*dst)) == 0 &&
		 getsockname(fd, (struct sockaddr *)&a, &al) == 0;
	int e = errno;

	if (fd >= 0)
		close(fd);
	if (!ok) {
		inet_ntop(AF_INET, &dst->sin_addr, ip, sizeof(ip));
		snprintf(err, errlen, "no route to the box data endpoint %s:%u: %s", ip,
			 ntohs(dst->sin_port), strerror(e));
		return PBOX_ESYS;
	}
	*src = a.sin_addr;
	return 0;
}

static bool same_dst(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a == b || (a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port);
}

/* Can datagram d (len bytes, to) extend the last run? GSO needs equal
 * sizes; only the run's last datagram may be shorter. */
static bool joins_run(const struct udp *u, const struct sockaddr_in *to, uint32_t len)
{
	if (!u->gso || u->nmsg == 0)
		return false;
	unsigned m = u->nmsg - 1;
	unsigned last = u->run[m].first_dg + u->run[m].ndg - 1;
	return u->run[m].ndg < UDP_GSO_SEGS && same_dst(u->dg[last].to, to) &&
	       u->dg[last].len == u->run[m].seg && len <= u->run[m].seg &&
	       (uint64_t)u->run[m].seg * (u->run[m].ndg + 1) <= UDP_MAX_PAYLOAD;
}

/* Start message m with the datagrams first..first+n-1 (their iovecs are
 * contiguous). */
static void msg_init(struct udp *u, unsigned m, unsigned first, unsigned n)
{
	u->run[m].first_dg = (uint16_t)first;
	u->run[m].ndg = (uint16_t)n;
	u->run[m].seg = u->dg[first].len;
	u->tx[m].msg_hdr = (struct msghdr){
		.msg_name = (void *)u->dg[first].to,
		.msg_namelen = sizeof(*u->dg[first].to),
		.msg_iov = &u->txiov[u->dg[first].first_iov],
		.msg_iovlen = 0,
	};
	for (unsigned d = first; d < first + n; d++)
		u->tx[m].msg_hdr.msg_iovlen += u->dg[d].niov;
}

static int udp_flush(struct udp *u, char *err, size_t errlen);

/* Queue one datagram (header copied, payload referenced until flush); may
 * flush first when the batch is full. 0 or PBOX_ESYS. */
static int udp_queue(struct udp *u, const struct sockaddr_in *to, const struct wire_msg *h,
		     const void *payload, size_t len, char *err, size_t errlen)
{
	uint32_t dlen = (uint32_t)(WIRE_HDR_LEN + len);
	bool join = joins_run(u, to, dlen);

	if (u->ntx == UDP_TX_DGRAMS || (!join && u->nmsg == UDP_BATCH)) {
		int rc = udp_flush(u, err, errlen);
		if (rc < 0)
			return rc;
		join = false;
	}
	unsigned d = u->ntx++;
	wire_encode(u->txhdr[d], h);
	u->dg[d].to = to;
	u->dg[d].len = dlen;
	u->dg[d].first_iov = (uint16_t)u->niov;
	u->txiov[u->niov++] = (struct iovec){ .iov_base = u->txhdr[d], .iov_len = WIRE_HDR_LEN };
	if (len)
		u->txiov[u->niov++] = (struct iovec){ .iov_base = (void *)payload, .iov_len = len };
	u->dg[d].niov = (uint16_t)(u->niov - u->dg[d].first_iov);
	if (join) {
		struct msghdr *mh = &u->tx[u->nmsg - 1].msg_hdr;
		mh->msg_iovlen += u->dg[d].niov;
		u->run[u->nmsg - 1].ndg++;
	} else {
		msg_init(u, u->nmsg++, d, 1);
	}
	return 0;
}

/* Wait briefly for room in the socket's send queue. */
static void wait_writable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	poll(&p, 1, 1);
}

/* UDP_SEGMENT on every run of more than one datagram. */
static void set_gso_cmsgs(struct udp *u)
{
	for (unsigned m = 0; m < u->nmsg; m++) {
		struct msghdr *mh = &u->tx[m].msg_hdr;
		if (u->run[m].ndg < 2) {
			mh->msg_control = NULL;
			mh->msg_controllen = 0;
			continue;
		}
		mh->msg_control = u->txctl[m].buf;
		mh->msg_controllen = CMSG_SPACE(sizeof(uint16_t));
		struct cmsghdr *cm = CMSG_FIRSTHDR(mh);
		cm->cmsg_level = SOL_UDP;
		cm->cmsg_type = UDP_SEGMENT;
		cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
		uint16_t seg = (uint16_t)u->run[m].seg;
		memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
	}
}

/* The kernel refused GSO at message `from`: turn it off and re-cut the
 * messages from there into one datagram each. */
static void gso_off(struct udp *u, unsigned from, int e)
{
	unsigned first = u->run[from].first_dg, m = from;

	u->gso = 0;
	u->gso_errno = e;
	for (unsigned d = first; d < u->ntx; d++) {
		msg_init(u, m, d, 1);
		u->tx[m].msg_hdr.msg_control = NULL;
		u->tx[m].msg_hdr.msg_controllen = 0;
		m++;
	}
	u->nmsg = m;
}

static void tx_reset(struct udp *u)
{
	u->ntx = u->nmsg = u->niov = 0;
}

/* Send what is queued. Datagrams the kernel refuses with ENOBUFS/EAGAIN
 * after a short wait are dropped and counted (retransmission repairs
 * them). If the kernel refuses GSO, it is turned off and the run sent
 * datagram by datagram. Returns datagrams sent (>= 0) or PBOX_ESYS. */
static int udp_flush(struct udp *u, char *err, size_t errlen)
{
	unsigned done = 0, sent = 0;
	int tries = 0;

	if (u->gso)
		set_gso_cmsgs(u);
	while (done < u->nmsg) {
		int n = sendmmsg(u->fd, u->tx + done, u->nmsg - done, 0);
		if (n > 0) {
			for (int i = 0; i < n; i++) {
				unsigned ndg = u->run[done + (unsigned)i].ndg;
				sent += ndg;
				if (ndg > 1)
					tp_ctr_add(&u->ctr.gso_sends, 1);
			}
			done += (unsigned)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && u->run[done].ndg > 1 &&
		    (errno == EIO || errno == EINVAL || errno == EOPNOTSUPP || errno == EMSGSIZE)) {
			gso_off(u, done, errno);
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == ENOBUFS) && tries++ < 4) {
			wait_writable(u->fd);
			continue;
		}
		/* EPERM: a local firewall (netfilter) dropped the datagram. */
		if (n < 0 && errno != EAGAIN && errno != ENOBUFS && errno != ECONNREFUSED &&
		    errno != EHOSTUNREACH && errno != ENETUNREACH && errno != EPERM) {
			snprintf(err, errlen, "sendmmsg on the UDP data socket: %s", strerror(errno));
			tx_reset(u);
			return PBOX_ESYS;
		}
		/* Transient: drop this message; retransmission will repair it. */
		tp_ctr_add(&u->ctr.tx_dropped, u->run[done].ndg);
		done++;
	}
	tx_reset(u);
	tp_ctr_add(&u->ctr.tx_dgrams, sent);
	return (int)sent;
}

/* Datagram size within message i: GRO's segment size, else its length. */
static size_t rx_seg(const struct udp *u, unsigned i)
{
	const struct msghdr *mh = &u->rx[i].msg_hdr;

	if (u->gro) {
		for (struct cmsghdr *cm = CMSG_FIRSTHDR((struct msghdr *)mh); cm;
		     cm = CMSG_NXTHDR((struct msghdr *)mh, cm)) {
			if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
				int seg;
				memcpy(&seg, CMSG_DATA(cm), sizeof(seg));
				if (seg > 0)
					return (size_t)seg;
			}
		}
	}
	return u->rx[i].msg_len;
}

/* Receive up to UDP_BATCH messages without blocking: count (0 if none)
 * or PBOX_ESYS. */
static int udp_recv(struct udp *u, char *err, size_t errlen)
{
	for (unsigned i = 0; i < UDP_BATCH; i++) {
		u->rx[i].msg_hdr.msg_namelen = sizeof(u->rxaddr[i]);
		if (u->gro)
			u->rx[i].msg_hdr.msg_controllen = sizeof(u->rxctl[i].buf);
	}
	int n = recvmmsg(u->fd, u->rx, UDP_BATCH, MSG_DONTWAIT, NULL);
	if (n >= 0)
		return n;
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
	    errno == ECONNREFUSED)
		return 0;
	snprintf(err, errlen, "recvmmsg on the UDP data socket: %s", strerror(errno));
	return PBOX_ESYS;
}

/* ---- the transport ------------------------------------------------------ */

static int udp_tx_burst(struct transport *t, const struct tp_pkt *p, unsigned n, char *err,
			size_t errlen)
{
	struct udp *u = t->priv;

	for (unsigned i = 0; i < n; i++) {
		int rc = udp_queue(u, &u->eps[p[i].ep], &p[i].hdr, p[i].payload, p[i].len,
				   err, errlen);
		if (rc < 0)
			return rc;
	}
	return u->ntx ? udp_flush(u, err, errlen) : 0;
}

/* Cut the received messages into datagrams (GRO may have merged a run);
 * receive once more only when all are handed out. */
static int udp_rx_burst(struct transport *t, struct tp_dgram *d, unsigned max, char *err,
			size_t errlen)
{
	struct udp *u = t->priv;
	unsigned n = 0;

	if (u->rx_i >= u->rx_n) {
		int got = udp_recv(u, err, errlen);
		if (got <= 0)
			return got;
		u->rx_n = (unsigned)got;
		u->rx_i = 0;
		u->rx_off = 0;
	}
	while (n < max && u->rx_i < u->rx_n) {
		unsigned i = u->rx_i;
		size_t len = u->rx[i].msg_len, seg = rx_seg(u, i);
		if ((u->rx[i].msg_hdr.msg_flags & MSG_TRUNC) || seg == 0) {
			tp_ctr_add(&u->ctr.rx_bad, 1);
			u->rx_i++;
			continue;
		}
		if (u->rx_off == 0 && seg < len)
			tp_ctr_add(&u->ctr.gro_receives, 1);
		size_t take = len - u->rx_off < seg ? len - u->rx_off : seg;
		d[n++] = (struct tp_dgram){ .data = u->rxbuf + (size_t)i * u->rxlen + u->rx_off,
					    .len = (uint32_t)take,
					    .src_ip = u->rxaddr[i].sin_addr.s_addr,
					    .src_port = u->rxaddr[i].sin_port };
		u->rx_off += take;
		if (u->rx_off >= len) {
			u->rx_i++;
			u->rx_off = 0;
		}
	}
	tp_ctr_add(&u->ctr.rx_dgrams, n);
	return (int)n;
}

static unsigned udp_poll_fds(const struct transport *t, int fds[TP_MAX_FDS])
{
	const struct udp *u = t->priv;

	fds[0] = u->fd;
	return 1;
}

static void udp_counters(const struct transport *t, struct tp_counters *out)
{
	const struct udp *u = t->priv;

	tp_counters_load(&u->ctr, out);
}

static void udp_close_tp(struct transport *t)
{
	udp_free(t->priv);
}

static const struct transport_ops udp_ops = {
	.name = "udp",
	.tx_burst = udp_tx_burst,
	.rx_burst = udp_rx_burst,
	.poll_fds = udp_poll_fds,
	.counters = udp_counters,
	.close = udp_close_tp,
};

int tp_udp_open(struct transport *t, const struct tp_config *cfg, char *err, size_t errlen)
{
	struct udp *u = calloc(1, sizeof(*u));
	int rc;

	if (!u) {
		snprintf(err, errlen, "out of memory for the UDP transport");
		return PBOX_ENOMEM;
	}
	u->fd = -1;
	u->eps = cfg->eps;
	u->neps = cfg->neps;
	rc = udp_setup(u, cfg->max_dgram, cfg->udp_offload, &t->port, err, errlen);
	if (rc == 0)
		rc = udp_source_ip(&cfg->eps[0], &t->src, err, errlen);
	if (rc < 0) {
		udp_free(u);
		return rc;
	}
	t->priv = u;
	t->ops = &udp_ops;
	snprintf(t->info, sizeof(t->info), "udp (kernel UDP socket%s%s)",
		 u->gso ? ", GSO" : "", u->gro ? ", GRO" : "");
	return 0;
}
