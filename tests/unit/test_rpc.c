/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rpc.c - the JSON-RPC layer (control/rpc.c and the *_rpc.c
 * handlers) on hostile and normal input, and the server (rpc_server.c)
 * with the client (rpc_client.c) over a real Unix socket in a temporary
 * directory: sessions, notifications, over-long lines.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <grp.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/box_fixture.h"
#include "control/jobs.h"
#include "control/options.h"
#include "control/peers.h"
#include "control/rpc.h"
#include "common/rpc_client.h"
#include "control/rpc_server.h"

/* ---- rpc_handle_line against a fixture box ---- */

struct t {
	struct fixture *f;
	struct rpc_ctx ctx;
};

/* A setup that fails frees what it took (cmocka runs no teardown then)
 * and returns -1: the test errors with the cause, not with LeakSanitizer's
 * report of the fixture. */
static int setup(void **state)
{
	struct t *t = calloc(1, sizeof(*t));
	int rc;

	t->f = fixture_new(2, 2);
	if ((rc = jobs_open(&t->f->box, &t->f->box.jobs)) < 0) {
		print_error("jobs_open: %s\n", strerror(-rc));
		fixture_free(t->f);
		free(t);
		return -1;
	}
	t->ctx = (struct rpc_ctx){ .box = &t->f->box, .session = (void *)1 };
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct t *t = *state;
	jobs_close(t->f->box.jobs);
	assert_int_equal(t->f->allocs, t->f->frees);
	assert_int_equal(t->f->apply_errors, 0);
	fixture_free(t->f);
	free(t);
	return 0;
}

static json_t *call_line(struct t *t, const char *line)
{
	return rpc_handle_line(&t->ctx, line, strlen(line));
}

/* The reply's error code (0 if a result), checking the envelope. */
static int code_of(json_t *r)
{
	assert_non_null(r);
	assert_string_equal(json_string_value(json_object_get(r, "jsonrpc")), "2.0");
	json_t *e = json_object_get(r, "error");
	if (!e) {
		assert_non_null(json_object_get(r, "result"));
		return 0;
	}
	assert_true(json_is_string(json_object_get(e, "message")));
	return (int)json_integer_value(json_object_get(e, "code"));
}

static const char *message_of(json_t *r)
{
	return json_string_value(json_object_get(json_object_get(r, "error"), "message"));
}

static void expect_code(struct t *t, const char *line, int code, const char *in_message)
{
	json_t *r = call_line(t, line);
	int c = code_of(r);
	if (c != code)
		fail_msg("%s -> %d (%s), expected %d", line, c, message_of(r) ? message_of(r) : "",
			 code);
	if (in_message && !strstr(message_of(r), in_message))
		fail_msg("%s -> message '%s' lacks '%s'", line, message_of(r), in_message);
	json_decref(r);
}

static void hostile__framing_and_envelope(void **state)
{
	struct t *t = *state;

	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"job_list\"", RPC_PARSE_ERROR, "parse");
	expect_code(t, "", RPC_PARSE_ERROR, NULL);
	expect_code(t, "nonsense", RPC_PARSE_ERROR, NULL);
	expect_code(t, "{\"a\":1}{\"b\":2}", RPC_PARSE_ERROR, NULL);
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"job_list\"}", RPC_PARSE_ERROR, NULL);
	expect_code(t, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"job_list\"}]", RPC_INVALID_REQUEST, "batch");
	expect_code(t, "42", RPC_INVALID_REQUEST, NULL);
	expect_code(t, "{\"id\":1,\"method\":\"job_list\"}", RPC_INVALID_REQUEST, "jsonrpc");
	expect_code(t, "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"job_list\"}", RPC_INVALID_REQUEST, NULL);
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", RPC_INVALID_REQUEST, "method");
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"job_list\"}", RPC_INVALID_REQUEST, "id");
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"job_list\",\"params\":[1]}",
		    RPC_INVALID_PARAMS, "object");
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"job_list\",\"params\":\"x\"}",
		    RPC_INVALID_REQUEST, NULL);
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"rm_rf\"}", RPC_METHOD_NOT_FOUND, "rm_rf");
	/* deep nesting is refused by the parser, not a crash */
	char deep[8192];
	memset(deep, '[', 4000);
	deep[4000] = '\0';
	expect_code(t, deep, RPC_PARSE_ERROR, NULL);
}

static void hostile__params(void **state)
{
	struct t *t = *state;
#define JOIN "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"job_join\",\"params\":"
	expect_code(t, JOIN "{}}", RPC_INVALID_PARAMS, "params.job is required");
	expect_code(t, JOIN "{\"job\":5,\"rank\":0,\"world\":1,\"data_ip\":\"1.2.3.4\",\"data_port\":1}}",
		    RPC_INVALID_PARAMS, "params.job must be a string");
	expect_code(t, JOIN "{\"job\":\"a\",\"rank\":\"0\",\"world\":1,\"data_ip\":\"1.2.3.4\",\"data_port\":1}}",
		    RPC_INVALID_PARAMS, "params.rank must be an integer");
	expect_code(t, JOIN "{\"job\":\"a\",\"rank\":-1,\"world\":1,\"data_ip\":\"1.2.3.4\",\"data_port\":1}}",
		    RPC_INVALID_PARAMS, "params.rank");
	expect_code(t, JOIN "{\"job\":\"a\",\"rank\":0.5,\"world\":1,\"data_ip\":\"1.2.3.4\",\"data_port\":1}}",
		    RPC_INVALID_PARAMS, "not an integer");
	expect_code(t, JOIN "{\"job\":\"a\",\"rank\":0,\"world\":99999999999999999999999,\"data_ip\":\"1.2.3.4\",\"data_port\":1}}",
		    RPC_INVALID_PARAMS, "params.world");
	expect_code(t, JOIN "{\"job\":\"a\",\"rank\":0,\"world\":1e300,\"data_ip\":\"1.2.3.4\",\"data_port\":1}}",
		    RPC_INVALID_PARAMS, "params.world");
	expect_code(t, JOIN "{\"job\":\"a\",\"rank\":0,\"world\":true,\"data_ip\":\"1.2.3.4\",\"data_port\":1}}",
		    RPC_INVALID_PARAMS, "params.world");
	expect_code(t, JOIN "{\"job\":\"a\",\"rank\":0,\"world\":1,\"data_ip\":\"1.2.3\",\"data_port\":1}}",
		    RPC_INVALID_PARAMS, "data_ip");
	expect_code(t, JOIN "{\"job\":\"a\",\"rank\":0,\"world\":1,\"data_ip\":\"1.2.3.4\",\"data_port\":70000}}",
		    RPC_INVALID_PARAMS, "data_port");
	expect_code(t, JOIN "{\"job\":\"a\",\"rank\":0,\"world\":1,\"data_ip\":\"1.2.3.4\",\"data_port\":1,\"wrld\":1}}",
		    RPC_INVALID_PARAMS, "wrld");
	/* over-long strings */
	char line[2048];
	char name[600];
	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	snprintf(line, sizeof(line), JOIN "{\"job\":\"%s\",\"rank\":0,\"world\":1,\"data_ip\":\"1.2.3.4\",\"data_port\":1}}", name);
	expect_code(t, line, RPC_INVALID_PARAMS, "params.job");
	/* in range for the decoder, but not for the box: errno codes */
	expect_code(t, JOIN "{\"job\":\"a\",\"rank\":0,\"world\":1025,\"data_ip\":\"1.2.3.4\",\"data_port\":1}}",
		    -EINVAL, "world 1025");
	expect_code(t, JOIN "{\"job\":\"a b\",\"rank\":0,\"world\":1,\"data_ip\":\"1.2.3.4\",\"data_port\":1}}",
		    -EINVAL, "A-Za-z0-9");
	expect_code(t, JOIN "{\"job\":\"\\u00e9t\\u00e9\",\"rank\":0,\"world\":1,\"data_ip\":\"1.2.3.4\",\"data_port\":1}}",
		    -EINVAL, NULL);
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"key_declare\",\"params\":"
		    "{\"job_id\":1,\"rank\":0,\"key\":1,\"count\":10,\"dtype\":\"f64\"}}", -EINVAL, "f64");
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"key_declare\",\"params\":"
		    "{\"job_id\":1,\"rank\":0,\"key\":4294967296,\"count\":10,\"dtype\":\"f32\"}}",
		    RPC_INVALID_PARAMS, "params.key");
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"key_declare\",\"params\":"
		    "{\"job_id\":1,\"rank\":0,\"key\":1,\"count\":10,\"dtype\":\"f32\"}}", -ENOENT, "1");
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"job_status\",\"params\":{\"job\":\"nope\"}}",
		    -ENOENT, "nope");
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"box_status\",\"params\":{\"x\":1}}",
		    RPC_INVALID_PARAMS, "'x'");
#undef JOIN
}

static void notification__no_reply_but_runs(void **state)
{
	struct t *t = *state;

	assert_null(call_line(t, "{\"jsonrpc\":\"2.0\",\"method\":\"job_create\",\"params\":"
				 "{\"job\":\"n\",\"world\":1}}"));
	assert_non_null(jobs_find(t->f->box.jobs, "n"));
	assert_null(call_line(t, "{\"jsonrpc\":\"2.0\",\"method\":\"no_such\"}"));
}

static void id__echoed(void **state)
{
	struct t *t = *state;
	json_t *r = call_line(t, "{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"method\":\"job_list\"}");

	assert_string_equal(json_string_value(json_object_get(r, "id")), "abc");
	json_decref(r);
	r = call_line(t, "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"job_list\"}");
	assert_true(json_is_null(json_object_get(r, "id")));
	assert_int_equal(code_of(r), 0);
	json_decref(r);
	/* an integer id stays an integer, even next to a 2^64 parameter */
	r = call_line(t, "{\"jsonrpc\":\"2.0\",\"id\":9223372036854775807,\"method\":\"job_list\"}");
	assert_true(json_is_integer(json_object_get(r, "id")));
	assert_true(json_integer_value(json_object_get(r, "id")) == INT64_MAX);
	json_decref(r);
	r = call_line(t, "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"job_status\","
		      "\"params\":{\"job\":18446744073709551616}}");
	assert_true(json_is_integer(json_object_get(r, "id")));
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 42);
	assert_int_not_equal(code_of(r), 0);
	json_decref(r);
	/* an id of 2^63 cannot be echoed exactly: refused by name, id null */
	r = call_line(t, "{\"jsonrpc\":\"2.0\",\"id\":9223372036854775808,\"method\":\"job_list\"}");
	assert_int_equal(code_of(r), RPC_INVALID_REQUEST);
	assert_true(json_is_null(json_object_get(r, "id")));
	assert_non_null(strstr(message_of(r), "id is too large"));
	json_decref(r);
	/* a real id comes back a real, next to a 2^64 parameter too */
	r = call_line(t, "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"job_list\"}");
	assert_true(json_is_real(json_object_get(r, "id")));
	json_decref(r);
	r = call_line(t, "{\"jsonrpc\":\"2.0\",\"id\":-1.5,\"method\":\"job_status\","
		      "\"params\":{\"job\":18446744073709551616}}");
	assert_true(json_is_real(json_object_get(r, "id")));
	assert_true(json_real_value(json_object_get(r, "id")) == -1.5);
	assert_int_not_equal(code_of(r), RPC_INVALID_REQUEST);
	json_decref(r);
}

static json_t *result_of(struct t *t, const char *line)
{
	json_t *r = call_line(t, line);
	if (code_of(r) != 0)
		fail_msg("%s -> %s", line, message_of(r));
	json_t *res = json_incref(json_object_get(r, "result"));
	json_decref(r);
	return res;
}

static void flow__join_declare_status(void **state)
{
	struct t *t = *state;
	json_t *r;

	r = result_of(t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"job_join\",\"params\":"
		      "{\"job\":\"resnet\",\"rank\":0,\"world\":2,\"data_ip\":\"10.0.0.1\",\"data_port\":40000}}");
	uint32_t id = (uint32_t)json_integer_value(json_object_get(r, "job_id"));
	assert_int_not_equal(id, 0);
	assert_int_equal(strlen(json_string_value(json_object_get(r, "token"))), 16);
	assert_int_equal(json_integer_value(json_object_get(r, "seg_bytes")), 1408);
	assert_int_equal(json_integer_value(json_object_get(r, "chunk_bytes")), 32768);
	assert_int_equal(json_integer_value(json_object_get(r, "world")), 2);
	json_decref(r);

	char line[512];
	t->ctx.session = (void *)2;
	snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"job_join\",\"params\":"
		 "{\"job\":\"resnet\",\"rank\":1,\"world\":2,\"data_ip\":\"10.0.0.2\",\"data_port\":40000,\"mtu\":9000}}");
	json_decref(result_of(t, line));
	expect_code(t, line, -EEXIST, "rank 1 already joined");

	snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"key_declare\",\"params\":"
		 "{\"job_id\":%u,\"rank\":0,\"key\":7,\"count\":1000000,\"dtype\":\"f32\"}}", id);
	/* rank 0 is session 1's: session 2 may not declare for it */
	expect_code(t, line, -EACCES, "rank 0 belongs to another connection");
	t->ctx.session = (void *)1;
	r = result_of(t, line);
	t->ctx.session = (void *)2;
	assert_int_equal(json_integer_value(json_object_get(r, "seg_elems")), 352);
	assert_int_equal(json_integer_value(json_object_get(r, "nsegs")), 2841);
	assert_int_equal(json_integer_value(json_object_get(r, "segs_per_chunk")), 23);
	assert_int_equal(json_array_size(json_object_get(r, "chunks")), 124);
	assert_string_equal(json_string_value(json_object_get(r, "dtype")), "f32");
	json_decref(r);
	snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"key_declare\",\"params\":"
		 "{\"job_id\":%u,\"rank\":1,\"key\":7,\"count\":999,\"dtype\":\"f32\"}}", id);
	expect_code(t, line, -EINVAL, "key 7");

	r = result_of(t, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"job_status\",\"params\":{\"job\":\"resnet\"}}");
	assert_string_equal(json_string_value(json_object_get(r, "state")), "active");
	assert_int_equal(json_integer_value(json_object_get(r, "keys")), 1);
	assert_true(json_is_null(json_object_get(r, "reason")));
	json_t *ranks = json_object_get(r, "ranks");
	assert_int_equal(json_array_size(ranks), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(ranks, 1), "data_ip")),
			    "10.0.0.2");
	json_t *keys = json_object_get(r, "key_list");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(keys, 0), "declared")), 1);
	json_decref(r);

	r = result_of(t, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"job_list\"}");
	assert_int_equal(json_array_size(json_object_get(r, "jobs")), 1);
	json_decref(r);

	json_decref(result_of(t, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"job_abort\",\"params\":"
				 "{\"job\":\"resnet\",\"reason\":\"maintenance\"}}"));
	r = result_of(t, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"job_status\",\"params\":{\"job\":\"resnet\"}}");
	assert_string_equal(json_string_value(json_object_get(r, "state")), "aborted");
	assert_string_equal(json_string_value(json_object_get(r, "reason")), "maintenance");
	json_decref(r);
	snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"key_declare\",\"params\":"
		 "{\"job_id\":%u,\"rank\":1,\"key\":8,\"count\":9,\"dtype\":\"f32\"}}", id);
	expect_code(t, line, -ECONNABORTED, "maintenance");
	jobs_session_closed(t->f->box.jobs, (void *)1);
	jobs_session_closed(t->f->box.jobs, (void *)2);
	jobs_tick(t->f->box.jobs);
}

/* With an operator secret, job_abort over TCP needs it (constant-time
 * compare, -EACCES naming what is missing); the Unix socket does not. */
static void abort__operator_secret_over_tcp(void **state)
{
	struct t *t = *state;
	struct box_config *cfg = &t->f->box.cfg;
	json_t *r;

	snprintf(cfg->operator_secret, sizeof(cfg->operator_secret), "0123456789abcdef-secret");
	cfg->operator_secret_len = (uint32_t)strlen(cfg->operator_secret);
	json_decref(result_of(t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"job_join\",\"params\":"
			      "{\"job\":\"a\",\"rank\":0,\"world\":2,\"data_ip\":\"10.0.0.1\",\"data_port\":40000}}"));
	t->ctx.remote = 1;
	t->ctx.peer = "10.0.0.9:5555";
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"job_abort\",\"params\":{\"job\":\"a\"}}",
		    -EACCES, "needs the operator secret");
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"job_abort\",\"params\":"
		    "{\"job\":\"a\",\"secret\":\"0123456789abcdef-secreT\"}}", -EACCES, "wrong operator secret");
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"job_abort\",\"params\":"
		    "{\"job\":\"a\",\"secret\":\"0123456789abcdef-secret2\"}}", -EACCES, "wrong operator secret");
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"job_abort\",\"params\":"
		    "{\"job\":\"a\",\"secret\":\"\"}}", -EACCES, "wrong operator secret");
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"job_abort\",\"params\":"
		    "{\"job\":\"a\",\"secret\":7}}", RPC_INVALID_PARAMS, "secret");
	/* reading is an operator method too: with the secret only */
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"job_status\",\"params\":{\"job\":\"a\"}}",
		    -EACCES, "job_status over TCP needs the operator secret");
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"job_list\"}", -EACCES,
		    "job_list over TCP needs the operator secret");
	/* a refused abort left the job alone; a secret does not skip the name check */
	r = result_of(t, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"job_status\",\"params\":"
		      "{\"job\":\"a\",\"secret\":\"0123456789abcdef-secret\"}}");
	assert_string_not_equal(json_string_value(json_object_get(r, "state")), "aborted");
	json_decref(r);
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"job_abort\",\"params\":"
		    "{\"job\":\"nosuch\",\"secret\":\"0123456789abcdef-secret\"}}", -ENOENT, "nosuch");
	json_decref(result_of(t, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"job_abort\",\"params\":"
			      "{\"job\":\"a\",\"secret\":\"0123456789abcdef-secret\"}}"));
	r = result_of(t, "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"job_status\",\"params\":"
		      "{\"job\":\"a\",\"secret\":\"0123456789abcdef-secret\"}}");
	assert_string_equal(json_string_value(json_object_get(r, "state")), "aborted");
	json_decref(r);

	/* local operators (Unix socket) need no secret */
	t->ctx.remote = 0;
	t->ctx.session = (void *)2;
	json_decref(result_of(t, "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"job_join\",\"params\":"
			      "{\"job\":\"b\",\"rank\":0,\"world\":2,\"data_ip\":\"10.0.0.1\",\"data_port\":40000}}"));
	json_decref(result_of(t, "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"job_abort\",\"params\":{\"job\":\"b\"}}"));
	/* box_status never shows the secret */
	r = result_of(t, "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"box_status\"}");
	char *dump = json_dumps(r, 0);
	assert_null(strstr(dump, "0123456789abcdef"));
	assert_non_null(strstr(dump, "{\"option\": \"operator-secret-file\", \"value\": \"set\", \"default\": \"none\"}"));
	free(dump);
	json_decref(r);
	jobs_session_closed(t->f->box.jobs, (void *)1);
	jobs_session_closed(t->f->box.jobs, (void *)2);
	jobs_tick(t->f->box.jobs);
}

static void box__status_stats_endpoints(void **state)
{
	struct t *t = *state;
	json_t *r;

	r = result_of(t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"box_endpoints\"}");
	json_t *eps = json_object_get(r, "endpoints");
	assert_int_equal(json_array_size(eps), 4);
	assert_string_equal(json_string_value(json_object_get(json_array_get(eps, 1), "ip")), "198.18.0.1");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(eps, 1), "port")), 47001);
	assert_int_equal(json_integer_value(json_object_get(r, "mtu")), 1500);
	json_decref(r);

	r = result_of(t, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"box_status\"}");
	assert_int_equal(json_array_size(json_object_get(r, "ports")), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(r, "ports"), 0), "ip")),
			    "198.18.0.1/24");
	assert_int_equal(json_array_size(json_object_get(r, "lcores")), 2);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "limits"), "max_world")), 1024);
	/* config: one row per setting of the option table, in its order */
	json_t *cfg = json_object_get(r, "config"), *row;
	size_t i, n = 0;
	for (i = 0; i < box_nopts; i++)
		n += box_opt_is_setting(&box_opts[i]);
	assert_int_equal(json_array_size(cfg), n);
	row = json_array_get(cfg, 0);
	assert_string_equal(json_string_value(json_object_get(row, "option")), "ip");
	assert_string_equal(json_string_value(json_object_get(row, "value")), "none");
	json_array_foreach(cfg, i, row) {
		const struct box_opt *o = box_opt_find(json_string_value(json_object_get(row, "option")));
		assert_non_null(o);
		if (strcmp(o->name, "log-level") == 0)   /* the fixture logs errors only */
			assert_string_equal(json_string_value(json_object_get(row, "value")), "error");
		else if (o->def)
			assert_string_equal(json_string_value(json_object_get(row, "value")), o->def);
		assert_string_equal(json_string_value(json_object_get(row, "default")), o->def ? o->def : "none");
	}
	json_decref(r);

	t->f->lstats[1].drops[DROP_BAD_TOKEN] = 5;
	t->f->lstats[0].drops[DROP_BAD_TOKEN] = 2;
	r = result_of(t, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"box_stats\"}");
	json_t *drops = json_object_get(r, "drops");
	assert_int_equal(json_object_size(drops), DROP_COUNT - 1);   /* every reason, zero or not */
	assert_int_equal(json_integer_value(json_object_get(drops, "bad_token")), 7);
	assert_int_equal(json_integer_value(json_object_get(drops, "no_mbuf")), 0);
	json_t *l1 = json_array_get(json_object_get(r, "lcores"), 1);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(l1, "drops"), "bad_token")), 5);
	assert_non_null(json_object_get(l1, "pushes"));
	assert_int_equal(json_integer_value(json_object_get(json_array_get(json_object_get(r, "ports"), 1),
							    "ipackets")), 101);
	json_decref(r);
}

/* ---- the server over a Unix socket ---- */

struct srv_t {
	struct fixture *f;
	struct rpc_server *srv;
	pthread_t th;
	atomic_int stop;
	char dir[32], path[64];
	gid_t gid;                 /* the socket's group */
};

/* The group the server gives its socket (--rpc-socket-group): one the
 * caller may give a file, so the tests run as any user. Preferably not the
 * caller's own group, which the socket has anyway: root may give any group
 * ("daemon", gid 1 on Debian), another user one of its supplementary
 * groups. Else the caller's own (getegid()'s name); "" (none) if it has no
 * name. *gid: the group the socket then has. */
static const char *socket_group(gid_t *gid)
{
	struct group *g = geteuid() == 0 ? getgrnam("daemon") : NULL;
	gid_t list[64];
	int n = geteuid() == 0 ? 0 : getgroups(64, list);

	for (int i = 0; !g && i < n; i++)
		if (list[i] != getegid())
			g = getgrgid(list[i]);
	if (!g)
		g = getgrgid(getegid());
	*gid = g ? g->gr_gid : getegid();
	return g ? g->gr_name : "";
}

static void *serve(void *arg)
{
	struct srv_t *s = arg;
	while (!atomic_load(&s->stop))
		rpc_server_poll(s->srv, 10);
	return NULL;
}

static int srv_setup_at(void **state, const char *control)
{
	struct srv_t *s = calloc(1, sizeof(*s));
	char err[256];
	int rc;

	snprintf(s->dir, sizeof(s->dir), "/tmp/pbox-rpc-XXXXXX");
	if (!mkdtemp(s->dir)) {
		print_error("mkdtemp %s: %s\n", s->dir, strerror(errno));
		free(s);
		return -1;
	}
	snprintf(s->path, sizeof(s->path), "%s/pboxd.sock", s->dir);
	s->f = fixture_new(1, 2);
	snprintf(s->f->box.cfg.rpc_socket, sizeof(s->f->box.cfg.rpc_socket), "%s", s->path);
	snprintf(s->f->box.cfg.control, sizeof(s->f->box.cfg.control), "%s", control);
	s->f->box.cfg.rpc_socket_mode = 0600;
	snprintf(s->f->box.cfg.rpc_socket_group, sizeof(s->f->box.cfg.rpc_socket_group), "%s",
		 socket_group(&s->gid));
	if ((rc = rpc_server_open(&s->srv, &s->f->box, err, sizeof(err))) < 0) {
		print_error("rpc_server_open: %s\n", err);
		goto fail;
	}
	if (rpc_server_tcp_port(s->srv) == 0 ||
	    (rc = pthread_create(&s->th, NULL, serve, s)) != 0) {
		print_error("%s\n", rc ? strerror(rc) : "rpc_server_open: no TCP port");
		rpc_server_close(s->srv);
		goto fail;
	}
	*state = s;
	return 0;
fail:
	fixture_free(s->f);
	rmdir(s->dir);
	free(s);
	return -1;
}

static int srv_setup(void **state) { return srv_setup_at(state, "127.0.0.1:0"); }
static int srv6_setup(void **state) { return srv_setup_at(state, "[::]:0"); }

static int srv_teardown(void **state)
{
	struct srv_t *s = *state;
	atomic_store(&s->stop, 1);
	pthread_join(s->th, NULL);
	rpc_server_close(s->srv);
	assert_int_equal(access(s->path, F_OK), -1);   /* socket unlinked */
	assert_int_equal(s->f->allocs, s->f->frees);
	assert_int_equal(s->f->apply_errors, 0);
	fixture_free(s->f);
	rmdir(s->dir);
	free(s);
	return 0;
}

static struct rpc_client *connect_ok(struct srv_t *s)
{
	struct rpc_client *c;
	struct rpc_error e;
	if (rpc_client_connect(s->path, 2000, &c, &e) < 0)
		fail_msg("connect: %s", e.message);
	return c;
}

static json_t *rcall(struct rpc_client *c, const char *method, json_t *params)
{
	json_t *r = NULL;
	struct rpc_error e;
	int rc = rpc_client_call(c, method, params, 2000, &r, &e);
	json_decref(params);
	if (rc < 0)
		fail_msg("%s: %d %s", method, e.code, e.message);
	return r;
}

static json_t *join_params(const char *job, int rank, int world)
{
	return json_pack("{s:s, s:i, s:i, s:s, s:i}", "job", job, "rank", rank, "world", world,
			 "data_ip", "10.0.0.1", "data_port", 40000 + rank);
}

static void server__calls_and_errors(void **state)
{
	struct srv_t *s = *state;
	struct rpc_client *c = connect_ok(s);
	struct rpc_error e;
	json_t *r;
	struct stat st;

	assert_int_equal(stat(s->path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(st.st_gid, s->gid);   /* --rpc-socket-group */
	r = rcall(c, "box_endpoints", NULL);
	assert_int_equal(json_array_size(json_object_get(r, "endpoints")), 2);
	json_decref(r);
	assert_int_equal(rpc_client_call(c, "nope", NULL, 2000, &r, &e), -EREMOTEIO);
	assert_int_equal(e.code, RPC_METHOD_NOT_FOUND);
	assert_int_equal(e.remote, 1);
	json_t *p = json_pack("{s:s}", "job", "ghost");
	assert_int_equal(rpc_client_call(c, "job_status", p, 2000, &r, &e), -EREMOTEIO);
	json_decref(p);
	assert_int_equal(e.code, -ENOENT);
	assert_non_null(strstr(e.message, "ghost"));
	rpc_client_close(c);

	/* the same over TCP */
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", rpc_server_tcp_port(s->srv));
	assert_int_equal(rpc_client_connect(addr, 2000, &c, &e), 0);
	r = rcall(c, "job_list", NULL);
	assert_int_equal(json_array_size(json_object_get(r, "jobs")), 0);
	json_decref(r);
	rpc_client_close(c);

	assert_int_equal(rpc_client_connect("/nonexistent/x.sock", 500, &c, &e), -ENOENT);
	assert_non_null(strstr(e.message, "/nonexistent/x.sock"));
	assert_int_equal(rpc_client_connect("localhost", 500, &c, &e), -EINVAL);
}

struct note {
	char method[32];
	char reason[192];
	int n;
};

static void on_note(void *arg, const char *method, json_t *params)
{
	struct note *n = arg;
	snprintf(n->method, sizeof(n->method), "%s", method);
	snprintf(n->reason, sizeof(n->reason), "%s",
		 json_string_value(json_object_get(params, "reason")));
	n->n++;
}

static void server__closed_session_aborts_job_and_notifies(void **state)
{
	struct srv_t *s = *state;
	struct rpc_client *a = connect_ok(s), *b = connect_ok(s), *op = connect_ok(s);
	struct note note = { 0 };
	struct rpc_error e;
	json_t *r;

	json_decref(rcall(a, "job_join", join_params("train", 0, 2)));
	json_decref(rcall(b, "job_join", join_params("train", 1, 2)));
	rpc_client_set_notify(b, on_note, &note);
	rpc_client_close(a);   /* rank 0's session ends without job_leave */

	for (int i = 0; i < 100 && note.n == 0; i++)
		assert_true(rpc_client_poll(b, 20, &e) >= 0);
	assert_int_equal(note.n, 1);
	assert_string_equal(note.method, "job_aborted");
	assert_string_equal(note.reason, "rank 0 lost (control connection closed)");

	r = rcall(op, "job_status", json_pack("{s:s}", "job", "train"));
	assert_string_equal(json_string_value(json_object_get(r, "state")), "aborted");
	json_decref(r);
	rpc_client_close(b);   /* last session: the job goes */
	for (int i = 0; i < 100; i++) {
		r = rcall(op, "job_list", NULL);
		size_t n = json_array_size(json_object_get(r, "jobs"));
		json_decref(r);
		if (n == 0)
			break;
		usleep(10000);
	}
	r = rcall(op, "box_status", NULL);
	assert_int_equal(json_integer_value(json_object_get(r, "jobs")), 0);
	json_decref(r);
	rpc_client_close(op);
}

static void server__leave_then_close_is_clean(void **state)
{
	struct srv_t *s = *state;
	struct rpc_client *a = connect_ok(s);
	json_t *r = rcall(a, "job_join", join_params("solo", 0, 1));
	json_int_t id = json_integer_value(json_object_get(r, "job_id"));
	json_decref(r);
	json_decref(rcall(a, "job_leave", json_pack("{s:I, s:i}", "job_id", id, "rank", 0)));
	r = rcall(a, "job_list", NULL);
	assert_int_equal(json_array_size(json_object_get(r, "jobs")), 0);
	json_decref(r);
	rpc_client_close(a);
}

static int raw_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void server__long_line_is_32600_and_close(void **state)
{
	struct srv_t *s = *state;
	int fd = raw_connect(s->path);
	size_t n = 70 * 1024;
	char *big = malloc(n);
	char buf[4096];
	size_t got = 0;

	memset(big, 'a', n);
	big[0] = '"';
	/* the server may close before taking it all */
	for (size_t off = 0; off < n;) {
		ssize_t w = send(fd, big + off, n - off, MSG_NOSIGNAL);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	for (;;) {
		ssize_t r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	buf[got] = '\0';
	assert_non_null(strstr(buf, "-32600"));
	assert_non_null(strstr(buf, "longer than"));
	close(fd);
	free(big);
}

static void server__pipelined_requests_in_order(void **state)
{
	struct srv_t *s = *state;
	int fd = raw_connect(s->path);
	const char *req = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"job_list\"}\n"
			  "\n"
			  "garbage\n"
			  "{\"jsonrpc\":\"2.0\",\"method\":\"job_list\"}\n"
			  "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"box_endpoints\"}\n";
	char buf[8192];
	size_t got = 0;

	assert_int_equal(send(fd, req, strlen(req), 0), (ssize_t)strlen(req));
	shutdown(fd, SHUT_WR);
	for (;;) {
		ssize_t r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	buf[got] = '\0';
	/* three replies: id 1, parse error (id null), id 3; none for the notification */
	char *l1 = buf, *l2 = strchr(l1, '\n') + 1, *l3 = strchr(l2, '\n') + 1;
	assert_non_null(strstr(l1, "\"id\":1"));
	assert_non_null(strstr(l2, "-32700"));
	assert_non_null(strstr(l3, "\"id\":3"));
	assert_string_equal(strchr(l3, '\n'), "\n");
	close(fd);
}

/* Read fd until EOF (or a reset: the server closed with requests of
 * ours unread) or until no byte came for wait_ms: bytes read, or -1 if
 * the connection stayed open. */
static long read_to_eof(int fd, int wait_ms, char *keep, size_t keep_len)
{
	char buf[65536];
	long got = 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, wait_ms) <= 0)
			return -1;
		ssize_t r = recv(fd, buf, sizeof(buf), 0);
		if (r < 0 && errno == ECONNRESET)
			return got;
		if (r <= 0)
			return r == 0 ? got : -1;
		if (keep && (size_t)got < keep_len - 1) {
			size_t n = (size_t)r < keep_len - 1 - (size_t)got ? (size_t)r :
				   keep_len - 1 - (size_t)got;
			memcpy(keep + got, buf, n);
			keep[got + (long)n] = '\0';
		}
		got += r;
	}
}

/* A client pipelining requests whose reads each end inside the next line
 * is not a slow one: every line completes at once, so the request
 * timeout (300 ms here) never fires over 1.5 s of it. */
static void server__split_pipelined_lines_are_not_slow(void **state)
{
	struct srv_t *s = *state;
	char out[16384];
	int fd;

	char all[4096];
	size_t mid[31], len = 0;

	for (int i = 1; i <= 30; i++) {   /* 30 lines; mid[i]: the middle of line i */
		int n = snprintf(all + len, sizeof(all) - len, "{\"jsonrpc\":\"2.0\",\"id\":%d,"
				 "\"method\":\"job_list\"}\n", i);
		mid[i] = len + (size_t)n / 2;
		len += (size_t)n;
	}
	s->f->box.cfg.request_timeout_ms = 300;
	fd = raw_connect(s->path);
	/* each send ends in the middle of a line, 50 ms apart */
	for (int i = 1; i <= 31; i++) {
		size_t from = i == 1 ? 0 : mid[i - 1], to = i == 31 ? len : mid[i];
		assert_int_equal(send(fd, all + from, to - from, MSG_NOSIGNAL), (ssize_t)(to - from));
		usleep(50000);
	}
	shutdown(fd, SHUT_WR);
	assert_true(read_to_eof(fd, 3000, out, sizeof(out)) > 0);
	assert_null(strstr(out, "not complete within"));
	assert_non_null(strstr(out, "\"id\":30"));
	close(fd);
}

/* A client that pipelines requests and never reads the replies is closed
 * once its replies have not moved for --idle-timeout-ms (it holds no
 * rank), not kept throttled for ever. */
static void server__replies_never_read_close_the_connection(void **state)
{
	struct srv_t *s = *state;
	const char *req = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"box_status\"}\n";
	size_t len = strlen(req);

	s->f->box.cfg.idle_timeout_ms = 500;
	s->f->box.cfg.conn_reply_bytes = 64 << 10;
	int fd = raw_connect(s->path);
	for (int i = 0; i < 20000; i++)
		if (send(fd, req, len, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)len)
			break;
	usleep(2500000);   /* idle timeout, then the once-a-second sweep */
	/* closed already, while we read nothing (an open one: EAGAIN) */
	assert_int_equal(send(fd, req, len, MSG_NOSIGNAL | MSG_DONTWAIT), -1);
	assert_true(errno == EPIPE || errno == ECONNRESET);
	assert_true(read_to_eof(fd, 3000, NULL, 0) >= 0);
	close(fd);
}

static void server__refuses_live_socket_replaces_stale(void **state)
{
	struct srv_t *s = *state;
	struct fixture *f2 = fixture_new(1, 1);
	struct rpc_server *srv2;
	char err[256];

	snprintf(f2->box.cfg.rpc_socket, sizeof(f2->box.cfg.rpc_socket), "%s", s->path);
	f2->box.cfg.control[0] = '\0';
	assert_int_equal(rpc_server_open(&srv2, &f2->box, err, sizeof(err)), -EADDRINUSE);
	assert_non_null(strstr(err, s->path));

	/* a stale socket file (nobody listening) is replaced */
	char stale[80];
	snprintf(stale, sizeof(stale), "%s/stale.sock", s->dir);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", stale);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	snprintf(f2->box.cfg.rpc_socket, sizeof(f2->box.cfg.rpc_socket), "%s", stale);
	assert_int_equal(rpc_server_open(&srv2, &f2->box, err, sizeof(err)), 0);
	rpc_server_close(srv2);
	fixture_free(f2);
}

/* A TCP connection to addr:port (IPv4 or IPv6 text), or -1. */
static int tcp_to(const char *addr, unsigned port)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len;

	if (strchr(addr, ':')) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		inet_pton(AF_INET6, addr, &a->sin6_addr);
		len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		inet_pton(AF_INET, addr, &a->sin_addr);
		len = sizeof(*a);
	}
	int fd = socket(ss.ss_family, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&ss, len) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	struct timeval tv = { .tv_sec = 0, .tv_usec = 300000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* 1 if the box closed fd (refused it at accept), 0 if it still holds it. */
static int closed_by_box(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, 0);
	return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* Peer addresses: IPv4 and IPv4 on a dual-stack listener are one peer;
 * an IPv6 client is its /64. */
static void peers__addresses(void **state)
{
	struct sockaddr_in v4 = { .sin_family = AF_INET };
	struct sockaddr_in6 m = { .sin6_family = AF_INET6 }, a = m, b = m, c = m;
	char buf[64];

	(void)state;
	inet_pton(AF_INET, "10.1.2.3", &v4.sin_addr);
	inet_pton(AF_INET6, "::ffff:10.1.2.3", &m.sin6_addr);
	inet_pton(AF_INET6, "2001:db8:1:2::5", &a.sin6_addr);
	inet_pton(AF_INET6, "2001:db8:1:2:aaaa:bbbb:cccc:dddd", &b.sin6_addr);
	inet_pton(AF_INET6, "2001:db8:1:3::5", &c.sin6_addr);
	struct peer_addr p4 = peer_addr_of((struct sockaddr *)&v4);
	struct peer_addr pm = peer_addr_of((struct sockaddr *)&m);
	struct peer_addr pa = peer_addr_of((struct sockaddr *)&a);
	struct peer_addr pb = peer_addr_of((struct sockaddr *)&b);
	struct peer_addr pc = peer_addr_of((struct sockaddr *)&c);
	assert_memory_equal(&p4, &pm, sizeof(p4));
	assert_memory_equal(&pa, &pb, sizeof(pa));
	assert_memory_not_equal(&pa, &pc, sizeof(pa));
	assert_string_equal(peer_addr_str(&p4, buf, sizeof(buf)), "10.1.2.3");
	assert_string_equal(peer_addr_str(&pb, buf, sizeof(buf)), "2001:db8:1:2::/64");
	assert_false(peer_addr_is_none(&p4));
	struct peer_addr none = { { 0 } };
	assert_true(peer_addr_is_none(&none));
}

/* On a dual-stack listener ([::]) the per-peer cap is per address: an IPv6
 * client at its cap does not lock out an IPv4 one (every peer was one
 * address, 0, before). */
static void server__ipv6_listener_caps_each_peer(void **state)
{
	struct srv_t *s = *state;
	unsigned port = rpc_server_tcp_port(s->srv);
	int v6[3], v4;

	s->f->box.cfg.max_conns_per_peer = 2;
	s->f->box.cfg.conn_rate_per_peer = 0;
	for (int i = 0; i < 2; i++) {
		v6[i] = tcp_to("::1", port);
		if (v6[i] < 0)
			skip();   /* no IPv6 loopback here */
		assert_false(closed_by_box(v6[i]));
	}
	v6[2] = tcp_to("::1", port);
	assert_true(v6[2] >= 0);
	assert_true(closed_by_box(v6[2]));   /* ::1 is at its cap */
	v4 = tcp_to("127.0.0.1", port);
	assert_true(v4 >= 0);
	assert_false(closed_by_box(v4));     /* another peer: served */
	for (int i = 0; i < 3; i++)
		close(v6[i]);
	close(v4);
}

/* Without an operator secret, TCP operators may read but not create or
 * abort jobs; the Unix socket may do both. */
static void authorize__tcp_without_secret(void **state)
{
	struct t *t = *state;

	json_decref(result_of(t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"job_join\",\"params\":"
			      "{\"job\":\"a\",\"rank\":0,\"world\":2,\"data_ip\":\"10.0.0.1\",\"data_port\":40000}}"));
	t->ctx.remote = 1;
	t->ctx.peer = "10.0.0.9:5555";
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"job_abort\",\"params\":{\"job\":\"a\"}}",
		    -EACCES, "job_abort over TCP is refused: this box has no operator secret");
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"job_create\",\"params\":"
		    "{\"job\":\"c\",\"world\":2}}", -EACCES, "job_create over TCP is refused");
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"job_create\",\"params\":"
		    "{\"job\":\"c\",\"world\":2,\"secret\":\"anything-at-all!\"}}", -EACCES, "no operator secret");
	json_t *r = result_of(t, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"job_status\",\"params\":{\"job\":\"a\"}}");
	assert_string_equal(json_string_value(json_object_get(r, "state")), "forming");
	json_decref(r);
	t->ctx.remote = 0;
	json_decref(result_of(t, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"job_abort\",\"params\":{\"job\":\"a\"}}"));
	jobs_session_closed(t->f->box.jobs, (void *)1);
	jobs_tick(t->f->box.jobs);
}

/* Every refused operator call over TCP is logged with its peer, not only
 * a wrong secret (docs/operations.md: "logs every refused remote call"):
 * a write on a box without a secret and a missing secret were refused in
 * silence. */
struct refusals {
	int lines;
	char last[512];
};

static void refusal_write(void *ctx, int prio, const char *msg)
{
	struct refusals *r = ctx;

	if (prio == LOG_PRIO_WARNING && strstr(msg, "refused")) {
		r->lines++;
		snprintf(r->last, sizeof(r->last), "%s", msg);
	}
}

static void authorize__every_refusal_is_logged_with_its_peer(void **state)
{
	struct t *t = *state;
	struct box_config *cfg = &t->f->box.cfg;
	struct refusals seen = { 0 };
	struct box_log_sink saved = t->f->box.log;
	int saved_level = cfg->log_level;

	t->f->box.log = (struct box_log_sink){ .write = refusal_write, .ctx = &seen };
	cfg->log_level = LOG_PRIO_WARNING;
	t->ctx.remote = 1;
	t->ctx.peer = "10.0.0.9:5555";
	/* no operator secret on the box: a write method */
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"job_abort\",\"params\":{\"job\":\"a\"}}",
		    -EACCES, "no operator secret");
	assert_int_equal(seen.lines, 1);
	assert_non_null(strstr(seen.last, "refused a call from 10.0.0.9:5555: job_abort over TCP"));
	assert_non_null(strstr(seen.last, "no operator secret"));
	/* a secret on the box: missing, of the wrong type, wrong */
	snprintf(cfg->operator_secret, sizeof(cfg->operator_secret), "0123456789abcdef-secret");
	cfg->operator_secret_len = (uint32_t)strlen(cfg->operator_secret);
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"job_list\"}", -EACCES,
		    "needs the operator secret");
	assert_int_equal(seen.lines, 2);
	assert_non_null(strstr(seen.last, "refused a call from 10.0.0.9:5555: job_list over TCP needs"));
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"job_abort\",\"params\":"
		    "{\"job\":\"a\",\"secret\":7}}", RPC_INVALID_PARAMS, "secret");
	assert_int_equal(seen.lines, 3);
	expect_code(t, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"job_abort\",\"params\":"
		    "{\"job\":\"a\",\"secret\":\"0123456789abcdef-secreT\"}}", -EACCES,
		    "wrong operator secret");
	assert_int_equal(seen.lines, 4);
	assert_non_null(strstr(seen.last, "wrong operator secret"));
	/* the Unix socket is never refused, and nothing is logged for it */
	t->ctx.remote = 0;
	json_decref(result_of(t, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"job_list\"}"));
	assert_int_equal(seen.lines, 4);
	t->f->box.log = saved;
	cfg->log_level = saved_level;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(hostile__framing_and_envelope, setup, teardown),
		cmocka_unit_test_setup_teardown(hostile__params, setup, teardown),
		cmocka_unit_test_setup_teardown(notification__no_reply_but_runs, setup, teardown),
		cmocka_unit_test_setup_teardown(id__echoed, setup, teardown),
		cmocka_unit_test_setup_teardown(flow__join_declare_status, setup, teardown),
		cmocka_unit_test_setup_teardown(abort__operator_secret_over_tcp, setup, teardown),
		cmocka_unit_test_setup_teardown(authorize__tcp_without_secret, setup, teardown),
		cmocka_unit_test_setup_teardown(authorize__every_refusal_is_logged_with_its_peer, setup, teardown),
		cmocka_unit_test_setup_teardown(box__status_stats_endpoints, setup, teardown),
		cmocka_unit_test_setup_teardown(server__calls_and_errors, srv_setup, srv_teardown),
		cmocka_unit_test_setup_teardown(server__closed_session_aborts_job_and_notifies, srv_setup, srv_teardown),
		cmocka_unit_test_setup_teardown(server__leave_then_close_is_clean, srv_setup, srv_teardown),
		cmocka_unit_test_setup_teardown(server__long_line_is_32600_and_close, srv_setup, srv_teardown),
		cmocka_unit_test_setup_teardown(server__pipelined_requests_in_order, srv_setup, srv_teardown),
		cmocka_unit_test_setup_teardown(server__split_pipelined_lines_are_not_slow, srv_setup, srv_teardown),
		cmocka_unit_test_setup_teardown(server__replies_never_read_close_the_connection, srv_setup, srv_teardown),
		cmocka_unit_test_setup_teardown(server__refuses_live_socket_replaces_stale, srv_setup, srv_teardown),
		cmocka_unit_test_setup_teardown(server__ipv6_listener_caps_each_peer, srv6_setup,
						srv_teardown),
		cmocka_unit_test(peers__addresses),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
