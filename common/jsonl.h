/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * jsonl.h - newline-delimited JSON framing (docs/rpc.md "Framing"), shared
 * by the box's RPC server, libpbox and pboxctl.
 */
#ifndef PBOX_JSONL_H
#define PBOX_JSONL_H

#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

#define JSONL_MAX_LINE (64 * 1024)

/* Input buffer of one connection. */
struct jsonl_buf {
	char *data;
	size_t len;      /* bytes held */
	size_t start;    /* first byte not yet returned as a line */
	size_t cap;
	size_t max_line;
};

/* 0 or -ENOMEM. max_line 0 means JSONL_MAX_LINE. */
int jsonl_init(struct jsonl_buf *b, size_t max_line);
void jsonl_free(struct jsonl_buf *b);

/* Read what fd has (one read). Returns bytes read (> 0), 0 at end of
 * stream, -EAGAIN if nothing is there (non-blocking fd), or -errno. */
ssize_t jsonl_fill(struct jsonl_buf *b, int fd);

/* Take the next complete line, without its '\n', NUL-terminated; valid
 * until the next call on b. Returns 1 and *line, 0 if no complete line yet,
 * or -E2BIG if a line longer than max_line is coming (the connection
 * should then be closed). */
int jsonl_next(struct jsonl_buf *b, char **line, size_t *len);

/* Serialise msg compactly and write it plus '\n' to fd, waiting at most
 * timeout_ms in total for the socket to take it (also for non-blocking fds).
 * Returns 0, -ETIMEDOUT, -ENOMEM or -errno. */
int jsonl_send(int fd, const json_t *msg, int timeout_ms);

/* Write len bytes, waiting at most timeout_ms in total. 0 or -errno. */
int jsonl_write_all(int fd, const char *buf, size_t len, int timeout_ms);

#endif
