/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * jsonl.c - newline-delimited JSON framing: a bounded line buffer for
 * reading and a bounded-time writer. See jsonl.h.
 */
#include "common/jsonl.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int jsonl_init(struct jsonl_buf *b, size_t max_line)
{
	memset(b, 0, sizeof(*b));
	b->max_line = max_line ? max_line : JSONL_MAX_LINE;
	b->cap = 4096;
	b->data = malloc(b->cap);
	return b->data ? 0 : -ENOMEM;
}

void jsonl_free(struct jsonl_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

ssize_t jsonl_fill(struct jsonl_buf *b, int fd)
{
	if (b->start > 0) { /* drop consumed lines */
		memmove(b->data, b->data + b->start, b->len - b->start);
		b->len -= b->start;
		b->start = 0;
	}
	if (b->cap - b->len < 1024) {
		size_t ncap = b->cap * 2;
		if (ncap > b->max_line + 2)
			ncap = b->max_line + 2;
		if (ncap > b->cap) {
			char *n = realloc(b->data, ncap);
			if (!n)
				return -ENOMEM;
			b->data = n;
			b->cap = ncap;
		}
	}
	if (b->len + 1 >= b->cap) /* full of one unterminated line */
		return -E2BIG;
	ssize_t r = read(fd, b->data + b->len, b->cap - 1 - b->len);
	if (r < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	b->len += (size_t)r;
	return r;
}

int jsonl_next(struct jsonl_buf *b, char **line, size_t *len)
{
	char *p = b->data + b->start;
	size_t avail = b->len - b->start;
	char *nl = memchr(p, '\n', avail);

	if (!nl)
		return avail > b->max_line ? -E2BIG : 0;
	size_t n = (size_t)(nl - p);
	if (n > b->max_line)
		return -E2BIG;
	*nl = '\0';
	if (n > 0 && p[n - 1] == '\r')
		p[--n] = '\0';
	*line = p;
	*len = n;
	b->start = (size_t)(nl - b->data) + 1;
	return 1;
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

int jsonl_write_all(int fd, const char *buf, size_t len, int timeout_ms)
{
	long deadline = now_ms() + timeout_ms;

	while (len > 0) {
		ssize_t w = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			buf += w;
			len -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == ENOTSOCK)
			w = write(fd, buf, len);
		if (w > 0) {
			buf += w;
			len -= (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		long left = deadline - now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}

int jsonl_send(int fd, const json_t *msg, int timeout_ms)
{
	char *s = json_dumps(msg, JSON_COMPACT);
	if (!s)
		return -ENOMEM;
	size_t n = strlen(s);
	char *line = realloc(s, n + 2);
	if (!line) {
		free(s);
		return -ENOMEM;
	}
	line[n] = '\n';
	line[n + 1] = '\0';
	int rc = jsonl_write_all(fd, line, n + 1, timeout_ms);
	free(line);
	return rc;
}
