/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pboxctl.h - what pboxctl's files share (pboxctl.c: the command line, the
 * RPC call and the table printer; pboxctl_top.c: the live view).
 */
#ifndef PBOX_PBOXCTL_H
#define PBOX_PBOXCTL_H

#include <stddef.h>

#include <jansson.h>

#define MAX_COLS 20

/* Exit codes (docs/operations.md "pboxctl"). */
enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2, EXIT_UNREACHABLE = 3 };

struct ctl {
	const char *target;
	int json;
	int timeout_ms;
	const char *secret_file;     /* --secret-file: sent with every call */
	struct rpc_client *rpc;
	/* command options, accepted anywhere on the line */
	int all;                     /* stats --all, -o wide */
	const char *reason;          /* job abort --reason */
	const char *restore;         /* job create --restore */
	long long world, max_bytes, weight; /* job create; 0 = not given */
	long long interval_ms, count;       /* top; 0 = not given */
	int reply_timeout_ms;        /* a command's own wait for its answer (0 = timeout_ms) */
	int timeout_given;           /* --timeout was given */
	unsigned used;               /* the command options given: OPT_* bits */
};

/* The command options, one bit each in ctl.used (all of them counted,
 * however many times given). */
enum {
	OPT_ALL = 1u << 0, OPT_REASON = 1u << 1, OPT_WORLD = 1u << 2, OPT_MAX_BYTES = 1u << 3,
	OPT_WEIGHT = 1u << 4, OPT_RESTORE = 1u << 5, OPT_INTERVAL = 1u << 6, OPT_COUNT = 1u << 7,
};

/* An aligned text table: cells filled row by row. */
struct table {
	unsigned ncols, ncells, cap;
	char **cells;
	size_t width[MAX_COLS];
};

void table_init(struct table *t, unsigned ncols, const char *const *header);
void table_cell(struct table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void table_print(struct table *t);   /* prints and frees the cells */

/* Fields of a JSON object, 0 / "" when missing. */
long long jint(const json_t *o, const char *k);
const char *jstr(const json_t *o, const char *k);
/* "1.5 MiB" into buf. */
const char *human_bytes(unsigned long long b, char *buf, size_t len);

/* Call method on the box (params consumed); 0 and *result, or an exit
 * code with the message printed. */
int call(struct ctl *c, const char *method, json_t *params, json_t **result);
int print_json(const json_t *r);

/* pboxctl top: rates per port, lcore and job every interval_ms, count
 * frames (0 = until interrupted); the screen is redrawn on a terminal. */
int cmd_top(struct ctl *c, unsigned interval_ms, unsigned count);

#endif
