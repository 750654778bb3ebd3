/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_numa.c - nic/numa.c: PCI address checks, CPU lists, and the
 * lookups on this machine's real topology (hwloc).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "nic/numa.h"

/* hwloc's PCI plugin (dlopen'ed, libpciaccess) keeps its device-name
 * database after hwloc_topology_destroy; LeakSanitizer reports it from an
 * unloaded module, so no suppression pattern can name it. numa.c itself
 * destroys every topology it loads. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "detect_leaks=0";
}

static void cpu_lists(void **state)
{
	(void)state;
	assert_true(numa_cpu_in("0-1", 0));
	assert_true(numa_cpu_in("0-1", 1));
	assert_false(numa_cpu_in("0-1", 2));
	assert_true(numa_cpu_in("0-3,8,16-31", 8));
	assert_true(numa_cpu_in("0-3,8,16-31", 31));
	assert_false(numa_cpu_in("0-3,8,16-31", 9));
	assert_false(numa_cpu_in("", 0));
	assert_false(numa_cpu_in("x", 0));
}

static void bad_addresses(void **state)
{
	struct numa_place pl;
	char err[128];
	(void)state;
	assert_int_equal(numa_pci_place("eth0", &pl, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a PCI address"));
	assert_int_equal(numa_pci_place(NULL, &pl, err, sizeof(err)), -EINVAL);
	assert_int_equal(numa_pci_place("0000:00:00.0; rm", &pl, err, sizeof(err)), -EINVAL);
}

static void machine(void **state)
{
	struct numa_place pl;
	char err[128];
	(void)state;
	assert_int_equal(numa_machine_place(&pl, err, sizeof(err)), 0);
	assert_int_equal(pl.node, -1);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	for (long c = 0; c < n; c++)
		assert_true(numa_cpu_in(pl.cpus, (unsigned)c));
}

/* A machine whose CPUs are numbered apart (every other one here, as
 * with SMT siblings offline or a BIOS that interleaves the sockets): its
 * list, "0,2,4,...,126", is 200 bytes, and it is kept whole (a 128-byte
 * list cut it before: CPUs 88-126 were lost). Never cut:
 * a cut list loses CPUs (dp.c would warn that a local lcore is remote)
 * or makes a cut number another CPU. hwloc builds it from HWLOC_SYNTHETIC. */
static void machine_with_a_long_cpu_list(void **state)
{
	struct numa_place pl;
	char err[128], desc[600];
	int at = snprintf(desc, sizeof(desc), "pu:64(indexes=");
	(void)state;
	for (unsigned c = 0; c < 64; c++)
		at += snprintf(desc + at, sizeof(desc) - (size_t)at, "%s%u", c ? "," : "", 2 * c);
	snprintf(desc + at, sizeof(desc) - (size_t)at, ")");
	setenv("HWLOC_SYNTHETIC", desc, 1);
	int rc = numa_machine_place(&pl, err, sizeof(err));
	unsetenv("HWLOC_SYNTHETIC");
	assert_int_equal(rc, 0);
	for (unsigned c = 0; c < 140; c++)
		assert_int_equal(numa_cpu_in(pl.cpus, c), c < 128 && c % 2 == 0);
}

/* A list longer than pl.cpus (1024 interleaved CPUs: about 4.6 KB) is
 * refused with -ENOSPC naming its length, never cut. */
static void machine_with_a_list_too_long_is_refused(void **state)
{
	struct numa_place pl;
	char err[128];
	size_t cap = 16384;
	char *desc = malloc(cap);
	int at;
	(void)state;
	assert_non_null(desc);
	at = snprintf(desc, cap, "pu:1024(indexes=");
	for (unsigned c = 0; c < 1024; c++)
		at += snprintf(desc + at, cap - (size_t)at, "%s%u", c ? "," : "", 2 * c);
	snprintf(desc + at, cap - (size_t)at, ")");
	setenv("HWLOC_SYNTHETIC", desc, 1);
	int rc = numa_machine_place(&pl, err, sizeof(err));
	unsetenv("HWLOC_SYNTHETIC");
	free(desc);
	assert_int_equal(rc, -ENOSPC);
	assert_non_null(strstr(err, "CPU list takes"));
	assert_string_equal(pl.cpus, "?");
}

/* A PCI device of this machine (the host bridge 0000:00:00.0 exists on
 * every PC) is found; an absent one is -ENODEV with a message. */
static void pci_devices(void **state)
{
	struct numa_place pl;
	char err[128];
	(void)state;
	int rc = numa_pci_place("0000:ff:1f.7", &pl, err, sizeof(err));
	assert_int_equal(rc, -ENODEV);
	assert_non_null(strstr(err, "0000:ff:1f.7"));
	if (access("/sys/bus/pci/devices/0000:00:00.0", F_OK) != 0) {
		skip();
		return;
	}
	rc = numa_pci_place("0000:00:00.0", &pl, err, sizeof(err));
	if (rc == -ENODEV)      /* hwloc keeps only "important" devices */
		return;
	assert_int_equal(rc, 0);
	assert_true(numa_cpu_in(pl.cpus, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cpu_lists),
		cmocka_unit_test(bad_addresses),
		cmocka_unit_test(machine),
		cmocka_unit_test(machine_with_a_long_cpu_list),
		cmocka_unit_test(machine_with_a_list_too_long_is_refused),
		cmocka_unit_test(pci_devices),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
