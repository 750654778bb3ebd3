/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pboxctl_fleet.c - `pboxctl --box a,b,... jobs` and `job show NAME`: one
 * view of a fleet of independent boxes, each asked for its jobs
 * (job_list) twice, --interval apart. A job spread over the fleet
 * (docs/protocol.md "Fleet placement") has a row per box with its
 * partitions there (KEYS), their memory and the rates, and a totals row.
 * Boxes know nothing of each other: a job's rows are matched by name, and
 * the placement hash its ranks joined with is shown so an operator sees
 * that every box has the same one. A box that cannot be reached is
 * named and the others still shown.
 */
#include "tools/pboxctl_fleet.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/rpc_client.h"

#define FLEET_MAX 64

struct fleet_box {
	char name[256];              /* as listed */
	char target[264];            /* for rpc_client_connect */
	struct ctl ctl;
	json_t *before, *after;      /* job_list results, NULL if none */
	double t0, t1;               /* when they came (CLOCK_MONOTONIC s) */
	int rc;                      /* 0, EXIT_UNREACHABLE or EXIT_FAILED */
	char msg[512];
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The boxes of list into b (at most FLEET_MAX); their count, or -1 with
 * the reason printed. */
static int fleet_split(const char *list, struct fleet_box *b)
{
	int n = 0;
	const char *s = list;

	for (;;) {
		const char *e = strchr(s, ',');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		char host[256], port[16];

		if (len == 0 || len >= sizeof(b[0].name)) {
			fprintf(stderr, "pboxctl: --box '%s': %s box name\n", list,
				len ? "too long a" : "an empty");
			return -1;
		}
		if (n == FLEET_MAX) {
			fprintf(stderr, "pboxctl: --box: more than %d boxes\n", FLEET_MAX);
			return -1;
		}
		memset(&b[n], 0, sizeof(b[n]));
		memcpy(b[n].name, s, len);
		if (strncmp(b[n].name, "unix:", 5) == 0)
			snprintf(b[n].target, sizeof(b[n].target), "%s", b[n].name);
		else if (strchr(b[n].name, '/'))
			snprintf(b[n].target, sizeof(b[n].target), "unix:%s", b[n].name);
		else if (rpc_hostport_split(b[n].name, host, sizeof(host), port, sizeof(port)) < 0) {
			fprintf(stderr, "pboxctl: --box: '%s' is not ADDR:PORT (or a socket path)\n",
				b[n].name);
			return -1;
		} else
			snprintf(b[n].target, sizeof(b[n].target), "%s", b[n].name);
		for (int i = 0; i < n; i++) {
			if (strcmp(b[i].target, b[n].target) == 0) {
				fprintf(stderr, "pboxctl: --box: box %s is listed twice\n", b[n].name);
				return -1;
			}
		}
		n++;
		if (!e)
			return n;
		s = e + 1;
	}
}

int fleet_check(const struct ctl *c)
{
	struct fleet_box *b = calloc(FLEET_MAX, sizeof(*b));
	int n = b ? fleet_split(c->boxes, b) : -1;

	free(b);
	return n < 0 ? EXIT_USAGE : EXIT_OK;
}

/* job_list of box b into *out (replacing it), or b->rc and b->msg. */
static void sample(struct fleet_box *b, json_t **out, double *t)
{
	json_t *r = NULL;

	if (b->rc)
		return;
	b->rc = call_quiet(&b->ctl, "job_list", NULL, &r, b->msg, sizeof(b->msg));
	if (b->rc == 0) {
		*out = r;
		*t = now_s();
	}
}

/* The entry of job name in a job_list result, or NULL. */
static const json_t *job_of(const json_t *list, const char *name)
{
	const json_t *jobs = json_object_get(list, "jobs"), *j;
	size_t i;

	json_array_foreach(jobs, i, j)
		if (strcmp(jstr(j, "job"), name) == 0)
			return j;
	return NULL;
}

/* Counter k per second between two entries of the same job (0 if the
 * job was replaced meanwhile: another id). */
static double per_s(const json_t *now, const json_t *before, const char *k, double dt)
{
	if (!before || dt <= 0 || jint(now, "job_id") != jint(before, "job_id"))
		return 0;
	long long d = jint(now, k) - jint(before, k);
	return d > 0 ? (double)d / dt : 0;
}

struct totals {
	int nboxes;
	long long keys, used;
	double rounds, bytes, nacks;
	const char *placement;       /* the first box's, NULL: none yet */
	bool differs;
};

static void row(struct table *t, const char *job, const struct fleet_box *b, const json_t *j,
		struct totals *tot)
{
	const json_t *old = job_of(b->before, job);
	double dt = b->t1 - b->t0;
	double rounds = per_s(j, old, "rounds", dt), bytes = per_s(j, old, "bytes_reduced", dt),
	       nacks = per_s(j, old, "nacks", dt);
	char hb[32];
	const char *pl = jstr(j, "placement");

	table_cell(t, "%s", job);
	table_cell(t, "%s", b->name);
	table_cell(t, "%s", jstr(j, "state"));
	table_cell(t, "%lld/%lld", jint(j, "joined"), jint(j, "world"));
	table_cell(t, "%lld", jint(j, "keys"));
	table_cell(t, "%s", human_bytes((unsigned long long)jint(j, "bytes_used"), hb, sizeof(hb)));
	table_cell(t, "%.0f", rounds);
	table_cell(t, "%.1f", bytes / 1e6);
	table_cell(t, "%.0f", nacks);
	table_cell(t, "%s", pl);
	tot->nboxes++;
	tot->keys += jint(j, "keys");
	tot->used += jint(j, "bytes_used");
	tot->rounds += rounds;
	tot->bytes += bytes;
	tot->nacks += nacks;
	if (strcmp(pl, "-") == 0)      /* no rank gave one (yet) on this box */
		return;
	if (!tot->placement)
		tot->placement = pl;
	else if (strcmp(tot->placement, pl) != 0)
		tot->differs = true;
}

static void total_row(struct table *t, const char *job, const struct totals *tot, int nboxes)
{
	char hb[32];

	table_cell(t, "%s", job);
	table_cell(t, "total (%d of %d boxes)", tot->nboxes, nboxes);
	table_cell(t, "-");
	table_cell(t, "-");
	table_cell(t, "%lld", tot->keys);
	table_cell(t, "%s", human_bytes((unsigned long long)tot->used, hb, sizeof(hb)));
	table_cell(t, "%.0f", tot->rounds);
	table_cell(t, "%.1f", tot->bytes / 1e6);
	table_cell(t, "%.0f", tot->nacks);
	table_cell(t, "%s", tot->differs ? "DIFFERS" : tot->placement ? tot->placement : "-");
}

/* The job names over every box, each once, in the order first seen. */
static json_t *job_names(const struct fleet_box *b, int n, const char *only)
{
	json_t *names = json_array(), *j;
	size_t i;

	if (only) {
		json_array_append_new(names, json_string(only));
		return names;
	}
	for (int k = 0; k < n; k++) {
		json_array_foreach(json_object_get(b[k].after, "jobs"), i, j) {
			const char *nm = jstr(j, "job");
			bool seen = false;
			size_t x;
			json_t *v;
			json_array_foreach(names, x, v)
				seen |= strcmp(json_string_value(v), nm) == 0;
			if (!seen)
				json_array_append_new(names, json_string(nm));
		}
	}
	return names;
}

static int print_table(const struct fleet_box *b, int n, const char *only)
{
	static const char *const h[] = { "JOB", "BOX", "STATE", "JOINED", "KEYS", "USED",
					 "ROUNDS/S", "MB/S", "NACKS/S", "PLACEMENT" };
	json_t *names = job_names(b, n, only), *v;
	struct table t;
	size_t i;
	int found = 0;

	if (json_array_size(names) == 0) {
		printf("no jobs\n");
		json_decref(names);
		return 0;
	}
	table_init(&t, 10, h);
	json_array_foreach(names, i, v) {
		const char *job = json_string_value(v);
		struct totals tot = { 0 };
		for (int k = 0; k < n; k++) {
			const json_t *j = b[k].rc ? NULL : job_of(b[k].after, job);
			if (j) {
				row(&t, job, &b[k], j, &tot);
			} else if (b[k].rc == 0 && only) {
				table_cell(&t, "%s", job);
				table_cell(&t, "%s", b[k].name);
				table_cell(&t, "absent");
				for (int c = 0; c < 7; c++)
					table_cell(&t, "-");
			}
		}
		found += tot.nboxes > 0;
		total_row(&t, job, &tot, n);
	}
	table_print(&t);
	json_decref(names);
	return found;
}

/* --json: per box its job_list (with rates per job) or its error. */
static void print_fleet_json(const struct fleet_box *b, int n, const char *only)
{
	json_t *out = json_object(), *arr = json_array();

	for (int k = 0; k < n; k++) {
		json_t *e = json_pack("{s:s}", "box", b[k].name);
		if (b[k].rc) {
			json_object_set_new(e, "error", json_string(b[k].msg));
			json_object_set_new(e, "unreachable", json_boolean(b[k].rc == EXIT_UNREACHABLE));
		} else {
			json_t *jobs = json_array(), *j;
			size_t i;
			json_array_foreach(json_object_get(b[k].after, "jobs"), i, j) {
				if (only && strcmp(jstr(j, "job"), only) != 0)
					continue;
				const json_t *old = job_of(b[k].before, jstr(j, "job"));
				double dt = b[k].t1 - b[k].t0;
				json_t *c = json_deep_copy(j);
				json_object_set_new(c, "rounds_per_s", json_real(per_s(j, old, "rounds", dt)));
				json_object_set_new(c, "bytes_reduced_per_s",
						    json_real(per_s(j, old, "bytes_reduced", dt)));
				json_object_set_new(c, "nacks_per_s", json_real(per_s(j, old, "nacks", dt)));
				json_array_append_new(jobs, c);
			}
			json_object_set_new(e, "jobs", jobs);
		}
		json_array_append_new(arr, e);
	}
	json_object_set_new(out, "boxes", arr);
	json_dumpf(out, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
	putchar('\n');
	json_decref(out);
}

int cmd_fleet_jobs(struct ctl *c, const char *name, unsigned interval_ms)
{
	struct fleet_box *b = calloc(FLEET_MAX, sizeof(*b));
	int n, rc = EXIT_OK;

	if (!b) {
		fprintf(stderr, "pboxctl: out of memory\n");
		return EXIT_FAILED;
	}
	n = fleet_split(c->boxes, b);
	if (n < 0) {
		free(b);
		return EXIT_USAGE;
	}
	for (int k = 0; k < n; k++) {
		b[k].ctl = *c;
		b[k].ctl.rpc = NULL;
		b[k].ctl.target = b[k].target;
		sample(&b[k], &b[k].before, &b[k].t0);
	}
	struct timespec ts = { interval_ms / 1000, (long)(interval_ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
	for (int k = 0; k < n; k++)
		sample(&b[k], &b[k].after, &b[k].t1);

	int found = 1;
	if (c->json)
		print_fleet_json(b, n, name);
	else
		found = print_table(b, n, name);
	for (int k = 0; k < n; k++) {
		if (b[k].rc) {
			printf("box %s: %s: %s\n", b[k].name,
			       b[k].rc == EXIT_UNREACHABLE ? "unreachable" : "error", b[k].msg);
			if (b[k].rc == EXIT_UNREACHABLE || rc == EXIT_OK)
				rc = b[k].rc;
		}
		json_decref(b[k].before);
		json_decref(b[k].after);
		rpc_client_close(b[k].ctl.rpc);
	}
	if (name && !found) {
		fprintf(stderr, "pboxctl: job %s is on none of the boxes that answered\n", name);
		if (rc == EXIT_OK)
			rc = EXIT_FAILED;
	}
	free(b);
	return rc;
}
