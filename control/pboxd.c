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
#include <sys/mman.h>
#include <time.h>

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>

#include "box.h"
#include "jobs.h"
#include "lcore.h"
#include "lcore_fanout.h"
#include "numa.h"
#include "port.h"
#include "rpc_server.h"

static volatile bool quit; /* set by the signal handler only */

struct pboxd {
	struct box box;
	struct dp_shared sh;
	bool ports_started[BOX_MAX_PORTS];
	int mem_socket;   /* NUMA node of the first data port: job memory */
};

static void on_signal(int sig)
{
	(void)sig;
	quit = true;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- the data plane as the control plane sees it (box.h) ---- */

static int dp_post(void *ctx, unsigned lcore, const struct engine_msg *m)
{
	struct pboxd *d = ctx;
	struct engine_msg copy = *m;
	return rte_ring_enqueue_elem(d->sh.lcores[lcore]->msgs, &copy, sizeof(copy)) == 0 ? 0 : -EAGAIN;
}

static uint64_t dp_applied(void *ctx, unsigned lcore)
{
	struct pboxd *d = ctx;
	return __atomic_load_n(&d->sh.lcores[lcore]->applied, __ATOMIC_ACQUIRE);
}

/* Job memory: hugepage memory on the ports' socket when the EAL has
 * hugepages, else anonymous zeroed pages (development, --no-huge). */
static void *dp_mem_alloc(void *ctx, size_t bytes)
{
	struct pboxd *d = ctx;
	if (rte_eal_has_hugepages())
		return rte_zmalloc_socket("pbox_job", bytes, 64, d->mem_socket);
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void dp_mem_free(void *ctx, void *p, size_t bytes)
{
	(void)ctx;
	if (!p)
		return;
	if (rte_eal_has_hugepages())
		rte_free(p);
	else
		munmap(p, bytes);
}

static const struct lcore_stats *dp_lcore_stats(void *ctx, unsigned lcore)
{
	struct pboxd *d = ctx;
	return &d->sh.lcores[lcore]->st;
}

static const struct engine_counters *dp_engine_stats(void *ctx, unsigned lcore)
{
	struct pboxd *d = ctx;
	return &d->sh.lcores[lcore]->eng.c;
}

static int dp_job_progress(void *ctx, unsigned lcore, uint32_t job_id,
			   struct engine_progress *out)
{
	struct pboxd *d = ctx;
	return engine_job_progress(&d->sh.lcores[lcore]->eng, job_id, out);
}

static int dp_port_stats(void *ctx, unsigned idx, struct box_port_stats *out)
{
	struct pboxd *d = ctx;
	struct rte_eth_stats s;
	struct rte_eth_link link;
	uint16_t pid = d->box.ports[idx].port;
	int rc = rte_eth_stats_get(pid, &s);

	if (rc != 0)
		return rc;
	*out = (struct box_port_stats){
		.ipackets = s.ipackets, .opackets = s.opackets, .ibytes = s.ibytes,
		.obytes = s.obytes, .imissed = s.imissed, .ierrors = s.ierrors,
		.oerrors = s.oerrors, .rx_nombuf = s.rx_nombuf,
	};
	if (rte_eth_link_get_nowait(pid, &link) == 0)
		out->link_up = link.link_status == RTE_ETH_LINK_UP;
	return 0;
}

/* ---- start-up ---- */

/* The one CPU lcore id is pinned to, or -1 if it may run on several. */
static int lcore_cpu(unsigned id)
{
	rte_cpuset_t set = rte_lcore_cpuset(id);

	if (CPU_COUNT(&set) != 1)
		return -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			return c;
	return -1;
}

static int setup_lcores(struct pboxd *d, const struct sum_kernels *sum)
{
	unsigned id, n = 0;

	RTE_LCORE_FOREACH_WORKER(id) {
		if (n == BOX_MAX_LCORES || n == ENGINE_MAX_LCORES) {
			fprintf(stderr, "pboxd: warning: only %u data lcores are used;"
				" lcore %u and later stay idle\n", n, id);
			break;
		}
		int socket = (int)rte_lcore_to_socket_id(id);
		struct lcore_ctx *lc = lcore_ctx_create(n, id, socket, &d->sh, sum);
		if (!lc) {
			fprintf(stderr, "pboxd: cannot allocate lcore %u context: %s\n",
				id, rte_strerror(rte_errno));
			return -ENOMEM;
		}
		d->sh.lcores[n] = lc;
		d->box.lcores[n] = (struct box_lcore_info){ .eal_id = id, .index = n, .socket = socket,
							     .cpu = lcore_cpu(id) };
		n++;
	}
	if (n == 0) {
		fprintf(stderr, "pboxd: no data lcore: give the EAL at least two lcores"
			" (e.g. -l 0-1); the main lcore serves control, the others poll ports\n");
		return -EINVAL;
	}
	d->sh.nlcores = d->box.nlcores = n;
	return 0;
}

/*
 * Where the port's NIC sits (hwloc) and whether the data lcores run there:
 * every data lcore transmits on every port, so each should be local to it.
 * A remote lcore is a warning naming the cores to use instead.
 */
static void place_port(const struct pboxd *d, uint16_t pid, struct box_port_info *info)
{
	struct rte_eth_dev_info di;
	struct numa_place pl;
	char err[160];
	int rc = -ENODEV;

	if (rte_eth_dev_info_get(pid, &di) == 0 && di.device &&
	    strcmp(rte_bus_name(rte_dev_bus(di.device)), "pci") == 0)
		rc = numa_pci_place(rte_dev_name(di.device), &pl, err, sizeof(err));
	if (rc == -ENODEV || rc == -EINVAL)
		rc = numa_machine_place(&pl, err, sizeof(err));   /* vdev: any node */
	if (rc) {
		fprintf(stderr, "pboxd: warning: port %u: %s; NUMA placement not checked\n", pid, err);
		info->numa_node = -1;
		snprintf(info->local_cpus, sizeof(info->local_cpus), "?");
		return;
	}
	info->numa_node = pl.node;
	snprintf(info->local_cpus, sizeof(info->local_cpus), "%s", pl.cpus);
	for (unsigned l = 0; l < d->box.nlcores; l++) {
		const struct box_lcore_info *lc = &d->box.lcores[l];
		if (lc->cpu >= 0 && !numa_cpu_in(pl.cpus, (unsigned)lc->cpu))
			fprintf(stderr, "pboxd: warning: data lcore %u runs on CPU %d, which is not"
				" local to port %u (%s, NUMA node %d): every packet crosses the"
				" interconnect; give the EAL cores from %s (e.g. -l with those CPUs)\n",
				lc->eal_id, lc->cpu, pid, info->name, pl.node, pl.cpus);
	}
}

/*
 * May the engine keep this port's rx mbufs until a round completes? Not on
 * net_af_xdp (DPDK 22.11): its rx stops for good once the application
 * holds many of them (measured here: IMISSED climbs and the job stalls), so
 * its contributions are copied as they arrive.
 */
static int rx_can_hold(uint16_t pid)
{
	struct rte_eth_dev_info di;

	if (rte_eth_dev_info_get(pid, &di) != 0 || !di.driver_name)
		return 0;
	return strcmp(di.driver_name, "net_af_xdp") != 0;
}

static int setup_ports(struct pboxd *d)
{
	struct box_config *c = &d->box.cfg;
	char err[256];
	uint16_t pid;

	if (rte_eth_dev_count_avail() == 0) {
		fprintf(stderr, "pboxd: no DPDK port: bind a NIC to a DPDK driver or pass"
			" --vdev=net_af_packet0,iface=IFNAME (see docs/operations.md)\n");
		return -ENODEV;
	}
	RTE_ETH_FOREACH_DEV(pid) {
		unsigned i;
		for (i = 0; i < c->nports && c->ip[i].port != pid; i++)
			;
		char name[RTE_ETH_NAME_MAX_LEN] = "";
		rte_eth_dev_get_name_by_port(pid, name);
		if (i == c->nports) {
			fprintf(stderr, "pboxd: port %u (%s) has no address: add --ip %u:ADDR/PREFIX\n",
				pid, name, pid);
			return -EINVAL;
		}
		if (pid >= BOX_MAX_PORTS) {
			fprintf(stderr, "pboxd: port id %u too large (at most %u ports)\n",
				pid, BOX_MAX_PORTS);
			return -EINVAL;
		}
	}
	for (unsigned i = 0; i < c->nports; i++) {
		pid = c->ip[i].port;
		if (!rte_eth_dev_is_valid_port(pid)) {
			fprintf(stderr, "pboxd: --ip names port %u, but the EAL found %u port(s)\n",
				pid, rte_eth_dev_count_avail());
			return -EINVAL;
		}
		struct box_port_info *info = &d->box.ports[i];
		struct dp_port *dp = &d->sh.ports[pid];
		struct port_setup ps = {
			.port_id = pid, .nlcores = d->sh.nlcores, .nmbufs = c->mbufs, .mtu = (uint16_t)c->mtu,
			.udp_base = c->udp_base, .fanout = c->fanout, .socket = rte_eth_dev_socket_id(pid) < 0 ?
				(int)rte_socket_id() : rte_eth_dev_socket_id(pid),
		};
		int rc = port_start(&ps, info, &dp->pool, &dp->hdr_pool, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "pboxd: %s\n", err);
			return rc;
		}
		d->ports_started[pid] = true;
		place_port(d, pid, info);
		if (i == 0)
			d->mem_socket = ps.socket;
		info->ip = c->ip[i].ip;
		info->prefix = c->ip[i].prefix;
		dp->port_id = pid;
		dp->shared_min = c->fanout == BOX_FANOUT_SHARED ? 0 : FANOUT_SHARED_MIN_BYTES;
		info->hold = rx_can_hold(pid);
		dp->hold = info->hold != 0;
		dp->ip = info->ip;
		memcpy(dp->mac, info->mac, 6);
		if (d->box.mtu == 0 || info->mtu < d->box.mtu)
			d->box.mtu = info->mtu;
		/* rx queues: queue q to lcore q, or the single queue to one lcore */
		for (uint16_t q = 0; q < info->rx_queues; q++) {
			unsigned owner = info->rx_queues > 1 ? q : i % d->sh.nlcores;
			struct lcore_ctx *lc = d->sh.lcores[owner];
			lc->rxq[lc->nrxq].port_id = pid;
			lc->rxq[lc->nrxq].queue = q;
			lc->nrxq++;
		}
		/* one endpoint per (port, lcore) */
		for (unsigned l = 0; l < d->sh.nlcores; l++)
			d->box.eps[d->box.neps++] = (struct box_endpoint){
				.ip = info->ip, .udp_port = (uint16_t)(c->udp_base + l),
				.port = pid, .lcore = (uint16_t)l,
			};
	}
	d->box.nports = d->sh.nports = c->nports;
	/* Contributions stay in their rx mbufs (engine_push_ref) up to a
	 * quarter of a port's pool per lcore, so rx always has mbufs. */
	for (unsigned l = 0; l < d->sh.nlcores; l++)
		d->sh.lcores[l]->hold_max = c->mbufs / (4 * d->sh.nlcores);
	return 0;
}

static void print_banner(const struct pboxd *d)
{
	const struct box *b = &d->box;
	for (unsigned i = 0; i < b->nports; i++) {
		const struct box_port_info *p = &b->ports[i];
		uint32_t ip = p->ip;
		printf("pboxd: port %u %s %02x:%02x:%02x:%02x:%02x:%02x %u.%u.%u.%u/%u mtu %u"
		       " rxq %u steering %s fanout %s rx %s numa %d cpus %s\n", p->port, p->name, p->mac[0], p->mac[1],
		       p->mac[2], p->mac[3], p->mac[4], p->mac[5], ip >> 24, (ip >> 16) & 255,
		       (ip >> 8) & 255, ip & 255, p->prefix, p->mtu, p->rx_queues, p->steering, p->fanout,
		       p->hold ? "held" : "copied", p->numa_node, p->local_cpus);
	}
	printf("pboxd: %u data lcore(s), udp ports %u-%u, kernel %s, control %s, socket %s\n",
	       b->nlcores, b->cfg.udp_base, b->cfg.udp_base + b->nlcores - 1, b->kernel,
	       b->cfg.control[0] ? b->cfg.control : "off",
	       b->cfg.rpc_socket[0] ? b->cfg.rpc_socket : "off");
	fflush(stdout);
}

static void pboxd_usage(const char *prog)
{
	char *argv[] = { (char *)prog, (char *)"--help", NULL };
	struct box_config c;
	char err[8];
	box_config_defaults(&c);
	box_config_parse(&c, 2, argv, err, sizeof(err));
}

static int wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return 1;
	return 0;
}

static void teardown(struct pboxd *d, struct rpc_server *srv)
{
	rpc_server_close(srv);
	jobs_close(d->box.jobs);
	for (uint16_t p = 0; p < BOX_MAX_PORTS; p++)
		if (d->ports_started[p])
			port_stop(p);
	for (unsigned l = 0; l < d->sh.nlcores; l++)
		lcore_ctx_free(d->sh.lcores[l]);
}

int main(int argc, char **argv)
{
	static struct pboxd d; /* large; lives for the whole process */
	struct rpc_server *srv = NULL;
	char err[512];
	int rc;

	if (wants_help(argc, argv)) {
		pboxd_usage(argv[0]);
		printf("\nEAL arguments come before \"--\"; see the DPDK documentation or"
		       " docs/operations.md.\n");
		return 0;
	}
	box_config_defaults(&d.box.cfg);
	rc = rte_eal_init(argc, argv);
	if (rc < 0) {
		fprintf(stderr, "pboxd: EAL initialisation failed: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	argv[rc] = argv[0];
	rc = box_config_parse(&d.box.cfg, argc - rc, argv + rc, err, sizeof(err));
	if (rc != 0) {
		if (rc < 0)
			fprintf(stderr, "pboxd: %s\n", err);
		rte_eal_cleanup();
		return rc < 0 ? 2 : 0;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);

	const struct sum_kernels *sum = sum_best();
	d.sh.quit = &quit;
	d.sh.udp_base = d.box.cfg.udp_base;
	d.sh.idle_sleep_us = d.box.cfg.idle_sleep_us;
	d.sh.udp_csum = d.box.cfg.udp_checksum;
	d.box.kernel = sum->name;
	d.box.start_time = now_s();
	d.box.dp = (struct box_dp){
		.ctx = &d, .post = dp_post, .applied = dp_applied,
		.mem_alloc = dp_mem_alloc, .mem_free = dp_mem_free,
		.lcore_stats = dp_lcore_stats, .engine_stats = dp_engine_stats,
		.port_stats = dp_port_stats, .job_progress = dp_job_progress,
	};
	rc = setup_lcores(&d, sum);
	if (rc == 0)
		rc = setup_ports(&d);
	if (rc == 0 && (rc = jobs_open(&d.box, &d.box.jobs)) != 0)
		fprintf(stderr, "pboxd: cannot create the job registry: %s\n", strerror(-rc));
	if (rc == 0 && (rc = rpc_server_open(&srv, &d.box, err, sizeof(err))) != 0)
		fprintf(stderr, "pboxd: %s\n", err);
	if (rc != 0) {
		teardown(&d, srv);
		rte_eal_cleanup();
		return 1;
	}
	print_banner(&d);
	for (unsigned l = 0; l < d.sh.nlcores; l++)
		rte_eal_remote_launch(lcore_main, d.sh.lcores[l], d.sh.lcores[l]->eal_id);
	printf("pboxd: ready\n");
	fflush(stdout);

	while (!quit)
		rpc_server_poll(srv, 100);

	printf("pboxd: stopping\n");
	rte_eal_mp_wait_lcore();
	teardown(&d, srv);
	rte_eal_cleanup();
	printf("pboxd: stopped\n");
	return 0;
}
