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

int box_config_read_ini(struct box_config *c, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char line[1024], msg[512];
	int in_section = INI_NONE, lineno = 0, rc = 0, seen = 0;

	if (!f)
		return errmsg(err, errlen, -EINVAL, "cannot open '%s': %s", path, strerror(errno));
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			rc = errmsg(err, errlen, -EINVAL, "%s:%d: line longer than %zu characters",
				  path, lineno, sizeof(line) - 2);
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
