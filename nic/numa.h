/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * numa.h - where a NIC sits in the machine (hwloc): its NUMA node and the
 * CPUs local to it, so pboxd can check that the lcores polling a port run
 * on that port's node and say which cores to give the EAL when they do
 * not. No DPDK types: the unit tests use it directly.
 */
#ifndef PBOX_NUMA_H
#define PBOX_NUMA_H

#include <stddef.h>

struct numa_place {
	int node;             /* NUMA node of the device, -1 = unknown/any */
	/* CPUs local to it as a list ("0-15,32-47"); all CPUs if node -1.
	 * 2048 bytes hold an interleaved numbering ("0,2,4,...") of about 400
	 * CPUs. Never cut: a cut list drops CPUs or names a cut number as
	 * another, so a longer one is refused (-ENOSPC). */
	char cpus[2048];
};

/*
 * Look up the PCI device "DDDD:BB:DD.F" (or "BB:DD.F") with hwloc. Fills
 * *pl and returns 0; -ENODEV if hwloc does not know the device (pl then
 * describes the whole machine, node -1); -EINVAL for a malformed address;
 * -ENOMEM/-EIO if the topology cannot be loaded; -ENOSPC if the CPU list
 * does not fit pl->cpus. err names the cause.
 */
int numa_pci_place(const char *pci, struct numa_place *pl, char *err, size_t errlen);

/* The whole machine: node -1 and every CPU. 0, or -ENOMEM/-EIO/-ENOSPC
 * (as numa_pci_place) with err. */
int numa_machine_place(struct numa_place *pl, char *err, size_t errlen);

/* Is cpu in the list "a-b,c,..." (as written by numa_*_place)? */
int numa_cpu_in(const char *cpus, unsigned cpu);

#endif
