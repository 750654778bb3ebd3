/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pboxctl_top.c - `pboxctl top`: a live view of the box, redrawn every
 * interval: per port packets and megabytes per second in and out and
 * frames missed; per lcore packets per second, the share of time its polls
 * found work (BUSY%: busy_ns, not the share of polls: an empty poll takes
 * 0.1 us, or 20 us with --idle-sleep-us 20),
 * rounds, NACKs and PS updates per second; per job its state, ranks,
 * rounds, megabytes reduced and NACKs per second. Rates are differences of
 * box_stats and job_list between two samples, over the time between them.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/rpc_client.h"
#include "tools/pboxctl_top.h"

struct sample {
	json_t *stats, *jobs;  /* box_stats and job_list results */
	double t;              /* CLOCK_MONOTONIC seconds */
};

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One sample on a connection of its own: the box closes a connection
 * that holds no rank and stays silent for --idle-timeout-ms, which an
 * interval may exceed. */
static int take(struct ctl *c, struct sample *s)
{
	int rc;

	if (c->rpc) {
		rpc_client_close(c->rpc);
		c->rpc = NULL;
	}
	rc = call(c, "box_stats", NULL, &s->stats);

	if (rc == 0 && (rc = call(c, "job_list", NULL, &s->jobs)) != 0)
		json_decref(s->stats);
	s->t = mono_s();
	return rc;
}

static void drop_sample(struct sample *s)
{
	json_decref(s->stats);
	json_decref(s->jobs);
	memset(s, 0, sizeof(*s));
}

/* The element of array a whose field key equals v (ports, lcores, jobs
 * may come and go between samples). */
static const json_t *find(const json_t *a, const char *key, const json_t *v)
{
	size_t i;
	json_t *e;

	json_array_foreach(a, i, e)
		if (json_equal(json_object_get(e, key), v))
			return e;
	return NULL;
}

/* Per second between the samples: (now.k - before.k) / dt; 0 if absent. */
static double rate(const json_t *now, const json_t *before, const char *k, double dt)
{
	if (!now || !before || dt <= 0)
		return 0;
	long long d = jint(now, k) - jint(before, k);
	return d > 0 ? (double)d / dt : 0;
}

static void ports(const struct sample *a, const struct sample *b, double dt)
{
	static const char *const h[] = { "PORT", "RX_PPS", "TX_PPS", "RX_MB/S", "TX_MB/S",
					 "MISSED/S" };
	const json_t *pa = json_object_get(a->stats, "ports");
	struct table t;
	size_t i;
	json_t *p;

	table_init(&t, 6, h);
	json_array_foreach(json_object_get(b->stats, "ports"), i, p) {
		const json_t *q = find(pa, "port", json_object_get(p, "port"));
		table_cell(&t, "%lld", jint(p, "port"));
		table_cell(&t, "%.0f", rate(p, q, "ipackets", dt));
		table_cell(&t, "%.0f", rate(p, q, "opackets", dt));
		table_cell(&t, "%.1f", rate(p, q, "ibytes", dt) / 1e6);
		table_cell(&t, "%.1f", rate(p, q, "obytes", dt) / 1e6);
		table_cell(&t, "%.0f", rate(p, q, "imissed", dt));
	}
	table_print(&t);
}

static void lcores(const struct sample *a, const struct sample *b, double dt)
{
	static const char *const h[] = { "LCORE", "RX_PPS", "TX_PPS", "BUSY%", "ROUNDS/S",
					 "NACKS/S", "UPDATES/S" };
	const json_t *la = json_object_get(a->stats, "lcores");
	struct table t;
	size_t i;
	json_t *l;

	table_init(&t, 7, h);
	json_array_foreach(json_object_get(b->stats, "lcores"), i, l) {
		const json_t *m = find(la, "index", json_object_get(l, "index"));
		double busy = rate(l, m, "busy_ns", dt) / 1e7; /* ns/s as % */
		table_cell(&t, "%lld", jint(l, "index"));
		table_cell(&t, "%.0f", rate(l, m, "rx", dt));
		table_cell(&t, "%.0f", rate(l, m, "tx", dt));
		table_cell(&t, "%.1f", busy < 100 ? busy : 100.0);
		table_cell(&t, "%.0f", rate(l, m, "completes", dt));
		table_cell(&t, "%.0f", rate(l, m, "nacks", dt));
		table_cell(&t, "%.0f", rate(l, m, "updates", dt));
	}
	table_print(&t);
}

static void jobs(const struct sample *a, const struct sample *b, double dt)
{
	static const char *const h[] = { "JOB", "STATE", "RANKS", "ROUNDS/S", "MB/S", "NACKS/S" };
	const json_t *ja = json_object_get(a->jobs, "jobs");
	struct table t;
	size_t i;
	json_t *j;

	table_init(&t, 6, h);
	json_array_foreach(json_object_get(b->jobs, "jobs"), i, j) {
		const json_t *k = find(ja, "job_id", json_object_get(j, "job_id"));
		table_cell(&t, "%s", jstr(j, "job"));
		table_cell(&t, "%s", jstr(j, "state"));
		table_cell(&t, "%lld/%lld", jint(j, "joined"), jint(j, "world"));
		table_cell(&t, "%.0f", rate(j, k, "rounds", dt));
		table_cell(&t, "%.1f", rate(j, k, "bytes_reduced", dt) / 1e6);
		table_cell(&t, "%.0f", rate(j, k, "nacks", dt));
	}
	table_print(&t);
}

int cmd_top(struct ctl *c, unsigned interval_ms, unsigned count)
{
	struct sample prev, now;
	int tty = isatty(STDOUT_FILENO), rc;
	struct timespec pause = { interval_ms / 1000, (long)(interval_ms % 1000) * 1000000L };

	if ((rc = take(c, &prev)))
		return rc;
	for (unsigned frame = 0; count == 0 || frame < count; frame++) {
		nanosleep(&pause, NULL);
		if ((rc = take(c, &now))) {
			drop_sample(&prev);
			return rc;
		}
		double dt = now.t - prev.t;
		time_t wall = time(NULL);
		char hms[16];
		strftime(hms, sizeof(hms), "%H:%M:%S", localtime(&wall));
		if (tty)
			fputs("\033[H\033[2J", stdout);
		printf("pbox top  %s  every %.1f s  (%zu jobs)\n\n", hms, dt,
		       json_array_size(json_object_get(now.jobs, "jobs")));
		ports(&prev, &now, dt);
		putchar('\n');
		lcores(&prev, &now, dt);
		putchar('\n');
		jobs(&prev, &now, dt);
		if (!tty)
			putchar('\n');
		fflush(stdout);
		drop_sample(&prev);
		prev = now;
	}
	drop_sample(&prev);
	return 0;
}
