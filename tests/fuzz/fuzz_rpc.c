/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_rpc.c - the JSON-RPC request decoder and every method handler
 * (control/rpc.c, *_rpc.c, jobs*.c, assign.c) on arbitrary bytes, against
 * the unit tests' fixture box (tests/unit/box_fixture.h: 2 ports x 2
 * lcores of real engines, counted memory hooks).
 *
 * The input is split at '\n' into request lines, each handed to
 * rpc_handle_line as pboxd's server would (a single-line input is exactly
 * one request). Lines starting with '!' are fixture directives instead,
 * so the fuzzer can reach the box's failure paths and session handling:
 *   !s N     the next requests come from session N (1-3; default 1)
 *   !close N session N's connection closes (jobs_session_closed)
 *   !tick    jobs_tick (removals, stall watch)
 *   !full N  the next N posts to lcores answer -EAGAIN
 *   !nomem   toggle mem_alloc failure
 *   !defer   toggle deferred apply (posts queue until !drain or the end)
 *   !drain   apply queued posts
 *   !nosecret  toggle the box's operator secret (present at the start)
 *
 * Every input starts from a fresh registry and fresh engines and ends with
 * jobs_close, so no state leaks between inputs and crashes reproduce from
 * their file alone. Checked: every request with an id gets one reply, a
 * JSON-RPC 2.0 object with exactly one of result/error, which serializes
 * to one line; the engines never reject a message the registry posted;
 * after jobs_close every arena and table the fixture handed out was freed.
 * Authorization (docs/reliability.md "Who may call what"): an operator
 * method succeeds over TCP (odd sessions) only with the box's secret, and
 * an operator write never without one; a key_declare, job_leave, key_read
 * or key_write succeeds only on the session that joined that rank (a
 * key_write only for rank 0); no reply carries the operator
 * secret or a join secret.
 * ASan's leak check covers jansson and the registry's own malloc.
 *
 * Limits are shrunk (1 MiB default arena, 4 MiB max, 4 slots, 64 keys)
 * so a job costs little and the limits themselves are reachable.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/box_fixture.h"
#include "control/jobs.h"
#include "control/rpc.h"

#include "tests/fuzz/fuzz_check.h"

#define NSESSIONS 3
#define MAX_LINES 64

#define OPERATOR_SECRET "fuzz-operator-secret"

static struct fixture *F;
/* A secret's text was sent as data (a job name, an unknown parameter) in
 * this input: replies may then echo it. */
static int secret_as_data;
static int verbose; /* FUZZ_RPC_VERBOSE=1: print each request and reply */
static int closed[NSESSIONS + 1];

static void *session_ptr(unsigned s)
{
	return (void *)(uintptr_t)(0x1000 * s);
}

static void on_abort(void *ctx, void *session, const struct job *j,
		     const struct jobs_reset_note *reset)
{
	(void)ctx;
	uintptr_t s = (uintptr_t)session;
	CHECK(s % 0x1000 == 0 && s / 0x1000 >= 1 && s / 0x1000 <= NSESSIONS);
	CHECK(!closed[s / 0x1000]);
	/* an abort, or a reset of a job that took a lost rank's replacement */
	CHECK(j && (reset ? j->state != JOB_ABORTED && reset->reason : j->state == JOB_ABORTED));
}

static void reset(void)
{
	struct fixture *f = F;

	for (unsigned l = 0; l < f->box.layout.nlcores; l++) {
		engine_init(&f->eng[l], (uint16_t)l, sum_by_name("scalar"));
		f->applied[l] = 0;
		f->qhead[l] = f->qtail[l] = 0;
		memset(&f->lstats[l], 0, sizeof(f->lstats[l]));
	}
	f->deferred = 0;
	f->full_posts = 0;
	f->fail_alloc = 0;
	f->apply_errors = 0;
	memset(closed, 0, sizeof(closed));
	CHECK(jobs_open(&f->box, &f->box.jobs) == 0);
	jobs_set_notify(f->box.jobs, on_abort, NULL);
}

static void check_reply(json_t *r, int notification)
{
	if (notification) {
		CHECK(r == NULL);
		return;
	}
	CHECK(r && json_is_object(r));
	CHECK(json_is_string(json_object_get(r, "jsonrpc")) &&
	      strcmp(json_string_value(json_object_get(r, "jsonrpc")), "2.0") == 0);
	json_t *res = json_object_get(r, "result"), *e = json_object_get(r, "error");
	CHECK(!res != !e);
	if (e) {
		CHECK(json_is_integer(json_object_get(e, "code")));
		CHECK(json_is_string(json_object_get(e, "message")));
		CHECK(strlen(json_string_value(json_object_get(e, "message"))) < RPC_ERR_MAX);
	}
	char *s = json_dumps(r, JSON_COMPACT);
	CHECK(s && !strchr(s, '\n'));
	if (verbose)
		fprintf(stderr, "<- %s\n", s);
	free(s);
}

/* Could this line be a notification (an object without "id")? Only then
 * may rpc_handle_line answer NULL. Decided independently of rpc.c. */
static int maybe_notification(const char *line, size_t len)
{
	json_error_t je;
	json_t *v = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);

	if (!v)
		v = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY |
				       JSON_DECODE_INT_AS_REAL, &je);
	int n = v && json_is_object(v) && !json_object_get(v, "id");
	json_decref(v);
	return n;
}

static unsigned arg(const char *p, size_t n, unsigned dflt)
{
	unsigned v = 0;
	int any = 0;
	for (size_t i = 0; i < n && i < 6; i++) {
		if (p[i] >= '0' && p[i] <= '9') {
			v = v * 10 + (unsigned)(p[i] - '0');
			any = 1;
		} else if (any) {
			break;
		}
	}
	return any ? v : dflt;
}

static void set_secret(int on)
{
	snprintf(F->box.cfg.operator_secret, sizeof(F->box.cfg.operator_secret), "%s",
		 on ? OPERATOR_SECRET : "");
	F->box.cfg.operator_secret_len = on ? (uint32_t)strlen(OPERATOR_SECRET) : 0;
}

static void directive(const char *p, size_t n, unsigned *session)
{
#define IS(w) (n >= sizeof(w) - 1 && memcmp(p, w, sizeof(w) - 1) == 0)
	if (IS("!s ")) {
		unsigned s = arg(p + 3, n - 3, 1);
		if (s >= 1 && s <= NSESSIONS)
			*session = s;
	} else if (IS("!close")) {
		unsigned s = arg(p + 6, n - 6, *session);
		if (s >= 1 && s <= NSESSIONS && !closed[s]) {
			jobs_session_closed(F->box.jobs, session_ptr(s));
			closed[s] = 1;
		}
	} else if (IS("!tick")) {
		jobs_tick(F->box.jobs);
	} else if (IS("!full")) {
		F->full_posts = arg(p + 5, n - 5, 1) % 64;
	} else if (IS("!nomem")) {
		F->fail_alloc = !F->fail_alloc;
	} else if (IS("!defer")) {
		if (F->deferred)
			fixture_drain(F);
		F->deferred = !F->deferred;
	} else if (IS("!drain")) {
		fixture_drain(F);
	} else if (IS("!nosecret")) {
		set_secret(F->box.cfg.operator_secret_len == 0);
	}
#undef IS
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	verbose = getenv("FUZZ_RPC_VERBOSE") != NULL;
	F = fixture_new(2, 2);
	CHECK(F);
	F->box.cfg.default_job_bytes = 1u << 20;
	F->box.cfg.max_job_bytes = 4u << 20;
	F->box.cfg.slots_per_lcore = 4;
	F->box.cfg.max_keys = 64;
	/* odd sessions are remote (TCP): their job_abort needs this secret */
	return 0;
}

/* What a request line asks, read independently of rpc.c. */
struct ask {
	json_t *req;                 /* owned */
	const char *method;          /* NULL if none */
	json_t *params;              /* borrowed, may be NULL */
	int op_read, op_write;       /* an operator method */
	const struct job *job;       /* key_declare / job_leave: job_id's job */
	uint32_t rank;
	void *rank_session;          /* that rank's session before the call */
};

/* The methods only the session that joined the rank may call. */
static int per_rank(const char *method)
{
	return !strcmp(method, "key_declare") || !strcmp(method, "job_leave") ||
	       !strcmp(method, "key_release") ||
	       !strcmp(method, "key_read") || !strcmp(method, "key_write");
}

static void ask_read(struct ask *a, const char *line, size_t len)
{
	static const char *const reads[] = { "job_list", "job_status", "box_status", "box_stats", NULL };
	static const char *const writes[] = { "job_create", "job_abort", "job_save", NULL };
	json_error_t je;

	memset(a, 0, sizeof(*a));
	a->req = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
	if (!json_is_object(a->req)) {   /* an error message may quote the line */
		secret_as_data |= memmem(line, len, OPERATOR_SECRET, strlen(OPERATOR_SECRET)) ||
				  memmem(line, len, "fuzz-join-secret", 16);
		return;
	}
	a->method = json_string_value(json_object_get(a->req, "method"));
	a->params = json_object_get(a->req, "params");
	json_t *copy = json_deep_copy(a->req);
	json_t *cp = json_object_get(copy, "params");
	if (json_is_object(cp)) {
		json_object_del(cp, "secret");
		json_object_del(cp, "join_secret");
	}
	char *rest = json_dumps(copy, JSON_COMPACT);
	secret_as_data |= !rest || strstr(rest, OPERATOR_SECRET) || strstr(rest, "fuzz-join-secret");
	free(rest);
	json_decref(copy);
	if (!a->method)
		return;
	for (unsigned i = 0; reads[i]; i++)
		a->op_read |= strcmp(a->method, reads[i]) == 0;
	for (unsigned i = 0; writes[i]; i++)
		a->op_write |= strcmp(a->method, writes[i]) == 0;
	if (per_rank(a->method) && json_is_object(a->params)) {
		json_t *id = json_object_get(a->params, "job_id"), *r = json_object_get(a->params, "rank");
		if (json_is_integer(id) && json_is_integer(r) && json_integer_value(id) >= 0 &&
		    json_integer_value(id) <= UINT32_MAX) {
			a->job = jobs_find_id(F->box.jobs, (uint32_t)json_integer_value(id));
			a->rank = (uint32_t)json_integer_value(r);
			if (a->job && a->rank < a->job->world)
				a->rank_session = a->job->ranks[a->rank].session;
		}
	}
}

/* The authorization invariants of one answered request. */
static void ask_check(const struct ask *a, json_t *reply, void *session, int remote)
{
	char *s = reply ? json_dumps(reply, JSON_COMPACT) : NULL;

	CHECK(!s || secret_as_data || !strstr(s, OPERATOR_SECRET));
	CHECK(!s || secret_as_data || !strstr(s, "fuzz-join-secret"));
	free(s);
	if (!reply || !a->method || !json_object_get(reply, "result"))
		return;
	if (remote && (a->op_read || a->op_write) && F->box.cfg.operator_secret_len) {
		const char *given = json_string_value(json_object_get(a->params, "secret"));
		CHECK(given && strcmp(given, OPERATOR_SECRET) == 0);
	}
	if (remote && a->op_write)
		CHECK(F->box.cfg.operator_secret_len);
	if (a->job && per_rank(a->method))
		CHECK(a->rank_session == session);
	if (a->job && !strcmp(a->method, "key_write"))
		CHECK(a->rank == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned session = 1, lines = 0;
	const char *p = (const char *)data, *end = p + size;

	reset();
	set_secret(1);
	secret_as_data = 0;
	do {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = (size_t)((nl ? nl : end) - p);
		/* an exact-size copy: rpc_handle_line must not read past len */
		char *line = malloc(len ? len : 1);
		memcpy(line, p, len);
		if (verbose)
			fprintf(stderr, "-> %.*s\n", (int)len, line);
		if (len && line[0] == '!') {
			directive(line, len, &session);
		} else if (!closed[session]) {   /* a closed connection sends nothing */
			struct rpc_ctx ctx = { .box = &F->box, .session = session_ptr(session),
					       .remote = (int)(session & 1), .peer = "fuzz" };
			struct ask a;
			ask_read(&a, line, len);
			json_t *r = rpc_handle_line(&ctx, line, len);
			if (r == NULL)
				CHECK(maybe_notification(line, len));
			else
				check_reply(r, 0);
			ask_check(&a, r, ctx.session, ctx.remote);
			json_decref(a.req);
			json_decref(r);
		}
		free(line);
		p = nl ? nl + 1 : end;
	} while (p < end && ++lines < MAX_LINES);

	fixture_drain(F);
	jobs_tick(F->box.jobs);
	CHECK(F->apply_errors == 0);
	jobs_close(F->box.jobs);
	F->box.jobs = NULL;
	CHECK(F->allocs == F->frees);
	CHECK(F->live_bytes == 0);
	return 0;
}
