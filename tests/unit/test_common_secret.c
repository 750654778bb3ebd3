/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_common_secret.c - secret_load (common/secret.c) on the edges of its
 * file: the secret is the whole first line, however much white space
 * surrounds it, and a byte that is not printable (a NUL too) refuses the
 * file instead of cutting the secret short. (The common cases, modes and
 * secret_equal are in test_config.c.)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/secret.h"

struct t {
	char path[64];
	char out[SECRET_MAX_LEN + 1];
	char err[512];
};

static int setup(void **state)
{
	struct t *t = calloc(1, sizeof(*t));
	int fd;

	snprintf(t->path, sizeof(t->path), "/tmp/pbox-secret-XXXXXX");
	fd = mkstemp(t->path);
	if (fd < 0) {   /* no teardown follows a failed setup */
		print_error("mkstemp %s: %s\n", t->path, strerror(errno));
		free(t);
		return -1;
	}
	close(fd);
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct t *t = *state;

	unlink(t->path);
	free(t);
	return 0;
}

/* The file holds exactly n bytes of data, mode 0600. */
static void write_file(const struct t *t, const char *data, size_t n)
{
	int fd = open(t->path, O_WRONLY | O_TRUNC);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, n), (ssize_t)n);
	close(fd);
}

static void load__nul_in_first_line_refused(void **state)
{
	struct t *t = *state;
	static const char data[] = "0123456789abcdef\0ghijklmnopqrstuvwxyz\n";

	write_file(t, data, sizeof(data) - 1);
	assert_int_equal(secret_load(t->path, t->out, t->err, sizeof(t->err)), -22);
	assert_non_null(strstr(t->err, "non-printable byte at 16"));
	assert_string_equal(t->out, "");
}

static void load__white_space_around_longest_secret(void **state)
{
	struct t *t = *state;
	char data[1 + 1000 + SECRET_MAX_LEN + 1000 + 1];
	char want[SECRET_MAX_LEN + 1];

	for (int i = 0; i < SECRET_MAX_LEN; i++)
		want[i] = (char)('A' + i % 26);
	want[SECRET_MAX_LEN] = '\0';
	memset(data, ' ', sizeof(data));
	data[0] = '\t';
	memcpy(data + 1000, want, SECRET_MAX_LEN);
	data[sizeof(data) - 1] = '\n';
	write_file(t, data, sizeof(data));
	assert_int_equal(secret_load(t->path, t->out, t->err, sizeof(t->err)), SECRET_MAX_LEN);
	assert_string_equal(t->out, want);
}

static void load__first_line_too_long_named(void **state)
{
	struct t *t = *state;
	static char data[SECRET_LINE_MAX + 2];

	/* SECRET_LINE_MAX bytes without a newline: the whole line, accepted */
	memset(data, ' ', sizeof(data));
	memcpy(data + 100, "0123456789abcdefgh", 18);
	write_file(t, data, SECRET_LINE_MAX);
	assert_int_equal(secret_load(t->path, t->out, t->err, sizeof(t->err)), 18);
	assert_string_equal(t->out, "0123456789abcdefgh");
	/* one byte more: refused, not cut */
	data[SECRET_LINE_MAX] = 'x';
	data[SECRET_LINE_MAX + 1] = '\n';
	write_file(t, data, sizeof(data));
	assert_int_equal(secret_load(t->path, t->out, t->err, sizeof(t->err)), -22);
	assert_non_null(strstr(t->err, "over 4096 bytes"));
	/* a secret too long is measured whole */
	memset(data, 'x', 330);
	data[330] = '\n';
	write_file(t, data, 331);
	assert_int_equal(secret_load(t->path, t->out, t->err, sizeof(t->err)), -22);
	assert_non_null(strstr(t->err, "is 330 bytes"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(load__nul_in_first_line_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(load__white_space_around_longest_secret, setup,
						teardown),
		cmocka_unit_test_setup_teardown(load__first_line_too_long_named, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
