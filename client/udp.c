/*
 * udp.c - libpbox's data socket: one non-blocking UDP socket bound to
 * INADDR_ANY:0 for all of a client's traffic, sends gathered into
 * sendmmsg batches (header copied, payload sent straight from the caller's
 * buffer) and receives drained with recvmmsg into preallocated buffers.
 * Nothing is allocated after udp_open.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static void set_bufsize(int fd, int opt_force, int opt, int bytes)
{
	/* The FORCE variant ignores the sysctl cap but needs CAP_NET_ADMIN. */
	if (setsockopt(fd, SOL_SOCKET, opt_force, &bytes, sizeof(bytes)) < 0)
		setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
}

static void rx_setup(struct udp *u)
{
	for (unsigned i = 0; i < XFER_BATCH; i++) {
		u->rxiov[i].iov_base = u->rxbuf + (size_t)i * u->rxlen;
		u->rxiov[i].iov_len = u->rxlen;
		u->rx[i].msg_hdr = (struct msghdr){
			.msg_name = &u->rxaddr[i],
			.msg_namelen = sizeof(u->rxaddr[i]),
			.msg_iov = &u->rxiov[i],
			.msg_iovlen = 1,
		};
	}
}

int udp_open(struct udp *u, size_t max_dgram, uint16_t *port, char *err, size_t errlen)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
	socklen_t al = sizeof(a);

	memset(u, 0, sizeof(*u));
	u->rxlen = (max_dgram + 63) / 64 * 64;
	u->rxbuf = malloc(u->rxlen * XFER_BATCH);
	if (!u->rxbuf) {
		u->fd = -1;
		snprintf(err, errlen, "out of memory for UDP receive buffers");
		return PBOX_ENOMEM;
	}
	rx_setup(u);
	u->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (u->fd < 0 || bind(u->fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(u->fd, (struct sockaddr *)&a, &al) < 0) {
		snprintf(err, errlen, "cannot open the UDP data socket: %s", strerror(errno));
		return PBOX_ESYS;
	}
	set_bufsize(u->fd, SO_RCVBUFFORCE, SO_RCVBUF, UDP_SOCKBUF_BYTES);
	set_bufsize(u->fd, SO_SNDBUFFORCE, SO_SNDBUF, UDP_SOCKBUF_BYTES);
	*port = ntohs(a.sin_port);
	return 0;
}

void udp_close(struct udp *u)
{
	if (u->fd >= 0)
		close(u->fd);
	u->fd = -1;
	free(u->rxbuf);
	u->rxbuf = NULL;
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

int udp_queue(struct udp *u, const struct sockaddr_in *to, const struct wire_msg *h,
	      const void *payload, size_t len, char *err, size_t errlen)
{
	unsigned i = u->ntx++;

	wire_encode(u->txhdr[i], h);
	u->txiov[i][0] = (struct iovec){ .iov_base = u->txhdr[i], .iov_len = WIRE_HDR_LEN };
	u->txiov[i][1] = (struct iovec){ .iov_base = (void *)payload, .iov_len = len };
	u->tx[i].msg_hdr = (struct msghdr){
		.msg_name = (void *)to,
		.msg_namelen = sizeof(*to),
		.msg_iov = u->txiov[i],
		.msg_iovlen = len ? 2 : 1,
	};
	if (u->ntx < XFER_BATCH)
		return 0;
	int rc = udp_flush(u, err, errlen);
	return rc < 0 ? rc : 0;
}

/* Wait briefly for room in the socket's send queue. */
static void wait_writable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	poll(&p, 1, 1);
}

int udp_flush(struct udp *u, char *err, size_t errlen)
{
	unsigned done = 0;
	int tries = 0;

	while (done < u->ntx) {
		int n = sendmmsg(u->fd, u->tx + done, u->ntx - done, 0);
		if (n > 0) {
			done += (unsigned)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == ENOBUFS) && tries++ < 4) {
			wait_writable(u->fd);
			continue;
		}
		/* EPERM: a local firewall (netfilter) dropped the datagram. */
		if (n < 0 && errno != EAGAIN && errno != ENOBUFS && errno != ECONNREFUSED &&
		    errno != EHOSTUNREACH && errno != ENETUNREACH && errno != EPERM) {
			snprintf(err, errlen, "sendmmsg on the UDP data socket: %s", strerror(errno));
			u->ntx = 0;
			return PBOX_ESYS;
		}
		/* Transient: drop the rest; retransmission will repair it. */
		done++;
	}
	u->ntx = 0;
	return (int)done;
}

int udp_recv(struct udp *u, char *err, size_t errlen)
{
	for (unsigned i = 0; i < XFER_BATCH; i++)
		u->rx[i].msg_hdr.msg_namelen = sizeof(u->rxaddr[i]);
	int n = recvmmsg(u->fd, u->rx, XFER_BATCH, MSG_DONTWAIT, NULL);
	if (n >= 0)
		return n;
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
	    errno == ECONNREFUSED)
		return 0;
	snprintf(err, errlen, "recvmmsg on the UDP data socket: %s", strerror(errno));
	return PBOX_ESYS;
}
