/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_debug.c - PBOX_DEBUG (client/ops/debug.c) against the in-process
 * box: INFO writes the join's summary (version, job, endpoints, MTU,
 * segments, transport) and the closing summary (calls, round trip) into
 * PBOX_DEBUG_FILE; WARN writes nothing for a clean run; a failed join is
 * reported with its reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/box_inproc.h"
#include "include/pbox.h"

static char *slurp(const char *path)
{
	static char buf[8192];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = '\0';
	return buf;
}

struct rank {
	pbox_client *c;
	int rc;
};

static void *reduce_main(void *arg)
{
	struct rank *r = arg;
	float x[100] = { 1 };

	r->rc = pbox_allreduce(r->c, 1, x, 100, PBOX_F32);
	return NULL;
}

/* Two ranks of job name reduce once, then close. */
static void run_job(struct box_inproc *b, const char *name)
{
	struct rank r[2];
	pthread_t th[2];

	for (int k = 0; k < 2; k++)
		assert_int_equal(pbox_connect(b->addr, name, k, 2, NULL, &r[k].c), 0);
	for (int k = 0; k < 2; k++)
		pthread_create(&th[k], NULL, reduce_main, &r[k]);
	for (int k = 0; k < 2; k++) {
		pthread_join(th[k], NULL);
		assert_int_equal(r[k].rc, 0);
		pbox_close(r[k].c);
	}
}

static void debug__info_join_and_close_warn_quiet(void **state)
{
	char path[] = "/tmp/pbox-debug-XXXXXX";
	int fd = mkstemp(path);
	struct box_inproc *b = box_inproc_new(1);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	box_inproc_start(b);
	setenv("PBOX_DEBUG_FILE", path, 1);
	setenv("PBOX_DEBUG", "INFO", 1);
	run_job(b, "dbg");
	const char *t = slurp(path);
	assert_non_null(strstr(t, "pbox: libpbox " PBOX_VERSION_STRING ": job 'dbg'"));
	assert_non_null(strstr(t, "rank 1/2, control 127.0.0.1:"));
	assert_non_null(strstr(t, "box endpoint 0: 127.0.0.1:"));
	assert_non_null(strstr(t, "segments of 1408 bytes"));
	assert_non_null(strstr(t, "transport: udp"));
	assert_non_null(strstr(t, "closing: 1 calls"));
	assert_non_null(strstr(t, "round trip"));
	/* WARN: a clean run writes nothing */
	truncate(path, 0);
	setenv("PBOX_DEBUG", "WARN", 1);
	run_job(b, "dbg2");
	assert_string_equal(slurp(path), "");
	/* a failed join is reported */
	pbox_client *c;
	assert_int_equal(pbox_connect(b->addr, "dbg3", 5, 2, NULL, &c), PBOX_EINVAL);
	pbox_close(c);
	assert_int_equal(pbox_connect("127.0.0.1:1", "dbg3", 0, 2, NULL, &c), PBOX_ECONNECT);
	pbox_close(c);
	t = slurp(path);
	assert_non_null(strstr(t, "pbox_connect failed: cannot reach"));
	unsetenv("PBOX_DEBUG");
	unsetenv("PBOX_DEBUG_FILE");
	unlink(path);
	assert_true(box_inproc_idle(b, 2000));
	box_inproc_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(debug__info_join_and_close_warn_quiet),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
