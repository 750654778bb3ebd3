/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pboxctl_common.h - what pboxctl_common.c offers pboxctl's commands
 * (pboxctl.c) and its live view (pboxctl_top.c): the command line's state,
 * the exit codes, the RPC call, JSON field access and the table printer.
 * Calls go one way: pboxctl.c -> pboxctl_top.c -> pboxctl_common.c,
 * pboxctl.c -> pboxctl_fleet.c -> pboxctl_common.c, and pboxctl.c ->
 * pboxctl_common.c.
 */
#ifndef PBOX_PBOXCTL_COMMON_H
#define PBOX_PBOXCTL_COMMON_H

#include <stddef.h>

#include <jansson.h>

#define MAX_COLS 20

/* Exit codes (docs/operations.md "pboxctl"). */
enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2, EXIT_UNREACHABLE = 3 };

struct ctl {
	const char *target;
	const char *boxes;           /* --box: a fleet, comma-separated (pboxctl_fleet.c) */
	int json;
	int timeout_ms;
	const char *secret_file;     /* --secret-file: sent with every call */
	struct rpc_client *rpc;
	/* command options, accepted anywhere on the line */
	int all;                     /* stats --all, -o wide */
	const char *reason;          /* job abort --reason */
	const char *restore;         /* job create --restore */
	const char *nonfinite;       /* job create --nonfinite */
	long long world, max_bytes, weight; /* job create; 0 = not given */
	long long job_timeout_ms;    /* job create --job-timeout-ms; 0 = not given */
	long long replace_wait_ms;   /* job create --replace-wait-ms; 0 = not given */
	long long interval_ms, count;       /* top; 0 = not given */
	int reply_timeout_ms;        /* a command's own wait for its answer (0 = timeout_ms) */
	int timeout_given;           /* --timeout was given */
	unsigned used;               /* the command options given: OPT_* bits (pboxctl.c) */
};

/* Call method on the box (params consumed); 0 and *result, or an exit
 * code with the message printed. */
int call(struct ctl *c, const char *method, json_t *params, json_t **result);
/* call, the message in msg instead of printed. */
int call_quiet(struct ctl *c, const char *method, json_t *params, json_t **result,
	       char *msg, size_t msglen);

/* Fields of a JSON object, 0 / "-" when missing. */
long long jint(const json_t *o, const char *k);
const char *jstr(const json_t *o, const char *k);

/* "1.5 MiB" into buf. */
const char *human_bytes(unsigned long long b, char *buf, size_t len);

/* An aligned text table: cells filled row by row. */
struct table {
	unsigned ncols, ncells, cap;
	char **cells;
	size_t width[MAX_COLS];
};

void table_init(struct table *t, unsigned ncols, const char *const *header);
void table_cell(struct table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void table_print(struct table *t);   /* prints and frees the cells */

#endif
