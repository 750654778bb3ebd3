/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_api.c - libpbox's public API at its edges: argument errors,
 * a missing control address, connecting to a closed port (PBOX_ECONNECT
 * within its bound), a rejected join, EBUSY, and pbox_strerror for every
 * code. Where a connected client is needed it talks to an in-process box
 * made of pboxd's own control plane and engines (box_inproc.h).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tests/unit/box_inproc.h"
#include "include/pbox.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A TCP socket bound to 127.0.0.1:*port, not listening: connecting to it
 * is refused. */
static int bound_port(uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

static void strerror__every_code_named(void **state)
{
	const int codes[] = { PBOX_OK, PBOX_EINVAL, PBOX_ENOMEM, PBOX_ECONNECT, PBOX_EPROTO,
			      PBOX_EREJECTED, PBOX_ETIMEDOUT, PBOX_EABORTED, PBOX_EBUSY,
			      PBOX_ECLOSED, PBOX_ESYS };
	const char *unknown = pbox_strerror(-999);

	(void)state;
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		const char *s = pbox_strerror(codes[i]);
		assert_non_null(s);
		assert_true(strlen(s) > 3);
		assert_string_not_equal(s, unknown);
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(s, pbox_strerror(codes[j]));
	}
	assert_string_equal(pbox_strerror(1), unknown);
}

static void opts_init__defaults(void **state)
{
	pbox_opts o;

	(void)state;
	pbox_opts_init(&o);
	assert_int_equal(o.timeout_ms, 1800000);
	assert_int_equal(o.rto_ms, 20);
	assert_int_equal(o.window, 128);
	assert_int_equal(o.mtu, 0);   /* automatic: pmtu.c */
}

static void connect__no_control_address(void **state)
{
	pbox_client *c = NULL;

	(void)state;
	unsetenv("PBOX_CONTROL");
	assert_int_equal(pbox_connect(NULL, "job", 0, 1, NULL, &c), PBOX_EINVAL);
	assert_non_null(c);
	assert_string_equal(pbox_last_error(c),
			    "no control address: pass one or set PBOX_CONTROL");
	pbox_close(c);
}

static void connect__bad_arguments(void **state)
{
	pbox_client *c = NULL;
	pbox_opts o;

	(void)state;
	assert_int_equal(pbox_connect("127.0.0.1:1", "job", 0, 1, NULL, NULL), PBOX_EINVAL);
	assert_int_equal(pbox_connect("127.0.0.1:1", "bad name!", 0, 1, NULL, &c), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "bad name!"));
	pbox_close(c);
	assert_int_equal(pbox_connect("127.0.0.1:1", "job", 4, 4, NULL, &c), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "rank 4 of world 4"));
	pbox_close(c);
	assert_int_equal(pbox_connect("no-port-here", "job", 0, 1, NULL, &c), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "host:port"));
	pbox_close(c);
	pbox_opts_init(&o);
	o.mtu = 100;
	assert_int_equal(pbox_connect("127.0.0.1:1", "job", 0, 1, &o, &c), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "mtu 100"));
	pbox_close(c);
	/* a timeout beyond an int's milliseconds wrapped the control calls'
	 * deadlines (they failed at once): refused by name */
	pbox_opts_init(&o);
	o.timeout_ms = UINT32_MAX;
	assert_int_equal(pbox_connect("127.0.0.1:1", "job", 0, 1, &o, &c), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "timeout_ms 4294967295 exceeds 2147483647"));
	pbox_close(c);
}

static void connect__closed_port_fails_fast(void **state)
{
	uint16_t port;
	int fd = bound_port(&port);
	char addr[64];
	pbox_client *c = NULL;

	(void)state;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	double t0 = now_s();
	assert_int_equal(pbox_connect(addr, "job", 0, 1, NULL, &c), PBOX_ECONNECT);
	assert_true(now_s() - t0 < 1.0);
	assert_non_null(strstr(pbox_last_error(c), addr));
	assert_non_null(strstr(pbox_last_error(c), "refused"));
	pbox_close(c);
	close(fd);
}

static void connect__env_address_used(void **state)
{
	uint16_t port;
	int fd = bound_port(&port);
	char addr[64];
	pbox_client *c = NULL;

	(void)state;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	setenv("PBOX_CONTROL", addr, 1);
	assert_int_equal(pbox_connect(NULL, "job", 0, 1, NULL, &c), PBOX_ECONNECT);
	assert_non_null(strstr(pbox_last_error(c), addr));
	unsetenv("PBOX_CONTROL");
	pbox_close(c);
	close(fd);
}

static void connect__unanswered_address_bounded(void **state)
{
	pbox_client *c = NULL;
	pbox_opts o;

	(void)state;
	pbox_opts_init(&o);
	o.timeout_ms = 300;
	/* TEST-NET-1: never answers (or is unreachable at once) */
	double t0 = now_s();
	assert_int_equal(pbox_connect("192.0.2.1:7470", "job", 0, 1, &o, &c), PBOX_ECONNECT);
	assert_true(now_s() - t0 < 2.0);
	assert_non_null(strstr(pbox_last_error(c), "192.0.2.1:7470"));
	pbox_close(c);
}

static void calls__on_unconnected_client(void **state)
{
	pbox_client *c = NULL;
	float x[4] = { 0 }, out[4];
	pbox_req *r;

	(void)state;
	unsetenv("PBOX_CONTROL");
	assert_int_equal(pbox_connect(NULL, "job", 0, 1, NULL, &c), PBOX_EINVAL);
	assert_int_equal(pbox_allreduce(c, 1, NULL, 4, PBOX_F32), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "buf is NULL"));
	assert_int_equal(pbox_allreduce(c, 1, x, 0, PBOX_F32), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "count is 0"));
	assert_int_equal(pbox_allreduce(c, 1, x, 4, (pbox_dtype)7), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "dtype 7"));
	assert_int_equal(pbox_allreduce(c, 1, x, 4, PBOX_F32), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "not connected"));
	assert_int_equal(pbox_iallreduce(c, 1, x, 4, PBOX_F32, NULL), PBOX_EINVAL);
	/* the collectives that read the job's world (none: check_args failed
	 * before setting it) say so first, not a root out of range or an
	 * overflow (a division by the world: UBSan) */
	assert_int_equal(pbox_allgather(c, 1, x, out, 4, PBOX_F32), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "not connected"));
	assert_int_equal(pbox_reduce_scatter(c, 1, x, out, 4, PBOX_F32), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "not connected"));
	assert_int_equal(pbox_broadcast(c, 1, x, 4, PBOX_F32, 0), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "not connected"));
	assert_int_equal(pbox_allreduce(NULL, 1, x, 4, PBOX_F32), PBOX_EINVAL);
	assert_int_equal(pbox_iallreduce(NULL, 1, x, 4, PBOX_F32, &r), PBOX_EINVAL);
	assert_int_equal(pbox_wait(NULL), PBOX_EINVAL);
	assert_non_null(pbox_last_error(NULL));
	pbox_close(c);
	pbox_close(NULL);
}

static int setup_box(void **state)
{
	struct box_inproc *b = box_inproc_new(2);

	box_inproc_start(b);
	*state = b;
	return 0;
}

/* Every client has closed: the box removed the job and freed its memory. */
static int teardown_box(void **state)
{
	struct box_inproc *b = *state;

	assert_true(box_inproc_idle(b, 2000));
	box_inproc_stop(b);
	assert_int_equal(b->f->apply_errors, 0);
	box_inproc_free(b);
	return 0;
}

static void calls__argument_errors_when_connected(void **state)
{
	struct box_inproc *b = *state;
	pbox_client *c;
	float x[4] = { 1, 2, 3, 4 };

	assert_int_equal(pbox_connect(b->addr, "api", 0, 1, NULL, &c), 0);
	assert_int_equal(pbox_allreduce(c, 1, NULL, 4, PBOX_F32), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "job 'api' rank 0 key 1: buf is NULL"));
	assert_int_equal(pbox_allreduce(c, 1, x, 0, PBOX_F32), PBOX_EINVAL);
	assert_int_equal(pbox_allreduce(c, 1, x, 4, (pbox_dtype)3), PBOX_EINVAL);
	assert_int_equal(pbox_allreduce(c, 1, x, SIZE_MAX / 2, PBOX_F32), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "overflows"));
	assert_int_equal(pbox_allreduce(c, 1, x, 4, PBOX_F32), 0);
	assert_true(x[0] == 1 && x[3] == 4); /* world 1: the sum is the input */
	pbox_close(c);
}

struct other_fail {
	pbox_client *c;
	int rc;
};

/* Another thread's call on the same client fails (key 8). */
static void *fail_on_key_8(void *arg)
{
	struct other_fail *o = arg;
	float x[4];

	o->rc = pbox_allreduce(o->c, 8, x, 0, PBOX_F32);
	if (!strstr(pbox_last_error(o->c), "key 8: count is 0"))
		o->rc = 1;
	return NULL;
}

/* Threads sharing a client each read their own last failure: another
 * thread failing between a call and pbox_last_error does not replace it
 * (with one message per client, the Python package's waiters raised
 * errors naming other keys). A thread that had no failure on the client
 * reads the client's latest. */
static void last_error__each_thread_reads_its_own(void **state)
{
	struct box_inproc *b = *state;
	pbox_client *c, *c2;
	float x[4] = { 0 };
	pthread_t t;

	assert_int_equal(pbox_connect(b->addr, "lasterr", 0, 1, NULL, &c), 0);
	assert_int_equal(pbox_connect(b->addr, "lasterr2", 0, 1, NULL, &c2), 0);
	assert_int_equal(pbox_allreduce(c, 3, NULL, 4, PBOX_F32), PBOX_EINVAL);
	struct other_fail o = { .c = c };
	assert_int_equal(pthread_create(&t, NULL, fail_on_key_8, &o), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(o.rc, PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "key 3: buf is NULL"));
	/* c2: this thread has not failed on it; another thread does */
	o.c = c2;
	assert_int_equal(pthread_create(&t, NULL, fail_on_key_8, &o), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_non_null(strstr(pbox_last_error(c2), "job 'lasterr2' rank 0 key 8"));
	/* a failure on c2 in this thread, then c's message is c's latest */
	assert_int_equal(pbox_allreduce(c2, 5, NULL, 4, PBOX_F32), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c2), "key 5: buf is NULL"));
	assert_non_null(strstr(pbox_last_error(c), "job 'lasterr' rank 0 key 8"));
	assert_int_equal(pbox_allreduce(c, 1, x, 4, PBOX_F32), 0);
	pbox_close(c2);
	pbox_close(c);
}

static void iallreduce__busy_key(void **state)
{
	struct box_inproc *b = *state;
	pbox_client *c;
	float x[1000], y[10];
	pbox_req *r1, *r2;

	for (int i = 0; i < 1000; i++)
		x[i] = (float)i;
	assert_int_equal(pbox_connect(b->addr, "busy", 0, 1, NULL, &c), 0);
	assert_int_equal(pbox_iallreduce(c, 9, x, 1000, PBOX_F32, &r1), 0);
	assert_int_equal(pbox_iallreduce(c, 9, y, 10, PBOX_F32, &r2), PBOX_EBUSY);
	assert_null(r2);
	assert_non_null(strstr(pbox_last_error(c), "key 9"));
	assert_int_equal(pbox_wait(r1), 0);
	assert_true(x[999] == 999);
	assert_int_equal(pbox_iallreduce(c, 9, x, 1000, PBOX_F32, &r2), 0);
	while (!pbox_test(r2))
		usleep(100);
	assert_int_equal(pbox_wait(r2), 0);
	pbox_close(c);
}

/* Rank 0 made job x with world 8; rank 1 joining with world 4 is refused
 * by the box's registry, and its message reaches the user whole. */
static void connect__join_rejected_keeps_box_message(void **state)
{
	struct box_inproc *b = *state;
	pbox_client *c0, *c1;

	assert_int_equal(pbox_connect(b->addr, "x", 0, 8, NULL, &c0), 0);
	assert_int_equal(pbox_connect(b->addr, "x", 1, 4, NULL, &c1), PBOX_EREJECTED);
	assert_string_equal(pbox_last_error(c1), "job_join: job x has world 8, rank 1 joined "
			    "with world 4");
	pbox_close(c1);
	pbox_close(c0);
}

/* The join secret travels as a JSON string. Bytes that are not UTF-8
 * could not (json_string refused them, and the join went without the
 * secret: the job was created open, and a worker without it got in); one
 * over 256 bytes the box refused as invalid params (PBOX_EPROTO, "the box
 * answered something unexpected"). Both are the caller's PBOX_EINVAL,
 * before anything is sent. */
static void connect__join_secret_checked(void **state)
{
	struct box_inproc *b = *state;
	pbox_client *c = NULL, *c1 = NULL;
	pbox_opts o;
	char longs[300];

	unsetenv("PBOX_JOIN_SECRET");
	pbox_opts_init(&o);
	o.join_secret = "s\xff\xfe-not-utf8";
	int rc = pbox_connect(b->addr, "sec", 0, 2, &o, &c);
	if (rc == 0) {
		int rc1 = pbox_connect(b->addr, "sec", 1, 2, NULL, &c1);
		pbox_close(c1);
		pbox_close(c);
		fail_msg("a join secret that is not UTF-8 was dropped: the job was made without "
			 "one, and a join without a secret gave %d", rc1);
	}
	assert_int_equal(rc, PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "pbox_opts.join_secret is not UTF-8"));
	pbox_close(c);
	setenv("PBOX_JOIN_SECRET", "\xc3(", 1);
	assert_int_equal(pbox_connect(b->addr, "sec", 0, 1, NULL, &c), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "PBOX_JOIN_SECRET is not UTF-8"));
	pbox_close(c);
	unsetenv("PBOX_JOIN_SECRET");
	memset(longs, 'k', sizeof(longs) - 1);
	longs[sizeof(longs) - 1] = 0;
	o.join_secret = longs;
	rc = pbox_connect(b->addr, "sec", 0, 1, &o, &c);
	if (rc != PBOX_EINVAL)
		fail_msg("a 299-byte join secret: %d (%s)", rc, pbox_last_error(c));
	assert_non_null(strstr(pbox_last_error(c), "299 bytes long: at most 256"));
	pbox_close(c);
	/* 256 bytes of UTF-8 are a secret */
	longs[256] = 0;
	assert_int_equal(pbox_connect(b->addr, "sec", 0, 1, &o, &c), 0);
	pbox_close(c);
}

/* PBOX_JOB_BYTES (pbox_opts.job_bytes 0) is a size: bytes or with a K, M,
 * G or T suffix, checked at pbox_connect. "64M" was read as 64 bytes
 * (the box refused them: PBOX_EPROTO) and "abc" as none at all. */
static void connect__job_bytes_from_the_environment(void **state)
{
	struct box_inproc *b = *state;
	static const char *const bad[] = { "abc", "64X", "0", "-1", " 64M", "64MB", "64M ",
					   "99999999999999999999", "17179869184G" };
	pbox_client *c = NULL;
	pbox_stats st;
	float x = 1;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("PBOX_JOB_BYTES", bad[i], 1);
		int rc = pbox_connect(b->addr, "envbytes", 0, 1, NULL, &c);
		if (rc != PBOX_EINVAL)
			fail_msg("PBOX_JOB_BYTES='%s': %d (%s)", bad[i], rc, pbox_last_error(c));
		assert_non_null(strstr(pbox_last_error(c), "PBOX_JOB_BYTES="));
		pbox_close(c);
	}
	setenv("PBOX_JOB_BYTES", "64M", 1);
	int rc = pbox_connect(b->addr, "envbytes", 0, 1, NULL, &c);
	if (rc != 0)
		fail_msg("PBOX_JOB_BYTES=64M: %d (%s)", rc, pbox_last_error(c));
	assert_int_equal(pbox_allreduce(c, 1, &x, 1, PBOX_F32), 0);
	pbox_get_stats(c, &st);
	assert_true(st.key_bytes > 0 && st.key_bytes <= 64u << 20);
	pbox_close(c);
	unsetenv("PBOX_JOB_BYTES");
}

/* pbox_opts.job_bytes and key_bytes are "capped by the box's
 * --max-job-bytes" (pbox.h): asking for the most there is works. Beyond
 * INT64_MAX they went as negative JSON integers, which the box refuses
 * (-32602): PBOX_EPROTO. */
static void connect__job_bytes_beyond_int64_capped(void **state)
{
	struct box_inproc *b = *state;
	pbox_client *c = NULL;
	pbox_opts o;
	pbox_stats st;
	float x = 1;

	unsetenv("PBOX_JOB_BYTES");
	pbox_opts_init(&o);
	o.job_bytes = UINT64_MAX;
	int rc = pbox_connect(b->addr, "big", 0, 1, &o, &c);
	if (rc != 0)
		fail_msg("job_bytes UINT64_MAX: %d (%s)", rc, pbox_last_error(c));
	assert_int_equal(pbox_allreduce(c, 1, &x, 1, PBOX_F32), 0);
	pbox_get_stats(c, &st);
	assert_true(st.key_bytes > 0);
	pbox_close(c);
	pbox_opts_init(&o);
	o.key_bytes = UINT64_MAX;
	rc = pbox_connect(b->addr, "big", 0, 1, &o, &c);
	if (rc != 0)
		fail_msg("key_bytes UINT64_MAX: %d (%s)", rc, pbox_last_error(c));
	pbox_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(strerror__every_code_named),
		cmocka_unit_test(opts_init__defaults),
		cmocka_unit_test(connect__no_control_address),
		cmocka_unit_test(connect__bad_arguments),
		cmocka_unit_test(connect__closed_port_fails_fast),
		cmocka_unit_test(connect__env_address_used),
		cmocka_unit_test(connect__unanswered_address_bounded),
		cmocka_unit_test(calls__on_unconnected_client),
		cmocka_unit_test_setup_teardown(calls__argument_errors_when_connected, setup_box,
						teardown_box),
		cmocka_unit_test_setup_teardown(last_error__each_thread_reads_its_own, setup_box, teardown_box),
		cmocka_unit_test_setup_teardown(iallreduce__busy_key, setup_box, teardown_box),
		cmocka_unit_test_setup_teardown(connect__join_rejected_keeps_box_message, setup_box,
						teardown_box),
		cmocka_unit_test_setup_teardown(connect__join_secret_checked, setup_box,
						teardown_box),
		cmocka_unit_test_setup_teardown(connect__job_bytes_from_the_environment, setup_box,
						teardown_box),
		cmocka_unit_test_setup_teardown(connect__job_bytes_beyond_int64_capped, setup_box,
						teardown_box),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
