/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rpc_server.h - the box's JSON-RPC server: a TCP listener for workers and
 * remote operators (cfg.control) and a Unix socket for local operators
 * (cfg.rpc_socket), non-blocking connections with newline-delimited JSON
 * (common/jsonl.h), one epoll loop driven by pboxd's main lcore.
 *
 * Each connection is a *session*: a rank that joined on it is lost when it
 * closes before job_leave (its job is aborted). Replies and notifications
 * are queued per connection (bounded: a connection that lets more than
 * RPC_SERVER_OUT_MAX bytes pile up is dropped) and written as the peer
 * reads. A request line above 64 KiB gets a -32600 error and the
 * connection is closed.
 *
 * Single-threaded: every function runs on the thread that polls.
 */
#ifndef PBOX_RPC_SERVER_H
#define PBOX_RPC_SERVER_H

#include <stddef.h>

#include <jansson.h>

#include "control/box.h"

#define RPC_SERVER_FD_SPARE  512    /* descriptors besides the connections
				       (--max-conns: docs/operations.md "Limits") */
#define RPC_SERVER_OUT_MAX   (64u << 20)

struct rpc_server;

/*
 * Open the listeners configured in box->cfg ("" = that one off) and route
 * the job registry's job_aborted notifications to the sessions. If
 * box->jobs is NULL the server creates the registry (and frees it in
 * rpc_server_close); otherwise the caller's registry is used and kept. A stale Unix socket is replaced; a live one (another pboxd)
 * is an error. cfg.control may use port 0 (tests: see rpc_server_tcp_port).
 * Returns 0 and *out, or -EINVAL (bad address), -EADDRINUSE, -ENOMEM or
 * -errno of the failing call, with a message naming the address in err.
 */
int rpc_server_open(struct rpc_server **out, struct box *box, char *err, size_t errlen);

/*
 * One iteration: wait up to timeout_ms for socket events, handle them
 * (accept, read and answer requests, write queued output, close), then
 * run jobs_tick(). Returns the number of events handled (0 on timeout or
 * EINTR) or -errno if epoll fails.
 */
int rpc_server_poll(struct rpc_server *srv, int timeout_ms);

/* Close every connection and listener and unlink the socket; free the job
 * registry if the server created it (box->jobs = NULL). Call after the
 * lcores have stopped. NULL is ignored. */
void rpc_server_close(struct rpc_server *srv);

/* Queue msg (borrowed) on the connection `session`. 0, or -ENOMEM, or
 * -ENOBUFS if the connection's output limit was hit (it is then closed). */
int rpc_server_send(struct rpc_server *srv, void *session, const json_t *msg);

/* TCP port the listener is bound to (host order), 0 if none. */
unsigned rpc_server_tcp_port(const struct rpc_server *srv);

#endif
