/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dp.c - the data plane's life cycle in pboxd: the EAL, one lcore context
 * per EAL worker lcore, every data port started and placed (NUMA), rx
 * queues and endpoints handed out, and the operations the control plane
 * uses (dataplane/dp.h), telemetry's among them (dp_telemetry.c).
 */
#include "dataplane/dp.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>

#include "common/errmsg.h"
#include "common/sum.h"
#include "dataplane/dp_log.h"
#include "dataplane/dp_telemetry.h"
#include "dataplane/lcore.h"
#include "nic/numa.h"
#include "nic/port.h"

struct dp {
	struct dp_params p;
	struct dp_shared sh;
	struct dp_layout *lay;            /* the caller's, filled by dp_open */
	bool ports_started[BOX_MAX_PORTS];
	bool launched;
	int mem_socket;   /* NUMA node of the first data port: job memory */
};

/* ---- the data plane as the control plane sees it (dp.h) ---- */

static int dp_post(void *ctx, unsigned lcore, const struct engine_msg *m)
{
	struct dp *d = ctx;
	struct engine_msg copy = *m;
	return rte_ring_enqueue_elem(d->sh.lcores[lcore]->msgs, &copy, sizeof(copy)) == 0 ? 0 : -EAGAIN;
}

static uint64_t dp_applied(void *ctx, unsigned lcore)
{
	struct dp *d = ctx;
	return __atomic_load_n(&d->sh.lcores[lcore]->applied, __ATOMIC_ACQUIRE);
}

/* Job memory: hugepage memory on the ports' socket when the EAL has
 * hugepages, else anonymous zeroed pages (development, --no-huge). */
static void *dp_mem_alloc(void *ctx, size_t bytes)
{
	struct dp *d = ctx;
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

/* Anonymous pages are dropped (they read as zeros, and leave pboxd's
 * RSS); hugepage memory is written. */
static void dp_mem_zero(void *ctx, void *p, size_t bytes)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), b = (uintptr_t)p, e = b + bytes;
	uintptr_t ib = (b + pg - 1) & ~(pg - 1), ie = e & ~(pg - 1);

	(void)ctx;
	if (!rte_eal_has_hugepages() && ie > ib &&
	    madvise((void *)ib, ie - ib, MADV_DONTNEED) == 0) {
		memset(p, 0, ib - b);
		memset((void *)ie, 0, e - ie);
		return;
	}
	memset(p, 0, bytes);
}

static const struct lcore_stats *dp_lcore_stats(void *ctx, unsigned lcore)
{
	struct dp *d = ctx;
	return &d->sh.lcores[lcore]->st;
}

static const struct engine_counters *dp_engine_stats(void *ctx, unsigned lcore)
{
	struct dp *d = ctx;
	return &d->sh.lcores[lcore]->eng.c;
}

static int dp_job_progress(void *ctx, unsigned lcore, uint32_t job_id,
			   struct engine_progress *out)
{
	struct dp *d = ctx;
	return engine_job_progress(&d->sh.lcores[lcore]->eng, job_id, out);
}

static int dp_rank_lateness(void *ctx, unsigned lcore, uint32_t job_id, uint16_t rank,
			    struct engine_lateness *out)
{
	struct dp *d = ctx;
	return engine_rank_lateness(&d->sh.lcores[lcore]->eng, job_id, rank, out);
}

static void dp_set_rx_missing(void *ctx, int on)
{
	struct dp *d = ctx;
	__atomic_store_n(&d->sh.rx_missing, (uint8_t)(on != 0), __ATOMIC_RELAXED);
}

static int dp_port_stats(void *ctx, unsigned idx, struct box_port_stats *out)
{
	struct dp *d = ctx;
	struct rte_eth_stats s;
	struct rte_eth_link link;
	uint16_t pid = d->lay->ports[idx].port;
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

static int setup_lcores(struct dp *d, const struct sum_kernels *sum, char *err, size_t errlen)
{
	unsigned id, n = 0;

	RTE_LCORE_FOREACH_WORKER(id) {
		if (n == BOX_MAX_LCORES || n == ENGINE_MAX_LCORES) {
			DP_LOG(WARNING, "only %u data lcores are used; lcore %u and later stay idle",
			       n, id);
			break;
		}
		int socket = (int)rte_lcore_to_socket_id(id);
		struct lcore_ctx *lc = lcore_ctx_create(n, id, socket, &d->sh, sum);
		if (!lc)
			return errmsg(err, errlen, -ENOMEM, "cannot allocate lcore %u context: %s",
				      id, rte_strerror(rte_errno));
		d->sh.lcores[n] = lc;
		d->lay->lcores[n] = (struct box_lcore_info){ .eal_id = id, .index = n, .socket = socket,
							     .cpu = lcore_cpu(id) };
		n++;
	}
	if (n == 0)
		return errmsg(err, errlen, -EINVAL,
			      "no data lcore: give the EAL at least two lcores"
			      " (e.g. -l 0-1); the main lcore serves control,"
			      " the others poll ports");
	d->sh.nlcores = d->lay->nlcores = n;
	return 0;
}

/*
 * Where the port's NIC sits (hwloc) and whether the data lcores run there:
 * every data lcore transmits on every port, so each should be local to it.
 * A remote lcore is a warning naming the cores to use instead.
 */
static void place_port(const struct dp *d, uint16_t pid, struct box_port_info *info)
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
		DP_LOG(WARNING, "port %u: %s; NUMA placement not checked", pid, err);
		info->numa_node = -1;
		snprintf(info->local_cpus, sizeof(info->local_cpus), "?");
		return;
	}
	info->numa_node = pl.node;
	snprintf(info->local_cpus, sizeof(info->local_cpus), "%s", pl.cpus);
	for (unsigned l = 0; l < d->lay->nlcores; l++) {
		const struct box_lcore_info *lc = &d->lay->lcores[l];
		if (lc->cpu >= 0 && !numa_cpu_in(pl.cpus, (unsigned)lc->cpu))
			DP_LOG(WARNING, "data lcore %u runs on CPU %d, which is not"
			       " local to port %u (%s, NUMA node %d): every packet crosses the"
			       " interconnect; give the EAL cores from %s (e.g. -l with those CPUs)",
				lc->eal_id, lc->cpu, pid, info->name, pl.node, pl.cpus);
	}
}

/*
 * How many contributions each lcore may keep in their rx mbufs (held, not
 * copied): a quarter of what every port's pool has beyond what its PMD may
 * keep in its rings and what the lcores' caches take, shared by the
 * lcores, so rx always finds mbufs. A pool that cannot even cover the
 * rings and caches could run dry for good (on net_af_xdp, mbufs waiting in
 * an idle lcore's completion ring are freed only by its next transmit):
 * -ENOMEM, naming the --mbufs to give.
 */
static int hold_budget(struct dp *d, char *err, size_t errlen)
{
	const struct dp_params *c = &d->p;
	uint32_t caches = d->sh.nlcores * (PORT_MBUF_CACHE * 3 / 2);
	int64_t spare = INT64_MAX;

	for (unsigned i = 0; i < c->nports; i++) {
		const struct box_port_info *info = &d->lay->ports[i];
		int64_t s = (int64_t)c->mbufs - info->pmd_mbufs - caches;
		if (s <= 0)
			return errmsg(err, errlen, -ENOMEM,
				      "port %u (%s): its PMD may keep %u mbufs in its rings and"
				      " the %u data lcores' caches %u: --mbufs %u leaves none"
				      " to receive into; use --mbufs %u or more",
				      info->port, info->name, info->pmd_mbufs, d->sh.nlcores,
				      caches, c->mbufs, info->pmd_mbufs + caches + 4096);
		if (s < spare)
			spare = s;
	}
	int64_t hold_max = spare / (4 * d->sh.nlcores);
	for (unsigned l = 0; l < d->sh.nlcores; l++) {
		d->sh.lcores[l]->hold_max = hold_max;
		d->lay->lcores[l].hold_max = (uint32_t)hold_max;
	}
	for (unsigned i = 0; i < c->nports; i++) {
		d->lay->ports[i].hold = hold_max > 0;
		d->sh.ports[d->lay->ports[i].port].hold = hold_max > 0;
	}
	return 0;
}

static int setup_ports(struct dp *d, char *err, size_t errlen)
{
	const struct dp_params *c = &d->p;
	uint16_t pid;

	/* the EAL only warns when a --vdev's PMD refuses its arguments
	 * (-ENODEV: exit 1, restarted: an interface may yet come) */
	if (rte_eth_dev_count_avail() == 0 && rte_devargs_type_count(RTE_DEVTYPE_VIRTUAL) > 0)
		return errmsg(err, errlen, -ENODEV,
			      "no DPDK port: the --vdev device did not come up (its PMD"
			      " says why above: an interface that does not exist, a queue count"
			      " above the interface's channels, ...)");
	if (rte_eth_dev_count_avail() == 0)
		return errmsg(err, errlen, -ENODEV,
			      "no DPDK port: bind a NIC to a DPDK driver or pass"
			      " --vdev=net_af_packet0,iface=IFNAME (see docs/operations.md)");
	RTE_ETH_FOREACH_DEV(pid) {
		unsigned i;
		for (i = 0; i < c->nports && c->ip[i].port != pid; i++)
			;
		char name[RTE_ETH_NAME_MAX_LEN] = "";
		rte_eth_dev_get_name_by_port(pid, name);
		if (i == c->nports)
			return errmsg(err, errlen, -EINVAL,
				      "port %u (%s) has no address: add --ip %u:ADDR/PREFIX",
				      pid, name, pid);
		if (pid >= BOX_MAX_PORTS)
			return errmsg(err, errlen, -EINVAL, "port id %u too large (at most %u ports)",
				      pid, BOX_MAX_PORTS);
	}
	for (unsigned i = 0; i < c->nports; i++) {
		pid = c->ip[i].port;
		if (!rte_eth_dev_is_valid_port(pid))
			return errmsg(err, errlen, -EINVAL,
				      "--ip names port %u, but the EAL found %u port(s)",
				      pid, rte_eth_dev_count_avail());
		struct box_port_info *info = &d->lay->ports[i];
		struct dp_port *dp = &d->sh.ports[pid];
		struct port_setup ps = {
			.port_id = pid, .nlcores = d->sh.nlcores, .nmbufs = c->mbufs, .mtu = (uint16_t)c->mtu,
			.udp_base = c->udp_base, .fanout = c->fanout, .socket = rte_eth_dev_socket_id(pid) < 0 ?
				(int)rte_socket_id() : rte_eth_dev_socket_id(pid),
		};
		int rc = port_start(&ps, info, &dp->pool, &dp->hdr_pool, err, errlen);
		if (rc)
			return rc;
		d->ports_started[pid] = true;
		place_port(d, pid, info);
		if (i == 0)
			d->mem_socket = ps.socket;
		info->ip = c->ip[i].ip;
		info->prefix = c->ip[i].prefix;
		dp->port_id = pid;
		dp->shared_min = c->fanout == BOX_FANOUT_SHARED ? 0 : FANOUT_SHARED_MIN_BYTES;
		dp->mtu = info->mtu;
		dp->ip = info->ip;
		memcpy(dp->mac, info->mac, 6);
		if (d->lay->mtu == 0 || info->mtu < d->lay->mtu)
			d->lay->mtu = info->mtu;
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
			d->lay->eps[d->lay->neps++] = (struct box_endpoint){
				.ip = info->ip, .udp_port = (uint16_t)(c->udp_base + l),
				.port = pid, .lcore = (uint16_t)l,
			};
	}
	d->lay->nports = d->sh.nports = c->nports;
	return hold_budget(d, err, errlen);
}

int dp_open(const struct dp_params *p, struct dp **out, struct dp_layout *layout,
	    struct box_dp *ops, char *err, size_t errlen)
{
	char warn[256];
	const struct sum_kernels *sum = sum_pick(getenv("PBOX_KERNEL"), warn, sizeof(warn));
	struct dp *d = calloc(1, sizeof(*d));
	int rc;

	if (warn[0])
		DP_LOG(WARNING, "%s", warn);
	*out = NULL;
	if (!d)
		return errmsg(err, errlen, -ENOMEM, "out of memory for the data plane");
	d->p = *p;
	d->lay = layout;
	d->sh.quit = p->quit;
	d->sh.udp_base = p->udp_base;
	d->sh.idle_sleep_us = p->idle_sleep_us;
	d->sh.udp_csum = p->udp_checksum;
	layout->kernel = sum->name;
	rc = setup_lcores(d, sum, err, errlen);
	if (rc == 0)
		rc = setup_ports(d, err, errlen);
	if (rc != 0) {
		dp_close(d);
		return rc;
	}
	*ops = (struct box_dp){
		.ctx = d, .post = dp_post, .applied = dp_applied,
		.mem_alloc = dp_mem_alloc, .mem_free = dp_mem_free, .mem_zero = dp_mem_zero,
		.lcore_stats = dp_lcore_stats, .engine_stats = dp_engine_stats,
		.port_stats = dp_port_stats, .job_progress = dp_job_progress,
		.rank_lateness = dp_rank_lateness, .set_rx_missing = dp_set_rx_missing,
	};
	/* telemetry is a window on the counters: without it the box still runs */
	char terr[256];
	if (dp_telemetry_open(layout->telemetry, sizeof(layout->telemetry), terr,
			      sizeof(terr)) == 0)
		ops->tel_publish = dp_telemetry_publish;
	else
		DP_LOG(NOTICE, "telemetry: %s; /pbox/stats, /pbox/jobs and /pbox/info are not served",
		       terr);
	*out = d;
	return 0;
}

void dp_launch(struct dp *d)
{
	for (unsigned l = 0; l < d->sh.nlcores; l++)
		rte_eal_remote_launch(lcore_main, d->sh.lcores[l], d->sh.lcores[l]->eal_id);
	d->launched = true;
}

void dp_wait(struct dp *d)
{
	if (d && d->launched)
		rte_eal_mp_wait_lcore();
	if (d)
		d->launched = false;
}

void dp_close(struct dp *d)
{
	if (!d)
		return;
	dp_wait(d);
	dp_telemetry_close();
	for (uint16_t p = 0; p < BOX_MAX_PORTS; p++)
		if (d->ports_started[p])
			port_stop(p);
	for (unsigned l = 0; l < d->sh.nlcores; l++)
		lcore_ctx_free(d->sh.lcores[l]);
	free(d);
}
