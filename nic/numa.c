/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * numa.c - a PCI device's NUMA node and local CPUs from hwloc (see
 * numa.h). Loads the topology with PCI devices once per call: this runs at
 * start-up only.
 */
#include "nic/numa.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hwloc.h>

#include "common/errmsg.h"

static int load(hwloc_topology_t *t, int io, char *err, size_t errlen)
{
	if (hwloc_topology_init(t) != 0)
		return errmsg(err, errlen, -ENOMEM, "hwloc: cannot initialise a topology");
	if (io)
		hwloc_topology_set_io_types_filter(*t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	if (hwloc_topology_load(*t) != 0) {
		hwloc_topology_destroy(*t);
		return errmsg(err, errlen, -EIO, "hwloc: cannot load the machine topology");
	}
	return 0;
}

/* pl's node and CPU list; -ENOSPC (list "?") if the list does not fit:
 * a cut one would be read as other CPUs than the device's. */
static int fill(struct numa_place *pl, int node, hwloc_const_cpuset_t cpus,
		char *err, size_t errlen)
{
	int n = hwloc_bitmap_list_snprintf(pl->cpus, sizeof(pl->cpus), cpus);

	pl->node = node;
	if (n < 0)
		snprintf(pl->cpus, sizeof(pl->cpus), "?");
	if (n >= (int)sizeof(pl->cpus)) {
		snprintf(pl->cpus, sizeof(pl->cpus), "?");
		return errmsg(err, errlen, -ENOSPC,
			      "hwloc: the CPU list takes %d bytes, more than %zu",
			      n, sizeof(pl->cpus) - 1);
	}
	return 0;
}

int numa_machine_place(struct numa_place *pl, char *err, size_t errlen)
{
	hwloc_topology_t t;
	int rc = load(&t, 0, err, errlen);

	if (rc)
		return rc;
	rc = fill(pl, -1, hwloc_topology_get_topology_cpuset(t), err, errlen);
	hwloc_topology_destroy(t);
	return rc;
}

/* "DDDD:BB:DD.F" or "BB:DD.F", hex digits, nothing else. */
static int pci_ok(const char *s)
{
	unsigned d, b, v, f;
	char tail;

	if (!s || strlen(s) > 16)
		return 0;
	for (const char *p = s; *p; p++)
		if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.')
			return 0;
	return sscanf(s, "%x:%x:%x.%x%c", &d, &b, &v, &f, &tail) == 4 ||
	       sscanf(s, "%x:%x.%x%c", &b, &v, &f, &tail) == 3;
}

int numa_pci_place(const char *pci, struct numa_place *pl, char *err, size_t errlen)
{
	hwloc_topology_t t;
	int rc;

	if (!pci_ok(pci))
		return errmsg(err, errlen, -EINVAL, "'%s' is not a PCI address (DDDD:BB:DD.F)",
			      pci ? pci : "(null)");
	if ((rc = load(&t, 1, err, errlen)) != 0)
		return rc;
	hwloc_obj_t dev = hwloc_get_pcidev_by_busidstring(t, pci);
	if (!dev) {
		fill(pl, -1, hwloc_topology_get_topology_cpuset(t), err, errlen);
		hwloc_topology_destroy(t);
		return errmsg(err, errlen, -ENODEV, "hwloc does not know PCI device %s", pci);
	}
	hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, dev);
	int node = -1;
	if (anc && anc->nodeset && hwloc_bitmap_weight(anc->nodeset) == 1)
		node = hwloc_bitmap_first(anc->nodeset);
	rc = fill(pl, node, anc && anc->cpuset ? anc->cpuset : hwloc_topology_get_topology_cpuset(t),
		  err, errlen);
	hwloc_topology_destroy(t);
	return rc;
}

int numa_cpu_in(const char *cpus, unsigned cpu)
{
	const char *p = cpus;

	while (p && *p) {
		char *end;
		unsigned long a = strtoul(p, &end, 10), b = a;
		if (end == p)
			return 0;
		if (*end == '-') {
			p = end + 1;
			b = strtoul(p, &end, 10);
			if (end == p)
				return 0;
		}
		if (cpu >= a && cpu <= b)
			return 1;
		p = *end == ',' ? end + 1 : NULL;
	}
	return 0;
}
