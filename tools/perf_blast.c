/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * perf_blast.c - raw UDP blast for pbox-perf (perf_blast.h).
 */
#include "tools/perf_blast.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

#define BLAST_BATCH 32        /* messages per sendmmsg (libpbox's XFER_BATCH) */
#define BLAST_GSO_SEGS 32     /* datagrams per GSO message */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_target(const char *t, struct sockaddr_in *sa, char *err, size_t errlen)
{
	char host[64];
	const char *colon = strrchr(t, ':');
	char *end;

	if (!colon || (size_t)(colon - t) >= sizeof(host))
		goto bad;
	memcpy(host, t, (size_t)(colon - t));
	host[colon - t] = '\0';
	long port = strtol(colon + 1, &end, 10);
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	if (*end || port < 1 || port > 65535 || inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		goto bad;
	sa->sin_port = htons((uint16_t)port);
	return 0;
bad:
	snprintf(err, errlen, "--blast: '%s' is not IPv4ADDR:PORT", t);
	return -1;
}

int perf_blast(const char *target, double seconds, size_t dgram_bytes, int gso,
	       struct blast_result *r, char *err, size_t errlen)
{
	struct sockaddr_in to;
	size_t per_msg = gso ? BLAST_GSO_SEGS : 1;
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} ctl[BLAST_BATCH];
	struct mmsghdr msgs[BLAST_BATCH];
	struct iovec iov[BLAST_BATCH];

	memset(r, 0, sizeof(*r));
	if (parse_target(target, &to, err, errlen) < 0)
		return -1;
	if (dgram_bytes < 16 || dgram_bytes > 65000 || (gso && dgram_bytes * per_msg > 65000)) {
		snprintf(err, errlen, "--blast-bytes %zu out of range (16..65000, and 32 of "
			 "them within 65000 with --blast-gso)", dgram_bytes);
		return -1;
	}
	uint8_t *payload = calloc(per_msg, dgram_bytes);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (!payload || fd < 0) {
		snprintf(err, errlen, "blast: %s", payload ? strerror(errno) : "out of memory");
		free(payload);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	int sz = 4 << 20;
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	memcpy(payload, "BLAST!", 6); /* not pbox's magic: the box drops them */
	for (int i = 0; i < BLAST_BATCH; i++) {
		iov[i] = (struct iovec){ .iov_base = payload, .iov_len = dgram_bytes * per_msg };
		msgs[i].msg_hdr = (struct msghdr){ .msg_name = &to, .msg_namelen = sizeof(to),
						   .msg_iov = &iov[i], .msg_iovlen = 1 };
		if (gso) {
			struct cmsghdr *cm = (struct cmsghdr *)ctl[i].buf;
			msgs[i].msg_hdr.msg_control = ctl[i].buf;
			msgs[i].msg_hdr.msg_controllen = sizeof(ctl[i].buf);
			cm->cmsg_level = SOL_UDP;
			cm->cmsg_type = UDP_SEGMENT;
			cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
			uint16_t seg = (uint16_t)dgram_bytes;
			memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
		}
	}
	r->gso = gso;
	double t0 = now_s(), t = t0;
	while (t - t0 < seconds) {
		int n = sendmmsg(fd, msgs, BLAST_BATCH, 0);
		if (n > 0) {
			r->datagrams += (uint64_t)n * per_msg;
		} else if (n < 0 && (errno == EAGAIN || errno == ENOBUFS)) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			poll(&p, 1, 1);
			r->dropped += per_msg;
		} else if (n < 0 && gso && (errno == EIO || errno == EINVAL || errno == EOPNOTSUPP)) {
			close(fd);
			free(payload);
			fprintf(stderr, "pbox-perf: blast: the kernel refused UDP GSO (%s); "
				"blasting without it\n", strerror(errno));
			return perf_blast(target, seconds, dgram_bytes, 0, r, err, errlen);
		} else if (n < 0 && errno != EINTR) {
			snprintf(err, errlen, "blast: sendmmsg to %s: %s", target, strerror(errno));
			close(fd);
			free(payload);
			return -1;
		}
		t = now_s();
	}
	r->seconds = t - t0;
	r->bytes = r->datagrams * dgram_bytes;
	close(fd);
	free(payload);
	return 0;
}
