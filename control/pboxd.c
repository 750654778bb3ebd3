/*
 * pboxd.c - the box daemon: `pboxd [EAL args] -- [options]`.
 *
 * Start-up: EAL, options, ports (nic/port.c), one lcore context per data
 * lcore (dataplane/lcore.c), the job registry and the RPC server; then the
 * data lcores poll while the main lcore serves the control plane until
 * SIGINT/SIGTERM, and everything is stopped and released in reverse order.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "control/box.h"
#include "control/jobs.h"
#include "control/rpc_server.h"
#include "dataplane/dp.h"

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
		printf("pboxd: port %u %s %02x:%02x:%02x:%02x:%02x:%02x %u.%u.%u.%u/%u mtu %u"
		       " rxq %u steering %s fanout %s rx %s numa %d cpus %s\n", p->port, p->name, p->mac[0], p->mac[1],
		       p->mac[2], p->mac[3], p->mac[4], p->mac[5], ip >> 24, (ip >> 16) & 255,
		       (ip >> 8) & 255, ip & 255, p->prefix, p->mtu, p->rx_queues, p->steering, p->fanout,
		       p->hold ? "held" : "copied", p->numa_node, p->local_cpus);
	}
	printf("pboxd: %u data lcore(s), udp ports %u-%u, kernel %s, control %s, socket %s\n",
	       b->layout.nlcores, b->cfg.udp_base, b->cfg.udp_base + b->layout.nlcores - 1,
	       b->layout.kernel,
	       b->cfg.control[0] ? b->cfg.control : "off",
	       b->cfg.rpc_socket[0] ? b->cfg.rpc_socket : "off");
	fflush(stdout);
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

int main(int argc, char **argv)
{
	static struct box box; /* large; lives for the whole process */
	struct rpc_server *srv = NULL;
	struct dp *dp = NULL;
	char err[512];
	int rc;

	if (wants_help(argc, argv)) {
		box_config_usage(stdout);
		printf("\nEAL arguments come before \"--\"; see the DPDK documentation or"
		       " docs/operations.md.\n");
		return 0;
	}
	box_config_defaults(&box.cfg);
	rc = dp_eal_init(argc, argv, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "pboxd: %s\n", err);
		return 1;
	}
	argv[rc] = argv[0];
	rc = box_config_parse(&box.cfg, argc - rc, argv + rc, err, sizeof(err));
	if (rc != 0) {
		if (rc < 0)
			fprintf(stderr, "pboxd: %s\n", err);
		dp_eal_cleanup();
		return rc < 0 ? 2 : 0;
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
		fprintf(stderr, "pboxd: %s\n", err);
	if (rc == 0 && (rc = jobs_open(&box, &box.jobs)) != 0)
		fprintf(stderr, "pboxd: cannot create the job registry: %s\n", strerror(-rc));
	if (rc == 0 && (rc = rpc_server_open(&srv, &box, err, sizeof(err))) != 0)
		fprintf(stderr, "pboxd: %s\n", err);
	if (rc != 0) {
		teardown(&box, dp, srv);
		dp_eal_cleanup();
		return 1;
	}
	print_banner(&box);
	dp_launch(dp);
	printf("pboxd: ready\n");
	fflush(stdout);

	while (!quit)
		rpc_server_poll(srv, 100);

	printf("pboxd: stopping\n");
	teardown(&box, dp, srv);
	dp_eal_cleanup();
	printf("pboxd: stopped\n");
	return 0;
}
