/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_config.c - pboxd's settings (control/config.c): defaults, options,
 * the INI file, and error messages that name the option or line.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "common/logline.h"
#include "common/secret.h"
#include "control/box.h"

struct t {
	struct box_config c;
	char err[512];
	char ini[64];
};

static int setup(void **state)
{
	struct t *t = calloc(1, sizeof(*t));
	box_config_defaults(&t->c);
	snprintf(t->ini, sizeof(t->ini), "/tmp/pbox-test-config-XXXXXX");
	int fd = mkstemp(t->ini);
	close(fd);
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct t *t = *state;
	unlink(t->ini);
	free(t);
	return 0;
}

/* Parse a NULL-terminated list of options after "pboxd". */
static int parse(struct t *t, ...)
{
	char *argv[64] = { "pboxd" };
	int argc = 1;
	va_list ap;

	va_start(ap, t);
	for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 63;)
		argv[argc++] = a;
	va_end(ap);
	t->err[0] = '\0';
	return box_config_parse(&t->c, argc, argv, t->err, sizeof(t->err));
}

static void write_ini(struct t *t, const char *text)
{
	FILE *f = fopen(t->ini, "w");
	fputs(text, f);
	fclose(f);
}

static void defaults__documented_values(void **state)
{
	struct t *t = *state;

	assert_string_equal(t->c.control, "0.0.0.0:7470");
	assert_string_equal(t->c.rpc_socket, "/run/pbox/pboxd.sock");
	assert_int_equal(t->c.rpc_socket_mode, 0660);
	assert_int_equal(t->c.udp_base, 47000);
	assert_int_equal(t->c.chunk_bytes, 32768);
	assert_int_equal(t->c.max_jobs, 16);
	assert_int_equal(t->c.max_world, 1024);
	assert_int_equal(t->c.max_keys, 4096);
	assert_int_equal(t->c.max_job_bytes, 1ull << 30);
	assert_int_equal(t->c.default_job_bytes, 256ull << 20);
	assert_int_equal(t->c.slots_per_lcore, 256);
	assert_int_equal(t->c.mbufs, 16383);
	assert_int_equal(t->c.idle_sleep_us, 0);
	assert_true(t->c.udp_checksum);
	assert_int_equal(t->c.mtu, 0);
	assert_int_equal(t->c.stall_timeout_ms, 3600000);
	assert_int_equal(t->c.heartbeat_timeout_ms, 6000);
	assert_int_equal(t->c.fanout, BOX_FANOUT_AUTO);
	assert_int_equal(t->c.log_level, LOG_PRIO_INFO);
	assert_int_equal(t->c.operator_secret_len, 0);
	assert_int_equal(t->c.nports, 0);
	assert_int_equal(parse(t, NULL), 0);
}

static void parse__all_options(void **state)
{
	struct t *t = *state;

	assert_int_equal(parse(t, "--ip", "0:198.18.0.1/24", "--ip", "1:198.19.0.1/16",
			       "--control", "127.0.0.1:9000", "--rpc-socket", "/tmp/x.sock",
			       "--rpc-socket-mode", "0600", "--udp-base", "50000",
			       "--chunk-bytes", "64K", "--max-jobs", "8", "--max-world", "32",
			       "--max-keys", "100", "--max-job-bytes", "2G", "--job-bytes", "512M",
			       "--slots", "128", "--mbufs", "8191", "--idle-sleep-us", "10",
			       "--udp-checksum", "off", "--log-level", "debug", NULL), 0);
	assert_int_equal(t->c.nports, 2);
	assert_int_equal(t->c.ip[0].port, 0);
	assert_int_equal(t->c.ip[0].ip, 0xC6120001u);
	assert_int_equal(t->c.ip[0].prefix, 24);
	assert_int_equal(t->c.ip[1].port, 1);
	assert_int_equal(t->c.ip[1].prefix, 16);
	assert_string_equal(t->c.control, "127.0.0.1:9000");
	assert_string_equal(t->c.rpc_socket, "/tmp/x.sock");
	assert_int_equal(t->c.rpc_socket_mode, 0600);
	assert_int_equal(t->c.udp_base, 50000);
	assert_int_equal(t->c.chunk_bytes, 65536);
	assert_int_equal(t->c.max_jobs, 8);
	assert_int_equal(t->c.max_world, 32);
	assert_int_equal(t->c.max_keys, 100);
	assert_int_equal(t->c.max_job_bytes, 2ull << 30);
	assert_int_equal(t->c.default_job_bytes, 512ull << 20);
	assert_int_equal(t->c.slots_per_lcore, 128);
	assert_int_equal(t->c.mbufs, 8191);
	assert_int_equal(t->c.idle_sleep_us, 10);
	assert_false(t->c.udp_checksum);
	assert_int_equal(t->c.log_level, LOG_PRIO_DEBUG);
}

static void parse__ip_same_port_replaces(void **state)
{
	struct t *t = *state;

	assert_int_equal(parse(t, "--ip", "0:198.18.0.1/24", "--ip", "0:10.0.0.1/8", NULL), 0);
	assert_int_equal(t->c.nports, 1);
	assert_int_equal(t->c.ip[0].ip, 0x0A000001u);
}

static void parse__errors_name_the_option(void **state)
{
	struct t *t = *state;

	assert_int_equal(parse(t, "--max-world", "2000", NULL), -EINVAL);
	assert_non_null(strstr(t->err, "--max-world"));
	assert_non_null(strstr(t->err, "[1, 1024]"));
	assert_int_equal(parse(t, "--max-jobs", "abc", NULL), -EINVAL);
	assert_non_null(strstr(t->err, "--max-jobs"));
	assert_int_equal(parse(t, "--max-jobs", "-1", NULL), -EINVAL);
	assert_int_equal(parse(t, "--max-jobs", "33", NULL), -EINVAL);
	assert_int_equal(parse(t, "--ip", "0:300.1.1.1/24", NULL), -EINVAL);
	assert_non_null(strstr(t->err, "--ip"));
	assert_non_null(strstr(t->err, "300.1.1.1"));
	assert_int_equal(parse(t, "--ip", "0:10.0.0.1", NULL), -EINVAL);
	assert_non_null(strstr(t->err, "PORT:ADDR/PREFIX"));
	assert_int_equal(parse(t, "--ip", "0:10.0.0.1/33", NULL), -EINVAL);
	/* a subnet's network and broadcast addresses are no host's */
	assert_int_equal(parse(t, "--ip", "0:198.18.0.255/24", NULL), -EINVAL);
	assert_non_null(strstr(t->err, "broadcast address of 198.18.0.0/24"));
	assert_int_equal(parse(t, "--ip", "0:198.18.0.0/24", NULL), -EINVAL);
	assert_non_null(strstr(t->err, "network address"));
	assert_int_equal(parse(t, "--ip", "0:10.255.255.255/8", NULL), -EINVAL);
	assert_int_equal(parse(t, "--ip", "0:10.0.0.2/30", NULL), 0);
	assert_int_equal(parse(t, "--ip", "0:10.0.0.3/30", NULL), -EINVAL);
	assert_int_equal(parse(t, "--ip", "0:10.0.0.0/31", NULL), 0);   /* RFC 3021 */
	assert_int_equal(parse(t, "--ip", "0:10.0.0.255/32", NULL), 0);
	assert_int_equal(parse(t, "--control", "nohostport", NULL), -EINVAL);
	assert_non_null(strstr(t->err, "--control"));
	assert_int_equal(parse(t, "--control", "1.2.3.4:99999", NULL), -EINVAL);
	assert_int_equal(parse(t, "--rpc-socket-mode", "0999", NULL), -EINVAL);
	assert_int_equal(parse(t, "--log-level", "loud", NULL), -EINVAL);
	assert_non_null(strstr(t->err, "loud"));
	assert_int_equal(parse(t, "--udp-checksum", "maybe", NULL), -EINVAL);
	assert_non_null(strstr(t->err, "--udp-checksum"));
	assert_non_null(strstr(t->err, "on, off"));
	assert_int_equal(parse(t, "--chunk-bytes", "12Q", NULL), -EINVAL);
	assert_int_equal(parse(t, "--max-job-bytes", "99999999999999999999999", NULL), -EINVAL);
	assert_non_null(strstr(t->err, "too large"));
	assert_int_equal(parse(t, "--bogus", NULL), -EINVAL);
	assert_non_null(strstr(t->err, "--bogus"));
	/* --max-j: --max-jobs or --max-job-bytes */
	assert_int_equal(parse(t, "--max-j", "5", NULL), -EINVAL);
	assert_non_null(strstr(t->err, "unknown or ambiguous option '--max-j'"));
	/* the EAL's getopt, run after, prints its own messages again */
	assert_int_equal(opterr, 1);
	assert_int_equal(parse(t, "--max-world", NULL), -EINVAL);
	assert_non_null(strstr(t->err, "needs a value"));
	assert_int_equal(parse(t, "stray", NULL), -EINVAL);
	assert_non_null(strstr(t->err, "stray"));
}

static void parse__ranges_zero_and_none(void **state)
{
	struct t *t = *state;

	assert_int_equal(parse(t, "--mtu", "9000", NULL), 0);
	assert_int_equal(t->c.mtu, 9000);
	assert_int_equal(parse(t, "--mtu", "0", NULL), 0);   /* the port's own */
	assert_int_equal(t->c.mtu, 0);
	assert_int_equal(parse(t, "--mtu", "100", NULL), -EINVAL);
	assert_string_equal(t->err, "--mtu: 100 is out of range [576, 9000] (or 0)");
	assert_int_equal(parse(t, "--chunk-bytes", "32", NULL), -EINVAL);
	assert_string_equal(t->err, "--chunk-bytes: 32 is out of range [64, 64M]");
	assert_int_equal(parse(t, "--chunk-bytes", "1MiB", "--max-job-bytes", "1t", NULL), 0);
	assert_int_equal(t->c.chunk_bytes, 1u << 20);
	assert_int_equal(t->c.max_job_bytes, 1ull << 40);
	assert_int_equal(parse(t, "--fanout", "copy", "--log-level", "notice", NULL), 0);
	assert_int_equal(t->c.fanout, BOX_FANOUT_COPY);
	assert_int_equal(t->c.log_level, LOG_PRIO_NOTICE);
	assert_int_equal(parse(t, "--control", "none", NULL), 0);
	assert_string_equal(t->c.control, "");
	assert_int_equal(parse(t, "--control", "127.0.0.1:7470", "--rpc-socket", "none", NULL), 0);
	assert_string_equal(t->c.rpc_socket, "");
}

static void parse__cross_checks(void **state)
{
	struct t *t = *state;

	assert_int_equal(parse(t, "--max-job-bytes", "64M", "--job-bytes", "128M", NULL), -EINVAL);
	assert_non_null(strstr(t->err, "--job-bytes"));
	assert_int_equal(parse(t, "--control", "", "--rpc-socket", "", "--job-bytes", "32M", NULL),
			 -EINVAL);
	assert_non_null(strstr(t->err, "both off"));
}

static void parse__help_returns_1(void **state)
{
	struct t *t = *state;
	assert_int_equal(parse(t, "--help", NULL), 1);
	assert_int_equal(parse(t, "-h", NULL), 1);
}

static void parse__help_with_value_names_it(void **state)
{
	struct t *t = *state;

	/* --help takes no value: the message names it, not getopt's id */
	assert_int_equal(parse(t, "--help=yes", NULL), -EINVAL);
	assert_non_null(strstr(t->err, "option '--help' takes no value"));
}

static void parse__ip_error_names_the_address_given(void **state)
{
	struct t *t = *state;

	/* the message names the address given and the subnet computed */
	assert_int_equal(parse(t, "--ip", "0:198.18.0.255/24", NULL), -EINVAL);
	assert_non_null(strstr(t->err, "198.18.0.255 is the broadcast address of 198.18.0.0/24"));
	assert_int_equal(parse(t, "--ip", "3:10.1.0.0/16", NULL), -EINVAL);
	assert_non_null(strstr(t->err, "10.1.0.0 is the network address of 10.1.0.0/16"));
}

static void ini__reads_section_and_later_options_override(void **state)
{
	struct t *t = *state;

	write_ini(t, "# pbox box\n[other]\nmax_world = 3\n\n[pboxd]\n"
		  "ip = 0:198.18.0.1/24\nip = 1:198.19.0.1/24\n"
		  "max-world = 8\n  max_jobs = 4   ; no inline comments\n");
	/* an inline ';' is part of the value: error naming file and line */
	assert_int_equal(parse(t, "--config", t->ini, NULL), -EINVAL);
	assert_non_null(strstr(t->err, ":9:"));
	assert_non_null(strstr(t->err, "max-jobs"));

	box_config_defaults(&t->c);
	write_ini(t, "[pboxd]\nip = 0:198.18.0.1/24\nip = 1:198.19.0.1/24\nmax-world = 8\n"
		  "log_level = \"warn\"\n");
	assert_int_equal(parse(t, "--config", t->ini, "--max-world", "16", NULL), 0);
	assert_int_equal(t->c.nports, 2);
	assert_int_equal(t->c.max_world, 16);
	assert_int_equal(t->c.log_level, LOG_PRIO_WARNING);
}

static void ini__other_sections_ignored_whatever_their_lines(void **state)
{
	struct t *t = *state;

	/* another tool's section may hold lines of its own syntax (a bare
	 * flag, as in my.cnf): "other sections are ignored" */
	write_ini(t, "[mysqld]\nskip-networking\n[pboxd]\nmax-world = 8\n");
	assert_int_equal(parse(t, "--config", t->ini, NULL), 0);
	assert_int_equal(t->c.max_world, 8);
	/* in [pboxd] such a line is still an error */
	write_ini(t, "[pboxd]\nskip-networking\n");
	assert_int_equal(parse(t, "--config", t->ini, NULL), -EINVAL);
	assert_non_null(strstr(t->err, ":2:"));
	/* and so before any section (a stray line, a byte-order mark) */
	write_ini(t, "\xef\xbb\xbf[pboxd]\nmax-world = 8\n");
	assert_int_equal(parse(t, "--config", t->ini, NULL), -EINVAL);
	assert_non_null(strstr(t->err, ":1:"));
}

static void ini__errors_name_file_and_line(void **state)
{
	struct t *t = *state;

	write_ini(t, "[pboxd]\nmax-world = 8\nfrobnicate = 1\n");
	assert_int_equal(parse(t, "--config", t->ini, NULL), -EINVAL);
	assert_non_null(strstr(t->err, t->ini));
	assert_non_null(strstr(t->err, ":3:"));
	assert_non_null(strstr(t->err, "frobnicate"));

	write_ini(t, "[pboxd]\njust words\n");
	assert_int_equal(parse(t, "--config", t->ini, NULL), -EINVAL);
	assert_non_null(strstr(t->err, ":2:"));

	write_ini(t, "[pboxd]\nconfig = /etc/other.ini\n");
	assert_int_equal(parse(t, "--config", t->ini, NULL), -EINVAL);
	assert_non_null(strstr(t->err, "another"));

	write_ini(t, "[other]\nx = 1\n");
	assert_int_equal(parse(t, "--config", t->ini, NULL), -EINVAL);
	assert_non_null(strstr(t->err, "no [pboxd] section"));

	assert_int_equal(parse(t, "--config", "/nonexistent/pboxd.ini", NULL), -EINVAL);
	assert_non_null(strstr(t->err, "/nonexistent/pboxd.ini"));
}

/* A NUL byte in a line (a binary or damaged file) is refused naming its
 * line, never taken as the line's end: it was reported as a line longer
 * than 1022 characters, and on a last line without a newline the bytes
 * after it were dropped unread (found by fuzz_config_ini). Lines up to
 * 1022 characters pass, longer ones are refused. */
static void ini__nul_byte_refused_long_line_named(void **state)
{
	struct t *t = *state;
	static const char nul_mid[] = "[pboxd]\nmax-world = 8\0 junk\nmax-keys = 9\n";
	static const char nul_last[] = "[pboxd]\nmax-world = 8\0 0";
	FILE *f;

	f = fopen(t->ini, "w");
	fwrite(nul_mid, 1, sizeof(nul_mid) - 1, f);
	fclose(f);
	assert_int_equal(parse(t, "--config", t->ini, NULL), -EINVAL);
	assert_non_null(strstr(t->err, ":2: a NUL byte"));

	f = fopen(t->ini, "w");
	fwrite(nul_last, 1, sizeof(nul_last) - 1, f);
	fclose(f);
	assert_int_equal(parse(t, "--config", t->ini, NULL), -EINVAL);
	assert_non_null(strstr(t->err, ":2: a NUL byte"));

	char line[1100];              /* line 2 starts at byte 8 */
	memset(line, ' ', sizeof(line));
	memcpy(line, "[pboxd]\n#", 9);
	line[8 + 1022] = '\n';       /* a comment of 1022 characters: taken */
	line[8 + 1023] = '\0';
	write_ini(t, line);
	assert_int_equal(parse(t, "--config", t->ini, NULL), 0);
	line[8 + 1022] = ' ';         /* 1023: refused */
	line[8 + 1023] = '\n';
	line[8 + 1024] = '\0';
	write_ini(t, line);
	assert_int_equal(parse(t, "--config", t->ini, NULL), -EINVAL);
	assert_non_null(strstr(t->err, ":2: line longer than 1022 characters"));
}

static void write_secret(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	chmod(path, mode);
}

static void secret__file_checks_and_option(void **state)
{
	struct t *t = *state;
	char path[64] = "/tmp/pbox-test-secret-XXXXXX", out[SECRET_MAX_LEN + 1];
	close(mkstemp(path));

	write_secret(path, "  s3cret-s3cret-s3cret \nsecond line\n", 0600);
	assert_int_equal(secret_load(path, out, t->err, sizeof(t->err)), 20);
	assert_string_equal(out, "s3cret-s3cret-s3cret");
	assert_int_equal(parse(t, "--operator-secret-file", path, NULL), 0);
	assert_int_equal(t->c.operator_secret_len, 20);
	assert_string_equal(t->c.operator_secret, "s3cret-s3cret-s3cret");
	assert_int_equal(parse(t, "--operator-secret-file", "", NULL), 0); /* "" = none */
	assert_int_equal(t->c.operator_secret_len, 0);

	write_secret(path, "s3cret-s3cret-s3cret\n", 0644); /* others may read it */
	assert_int_equal(parse(t, "--operator-secret-file", path, NULL), -EINVAL);
	assert_non_null(strstr(t->err, "operator-secret-file"));
	assert_non_null(strstr(t->err, "chmod 600"));
	write_secret(path, "short\n", 0600);
	assert_true(secret_load(path, out, t->err, sizeof(t->err)) < 0);
	assert_non_null(strstr(t->err, "5 bytes"));
	write_secret(path, "s3cret-s3cret\001-s3cret\n", 0600);
	assert_true(secret_load(path, out, t->err, sizeof(t->err)) < 0);
	assert_non_null(strstr(t->err, "non-printable"));
	assert_true(secret_load("/nonexistent/secret", out, t->err, sizeof(t->err)) < 0);
	assert_non_null(strstr(t->err, "/nonexistent/secret"));
	unlink(path);
}

static void secret__equal_compares_whole_length(void **state)
{
	(void)state;
	assert_true(secret_equal("abcdefgh", 8, "abcdefgh", 8));
	assert_false(secret_equal("abcdefgH", 8, "abcdefgh", 8));
	assert_false(secret_equal("abcdefg", 7, "abcdefgh", 8));   /* prefix */
	assert_false(secret_equal("abcdefghi", 9, "abcdefgh", 8)); /* longer */
	assert_false(secret_equal("", 0, "abcdefgh", 8));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(defaults__documented_values, setup, teardown),
		cmocka_unit_test_setup_teardown(parse__all_options, setup, teardown),
		cmocka_unit_test_setup_teardown(parse__ip_same_port_replaces, setup, teardown),
		cmocka_unit_test_setup_teardown(parse__errors_name_the_option, setup, teardown),
		cmocka_unit_test_setup_teardown(parse__ranges_zero_and_none, setup, teardown),
		cmocka_unit_test_setup_teardown(parse__cross_checks, setup, teardown),
		cmocka_unit_test_setup_teardown(parse__help_returns_1, setup, teardown),
		cmocka_unit_test_setup_teardown(parse__help_with_value_names_it, setup, teardown),
		cmocka_unit_test_setup_teardown(parse__ip_error_names_the_address_given, setup, teardown),
		cmocka_unit_test_setup_teardown(ini__reads_section_and_later_options_override, setup, teardown),
		cmocka_unit_test_setup_teardown(ini__errors_name_file_and_line, setup, teardown),
		cmocka_unit_test_setup_teardown(ini__nul_byte_refused_long_line_named, setup, teardown),
		cmocka_unit_test_setup_teardown(ini__other_sections_ignored_whatever_their_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(secret__file_checks_and_option, setup, teardown),
		cmocka_unit_test(secret__equal_compares_whole_length),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
