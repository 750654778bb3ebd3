/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_ctrl.c - libpbox's control connection (client/core/ctrl.c) and the
 * JSON-RPC client pboxctl uses (common/rpc_client.c) against a scripted,
 * broken or hostile box: a TCP listener on 127.0.0.1 whose thread answers
 * each request line as the test says (a valid box_endpoints, a job_join
 * result given as text, job_leave {}), or answers nothing and floods the
 * connection with notifications, or sends one endless line.
 *
 * The rules checked: every call is bounded by its timeout even while the
 * box keeps talking (pbox_connect, pbox_close's job_leave, rpc_client_call);
 * a job_join answer that is not what docs/rpc.md says (a token that is not
 * 16 hex digits, a job_id that is not an integer) is PBOX_EPROTO, not taken
 * for something else; an over-long answer is PBOX_EPROTO naming the real
 * bound; a job_aborted that came in the same read as job_join's answer is
 * handled once the progress thread starts (the socket will not say it is
 * there), so the next call fails PBOX_EABORTED with the box's reason.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/jsonl.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "include/pbox.h"

#define FLOOD_MS 4000   /* how long the box floods a request it does not answer */
#define NOISE "{\"jsonrpc\":\"2.0\",\"method\":\"noise\",\"params\":{}}\n"

/* The scripted box. */
static struct sbox {
	int lfd;
	char addr[32];
	pthread_t th;
	atomic_int stop;
	const char *flood;        /* method answered by a flood of notifications */
	size_t long_line;         /* box_endpoints answered by this many bytes, no newline */
	char join_result[512];    /* job_join's result, JSON text */
	const char *after_join;   /* lines sent in the same write as job_join's answer */
	bool close_after_join;    /* ... and then the connection closed */
	bool silent;              /* requests after job_join get no answer */
	int data_fd;              /* a UDP port for the endpoint box_endpoints lists */
	uint16_t data_port;
} S;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Write all of buf unless the peer is gone or the test stops (0 / -1). */
static int put(int fd, const char *buf, size_t len, double until)
{
	while (len > 0) {
		if (atomic_load(&S.stop) || now_s() > until)
			return -1;
		ssize_t w = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			buf += w;
			len -= (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		poll(&p, 1, 20);
	}
	return 0;
}

/* The answer, and any lines given in extra, in one write. */
static int answer_with(int fd, json_t *id, const char *result, const char *extra)
{
	char *ids = json_dumps(id, JSON_ENCODE_ANY);
	char line[2048];

	snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n%s", ids,
		 result, extra ? extra : "");
	free(ids);
	return put(fd, line, strlen(line), now_s() + 5);
}

static int answer(int fd, json_t *id, const char *result)
{
	return answer_with(fd, id, result, NULL);
}

/* One request: 0 to go on, -1 when the connection is done. */
static int serve_one(int fd, const char *line, size_t len)
{
	json_t *req = json_loadb(line, len, 0, NULL);
	const char *m = json_string_value(json_object_get(req, "method"));
	json_t *id = json_object_get(req, "id");
	int rc = 0;

	assert_non_null(m);
	if (S.flood && strcmp(m, S.flood) == 0) {
		/* batches of lines, so the client always finds more waiting */
		static char batch[sizeof(NOISE) * 1024];
		size_t one = strlen(NOISE), n = sizeof(batch) / one;
		for (size_t i = 0; i < n; i++)
			memcpy(batch + i * one, NOISE, one);
		double until = now_s() + FLOOD_MS / 1000.0;
		while (put(fd, batch, n * one, until) == 0)
			;
		rc = -1;
	} else if (!id) {
		rc = 0;   /* another notification: no answer */
	} else if (strcmp(m, "box_endpoints") == 0 && S.long_line) {
		static char chunk[65536];
		memset(chunk, 'x', sizeof(chunk));
		for (size_t left = S.long_line; rc == 0 && left > 0;) {
			size_t n = left < sizeof(chunk) ? left : sizeof(chunk);
			rc = put(fd, chunk, n, now_s() + 10);
			left -= n;
		}
	} else if (strcmp(m, "box_endpoints") == 0) {
		char r[256];
		snprintf(r, sizeof(r), "{\"version\":%d,\"endpoints\":[{\"ip\":\"127.0.0.1\","
			 "\"port\":%u}],\"mtu\":1500}", WIRE_VERSION, S.data_port);
		rc = answer(fd, id, r);
	} else if (strcmp(m, "job_join") == 0) {
		rc = answer_with(fd, id, S.join_result, S.after_join);
		if (rc == 0 && S.close_after_join)
			rc = -1;
	} else if (S.silent) {
		rc = 0;
	} else {
		rc = answer(fd, id, "{}");
	}
	json_decref(req);
	return rc;
}

static void serve_conn(int fd)
{
	struct jsonl_buf in;

	assert_int_equal(jsonl_init(&in, 0), 0);
	while (!atomic_load(&S.stop)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 20) <= 0)
			continue;
		ssize_t r = jsonl_fill(&in, fd);
		if (r == 0 || (r < 0 && r != -EAGAIN))
			break;
		char *line;
		size_t len;
		int n, rc = 0;
		while (rc == 0 && (n = jsonl_next(&in, &line, &len)) == 1)
			rc = serve_one(fd, line, len);
		if (rc < 0)
			break;
	}
	jsonl_free(&in);
	close(fd);
}

static void *sbox_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&S.stop)) {
		struct pollfd p = { .fd = S.lfd, .events = POLLIN };
		if (poll(&p, 1, 20) <= 0)
			continue;
		int fd = accept(S.lfd, NULL, NULL);
		if (fd >= 0)
			serve_conn(fd);
	}
	return NULL;
}

static const char *GOOD_JOIN = "{\"job_id\":65,\"token\":\"00000000000000aa\",\"world\":1,"
			       "\"seg_bytes\":1408,\"chunk_bytes\":32768,\"max_bytes\":1000000,"
			       "\"key_bytes\":100000,\"slots\":256}";

static int setup(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);

	(void)state;
	memset(&S, 0, sizeof(S));
	snprintf(S.join_result, sizeof(S.join_result), "%s", GOOD_JOIN);
	S.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(S.lfd >= 0);
	assert_int_equal(bind(S.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(S.lfd, (struct sockaddr *)&a, &al), 0);
	assert_int_equal(listen(S.lfd, 8), 0);
	snprintf(S.addr, sizeof(S.addr), "127.0.0.1:%u", ntohs(a.sin_port));
	/* the data endpoint: a bound UDP port nobody reads */
	struct sockaddr_in d = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	al = sizeof(d);
	S.data_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(S.data_fd >= 0);
	assert_int_equal(bind(S.data_fd, (struct sockaddr *)&d, sizeof(d)), 0);
	assert_int_equal(getsockname(S.data_fd, (struct sockaddr *)&d, &al), 0);
	S.data_port = ntohs(d.sin_port);
	assert_int_equal(pthread_create(&S.th, NULL, sbox_main, NULL), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	atomic_store(&S.stop, 1);
	pthread_join(S.th, NULL);
	close(S.lfd);
	close(S.data_fd);
	return 0;
}

/* Options for the scripted box: udp, a fixed MTU (no probe), timeout. */
static pbox_opts opts(uint32_t timeout_ms)
{
	pbox_opts o;

	pbox_opts_init(&o);
	o.timeout_ms = timeout_ms;
	o.mtu = 1500;
	o.transport = PBOX_TRANSPORT_UDP;
	return o;
}

/* ---- timeouts while the box keeps talking ------------------------------------- */

/* box_endpoints never answered, notifications without end: pbox_connect
 * gave up only when the box fell silent (FLOOD_MS), not at its timeout. */
static void connect__notification_flood_bounded_by_timeout(void **state)
{
	pbox_opts o = opts(300);
	pbox_client *c = NULL;

	(void)state;
	S.flood = "box_endpoints";
	double t0 = now_s();
	int rc = pbox_connect(S.addr, "job", 0, 1, &o, &c);
	double took = now_s() - t0;
	if (took > 2.0 || rc != PBOX_ETIMEDOUT)
		fail_msg("pbox_connect with timeout_ms 300 took %.1f s and gave %d (%s)", took, rc,
			 pbox_last_error(c));
	assert_non_null(strstr(pbox_last_error(c), "box_endpoints: no answer from box"));
	pbox_close(c);
}

/* job_leave at pbox_close is bounded (CLIENT_LEAVE_MAX_MS or the
 * timeout): a box flooding it held pbox_close as long as it flooded. */
static void close__job_leave_bounded_under_flood(void **state)
{
	pbox_opts o = opts(300);
	pbox_client *c = NULL;

	(void)state;
	S.flood = "job_leave";
	assert_int_equal(pbox_connect(S.addr, "job", 0, 1, &o, &c), 0);
	double t0 = now_s();
	pbox_close(c);
	double took = now_s() - t0;
	if (took > 2.0)
		fail_msg("pbox_close with timeout_ms 300 took %.1f s", took);
}

/* rpc_client_call (pboxctl's): the same bound. */
static void rpc_call__notification_flood_bounded_by_timeout(void **state)
{
	struct rpc_client *rc_;
	struct rpc_error e;
	json_t *res = NULL;

	(void)state;
	S.flood = "box_status";
	assert_int_equal(rpc_client_connect(S.addr, 1000, &rc_, &e), 0);
	double t0 = now_s();
	int rc = rpc_client_call(rc_, "box_status", NULL, 300, &res, &e);
	double took = now_s() - t0;
	if (took > 2.0 || rc != -ETIMEDOUT)
		fail_msg("rpc_client_call with a 300 ms timeout took %.1f s and gave %d (%s)", took,
			 rc, e.message);
	assert_null(res);
	assert_non_null(strstr(e.message, "no answer to box_status within 300 ms"));
	rpc_client_close(rc_);
}

/* rpc_client_poll: "waiting up to timeout_ms for the first byte", then
 * what has arrived; under a flood it never stopped taking more. */
static void rpc_poll__flood_bounded_by_timeout(void **state)
{
	struct rpc_client *rc_;
	struct rpc_error e;

	(void)state;
	S.flood = "box_status";
	assert_int_equal(rpc_client_connect(S.addr, 1000, &rc_, &e), 0);
	assert_int_equal(rpc_client_notify(rc_, "box_status", NULL, 1000, &e), 0);
	double t0 = now_s();
	int rc = rpc_client_poll(rc_, 300, &e);
	double took = now_s() - t0;
	if (took > 2.0 || rc != 0)
		fail_msg("rpc_client_poll with a 300 ms timeout took %.1f s and gave %d", took, rc);
	rpc_client_close(rc_);
}

/* ---- answers that are not what docs/rpc.md says -------------------------------- */

static void join__malformed_answers_are_eproto(void **state)
{
	static const struct {
		const char *result, *in_message;
	} bad[] = {
		/* strtoull took a sign, blanks and 0x: a token no box sends */
		{ "{\"job_id\":65,\"token\":\"-000000000000001\",\"seg_bytes\":1408}", "token" },
		{ "{\"job_id\":65,\"token\":\"  00000000000aa\",\"seg_bytes\":1408}", "token" },
		{ "{\"job_id\":65,\"token\":\"0x00000000000aa0\",\"seg_bytes\":1408}", "token" },
		/* a job_id that is missing or no integer was taken as job 0 */
		{ "{\"token\":\"00000000000000aa\",\"seg_bytes\":1408}", "job_id" },
		{ "{\"job_id\":\"65\",\"token\":\"00000000000000aa\",\"seg_bytes\":1408}", "job_id" },
		{ "{\"job_id\":65.0,\"token\":\"00000000000000aa\",\"seg_bytes\":1408}", "job_id" },
	};
	pbox_opts o = opts(2000);
	pbox_client *c = NULL;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(S.join_result, sizeof(S.join_result), "%s", bad[i].result);
		int rc = pbox_connect(S.addr, "job", 0, 1, &o, &c);
		if (rc != PBOX_EPROTO)
			fail_msg("job_join answer %s: pbox_connect gave %d (%s), not PBOX_EPROTO",
				 bad[i].result, rc, pbox_last_error(c));
		assert_non_null(strstr(pbox_last_error(c), bad[i].in_message));
		pbox_close(c);
	}
	/* the well-formed answer is taken */
	snprintf(S.join_result, sizeof(S.join_result), "%s", GOOD_JOIN);
	assert_int_equal(pbox_connect(S.addr, "job", 0, 1, &o, &c), 0);
	pbox_close(c);
}

/* An answer longer than the bound (RPC_CLIENT_MAX_REPLY): PBOX_EPROTO,
 * and the message names that bound, not the request lines' 64 KiB. */
static void connect__overlong_answer_names_the_bound(void **state)
{
	pbox_opts o = opts(20000);
	pbox_client *c = NULL;
	char want[64];

	(void)state;
	S.long_line = (size_t)RPC_CLIENT_MAX_REPLY + 4096;
	assert_int_equal(pbox_connect(S.addr, "job", 0, 1, &o, &c), PBOX_EPROTO);
	snprintf(want, sizeof(want), "over %u bytes", RPC_CLIENT_MAX_REPLY);
	if (!strstr(pbox_last_error(c), want))
		fail_msg("message '%s' does not say '%s'", pbox_last_error(c), want);
	pbox_close(c);
}

/* ---- notifications that came with pbox_connect's last answer ------------------- */

#define ABORTED "{\"jsonrpc\":\"2.0\",\"method\":\"job_aborted\",\"params\":{\"job\":\"job\"," \
		"\"job_id\":65,\"reason\":\"rank 1 lost (control connection closed)\"}}\n"

/* job_aborted in the same TCP segment as job_join's answer: it waited in
 * the control buffer until the socket became readable again, so a box
 * that said nothing more left the first call to time out, and one that
 * then closed the connection made it PBOX_ECLOSED without the reason. */
static void connect__abort_with_join_answer_is_seen(void **state)
{
	static const bool closes[] = { false, true };
	pbox_opts o = opts(800);
	pbox_client *c = NULL;
	static float x[64];

	(void)state;
	S.after_join = ABORTED;
	S.silent = true;
	int bad = 0;
	for (size_t i = 0; i < sizeof(closes) / sizeof(closes[0]); i++) {
		S.close_after_join = closes[i];
		assert_int_equal(pbox_connect(S.addr, "job", 0, 1, &o, &c), 0);
		int rc = pbox_allreduce(c, 1, x, 64, PBOX_F32);
		if (rc != PBOX_EABORTED || !strstr(pbox_last_error(c), "rank 1 lost")) {
			print_error("box %s after job_aborted: pbox_allreduce gave %d (%s), not "
				    "PBOX_EABORTED with the reason\n", closes[i] ? "closing" :
				    "silent", rc, pbox_last_error(c));
			bad++;
		}
		pbox_close(c);
	}
	assert_int_equal(bad, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(connect__notification_flood_bounded_by_timeout,
						setup, teardown),
		cmocka_unit_test_setup_teardown(close__job_leave_bounded_under_flood, setup,
						teardown),
		cmocka_unit_test_setup_teardown(rpc_call__notification_flood_bounded_by_timeout,
						setup, teardown),
		cmocka_unit_test_setup_teardown(rpc_poll__flood_bounded_by_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(join__malformed_answers_are_eproto, setup, teardown),
		cmocka_unit_test_setup_teardown(connect__overlong_answer_names_the_bound, setup,
						teardown),
		cmocka_unit_test_setup_teardown(connect__abort_with_join_answer_is_seen, setup,
						teardown),
	};
	return cmocka_run_group_tests_name("client_ctrl", tests, NULL, NULL);
}
