/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ctrl.c - libpbox's control connection to the box: "host:port" parsing, a
 * TCP connect with a bounded wait, JSON-RPC 2.0 requests over newline-
 * delimited JSON (common/jsonl.h, docs/rpc.md), a blocking call used while
 * connecting and leaving, and a non-blocking reader the progress thread uses
 * for answers and notifications (job_aborted).
 *
 * Box errors map to client codes: ECONNABORTED (-103) -> PBOX_EABORTED,
 * JSON-RPC protocol errors (-32700, -326xx) -> PBOX_EPROTO, any other box
 * error -> PBOX_EREJECTED; the box's message is kept ("job_join: ...").
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/core/req.h"
#include "common/rpc_client.h"

#define RPC_ECONNABORTED (-103)

static int64_t ms_left(uint64_t deadline_ns)
{
	uint64_t now = clock_ns();
	return now >= deadline_ns ? 0 : (int64_t)((deadline_ns - now + 999999) / 1000000);
}

void ctrl_init(struct ctrl *k)
{
	memset(k, 0, sizeof(*k));
	k->fd = -1;
	k->next_id = 1;
}

void ctrl_close(struct ctrl *k)
{
	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
	jsonl_free(&k->in);
}

/* Split "host:port" or "[v6addr]:port" into host and port strings. */
static int split_hostport(const char *hp, char *host, size_t hostlen,
			  char *port, size_t portlen)
{
	const char *colon = strrchr(hp, ':');
	const char *h = hp;
	size_t hl;

	if (!colon || colon == hp || colon[1] == '\0')
		return PBOX_EINVAL;
	hl = (size_t)(colon - hp);
	if (hp[0] == '[') {
		if (hl < 3 || hp[hl - 1] != ']')
			return PBOX_EINVAL;
		h = hp + 1;
		hl -= 2;
	}
	if (hl >= hostlen || strlen(colon + 1) >= portlen)
		return PBOX_EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	strcpy(port, colon + 1);
	char *end;
	long p = strtol(port, &end, 10);
	return (*end || p <= 0 || p > 65535) ? -1 : 0;
}

/* One non-blocking connect attempt, waiting until deadline. 0 or -errno. */
static int connect_one(const struct addrinfo *ai, uint64_t deadline_ns, int *fdp)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			ai->ai_protocol);
	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		return -e;
	}
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	int n;
	do
		n = poll(&p, 1, (int)ms_left(deadline_ns));
	while (n < 0 && errno == EINTR);
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	if (n == 0)
		soerr = ETIMEDOUT;
	else if (n < 0)
		soerr = errno;
	else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
		soerr = errno;
	if (soerr) {
		close(fd);
		return -soerr;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	*fdp = fd;
	return 0;
}

int ctrl_connect(struct ctrl *k, const char *hostport, int timeout_ms,
		 char *err, size_t errlen)
{
	char host[256], port[16];
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	uint64_t deadline = clock_ns() + (uint64_t)timeout_ms * 1000000;
	int rc = -ETIMEDOUT;

	snprintf(k->addr, sizeof(k->addr), "%s", hostport);
	if (split_hostport(hostport, host, sizeof(host), port, sizeof(port)) < 0) {
		snprintf(err, errlen, "control address '%s' is not host:port", hostport);
		return PBOX_EINVAL;
	}
	int g = getaddrinfo(host, port, &hints, &res);
	if (g != 0) {
		snprintf(err, errlen, "cannot resolve control address %s: %s", hostport,
			 gai_strerror(g));
		return PBOX_ECONNECT;
	}
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		rc = connect_one(ai, deadline, &k->fd);
		if (rc == 0 || ms_left(deadline) == 0)
			break;
	}
	freeaddrinfo(res);
	if (rc < 0) {
		snprintf(err, errlen, "cannot connect to box %s: %s%s", hostport, strerror(-rc),
			 rc == -ETIMEDOUT ? " (no answer within the connect timeout)" : "");
		return PBOX_ECONNECT;
	}
	/* answers may be longer than a request line (a large key's chunk
	 * map in key_declare's): up to rpc_client's bound */
	if (jsonl_init(&k->in, RPC_CLIENT_MAX_REPLY) < 0) {
		snprintf(err, errlen, "out of memory for the control connection");
		return PBOX_ENOMEM;
	}
	return 0;
}

/* Send {method, params[, id]}: id NULL sends a notification. */
static int send_msg(struct ctrl *k, const char *method, json_t *params, int timeout_ms,
		    uint64_t *id, char *err, size_t errlen)
{
	if (k->fd < 0) {
		json_decref(params);
		snprintf(err, errlen, "%s: the control connection to box %s is closed",
			 method, k->addr);
		return PBOX_ECLOSED;
	}
	json_t *msg = json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method,
				"params", params ? params : json_object());
	if (msg && id) {
		*id = k->next_id++;
		json_object_set_new(msg, "id", json_integer((json_int_t)*id));
	}
	if (!msg) {
		snprintf(err, errlen, "%s: out of memory building the request", method);
		return PBOX_ENOMEM;
	}
	int rc = jsonl_send(k->fd, msg, timeout_ms);
	json_decref(msg);
	if (rc == -ENOMEM) {
		snprintf(err, errlen, "%s: out of memory sending the request", method);
		return PBOX_ENOMEM;
	}
	if (rc < 0) {
		snprintf(err, errlen, "%s: cannot send to box %s: %s", method, k->addr,
			 strerror(-rc));
		return rc == -ETIMEDOUT ? PBOX_ETIMEDOUT : PBOX_ECLOSED;
	}
	return 0;
}

int ctrl_send(struct ctrl *k, const char *method, json_t *params, int timeout_ms,
	      uint64_t *id, char *err, size_t errlen)
{
	return send_msg(k, method, params, timeout_ms, id, err, errlen);
}

int ctrl_notify(struct ctrl *k, const char *method, json_t *params, int timeout_ms,
		char *err, size_t errlen)
{
	return send_msg(k, method, params, timeout_ms, NULL, err, errlen);
}

int ctrl_error(const json_t *error, const char *method, char *err, size_t errlen)
{
	json_int_t code = json_integer_value(json_object_get(error, "code"));
	const char *text = json_string_value(json_object_get(error, "message"));

	snprintf(err, errlen, "%s: %s", method, text ? text : "(the box gave no message)");
	if (code == RPC_ECONNABORTED)
		return PBOX_EABORTED;
	if (code == -32700 || (code <= -32600 && code >= -32699))
		return PBOX_EPROTO;
	return PBOX_EREJECTED;
}

/* Answer in msg to request id: 1 and rc/result, or 0 if msg is not it. */
static int match_answer(const json_t *msg, uint64_t id, const char *method,
			json_t **result, int *rc, char *err, size_t errlen)
{
	json_t *jid = json_object_get(msg, "id");

	if (!json_is_integer(jid) || (uint64_t)json_integer_value(jid) != id)
		return 0;
	json_t *e = json_object_get(msg, "error");
	json_t *r = json_object_get(msg, "result");
	if (e) {
		*rc = ctrl_error(e, method, err, errlen);
	} else if (r) {
		*result = json_incref(r);
		*rc = 0;
	} else {
		snprintf(err, errlen, "%s: answer has neither result nor error", method);
		*rc = PBOX_EPROTO;
	}
	return 1;
}

/* Wait until fd is readable or the deadline passes: 1, 0 (timeout), -errno. */
static int wait_readable(int fd, uint64_t deadline_ns)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n;

	do
		n = poll(&p, 1, (int)ms_left(deadline_ns));
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

/* Next parsed message within the deadline: 0 and *msg, or a PBOX code.
 * Lines already read are taken first; once the deadline has passed the
 * socket is not read again (after a first look, *looked), so a box that
 * keeps sending other lines (notifications, answers to other ids) cannot
 * hold the call beyond its timeout. */
static int next_message(struct ctrl *k, const char *method, uint64_t deadline_ns,
			int timeout_ms, bool *looked, json_t **msg, char *err, size_t errlen)
{
	for (;;) {
		char *line;
		size_t len;
		int n = jsonl_next(&k->in, &line, &len);
		if (n == 1) {
			*msg = json_loadb(line, len, 0, NULL);
			if (*msg)
				return 0;
			snprintf(err, errlen, "%s: box %s sent a line that is not JSON", method, k->addr);
			return PBOX_EPROTO;
		}
		if (n < 0) {
			snprintf(err, errlen, "%s: box %s sent a line over %zu bytes", method,
				 k->addr, k->in.max_line);
			return PBOX_EPROTO;
		}
		int w = *looked && ms_left(deadline_ns) == 0 ? 0 : wait_readable(k->fd, deadline_ns);
		*looked = true;
		if (w == 0) {
			snprintf(err, errlen, "%s: no answer from box %s within %d ms", method,
				 k->addr, timeout_ms);
			return PBOX_ETIMEDOUT;
		}
		ssize_t r = w < 0 ? w : jsonl_fill(&k->in, k->fd);
		if (r == 0 || (r < 0 && r != -EAGAIN)) {
			snprintf(err, errlen, "%s: lost the control connection to box %s%s%s", method,
				 k->addr, r ? ": " : "", r ? strerror((int)-r) : "");
			return PBOX_ECLOSED;
		}
	}
}

int ctrl_call(struct ctrl *k, const char *method, json_t *params, int timeout_ms,
	      json_t **result, char *err, size_t errlen)
{
	uint64_t deadline = clock_ns() + (uint64_t)timeout_ms * 1000000;
	uint64_t id;
	bool looked = false;
	int rc = ctrl_send(k, method, params, timeout_ms, &id, err, errlen);

	while (rc == 0) {
		json_t *msg;
		rc = next_message(k, method, deadline, timeout_ms, &looked, &msg, err, errlen);
		if (rc < 0)
			break;
		int found = match_answer(msg, id, method, result, &rc, err, errlen);
		json_decref(msg);
		if (found)
			return rc;
	}
	return rc;
}

int ctrl_read(struct ctrl *k, void (*cb)(void *arg, json_t *msg), void *arg,
	      char *err, size_t errlen)
{
	ssize_t r = jsonl_fill(&k->in, k->fd);

	if (r == 0 || (r < 0 && r != -EAGAIN && r != -E2BIG)) {
		snprintf(err, errlen, "lost the control connection to box %s%s%s", k->addr,
			 r ? ": " : "", r ? strerror((int)-r) : "");
		return PBOX_ECLOSED;
	}
	return ctrl_read_buffered(k, cb, arg, err, errlen);
}

int ctrl_read_buffered(struct ctrl *k, void (*cb)(void *arg, json_t *msg), void *arg,
		       char *err, size_t errlen)
{
	for (;;) {
		char *line;
		size_t len;
		int n = jsonl_next(&k->in, &line, &len);
		if (n == 0)
			return 0;
		if (n < 0) {
			snprintf(err, errlen, "box %s sent a control line over %zu bytes",
				 k->addr, k->in.max_line);
			return PBOX_EPROTO;
		}
		json_t *msg = json_loadb(line, len, 0, NULL);
		if (!msg) {
			snprintf(err, errlen, "box %s sent a control line that is not JSON", k->addr);
			return PBOX_EPROTO;
		}
		cb(arg, msg);
		json_decref(msg);
	}
}
