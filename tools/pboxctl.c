/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pboxctl.c - the operator's command line for pboxd: a thin client of the
 * JSON-RPC control protocol (docs/rpc.md) that prints aligned tables, or
 * the raw result with --json.
 *
 *   pboxctl [--socket PATH | --control ADDR:PORT | --box A,B,...] [--json | -o FMT] CMD
 *   (options anywhere on the line; exit 0 ok, 1 failed, 2 usage, 3 unreachable)
 *     status | jobs | job show NAME | job abort NAME [--reason TEXT] |
 *     job create NAME --world N [...] | job save NAME DIR
 *     | stats [--all] | top [...]
 *
 * The top of pboxctl: `top` is in pboxctl_top.c, the fleet view (--box)
 * in pboxctl_fleet.c, and the RPC call and the table printer, which all
 * use, in pboxctl_common.c.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "common/rpc_client.h"
#include "tools/pboxctl_common.h"
#include "tools/pboxctl_fleet.h"
#include "tools/pboxctl_top.h"

#define DEFAULT_SOCKET "/run/pbox/pboxd.sock"
#define DEFAULT_TIMEOUT_MS 5000
/* job save: the box answers once every file is written (gigabytes take
 * seconds to minutes), or at its --checkpoint-timeout-ms, so its answer
 * is awaited this long unless --timeout is given (the files are written
 * by the box's checkpoint thread; its control requests go on). */
#define SAVE_TIMEOUT_MS 3600000

/* The command options, one bit each in ctl.used (all of them counted,
 * however many times given). */
enum {
	OPT_ALL = 1u << 0, OPT_REASON = 1u << 1, OPT_WORLD = 1u << 2, OPT_MAX_BYTES = 1u << 3,
	OPT_WEIGHT = 1u << 4, OPT_RESTORE = 1u << 5, OPT_INTERVAL = 1u << 6, OPT_COUNT = 1u << 7,
	OPT_JOB_TIMEOUT = 1u << 8, OPT_REPLACE_WAIT = 1u << 9, OPT_NONFINITE = 1u << 10,
};

static int complain(int code, const char *fmt, va_list ap)
{
	fputs("pboxctl: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	return code;
}

/* A command line pboxctl cannot run: exit code 2. */
static int bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int bad_usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = complain(EXIT_USAGE, fmt, ap);
	va_end(ap);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pboxctl [--socket PATH | --control ADDR:PORT | --box A,B,...]\n"
		"               [--json | -o FORMAT]\n"
		"               [--timeout MS] [--secret-file FILE] CMD [ARGS]\n"
		"(options may come anywhere on the line, before or after CMD)\n"
		"\n"
		"commands:\n"
		"  status                        box, ports, lcores and pboxd's options\n"
		"  jobs                          the jobs on the box\n"
		"  job show NAME                 one job: ranks and keys\n"
		"  job abort NAME [--reason TEXT] abort a job; its workers get an error\n"
		"  job create NAME --world N [--memory SIZE] [--weight W] [--restore DIR]\n"
		"             [--job-timeout-ms MS] [--replace-wait-ms MS]\n"
		"             [--nonfinite abort|skip|pass]\n"
		"                                create a job before its workers join, with\n"
		"                                SIZE of job memory (e.g. 2G; --max-bytes B\n"
		"                                in bytes); with\n"
		"                                --restore its PS keys start from the\n"
		"                                checkpoints in DIR (on the box); with\n"
		"                                --nonfinite what a PS round whose gradient\n"
		"                                sum has a NaN or Inf does (default abort)\n"
		"  job save NAME DIR             checkpoint the job's PS keys (weights and\n"
		"                                optimizer state) into DIR on the box (waits\n"
		"                                up to an hour for it, unless --timeout)\n"
		"  stats [--all]                 port and lcore counters, drops by reason\n"
		"                                (non-zero drops only, unless --all)\n"
		"  top [--interval MS] [--count N]\n"
		"                                live rates per port, lcore and job (every\n"
		"                                MS, default 1000; N frames, default until ^C)\n"
		"\n"
		"options:\n"
		"  --socket PATH       pboxd's Unix socket (default $PBOX_SOCKET or %s)\n"
		"  --control ADDR:PORT pboxd's TCP control address instead of the socket\n"
		"  --box A,B,...       a fleet of boxes (ADDR:PORT or socket paths): jobs and\n"
		"                      job show NAME give one view, a row per box and a\n"
		"                      total per job, rates over --interval MS (default\n"
		"                      1000); an unreachable box is named (exit 3)\n"
		"  --json, -o json     print the raw JSON result\n"
		"  -o table|wide       tables (default); wide: every row (stats: all drop\n"
		"                      reasons, as --all)\n"
		"  --timeout MS        wait at most MS for an answer (default %d)\n"
		"  --secret-file FILE  operator secret sent with every command over --control\n"
		"                      (a box started with --operator-secret-file needs it)\n"
		"  --help              this text\n"
		"  --version           pboxctl's version\n"
		"\n"
		"exit codes: 0 done, 1 the command failed (the box refused it or answered\n"
		"an error), 2 bad command line, 3 the box could not be reached\n",
		DEFAULT_SOCKET, DEFAULT_TIMEOUT_MS);
}

/* ---- output ---- */

static int print_json(const json_t *r)
{
	json_dumpf(r, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
	putchar('\n');
	return 0;
}

/* ---- status ---- */

static void print_ports(const json_t *ports)
{
	static const char *const h[] = { "PORT", "NAME", "MAC", "IP", "MTU", "LINK", "RXQ", "STEERING", "FANOUT", "UDP_CSUM", "RX_CSUM" };
	struct table t;
	size_t i;
	json_t *p;

	table_init(&t, 11, h);
	json_array_foreach(ports, i, p) {
		table_cell(&t, "%lld", jint(p, "port"));
		table_cell(&t, "%s", jstr(p, "name"));
		table_cell(&t, "%s", jstr(p, "mac"));
		table_cell(&t, "%s", jstr(p, "ip"));
		table_cell(&t, "%lld", jint(p, "mtu"));
		table_cell(&t, "%s", jstr(p, "link"));
		table_cell(&t, "%lld", jint(p, "rx_queues"));
		table_cell(&t, "%s", jstr(p, "steering"));
		table_cell(&t, "%s", jstr(p, "fanout"));
		table_cell(&t, "%s", jstr(p, "udp_checksum"));
		table_cell(&t, "%s", jstr(p, "rx_checksum"));
	}
	table_print(&t);
}

static void print_lcores(const json_t *lcores)
{
	static const char *const h[] = { "LCORE", "INDEX", "UDP_PORT", "SOCKET" };
	struct table t;
	size_t i;
	json_t *l;

	table_init(&t, 4, h);
	json_array_foreach(lcores, i, l) {
		table_cell(&t, "%lld", jint(l, "lcore"));
		table_cell(&t, "%lld", jint(l, "index"));
		table_cell(&t, "%lld", jint(l, "udp_port"));
		table_cell(&t, "%lld", jint(l, "socket"));
	}
	table_print(&t);
}

/* pboxd's options as box_status reports them: one row per option of its
 * table (control/options.c), value and default as option values. */
static void print_config(const json_t *rows)
{
	static const char *const h[] = { "OPTION", "VALUE", "DEFAULT" };
	struct table t;
	size_t i;
	json_t *r;

	table_init(&t, 3, h);
	json_array_foreach(rows, i, r) {
		table_cell(&t, "%s", jstr(r, "option"));
		table_cell(&t, "%s", jstr(r, "value"));
		table_cell(&t, "%s", jstr(r, "default"));
	}
	table_print(&t);
}

static int cmd_status(struct ctl *c)
{
	int rc;
	json_t *r;

	if ((rc = call(c, "box_status", NULL, &r)))
		return rc;
	if (c->json)
		return print_json(r), json_decref(r), 0;
	json_t *up = json_object_get(r, "uptime_s");
	printf("pboxd %s, protocol %lld, sum kernel %s, up %.1f s, %lld job(s)\n\n",
	       jstr(r, "version"), jint(r, "protocol"), jstr(r, "kernel"),
	       json_is_number(up) ? json_number_value(up) : 0.0, jint(r, "jobs"));
	print_ports(json_object_get(r, "ports"));
	putchar('\n');
	print_lcores(json_object_get(r, "lcores"));
	putchar('\n');
	print_config(json_object_get(r, "config"));
	json_decref(r);
	return 0;
}

/* ---- jobs ---- */

static int cmd_jobs(struct ctl *c)
{
	int rc;
	static const char *const h[] = { "JOB", "ID", "STATE", "WORLD", "JOINED", "KEYS", "USED", "MAX" };
	struct table t;
	json_t *r, *j;
	size_t i;
	char b1[32], b2[32];

	if ((rc = call(c, "job_list", NULL, &r)))
		return rc;
	if (c->json)
		return print_json(r), json_decref(r), 0;
	json_t *jobs = json_object_get(r, "jobs");
	if (json_array_size(jobs) == 0) {
		printf("no jobs\n");
		json_decref(r);
		return 0;
	}
	table_init(&t, 8, h);
	json_array_foreach(jobs, i, j) {
		table_cell(&t, "%s", jstr(j, "job"));
		table_cell(&t, "%lld", jint(j, "job_id"));
		table_cell(&t, "%s", jstr(j, "state"));
		table_cell(&t, "%lld", jint(j, "world"));
		table_cell(&t, "%lld", jint(j, "joined"));
		table_cell(&t, "%lld", jint(j, "keys"));
		table_cell(&t, "%s", human_bytes((unsigned long long)jint(j, "bytes_used"), b1, sizeof(b1)));
		table_cell(&t, "%s", human_bytes((unsigned long long)jint(j, "max_bytes"), b2, sizeof(b2)));
	}
	table_print(&t);
	json_decref(r);
	return 0;
}

static void print_ranks(const json_t *ranks)
{
	static const char *const h[] = { "RANK", "JOINED", "DATA_ADDRESS", "LATE_MEAN",
					 "LATE_MAX", "NACKS", "NONFINITE" };
	struct table t;
	size_t i;
	json_t *k;

	table_init(&t, 7, h);
	json_array_foreach(ranks, i, k) {
		const json_t *late = json_object_get(k, "lateness");
		const json_t *mean = json_object_get(late, "mean_us");
		const json_t *max = json_object_get(late, "max_us");
		table_cell(&t, "%lld", jint(k, "rank"));
		table_cell(&t, "%s", json_is_true(json_object_get(k, "joined")) ? "yes" : "no");
		if (json_is_string(json_object_get(k, "data_ip")))
			table_cell(&t, "%s:%lld", jstr(k, "data_ip"), jint(k, "data_port"));
		else
			table_cell(&t, "-");
		/* how long the box waited for this rank after a round's first
		 * contribution: mean, and maximum over the last 10-20 s */
		table_cell(&t, "%.3f ms", json_is_number(mean) ? json_number_value(mean) / 1e3 : 0.0);
		table_cell(&t, "%.3f ms", json_is_number(max) ? json_number_value(max) / 1e3 : 0.0);
		table_cell(&t, "%lld", jint(late, "nacks"));
		table_cell(&t, "%lld", jint(k, "nonfinite"));
	}
	table_print(&t);
}

static void print_keys(const json_t *keys)
{
	static const char *const h[] = { "KEY", "COUNT", "DTYPE", "SEGMENTS", "CHUNKS", "DECLARED",
					 "OPTIMIZER", "SPARSE", "COLLECTIVE" };
	struct table t;
	size_t i;
	json_t *k;

	table_init(&t, 9, h);
	json_array_foreach(keys, i, k) {
		table_cell(&t, "%lld", jint(k, "key"));
		table_cell(&t, "%lld", jint(k, "count"));
		table_cell(&t, "%s", jstr(k, "dtype"));
		table_cell(&t, "%lld", jint(k, "nsegs"));
		table_cell(&t, "%lld", jint(k, "nchunks"));
		table_cell(&t, "%lld", jint(k, "declared"));
		table_cell(&t, "%s", json_is_string(json_object_get(k, "optimizer")) ?
			   jstr(k, "optimizer") : "-");
		table_cell(&t, "%s", json_is_true(json_object_get(k, "sparse")) ? "yes" : "no");
		table_cell(&t, "%s", json_is_string(json_object_get(k, "collective")) ?
			   jstr(k, "collective") : "allreduce");
	}
	table_print(&t);
}

/* "waiting for ranks 0, 3 for 12.3 s (timeout 1800 s)": the late ranks its
 * open rounds wait for (job_status's waiting_for), or the timeout alone. */
static void print_waiting(const json_t *r)
{
	json_t *who = json_object_get(r, "waiting_for"), *w;
	size_t i;
	double tmo = (double)jint(r, "timeout_ms") / 1000.0;

	if (!json_array_size(who)) {
		printf("waiting for no rank (timeout for a late rank %.0f s)\n", tmo);
		return;
	}
	printf("waiting for rank%s", json_array_size(who) > 1 ? "s" : "");
	json_array_foreach(who, i, w)
		printf("%s%lld", i ? ", " : " ", (long long)json_integer_value(w));
	printf(" for %.1f s (timeout %.0f s)\n",
	       json_real_value(json_object_get(r, "waiting_s")), tmo);
}

static int cmd_job_show(struct ctl *c, const char *name)
{
	int rc;
	json_t *r;
	char b1[32], b2[32];

	if ((rc = call(c, "job_status", json_pack("{s:s}", "job", name), &r)))
		return rc;
	if (c->json)
		return print_json(r), json_decref(r), 0;
	printf("job %s (id %lld): %s, %lld of %lld ranks joined\n", jstr(r, "job"),
	       jint(r, "job_id"), jstr(r, "state"), jint(r, "joined"), jint(r, "world"));
	if (json_is_string(json_object_get(r, "reason")))
		printf("reason: %s\n", jstr(r, "reason"));
	print_waiting(r);
	printf("segments %lld bytes, %lld keys, weight %lld, memory %s used of %s\n\n",
	       jint(r, "seg_bytes"), jint(r, "keys"), jint(r, "weight"),
	       human_bytes((unsigned long long)jint(r, "bytes_used"), b1, sizeof(b1)),
	       human_bytes((unsigned long long)jint(r, "max_bytes"), b2, sizeof(b2)));
	const json_t *nf = json_object_get(r, "nonfinite");
	if (json_is_object(nf))
		printf("non-finite PS gradients: policy %s, %lld segment rounds, %lld skipped\n\n",
		       jstr(nf, "policy"), jint(nf, "rounds"), jint(nf, "skipped"));
	print_ranks(json_object_get(r, "ranks"));
	json_t *keys = json_object_get(r, "key_list");
	if (json_array_size(keys)) {
		putchar('\n');
		print_keys(keys);
	}
	json_decref(r);
	return 0;
}

static int cmd_job_abort(struct ctl *c, const char *name, const char *reason)
{
	int rc;
	json_t *r;
	json_t *p = json_pack("{s:s}", "job", name);

	if (reason)
		json_object_set_new(p, "reason", json_string(reason));
	if ((rc = call(c, "job_abort", p, &r)))
		return rc;
	if (c->json)
		print_json(r);
	else
		printf("job %s aborted\n", name);
	json_decref(r);
	return 0;
}

/* A directory for the box: as given over --control (the box's own path),
 * made absolute here over the Unix socket (pboxctl runs on the box): one
 * that does not exist too, so that the box's answer names the path meant. */
static const char *box_dir(const struct ctl *c, const char *dir, char *buf)
{
	char cwd[PATH_MAX];

	if (dir[0] == '/' || strncmp(c->target, "unix:", 5) != 0)
		return dir;
	if (realpath(dir, buf))
		return buf;
	if (!getcwd(cwd, sizeof(cwd)) ||
	    (size_t)snprintf(buf, PATH_MAX, "%s/%s", strcmp(cwd, "/") ? cwd : "", dir) >= PATH_MAX)
		return dir;
	return buf;
}

static int cmd_job_save(struct ctl *c, const char *name, const char *dir)
{
	char abs[PATH_MAX];
	json_t *r;

	if (!c->timeout_given)
		c->reply_timeout_ms = SAVE_TIMEOUT_MS;
	int rc = call(c, "job_save", json_pack("{s:s, s:s}", "job", name, "dir",
					       box_dir(c, dir, abs)), &r);
	if (rc)
		return rc;
	if (c->json)
		return print_json(r), json_decref(r), 0;
	printf("job %s: %zu PS keys saved in %s (%lld bytes)\n", name,
	       json_array_size(json_object_get(r, "keys")), jstr(r, "dir"), jint(r, "bytes"));
	json_decref(r);
	return 0;
}

/* job create NAME --world N [--max-bytes B] [--weight W] [--restore DIR]
 * [--nonfinite P] */
static int cmd_job_create(struct ctl *c, const char *name)
{
	char abs[PATH_MAX];
	json_t *p = json_pack("{s:s, s:I}", "job", name, "world", (json_int_t)c->world), *r;
	int rc;

	if (c->max_bytes)
		json_object_set_new(p, "max_bytes", json_integer(c->max_bytes));
	if (c->weight)
		json_object_set_new(p, "weight", json_integer(c->weight));
	if (c->job_timeout_ms)
		json_object_set_new(p, "timeout_ms", json_integer(c->job_timeout_ms));
	if (c->replace_wait_ms)
		json_object_set_new(p, "replace_wait_ms", json_integer(c->replace_wait_ms));
	if (c->restore)
		json_object_set_new(p, "restore", json_string(box_dir(c, c->restore, abs)));
	if (c->nonfinite)
		json_object_set_new(p, "nonfinite", json_string(c->nonfinite));
	if ((rc = call(c, "job_create", p, &r)))
		return rc;
	if (c->json)
		return print_json(r), json_decref(r), 0;
	printf("job %s created (id %lld)\n", name, jint(r, "job_id"));
	json_decref(r);
	return 0;
}

/* ---- stats ---- */

static void print_port_stats(const json_t *ports)
{
	static const char *const h[] = { "PORT", "IPACKETS", "OPACKETS", "IBYTES", "OBYTES",
					 "IMISSED", "IERRORS", "OERRORS", "RX_NOMBUF" };
	static const char *const f[] = { "port", "ipackets", "opackets", "ibytes", "obytes",
					 "imissed", "ierrors", "oerrors", "rx_nombuf" };
	struct table t;
	size_t i;
	json_t *p;

	table_init(&t, 9, h);
	json_array_foreach(ports, i, p)
		for (unsigned k = 0; k < 9; k++)
			table_cell(&t, "%lld", jint(p, f[k]));
	table_print(&t);
}

static void print_lcore_stats(const json_t *lcores)
{
	static const char *const h[] = { "LCORE", "RX", "TX", "PUSHES", "HELD", "COMPLETES",
					 "DUP_OPEN", "DUP_DONE", "RETX", "ERRORS", "HANDOFF_IN",
					 "HANDOFF_OUT", "BUSY_POLLS", "IDLE_POLLS", "CSUM_UNFILLED",
					 "WAITS", "NACKS", "MARKS", "UPDATES" };
	static const char *const f[] = { "index", "rx", "tx", "pushes", "held", "completes",
					 "dup_open", "dup_done", "retx", "errors_sent", "handoff_in",
					 "handoff_out", "busy_polls", "idle_polls", "csum_unfilled",
					 "waits", "nacks", "marks", "updates" };
	struct table t;
	size_t i;
	json_t *l;

	table_init(&t, 19, h);
	json_array_foreach(lcores, i, l)
		for (unsigned k = 0; k < 19; k++)
			table_cell(&t, "%lld", jint(l, f[k]));
	table_print(&t);
}

/* One row per reason: total, then per lcore, lcores first..first+17 (a
 * table has MAX_COLS columns); returns how many rows it printed. */
static int print_drops_of(const json_t *drops, const json_t *lcores, int all, size_t first)
{
	const char *h[MAX_COLS] = { "DROP", "TOTAL" };
	char names[MAX_COLS][32];
	size_t nl = json_array_size(lcores), i;
	unsigned ncols = 2;
	const char *reason;
	json_t *v;
	struct table t;
	int shown = 0;

	for (i = first; i < nl && ncols < MAX_COLS; i++, ncols++) {
		snprintf(names[ncols], sizeof(names[ncols]), "LCORE%zu", i);
		h[ncols] = names[ncols];
	}
	table_init(&t, ncols, h);
	json_object_foreach((json_t *)drops, reason, v) {
		if (!all && jint(drops, reason) == 0)
			continue;
		shown++;
		table_cell(&t, "%s", reason);
		table_cell(&t, "%lld", jint(drops, reason));
		for (i = 0; i + 2 < ncols; i++)
			table_cell(&t, "%lld", jint(json_object_get(json_array_get(lcores, first + i),
								    "drops"), reason));
	}
	table_print(&t);
	return shown;
}

/* The drops table, in as many tables as the lcores need. */
static void print_drops(const json_t *drops, const json_t *lcores, int all)
{
	size_t nl = json_array_size(lcores), per = MAX_COLS - 2;

	for (size_t first = 0; first == 0 || first < nl; first += per) {
		if (first)
			putchar('\n');
		if (!print_drops_of(drops, lcores, all, first)) {
			printf("(no drops)\n");
			return;
		}
	}
}

static int cmd_stats(struct ctl *c, int all)
{
	int rc;
	json_t *r;

	if ((rc = call(c, "box_stats", NULL, &r)))
		return rc;
	if (c->json)
		return print_json(r), json_decref(r), 0;
	print_port_stats(json_object_get(r, "ports"));
	putchar('\n');
	print_lcore_stats(json_object_get(r, "lcores"));
	putchar('\n');
	print_drops(json_object_get(r, "drops"), json_object_get(r, "lcores"), all);
	json_decref(r);
	return 0;
}

/* ---- command line ---- */

/* The command options' names, by bit (OPT_*). */
static const char *const opt_names[] = { "all", "reason", "world", "max-bytes", "weight",
					 "restore", "interval", "count", "job-timeout-ms",
					 "replace-wait-ms", "nonfinite" };

/* Whether the command options given are all in allowed (OPT_* bits);
 * else a usage message naming the first that is not. */
static int options_fit(const struct ctl *c, const char *cmd, unsigned allowed)
{
	unsigned extra = c->used & ~allowed;

	for (unsigned i = 0; extra && i < sizeof(opt_names) / sizeof(opt_names[0]); i++)
		if (extra & (1u << i)) {
			bad_usage("'%s' does not take --%s (see --help)", cmd, opt_names[i]);
			return 0;
		}
	return 1;
}

static int run_job(struct ctl *c, int argc, char **argv)
{
	static const struct {
		const char *name, *full;
		int nargs;              /* after the subcommand */
		unsigned opts;
	} subs[] = {
		{ "show", "job show", 1, 0 },
		{ "abort", "job abort", 1, OPT_REASON },
		{ "create", "job create", 1, OPT_WORLD | OPT_MAX_BYTES | OPT_WEIGHT | OPT_RESTORE |
					     OPT_JOB_TIMEOUT | OPT_REPLACE_WAIT | OPT_NONFINITE },
		{ "save", "job save", 2, 0 },
	};
	const char *sub = argc ? argv[0] : "";
	unsigned i;

	for (i = 0; i < sizeof(subs) / sizeof(subs[0]) && strcmp(sub, subs[i].name); i++)
		;
	if (argc && i == sizeof(subs) / sizeof(subs[0]))
		return bad_usage("unknown job command '%s' (show, abort, create, save)", sub);
	if (!argc || argc - 1 != subs[i].nargs)
		return bad_usage("usage: pboxctl job show NAME | abort NAME [--reason TEXT] | create NAME "
				 "--world N [--memory SIZE | --max-bytes B] [--weight W] [--restore DIR] "
				 "[--job-timeout-ms MS] [--replace-wait-ms MS] "
				 "[--nonfinite abort|skip|pass] | "
				 "save NAME DIR");
	if (!options_fit(c, subs[i].full, subs[i].opts))
		return EXIT_USAGE;
	switch (i) {
	case 0:
		return cmd_job_show(c, argv[1]);
	case 1:
		return cmd_job_abort(c, argv[1], c->reason);
	case 2:
		if (!c->world)
			return bad_usage("job create needs --world N");
		return cmd_job_create(c, argv[1]);
	default:
		return cmd_job_save(c, argv[1], argv[2]);
	}
}

/* A fleet (--box): jobs and job show NAME only. */
static int run_fleet(struct ctl *c, int argc, char **argv)
{
	unsigned ms = c->interval_ms ? (unsigned)c->interval_ms : 1000;

	if (argc == 1 && strcmp(argv[0], "jobs") == 0)
		return options_fit(c, "jobs", OPT_INTERVAL) ? cmd_fleet_jobs(c, NULL, ms) : EXIT_USAGE;
	if (argc == 3 && strcmp(argv[0], "job") == 0 && strcmp(argv[1], "show") == 0)
		return options_fit(c, "job show", OPT_INTERVAL) ? cmd_fleet_jobs(c, argv[2], ms) :
		       EXIT_USAGE;
	return bad_usage("--box (a fleet) takes 'jobs' or 'job show NAME'; other commands "
			 "go to one box (--control or --socket)");
}

static int run(struct ctl *c, int argc, char **argv)
{
	const char *cmd = argv[0];

	if (c->boxes)
		return run_fleet(c, argc, argv);

	if (strcmp(cmd, "job") == 0)
		return run_job(c, argc - 1, argv + 1);
	if (strcmp(cmd, "status") && strcmp(cmd, "jobs") && strcmp(cmd, "stats") &&
	    strcmp(cmd, "top"))
		return bad_usage("unknown command '%s' (see --help)", cmd);
	if (argc > 1)
		return bad_usage("unexpected arguments after '%s' (see --help)", cmd);
	if (strcmp(cmd, "status") == 0)
		return options_fit(c, cmd, 0) ? cmd_status(c) : EXIT_USAGE;
	if (strcmp(cmd, "jobs") == 0)
		return options_fit(c, cmd, 0) ? cmd_jobs(c) : EXIT_USAGE;
	if (strcmp(cmd, "stats") == 0)
		return options_fit(c, cmd, OPT_ALL) ? cmd_stats(c, c->all) : EXIT_USAGE;
	return options_fit(c, cmd, OPT_INTERVAL | OPT_COUNT) ?
	       cmd_top(c, c->interval_ms ? (unsigned)c->interval_ms : 1000, (unsigned)c->count) :
	       EXIT_USAGE;
}

/* A positive integer option's value up to max, or 0 after a usage
 * message. */
static long long positive(const char *name, const char *v, long long max)
{
	char *end;
	errno = 0;
	long long n = strtoll(v, &end, 10);

	if (errno || !*v || *end || n <= 0 || n > max) {
		bad_usage("--%s: '%s' is not an integer in [1, %lld]", name, v, max);
		return 0;
	}
	return n;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "control", required_argument, NULL, 'c' },
		{ "box", required_argument, NULL, 'B' },
		{ "json", no_argument, NULL, 'j' },
		{ "output", required_argument, NULL, 'o' },
		{ "timeout", required_argument, NULL, 't' },
		{ "secret-file", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		/* command options */
		{ "all", no_argument, NULL, 'a' },
		{ "reason", required_argument, NULL, 'r' },
		{ "world", required_argument, NULL, 'w' },
		{ "max-bytes", required_argument, NULL, 'm' },
		{ "memory", required_argument, NULL, 'M' },
		{ "weight", required_argument, NULL, 'W' },
		{ "restore", required_argument, NULL, 'R' },
		{ "interval", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'n' },
		{ "job-timeout-ms", required_argument, NULL, 'T' },
		{ "replace-wait-ms", required_argument, NULL, 'P' },
		{ "nonfinite", required_argument, NULL, 'N' },
		{ NULL, 0, NULL, 0 },
	};
	const char *env = getenv("PBOX_SOCKET");
	struct ctl c = { .target = env && *env ? env : DEFAULT_SOCKET,
			 .timeout_ms = DEFAULT_TIMEOUT_MS };
	char unix_target[128];
	int opt, rc, li;
	bool by_path = true;   /* the target is a socket path (not --control) */

	opterr = 0;
	while ((opt = getopt_long(argc, argv, "ho:", lo, &li)) != -1) {
		static const char copts[] = "arwmWRinTPN"; /* the OPT_* bits in order */
		const char *copt = opt ? strchr(copts, opt) : NULL;
		if (copt)
			c.used |= 1u << (copt - copts);
		switch (opt) {
		case 's':
			c.target = optarg;
			by_path = true;
			break;
		case 'c':
			c.target = optarg;
			by_path = false;
			break;
		case 'B':
			c.boxes = optarg;
			break;
		case 'j':
			c.json = 1;
			break;
		case 'o':
			if (strcmp(optarg, "json") == 0)
				c.json = 1;
			else if (strcmp(optarg, "wide") == 0)
				c.all = 1;
			else if (strcmp(optarg, "table") != 0)
				return bad_usage("-o %s: the formats are table, wide and json", optarg);
			break;
		case 'S':
			c.secret_file = optarg;
			break;
		case 't': {
			char *end;
			long t = strtol(optarg, &end, 10);
			if (*end || t <= 0 || t > 3600000)
				return bad_usage("--timeout: '%s' is not a time in ms in [1, 3600000]",
						 optarg);
			c.timeout_ms = (int)t;
			c.timeout_given = 1;
			break;
		}
		case 'a':
			c.all = 1;
			break;
		case 'r':
			c.reason = optarg;
			break;
		case 'R':
			c.restore = optarg;
			break;
		case 'N':
			if (strcmp(optarg, "abort") && strcmp(optarg, "skip") && strcmp(optarg, "pass"))
				return bad_usage("--nonfinite: '%s' is not a policy (abort, skip or "
						 "pass)", optarg);
			c.nonfinite = optarg;
			break;
		case 'M': { /* --memory SIZE: bytes with K, M, G or T */
			char *end;
			errno = 0;
			unsigned long long n = strtoull(optarg, &end, 10);
			int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 :
				    *end == 'T' ? 40 : *end ? -1 : 0;
			if (errno || end == optarg || shift < 0 || (shift && end[1]) || !n ||
			    n > (1ull << (62 - shift)))
				return bad_usage("--memory: '%s' is not a size (bytes, or with K, M, "
						 "G, T)", optarg);
			c.max_bytes = (long long)(n << shift);
			c.used |= OPT_MAX_BYTES; /* the same option */
			break;
		}
		case 'w':
		case 'm':
		case 'W':
		case 'i':
		case 'n':
		case 'T':
		case 'P': {
			long long n = positive(lo[li].name, optarg, opt == 'i' ? 3600000 :
					       opt == 'n' ? UINT_MAX : opt == 'T' ? INT32_MAX :
					       opt == 'P' ? 86400000 : LLONG_MAX);
			if (!n)
				return EXIT_USAGE;
			*(opt == 'w' ? &c.world : opt == 'm' ? &c.max_bytes : opt == 'W' ? &c.weight :
			  opt == 'i' ? &c.interval_ms : opt == 'T' ? &c.job_timeout_ms :
			  opt == 'P' ? &c.replace_wait_ms : &c.count) = n;
			break;
		}
		case 'h':
			usage(stdout);
			return EXIT_OK;
		case 'V':
			printf("pboxctl %s\n", PBOX_VERSION_STRING);
			return EXIT_OK;
		default:
			return bad_usage("unknown option or missing value: '%s' (see --help)",
					 argv[optind - 1]);
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (c.boxes) {   /* each box checked as --control / --socket would be */
		rc = fleet_check(&c);
		return rc ? rc : run(&c, argc - optind, argv + optind);
	}
	if (strncmp(c.target, "unix:", 5) != 0 && (by_path || strchr(c.target, '/'))) {
		if ((size_t)snprintf(unix_target, sizeof(unix_target), "unix:%s", c.target) >=
		    sizeof(unix_target))
			return bad_usage("socket path '%s' is too long", c.target);
		c.target = unix_target;
	}
	/* a target that cannot name a box is the command line's fault (2),
	 * not the box's (3) */
	if (strncmp(c.target, "unix:", 5) == 0) {
		size_t len = strlen(c.target + 5);
		size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
		if (!len)
			return bad_usage("the socket path is empty");
		if (len > max)
			return bad_usage("socket path '%s' is too long (at most %zu bytes)",
					 c.target + 5, max);
	} else {
		char host[256], port[16];
		if (rpc_hostport_split(c.target, host, sizeof(host), port, sizeof(port)) < 0)
			return bad_usage("--control '%s' is not ADDR:PORT (or a socket path)", c.target);
	}
	rc = run(&c, argc - optind, argv + optind);
	rpc_client_close(c.rpc);
	return rc;
}
