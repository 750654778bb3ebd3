/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * config_ini.c - the INI file of `pboxd --config FILE`: the [pboxd]
 * section's `key = value` lines, each key an option of the table
 * (options.h) named as on the command line without "--". Errors name the
 * file and line.
 */
#include "common/errmsg.h"
#include "control/options.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>


static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* The longest line taken (without its newline). */
#define INI_LINE_MAX 1022

/* Where a line is: before any [section], in [pboxd], in another one. */
enum { INI_NONE, INI_PBOXD, INI_OTHER };

/* One line of the file: "" / comment / [section] / key = value. */
static int ini_line(struct box_config *c, char *line, int *in_section,
		    char *msg, size_t msglen)
{
	char *s = trim(line);

	if (!*s || *s == '#' || *s == ';')
		return 0;
	if (*s == '[') {
		char *e = strchr(s, ']');
		if (!e || *trim(e + 1))
			return errmsg(msg, msglen, -EINVAL, "malformed section header '%s'", s);
		*e = '\0';
		*in_section = strcmp(trim(s + 1), "pboxd") == 0 ? INI_PBOXD : INI_OTHER;
		return 0;
	}
	/* other sections belong to other tools, whatever their lines' syntax */
	if (*in_section == INI_OTHER)
		return 0;
	char *eq = strchr(s, '=');
	if (!eq)
		return errmsg(msg, msglen, -EINVAL, "expected 'key = value', got '%s'", s);
	*eq = '\0';
	char *key = trim(s), *val = trim(eq + 1);
	if (*in_section != INI_PBOXD)
		return 0; /* a key before any section */
	size_t vl = strlen(val);
	if (vl >= 2 && (val[0] == '"' || val[0] == '\'') && val[vl - 1] == val[0]) {
		val[vl - 1] = '\0';
		val++;
	}
	const struct box_opt *o = box_opt_find(key);
	if (o && o->type == BOX_OPT_CONFIG)
		return errmsg(msg, msglen, -EINVAL, "a config file cannot include another");
	if (!o || !box_opt_is_setting(o))
		return errmsg(msg, msglen, -EINVAL, "unknown option '%s'", key);
	char why[256];
	if (box_opt_set(c, o, val, why, sizeof(why)) < 0)
		return errmsg(msg, msglen, -EINVAL, "%s: %s", o->name, why);
	return 0;
}

/* The next line of f into buf (cap > INI_LINE_MAX + 1 bytes: the line,
 * its newline, a NUL): its length with the newline, 0 at the end of the
 * file; -1 for a line longer than INI_LINE_MAX, -2 for a NUL byte in it
 * (a binary or damaged file: never taken as the line's end). Reads at
 * most INI_LINE_MAX + 1 bytes, whatever the file holds. */
static int next_line(FILE *f, char *buf, size_t cap)
{
	size_t n = 0;
	int ch;

	while ((ch = getc(f)) != EOF) {
		if (ch == '\0')
			return -2;
		if (ch == '\n') {
			buf[n++] = '\n';
			break;
		}
		if (n == INI_LINE_MAX || n + 2 >= cap)
			return -1;
		buf[n++] = (char)ch;
	}
	buf[n] = '\0';
	return (int)n;
}

int box_config_read_ini(struct box_config *c, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char line[INI_LINE_MAX + 2], msg[512];
	int in_section = INI_NONE, lineno = 0, rc = 0, seen = 0, n;

	if (!f)
		return errmsg(err, errlen, -EINVAL, "cannot open '%s': %s", path, strerror(errno));
	while (rc == 0 && (n = next_line(f, line, sizeof(line))) != 0) {
		lineno++;
		if (n == -1) {
			rc = errmsg(err, errlen, -EINVAL, "%s:%d: line longer than %d characters",
				    path, lineno, INI_LINE_MAX);
			break;
		}
		if (n == -2) {
			rc = errmsg(err, errlen, -EINVAL, "%s:%d: a NUL byte (not a text file?)",
				    path, lineno);
			break;
		}
		int before = in_section;
		rc = ini_line(c, line, &in_section, msg, sizeof(msg));
		if (rc < 0)
			errmsg(err, errlen, -EINVAL, "%s:%d: %s", path, lineno, msg);
		seen |= in_section == INI_PBOXD && before != INI_PBOXD;
	}
	if (rc == 0 && ferror(f))
		rc = errmsg(err, errlen, -EINVAL, "cannot read '%s': %s", path, strerror(errno));
	fclose(f);
	if (rc == 0 && !seen)
		rc = errmsg(err, errlen, -EINVAL, "%s: no [pboxd] section", path);
	return rc;
}
