/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_lasterr.c - pbox_last_error across threads (client/core/errors.c):
 * a thread that had no failure on a client reads the client's latest
 * failure, which another thread may be replacing at that moment. What it
 * gets must be one whole message that was written, never the start of
 * one over the rest of another (the writers hold the client's lock; the
 * reader must not read the client's buffer without it, nor hand it out).
 *
 * The client is one whose pbox_connect failed at once (a control address
 * that is not host:port): its lock and serial are set, nothing else runs.
 * Under -fsanitize=thread the race is reported as such; elsewhere the
 * reader counts torn messages.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/ops/ops.h"
#include "include/pbox.h"

#define READS 200000

static char MSG_A[CLIENT_MSG_LEN - 1], MSG_B[24];

struct race {
	pbox_client *c;
	atomic_int done;
	unsigned torn, reads;
	char example[CLIENT_MSG_LEN];
};

/* A thread with no failure of its own on c: reads c's latest. */
static void *reader_main(void *arg)
{
	struct race *r = arg;
	char got[CLIENT_MSG_LEN];

	for (unsigned i = 0; i < READS; i++) {
		const char *m = pbox_last_error(r->c);
		snprintf(got, sizeof(got), "%s", m);
		r->reads++;
		if (strcmp(got, MSG_A) != 0 && strcmp(got, MSG_B) != 0) {
			if (r->torn++ == 0)
				memcpy(r->example, got, sizeof(got));
		}
	}
	atomic_store(&r->done, 1);
	return NULL;
}

static void last_error__other_threads_message_read_whole(void **state)
{
	struct race r = { 0 };
	pbox_client *c = NULL;
	pthread_t th;

	(void)state;
	memset(MSG_A, 'a', sizeof(MSG_A) - 1);
	memset(MSG_B, 'b', sizeof(MSG_B) - 1);
	assert_int_equal(pbox_connect("no-port-here", "job", 0, 1, NULL, &c), PBOX_EINVAL);
	assert_non_null(c);
	client_error(c, PBOX_EINVAL, "%s", MSG_A);
	r.c = c;
	assert_int_equal(pthread_create(&th, NULL, reader_main, &r), 0);
	/* this thread's failures replace c's latest while the other reads it */
	const char *last = MSG_A;
	for (unsigned i = 0; !atomic_load(&r.done); i++) {
		last = i % 2 ? MSG_A : MSG_B;
		client_error(c, PBOX_EINVAL, "%s", last);
	}
	pthread_join(th, NULL);
	/* the writer reads its own */
	int mine = strcmp(pbox_last_error(c), last) == 0;
	pbox_close(c);
	if (r.torn)
		fail_msg("%u of %u reads were not a whole message, e.g. '%.40s...' (%zu bytes)",
			 r.torn, r.reads, r.example, strlen(r.example));
	assert_true(mine);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(last_error__other_threads_message_read_whole),
	};
	return cmocka_run_group_tests_name("client_lasterr", tests, NULL, NULL);
}
