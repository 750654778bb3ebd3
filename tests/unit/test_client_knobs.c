/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_knobs.c - libpbox's table of environment variables
 * (client/core/knobs.c) against what users read: every row, and no other
 * variable, in docs/man/libpbox.3's ENVIRONMENT with its default; every
 * row that stands in for a pbox_opts field named in include/pbox.h (or
 * pbox_cuda.h), and pbox_opts_init's defaults equal to the rows'; each
 * parser's values and refusals, with the message naming the variable.
 * Run from the repository root (make unit).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/core/knobs.h"
#include "include/pbox.h"
#include "include/pbox_cuda.h"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		fail_msg("cannot open %s: run the unit tests from the repository root (make unit)",
			 path);
	char *buf = calloc(1, 1 << 20);
	assert_non_null(buf);
	size_t n = fread(buf, 1, (1 << 20) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static int row_of(const char *name, size_t len)
{
	for (int k = 0; k < KNOB_COUNT; k++)
		if (strlen(knobs[k].name) == len && !strncmp(knobs[k].name, name, len))
			return k;
	return -1;
}

/* The man page's ENVIRONMENT: each .TP entry's names (.B or .BR), its
 * paragraph up to the next .TP; every name a row, every row named once,
 * and a row's paragraph says its default. */
static void man_page_lists_every_row_and_its_default(void **state)
{
	(void)state;
	char *man = slurp("docs/man/libpbox.3");
	char *sec = strstr(man, ".SH ENVIRONMENT\n");
	assert_non_null(sec);
	char *end = strstr(sec + 1, "\n.SH ");
	assert_non_null(end);
	*end = '\0';
	int seen[KNOB_COUNT] = { 0 };
	for (char *tp = strstr(sec, ".TP\n"); tp; ) {
		char *next = strstr(tp + 4, ".TP\n");
		char *names = tp + 4, *eol = strchr(names, '\n');
		assert_non_null(eol);
		char par[2048];
		snprintf(par, sizeof(par), "%.*s", (int)((next ? next : end) - eol), eol);
		for (char *p = names; p < eol; p++) {
			size_t n = strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789");
			bool word = p == names || !strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789",
							  p[-1]);
			/* every PBOX_ name, and the rows named otherwise (torchrun's) */
			if (!word || !n || (strncmp(p, "PBOX_", 5) != 0 && row_of(p, n) < 0))
				continue;
			int k = row_of(p, n);
			if (k < 0)
				fail_msg("libpbox.3 names %.*s, which is no row of the table", (int)n, p);
			seen[k]++;
			if (knobs[k].dflt[0] && (!strstr(par, "default") || !strstr(par, knobs[k].dflt)))
				fail_msg("libpbox.3's %s does not say its default (%s)", knobs[k].name,
					 knobs[k].dflt);
			p += n;
		}
		tp = next;
	}
	for (int k = 0; k < KNOB_COUNT; k++)
		if (seen[k] != 1)
			fail_msg("libpbox.3's ENVIRONMENT names %s %d times, not once", knobs[k].name,
				 seen[k]);
	free(man);
}

/* A row that stands in for a field: the public headers name it. */
static void headers_name_every_field_row(void **state)
{
	(void)state;
	char *h = slurp("include/pbox.h"), *hc = slurp("include/pbox_cuda.h");
	for (int k = 0; k < KNOB_COUNT; k++)
		if (knobs[k].field && !strstr(h, knobs[k].name) && !strstr(hc, knobs[k].name))
			fail_msg("include/pbox*.h do not name %s (it stands in for %s)",
				 knobs[k].name, knobs[k].field);
	free(h);
	free(hc);
}

/* With every variable unset, the rows' defaults are pbox_opts_init's. */
static void defaults_are_pbox_opts_init_s(void **state)
{
	(void)state;
	static const struct { int k; size_t off, size; } field[] = {
		{ KNOB_TRANSPORT, offsetof(pbox_opts, transport), 4 },
		{ KNOB_MTU, offsetof(pbox_opts, mtu), 4 },
		{ KNOB_JOB_BYTES, offsetof(pbox_opts, job_bytes), 8 },
		{ KNOB_UDP_OFFLOAD, offsetof(pbox_opts, udp_offload), 4 },
		{ KNOB_BUSY_POLL, offsetof(pbox_opts, busy_poll), 4 },
		{ KNOB_TIMEOUT, offsetof(pbox_opts, timeout_ms), 4 },
	};
	pbox_opts o;

	for (int k = 0; k < KNOB_COUNT; k++)
		unsetenv(knobs[k].name);
	pbox_opts_init(&o);
	assert_null(o.join_secret);
	for (size_t i = 0; i < sizeof(field) / sizeof(field[0]); i++) {
		uint64_t v, got = 0;
		assert_int_equal(knob_value(NULL, field[i].k, &v), 0);
		assert_int_equal(v, knobs[field[i].k].dval);
		memcpy(&got, (const char *)&o + field[i].off, field[i].size);
		if (got != v)
			fail_msg("%s: pbox_opts_init gives %llu, the row's default %s is %llu",
				 knobs[field[i].k].name, (unsigned long long)got,
				 knobs[field[i].k].dflt, (unsigned long long)v);
	}
	setenv("PBOX_UDP_OFFLOAD", "1", 1);
	setenv("PBOX_BUSY_POLL", "1", 1);
	pbox_opts_init(&o);
	assert_int_equal(o.udp_offload, 1);
	assert_int_equal(o.busy_poll, 1);
	unsetenv("PBOX_UDP_OFFLOAD");
	unsetenv("PBOX_BUSY_POLL");
	/* the rows pbox_opts_init reads are those the table says (when) */
	for (size_t i = 0; i < sizeof(field) / sizeof(field[0]); i++) {
		const struct knob *n = &knobs[field[i].k];
		pbox_opts before, after;
		pbox_opts_init(&before);
		setenv(n->name, n->parse == knob_parse_flag ? "1" : n->parse == knob_parse_size ?
		       "1M" : n->parse == knob_parse_mtu ? "1500" :
		       n->parse == knob_parse_duration ? "90s" : "udp", 1);
		pbox_opts_init(&after);
		unsetenv(n->name);
		bool read = memcmp((const char *)&before + field[i].off,
				   (const char *)&after + field[i].off, field[i].size) != 0;
		if (read != (n->when == KNOB_AT_INIT))
			fail_msg("%s: pbox_opts_init %s it, the table says %s", n->name,
				 read ? "reads" : "does not read",
				 n->when == KNOB_AT_INIT ? "at init" : "later");
	}
}

/* Each parser: its values, its refusals (PBOX_EINVAL), and an empty
 * variable is an unset one. */
static void parsers_take_their_values_and_refuse_the_rest(void **state)
{
	(void)state;
	static const struct { int k; const char *text; int rc; uint64_t v; } cases[] = {
		{ KNOB_TRANSPORT, "udp", 0, PBOX_TRANSPORT_UDP },
		{ KNOB_TRANSPORT, "verbs", 0, PBOX_TRANSPORT_VERBS },
		{ KNOB_TRANSPORT, "", 0, PBOX_TRANSPORT_AUTO },
		{ KNOB_TRANSPORT, "tcp", PBOX_EINVAL, 0 },
		{ KNOB_MTU, "1500", 0, 1500 },
		{ KNOB_MTU, "9000", 0, 9000 },
		{ KNOB_MTU, "12", PBOX_EINVAL, 0 },
		{ KNOB_MTU, "1500x", PBOX_EINVAL, 0 },
		{ KNOB_MTU, "65536", PBOX_EINVAL, 0 },
		{ KNOB_MTU, "0", PBOX_EINVAL, 0 },
		{ KNOB_JOB_BYTES, "64", 0, 64 },
		{ KNOB_JOB_BYTES, "512M", 0, 512ull << 20 },
		{ KNOB_JOB_BYTES, "2T", 0, 2ull << 40 },
		{ KNOB_JOB_BYTES, "abc", PBOX_EINVAL, 0 },
		{ KNOB_JOB_BYTES, "64MB", PBOX_EINVAL, 0 },
		{ KNOB_JOB_BYTES, "-1", PBOX_EINVAL, 0 },
		{ KNOB_JOB_BYTES, "0", PBOX_EINVAL, 0 },
		{ KNOB_KERNEL, "", 0, 3 },
		{ KNOB_UDP_OFFLOAD, "1", 0, 1 },
		{ KNOB_UDP_OFFLOAD, "yes", 0, 0 },
		{ KNOB_XDP_MODE, "skb", 0, 1 },
		{ KNOB_XDP_MODE, "drv", 0, 0 },
		{ KNOB_DEBUG, "info", 0, KNOB_DEBUG_INFO },
		{ KNOB_DEBUG, "1", 0, KNOB_DEBUG_INFO },
		{ KNOB_DEBUG, "DEBUG", 0, KNOB_DEBUG_INFO },
		{ KNOB_DEBUG, "Warn", 0, KNOB_DEBUG_WARN },
		{ KNOB_DEBUG, "loud", 0, KNOB_DEBUG_OFF },
		{ KNOB_KERNEL, "avx2", 0, 1 },
		{ KNOB_KERNEL, "sse", PBOX_EINVAL, 0 },
		{ KNOB_GPUDIRECT, "on", 0, PBOX_GPUDIRECT_ON },
		{ KNOB_GPUDIRECT, "0", 0, PBOX_GPUDIRECT_OFF },
		{ KNOB_GPUDIRECT, "AUTO", 0, PBOX_GPUDIRECT_AUTO },
		{ KNOB_GPUDIRECT, "", 0, PBOX_GPUDIRECT_AUTO },
		{ KNOB_GPUDIRECT, "sometimes", PBOX_EINVAL, 0 },
		{ KNOB_TIMEOUT, "", 0, 1800000 },
		{ KNOB_TIMEOUT, "2500", 0, 2500 },
		{ KNOB_TIMEOUT, "500ms", 0, 500 },
		{ KNOB_TIMEOUT, "90s", 0, 90000 },
		{ KNOB_TIMEOUT, "30m", 0, 1800000 },
		{ KNOB_TIMEOUT, "2h", 0, 7200000 },
		{ KNOB_TIMEOUT, "596h", 0, 2145600000 },
		{ KNOB_TIMEOUT, "597h", PBOX_EINVAL, 0 },
		{ KNOB_TIMEOUT, "0", PBOX_EINVAL, 0 },
		{ KNOB_TIMEOUT, "10 s", PBOX_EINVAL, 0 },
		{ KNOB_TIMEOUT, "1d", PBOX_EINVAL, 0 },
		{ KNOB_TIMEOUT, "-5", PBOX_EINVAL, 0 },
		{ KNOB_REPLACE_WAIT, "", 0, 0 },
		{ KNOB_REPLACE_WAIT, "0", 0, 0 },
		{ KNOB_REPLACE_WAIT, "30s", 0, 30000 },
		{ KNOB_REPLACE_WAIT, "soon", PBOX_EINVAL, 0 },
		{ KNOB_NONFINITE, "", 0, PBOX_NONFINITE_DEFAULT },
		{ KNOB_NONFINITE, "abort", 0, PBOX_NONFINITE_ABORT },
		{ KNOB_NONFINITE, "Skip", 0, PBOX_NONFINITE_SKIP },
		{ KNOB_NONFINITE, "pass", 0, PBOX_NONFINITE_PASS },
		{ KNOB_NONFINITE, "ignore", PBOX_EINVAL, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *name = knobs[cases[i].k].name;
		uint64_t v = 99;
		setenv(name, cases[i].text, 1);
		int rc = knob_value(NULL, cases[i].k, &v);
		if (rc != cases[i].rc || (rc == 0 && v != cases[i].v))
			fail_msg("%s='%s': rc %d value %llu, expected rc %d value %llu", name,
				 cases[i].text, rc, (unsigned long long)v, cases[i].rc,
				 (unsigned long long)cases[i].v);
		unsetenv(name);
	}
}

/* A refused value fails pbox_connect with a message that names the
 * variable, its text and what it takes. */
static void a_refused_value_is_named_at_connect(void **state)
{
	(void)state;
	pbox_client *c = NULL;

	setenv("PBOX_TRANSPORT", "tcp", 1);
	assert_int_equal(pbox_connect("127.0.0.1:1", "knobs", 0, 1, NULL, &c), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c),
			       "PBOX_TRANSPORT='tcp' is not a transport: auto, udp, xdp or verbs"));
	pbox_close(c);
	unsetenv("PBOX_TRANSPORT");
	c = NULL;
	setenv("PBOX_TIMEOUT", "forever", 1);
	assert_int_equal(pbox_connect("127.0.0.1:1", "knobs", 0, 1, NULL, &c), PBOX_EINVAL);
	assert_non_null(strstr(pbox_last_error(c), "PBOX_TIMEOUT='forever' is not a time"));
	pbox_close(c);
	unsetenv("PBOX_TIMEOUT");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(man_page_lists_every_row_and_its_default),
		cmocka_unit_test(headers_name_every_field_row),
		cmocka_unit_test(defaults_are_pbox_opts_init_s),
		cmocka_unit_test(parsers_take_their_values_and_refuse_the_rest),
		cmocka_unit_test(a_refused_value_is_named_at_connect),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
