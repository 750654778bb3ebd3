/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_devargs.c - nic/devargs.c: which driver a --vdev names, reading a
 * key, and adding pboxd's default for a key the operator did not give
 * (busy_budget on net_af_xdp).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "nic/devargs.h"

static void is_driver__by_name_prefix(void **state)
{
	(void)state;
	assert_true(devargs_is_driver("net_af_xdp0,iface=eth1", "net_af_xdp"));
	assert_true(devargs_is_driver("net_af_xdp", "net_af_xdp"));
	assert_true(devargs_is_driver("net_af_xdp_a,iface=eth1", "net_af_xdp"));
	assert_false(devargs_is_driver("net_af_packet0,iface=net_af_xdp", "net_af_xdp"));
	assert_false(devargs_is_driver("net_af,x", "net_af_xdp"));
	assert_false(devargs_is_driver("", "net_af_xdp"));
}

static void get__whole_keys_only(void **state)
{
	char v[16];

	(void)state;
	assert_int_equal(devargs_get("net_af_xdp0,iface=eth1,busy_budget=32", "busy_budget", v, sizeof(v)), 1);
	assert_string_equal(v, "32");
	assert_int_equal(devargs_get("net_af_xdp0,iface=eth1", "iface", v, sizeof(v)), 1);
	assert_string_equal(v, "eth1");
	assert_int_equal(devargs_get("net_af_xdp0,iface=eth1,xbusy_budget=1", "busy_budget", v, sizeof(v)), 0);
	assert_int_equal(devargs_get("net_af_xdp0,iface=eth1,busy_budget_x=1", "busy_budget", v, sizeof(v)), 0);
	/* the device name is not an argument */
	assert_int_equal(devargs_get("busy_budget=1", "busy_budget", v, sizeof(v)), 0);
	assert_int_equal(devargs_get("net_af_xdp0,busy_budget=", "busy_budget", v, sizeof(v)), 1);
	assert_string_equal(v, "");
	assert_int_equal(devargs_get("net_af_xdp0,iface=a_very_long_interface", "iface", v, 4), -ENOSPC);
}

static void add_default__only_where_absent(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(devargs_add_default("net_af_xdp0,iface=eth1", "busy_budget", "64",
					     out, sizeof(out)), 1);
	assert_string_equal(out, "net_af_xdp0,iface=eth1,busy_budget=64");
	assert_int_equal(devargs_add_default("net_af_xdp0,busy_budget=0,iface=eth1", "busy_budget", "64",
					     out, sizeof(out)), 0);
	assert_string_equal(out, "net_af_xdp0,busy_budget=0,iface=eth1");
	assert_int_equal(devargs_add_default("net_af_xdp0,iface=eth1", "busy_budget", "64",
					     out, 10), -ENOSPC);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(is_driver__by_name_prefix),
		cmocka_unit_test(get__whole_keys_only),
		cmocka_unit_test(add_default__only_where_absent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
