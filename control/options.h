/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * options.h - pboxd's options as one table (control/options.c), in the
 * style of Redis' static_configs[]: a row per option with its name, type,
 * default, allowed range, field of struct box_config and help text.
 *
 * Everything that knows an option reads its row: the defaults
 * (box_config_defaults), the command line and the INI file
 * (control/config.c, control/config_ini.c), --help, what box_status
 * reports (control/box_rpc.c, shown by `pboxctl status`) and the check
 * that docs/operations.md and deploy/pboxd.conf show every option with
 * its default (tests/unit/test_options.c). An option's default is written
 * once, in its row.
 */
#ifndef PBOX_OPTIONS_H
#define PBOX_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control/box.h"

enum box_opt_type {
	BOX_OPT_UINT,         /* decimal integer in [min, max]; field of 2, 4 or 8 bytes */
	BOX_OPT_SIZE,         /* bytes, optional binary suffix K, M, G, T; in [min, max] */
	BOX_OPT_OCTAL,        /* octal integer (a file mode) in [min, max]; 4-byte field */
	BOX_OPT_BOOL,         /* on | off; bool field */
	BOX_OPT_ENUM,         /* one of the row's choices; int field */
	BOX_OPT_STRING,       /* text shorter than the field; "" or none = empty */
	BOX_OPT_HOSTPORT,     /* ADDR:PORT with a port in [1, 65535]; "" or none = off */
	BOX_OPT_IP_LIST,      /* PORT:ADDR/PREFIX, repeatable (nports, ip[]) */
	BOX_OPT_SECRET_FILE,  /* a mode-600 file; the field keeps its secret, never shown */
	BOX_OPT_CONFIG,       /* an INI file to read (command line only; not a setting) */
	BOX_OPT_FLAG,         /* takes no value (--help; not a setting) */
};

/* A name an ENUM option accepts and the value it stores. */
struct box_opt_choice {
	const char *name;
	int value;
};

struct box_opt {
	const char *name;       /* --NAME on the command line, NAME in the INI file */
	enum box_opt_type type;
	const char *arg;        /* the value's placeholder in --help ("N", "BYTES") */
	const char *def;        /* default, written as the option's value would be
				 * ("32K", "0660", "on"); NULL: none (field zero) */
	uint64_t min, max;      /* UINT, SIZE, OCTAL: the allowed range */
	bool zero_ok;           /* UINT: 0 is accepted besides [min, max] */
	size_t offset, size;    /* the field in struct box_config */
	const struct box_opt_choice *choices; /* ENUM: ended by a NULL name */
	const char *help;       /* what it does, one sentence, no default or range */
};

/* The table, in --help order. */
extern const struct box_opt box_opts[];
extern const size_t box_nopts;

/* The row named name (INI keys may use '_' for '-'); NULL if none. */
const struct box_opt *box_opt_find(const char *name);

/* Whether o is a field of struct box_config (not --config or --help). */
bool box_opt_is_setting(const struct box_opt *o);

/*
 * Set o in c from its value as text. Returns 0, or -EINVAL with what is
 * wrong with the value in err (the caller names the option). CONFIG and
 * FLAG rows are not set here (-EINVAL).
 */
int box_opt_set(struct box_config *c, const struct box_opt *o, const char *v,
		char *err, size_t errlen);

/*
 * o's value in c as an option value ("32K", "0660", "on", "none"), the
 * default's form, so show(defaults) == def. A secret shows as "set" or
 * "none", never itself. Returns the length, or -ENOSPC if buf is too small.
 */
int box_opt_show(const struct box_config *c, const struct box_opt *o,
		 char *buf, size_t len);

/*
 * The values o accepts, for --help and the docs: "1..64", "64..64M",
 * "0 or 576..9000", "auto|shared|copy", or "" where any text of the right
 * form goes. Returns the length, or -ENOSPC.
 */
int box_opt_range(const struct box_opt *o, char *buf, size_t len);

/*
 * Read the [pboxd] section of an INI file into c (control/config_ini.c):
 * keys are option names, `ip` may repeat, other sections are ignored.
 * Returns 0 or -EINVAL with "FILE:LINE: reason" in err.
 */
int box_config_read_ini(struct box_config *c, const char *path, char *err, size_t errlen);

#endif
