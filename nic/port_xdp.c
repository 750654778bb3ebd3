/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_xdp.c - net_af_xdp's busy polling as pboxd reports it (see port.h).
 *
 * DPDK 22.11's net_af_xdp turns on the kernel's preferred busy polling
 * for its socket when its busy_budget= is above 0 (SO_PREFER_BUSY_POLL,
 * SO_BUSY_POLL 20 us, SO_BUSY_POLL_BUDGET; kernel 5.11 or later): an empty
 * rx burst then runs the interface's NAPI poll in pboxd's lcore
 * (recvfrom) instead of waiting for the softirq. pboxd gives the vdev
 * --xdp-busy-budget unless the --vdev names busy_budget itself
 * (dataplane/dp_eal.c). The kernel leaves the interface's polling to the
 * application only while its interrupts are deferred: napi_defer_hard_irqs
 * and gro_flush_timeout in /sys/class/net/IFACE, which the operator sets
 * (docs/operations.md); pboxd reads them to report them.
 */
#include "nic/port.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_ethdev.h>

#include "nic/devargs.h"

/* net_af_xdp's busy_budget when its devargs give none (DPDK 22.11). */
#define AF_XDP_DEFAULT_BUSY_BUDGET 64

/* A number from /sys/class/net/iface/attr; -1 if it cannot be read. */
static int64_t sysfs_net(const char *iface, const char *attr)
{
	char path[128], line[32];
	FILE *f;
	int64_t v = -1;

	snprintf(path, sizeof(path), "/sys/class/net/%s/%s", iface, attr);
	if (!(f = fopen(path, "r")))
		return -1;
	if (fgets(line, sizeof(line), f))
		v = strtoll(line, NULL, 10);
	fclose(f);
	return v;
}

void port_xdp_info(const struct rte_eth_dev_info *di, struct box_port_info *info)
{
	const struct rte_devargs *da = di->device ? rte_dev_devargs(di->device) : NULL;
	const char *args = da && da->args ? da->args : "";
	char spec[512], v[16];

	info->busy_budget = -1;
	info->napi_defer_hard_irqs = info->gro_flush_timeout_ns = -1;
	if (!di->driver_name || strcmp(di->driver_name, "net_af_xdp") != 0)
		return;
	/* devargs_get reads the arguments after a name: give it one */
	snprintf(spec, sizeof(spec), "net_af_xdp,%s", args);
	info->busy_budget = devargs_get(spec, "busy_budget", v, sizeof(v)) == 1 ?
			    atoi(v) : AF_XDP_DEFAULT_BUSY_BUDGET;
	if (devargs_get(spec, "iface", info->iface, sizeof(info->iface)) != 1)
		return;
	info->napi_defer_hard_irqs = sysfs_net(info->iface, "napi_defer_hard_irqs");
	info->gro_flush_timeout_ns = sysfs_net(info->iface, "gro_flush_timeout");
}
