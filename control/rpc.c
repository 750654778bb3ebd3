/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rpc.c - JSON-RPC 2.0 request decoding, dispatch by method name, reply
 * and error objects, and the parameter helpers. See rpc.h.
 */
#include "control/rpc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/errmsg.h"
#include "common/secret.h"
#include "control/log.h"
#include "control/rpc_methods.h"

const struct rpc_method rpc_methods[] = {
	{ "box_endpoints", rpc_box_endpoints, RPC_ROLE_WORKER },
	{ "box_status", rpc_box_status, RPC_ROLE_OP_READ },
	{ "box_stats", rpc_box_stats, RPC_ROLE_OP_READ },
	{ "job_create", rpc_job_create, RPC_ROLE_OP_WRITE },
	{ "job_join", rpc_job_join, RPC_ROLE_WORKER },
	{ "job_leave", rpc_job_leave, RPC_ROLE_WORKER },
	{ "job_list", rpc_job_list, RPC_ROLE_OP_READ },
	{ "job_status", rpc_job_status, RPC_ROLE_OP_READ },
	{ "job_abort", rpc_job_abort, RPC_ROLE_OP_WRITE },
	{ "heartbeat", rpc_heartbeat, RPC_ROLE_WORKER },
	{ "job_save", rpc_job_save, RPC_ROLE_OP_WRITE },
	{ "key_declare", rpc_key_declare, RPC_ROLE_WORKER },
	{ "key_release", rpc_key_release, RPC_ROLE_WORKER },
	{ "key_read", rpc_key_read, RPC_ROLE_WORKER },
	{ "key_write", rpc_key_write, RPC_ROLE_WORKER },
	{ NULL, NULL, 0 },
};


/* ---- reply objects ---- */

/* Messages may quote client input cut anywhere: keep printable ASCII only,
 * so the reply is always valid UTF-8. */
static void sanitize(char *dst, size_t cap, const char *msg)
{
	size_t i;

	for (i = 0; msg[i] && i + 1 < cap; i++)
		dst[i] = (msg[i] >= 0x20 && msg[i] < 0x7f) ? msg[i] : '?';
	dst[i] = '\0';
}

json_t *rpc_error_reply(json_t *id, int code, const char *msg)
{
	char clean[RPC_ERR_MAX];

	sanitize(clean, sizeof(clean), msg);
	return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0",
			 "id", id ? id : json_null(), "error", "code", code,
			 "message", clean);
}

json_t *rpc_notification(const char *method, json_t *params)
{
	return json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method,
			 "params", params);
}

static json_t *result_reply(json_t *id, json_t *result)
{
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

/* ---- decoding ---- */

static const struct rpc_method *find_method(const char *name)
{
	for (const struct rpc_method *m = rpc_methods; m->name; m++)
		if (strcmp(m->name, name) == 0)
			return m;
	return NULL;
}

/*
 * Parse one request. *ints_as_reals is set when an integer beyond 64 bits
 * made jansson read every number as a real: the id's type is then not
 * what the client sent (see envelope).
 */
static json_t *parse(const char *line, size_t len, int *ints_as_reals, char *err, size_t errlen)
{
	json_error_t e;
	json_t *req = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &e);

	/* An integer beyond 64 bits is valid JSON: parse it as a number so
	 * the parameter check can name it, instead of a parse error. */
	*ints_as_reals = 0;
	if (!req && json_error_code(&e) == json_error_numeric_overflow) {
		req = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL,
				 &e);
		*ints_as_reals = 1;
	}
	if (!req)
		snprintf(err, errlen, "parse error at column %d: %s", e.column, e.text);
	return req;
}

static int valid_id(const json_t *id)
{
	return json_is_string(id) || json_is_number(id) || json_is_null(id);
}

/*
 * The id comes back as the client sent it. After an integer overflow
 * (ints_as_reals) an id that is not integral was a real: it stays one. An
 * integral one within 2^53 (exact in a double) is taken for an integer and
 * given back as one (an id sent as 2.0 comes back 2). A larger one may
 * have been an integer that a double cannot hold exactly: refused.
 */
static int restore_id(json_t *req, json_t **id, char *err, size_t errlen)
{
	double v = json_real_value(*id);

	if (v != floor(v))
		return 0;
	if (v >= -9007199254740992.0 && v <= 9007199254740992.0 && v == (double)(json_int_t)v) {
		json_object_set_new(req, "id", json_integer((json_int_t)v));
		*id = json_object_get(req, "id");
		return 0;
	}
	*id = NULL;
	return errmsg(err, errlen, RPC_INVALID_REQUEST,
		    "id is too large to echo exactly next to an integer beyond 64 bits:"
		    " use an id within 2^53 or a string");
}

/* Check the envelope; returns 0 and the parts, or an RPC_* code. */
static int envelope(json_t *req, int ints_as_reals, json_t **id, const char **method,
		    json_t **params, char *err, size_t errlen)
{
	if (json_is_array(req))
		return errmsg(err, errlen, RPC_INVALID_REQUEST, "batch requests are not supported");
	if (!json_is_object(req))
		return errmsg(err, errlen, RPC_INVALID_REQUEST, "a request must be a JSON object");
	*id = json_object_get(req, "id");
	if (*id && !valid_id(*id)) {
		*id = NULL;
		return errmsg(err, errlen, RPC_INVALID_REQUEST, "id must be a string, number or null");
	}
	if (ints_as_reals && json_is_real(*id) && restore_id(req, id, err, errlen) < 0)
		return RPC_INVALID_REQUEST;
	json_t *v = json_object_get(req, "jsonrpc");
	if (!json_is_string(v) || strcmp(json_string_value(v), "2.0") != 0)
		return errmsg(err, errlen, RPC_INVALID_REQUEST, "jsonrpc must be \"2.0\"");
	v = json_object_get(req, "method");
	if (!json_is_string(v))
		return errmsg(err, errlen, RPC_INVALID_REQUEST, "method must be a string");
	*method = json_string_value(v);
	*params = json_object_get(req, "params");
	if (*params && !json_is_object(*params))
		return errmsg(err, errlen, json_is_array(*params) ? RPC_INVALID_PARAMS : RPC_INVALID_REQUEST,
			    "params must be an object (parameters by name)");
	return 0;
}

/* Handler return codes: RPC_* or a negative errno; anything else is ours. */
static int sane_code(int rc)
{
	if ((rc <= -32000 && rc >= -32768) || (rc < 0 && rc > -4096))
		return rc;
	return RPC_INTERNAL_ERROR;
}

static json_t *dispatch(struct rpc_ctx *ctx, json_t *id, const char *method,
			json_t *params)
{
	char err[RPC_ERR_MAX] = "";
	const struct rpc_method *m = find_method(method);
	json_t *result = NULL, *reply;

	if (!m) {
		snprintf(err, sizeof(err), "method '%.64s' not found", method);
		return rpc_error_reply(id, RPC_METHOD_NOT_FOUND, err);
	}
	json_t *p = params ? json_incref(params) : json_object();
	int rc = rpc_authorize(ctx, m, p, err, sizeof(err));
	ctx->id = id;
	if (rc == 0)
		rc = m->fn(ctx, p, &result, err, sizeof(err));
	ctx->id = NULL;
	json_decref(p);
	if (rc == RPC_DEFERRED)
		return NULL;
	if (rc == 0 && result)
		return result_reply(id, result);
	json_decref(result);
	if (rc == 0)
		snprintf(err, sizeof(err), "%s: no result", m->name);
	if (!err[0])
		snprintf(err, sizeof(err), "%s: %s", m->name, strerror(-rc));
	reply = rpc_error_reply(id, rc ? sane_code(rc) : RPC_INTERNAL_ERROR, err);
	return reply;
}

json_t *rpc_handle_line(struct rpc_ctx *ctx, const char *line, size_t len)
{
	char err[RPC_ERR_MAX];
	json_t *id = NULL, *params = NULL, *reply;
	const char *method = NULL;
	int ints_as_reals;
	json_t *req = parse(line, len, &ints_as_reals, err, sizeof(err));

	if (!req)
		return rpc_error_reply(NULL, RPC_PARSE_ERROR, err);
	int rc = envelope(req, ints_as_reals, &id, &method, &params, err, sizeof(err));
	if (rc < 0)
		reply = rpc_error_reply(id, rc, err);
	else
		reply = dispatch(ctx, id, method, params);
	if (rc == 0 && !id) { /* a notification: no answer, even on error */
		json_decref(reply);
		reply = NULL;
	}
	json_decref(req);
	return reply;
}

/* ---- authorization ---- */

int rpc_authorize(struct rpc_ctx *ctx, const struct rpc_method *m, json_t *params,
		  char *err, size_t errlen)
{
	const struct box_config *cfg = &ctx->box->cfg;
	json_t *sv = json_object_get(params, "secret");
	const char *given = json_string_value(sv);
	int checked = ctx->remote && cfg->operator_secret_len;   /* TCP, box has a secret */
	int rc = 0;

	if (m->role == RPC_ROLE_WORKER)
		return 0;
	/* an operator method: the secret is checked here and never reaches
	 * the handler */
	if (ctx->remote && m->role == RPC_ROLE_OP_WRITE && !cfg->operator_secret_len)
		rc = errmsg(err, errlen, -EACCES, "%s over TCP is refused: this box has no operator"
			  " secret (--operator-secret-file); use the Unix socket (pboxctl --socket)",
			  m->name);
	else if (checked && sv && !given)
		rc = errmsg(err, errlen, RPC_INVALID_PARAMS, "params.secret must be a string");
	else if (checked && !sv)
		rc = errmsg(err, errlen, -EACCES, "%s over TCP needs the operator secret "
			  "(params.secret; pboxctl --secret-file FILE)", m->name);
	else if (checked && !secret_equal(given, strlen(given), cfg->operator_secret,
					  cfg->operator_secret_len))
		rc = errmsg(err, errlen, -EACCES, "%s refused: wrong operator secret", m->name);
	/* every refused operator call is logged with its peer (counted
	 * against its --log-peer-burst, as the request is being served) */
	if (rc < 0)
		ctl_log(ctx->box, CTL_LOG_WARN, "control: refused a call from %s: %s",
			ctx->peer ? ctx->peer : "?", err);
	json_object_del(params, "secret");
	return rc;
}

/* ---- parameter helpers ---- */

int rpc_params_known(json_t *params, const char *const *names, char *err, size_t errlen)
{
	const char *key;
	json_t *v;

	json_object_foreach(params, key, v) {
		const char *const *n;
		for (n = names; *n && strcmp(*n, key) != 0; n++)
			;
		if (*n)
			continue;
		size_t off = (size_t)snprintf(err, errlen, "params: unknown parameter '%.64s' (known:",
					      key);
		for (n = names; *n && off < errlen; n++)
			off += (size_t)snprintf(err + off, errlen - off, " %s", *n);
		if (off < errlen)
			snprintf(err + off, errlen - off, ")");
		return RPC_INVALID_PARAMS;
	}
	return 0;
}

static int missing(const char *name, char *err, size_t errlen)
{
	return errmsg(err, errlen, RPC_INVALID_PARAMS, "params.%s is required", name);
}

int rpc_param_u64(json_t *params, const char *name, int required, uint64_t min,
		  uint64_t max, uint64_t *out, char *err, size_t errlen)
{
	json_t *v = json_object_get(params, name);
	uint64_t x;

	if (!v)
		return required ? missing(name, err, errlen) : 0;
	if (json_is_integer(v)) {
		json_int_t i = json_integer_value(v);
		if (i < 0)
			return errmsg(err, errlen, RPC_INVALID_PARAMS, "params.%s: %lld is outside "
				    "[%" PRIu64 ", %" PRIu64 "]", name, (long long)i, min, max);
		x = (uint64_t)i;
	} else if (json_is_real(v)) {
		double d = json_real_value(v);
		if (!isfinite(d) || d != floor(d))
			return errmsg(err, errlen, RPC_INVALID_PARAMS, "params.%s: %g is not an "
				    "integer", name, d);
		if (d < 0 || d >= 18446744073709551616.0)
			return errmsg(err, errlen, RPC_INVALID_PARAMS, "params.%s: %g is outside "
				    "[%" PRIu64 ", %" PRIu64 "]", name, d, min, max);
		x = (uint64_t)d;
	} else {
		return errmsg(err, errlen, RPC_INVALID_PARAMS, "params.%s must be an integer", name);
	}
	if (x < min || x > max)
		return errmsg(err, errlen, RPC_INVALID_PARAMS, "params.%s: %" PRIu64 " is outside "
			    "[%" PRIu64 ", %" PRIu64 "]", name, x, min, max);
	*out = x;
	return 0;
}

int rpc_param_u32(json_t *params, const char *name, int required, uint32_t min,
		  uint32_t max, uint32_t *out, char *err, size_t errlen)
{
	uint64_t x;
	int rc = rpc_param_u64(params, name, required, min, max, &x, err, errlen);

	if (rc == 0 && json_object_get(params, name))
		*out = (uint32_t)x;
	return rc;
}

int rpc_param_str(json_t *params, const char *name, int required, size_t maxlen,
		  const char **out, char *err, size_t errlen)
{
	json_t *v = json_object_get(params, name);

	if (!v)
		return required ? missing(name, err, errlen) : 0;
	if (!json_is_string(v))
		return errmsg(err, errlen, RPC_INVALID_PARAMS, "params.%s must be a string", name);
	size_t n = json_string_length(v);
	if (n > maxlen)
		return errmsg(err, errlen, RPC_INVALID_PARAMS, "params.%s is %zu bytes long, "
			    "more than %zu", name, n, maxlen);
	if (strlen(json_string_value(v)) != n)
		return errmsg(err, errlen, RPC_INVALID_PARAMS, "params.%s contains a NUL", name);
	*out = json_string_value(v);
	return 0;
}

int rpc_param_ipv4(json_t *params, const char *name, int required, uint32_t *out,
		   char *err, size_t errlen)
{
	const char *s = NULL;
	struct in_addr a;
	int rc = rpc_param_str(params, name, required, 15, &s, err, errlen);

	if (rc < 0 || !s)
		return rc;
	if (inet_pton(AF_INET, s, &a) != 1)
		return errmsg(err, errlen, RPC_INVALID_PARAMS, "params.%s: '%s' is not a "
			    "dotted-quad IPv4 address", name, s);
	*out = ntohl(a.s_addr);
	return 0;
}

const char *rpc_ip_str(uint32_t ip, char *buf, size_t len)
{
	struct in_addr a = { .s_addr = htonl(ip) };

	if (!inet_ntop(AF_INET, &a, buf, (socklen_t)len))
		snprintf(buf, len, "?");
	return buf;
}
