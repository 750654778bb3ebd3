/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_options.c - pboxd's option table (control/options.c): every row is
 * complete and its default valid, the defaults are what parsing nothing
 * gives, values print back as they parse, --help shows every row; and the
 * docs check: docs/operations.md and deploy/pboxd.conf list every option
 * with the table's default (and the docs its range). Run from the
 * repository root (make unit does).
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

#include "control/options.h"

/* ---- the table itself ---- */

static void table__every_row_complete(void **state)
{
	(void)state;
	assert_true(box_nopts > 0);
	for (size_t i = 0; i < box_nopts; i++) {
		const struct box_opt *o = &box_opts[i];
		assert_non_null(o->name);
		assert_true(o->name[0] != '\0' && o->name[0] != '-');
		assert_non_null(o->help);
		assert_true(strlen(o->help) > 10);
		/* the help says what it does; the default and range come from the row */
		assert_null(strstr(o->help, "default"));
		assert_true((o->arg == NULL) == (o->type == BOX_OPT_FLAG));
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(box_opts[j].name, o->name);
		assert_ptr_equal(box_opt_find(o->name), o);
	}
}

static void table__fields_fit_their_rows(void **state)
{
	(void)state;
	for (size_t i = 0; i < box_nopts; i++) {
		const struct box_opt *o = &box_opts[i];
		if (!box_opt_is_setting(o))
			continue;
		assert_true(o->size > 0);
		assert_true(o->offset + o->size <= sizeof(struct box_config));
		for (size_t j = 0; j < i; j++)   /* no two rows write one field */
			if (box_opt_is_setting(&box_opts[j]))
				assert_true(box_opts[j].offset + box_opts[j].size <= o->offset ||
					    o->offset + o->size <= box_opts[j].offset);
		switch (o->type) {
		case BOX_OPT_UINT:
		case BOX_OPT_SIZE:
		case BOX_OPT_OCTAL:
			assert_true(o->size == 2 || o->size == 4 || o->size == 8);
			assert_true(o->min <= o->max);
			assert_true(o->size == 8 || o->max < (1ull << (8 * o->size)));
			break;
		case BOX_OPT_ENUM:
			assert_int_equal(o->size, sizeof(int));
			assert_non_null(o->choices);
			assert_non_null(o->choices[0].name);
			break;
		case BOX_OPT_BOOL:
			assert_int_equal(o->size, sizeof(bool));
			break;
		default:
			break;
		}
	}
}

/* Every default parses, lies within [min, max] (or is the row's 0), and
 * prints back exactly as written; no default prints "none". */
static void table__defaults_valid_and_canonical(void **state)
{
	struct box_config c;
	char err[256], buf[512];

	(void)state;
	box_config_defaults(&c);
	for (size_t i = 0; i < box_nopts; i++) {
		const struct box_opt *o = &box_opts[i];
		if (!box_opt_is_setting(o))
			continue;
		if (o->def) {
			struct box_config z;
			memset(&z, 0, sizeof(z));
			if (box_opt_set(&z, o, o->def, err, sizeof(err)) != 0)
				fail_msg("--%s: default '%s' does not parse: %s", o->name, o->def, err);
		}
		assert_true(box_opt_show(&c, o, buf, sizeof(buf)) > 0);
		if (strcmp(buf, o->def ? o->def : "none") != 0)
			fail_msg("--%s: default '%s' shows as '%s'", o->name,
				 o->def ? o->def : "(none)", buf);
	}
}

static void defaults__equal_parsing_nothing(void **state)
{
	struct box_config a, b, z;
	char err[256], *argv[] = { "pboxd", NULL };

	(void)state;
	box_config_defaults(&a);
	box_config_defaults(&b);
	assert_int_equal(box_config_parse(&b, 1, argv, err, sizeof(err)), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	/* and what setting every row's default on a zeroed config gives */
	memset(&z, 0, sizeof(z));
	for (size_t i = 0; i < box_nopts; i++)
		if (box_opt_is_setting(&box_opts[i]) && box_opts[i].def)
			assert_int_equal(box_opt_set(&z, &box_opts[i], box_opts[i].def, err, sizeof(err)), 0);
	assert_memory_equal(&a, &z, sizeof(a));
}

/* Numbers: the bounds are accepted and print back; one beyond is refused
 * with the range in the message. */
static void set__bounds_and_messages(void **state)
{
	struct box_config c;
	char err[256], v[64], shown[64];

	(void)state;
	box_config_defaults(&c);
	for (size_t i = 0; i < box_nopts; i++) {
		const struct box_opt *o = &box_opts[i];
		if (o->type != BOX_OPT_UINT && o->type != BOX_OPT_SIZE && o->type != BOX_OPT_OCTAL)
			continue;
		uint64_t ends[2] = { o->min, o->max };
		for (int e = 0; e < 2; e++) {
			snprintf(v, sizeof(v), o->type == BOX_OPT_OCTAL ? "0%llo" : "%llu",
				 (unsigned long long)ends[e]);
			if (box_opt_set(&c, o, v, err, sizeof(err)) != 0)
				fail_msg("--%s %s: %s", o->name, v, err);
			assert_true(box_opt_show(&c, o, shown, sizeof(shown)) > 0);
			assert_int_equal(box_opt_set(&c, o, shown, err, sizeof(err)), 0);
		}
		snprintf(v, sizeof(v), o->type == BOX_OPT_OCTAL ? "0%llo" : "%llu",
			 (unsigned long long)o->max + 1);
		assert_int_equal(box_opt_set(&c, o, v, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "out of range ["));
		if (o->min > 1 && !o->zero_ok) {
			snprintf(v, sizeof(v), "%llu", (unsigned long long)o->min - 1);
			assert_int_equal(box_opt_set(&c, o, v, err, sizeof(err)), -EINVAL);
		}
	}
}

static void set__enum_and_bool_choices(void **state)
{
	struct box_config c;
	char err[256], buf[64];
	const struct box_opt *fanout = box_opt_find("fanout"), *level = box_opt_find("log-level");

	(void)state;
	box_config_defaults(&c);
	assert_int_equal(box_opt_set(&c, fanout, "copy", err, sizeof(err)), 0);
	assert_int_equal(c.fanout, BOX_FANOUT_COPY);
	assert_int_equal(box_opt_set(&c, fanout, "fast", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "'fast' is not one of auto, shared, copy");
	assert_int_equal(box_opt_set(&c, level, "notice", err, sizeof(err)), 0);
	assert_int_equal(box_opt_show(&c, level, buf, sizeof(buf)), 6);
	assert_string_equal(buf, "notice");
	assert_int_equal(box_opt_range(level, buf, sizeof(buf)), 28);
	assert_string_equal(buf, "error|warn|notice|info|debug");
	assert_int_equal(box_opt_range(box_opt_find("mtu"), buf, sizeof(buf)), 14);
	assert_string_equal(buf, "0 or 576..9000");
	assert_int_equal(box_opt_range(box_opt_find("chunk-bytes"), buf, sizeof(buf)), 7);
	assert_string_equal(buf, "64..64M");
	assert_int_equal(box_opt_range(box_opt_find("control"), buf, sizeof(buf)), 0);
	assert_int_equal(box_opt_range(box_opt_find("rpc-socket-mode"), buf, 4), -ENOSPC);
}

static void show__ip_list_and_secret(void **state)
{
	struct box_config c;
	char err[256], buf[128], path[64] = "/tmp/pbox-test-options-XXXXXX";
	const struct box_opt *ip = box_opt_find("ip"), *sec = box_opt_find("operator_secret_file");

	(void)state;
	box_config_defaults(&c);
	assert_int_equal(box_opt_set(&c, ip, "0:198.18.0.1/24", err, sizeof(err)), 0);
	assert_int_equal(box_opt_set(&c, ip, "3:10.1.2.3/8", err, sizeof(err)), 0);
	assert_true(box_opt_show(&c, ip, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "0:198.18.0.1/24 3:10.1.2.3/8");
	assert_int_equal(box_opt_show(&c, ip, buf, 8), -ENOSPC);

	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not-shown-anywhere-1234\n", 24), 24);
	close(fd);
	chmod(path, 0600);
	assert_non_null(sec);
	assert_int_equal(box_opt_set(&c, sec, path, err, sizeof(err)), 0);
	assert_true(box_opt_show(&c, sec, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "set");
	assert_int_equal(box_opt_set(&c, sec, "none", err, sizeof(err)), 0);
	assert_int_equal(c.operator_secret_len, 0);
	assert_int_equal(c.operator_secret[0], 0);
	unlink(path);
}

static void usage__every_row_with_default_and_range(void **state)
{
	char *text = NULL, want[256], range[128];
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	(void)state;
	box_config_usage(f);
	fclose(f);
	for (size_t i = 0; i < box_nopts; i++) {
		const struct box_opt *o = &box_opts[i];
		snprintf(want, sizeof(want), "  --%s%s%s ", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
		if (!strstr(text, want))
			fail_msg("--help lacks '%s'", want);
		if (!box_opt_is_setting(o))
			continue;
		box_opt_range(o, range, sizeof(range));
		snprintf(want, sizeof(want), "(default %s%s%s)", o->def ? o->def : "none",
			 range[0] && strcmp(range, o->arg) ? "; " : "",
			 range[0] && strcmp(range, o->arg) ? range : "");
		if (!strstr(text, want))
			fail_msg("--help lacks '%s' for --%s", want, o->name);
	}
	free(text);
}

/* ---- the docs check ---- */

static FILE *open_doc(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		fail_msg("cannot open %s: run the unit tests from the repository root (make unit)", path);
	return f;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	char *e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n'))
		*--e = '\0';
	return s;
}

/* A markdown table cell as text: backticks dropped, "\|" unescaped. */
static void cell_text(const char *cell, char *out, size_t len)
{
	size_t n = 0;
	for (const char *p = cell; *p && n + 1 < len; p++) {
		if (*p == '`')
			continue;
		if (*p == '\\' && p[1] == '|')
			p++;
		out[n++] = *p;
	}
	out[n] = '\0';
	snprintf(out, len, "%s", trim(out));
}

/* Split a table line "| a | b \| c | d |" into cells; returns how many. */
static int split_cells(char *line, char **cells, int max)
{
	int n = 0;
	char *p = strchr(line, '|');

	while (p && n < max) {
		char *start = ++p;
		while (*p && !(*p == '|' && p[-1] != '\\'))
			p++;
		if (!*p)
			break;
		*p = '\0';
		cells[n++] = start;
	}
	return n;
}

#define OPTIONS_SECTION "## Options and the config file"

/*
 * docs/operations.md, section "Options and the config file": a row
 * | `--NAME ARG` | DEFAULT | RANGE | meaning |
 * for every option but --help, DEFAULT as the table writes it (none if it
 * has none), RANGE as box_opt_range gives it (- if it has none); no row
 * for an option the table lacks.
 */
static void docs__operations_md_shows_every_option_and_default(void **state)
{
	FILE *f = open_doc("docs/operations.md");
	bool seen[128] = { false };
	char line[4096], def[256], range[256], want[256];
	int lineno = 0, bad = 0, in_section = 0;

	(void)state;
	assert_true(box_nopts <= 128);
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (strncmp(line, "## ", 3) == 0)
			in_section = strncmp(line, OPTIONS_SECTION, strlen(OPTIONS_SECTION)) == 0;
		if (!in_section || strncmp(line, "| `--", 5) != 0)
			continue;
		char *cells[8] = { NULL };
		char name[64];
		int n = split_cells(line, cells, 8);
		if (n < 1)
			continue;
		cell_text(cells[0], name, sizeof(name));
		name[strcspn(name + 2, " ") + 2] = '\0';
		const struct box_opt *o = box_opt_find(name + 2);
		if (!o) {
			print_error("docs/operations.md:%d: %s is not an option of pboxd\n", lineno, name);
			bad++;
			continue;
		}
		seen[o - box_opts] = true;
		if (n < 4) {
			print_error("docs/operations.md:%d: %s: expected | option | default | range | meaning |\n",
				    lineno, name);
			bad++;
			continue;
		}
		cell_text(cells[1], def, sizeof(def));
		cell_text(cells[2], range, sizeof(range));
		if (strcmp(def, o->def ? o->def : "none") != 0) {
			print_error("docs/operations.md:%d: %s: default '%s', the table says '%s'\n",
				    lineno, name, def, o->def ? o->def : "none");
			bad++;
		}
		box_opt_range(o, want, sizeof(want));
		if (strcmp(range, want[0] ? want : "-") != 0) {
			print_error("docs/operations.md:%d: %s: range '%s', the table says '%s'\n",
				    lineno, name, range, want[0] ? want : "-");
			bad++;
		}
	}
	fclose(f);
	for (size_t i = 0; i < box_nopts; i++)
		if (!seen[i] && box_opts[i].type != BOX_OPT_FLAG) {
			print_error("docs/operations.md: no row for --%s (default %s)\n", box_opts[i].name,
				    box_opts[i].def ? box_opts[i].def : "none");
			bad++;
		}
	if (bad)
		fail_msg("docs/operations.md disagrees with control/options.c in %d place(s)", bad);
}

/*
 * deploy/pboxd.conf: it reads as a config file, and every setting appears
 * as "NAME = VALUE" or commented out as "# NAME = VALUE"; an option with a
 * default has a line with exactly that default.
 */
static void docs__pboxd_conf_shows_every_option_and_default(void **state)
{
	FILE *f = open_doc("deploy/pboxd.conf");
	bool seen[128] = { false }, has_def[128] = { false };
	char line[1024], err[512];
	int bad = 0;
	struct box_config c;

	(void)state;
	box_config_defaults(&c);
	if (box_config_read_ini(&c, "deploy/pboxd.conf", err, sizeof(err)) != 0)
		fail_msg("deploy/pboxd.conf does not read as a config file: %s", err);
	while (fgets(line, sizeof(line), f)) {
		char *s = trim(line);
		if (*s == '#')
			s = trim(s + 1);
		char *eq = strchr(s, '=');
		if (!eq)
			continue;
		*eq = '\0';
		const struct box_opt *o = box_opt_find(trim(s));
		if (!o)
			continue;     /* prose, or a key read_ini already refused */
		seen[o - box_opts] = true;
		if (o->def && strcmp(trim(eq + 1), o->def) == 0)
			has_def[o - box_opts] = true;
	}
	fclose(f);
	for (size_t i = 0; i < box_nopts; i++) {
		const struct box_opt *o = &box_opts[i];
		if (!box_opt_is_setting(o))
			continue;
		if (!seen[i]) {
			print_error("deploy/pboxd.conf: no line for %s (default %s)\n", o->name,
				    o->def ? o->def : "none");
			bad++;
		} else if (o->def && !has_def[i]) {
			print_error("deploy/pboxd.conf: no line '%s = %s' (the table's default)\n",
				    o->name, o->def);
			bad++;
		}
	}
	if (bad)
		fail_msg("deploy/pboxd.conf disagrees with control/options.c in %d place(s)", bad);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(table__every_row_complete),
		cmocka_unit_test(table__fields_fit_their_rows),
		cmocka_unit_test(table__defaults_valid_and_canonical),
		cmocka_unit_test(defaults__equal_parsing_nothing),
		cmocka_unit_test(set__bounds_and_messages),
		cmocka_unit_test(set__enum_and_bool_choices),
		cmocka_unit_test(show__ip_list_and_secret),
		cmocka_unit_test(usage__every_row_with_default_and_range),
		cmocka_unit_test(docs__operations_md_shows_every_option_and_default),
		cmocka_unit_test(docs__pboxd_conf_shows_every_option_and_default),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
