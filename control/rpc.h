/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rpc.h - JSON-RPC 2.0 requests (docs/rpc.md): decode one request line,
 * dispatch it by method name to a handler, build the reply or the error
 * object; plus the parameter helpers handlers use to check types and
 * ranges. Transport-free: the server (rpc_server.c) feeds it lines.
 *
 * Hostile input is expected: a request line is at most 64 KiB (the
 * framing enforces it), every parameter is type- and range-checked before
 * use, and nothing here allocates more than a small multiple of the line.
 */
#ifndef PBOX_RPC_H
#define PBOX_RPC_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "control/box.h"

/* JSON-RPC protocol error codes; errors of a request's content use a
 * negative errno as code. */
#define RPC_PARSE_ERROR      (-32700)
#define RPC_INVALID_REQUEST  (-32600)
#define RPC_METHOD_NOT_FOUND (-32601)
#define RPC_INVALID_PARAMS   (-32602)
#define RPC_INTERNAL_ERROR   (-32603)

#define RPC_ERR_MAX 512      /* longest error message */

/* What a handler may use besides its params. */
struct rpc_ctx {
	struct box *box;
	void *session;   /* the connection the request came on (job_join) */
	int remote;      /* it came over TCP (not the Unix socket) */
	const char *peer; /* "ADDR:PORT" or "unix peer", for logs; may be NULL */
	json_t *id;      /* the request's id (borrowed; NULL: null or none) */
};

/* A handler's return: the answer comes later (the handler kept ctx->id
 * and the session; control/ckpt_worker.h), nothing is sent now. */
#define RPC_DEFERRED 1

/*
 * A method. params is always an object (empty if the request had none).
 * Returns 0 and a new reference in *result, or a negative errno or an
 * RPC_* code with a message in err.
 */
typedef int (*rpc_handler_fn)(struct rpc_ctx *ctx, json_t *params, json_t **result,
			      char *err, size_t errlen);

/* Who may call a method (docs/reliability.md "Who may call what"). Over
 * the Unix socket every role may; over TCP: */
enum rpc_role {
	RPC_ROLE_WORKER = 0,  /* anyone (per-rank methods check the session) */
	RPC_ROLE_OP_READ,     /* with the operator secret if the box has one */
	RPC_ROLE_OP_WRITE,    /* with the operator secret; refused without one */
};

struct rpc_method {
	const char *name;
	rpc_handler_fn fn;
	enum rpc_role role;
};

/* The method table (rpc.c); NULL-terminated. */
extern const struct rpc_method rpc_methods[];

/*
 * May ctx call m with params? Over TCP an operator method must carry the
 * box's operator secret as params.secret (removed from params once
 * checked, so handlers never see it). 0, or -EACCES with the rule in err.
 */
int rpc_authorize(struct rpc_ctx *ctx, const struct rpc_method *m, json_t *params,
		  char *err, size_t errlen);

/*
 * Handle one request line (without its '\n'). Returns the reply to send
 * (a new reference), or NULL if the request was a notification.
 */
json_t *rpc_handle_line(struct rpc_ctx *ctx, const char *line, size_t len);

/* {"jsonrpc":"2.0","id":id,"error":{"code":code,"message":msg}};
 * id is borrowed, NULL means null. */
json_t *rpc_error_reply(json_t *id, int code, const char *msg);

/* {"jsonrpc":"2.0","method":method,"params":params}; params is stolen. */
json_t *rpc_notification(const char *method, json_t *params);

/* ---- parameter helpers: 0, or RPC_INVALID_PARAMS with a message naming
 * the parameter. `required` 0 leaves *out untouched when absent. ---- */

/* Every member of params must be one of the NULL-terminated names. */
int rpc_params_known(json_t *params, const char *const *names, char *err, size_t errlen);

/* An integer in [min, max] (an integral number such as 4.0 is accepted). */
int rpc_param_u64(json_t *params, const char *name, int required, uint64_t min,
		  uint64_t max, uint64_t *out, char *err, size_t errlen);
int rpc_param_u32(json_t *params, const char *name, int required, uint32_t min,
		  uint32_t max, uint32_t *out, char *err, size_t errlen);

/* A string of at most maxlen bytes without NUL; *out points into params. */
int rpc_param_str(json_t *params, const char *name, int required, size_t maxlen,
		  const char **out, char *err, size_t errlen);

/* A dotted-quad IPv4 string; *out in host order. */
int rpc_param_ipv4(json_t *params, const char *name, int required, uint32_t *out,
		   char *err, size_t errlen);

/* "a.b.c.d" of a host-order address into buf (16 bytes). */
const char *rpc_ip_str(uint32_t ip, char *buf, size_t len);

#endif
