/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * config.c - pboxd's settings from the option table (options.h): the
 * defaults, the command line (after the EAL's "--"), --help, and the
 * checks between options. The INI file is read in config_ini.c through
 * the same table, so an option cannot exist in one form and not the other.
 */
#include "common/errmsg.h"
#include "control/options.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* getopt_long's id of row i; 'h' is --help's short form. */
#define OPT_ID(i) (256 + (int)(i))


void box_config_defaults(struct box_config *c)
{
	char err[256];

	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < box_nopts; i++) {
		const struct box_opt *o = &box_opts[i];
		if (o->def && box_opt_is_setting(o) && box_opt_set(c, o, o->def, err, sizeof(err)) < 0) {
			/* a broken row; tests/unit/test_options.c catches it first */
			fprintf(stderr, "pboxd: the default of --%s is invalid: %s\n", o->name, err);
			abort();
		}
	}
}

void box_config_usage(FILE *f)
{
	fprintf(f, "usage: pboxd [EAL args] -- [options]\n\n"
		"Aggregates gradient segments from pbox workers on DPDK ports.\n\n"
		"options:\n");
	for (size_t i = 0; i < box_nopts; i++) {
		const struct box_opt *o = &box_opts[i];
		char lhs[64], range[96], more[160] = "";
		snprintf(lhs, sizeof(lhs), "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
		if (box_opt_range(o, range, sizeof(range)) < 0 || (o->arg && strcmp(range, o->arg) == 0))
			range[0] = '\0';
		if (box_opt_is_setting(o))
			snprintf(more, sizeof(more), " (default %s%s%s)", o->def ? o->def : "none",
				 range[0] ? "; " : "", range);
		fprintf(f, "  %-32s %s%s\n", lhs, o->help, more);
	}
	fprintf(f, "\nSizes take a K, M, G or T suffix (binary). INI keys are the long\n"
		"option names without the leading \"--\", e.g. `max-world = 8`.\n");
}

/* Settings that depend on each other, checked once at the end. */
static int check_consistency(const struct box_config *c, char *err, size_t errlen)
{
	if (c->default_job_bytes > c->max_job_bytes)
		return errmsg(err, errlen, -EINVAL, "--job-bytes %" PRIu64 " exceeds --max-job-bytes %" PRIu64,
			    c->default_job_bytes, c->max_job_bytes);
	if (!c->control[0] && !c->rpc_socket[0])
		return errmsg(err, errlen, -EINVAL, "--control and --rpc-socket are both off: "
			    "the box could not be reached");
	return 0;
}

/* The getopt loop of box_config_parse. */
static int parse_loop(struct box_config *c, int argc, char **argv, const struct option *lo,
		      char *err, size_t errlen)
{
	char why[384];
	int id;

	while ((id = getopt_long(argc, argv, "+:h", lo, NULL)) != -1) {
		if (id == '?') {
			/* a value given to an option that takes none (--help=x):
			 * glibc's optopt is then that option's id, not a char */
			if (optopt >= OPT_ID(0) && optopt < OPT_ID(box_nopts))
				return errmsg(err, errlen, -EINVAL, "option '--%s' takes no value",
					    box_opts[optopt - OPT_ID(0)].name);
			if (optopt)
				return errmsg(err, errlen, -EINVAL, "unknown option '-%c' (see --help)", optopt);
			return errmsg(err, errlen, -EINVAL, "unknown or ambiguous option '%s' (see "
				    "--help)", argv[optind - 1]);
		}
		if (id == ':')
			return errmsg(err, errlen, -EINVAL, "option '%s' needs a value", argv[optind - 1]);
		const struct box_opt *o = id == 'h' ? box_opt_find("help") : &box_opts[id - OPT_ID(0)];
		int rc = 0;
		switch (o->type) {
		case BOX_OPT_FLAG: /* --help */
			box_config_usage(stdout);
			return 1;
		case BOX_OPT_CONFIG:
			rc = box_config_read_ini(c, optarg, why, sizeof(why));
			break;
		default:
			rc = box_opt_set(c, o, optarg, why, sizeof(why));
		}
		if (rc < 0)
			return errmsg(err, errlen, -EINVAL, "--%s: %s", o->name, why);
	}
	if (optind < argc)
		return errmsg(err, errlen, -EINVAL, "unexpected argument '%s' (options start with --; "
			    "EAL arguments go before '--')", argv[optind]);
	return check_consistency(c, err, errlen);
}

int box_config_parse(struct box_config *c, int argc, char **argv,
		     char *err, size_t errlen)
{
	struct option lo[box_nopts + 1];

	for (size_t i = 0; i < box_nopts; i++)
		lo[i] = (struct option){ box_opts[i].name,
					 box_opts[i].arg ? required_argument : no_argument,
					 NULL, OPT_ID(i) };
	lo[box_nopts] = (struct option){ 0 };
	optind = 0; /* glibc: full re-initialisation, so parse may run twice */
	opterr = 0; /* our own messages; the EAL's getopt after us prints its own */
	int rc = parse_loop(c, argc, argv, lo, err, errlen);
	opterr = 1;
	return rc;
}
