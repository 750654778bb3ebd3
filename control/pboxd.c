/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pboxd.c - the box daemon: `pboxd [EAL args] -- [options]`.
 *
 * Start-up: EAL, options, ports (nic/port.c), one lcore context per data
 * lcore (dataplane/lcore.c), the job registry and the RPC server; then the
 * data lcores poll while the main lcore serves the control plane until
 * SIGINT/SIGTERM, and everything is stopped and released in reverse order.
 *
 * Every line it prints from the log stream's opening to its end goes
 * through ctl_log and the DPDK log type `pbox` (dataplane/dp.h), at a
 * level: the life-cycle lines ("pboxd: ready") are notices, failures
 * errors. Only --help and a log stream that cannot open print plainly.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "control/box.h"
#include "control/jobs.h"
#include "control/log.h"
#include "control/metrics.h"
#include "control/ckpt_file.h"
#include "control/sdnotify.h"
#include "control/rpc_server.h"
#include "dataplane/dp.h"

#define EAL_MAX_ARGS 62 /* arguments --eal may hold */

static volatile bool quit; /* set by the signal handler only */

static void on_signal(int sig)
{
	(void)sig;
	quit = true;
}

static void print_banner(const struct box *b)
{
	for (unsigned i = 0; i < b->layout.nports; i++) {
		const struct box_port_info *p = &b->layout.ports[i];
		uint32_t ip = p->ip;
		ctl_log(b, CTL_LOG_NOTICE, "port %u %s %02x:%02x:%02x:%02x:%02x:%02x %u.%u.%u.%u/%u mtu %u"
			" rxq %u steering %s fanout %s rx %s numa %d cpus %s", p->port, p->name,
			p->mac[0], p->mac[1], p->mac[2], p->mac[3], p->mac[4], p->mac[5], ip >> 24,
			(ip >> 16) & 255, (ip >> 8) & 255, ip & 255, p->prefix, p->mtu, p->rx_queues,
			p->steering, p->fanout, p->hold ? "held" : "copied", p->numa_node, p->local_cpus);
		if (p->busy_budget > 0 && p->napi_defer_hard_irqs == 0)
			ctl_log(b, CTL_LOG_NOTICE, "port %u: net_af_xdp busy polls with budget %d, but"
				" %s's napi_defer_hard_irqs is 0, so its interrupts still run its NAPI"
				" poll; to leave the polling to pboxd set napi_defer_hard_irqs (2) and"
				" gro_flush_timeout (200000) in /sys/class/net/%s (docs/operations.md)",
				p->port, p->busy_budget, p->iface, p->iface);
		else if (p->busy_budget >= 0)
			ctl_log(b, CTL_LOG_NOTICE, "port %u: net_af_xdp busy poll budget %d, %s"
				" napi_defer_hard_irqs %lld gro_flush_timeout %lld", p->port,
				p->busy_budget, p->iface, (long long)p->napi_defer_hard_irqs,
				(long long)p->gro_flush_timeout_ns);
	}
	ctl_log(b, CTL_LOG_NOTICE, "%u data lcore(s), udp ports %u-%u, kernel %s, control %s, socket %s",
		b->layout.nlcores, b->cfg.udp_base, b->cfg.udp_base + b->layout.nlcores - 1,
		b->layout.kernel,
		b->cfg.control[0] ? b->cfg.control : "off",
		b->cfg.rpc_socket[0] ? b->cfg.rpc_socket : "off");
}

static int wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return 1;
	return 0;
}

static void teardown(struct box *box, struct dp *dp, struct rpc_server *srv)
{
	rpc_server_close(srv);
	dp_wait(dp);
	jobs_close(box->jobs);
	dp_close(dp);
}

/* Where pboxd's options start: after the first "--" (argc if none). */
static int options_start(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0)
			return i + 1;
	return argc;
}

/*
 * pboxd's options, then the EAL. The options come first because some go
 * into the devices the EAL creates (--xdp-busy-budget, dataplane/dp_eal.c).
 * The `pbox` log level is pboxd's --log-level if given, else where the EAL
 * put it (--log-level=pbox:LEVEL, else info). Returns -1 to go on, or the
 * exit status: 0 after --help, 2 for a bad option or EAL argument (the
 * EAL's EINVAL), 1 if the EAL failed otherwise (logged).
 */
static int start_options(struct box *box, int argc, char **argv)
{
	char err[512];
	int first = options_start(argc, argv), n = argc - first + 1;
	char *opts[n + 1];

	opts[0] = argv[0];
	memcpy(opts + 1, argv + first, (size_t)(n - 1) * sizeof(*opts));
	opts[n] = NULL;
	box->cfg.log_level = -1;             /* not given (yet) */
	int prc = box_config_parse(&box->cfg, n, opts, err, sizeof(err));
	bool level_given = box->cfg.log_level >= 0;
	if (!level_given)
		box->cfg.log_level = dp_log_level();
	if (prc < 0)
		ctl_log(box, CTL_LOG_ERROR, "%s", err);
	if (prc != 0)
		return prc < 0 ? 2 : 0;
	/* a checkpoint directory others could write is refused at start
	 * (docs/operations.md "Checkpoint directories") */
	if (box->cfg.checkpoint_dir[0]) {
		int dfd = ckpt_dir_open(box->cfg.checkpoint_dir, err, sizeof(err));
		if (dfd < 0) {
			ctl_log(box, CTL_LOG_ERROR, "--checkpoint-dir: %s", err);
			return 2;
		}
		close(dfd);
	}

	/* EAL arguments: the command line's before "--", else --eal's */
	char eal[sizeof(box->cfg.eal)], *eargv[EAL_MAX_ARGS + 2];
	int eargc = 0, efirst = first;
	char **ea = argv;
	if (first <= 2 && box->cfg.eal[0]) {
		memcpy(eal, box->cfg.eal, sizeof(eal));
		eargv[eargc++] = argv[0];
		for (char *save, *t = strtok_r(eal, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
			if (eargc > EAL_MAX_ARGS) {
				ctl_log(box, CTL_LOG_ERROR, "--eal: more than %d arguments",
					EAL_MAX_ARGS);
				return 2;
			}
			eargv[eargc++] = t;
		}
		eargv[eargc] = NULL;
		ea = eargv;
		efirst = eargc;
	}
	struct dp_eal_params ep = { .xdp_busy_budget = box->cfg.xdp_busy_budget };
	int rc = dp_eal_init(ea == argv ? argc : eargc, ea, &ep, err, sizeof(err));
	if (rc < 0) {
		/* pboxd's options without "--" reach the EAL, which names the
		 * first it does not know and stops */
		bool no_sep = ea == argv && first == argc && argc > 1;
		ctl_log(box, CTL_LOG_ERROR, "%s%s%s", ea == argv ? "" : "--eal: ", err,
			no_sep && rc == -EINVAL ? " (pboxd's options go after '--': "
			"pboxd EAL-ARGS -- OPTIONS)" : "");
		return rc == -EINVAL ? 2 : 1;
	}
	if (rc + 1 < efirst) {                /* the EAL left something before "--" */
		ctl_log(box, CTL_LOG_ERROR, ea == argv ? "an argument before '--' is not the "
			"EAL's (EAL arguments go before '--', pboxd's options after it)" :
			"--eal holds an argument that is not the EAL's");
		dp_eal_cleanup();
		return 2;
	}
	if (!level_given)
		box->cfg.log_level = dp_log_level();
	dp_log_set_level(box->cfg.log_level);
	return -1;
}

/* box.keepalive: long control-thread work feeds the watchdog too. */
static void watchdog_ping(void *ctx)
{
	sdnotify_watchdog(ctx, clock_ns());
}

/* A state systemd did not get: a warning (each state once; the watchdog's
 * first failure only). */
static void notify_failed(const struct box *box, const char *state, int rc)
{
	ctl_log(box, CTL_LOG_WARN, "systemd notify: cannot send %s to NOTIFY_SOCKET=%s: %s",
		state, getenv("NOTIFY_SOCKET"), strerror(-rc));
}

int main(int argc, char **argv)
{
	static struct box box; /* large; lives for the whole process */
	struct rpc_server *srv = NULL;
	struct metrics_server *metrics = NULL;
	unsigned metrics_port = 0;
	struct sdnotify sd;
	struct dp_log *log = NULL;
	struct dp *dp = NULL;
	char err[512];
	int rc;

	/* Before the EAL is up, --help and a failing log stream print plainly. */
	if (wants_help(argc, argv)) {
		box_config_usage(stdout);
		printf("\nEAL arguments come before \"--\"; see the DPDK documentation or"
		       " docs/operations.md.\n");
		return 0;
	}
	box_config_defaults(&box.cfg);
	if (dp_log_open(&log, err, sizeof(err)) < 0) {
		fprintf(stderr, "pboxd: %s\n", err);
		return 1;
	}
	box.log = (struct box_log_sink){ .write = dp_log_write };
	rc = start_options(&box, argc, argv);
	if (rc >= 0) {
		dp_log_close(log);
		return rc;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);

	struct dp_params dpp = {
		.nports = box.cfg.nports, .udp_base = box.cfg.udp_base, .mbufs = box.cfg.mbufs,
		.mtu = box.cfg.mtu, .idle_sleep_us = box.cfg.idle_sleep_us, .fanout = box.cfg.fanout,
		.udp_checksum = box.cfg.udp_checksum, .quit = &quit,
	};
	for (unsigned i = 0; i < box.cfg.nports; i++) {
		dpp.ip[i].port = box.cfg.ip[i].port;
		dpp.ip[i].ip = box.cfg.ip[i].ip;
		dpp.ip[i].prefix = box.cfg.ip[i].prefix;
	}
	box.start_time = clock_s();
	rc = dp_open(&dpp, &dp, &box.layout, &box.dp, err, sizeof(err));
	if (rc != 0)
		ctl_log(&box, CTL_LOG_ERROR, "%s", err);
	/* EINVAL from the ports: the options do not fit the devices (an
	 * address for a port that is not there, an MTU or queue count the
	 * device cannot take): as a bad option, a restart cannot help */
	int fail_status = rc == -EINVAL ? 2 : 1;
	if (rc == 0 && (rc = jobs_open(&box, &box.jobs)) != 0)
		ctl_log(&box, CTL_LOG_ERROR, "cannot create the job registry: %s", strerror(-rc));
	if (rc == 0 && (rc = rpc_server_open(&srv, &box, err, sizeof(err))) != 0)
		ctl_log(&box, CTL_LOG_ERROR, "%s", err);
	if (rc != 0) {
		teardown(&box, dp, srv);
		dp_eal_cleanup();
		dp_log_close(log);
		return fail_status;
	}
	if (box.cfg.metrics[0] && metrics_open(&metrics, &box, box.cfg.metrics, &metrics_port,
					       err, sizeof(err)) != 0) {
		ctl_log(&box, CTL_LOG_ERROR, "--metrics: %s", err);
		teardown(&box, dp, srv);
		dp_eal_cleanup();
		dp_log_close(log);
		return 1;
	}
	print_banner(&box);
	if (metrics)
		ctl_log(&box, CTL_LOG_INFO, "metrics: http://%s/metrics (port %u)", box.cfg.metrics,
			metrics_port);
	if (box.layout.telemetry[0])
		ctl_log(&box, CTL_LOG_INFO, "telemetry: /pbox/stats, /pbox/jobs, /pbox/info on %s",
			box.layout.telemetry);
	dp_launch(dp);
	ctl_log(&box, CTL_LOG_NOTICE, "ready");
	if (sdnotify_open(&sd, err, sizeof(err)) < 0)
		ctl_log(&box, CTL_LOG_WARN, "systemd notify: %s", err);
	if ((rc = sdnotify_send(&sd, "READY=1")) < 0)
		notify_failed(&box, "READY=1", rc);
	box.keepalive = (struct box_keepalive){ watchdog_ping, &sd };

	/* a scrape takes a few polls (accept, read, write): poll more often */
	int ping_failed = 0;
	while (!quit) {
		rpc_server_poll(srv, metrics ? 20 : 100);
		metrics_poll(metrics);
		if ((rc = sdnotify_watchdog(&sd, clock_ns())) < 0 && !ping_failed++)
			notify_failed(&box, "WATCHDOG=1", rc);
	}
	box.keepalive.fn = NULL;
	if ((rc = sdnotify_send(&sd, "STOPPING=1")) < 0)
		notify_failed(&box, "STOPPING=1", rc);
	sdnotify_close(&sd);
	metrics_close(metrics);

	ctl_log(&box, CTL_LOG_NOTICE, "stopping");
	teardown(&box, dp, srv);
	ctl_log(&box, CTL_LOG_NOTICE, "stopped");
	dp_eal_cleanup();
	dp_log_close(log);
	return 0;
}
