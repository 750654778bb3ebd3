/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rpc_client.c - JSON-RPC 2.0 client over TCP or a Unix socket, with
 * bounded waits and notifications. See rpc_client.h.
 */
#include "common/rpc_client.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/jsonl.h"

struct rpc_client {
	int fd;
	long long next_id;
	struct jsonl_buf in;
	rpc_client_notify_fn notify;
	void *notify_arg;
	char target[128];
};

static int fail(struct rpc_error *e, int code, int remote, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(struct rpc_error *e, int code, int remote, const char *fmt, ...)
{
	if (e) {
		va_list ap;
		e->code = code;
		e->remote = remote;
		va_start(ap, fmt);
		vsnprintf(e->message, sizeof(e->message), fmt, ap);
		va_end(ap);
	}
	return remote ? -EREMOTEIO : code;
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

int rpc_hostport_split(const char *s, char *host, size_t hostlen, char *port, size_t portlen)
{
	const char *colon, *h = s;
	size_t hl;

	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		if (!end || end[1] != ':')
			return -EINVAL;
		h = s + 1;
		hl = (size_t)(end - h);
		colon = end + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return -EINVAL;
		hl = (size_t)(colon - s);
	}
	if (hl == 0 || hl >= hostlen || strlen(colon + 1) == 0 || strlen(colon + 1) >= portlen)
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	snprintf(port, portlen, "%s", colon + 1);
	return 0;
}

/* ---- connecting ---- */

/* Non-blocking connect finished within timeout_ms? 0 or -errno. */
static int wait_connected(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	int n;

	do
		n = poll(&p, 1, timeout_ms);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return -ETIMEDOUT;
	if (n < 0)
		return -errno;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
		return -errno;
	return soerr ? -soerr : 0;
}

static int connect_addr(int family, const struct sockaddr *sa, socklen_t len, int timeout_ms)
{
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (connect(fd, sa, len) < 0) {
		rc = errno == EINPROGRESS ? wait_connected(fd, timeout_ms) : -errno;
		if (rc == -EAGAIN) /* Unix socket backlog full */
			rc = -ECONNREFUSED;
	}
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

static int connect_unix(const char *path, int timeout_ms, struct rpc_error *e)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (strlen(path) >= sizeof(sa.sun_path))
		return fail(e, -EINVAL, 0, "socket path %s is too long", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = connect_addr(AF_UNIX, (struct sockaddr *)&sa, sizeof(sa), timeout_ms);
	if (fd < 0)
		return fail(e, fd, 0, "cannot connect to %s: %s", path, strerror(-fd));
	return fd;
}

static int connect_tcp(const char *target, int timeout_ms, struct rpc_error *e)
{
	char host[256], port[16];
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai;
	int fd = -EINVAL, one = 1;

	if (rpc_hostport_split(target, host, sizeof(host), port, sizeof(port)) < 0)
		return fail(e, -EINVAL, 0, "'%s' is neither HOST:PORT nor a socket path", target);
	int rc = getaddrinfo(host, port, &hints, &ai);
	if (rc != 0)
		return fail(e, -EINVAL, 0, "cannot resolve %s: %s", target, gai_strerror(rc));
	long deadline = now_ms() + timeout_ms;
	for (struct addrinfo *a = ai; a; a = a->ai_next) {
		long left = deadline - now_ms();
		fd = connect_addr(a->ai_family, a->ai_addr, a->ai_addrlen, left > 0 ? (int)left : 0);
		if (fd >= 0)
			break;
	}
	freeaddrinfo(ai);
	if (fd < 0)
		return fail(e, fd, 0, "cannot connect to %s: %s", target, strerror(-fd));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int rpc_client_connect(const char *target, int timeout_ms, struct rpc_client **out,
		       struct rpc_error *e)
{
	int fd;

	if (!target || !*target)
		return fail(e, -EINVAL, 0, "no control address given");
	if (strncmp(target, "unix:", 5) == 0)
		fd = connect_unix(target + 5, timeout_ms, e);
	else if (strchr(target, '/'))
		fd = connect_unix(target, timeout_ms, e);
	else
		fd = connect_tcp(target, timeout_ms, e);
	if (fd < 0)
		return fd;
	struct rpc_client *c = calloc(1, sizeof(*c));
	if (!c || jsonl_init(&c->in, RPC_CLIENT_MAX_REPLY) < 0) {
		free(c);
		close(fd);
		return fail(e, -ENOMEM, 0, "out of memory");
	}
	c->fd = fd;
	snprintf(c->target, sizeof(c->target), "%s", target);
	*out = c;
	return 0;
}

void rpc_client_close(struct rpc_client *c)
{
	if (!c)
		return;
	close(c->fd);
	jsonl_free(&c->in);
	free(c);
}

void rpc_client_set_notify(struct rpc_client *c, rpc_client_notify_fn fn, void *arg)
{
	c->notify = fn;
	c->notify_arg = arg;
}

/* ---- reading ---- */

/* Wait until readable and read once. 1 read, 0 timeout, <0 error. */
static int fill(struct rpc_client *c, long deadline, struct rpc_error *e)
{
	long left = deadline - now_ms();
	struct pollfd p = { .fd = c->fd, .events = POLLIN };
	int n = poll(&p, 1, left > 0 ? (int)left : 0);

	if (n < 0)
		return errno == EINTR ? 1 : fail(e, -errno, 0, "%s: poll: %s", c->target, strerror(errno));
	if (n == 0)
		return 0;
	ssize_t r = jsonl_fill(&c->in, c->fd);
	if (r == -EAGAIN)
		return 1;
	if (r == 0)
		return fail(e, -ECONNRESET, 0, "%s closed the connection", c->target);
	if (r == -E2BIG)
		return fail(e, -EPROTO, 0, "%s sent a reply longer than %u bytes", c->target,
			    RPC_CLIENT_MAX_REPLY);
	if (r < 0)
		return fail(e, (int)r, 0, "%s: read: %s", c->target, strerror((int)-r));
	return 1;
}

/* A notification goes to the callback; returns 1 if msg was one. */
static int maybe_notification(struct rpc_client *c, json_t *msg)
{
	json_t *m = json_object_get(msg, "method");

	if (!json_is_string(m) || json_object_get(msg, "id"))
		return 0;
	if (c->notify)
		c->notify(c->notify_arg, json_string_value(m), json_object_get(msg, "params"));
	return 1;
}

/* Reply with our id (or an error with id null, which the box sends when it
 * could not read our request)? Fills *result or e. 1 if it was ours. */
static int match_reply(struct rpc_client *c, json_t *msg, long long id, json_t **result,
		       int *rc, struct rpc_error *e)
{
	json_t *rid = json_object_get(msg, "id");
	json_t *err = json_object_get(msg, "error");

	if (!(json_is_integer(rid) && json_integer_value(rid) == id) &&
	    !(json_is_null(rid) && err))
		return 0;
	if (err) {
		json_t *code = json_object_get(err, "code"), *text = json_object_get(err, "message");
		*rc = fail(e, json_is_integer(code) ? (int)json_integer_value(code) : -32603, 1,
			   "%s", json_is_string(text) ? json_string_value(text) : "(no message)");
		return 1;
	}
	json_t *r = json_object_get(msg, "result");
	if (!r) {
		*rc = fail(e, -EPROTO, 0, "%s: reply without result or error", c->target);
		return 1;
	}
	*result = json_incref(r);
	*rc = 0;
	return 1;
}

/* Handle complete lines; stop at our reply (id >= 0). 1 done, 0 more, <0. */
static int take_lines(struct rpc_client *c, long long id, json_t **result, int *rc,
		      struct rpc_error *e)
{
	char *line;
	size_t len;
	int n;

	while ((n = jsonl_next(&c->in, &line, &len)) == 1) {
		json_error_t je;
		json_t *msg = json_loadb(line, len, 0, &je);
		if (!json_is_object(msg)) {
			json_decref(msg);
			return fail(e, -EPROTO, 0, "%s sent something that is not JSON-RPC: %s",
				    c->target, msg ? "not an object" : je.text);
		}
		int done = !maybe_notification(c, msg) && id >= 0 &&
			   match_reply(c, msg, id, result, rc, e);
		json_decref(msg);
		if (done)
			return 1;
	}
	if (n < 0)
		return fail(e, -EPROTO, 0, "%s sent a reply longer than %u bytes", c->target,
			    RPC_CLIENT_MAX_REPLY);
	return 0;
}

/* ---- calls ---- */

static int send_msg(struct rpc_client *c, const char *method, json_t *params,
		    json_t *id, int timeout_ms, struct rpc_error *e)
{
	json_t *req = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", method);

	if (!req) {
		json_decref(id);
		return fail(e, -EINVAL, 0, "method name is not valid UTF-8");
	}
	if (id)
		json_object_set_new(req, "id", id);
	if (params)
		json_object_set(req, "params", params);
	int rc = jsonl_send(c->fd, req, timeout_ms);
	json_decref(req);
	if (rc < 0)
		return fail(e, rc, 0, "cannot send %s to %s: %s", method, c->target, strerror(-rc));
	return 0;
}

int rpc_client_call(struct rpc_client *c, const char *method, json_t *params,
		    int timeout_ms, json_t **result, struct rpc_error *e)
{
	long long id = ++c->next_id;
	long deadline = now_ms() + timeout_ms;
	int rc = send_msg(c, method, params, json_integer(id), timeout_ms, e);

	*result = NULL;
	if (rc < 0)
		return rc;
	for (int looked = 0;; looked = 1) {
		int done = take_lines(c, id, result, &rc, e);
		if (done < 0)
			return done;
		if (done)
			return rc;
		/* Past the deadline the socket is not read again (after a first
		 * look): a box that keeps sending other lines (notifications,
		 * answers to other ids) cannot hold the call beyond it. */
		int r = looked && now_ms() >= deadline ? 0 : fill(c, deadline, e);
		if (r < 0)
			return r;
		if (r == 0)
			return fail(e, -ETIMEDOUT, 0, "%s: no answer to %s within %d ms",
				    c->target, method, timeout_ms);
	}
}

int rpc_client_notify(struct rpc_client *c, const char *method, json_t *params,
		      int timeout_ms, struct rpc_error *e)
{
	return send_msg(c, method, params, NULL, timeout_ms, e);
}

int rpc_client_poll(struct rpc_client *c, int timeout_ms, struct rpc_error *e)
{
	long deadline = now_ms() + timeout_ms, end = deadline;
	int rc = 0;

	for (int looked = 0;; looked = 1) {
		int r = take_lines(c, -1, NULL, &rc, e);
		if (r < 0)
			return r;
		/* a box that never stops sending cannot hold the caller past
		 * its timeout either (end: the first deadline) */
		if (looked && now_ms() >= end)
			return 0;
		r = fill(c, deadline, e);
		if (r <= 0)
			return r;
		deadline = now_ms(); /* after the first read, take only what is there */
	}
}
