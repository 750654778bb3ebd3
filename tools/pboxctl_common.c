/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pboxctl_common.c - what pboxctl's commands (pboxctl.c) and its live view
 * (pboxctl_top.c) share, and which calls neither: the RPC call to the box
 * (its failures printed, as an exit code), JSON field access and the
 * aligned text tables.
 */
#include "tools/pboxctl_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rpc_client.h"
#include "common/secret.h"

/* msg on stderr after "pboxctl: "; returns code (an exit code). */
static int fail(int code, const char *msg)
{
	fprintf(stderr, "pboxctl: %s\n", msg);
	return code;
}

/* ---- JSON field access that tolerates missing fields ---- */

long long jint(const json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_integer(v) ? json_integer_value(v) : json_is_real(v) ? (long long)json_real_value(v) : 0;
}

const char *jstr(const json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_string(v) ? json_string_value(v) : "-";
}

/* "1.5 MiB" into buf. */
const char *human_bytes(unsigned long long b, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	unsigned u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", b);
	else
		snprintf(buf, len, "%.1f %s", v, unit[u]);
	return buf;
}

/* ---- aligned tables ---- */

void table_cell(struct table *t, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	if (t->ncells == t->cap) {
		unsigned cap = t->cap ? t->cap * 2 : 64;
		char **c = realloc(t->cells, cap * sizeof(*c));
		if (!c) {
			free(s);
			return;
		}
		t->cells = c;
		t->cap = cap;
	}
	s = s ? s : strdup("?");
	size_t w = s ? strlen(s) : 1;
	unsigned col = t->ncells % t->ncols;
	if (w > t->width[col])
		t->width[col] = w;
	t->cells[t->ncells++] = s;
}

void table_init(struct table *t, unsigned ncols, const char *const *header)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
	for (unsigned i = 0; i < ncols; i++)
		table_cell(t, "%s", header[i]);
}

static int numeric(const char *s)
{
	if (*s == '-' && s[1])
		s++;
	for (; *s; s++)
		if ((*s < '0' || *s > '9') && *s != '.')
			return 0;
	return 1;
}

/* Print and free: columns of numbers right-aligned (header too), text
 * left-aligned. */
void table_print(struct table *t)
{
	int num[MAX_COLS];

	for (unsigned c = 0; c < t->ncols; c++)
		num[c] = t->ncells > t->ncols;
	for (unsigned i = t->ncols; i < t->ncells; i++)
		if (!t->cells[i] || !numeric(t->cells[i]))
			num[i % t->ncols] = 0;
	for (unsigned i = 0; i < t->ncells; i++) {
		unsigned col = i % t->ncols;
		const char *s = t->cells[i] ? t->cells[i] : "?";
		int w = (int)t->width[col];
		int last = col == t->ncols - 1;
		if (num[col])
			printf("%*s%s", w, s, last ? "\n" : "  ");
		else if (last)
			printf("%s\n", s);
		else
			printf("%-*s  ", w, s);
		free(t->cells[i]);
	}
	free(t->cells);
	memset(t, 0, sizeof(*t));
}

/* ---- RPC ---- */

/* Over TCP every operator method carries the secret of --secret-file
 * (docs/reliability.md "Who may call what"). */
int call_quiet(struct ctl *c, const char *method, json_t *params, json_t **result,
	       char *msg, size_t msglen)
{
	struct rpc_error e;
	int rc;

	if (c->secret_file) {
		char secret[SECRET_MAX_LEN + 1], err[256];
		if (secret_load(c->secret_file, secret, err, sizeof(err)) < 0) {
			json_decref(params);
			snprintf(msg, msglen, "%s", err);
			return EXIT_FAILED;
		}
		if (!params)
			params = json_object();
		json_object_set_new(params, "secret", json_string(secret));
		memset(secret, 0, sizeof(secret));
	}
	if (!c->rpc && rpc_client_connect(c->target, c->timeout_ms, &c->rpc, &e) < 0) {
		json_decref(params);
		snprintf(msg, msglen, "%s", e.message);
		return EXIT_UNREACHABLE;
	}
	rc = rpc_client_call(c->rpc, method, params,
			     c->reply_timeout_ms ? c->reply_timeout_ms : c->timeout_ms, result, &e);
	json_decref(params);
	if (rc < 0) {
		snprintf(msg, msglen, "%s", e.message);
		return EXIT_FAILED;
	}
	return 0;
}

int call(struct ctl *c, const char *method, json_t *params, json_t **result)
{
	char msg[512];
	int rc = call_quiet(c, method, params, result, msg, sizeof(msg));

	return rc ? fail(rc, msg) : 0;
}
