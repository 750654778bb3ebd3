/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rpc_client.h - a small JSON-RPC 2.0 client for the box's control
 * protocol (docs/rpc.md), over TCP or a Unix socket, newline-delimited
 * (common/jsonl.h). Used by pboxctl and by libpbox.
 *
 * No globals and no locks: a client is one connection; calls on one client
 * must not overlap (serialise them if several threads share it); separate
 * clients are independent. Every wait is bounded by the caller's timeout.
 * Notifications from the box (job_aborted) that arrive while waiting for a
 * reply, or during rpc_client_poll, go to the notify callback.
 */
#ifndef PBOX_RPC_CLIENT_H
#define PBOX_RPC_CLIENT_H

#include <stddef.h>

#include <jansson.h>

#define RPC_CLIENT_MAX_REPLY (64u << 20) /* longest reply line accepted */

struct rpc_client;

/* What went wrong. remote = 1: the box answered with this JSON-RPC error
 * (code: a negative errno such as -22, or -32700..-32600); remote = 0: a
 * local failure (code: the negative errno the function returned). */
struct rpc_error {
	int code;
	int remote;
	char message[512];
};

/* Called with each notification: method and params (borrowed; may be
 * NULL). */
typedef void (*rpc_client_notify_fn)(void *arg, const char *method, json_t *params);

/*
 * Connect to target: "unix:PATH", a PATH containing '/', or "HOST:PORT"
 * (HOST a name, dotted quad or [IPv6]). Waits at most timeout_ms.
 * Returns 0 and *out, or -EINVAL (bad target), -ETIMEDOUT, -ENOMEM or the
 * -errno of connect (-ENOENT, -ECONNREFUSED, ...); e->message names the
 * target.
 */
int rpc_client_connect(const char *target, int timeout_ms, struct rpc_client **out,
		       struct rpc_error *e);

/*
 * Call method with params (an object, borrowed; NULL = none) and wait at
 * most timeout_ms for its reply. Returns 0 and *result (a new reference),
 * or -EREMOTEIO (the box answered an error: e->code, e->message),
 * -ETIMEDOUT, -ECONNRESET (the box closed the connection), -EPROTO (a
 * reply that is not JSON-RPC), -ENOMEM, or another -errno of the socket.
 * After -ETIMEDOUT the client stays usable: a late reply is skipped.
 */
int rpc_client_call(struct rpc_client *c, const char *method, json_t *params,
		    int timeout_ms, json_t **result, struct rpc_error *e);

/* Send a notification (no reply expected). 0 or -errno. */
int rpc_client_notify(struct rpc_client *c, const char *method, json_t *params,
		      int timeout_ms, struct rpc_error *e);

void rpc_client_set_notify(struct rpc_client *c, rpc_client_notify_fn fn, void *arg);

/* Handle what has arrived (notifications), waiting up to timeout_ms for
 * the first byte (and returning by then, however much keeps arriving).
 * Returns 0, -ECONNRESET if the box closed the connection, -EPROTO or
 * -errno. */
int rpc_client_poll(struct rpc_client *c, int timeout_ms, struct rpc_error *e);

/* Close and free. NULL is ignored. */
void rpc_client_close(struct rpc_client *c);

/* Split "host:port" or "[v6]:port" into host and port. 0 or -EINVAL. */
int rpc_hostport_split(const char *s, char *host, size_t hostlen, char *port, size_t portlen);

#endif
