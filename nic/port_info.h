/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_info.h - what a started data port is, in plain C (no DPDK types), so
 * the floors above (the dataplane's glue, the control plane's reports) can
 * describe ports without including DPDK.
 */
#ifndef PBOX_PORT_INFO_H
#define PBOX_PORT_INFO_H

#include <stdint.h>

#define BOX_MAX_PORTS  16

/* How results reach the ranks (dataplane/lcore_fanout.h). */
enum { BOX_FANOUT_AUTO = 0, BOX_FANOUT_SHARED, BOX_FANOUT_COPY };

struct box_port_info {
	uint16_t port;
	char name[64];
	uint8_t mac[6];
	uint32_t ip;
	uint8_t prefix;
	uint32_t mtu;
	uint16_t rx_queues;
	const char *steering;     /* "rte_flow", "rss" or "ring" */
	const char *fanout;       /* "shared" (one payload copy) or "copy" (per rank) */
	const char *rx_checksum;  /* who verifies received checksums: "nic",
				   * "software", or "ipv4 nic, udp software" */
	int hold;                 /* contributions stay in rx mbufs (else copied) */
	uint32_t pmd_mbufs;       /* mbufs of its pool the PMD may keep in its rings */
	/* net_af_xdp only (else -1): the NAPI budget of the kernel's preferred
	 * busy polling (0 = off), and its interface's interrupt deferral as
	 * /sys/class/net/IFACE shows it (-1 = unknown) */
	int busy_budget;
	char iface[32];
	int64_t napi_defer_hard_irqs, gro_flush_timeout_ns;
	int numa_node;            /* the NIC's NUMA node (hwloc), -1 = unknown/any */
	/* CPUs local to it ("0-15"); all for vdevs. As long as numa.h's list:
	 * an interleaved numbering ("0,2,4,...") of hundreds of CPUs fits */
	char local_cpus[2048];
};

#endif
